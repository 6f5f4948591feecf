test a
sysfs transparent_hugepage/enabled sometimes
