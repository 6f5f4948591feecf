test a
sysfs transparent_hugepage/defrag sometimes
