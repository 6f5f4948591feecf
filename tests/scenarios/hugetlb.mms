# hugetlb reservations and pools (mm/hugetlb.c, fs/hugetlbfs/inode.c).

test hugetlb-private-read-of-cached-page-keeps-the-reservation
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
# The file's page is in its page cache (the file is allocated whole).
file F 2M hugetlb=2M
proc P
P mmap A 2M rw private file=F
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
# hugetlb_no_page(): a read maps the file's folio and keeps the private
# reservation for the copy-on-write to come.
P read A 2M 0
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
check
P write A 4K 7
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
check
P read A+4K 4K 0

test hugetlb-private-read-of-a-hole-uses-the-reservation
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
# Not in any page cache: a private folio is allocated and takes the reservation.
P read A 2M 0
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
check

test hugetlb-surplus-from-nr-overcommit-hugepages
# An empty pool with nr_overcommit_hugepages 2: the mapping's reservation
# gathers a surplus page (gather_surplus_pages()), which the fault uses.
sysfs hugepages/hugepages-2048kB/nr_overcommit_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 2M 1
expect sysfs hugepages/hugepages-2048kB/surplus_hugepages 1
P read A 2M 1

# Lowering a pool below its pages in use is legal: they become surplus
# (set_max_huge_pages, adjust_pool_surplus), nr_hugepages reads more than
# was written, and the surplus pages are freed as they are unmapped.
test hugetlb-lower-pool-below-in-use
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
proc P
P mmap A 4M rw private hugetlb=2M
P write A 4M 1
sysfs hugepages/hugepages-2048kB/nr_hugepages 1
expect sysfs hugepages/hugepages-2048kB/nr_hugepages 2
expect sysfs hugepages/hugepages-2048kB/surplus_hugepages 1
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
P read A 4M 1
P munmap A 4M
expect sysfs hugepages/hugepages-2048kB/nr_hugepages 1
expect sysfs hugepages/hugepages-2048kB/surplus_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
