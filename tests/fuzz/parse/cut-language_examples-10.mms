test lang-hugetlb
sysfs hugepages/hugepages-2048kB/nr_hugepages 1
proc P
P mmap A 2M rw private hugetlb=2M
P write A 2M 1
expect P A mapped pmd
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
