# PT_RECLAIM (v6.14, x86-64): MADV_DONTNEED of a whole PMD-aligned 2M range
# that the VMA covers frees the PTE table it emptied
# (madvise_dontneed_single_vma() asks zap_pte_range() for it with
# zap_details.reclaim_pt; mm/pt_reclaim.c). Guard markers keep the table;
# two partial DONTNEEDs that together empty it keep it; arm64 has no
# PT_RECLAIM in v6.18.

test pt-reclaim-next-fault-gets-a-pmd-thp
proc P
P mmap A 2M rw private align=2M
P write A 2M 1
expect P A mapped pte
P madvise A 2M hugepage
P madvise A 2M dontneed
# No table is left under the PMD, so the next fault may map a PMD THP.
P write A 4K 2
expect P A mapped pmd
P read A 4K 2
P read A+4K 4K 0

test pt-reclaim-collapse-finds-no-table
proc P
P mmap A 2M rw private align=2M
P write A 2M 1
P madvise A 2M dontneed
# MADV_COLLAPSE of a range with no PTE table: SCAN_PMD_NULL, EINVAL.
expect-error EINVAL P madvise A 2M collapse
expect P A mapped none

test pt-reclaim-partial-dontneeds-keep-the-table
proc P
P mmap A 2M rw private align=2M
P write A 2M 1
P madvise A 1M dontneed
P madvise A+1M 1M dontneed
# Each zap covered part of the table: it stays, empty, and the collapse
# of an empty table succeeds (v6.18: no SCAN_PAGE_RO).
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0

test pt-reclaim-not-pmd-aligned-keeps-the-table
proc P
P mmap A 4M rw private align=2M
P madvise A 4M nohugepage
P write A 4M 1
P madvise A+1M 2M dontneed
P madvise A 4M hugepage
# Neither table was zapped whole: both stay, and a fault there stays on PTEs.
P write A+1M 4K 2
expect P A+1M mapped pte
P write A+2M 4K 2
expect P A+2M mapped pte

test pt-reclaim-counts
proc P
P mmap A 4M rw private align=2M
P madvise A 4M nohugepage
P write A 4M 1
counters reset
P madvise A 4M dontneed
expect counter pgtable.reclaim 2
expect P A mapped none
check

test pt-reclaim-arm64-keeps-the-table
tune tlb.geometry arm64
proc P
P mmap A 2M rw private align=2M
P madvise A 2M nohugepage
P write A 2M 1
P madvise A 2M hugepage
P madvise A 2M dontneed
P write A 4K 2
expect P A mapped pte
