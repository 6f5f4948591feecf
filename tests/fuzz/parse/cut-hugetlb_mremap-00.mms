test hugetlb-dontneed-start-aligned-end-rounded-down
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw private hugetlb=2M
P write A 4M 1
expect-error EINVAL P madvise A+4K 2M dontneed
P madvise A 4K dontneed
expect P A mapped pmd
P read A 4K 1
P madvise A 2052K dontneed
expect P A mapped none
expect P A+2M mapped pmd
P read A+2M 2M 1
P read A 4K 0
