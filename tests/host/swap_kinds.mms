# MADV_PAGEOUT of a 64K mTHP on each kind of swap device the language names.
# A block device takes the folio whole; a swap file gets no swap entries of
# order > 0 (cluster_alloc_swap_entry needs SWP_BLKDEV), so shrink_folio_list
# splits the folio and swaps out its pages one by one. Neither device is
# SWP_SYNCHRONOUS_IO (the host's block device is a loop device, docs/HOST.md),
# so swap-in never allocates an mTHP; but writeback is asynchronous, and the
# swapped-out folio stays in the swap cache until reclaim frees it, so
# reading it back maps the cached folio (whole, on the block device) where
# the model, which frees it at once, swaps in order-0 pages. The orders after
# the read-back are therefore not expected here.
#
# Run on the host backend only (ctest host.swap_kinds) until the model follows
# the swap-file rule; then it belongs in tests/scenarios/ and `mmlab diff`.

test pageout-mthp-64k-blkdev-swaps-whole
sysfs transparent_hugepage/hugepages-64kB/enabled always
swap 64M blkdev
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x5a
expect P A order 4
P madvise A 64K pageout
expect P A swapped yes
expect P A+60K swapped yes
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 0
expect vmstat pswpout 16
P read A 64K 0x5a

test pageout-mthp-64k-file-splits-first
sysfs transparent_hugepage/hugepages-64kB/enabled always
swap 64M file
proc P
P mmap A 64K rw private align=64K
P write A 64K 0x5a
expect P A order 4
P madvise A 64K pageout
expect P A swapped yes
expect P A+60K swapped yes
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/swpout_fallback 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 1
expect vmstat pswpout 16
P read A 64K 0x5a
