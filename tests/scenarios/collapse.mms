# Hand-written collapse scenarios: MADV_COLLAPSE and khugepaged on anonymous
# private memory, as mm/khugepaged.c (v6.18) decides them. Every collapse is
# followed by a check of the mapping and of every byte of the range; every
# test ends with the checker. khugepaged's scan statistics
# (thp_scan_exceed_*) are counted in the unit tests: on the host, `khugepaged
# N` waits for at least N scans and /proc/vmstat counts every mm on the
# machine, so their values here would be the model's alone.

# ---- MADV_COLLAPSE: the basic cases ----

test collapse-madvise-4k-pages
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x11
expect P A mapped pte
counters reset
P madvise A 2M collapse
expect P A mapped pmd
expect P A order 9
expect P A exclusive yes
expect P rss anon 2M
P read A 2M 0x11
expect vmstat thp_collapse_alloc 1
expect counter collapse.bytes_copied 2097152
expect counter collapse.bytes_zeroed 0
expect counter collapse.pmd_flush 1
expect counter collapse.table_sync 1
check

test collapse-madvise-ignores-sysfs-enabled-never
# Forced collapse does not look at the enabled settings.
sysfs transparent_hugepage/enabled never
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x12
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x12

test collapse-madvise-already-pmd-mapped
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x13
expect P A mapped pmd
P madvise A 2M collapse
expect P A mapped pmd
expect vmstat thp_collapse_alloc 0
P read A 2M 0x13

test collapse-madvise-pte-mapped-thp
# A PTE-mapped PMD-sized folio is copied into a new one; the old is freed.
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x14
P mprotect A 4K r
expect P A mapped pte
expect P A order 9
P mprotect A 4K rw
P madvise A 2M collapse
expect P A mapped pmd
expect vmstat thp_collapse_alloc 1
P read A 2M 0x14
expect P rss anon 2M

test collapse-madvise-64k-mthps
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x15
expect P A order 4
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x15

test collapse-madvise-none-ptes-zero-filled
# The limits on none PTEs are khugepaged's; MADV_COLLAPSE fills them with zeroes.
sysfs transparent_hugepage/khugepaged/max_ptes_none 0
proc P
P mmap A 2M rw private align=2M
P write A+1M 4K 0x16
counters reset
P madvise A 2M collapse
expect P A mapped pmd
P read A 1M 0
P read A+1M 4K 0x16
P read A+1028K 1020K 0
expect P rss anon 2M
expect counter collapse.bytes_copied 4096
expect counter collapse.bytes_zeroed 2093056

test collapse-madvise-zero-page-in-range
proc P
P mmap A 2M rw private align=2M
P read A 1M 0
expect P A zero yes
P write A+1M 1M 0x17
P madvise A 2M collapse
expect P A mapped pmd
expect P A zero no
P read A 1M 0
P read A+1M 1M 0x17

test collapse-madvise-only-zero-pages-einval
# No writable PTE in the range: SCAN_PAGE_RO.
proc P
P mmap A 2M rw private align=2M
P read A 2M 0
expect-error EINVAL P madvise A 2M collapse
expect P A mapped pte
expect vmstat thp_collapse_alloc 0

test collapse-madvise-no-page-table-einval
# An untouched range has no page table: SCAN_PMD_NULL.
proc P
P mmap A 2M rw private align=2M
expect-error EINVAL P madvise A 2M collapse
expect P A mapped none
expect vmstat thp_collapse_alloc 0

# ---- MADV_COLLAPSE: ranges and VMAs ----

test collapse-madvise-unmapped-hole-enomem
# The madvise core reports the hole after collapsing both VMAs around it.
proc P
P mmap A 6M rw private align=2M
P write A 6M 0x21
P munmap A+2M 2M
expect-error ENOMEM P madvise A 6M collapse
expect P A mapped pmd
expect P A+4M mapped pmd
P read A 2M 0x21
P read A+4M 2M 0x21

test collapse-madvise-range-crossing-vma-boundary
# Each VMA collapses the PMDs wholly inside it. A VMA that holds no whole
# PMD fails thp_vma_allowable_order (thp_vma_suitable_order): EINVAL, and
# the madvise walk stops there.
proc P
P mmap A 6M rw private align=2M
P write A 6M 0x22
P mprotect A+3M 1M r
expect-error EINVAL P madvise A 6M collapse
expect P A mapped pmd
expect P A+2M mapped pte
expect P A+4M mapped pte
P madvise A+4M 2M collapse
expect P A+4M mapped pmd
P read A 6M 0x22

test collapse-madvise-mprotect-split-vma
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x23
P mprotect A+1M 1M r
# Neither half holds a whole PMD.
expect-error EINVAL P madvise A 2M collapse
expect-error EINVAL P madvise A+1M 1M collapse
expect P A mapped pte
expect vmstat thp_collapse_alloc 0
P mprotect A+1M 1M rw
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x23

test collapse-madvise-range-without-whole-pmd
# Inside a VMA that holds PMDs: a range ending on a PMD boundary holds none
# and returns 0; one that ends below it makes the kernel's (hend - hstart)
# wrap, which thps cannot equal: SCAN_FAIL, EINVAL.
proc P
P mmap A 4M rw private align=2M
P write A 4M 0x24
P madvise A+1M 1M collapse
expect-error EINVAL P madvise A+1M 512K collapse
expect P A mapped pte
expect vmstat thp_collapse_alloc 0
P madvise A+1M 3M collapse
expect P A mapped pte
expect P A+2M mapped pmd
P read A 4M 0x24

test collapse-madvise-readonly-vma
# v6.18 has no writable-PTE requirement for anonymous collapse.
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x25
P mprotect A 2M r
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x25
expect-error SIGSEGV P write A 4K 1

test collapse-madvise-vma-smaller-than-pmd-einval
proc P
P mmap A 1M rw private
P write A 1M 0x26
expect-error EINVAL P madvise A 1M collapse
expect P A mapped pte
P read A 1M 0x26

# ---- eligibility: VM_NOHUGEPAGE and PR_SET_THP_DISABLE ----

test collapse-madvise-nohugepage-einval
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x31
P madvise A 2M nohugepage
expect-error EINVAL P madvise A 2M collapse
expect P A mapped pte
P read A 2M 0x31

test collapse-madvise-prctl-thp-disable-einval
proc P
P thp-disable yes
P mmap A 2M rw private align=2M
P write A 2M 0x32
expect-error EINVAL P madvise A 2M collapse
expect P A mapped pte
P thp-disable no
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x32

test collapse-madvise-prctl-except-advised-allowed
proc P
P thp-disable yes except-advised
P mmap A 2M rw private align=2M
P write A 2M 0x33
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x33

test collapse-khugepaged-prctl-except-advised
# khugepaged still collapses a VM_HUGEPAGE range of such a process.
proc P
P thp-disable yes except-advised
P mmap A 4M rw private align=2M
P write A 4M 0x34
P madvise A 2M hugepage
khugepaged 1
expect P A mapped pmd
expect P A+2M mapped pte
P read A 4M 0x34

# ---- fork: the child keeps its data ----

test collapse-madvise-after-fork-parent
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x41
P fork Q
P madvise A 2M collapse
expect P A mapped pmd
expect P A exclusive yes
expect Q A mapped pte
expect P A differ Q A
P write A 4K 0x42
Q read A 2M 0x41
P read A 4K 0x42
P read A+4K 2044K 0x41
Q write A+4K 4K 0x43
P read A+4K 4K 0x41
check

test collapse-madvise-after-fork-child
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x44
P fork Q
Q madvise A 2M collapse
expect Q A mapped pmd
expect P A mapped pte
Q write A 2M 0x45
P read A 2M 0x44
P write A 4K 0x46
Q read A 2M 0x45

test collapse-khugepaged-after-fork-max-ptes-shared
# Every PTE is shared with the child: more than max_ptes_shared (256).
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x47
P madvise A 2M hugepage
P fork Q
khugepaged 1
expect P A mapped pte
expect Q A mapped pte
# 512 shared PTEs exceed even the largest limit (511).
sysfs transparent_hugepage/khugepaged/max_ptes_shared 511
khugepaged 1
expect P A mapped pte
# With one page gone from the child, P has 511; once P has collapsed, Q's
# pages are its own and Q collapses too (one none PTE, zero-filled).
Q madvise A 4K dontneed
# fork made the child's PTEs old: Q needs an access to count as referenced.
Q read A+4K 2044K 0x47
khugepaged 1
expect P A mapped pmd
expect Q A mapped pmd
expect P A differ Q A
P read A 2M 0x47
Q read A 4K 0
Q read A+4K 2044K 0x47
P write A 2M 0x48
Q read A+4K 2044K 0x47

# ---- references beyond the mappings: GUP ----

test collapse-madvise-gup-pinned-eagain
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x51
P gup H A+8K 1 pin,write
expect H 1
expect-error EAGAIN P madvise A 2M collapse
expect P A mapped pte
expect vmstat thp_collapse_alloc 0
H write 0 4K 0x52
unpin H dirty
P madvise A 2M collapse
expect P A mapped pmd
P read A 8K 0x51
P read A+8K 4K 0x52
P read A+12K 2036K 0x51

test collapse-madvise-foll-get-eagain
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x53
P gup H A+1M 1 get
expect H 1
expect-error EAGAIN P madvise A 2M collapse
expect P A mapped pte
unpin H
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x53

test collapse-madvise-gup-fast-pin-eagain
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x54
P gup H A 4 pin,fast,longterm
expect H 4
expect-error EAGAIN P madvise A 2M collapse
unpin H
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x54

test collapse-khugepaged-skips-pinned-pmd
proc P
P mmap A 4M rw private align=2M
P write A 4M 0x55
P madvise A 4M hugepage
P gup H A+4K 1 pin
khugepaged 1
expect P A mapped pte
expect P A+2M mapped pmd
P read A 4M 0x55
unpin H
khugepaged 1
expect P A mapped pmd
P read A 4M 0x55
expect vmstat thp_collapse_alloc 2

test collapse-khugepaged-skips-foll-get
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x56
P madvise A 2M hugepage
P gup H A+2044K 1 get
khugepaged 2
expect P A mapped pte
unpin H
khugepaged 1
expect P A mapped pmd
P read A 2M 0x56

# ---- khugepaged's limits ----

test collapse-khugepaged-max-ptes-none
sysfs transparent_hugepage/khugepaged/max_ptes_none 256
proc P
P mmap A 4M rw private align=2M
# 256 present PTEs in the first PMD (256 none: allowed), 255 in the second (257 none).
P write A 1M 0x61
P write A+2M 1020K 0x62
P madvise A 4M hugepage
khugepaged 1
expect P A mapped pmd
expect P A+2M mapped pte
P read A 1M 0x61
P read A+1M 1M 0
P read A+2M 1020K 0x62

test collapse-khugepaged-zero-page-counts-as-none
sysfs transparent_hugepage/khugepaged/max_ptes_none 0
proc P
P mmap A 2M rw private align=2M
P write A 2044K 0x63
P read A+2044K 4K 0
P madvise A 2M hugepage
expect P A+2044K zero yes
khugepaged 1
expect P A mapped pte
P madvise A 2M collapse
expect P A mapped pmd
P read A 2044K 0x63
P read A+2044K 4K 0

test collapse-khugepaged-needs-a-referenced-pte
# A range khugepaged finds with no young PTE and no referenced folio is left.
swap 64M
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x64
P madvise A 2M hugepage
P madvise A 2M pageout
expect P A swapped yes
P madvise A 2M populate_read
expect P A swapped no
P read A 2M 0x64
khugepaged 1
expect P A mapped pmd
P read A 2M 0x64

# ---- swap ----

test collapse-madvise-swapped-range
swap 64M
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x71
P madvise A+64K 512K pageout
expect P A+64K swapped yes
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x71

test collapse-khugepaged-max-ptes-swap
swap 64M
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x72
P madvise A 2M hugepage
# 65 swap PTEs: one more than max_ptes_swap (64).
P madvise A 260K pageout
expect P A+256K swapped yes
khugepaged 1
expect P A+1M mapped pte
P read A+1M 4K 0x72
P madvise A+256K 4K populate_read
expect P A+256K swapped no
khugepaged 1
expect P A mapped pmd
expect vmstat thp_collapse_alloc 1
P read A 2M 0x72

test collapse-khugepaged-swap-needs-half-referenced
# With a swap PTE present, at least HPAGE_PMD_NR/2 PTEs must be referenced.
swap 64M
sysfs transparent_hugepage/khugepaged/max_ptes_swap 511
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x73
P madvise A 2M hugepage
P madvise A 1028K pageout
khugepaged 1
expect P A+1028K mapped pte
P madvise A 4K populate_read
khugepaged 1
expect P A mapped pmd
P read A 2M 0x73

# ---- userfaultfd ----

test collapse-madvise-uffd-wp-bit-einval
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x81
P userfaultfd A 2M wp
P uffd-wp A+4K 4K on
expect-error EINVAL P madvise A 2M collapse
expect P A mapped pte
P uffd-wp A+4K 4K off
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x81

test collapse-khugepaged-uffd-wp-bit
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x82
P madvise A 2M hugepage
P userfaultfd A 2M wp
P uffd-wp A 4K on
khugepaged 1
expect P A mapped pte
P uffd-wp A 4K off
khugepaged 1
expect P A mapped pmd
P read A 2M 0x82

test collapse-madvise-uffd-armed-none-ebusy
proc P
P mmap A 2M rw private align=2M
P write A+4K 2044K 0x83
P userfaultfd A 2M missing
expect-error EBUSY P madvise A 2M collapse
expect P A mapped none
expect P A+4K mapped pte
expect-error SIGBUS P read A 4K
P read A+4K 2044K 0x83

test collapse-madvise-uffd-armed-full-range
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x84
P userfaultfd A 2M missing
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x84

# ---- sysfs: the stores' rules ----

test collapse-sysfs-khugepaged-stores
expect sysfs transparent_hugepage/khugepaged/defrag 1
expect sysfs transparent_hugepage/khugepaged/max_ptes_none 511
expect sysfs transparent_hugepage/khugepaged/max_ptes_swap 64
expect sysfs transparent_hugepage/khugepaged/max_ptes_shared 256
expect sysfs transparent_hugepage/khugepaged/pages_to_scan 4096
expect sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10000
expect sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 60000
expect-error EINVAL sysfs transparent_hugepage/khugepaged/max_ptes_none 512
expect-error EINVAL sysfs transparent_hugepage/khugepaged/max_ptes_swap 512
expect-error EINVAL sysfs transparent_hugepage/khugepaged/max_ptes_shared 512
expect-error EINVAL sysfs transparent_hugepage/khugepaged/pages_to_scan 0
expect-error EINVAL sysfs transparent_hugepage/khugepaged/defrag 2
sysfs transparent_hugepage/khugepaged/max_ptes_none 0
expect sysfs transparent_hugepage/khugepaged/max_ptes_none 0
sysfs transparent_hugepage/khugepaged/defrag 0
expect sysfs transparent_hugepage/khugepaged/defrag 0
expect-error EACCES sysfs transparent_hugepage/khugepaged/pages_collapsed 1
expect-error EACCES sysfs transparent_hugepage/khugepaged/full_scans 1

test collapse-sysfs-mthp-collapse-stats-absent-by-default
# v6.18 has no per-size collapse statistics.
expect-error ENOENT sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 1
expect-error ENOENT sysfs transparent_hugepage/hugepages-2048kB/stats/collapse_exceed_none_pte 1

# ---- the virtual clock ----

test collapse-khugepaged-clock-wakes
proc P
P mmap A 4M rw private align=2M
P write A 4M 0x91
# The first mm to register wakes the idle thread at once.
P madvise A 2M hugepage
expect P A mapped pte
advance 1ms
expect P A mapped pmd
expect sysfs transparent_hugepage/khugepaged/full_scans 1
expect sysfs transparent_hugepage/khugepaged/pages_collapsed 1
P madvise A+2M 2M hugepage
advance 9s
expect P A+2M mapped pte
# scan_sleep_millisecs (10000) after the first wake.
advance 1s
expect P A+2M mapped pmd
expect sysfs transparent_hugepage/khugepaged/full_scans 2
P read A 4M 0x91

test collapse-khugepaged-sleep-store-wakes
proc P
P mmap B 2M rw private align=2M
# MADV_HUGEPAGE registers the mm only once the VMA has an anon_vma.
P madvise B 2M hugepage
advance 1ms
expect sysfs transparent_hugepage/khugepaged/full_scans 0
P write B 4K 0x90
P madvise B 2M hugepage
advance 1ms
expect sysfs transparent_hugepage/khugepaged/full_scans 1
expect P B mapped pmd
P read B 4K 0x90
P read B+4K 2044K 0
P mmap A 4M rw private align=2M
P write A 4M 0x92
P madvise A 4M hugepage
advance 1s
expect P A mapped pte
# Writing scan_sleep_millisecs ends the current sleep.
sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 100
advance 1us
expect P A mapped pmd
expect P A+2M mapped pmd
P read A 4M 0x92

test collapse-khugepaged-pages-to-scan
# One wake examines pages_to_scan pages' worth (512 per PMD).
sysfs transparent_hugepage/khugepaged/pages_to_scan 1024
proc P
P mmap A 8M rw private align=2M
P write A 8M 0x93
P madvise A 8M hugepage
advance 1ms
expect P A mapped pmd
expect P A+2M mapped pmd
expect P A+4M mapped pte
expect sysfs transparent_hugepage/khugepaged/full_scans 0
advance 10s
expect P A+4M mapped pmd
expect P A+6M mapped pmd
P read A 8M 0x93

# ---- mTHP collapse (the series as a variant) ----

test collapse-mthp-khugepaged-64k-without-pmd
# Full 64K ranges collapse with only the 64K size enabled; a range missing one
# page does not (max_ptes_none 0 is 0 for every order).
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/khugepaged/max_ptes_none 0
proc P
P mmap A 2M rw private align=2M
P write A 1M 0xa1
P write A+1M 60K 0xa2
expect P A order 0
sysfs transparent_hugepage/hugepages-64kB/enabled always
P madvise A 2M hugepage
khugepaged 1
expect P A mapped pte
expect P A order 4
expect P A+960K order 4
expect P A+1M order 0
expect P A+1084K mapped none
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 16
expect sysfs transparent_hugepage/hugepages-2048kB/stats/collapse_alloc 0
expect vmstat thp_collapse_alloc 0
# pages_collapsed counts PMD ranges with a collapse in them, as before the series.
expect sysfs transparent_hugepage/khugepaged/pages_collapsed 1
P read A 1M 0xa1
P read A+1M 60K 0xa2
expect P rss anon 1084K

test collapse-mthp-max-ptes-none-511-is-order-scaled
# 511 means (1 << order) - 1 for an mTHP order: one page is enough.
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
proc P
P mmap A 2M rw private align=2M
P write A 4K 0xa3
P write A+64K 4K 0xa4
P write A+1084K 4K 0xa5
sysfs transparent_hugepage/hugepages-64kB/enabled always
P madvise A 2M hugepage
khugepaged 1
expect P A order 4
expect P A+64K order 4
expect P A+128K mapped none
expect P A+1M order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 3
P read A 4K 0xa3
P read A+4K 60K 0
P read A+64K 4K 0xa4
P read A+68K 60K 0
P read A+1M 60K 0
P read A+1084K 4K 0xa5
expect P rss anon 192K

test collapse-mthp-max-ptes-none-other-is-zero
# A value other than 0 or 511 is treated as 0 for mTHP orders (with a warning).
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/khugepaged/max_ptes_none 100
proc P
P mmap A 2M rw private align=2M
P write A 64K 0xa6
P write A+64K 60K 0xa7
sysfs transparent_hugepage/hugepages-64kB/enabled always
P madvise A 2M hugepage
khugepaged 1
expect P A order 4
expect P A+64K order 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 1
P read A 64K 0xa6
P read A+64K 60K 0xa7

test collapse-mthp-swap-pte-refused
swap 64M
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
proc P
P mmap A 2M rw private align=2M
P write A 2M 0xa8
P madvise A+4K 4K pageout
expect P A+4K swapped yes
sysfs transparent_hugepage/hugepages-64kB/enabled always
P madvise A 2M hugepage
khugepaged 1
expect P A order 0
expect P A+4K swapped yes
expect P A+64K order 4
expect P A+2044K order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 31
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_exceed_swap_pte 1
P read A 2M 0xa8

test collapse-mthp-shared-pte-refused
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/khugepaged/max_ptes_shared 511
proc P
P mmap A 2M rw private align=2M
P write A 1M 0xa9
P fork Q
P write A+1M 1M 0xaa
sysfs transparent_hugepage/hugepages-64kB/enabled always
P madvise A 2M hugepage
khugepaged 1
expect P A order 0
expect P A+1M order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_exceed_shared_pte 16
P read A 1M 0xa9
P read A+1M 1M 0xaa
Q read A 1M 0xa9
Q read A+1M 1M 0
expect P A same Q A

test collapse-mthp-existing-64k-folio-refused
# A 64K target already holding a 64K folio is left; its neighbours collapse.
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 2M rw private align=2M
P write A 1M 0xab
expect P A order 4
sysfs transparent_hugepage/hugepages-64kB/enabled never
P write A+1M 1M 0xac
expect P A+1M order 0
sysfs transparent_hugepage/hugepages-64kB/enabled always
P madvise A 2M hugepage
khugepaged 1
expect P A order 4
expect P A+1M order 4
# The series refuses the already-64K targets in __collapse_huge_page_isolate,
# after allocating the new folio: 32 allocations for 16 collapses.
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 32
expect sysfs transparent_hugepage/hugepages-64kB/stats/anon_fault_alloc 16
P read A 1M 0xab
P read A+1M 1M 0xac

test collapse-mthp-pmd-target-over-64k-folios
# The PMD target is not refused for the mTHPs inside it.
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 2M rw private align=2M
P write A 2M 0xad
expect P A order 4
P madvise A 2M hugepage
khugepaged 1
expect P A mapped pmd
expect sysfs transparent_hugepage/hugepages-2048kB/stats/collapse_alloc 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 0
expect vmstat thp_collapse_alloc 1
P read A 2M 0xad

test collapse-mthp-madvise-stays-pmd-only
tune khugepaged.mthp on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 2M rw private align=2M
P write A 2M 0xae
P madvise A 2M collapse
expect P A mapped pmd
expect sysfs transparent_hugepage/hugepages-2048kB/stats/collapse_alloc 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 0
P read A 2M 0xae

test collapse-mthp-stats-exist-with-the-variant
tune khugepaged.mthp on
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc_failed 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_exceed_none_pte 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_exceed_swap_pte 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/collapse_exceed_shared_pte 0
expect-error EACCES sysfs transparent_hugepage/hugepages-64kB/stats/collapse_alloc 1

# ---- read-only regular files (CONFIG_READ_ONLY_THP_FOR_FS) ----

# A file opened O_RDONLY (`ro`): no shared writable mapping, no write access
# later, no truncation or hole: the system calls' answers on such a
# descriptor, on both backends.
test collapse-file-ro-refuses-writers
file F 64K fs=ext4 ro
proc P
expect-error EACCES P mmap A 64K rw shared file=F
P mmap B 64K r shared file=F
expect-error EACCES P mprotect B 64K rw
expect-error EACCES P madvise B 4K remove
expect-error EINVAL truncate F 0
expect-error EBADF punch-hole F 0 4K
P mmap C 64K rw private file=F
P write C 4K 0x21
P read B 4K 0

# Without the option (this machine's kernel, and the model's default)
# file_thp_enabled() is false: MADV_COLLAPSE of a read-only file is EINVAL.
test collapse-file-ro-without-config-is-einval
tune mm.read_only_thp_for_fs off
file F 2M fs=ext4 ro
proc P
P mmap A 2M r private file=F align=2M
P madvise A 2M populate_read
expect-error EINVAL P madvise A 2M collapse
expect P A mapped pte

# With it, a range of a file nobody writes becomes a PMD-order page-cache
# folio, clean and not swap-backed, which MADV_COLLAPSE maps by a PMD;
# an uncached range is read first (zeros here). The host skips this
# (its kernel lacks the option: the read_only_thp_for_fs probe).
test collapse-file-ro-collapses
tune mm.read_only_thp_for_fs on
file F 2M fs=ext4 ro uncached
proc P
P mmap A 2M r private file=F align=2M
P madvise A 64K populate_read
P madvise A 2M collapse
expect P A mapped pmd
expect P A order 9
expect P rss file 2M
P read A 2M 0
check

# The file open for write (the test's descriptor is O_RDWR): not eligible.
test collapse-file-open-for-write-is-einval
tune mm.read_only_thp_for_fs on
file F 2M fs=ext4
proc P
P mmap A 2M r private file=F align=2M
P madvise A 2M populate_read
expect-error EINVAL P madvise A 2M collapse
expect P A order 0

# khugepaged follows `enabled` for a file: under madvise, MADV_HUGEPAGE
# registers the mm (the check sees the new flags) and the scan collapses
# the page cache and retracts the page table; the next fault maps the THP
# by a PMD.
test collapse-file-ro-khugepaged
tune mm.read_only_thp_for_fs on
file F 2M fs=ext4 ro
proc P
P mmap A 2M r private file=F align=2M
P madvise A 2M populate_read
P madvise A 2M hugepage
khugepaged 2
expect P A mapped none
P read A 4K 0
expect P A mapped pmd
expect P A order 9
