# /proc/PID/smaps and status fields (`expect P smaps ADDR FIELD SIZE`,
# `expect P status FIELD SIZE`) and whether a fault reused or replaced a
# frame (`P remember ADDR`, `expect P ADDR same-frame|other-frame`), as
# fs/proc/task_mmu.c computes the fields (smaps_account, smaps_pmd_entry,
# task_mem) and as /proc/PID/pagemap names the frames on the host.

# smaps_pmd_entry(): a PMD-mapped anonymous THP counts 2M in AnonHugePages;
# split to PTEs (MADV_DONTNEED of one page) it counts none, its other pages
# still in Rss and Anonymous.
test proc-fields-anon-huge-pages
sysfs transparent_hugepage/enabled always
proc P
P mmap A 2M rw private align=2M
P write A 4K 1
expect P A mapped pmd
expect P smaps A AnonHugePages 2M
expect P smaps A Rss 2M
expect P smaps A Anonymous 2M
P madvise A+4K 4K dontneed
expect P A mapped pte
expect P smaps A AnonHugePages 0
expect P smaps A+1M Anonymous 2044K
expect P smaps A Rss 2044K

# smaps_account(): an anonymous folio that MADV_FREE made lazily freeable
# (no longer swap-backed) counts in LazyFree while neither the PTE nor the
# folio is dirty; a write re-dirties its page, which stops counting and
# keeps its frame. The kernel clears swap-backed only when the CPU's
# lru_lazyfree batch drains (31 folios, or lru_add_drain()); the model
# clears it at once. MADV_WILLNEED drains the batch (madvise_willneed ends
# with lru_add_drain()), so both agree after it.
test proc-fields-lazyfree
proc P
P mmap A 64K rw private
P write A 64K 2
expect P smaps A LazyFree 0
P remember A+8K
P madvise A 64K free
P madvise A 64K willneed
expect P smaps A LazyFree 64K
expect P smaps A Rss 64K
P write A+8K 4K 3
expect P smaps A LazyFree 60K
expect P A+8K same-frame
P read A+8K 4K 3

# Swap-out: the entries count in the VMA's Swap and the process's VmSwap.
# zram writes and frees the folio in the same pass, so the swap-in maps
# another frame; a block device's write is still in flight, so the folio
# is found in the swap cache and the same frame comes back.
test proc-fields-swap-zram
swap 64M zram
proc P
P mmap A 16K rw private
P write A 16K 4
P remember A
P madvise A 8K pageout
expect P smaps A Swap 8K
expect P smaps A Rss 8K
expect P status VmSwap 8K
expect P status RssAnon 8K
P read A 16K 4
expect P A other-frame
expect P smaps A Swap 0
expect P status VmSwap 0

test proc-fields-swap-blkdev-swap-cache
swap 64M blkdev
proc P
P mmap A 16K rw private
P write A 16K 4
P remember A
P madvise A 8K pageout
expect P smaps A Swap 8K
expect P A swapped yes
P read A 16K 4
expect P A same-frame
expect P smaps A Swap 0

# do_wp_page() after fork: the first writer copies (another frame); the
# page's last user then reuses it (wp_can_reuse_anon_folio(): the same
# frame).
test proc-fields-cow-other-then-reuse
proc P
P mmap A 4K rw private
P write A 4K 5
P remember A
P fork C
C remember A
expect C A same-frame
C write A 4K 6
expect C A other-frame
expect P A same-frame
P write A 4K 7
expect P A same-frame
P read A 4K 7
C read A 4K 6

# A read fault maps the shared zero page; the write after it allocates.
test proc-fields-zero-page-write-other-frame
proc P
P mmap A 4K rw private
P read A 4K 0
expect P A zero yes
P remember A
P write A 4K 8
expect P A other-frame
expect P A zero no

# task_mem(): VmPTE is mm_pgtables_bytes(): the PTE, PMD and PUD table
# pages of the process (not its PGD). Writes 2M apart in a fresh process
# need one PUD table, one PMD table and two PTE tables (align=4M: both in
# one PMD table). The host skips VmPTE: its agent's own mappings already
# have upper tables the test's mapping uses.
test proc-fields-vmpte
proc P
expect P status VmPTE 0
P mmap A 4M rw private align=4M
P write A 4K 9
expect P status VmPTE 12K
P write A+2M 4K 9
expect P status VmPTE 16K
expect P status RssAnon 8K
