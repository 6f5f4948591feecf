# Swap-in of large folios by device class. A block device and a swap file
# write asynchronously: shrink_folio_list() keeps a folio whose write is in
# flight (in the swap cache, unmapped), and a later reclaim pass frees it,
# which an idle machine never runs; touched again first, a large folio comes
# back whole from the swap cache (do_swap_page(), v6.11). zram
# (SWP_SYNCHRONOUS_IO) writes before pageout() returns and the folio is
# freed in the same pass; an entry with a swap count of 1 is read into a new
# folio without the swap cache, as large as alloc_swap_folio() allows: the
# size enabled, the swap offset aligned like the address, every entry of the
# range contiguous and out of the swap cache, no userfaultfd, not the PMD
# order, zswap never enabled.

test swapin-mthp-from-the-swap-cache-blkdev
swap 64M blkdev
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x31
P madvise A 64K pageout
expect P A swapped yes
expect P A+60K swapped yes
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1
writeback
# The written folio waits in the swap cache: the first touch maps it whole.
P read A 4K 0x31
expect P A order 4
expect P A+60K order 4
expect vmstat pswpin 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpin 0
P read A 64K 0x31

test swapin-from-the-swap-cache-swap-file
# A swap file takes the 64K folio split: its pages wait in the swap cache
# and come back one by one, never read.
swap 64M file
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x32
P madvise A 64K pageout
expect P A swapped yes
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 1
P read A 4K 0x32
expect P A order 0
expect P A+4K swapped yes
expect vmstat pswpin 0
P read A 64K 0x32

test swapin-mthp-zram
swap 64M zram
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x33
P madvise A 64K pageout
expect P A swapped yes
expect P rss anon 0
# One read fault reads the 64K back whole (alloc_swap_folio()).
P read A+8K 4K 0x33
expect P A order 4
expect P A+60K order 4
expect vmstat pswpin 16
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpin 1
expect P rss anon 64K
P read A 64K 0x33

test swapin-zram-order-0-when-the-size-is-off
swap 64M zram
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x34
P madvise A 64K pageout
sysfs transparent_hugepage/hugepages-64kB/enabled never
P read A 4K 0x34
expect P A order 0
expect P A+4K swapped yes
expect vmstat pswpin 1
P read A 64K 0x34

test swapin-zram-order-0-when-the-entry-is-shared
# After fork each entry has a swap count of 2: the swap cache path, order 0
# (the host reads ahead a few more pages into the swap cache; the model does not).
swap 64M zram
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x35
P madvise A 64K pageout
P fork Q
P read A 4K 0x35
expect P A order 0
expect P A+4K swapped yes
expect Q A swapped yes
P read A 64K 0x35
Q read A 64K 0x35

test swapin-zram-order-0-with-userfaultfd
swap 64M zram
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x36
P madvise A 64K pageout
P userfaultfd A 64K wp
P read A 4K 0x36
expect P A order 0
expect P A+4K swapped yes
P read A 64K 0x36

# ---- the deferred-split shrinker (shrink-slab) ----

test shrinker-splits-a-partially-mapped-mthp
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x41
P munmap A+32K 32K
expect sysfs transparent_hugepage/hugepages-64kB/stats/split_deferred 1
expect P A order 4
shrink-slab
expect P A order 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 1
expect P rss anon 32K
P read A 32K 0x41

test shrinker-splits-an-underused-thp
# thp_underused(): more zero-filled pages than max_ptes_none; the split maps
# the zero-filled pages to the shared zero page and frees them.
sysfs transparent_hugepage/khugepaged/max_ptes_none 256
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 8K 0x42
expect P A mapped pmd
shrink-slab
expect P A mapped pte
expect vmstat thp_underused_split_page 1
expect P rss anon 8K
P read A 8K 0x42
P read A+8K 2040K 0

test shrinker-leaves-a-thp-at-max-ptes-none-511
sysfs transparent_hugepage/khugepaged/max_ptes_none 511
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 8K 0x43
shrink-slab
expect P A mapped pmd
expect vmstat thp_underused_split_page 0
expect P rss anon 2M

test shrinker-leaves-a-thp-with-shrink-underused-0
sysfs transparent_hugepage/khugepaged/max_ptes_none 256
sysfs transparent_hugepage/shrink_underused 0
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 8K 0x44
shrink-slab
expect P A mapped pmd
expect vmstat thp_underused_split_page 0
expect P rss anon 2M

# MADV_WILLNEED (madvise_willneed, swapin_walk_pmd_entry): each swap entry
# of the range is read into the swap cache and left there unmapped; the
# access that maps it then finds it there (minor), the others read it
# (major: zram's synchronous path without the swap cache).
test swapin-willneed-reads-into-the-swap-cache
swap 64M zram
proc P
P mmap A 16K rw private
P write A 16K 0x41
P madvise A 16K pageout
expect P A swapped yes
expect vmstat pswpin 0
P madvise A 8K willneed
expect vmstat pswpin 2
expect P A swapped yes
expect P A+4K swapped yes
expect P rss anon 0
P read A 16K 0x41
expect P majflt 2
expect vmstat pswpin 4
expect P rss anon 16K
