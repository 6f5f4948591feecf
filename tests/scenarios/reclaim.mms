# Hand-written scenarios: reclaim as MADV_PAGEOUT, MADV_COLD and MADV_FREE
# drive it (mm/madvise.c madvise_cold_or_pageout_pte_range and
# madvise_free_pte_range, mm/vmscan.c shrink_folio_list, mm/rmap.c
# try_to_unmap_one, mm/swapfile.c's cluster allocation), without swap, with a
# swap file and with a block device. Statistics are read after the
# MADV_PAGEOUT that drains the host's per-CPU LRU batches.

# ---- MADV_PAGEOUT without swap: large folios are split, pages stay ----

test pageout-pmd-thp-without-swap
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x11
expect P A mapped pmd
P madvise A 2M pageout
expect P A mapped pte
expect P A order 0
expect P A+2044K order 0
expect P A swapped no
expect vmstat thp_swpout_fallback 1
expect vmstat thp_split_pmd 1
expect vmstat thp_split_page 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout_fallback 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 1
expect P rss anon 2M
P read A 2M 0x11

test pageout-mthp-without-swap
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x12
expect P A order 4
P madvise A 64K pageout
expect P A order 0
expect P A+60K order 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 1
expect vmstat thp_swpout_fallback 0
P read A 64K 0x12

test pageout-small-without-swap
proc P
P mmap A 16K rw private
P madvise A 16K nohugepage
P write A 16K 0x13
P madvise A 16K pageout
expect P A mapped pte
expect P A+12K swapped no
expect P rss anon 16K
P read A 16K 0x13

# ---- the swap kind: a swap file never takes a large folio whole ----

test pageout-pmd-thp-swap-file
swap 64M file
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x21
P madvise A 2M pageout
expect P A swapped yes
expect P A+2044K swapped yes
expect vmstat thp_swpout 0
expect vmstat thp_swpout_fallback 1
expect vmstat pswpout 512
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout 0
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout_fallback 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 1
expect P rss anon 0
P read A 2M 0x21
expect P rss anon 2M

test pageout-mthp-swap-file
swap 64M file
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x22
P madvise A 64K pageout
expect P A swapped yes
expect P A+60K swapped yes
expect vmstat pswpout 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 1
P read A 64K 0x22

test pageout-pmd-thp-swap-blkdev
swap 64M blkdev
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x23
P madvise A 2M pageout
expect P A swapped yes
expect P A+2044K swapped yes
expect vmstat thp_swpout 1
expect vmstat thp_swpout_fallback 0
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 0
P read A 2M 0x23

test pageout-mthp-swap-blkdev
swap 64M blkdev
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x24
P madvise A 64K pageout
expect P A swapped yes
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 0
P read A 64K 0x24

test pageout-mthp-swap-zram
# zram frees the folio at swap-out; the touch reads it back (whole).
swap 64M zram
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x25
P madvise A 64K pageout
expect P A swapped yes
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1
expect P rss anon 0
P read A 64K 0x25
expect vmstat pswpin 16

# ---- MADV_COLD: split what the range covers in part, deactivate ----

test cold-splits-partly-covered-mthp
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x31
expect P A order 4
P madvise A 32K cold
expect P A mapped pte
expect P A order 0
expect P A+32K order 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 1
P read A 64K 0x31

test cold-whole-mthp-keeps-it
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x32
P madvise A 64K cold
expect P A order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 0
P read A 64K 0x32

test cold-half-pmd-thp-splits
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x33
P madvise A 1M cold
expect P A order 0
expect P A+1M order 0
expect vmstat thp_split_page 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 1
P madvise A+1M 1M cold
P read A 2M 0x33

test cold-whole-pmd-thp-keeps-it
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x34
P madvise A 2M cold
expect P A mapped pmd
expect vmstat thp_split_pmd 0
P read A 2M 0x34

test cold-leaves-shared-mthp-alone
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x35
P fork C
P madvise A 32K cold
expect P A order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 0
C read A 64K 0x35
C exit

# ---- MADV_FREE: lazy-free folios, discarded by reclaim while clean ----

test free-then-pageout-discards
proc P
P mmap A 16K rw private
P madvise A 16K nohugepage
P write A 16K 0x41
P madvise A 16K free
expect P A mapped pte
expect P rss anon 16K
P madvise A 16K pageout
expect P A mapped none
expect P A+12K mapped none
expect P rss anon 0
expect vmstat pglazyfree 4
expect vmstat pglazyfreed 4
expect vmstat pswpout 0
P read A 16K 0

test free-write-after-free-keeps-data
proc P
P mmap A 16K rw private
P madvise A 16K nohugepage
P write A 16K 0x42
P madvise A 16K free
P write A+4K 4K 0x66
P madvise A 16K pageout
expect P A mapped none
expect P A+4K mapped pte
expect P A+8K mapped none
expect vmstat pglazyfreed 3
P read A+4K 4K 0x66
P read A 4K 0

test free-then-pageout-with-swap-needs-no-slot
swap 64M
proc P
P mmap A 8K rw private
P madvise A 8K nohugepage
P write A 8K 0x43
P madvise A 8K free
P madvise A 8K pageout
expect P A mapped none
expect P A+4K swapped no
expect vmstat pswpout 0
expect vmstat pglazyfreed 2
P read A 8K 0

test free-gup-reference-keeps-folio
proc P
P mmap A 4K rw private
P madvise A 4K nohugepage
P write A 4K 0x44
P madvise A 4K free
P gup H A 1 get,fast
expect H 1
P madvise A 4K pageout
expect P A mapped pte
unpin H
P madvise A 4K pageout
expect P A mapped none
P read A 4K 0

test free-whole-pmd-thp-discarded-without-split
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x45
P madvise A 2M free
expect P A mapped pmd
P madvise A 2M pageout
expect P A mapped none
expect P rss anon 0
expect vmstat thp_split_pmd 0
expect vmstat thp_split_page 0
expect vmstat pglazyfree 512
expect vmstat pglazyfreed 512
P read A 4K 0

test free-redirtied-pmd-thp-is-kept
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x46
P madvise A 2M free
P write A 4K 0x47
P madvise A 2M pageout
expect P rss anon 2M
expect vmstat pglazyfreed 0
P read A 4K 0x47
P read A+4K 2044K 0x46

test free-half-pmd-thp-splits
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x48
P madvise A 1M free
expect P A order 0
expect vmstat thp_split_page 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 1
P madvise A 2M pageout
expect P A mapped none
expect P A+1M mapped pte
expect vmstat pglazyfreed 256
P read A+1M 1M 0x48
P read A 4K 0

test free-whole-mthp-discarded
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x49
P madvise A 64K free
expect P A order 4
P madvise A 64K pageout
expect P A mapped none
expect P A+60K mapped none
expect vmstat pglazyfreed 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 0
P read A 64K 0

test free-leaves-shared-mthp-alone
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x4a
P fork C
P madvise A 32K free
expect P A order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 0
C read A 64K 0x4a
P read A 64K 0x4a
C exit

test free-drops-swap-entries
swap 64M
proc P
P mmap A 8K rw private
P madvise A 8K nohugepage
P write A 8K 0x4b
P madvise A 8K pageout
expect P A swapped yes
P madvise A 8K free
expect P A swapped no
expect P A mapped none
P read A 8K 0

test free-needs-private-anonymous-memory
proc P
P mmap S 8K rw shared
P write S 8K 1
expect-error EINVAL P madvise S 8K free
file F 8K
P mmap M 8K rw private file=F
expect-error EINVAL P madvise M 8K free

# ---- MADV_PAGEOUT of an ext4 file's page cache ----
# madvise_cold_or_pageout_pte_range isolates file folios too (root may
# write the file: can_do_file_pageout, so no pageout_anon_only_filter);
# shrink_folio_list unmaps them (try_to_unmap over i_mmap: the PTEs are
# left none), drops a clean one (__remove_mapping) and activates a dirty
# one, which only kswapd would write back. The next access to a dropped
# page misses the page cache: filemap_fault counts pgmajfault, reads the
# mmap read-around window (do_sync_mmap_readahead), drops mmap_lock for it
# and retries (VM_FAULT_RETRY); the retried read fault maps the window by
# fault-around. The files stay within one read-around window of 32 pages
# (this host's disk reads ahead 8 MiB: the window differs beyond that). A
# file the host's runner wrote may sit in a large folio; these cases map
# and page out whole files, so the folio size does not show.

test pageout-ext4-clean-shared-dropped
file F 64K fs=ext4
proc P
P mmap A 64K rw shared file=F
P read A 64K 0
expect P rss file 64K
P madvise A 64K pageout
expect P A mapped none
expect P A+60K mapped none
expect P rss file 0
expect vmstat pswpout 0
P read A 4K 0
expect vmstat pgmajfault 1
expect P majflt 1
expect P A+32K mapped pte
expect P A+60K mapped pte
expect P rss file 64K
P read A 64K 0
expect vmstat pgmajfault 1

# A write fault retried after the read maps only its own page: write
# faults do no fault-around. It is still the one major fault.
test pageout-ext4-clean-then-write-fault
file F 16K fs=ext4
proc P
P mmap A 16K rw shared file=F
P read A 16K 0
P madvise A 16K pageout
expect P A mapped none
P write A+4K 4K 0x33
expect vmstat pgmajfault 1
expect P majflt 1
expect P A+4K mapped pte
expect P A mapped none
P read A 4K 0
expect vmstat pgmajfault 1
expect P A+12K mapped pte
P read A+4K 4K 0x33

# A dirty folio is unmapped but kept (activated): the next access is a
# minor fault and sees the data.
test pageout-ext4-dirty-shared-kept
file F 16K fs=ext4
proc P
P mmap A 16K rw shared file=F
P write A 16K 0x31
P madvise A 16K pageout
expect P A mapped none
expect P A+12K mapped none
expect P rss file 0
P read A 16K 0x31
expect vmstat pgmajfault 0
expect P majflt 0
expect P rss file 16K

# A private read-only mapping maps the page cache as a shared one does.
test pageout-ext4-clean-private-dropped
file F 16K fs=ext4
proc P
P mmap A 16K r private file=F
P read A 16K 0
P madvise A 16K pageout
expect P A mapped none
expect P rss file 0
P read A+8K 4K 0
expect vmstat pgmajfault 1
expect P A mapped pte
expect P A+12K mapped pte

# A folio another process maps is left alone (folio_mapcount !=
# folio_nr_pages): nothing is unmapped, nothing read again; once the other
# process unmaps it, it is dropped.
test pageout-ext4-mapped-by-two-kept
file F 16K fs=ext4
proc P
proc Q
P mmap A 16K rw shared file=F
Q mmap B 16K rw shared file=F
P read A 16K 0
Q read B 16K 0
P madvise A 16K pageout
expect P A mapped pte
expect P A+12K mapped pte
expect Q B mapped pte
P read A 16K 0
expect vmstat pgmajfault 0
Q munmap B 16K
P madvise A 16K pageout
expect P A mapped none
P read A 16K 0
expect vmstat pgmajfault 1

# MADV_COLD deactivates the file's folios and unmaps nothing; a pageout
# after it drops them.
test cold-ext4-keeps-mapping
file F 16K fs=ext4
proc P
P mmap A 16K rw shared file=F
P read A 16K 0
P madvise A 16K cold
expect P A mapped pte
expect P rss file 16K
P read A 16K 0
expect vmstat pgmajfault 0
P madvise A 16K pageout
expect P A mapped none
expect P rss file 0

# ---- the swap device's zeromap (v6.12; v6.18 mm/page_io.c) ----
# swap_writeout() writes nothing for a zero-filled folio: it marks its
# slots in the device's zeromap and counts swpout_zero per page (no
# pswpout, and no thp_swpout or per-size swpout: those count I/O). With no
# write in flight, shrink_folio_list frees the folio in the same pass, on
# an asynchronous device too, and swap-in fills the folio with zeros,
# counting swpin_zero instead of pswpin.

test pageout-zero-filled-not-written-blkdev
swap 16M blkdev
proc P
P mmap A 16K rw private
P madvise A 16K nohugepage
P write A 16K 0
P madvise A 16K pageout
expect P A swapped yes
expect P A+12K swapped yes
expect P rss anon 0
expect vmstat pswpout 0
expect vmstat swpout_zero 4
P read A 16K 0
expect vmstat pswpin 0
expect vmstat swpin_zero 4

test pageout-zero-filled-mthp-blkdev
swap 16M blkdev
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0
expect P A order 4
P madvise A 64K pageout
expect P A swapped yes
expect P rss anon 0
expect vmstat pswpout 0
expect vmstat swpout_zero 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 0
P read A 64K 0
expect vmstat pswpin 0
expect vmstat swpin_zero 16

test pageout-zero-filled-pmd-thp-blkdev
swap 64M blkdev
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0
expect P A mapped pmd
P madvise A 2M pageout
expect P A swapped yes
expect P A+2044K swapped yes
expect vmstat thp_swpout 0
expect vmstat thp_swpout_fallback 0
expect vmstat pswpout 0
expect vmstat swpout_zero 512
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout 0
P read A 4K 0
expect vmstat pswpin 0

# Only the zero-filled pages skip the write; the others stay in the swap
# cache after their write completes, so reading them back reads nothing.
test pageout-zero-and-data-pages-blkdev
swap 16M blkdev
proc P
P mmap A 16K rw private
P madvise A 16K nohugepage
P write A 8K 0
P write A+8K 8K 0x5c
P madvise A 16K pageout
expect vmstat pswpout 2
expect vmstat swpout_zero 2
writeback
P read A 8K 0
P read A+8K 8K 0x5c
expect vmstat swpin_zero 2
expect vmstat pswpin 0

# From zram a zero-filled mTHP comes back as one folio of its order
# (alloc_swap_folio: the range is all in the zeromap, so can_swapin_thp
# allows it), read as zeros: swpin_zero, and neither pswpin nor the size's
# swpin, which count the device's reads.
test pageout-zero-filled-mthp-zram-swapin-whole
swap 16M zram
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0
P madvise A 64K pageout
expect P A swapped yes
expect vmstat pswpout 0
expect vmstat swpout_zero 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 0
P read A 4K 0
expect P A order 4
expect vmstat swpin_zero 16
expect vmstat pswpin 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpin 0
P read A 64K 0

# ---- System V shared memory: SHM_LOCK (ipc/shm.c shmctl_do_lock, mm/shmem.c shmem_lock) ----

# shmctl(SHM_LOCK) makes the segment's mapping unevictable
# (mapping_set_unevictable). MADV_PAGEOUT isolates the folios and
# shrink_folio_list() puts them back at its first test, folio_evictable(),
# onto the unevictable LRU (lru_add: unevictable_pgs_culled): nothing is
# unmapped or written, with swap to spare.
test shm-lock-pageout-culls-to-the-unevictable-lru
swap 16M zram
shmget S 16K
proc P
P shmat A S
shmctl S lock
P write A 16K 0x61
P madvise A 16K pageout
expect P A mapped pte
expect P A+12K mapped pte
expect P rss shmem 16K
expect vmstat pswpout 0
expect vmstat unevictable_pgs_culled 4
# Already on the unevictable LRU: the walk puts them straight back, not culled again.
P madvise A 16K pageout
expect vmstat unevictable_pgs_culled 4
expect vmstat pswpout 0
P read A 16K 0x61
expect P majflt 0

# SHM_UNLOCK clears the flag and rescues the folios from the unevictable
# LRU (shmem_unlock_mapping -> check_move_unevictable_folios); the next
# MADV_PAGEOUT swaps them out (shmem_writeout: the PTEs go, the file keeps
# the swap entries), and the next access is a shmem fault that reads each
# page back from zram (a major fault).
test shm-unlock-rescues-then-pageout-swaps-out
swap 16M zram
shmget S 16K
proc P
P shmat A S
P write A 16K 0x62
shmctl S lock
P madvise A 16K pageout
expect P A mapped pte
expect vmstat unevictable_pgs_culled 4
expect vmstat pswpout 0
shmctl S unlock
expect vmstat unevictable_pgs_rescued 4
expect vmstat unevictable_pgs_scanned 4
P madvise A 16K pageout
expect P A mapped none
expect P A+12K mapped none
expect vmstat pswpout 4
P read A 16K 0x62
expect P majflt 4
expect P A mapped pte

# A removed segment still attached stays (SHM_DEST) and may even be
# attached again (Linux only); it is destroyed with its last detach, and
# its id is then unknown: EINVAL (shm_obtain_object_check).
test shm-rmid-destroys-at-the-last-detach
shmget S 16K
proc P
P shmat A S
P write A 16K 0x63
shmctl S rmid
P shmat B S
P read B 16K 0x63
shmctl S lock
P shmdt A
P read B 4K 0x63
P shmdt B
expect-error EINVAL P shmat C S
expect-error EINVAL shmctl S unlock
expect-error EINVAL shmctl S rmid

# fork copies the attach (shm_open: the child's VMA counts as one more);
# the removed segment lives on in the child after the parent detaches,
# and goes with the child's exit.
test shm-fork-keeps-a-removed-segment-attached
shmget S 16K
proc P
P shmat A S
P write A 16K 0x66
P fork C
shmctl S rmid
P shmdt A
C read A 16K 0x66
C write A 4K 0x67
C exit
expect-error EINVAL P shmat B S

# shmdt takes the address shmat returned: an address inside the segment
# or another shared mapping is EINVAL. SHM_RDONLY attaches read-only for
# good: a store is SIGSEGV and mprotect to rw EACCES (no VM_MAYWRITE).
test shm-detach-and-read-only-attach
shmget S 16K
proc P
P shmat A S
P write A 16K 0x64
P mmap M 16K rw shared
expect-error EINVAL P shmdt A+4K
expect-error EINVAL P shmdt M
P shmat R S ro
P read R 16K 0x64
expect-error SIGSEGV P write R 4K 1
expect-error EACCES P mprotect R 16K rw
P shmdt A
P read R 4K 0x64
P shmdt R
expect-error EINVAL P shmdt R

# SHM_HUGETLB: the segment is a hugetlbfs file whose pages are reserved at
# shmget (hugetlb_file_setup); SHM_LOCK does nothing to it. A segment the
# pool cannot cover is ENOMEM.
test shm-hugetlb-reserves-at-shmget
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
shmget S 2M hugetlb
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 1
expect-error ENOMEM shmget T 4M hugetlb
shmctl S lock
proc P
P shmat A S
P write A 2M 0x65
expect P A mapped pmd
expect sysfs hugepages/hugepages-2048kB/resv_hugepages 0
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
P shmdt A
P shmat B S
P read B 2M 0x65
