test huge-zero-then-write
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P read A 2M 0
expect P A mapped pmd
expect P A zero yes
P write A 4K 1
expect P A zero no
expect P A order 9
expect vmstat thp_fault_alloc 1
