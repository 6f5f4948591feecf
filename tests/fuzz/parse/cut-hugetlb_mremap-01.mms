test hugetlb-free-cold-pageout-are-einval
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 2M 2
expect-error EINVAL P madvise A 2M free
expect-error EINVAL P madvise A 2M cold
expect-error EINVAL P madvise A 2M pageout
P read A 2M 2
