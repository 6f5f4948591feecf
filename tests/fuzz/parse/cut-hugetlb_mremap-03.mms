test hugetlb-mremap-shrinks-in-place
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw private hugetlb=2M
P write A 4M 4
P mremap A 4M 2052K B
expect P A+2M mapped pmd
P mremap A 4M 2M B
expect P B same P A
expect P A mapped pmd
P read A 2M 4
expect-error SIGSEGV P read A+2M 4K
