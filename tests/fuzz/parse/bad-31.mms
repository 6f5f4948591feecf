test a
sysfs transparent_hugepage/hugepages-64kB/enabled on
