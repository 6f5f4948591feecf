# ftruncate, fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) and
# MADV_REMOVE on shmem (memfd, shared anonymous memory) and ext4-class files
# (issue 30). Both unmap the range from every process that maps the file
# (unmap_mapping_range over i_mmap) before the page cache lets the folios
# go. A truncation also removes a private mapping's CoW copies past the new
# end (even_cows: an access there must be SIGBUS, shmem_setattr and
# truncate_pagecache); a punched hole keeps them (shmem_fallocate and
# truncate_pagecache_range pass even_cows 0). Partial pages at the edges
# keep their other bytes and read zeros inside the range
# (shmem_undo_range, truncate_inode_partial_folio). MADV_REMOVE punches the
# hole behind a shared mapping (madvise_remove: -EINVAL for a locked VMA or
# one without a file, -EACCES unless VM_SHARED and VM_MAYWRITE). Checked
# against v6.18's mm/shmem.c, mm/truncate.c, mm/memory.c, mm/madvise.c and
# on this machine's kernel (mmlab diff --a model --b host).

test truncate-shmem-then-access-is-sigbus
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 1
expect P rss shmem 16K
truncate F 8K
expect P A+8K mapped none
expect P rss shmem 8K
P read A 8K 1
expect-error SIGBUS P read A+8K 4K
expect-error SIGBUS P write A+12K 4K 2
truncate F 16K
P read A+8K 8K 0

test truncate-ext4-then-access-is-sigbus
file F 16K fs=ext4
proc P
P mmap A 16K rw shared file=F
P write A 16K 3
truncate F 4K
expect P A+4K mapped none
P read A 4K 3
expect-error SIGBUS P read A+4K 4K

# Every process that maps the file loses the pages past the new end.
test truncate-unmaps-every-process
file F 16K
proc P
proc Q
P mmap A 16K rw shared file=F
Q mmap B 16K r shared file=F
P write A 16K 4
Q read B 16K 4
truncate F 0
expect P A mapped none
expect Q B mapped none
expect P rss shmem 0
expect Q rss shmem 0
expect-error SIGBUS Q read B 4K

# A size inside a page: the rest of that page reads zeros and stays
# accessible (the page still holds EOF); the next page is SIGBUS.
test truncate-inside-a-page-zeroes-its-tail
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 5
truncate F 6K
P read A 6K 5
P read A+6K 2K 0
expect-error SIGBUS P read A+8K 4K

# Private copies (CoW) past the new end go with the file's pages.
test truncate-removes-private-cow-copies
file F 16K
proc P
P mmap A 16K rw private file=F
P write A 16K 6
expect P rss anon 16K
truncate F 4K
expect P A+4K mapped none
expect P rss anon 4K
P read A 4K 6
expect-error SIGBUS P read A+4K 4K

test truncate-ext4-removes-private-cow-copies
file F 16K fs=ext4
proc P
P mmap A 16K rw private file=F
P write A 16K 7
truncate F 8K
expect P rss anon 8K
expect-error SIGBUS P read A+8K 4K
P read A 8K 7

# A punched hole keeps a private mapping's CoW copies: they are the
# process's own data. The pages only read (the file's) go, and read zeros.
test punch-hole-keeps-private-cow-copies
file F 16K
proc P
P mmap S 16K rw shared file=F
P write S 16K 8
P mmap A 16K rw private file=F
P read A 16K 8
P write A 4K 9
punch-hole F 0 16K
expect P A mapped pte
expect P A+4K mapped none
expect P S mapped none
expect P rss anon 4K
P read A 4K 9
P read A+4K 12K 0
P read S 16K 0

test punch-hole-ext4-keeps-private-cow-copies
file F 16K fs=ext4
proc P
P mmap S 16K rw shared file=F
P write S 16K 10
P mmap A 16K rw private file=F
P write A 8K 11
punch-hole F 0 16K
expect P rss anon 8K
P read A 8K 11
P read A+8K 8K 0
P read S 16K 0

# The file keeps its size: the hole reads zeros and the pages after it keep
# their bytes; the frames of the hole go back.
test punch-hole-middle-of-a-file
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 12
punch-hole F 4K 8K
expect P A mapped pte
expect P A+4K mapped none
expect P A+8K mapped none
expect P A+12K mapped pte
expect P rss shmem 8K
P read A 4K 12
P read A+4K 8K 0
P read A+12K 4K 12

# A hole that covers no whole page unmaps nothing and zeroes the bytes it
# covers in the page cache, which the mapping sees.
test punch-hole-partial-pages-are-zeroed
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 13
punch-hole F 1K 6K
expect P A mapped pte
expect P A+4K mapped pte
P read A 1K 13
P read A+1K 6K 0
P read A+7K 9K 13

test punch-hole-past-eof-and-errors
file F 8K
proc P
P mmap A 8K rw shared file=F
P write A 8K 14
punch-hole F 8K 8K
P read A 8K 14
expect-error EINVAL punch-hole F 0 0

# MADV_REMOVE on shared anonymous memory: the hole reads zeros afterwards.
test madvise-remove-shared-anon
proc P
P mmap A 16K rw shared
P write A 16K 15
P madvise A+4K 8K remove
expect P A+4K mapped none
expect P rss shmem 8K
P read A 4K 15
P read A+4K 8K 0
P read A+12K 4K 15

# Another process that maps the same file loses the pages too.
test madvise-remove-shmem-file-seen-by-others
file F 16K
proc P
proc Q
P mmap A 16K rw shared file=F
Q mmap B 16K rw shared file=F
P write A 16K 16
Q read B 16K 16
Q madvise B 16K remove
expect P A mapped none
P read A 16K 0

test madvise-remove-ext4
file F 16K fs=ext4
proc P
P mmap A 16K rw shared file=F
P write A 16K 17
P madvise A 8K remove
P read A 8K 0
P read A+8K 8K 17

# vma_is_shared_maywrite() asks VM_MAYWRITE, not VM_WRITE: a read-only
# shared mapping of a file opened for writing may remove.
test madvise-remove-read-only-shared-mapping
file F 8K
proc P
P mmap S 8K rw shared file=F
P write S 8K 18
P mmap A 8K r shared file=F
P madvise A 8K remove
P read S 8K 0

test madvise-remove-errors
file F 8K
proc P
P mmap A 8K rw private
expect-error EINVAL P madvise A 8K remove
P mmap B 8K rw private file=F
expect-error EACCES P madvise B 8K remove
P mmap C 8K rw shared file=F locked
expect-error EINVAL P madvise C 8K remove
P mmap D 8K rw shared
P munmap D+4K 4K
expect-error ENOMEM P madvise D 8K remove

# ---- hugetlbfs (fs/hugetlbfs/inode.c) ----
#
# hugetlbfs_setattr -> hugetlb_vmtruncate and hugetlbfs_punch_hole: every
# mapping of the range is unmapped (hugetlb_vmdelete_list over i_mmap),
# private CoW copies included, in a hole as well as past a new end; the
# page cache lets the pages go back to the pool (remove_inode_hugepages);
# the file's region map gives back the reservations of the indices it drops
# (hugetlb_unreserve_pages: every one past a new end, only the freed pages'
# in a hole). A private owner's CoW copy that is unmapped gets its
# reservation back in its own map (__unmap_hugepage_range), which its
# munmap gives back. Checked against v6.18's fs/hugetlbfs/inode.c and
# mm/hugetlb.c and on this machine's kernel.

# A truncation past a mapped page: unmapped, freed, SIGBUS after; growing
# the file again makes a hole that a fault fills with a new page.
test truncate-hugetlbfs-shared
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 4M hugetlb=2M
proc P
P mmap A 4M rw shared file=H
P write A 4M 1
expect P status HugetlbPages 4M
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
truncate H 2M
expect P A mapped pmd
expect P A+2M mapped none
expect P status HugetlbPages 2M
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
P read A 2M 1
expect-error SIGBUS P read A+2M 4K
expect-error SIGBUS P write A+2M 4K 2
check
truncate H 4M
P read A+2M 2M 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
check

# ftruncate to a size that is not a whole number of huge pages: EINVAL
# (hugetlbfs_setattr), the file unchanged.
test truncate-hugetlbfs-unaligned-is-einval
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 4M hugetlb=2M
proc P
P mmap A 4M rw shared file=H
P write A 4M 3
expect-error EINVAL truncate H 1M
expect-error EINVAL truncate H 2101248
P read A 4M 3
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0

# Reservations past the new end come back: a shared mapping of an empty
# file reserved two pages (and made the file 4M); one was faulted in.
test truncate-hugetlbfs-returns-the-reservations
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
file H 0 hugetlb=2M
proc P
P mmap A 4M rw shared file=H
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 2
P write A 2M 4
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
expect sysfs hugepages/hugepages-2048kB/free_hugepages 2
truncate H 0
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 3
expect P A mapped none
expect-error SIGBUS P read A 4K
expect-error SIGBUS P read A+2M 4K
check
P munmap A 4M
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0

# A private mapping's CoW copies past the new end go too. The owner's
# reserve map gets the reservation of the copy it lost back (HugePages_Rsvd
# goes up by one) and keeps it, unusable past EOF, until munmap.
test truncate-hugetlbfs-private-cow-copies
sysfs hugepages/hugepages-2048kB/nr_hugepages 4
file H 4M hugetlb=2M
proc P
P mmap A 4M rw private file=H
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 2
P write A 4M 5
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
truncate H 2M
expect P A+2M mapped none
expect sysfs hugepages/hugepages-2048kB/free_hugepages 2
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
P read A 2M 5
expect-error SIGBUS P read A+2M 4K
check
P munmap A 4M
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 3

# Every process that maps the file loses the pages past the new end.
test truncate-hugetlbfs-unmaps-every-process
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 4M hugetlb=2M
proc P
proc Q
P mmap A 4M rw shared file=H
Q mmap B 4M r shared file=H
P write A 4M 6
Q read B 4M 6
truncate H 0
expect P A mapped none
expect Q B mapped none
expect Q status HugetlbPages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 2
expect-error SIGBUS Q read B+2M 4K

# A hole of whole huge pages: unmapped from every process and freed; the
# next fault takes a new page (an unreserved one: the index left the region
# map), zeroed, shared again by both.
test punch-hole-hugetlbfs-refault
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
file H 4M hugetlb=2M
proc P
proc Q
P mmap A 4M rw shared file=H
Q mmap B 4M rw shared file=H
P write A 4M 7
Q read B 4M 7
P remember A
punch-hole H 0 2M
expect P A mapped none
expect Q B mapped none
expect P A+2M mapped pmd
expect sysfs hugepages/hugepages-2048kB/free_hugepages 2
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
# The pool's free list is last in, first out: the freed page comes back.
P read A 2M 0
expect P A same-frame
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
Q read B 2M 0
expect P A same Q B
P read A+2M 2M 7
check

# The refault needs a page nobody has reserved: with the only free one
# promised to another mapping, it is SIGBUS.
test punch-hole-hugetlbfs-refault-without-a-page-is-sigbus
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 4M hugetlb=2M
proc P
P mmap A 4M rw shared file=H
P write A 4M 8
punch-hole H 0 2M
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
proc Q
Q mmap B 2M rw private hugetlb=2M
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
expect-error SIGBUS P read A 4K
P read A+2M 2M 8
Q write B 2M 9
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
check

# A hole gives back only what it frees: an index reserved by a mapping but
# never faulted in keeps its reservation (region map untouched there).
test punch-hole-hugetlbfs-keeps-unused-reservations
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
file H 0 hugetlb=2M
proc P
P mmap A 4M rw shared file=H
P write A 2M 10
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
punch-hole H 0 4M
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
expect sysfs hugepages/hugepages-2048kB/free_hugepages 3
P read A+2M 2M 0
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
P read A 2M 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
check

# Unlike shmem's, a hugetlbfs hole takes a private mapping's CoW copy too
# (hugetlb_vmdelete_list zaps private VMAs whole): the data written there is
# gone, and the next access allocates a new private page with the
# reservation the unmap gave back.
test punch-hole-hugetlbfs-private-cow-copy
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 2M hugetlb=2M
proc P
P mmap A 2M rw private file=H
P write A 4K 11
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
punch-hole H 0 2M
expect P A mapped none
expect sysfs hugepages/hugepages-2048kB/free_hugepages 2
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
check
P read A 4K 0
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
check

# Partial huge pages at the edges of a hole are zeroed inside it and stay
# mapped (hugetlbfs_zero_partial_page); no page is freed.
test punch-hole-hugetlbfs-partial-pages-zeroed
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 4M hugetlb=2M
proc P
P mmap A 4M rw shared file=H
P write A 4M 12
punch-hole H 1M 2M
expect P A mapped pmd
expect P A+2M mapped pmd
P read A 1M 12
P read A+1M 2M 0
P read A+3M 1M 12
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
check

# A private hugetlb mapping is refused before any hole is punched
# (EACCES, as for any private mapping).
test madvise-remove-hugetlb-private-eacces
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
expect-error EACCES P madvise A 2M remove

# MADV_REMOVE of a shared hugetlb mapping punches the hole
# (madvise_remove -> vfs_fallocate -> hugetlbfs_punch_hole): the page goes
# back to the pool and the next access faults a new one.
test madvise-remove-hugetlb-shared
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 4M rw shared hugetlb=2M
P write A 4M 1
P remember A
P madvise A 2M remove
expect P A mapped none
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
P read A+2M 2M 1
P read A 2M 0
expect P A same-frame
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0
check
