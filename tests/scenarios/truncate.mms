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

# hugetlbfs truncation is not modelled (its reservations would come back):
# the model and the host runner both end the test here as SKIP.
test truncate-hugetlbfs-not-modelled
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
file H 4M hugetlb=2M
truncate H 2M

# A private hugetlb mapping is refused before any hole is punched
# (EACCES, as for any private mapping); a shared one would punch the
# hugetlbfs file, which the model does not follow: SKIP.
test madvise-remove-hugetlb-private-eacces
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
expect-error EACCES P madvise A 2M remove

test madvise-remove-hugetlb-shared-not-modelled
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw shared hugetlb=2M
P write A 2M 1
P madvise A 2M remove
