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

test first-use-once-per-installed-pte
# mmu.pte_first_use counts a user access through a PTE for the first time
# since the kernel installed it, with or without a TLB geometry: a 64K
# fault sets 16 PTEs and a dense write then uses each (on a shadow-paging
# guest, 16 shadow fills). Changing protection in place keeps the record
# (this guest's kernel shows no second cost after mprotect or fork's
# write-protect); a zap and refault, a CoW copy, a child's new tables and
# a move by mremap make new first uses.
sysfs transparent_hugepage/hugepages-64kB/enabled always
P mmap A 256K rw private align=2M
counters reset
P write A 256K 1
expect counter pgtable.pte_set 64
expect counter mmu.pte_first_use 64
P write A 256K 2
P mprotect A 256K r
P read A 256K 2
P mprotect A 256K rw
expect counter mmu.pte_first_use 64
P fork C
P read A 256K 2
expect counter mmu.pte_first_use 64
C read A 256K 2
expect counter mmu.pte_first_use 128
P write A 4K 3
expect counter mmu.pte_first_use 129
C exit
P madvise A 64K dontneed
P read A 64K 0
expect counter mmu.pte_first_use 145
check

test first-use-after-a-table-moves
# mremap moves a 2M-aligned PTE table whole (move_normal_pmd): the same
# entries at new addresses, each a first use again.
P mmap A 2M rw private align=2M
P write A 2M 1
P mmap T 4M none private align=2M
counters reset
P mremap A 2M 2M B to=T
expect counter mremap.pmd_move 1
P read B 2M 1
expect counter mmu.pte_first_use 512
check

test first-use-populate-then-touch
# MADV_POPULATE_WRITE installs the PTEs from the kernel (GUP), so the
# program's first write through each is a first use without a fault; the
# kernel's copy_to_user into a buffer is a first use of its own (with PTI
# it walks another page-table root).
P mmap A 64K rw private
counters reset
P madvise A 64K populate_write
expect counter mmu.pte_first_use 0
P write A 64K 1
expect vmstat pgfault 16
expect counter mmu.pte_first_use 16
proc Q
Q mmap B 64K rw private
Q write B 64K 2
counters reset
Q vm-read P A 64K B
expect counter mmu.pte_first_use_kernel 16
expect counter mmu.pte_first_use 0
Q read B 64K 1
expect counter mmu.pte_first_use 0
check
