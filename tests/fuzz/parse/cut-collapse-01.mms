test collapse-madvise-range-without-whole-pmd
# Inside a VMA that holds PMDs: a range ending on a PMD boundary holds none
# and returns 0; one that ends below it makes the kernel's (hend - hstart)
# wrap, which thps cannot equal: SCAN_FAIL, EINVAL.
proc P
P mmap A 4M rw private align=2M
P write A 4M 0x24
P madvise A+1M 1M collapse
expect-error EINVAL P madvise A+1M 512K collapse
expect P A mapped pte
expect vmstat thp_collapse_alloc 0
P madvise A+1M 3M collapse
expect P A mapped pte
expect P A+2M mapped pmd
P read A 4M 0x24
