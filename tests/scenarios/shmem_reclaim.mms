# MADV_PAGEOUT of shared anonymous memory and of shmem files (issue 30,
# item 5). Reclaim unmaps every PTE of the folio (try_to_unmap over the
# file's i_mmap): the PTE is left empty (pte_none), not a swap entry, and
# shmem_writeout() moves the folio from the page cache to the swap cache,
# the file keeping the swap entry where the folio was. The next access on
# any mapping is a shmem fault that finds the entry and reads the page back
# (shmem_swapin_folio(): a major fault when the folio had left the swap
# cache). madvise_cold_or_pageout_pte_range() leaves alone a folio mapped by
# more than one process (folio_mapcount() != folio_nr_pages()). Checked
# against v6.18's mm/shmem.c, mm/vmscan.c, mm/madvise.c and on this
# machine's kernel (mmlab diff --a model --b host).

# zram writes before pageout() returns: the folio is freed in the same
# pass, and reading it back is a major fault per page (pgmajfault).
test shmem-pageout-read-back-zram
swap 16M zram
proc P
P mmap A 16K rw shared
P write A 16K 0x5a
expect P rss shmem 16K
P madvise A 16K pageout
expect P A mapped none
expect P A swapped no
expect P A+12K mapped none
expect P rss shmem 0
expect vmstat pswpout 4
P read A 16K 0x5a
expect vmstat pgmajfault 4
expect vmstat pswpin 4
expect P A mapped pte
expect P rss shmem 16K

# A block device writes asynchronously: the folio waits in the swap cache
# with its write in flight, and a touch before the next reclaim pass finds
# it there: a minor fault, no read.
test shmem-pageout-read-back-from-swap-cache
swap 16M blkdev
proc P
P mmap A 16K rw shared
P write A 16K 0x21
P madvise A 16K pageout
expect P A mapped none
expect P A swapped no
expect vmstat pswpout 4
P read A 16K 0x21
expect vmstat pswpin 0
expect vmstat pgmajfault 0
P write A 4K 0x22
P read A 4K 0x22

# A memfd: after the pageout a second process that maps the file reads
# what the first one wrote, from swap.
test shmem-file-pageout-other-process-reads
swap 16M zram
file F 16K
proc P
proc Q
P mmap A 16K rw shared file=F
P write A 16K 0x37
P madvise A 16K pageout
expect P A mapped none
expect vmstat pswpout 4
Q mmap B 16K r shared file=F
Q read B 16K 0x37
expect vmstat pgmajfault 4
expect P A mapped none
P read A 16K 0x37

# fork copies no PTEs of a shared mapping (a fault fills them again), so
# the child maps the pages only once it touches them; then each folio is
# mapped by two processes and MADV_PAGEOUT leaves it alone. Once the child
# is gone the parent can page it out.
test shmem-pageout-skips-folios-mapped-twice
swap 16M zram
proc P
P mmap A 16K rw shared
P write A 16K 0x44
P fork C
expect C A mapped none
C read A 16K 0x44
P madvise A 16K pageout
expect P A mapped pte
expect C A mapped pte
expect vmstat pswpout 0
C exit
P madvise A 16K pageout
expect P A mapped none
expect vmstat pswpout 4
P read A 16K 0x44

# Before the child touched them, the pages are mapped once: paged out, and
# the child reads them back from swap.
test shmem-pageout-after-fork-before-child-touches
swap 16M zram
proc P
P mmap A 16K rw shared
P write A 16K 0x45
P fork C
P madvise A 16K pageout
expect P A mapped none
expect vmstat pswpout 4
C read A 16K 0x45
P read A 16K 0x45
expect P A same C A

# A private mapping of a memfd: the pages only read map the file's folios,
# which go to swap as shmem and leave empty PTEs; the pages written are
# anonymous copies, which leave swap entries. (The file is written first:
# a zero-filled folio is only marked in the swap device's zeromap and not
# counted in pswpout, which the model does not follow.)
test shmem-pageout-private-file-mapping
swap 16M zram
file F 16K
proc P
P mmap S 16K rw shared file=F
P write S 16K 0x51
P munmap S 16K
P mmap A 16K rw private file=F
P read A 8K 0x51
P write A+8K 8K 0x52
P madvise A 16K pageout
expect P A mapped none
expect P A swapped no
expect P A+8K swapped yes
expect vmstat pswpout 4
P read A 8K 0x51
P read A+8K 8K 0x52

# The part of a range MADV_PAGEOUT does not cover stays mapped.
test shmem-pageout-part-of-a-range
swap 16M zram
proc P
P mmap A 32K rw shared
P write A 32K 0x61
P madvise A+8K 8K pageout
expect P A mapped pte
expect P A+8K mapped none
expect P A+12K mapped none
expect P A+16K mapped pte
expect P rss shmem 24K
expect vmstat pswpout 2
P read A 32K 0x61

# No swap device: shmem_writeout() finds no slot and redirties the folio,
# which stays in the page cache; the PTE was cleared before the write was
# tried, so the next access is a minor fault that maps it again.
test shmem-pageout-without-swap
proc P
P mmap A 8K rw shared
P write A 8K 0x71
P madvise A 8K pageout
expect P A mapped none
expect vmstat pswpout 0
P read A 8K 0x71
expect vmstat pgmajfault 0

# A locked VMA refuses MADV_PAGEOUT (can_madv_lru_vma).
test shmem-pageout-locked-einval
swap 16M zram
proc P
P mmap A 8K rw shared locked
expect-error EINVAL P madvise A 8K pageout
expect P A mapped pte

# Truncating a file frees its swapped-out pages' slots too
# (shmem_undo_range, shmem_free_swap); growing it back reads zeros.
test shmem-truncate-swapped-out-pages
swap 16M zram
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 0x13
P madvise A 16K pageout
truncate F 4K
P read A 4K 0x13
expect-error SIGBUS P read A+4K 4K
truncate F 16K
P read A+4K 12K 0
check

# A block device's write still in flight when the test ends: the folio
# waits in the swap cache, the file holding the entry; the end of the test
# (the file's last reference going) frees both.
test shmem-pageout-write-in-flight-at-the-end
swap 16M blkdev
proc P
P mmap A 16K rw shared
P write A 16K 0x23
P madvise A 16K pageout
expect P A mapped none

test shmem-pageout-writeback-then-exit
swap 16M blkdev
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 0x24
P madvise A 16K pageout
writeback
P exit
check

# Truncating pages whose write is in flight: their slots keep only the
# swap cache's hold until the write completes; the file reads zeros when
# it grows back.
test shmem-truncate-under-writeback
swap 16M blkdev
file F 16K
proc P
P mmap A 16K rw shared file=F
P write A 16K 0x25
P madvise A 16K pageout
truncate F 0
check
truncate F 16K
P read A 16K 0

# A tmpfs mounted noswap makes each of its files' mappings unevictable
# (__shmem_get_inode: mapping_set_unevictable). MADV_PAGEOUT still isolates
# the folios, but shrink_folio_list() puts an unevictable folio back before
# it unmaps anything (folio_evictable): the pages stay mapped and resident,
# with swap to spare; compare shmem-pageout-without-swap above, where the
# PTEs go.
test shmem-noswap-pageout-keeps-pages-mapped
swap 16M zram
file F 16K noswap
proc P
P mmap A 16K rw shared file=F
P write A 16K 0x44
P madvise A 16K pageout
expect P A mapped pte
expect P A+12K mapped pte
expect P rss shmem 16K
expect vmstat pswpout 0
P read A 16K 0x44
expect vmstat pgmajfault 0

# The mount option is per mount: a file of a noswap tmpfs stays, a memfd
# paged out in the same call goes to swap.
test shmem-noswap-beside-a-memfd
swap 16M zram
file F 16K noswap
file G 16K
proc P
P mmap A 16K rw shared file=F
P mmap B 16K rw shared file=G
P write A 16K 0x45
P write B 16K 0x46
P madvise A 16K pageout
P madvise B 16K pageout
expect P A mapped pte
expect P B mapped none
expect vmstat pswpout 4
P read A 16K 0x45
P read B 16K 0x46
expect vmstat pgmajfault 4

# MADV_WILLNEED of shmem reads the swap entries its file keeps for the range
# into the swap cache (madvise_willneed -> shmem_swapin_range) and maps
# nothing: the access after it finds the folios there, a minor fault.
test shmem-willneed-reads-swapped-pages-into-the-swap-cache
swap 16M zram
proc P
P mmap A 16K rw shared
P write A 16K 0x5b
P madvise A 16K pageout
expect vmstat pswpout 4
P madvise A 8K willneed
expect vmstat pswpin 2
expect P A mapped none
P read A 8K 0x5b
expect vmstat pgmajfault 0
P read A+8K 8K 0x5b
expect vmstat pgmajfault 2
expect vmstat pswpin 4

# A private mapping of a shmem file: MADV_WILLNEED reads the file's swap
# entries only (the file is the VMA's), not those of the CoW copies in the
# page table, so the copies come back by major faults.
test shmem-willneed-private-mapping-reads-the-file-only
swap 16M zram
file F 16K
proc P
P mmap A 16K rw private file=F
P write A 16K 0x5c
P madvise A 16K pageout
expect vmstat pswpout 4
P madvise A 16K willneed
expect vmstat pswpin 0
P read A 16K 0x5c
expect vmstat pgmajfault 4

# Large shmem folios (issue 30): shmem_writeout() in v6.18 swaps a large
# folio out whole when folio_alloc_swap() gives it contiguous slots (a
# block device; THP_SWAP is on) and splits it to order 0 otherwise (a swap
# file, whose clusters never take a large order, or a folio across i_size),
# the other pages joining reclaim's folio_list. Only add_to_swap() (anonymous
# memory) counts swpout_fallback; the shmem split counts as a split. The
# write counts thp_swpout for the PMD order and the size's swpout.

# A 64K folio on a block device goes whole; touched while its write waits
# in the swap cache, it comes back whole: one minor fault maps all 16 pages.
test shmem-pageout-mthp-whole-blkdev
swap 16M blkdev
sysfs transparent_hugepage/hugepages-64kB/shmem_enabled always
proc P
P mmap A 64K rw shared align=64K
P write A 64K 0x81
expect P A order 4
P madvise A 64K pageout
expect P A mapped none
expect P A+60K mapped none
expect P A swapped no
expect P rss shmem 0
expect vmstat pswpout 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 0
P read A 4K 0x81
expect P A order 4
expect P A+60K mapped pte
expect vmstat pswpin 0
expect vmstat pgmajfault 0
expect P rss shmem 64K
P read A 64K 0x81

# A swap file gives no large folio its slots: the folio is split and its
# 16 pages go one by one; they come back one by one from the swap cache.
test shmem-pageout-mthp-split-swap-file
swap 16M file
sysfs transparent_hugepage/hugepages-64kB/shmem_enabled always
proc P
P mmap A 64K rw shared align=64K
P write A 64K 0x82
expect P A order 4
P madvise A 64K pageout
expect P A mapped none
expect P A+60K mapped none
expect P rss shmem 0
expect vmstat pswpout 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 1
P read A 4K 0x82
expect P A order 0
expect P A+4K mapped none
expect vmstat pswpin 0
P read A 64K 0x82
expect P rss shmem 64K

# A PMD THP on a block device: the PMD goes (try_to_unmap with
# TTU_SPLIT_HUGE_PMD clears a file PMD), the folio is written whole
# (thp_swpout), and the touch while it is in the swap cache maps it by a
# PMD again (do_set_pmd under a none PMD).
test shmem-pageout-thp-whole-blkdev
swap 16M blkdev
sysfs transparent_hugepage/shmem_enabled always
proc P
P mmap A 2M rw shared align=2M
P write A 2M 0x83
expect P A mapped pmd
P madvise A 2M pageout
expect P A mapped none
expect P rss shmem 0
expect vmstat thp_swpout 1
expect vmstat thp_swpout_fallback 0
expect vmstat pswpout 512
P read A 4K 0x83
expect P A order 9
expect vmstat pswpin 0
P read A 2M 0x83
expect P rss shmem 2M

# zram: the folio is written whole and freed in the same pass; the fault
# reads the large swap entry back into one folio of its order
# (shmem_swapin_folio -> shmem_swap_alloc_folio: SWP_SYNCHRONOUS_IO, zswap
# never enabled, no slot of it in the swap cache), a major fault.
test shmem-pageout-mthp-zram
swap 16M zram
sysfs transparent_hugepage/hugepages-64kB/shmem_enabled always
proc P
P mmap A 64K rw shared align=64K
P write A 64K 0x85
P madvise A 64K pageout
expect P A mapped none
expect vmstat pswpout 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1
P read A 4K 0x85
expect vmstat pswpin 16
expect vmstat pgmajfault 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpin 1
expect P A order 4
expect P A+60K mapped pte
P read A 64K 0x85
