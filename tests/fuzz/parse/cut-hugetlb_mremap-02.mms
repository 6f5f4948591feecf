test hugetlb-mremap-argument-rules
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw private hugetlb=2M
P mmap T 8M none private align=2M
P write A 4M 3
expect-error EINVAL P mremap A 4M 6M B
expect-error EINVAL P mremap A 4M 4100K B
expect-error EINVAL P mremap A+4K 2M 2M B
expect-error EINVAL P mremap A 4M 4M B to=T+4K
P mremap A 4092K 4088K B
expect P B same P A
P read A 4M 3
