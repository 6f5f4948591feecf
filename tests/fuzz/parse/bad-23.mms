test a
sysfs transparent_hugepage/nope 1
