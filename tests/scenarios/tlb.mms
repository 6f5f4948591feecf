# The TLB model (docs/TLB.md) through `tune tlb.geometry`: what a geometry
# adds to the counters of the same accesses. Events only, never time.

sysfs transparent_hugepage/hugepages-2048kB/enabled never
proc P

test tlb-off-looks-nothing-up
# The default: no TLB, no lookups; the flushes are still counted by kind.
sysfs transparent_hugepage/hugepages-64kB/enabled always
P mmap A 64K rw private align=64K
counters reset
P write A 64K 1
P madvise A 4K dontneed
expect counter tlb.lookup 0
expect counter tlb.contpte_fold 0
expect counter tlb.flush_single 1

test tlb-arm64-64k-folio-is-one-entry
# A 64K mTHP is set as one contiguous block: one fold, and its sixteen
# pages miss the TLB once. Dropping one page unfolds the block.
tune tlb.geometry arm64
sysfs transparent_hugepage/hugepages-64kB/enabled always
P mmap A 64K rw private align=64K
counters reset
P write A 64K 1
expect P A order 4
expect counter tlb.contpte_fold 1
expect counter tlb.lookup 16
expect counter tlb.l1_miss 1
expect counter tlb.l2_miss 1
P madvise A+4K 4K dontneed
expect counter tlb.contpte_unfold 1
P read A 4K 1
check

test tlb-arm64-16k-folios-gain-no-reach
# With 4K base pages a contiguous block is 64K: 16K folios never fold, and
# every page is its own TLB entry, as with order-0 pages.
tune tlb.geometry arm64
sysfs transparent_hugepage/hugepages-16kB/enabled always
P mmap A 64K rw private align=64K
counters reset
P write A 64K 1
expect P A order 2
expect counter tlb.contpte_fold 0
expect counter tlb.l1_miss 16

test tlb-x86-amd-16k-folios-coalesce
# Zen 4 coalesces four aligned contiguous 4K PTEs into one entry.
tune tlb.geometry x86-amd
sysfs transparent_hugepage/hugepages-16kB/enabled always
P mmap A 64K rw private align=64K
counters reset
P write A 64K 1
expect counter tlb.l1_miss 4

test tlb-x86-intel-fork-flushes-the-parent
# fork write-protects the parent and flushes its whole mm (flush_tlb_mm);
# the parent's next write copies (ptep_clear_flush of one entry) and misses
# the emptied TLB once.
tune tlb.geometry x86-intel
P mmap A 4K rw private
P write A 4K 1
counters reset
P fork C
expect counter tlb.flush_full 1
P write A 4K 2
expect counter tlb.flush_single 1
expect counter tlb.l1_miss 1
C read A 4K 1
P read A 4K 2
check
