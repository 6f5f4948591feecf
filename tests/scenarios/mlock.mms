# mlock, mlock2(MLOCK_ONFAULT), munlock, mlockall, munlockall (mm/mlock.c),
# MAP_POPULATE, MAP_LOCKED and MAP_NORESERVE (mm/mmap.c do_mmap),
# MREMAP_DONTUNMAP (mm/mremap.c) and MADV_DONTNEED_LOCKED (mm/madvise.c).
# `expect P locked SIZE` counts the bytes of the VM_LOCKED VMAs of the
# ranges the test mapped (smaps' `lo` flag on the host).

proc P

test mlock-populates-and-locks
P mmap A 16K rw private
P mlock A 16K
expect P rss anon 16K
expect P locked 16K
expect P A+12K mapped pte
P munlock A 16K
expect P locked 0
expect P rss anon 16K

test mlock-onfault-populates-nothing
P mmap A 16K rw private
P mlock A 16K onfault
expect P rss anon 0
expect P locked 16K
P write A 4K 1
expect P rss anon 4K
P munlock A 16K
expect P locked 0

test mlock-onfault-keeps-present-pages
P mmap A 8K rw private
P write A 4K 1
P mlock A 8K onfault
expect P rss anon 4K
expect P locked 8K
P read A 4K 1

test munlock-middle-splits-and-relock-merges
P mmap A 12K rw private
P mlock A 12K onfault
P munlock A+4K 4K
expect P locked 8K
P munlock A 12K
expect P locked 0
P mlock A 12K
expect P locked 12K

test mlock-unaligned-start-rounds-out
P mmap A 16K rw private
P mlock A+1 4K
expect P locked 8K
expect P rss anon 8K

test mlock-hole-at-start-is-enomem
P mmap A 12K rw private
P munlock A 4K
P munmap A 4K
expect-error ENOMEM P mlock A 12K
expect P locked 0

test mlock-hole-in-the-middle-keeps-what-it-locked
# apply_vma_lock_flags finds the hole as it walks: the VMA before it stays
# locked, and nothing is populated (the error returns before __mm_populate).
P mmap A 12K rw private
P munmap A+4K 4K
expect-error ENOMEM P mlock A 12K
expect P locked 4K
expect P rss anon 0

test mlock-prot-none
# __mm_populate without FOLL_FORCE refuses a PROT_NONE VMA (-EFAULT, which
# mlock reports as ENOMEM); the flag stays set.
P mmap A 8K none private
expect-error ENOMEM P mlock A 8K
expect P locked 8K
expect P rss anon 0

test mlock-read-only-private-maps-zero-pages
P mmap A 8K r private
P mlock A 8K
expect P locked 8K
expect P rss anon 0
P read A 8K 0

test mlockall-bad-flags
expect-error EINVAL P mlockall onfault

test mlockall-current
P mmap A 8K rw private
P mmap B 8K rw private
P mlockall current
expect P locked 16K
expect P rss anon 16K
P mmap C 8K rw private
expect P locked 16K
P munlockall
expect P locked 0

test mlockall-current-onfault
P mmap A 8K rw private
P mlockall current,onfault
expect P locked 8K
expect P rss anon 0
P munlockall
expect P locked 0

test mlockall-future-locks-new-mappings
P mlockall future
P mmap A 8K rw private
expect P locked 8K
expect P rss anon 8K
P munlockall
P mmap B 8K rw private
expect P locked 0
expect P rss anon 8K

test mlockall-future-onfault
P mlockall future,onfault
P mmap A 8K rw private
expect P locked 8K
expect P rss anon 0
P munlockall

test mlock-not-inherited-by-fork
P mmap A 8K rw private
P mlock A 8K
P fork C
expect P locked 8K
expect C locked 0
C read A 8K 0

test mmap-locked
P mmap A 16K rw private locked
expect P locked 16K
expect P rss anon 16K

test mmap-populate
P mmap A 16K rw private populate
expect P locked 0
expect P rss anon 16K
P mmap B 8K r private populate
P read B 8K 0

test mmap-populate-shared
P mmap A 16K rw shared populate
expect P rss shmem 16K

test madvise-dontneed-locked
P mmap A 8K rw private
P mlock A 8K
P write A 8K 1
expect-error EINVAL P madvise A 8K dontneed
P read A 8K 1
P madvise A 8K dontneed_locked
expect P rss anon 0
expect P locked 8K
P read A 8K 0

test madvise-dontneed-locked-unlocked-range
P mmap A 8K rw private
P write A 8K 1
P madvise A 8K dontneed_locked
expect P rss anon 0

test mremap-dontunmap-leaves-the-old-range-empty
P mmap A 16K rw private
P write A 16K 7
P mremap A 16K 16K B dontunmap
P read B 16K 7
expect P rss anon 16K
P read A 16K 0
P write A 16K 1
expect P rss anon 32K

test mremap-dontunmap-part-of-a-vma
P mmap A 16K rw private
P write A 16K 7
P mremap A+4K 8K 8K B dontunmap
P read B 8K 7
P read A 4K 7
P read A+12K 4K 7
expect P A+4K mapped none
expect P A+8K mapped none

test mremap-dontunmap-unlocks-the-old-range
P mmap A 16K rw private
P mlock A 16K
P mremap A 16K 16K B dontunmap
expect P locked 16K
expect P A mapped none
expect P B mapped pte

test mremap-dontunmap-part-unlocks-the-whole-vma
# dontunmap_complete clears VM_LOCKED on the old VMA as it is: the part
# that did not move is unlocked too.
P mmap A 16K rw private
P mlock A 16K
P mremap A+4K 4K 4K B dontunmap
expect P locked 4K
expect P B mapped pte
P read A 4K 0

test mremap-dontunmap-size-must-not-change
P mmap A 16K rw private
expect-error EINVAL P mremap A 16K 32K B dontunmap

test mremap-dontunmap-shared
P mmap A 8K rw shared
P write A 8K 3
P mremap A 8K 8K B dontunmap
P read B 8K 3
# The old range still maps the same shmem pages: a read faults them back.
P read A 8K 3

test mremap-dontunmap-to
P mmap Z 32K none private
P mmap A 8K rw private
P write A 8K 5
P mremap A 8K 8K B dontunmap to=Z+8K
P read Z+8K 8K 5
P read A 8K 0

test mlock-hugetlb-populates-without-locking
sysfs hugepages/hugepages-2048kB/nr_hugepages 1
P mmap A 2M rw private hugetlb=2M
P mlock A 2M
expect P locked 0
expect P A mapped pmd
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0

test mmap-locked-hugetlb-is-not-locked
sysfs hugepages/hugepages-2048kB/nr_hugepages 1
P mmap A 2M rw private hugetlb=2M locked
expect P locked 0
expect P A mapped pmd

test mmap-noreserve-hugetlb-reserves-nothing
sysfs hugepages/hugepages-2048kB/nr_hugepages 1
P mmap A 2M rw shared hugetlb=2M noreserve
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
P mmap B 2M rw shared hugetlb=2M
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
# B's reservation holds the only page: A's fault finds none free.
expect-error SIGBUS P write A 4K 1
P write B 4K 1

test pageout-refuses-locked
swap 16M
P mmap A 8K rw private
P write A 8K 0x42
P mlock A 8K
# can_madv_lru_vma: MADV_COLD and MADV_PAGEOUT refuse a locked VMA.
expect-error EINVAL P madvise A 8K pageout
expect-error EINVAL P madvise A 8K cold
expect P A swapped no
expect P rss anon 8K
P munlock A 8K
P madvise A 8K pageout
expect P A swapped yes
