test a
sysfs transparent_hugepage/use_zero_page yes
