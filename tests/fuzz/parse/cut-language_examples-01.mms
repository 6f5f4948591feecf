test lang-mthp-fault
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 4K 1
expect P A order 4
expect P A+60K order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/anon_fault_alloc 1
