# Hand-written scenarios: madvise and mremap of hugetlb mappings
# (mm/madvise.c madvise_dontneed_free_valid_vma, can_madv_lru_vma;
# mm/mremap.c check_prep_vma/align_hugetlb, move_vma; mm/hugetlb.c
# move_hugetlb_page_tables). Each pool has one page more than the test
# reserves. No test moves part of a private mapping: the kernel leaks the
# reservations of the part left behind (see docs/NOTES.md).

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

test hugetlb-free-cold-pageout-are-einval
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 2M 2
expect-error EINVAL P madvise A 2M free
expect-error EINVAL P madvise A 2M cold
expect-error EINVAL P madvise A 2M pageout
P read A 2M 2

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

test hugetlb-mremap-moves-private-mapping
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw private hugetlb=2M
P mmap T 8M none private align=2M
P write A 2M 5
P mremap A 4M 4M B to=T
expect P B same P T
expect P B mapped pmd
P read B 2M 5
expect-error SIGSEGV P read A 4K
P write B+2M 2M 6
expect P B+2M mapped pmd
P read B+2M 2M 6

test hugetlb-mremap-shrinks-then-moves
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw private hugetlb=2M
P mmap T 8M none private align=2M
P write A 4M 7
P mremap A 4M 2M B to=T+2M
expect P B mapped pmd
P read B 2M 7
expect-error SIGSEGV P read A 4K
expect-error SIGSEGV P read A+2M 4K

test hugetlb-mremap-moves-shared-mapping
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw shared hugetlb=2M
P mmap T 8M none private align=2M
P write A 4M 8
P fork C
P mremap A 4M 4M B to=T
P read B 4M 8
C read A 4M 8
C write A 4K 9
P read B 4K 9
C exit
