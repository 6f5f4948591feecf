# shmem THP made by collapse (issue 30, item 6): MADV_COLLAPSE and
# khugepaged on a memfd (the page cache collapses: collapse_file, then
# retract_page_tables, and MADV_COLLAPSE maps the new folio by a PMD), the
# faults that map such a folio (do_set_pmd, or all of its PTEs at once), the
# split of one a hole or truncation cuts into, and the shmem THP controls:
# transparent_hugepage/shmem_enabled (the huge= of the internal mount behind
# memfd and shared anonymous memory) and hugepages-<N>kB/shmem_enabled
# (which govern "anonymous shmem": shared anonymous memory and, since an
# unlinked shmem file gets the same vm_ops, a memfd). Checked against v6.18's
# mm/khugepaged.c, mm/shmem.c, mm/memory.c, mm/filemap.c and on this
# machine's kernel (mmlab diff --a model --b host).

proc P
sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 10

# MADV_COLLAPSE ignores shmem_enabled "never" (and THP "never"): the memfd's
# pages become one PMD-order folio, mapped by a read-only PMD. What allows
# it is the PMD size's per-size shmem_enabled ("inherit" by default).
test shmem-madvise-collapse-ignores-never
file F 0
truncate F 4M
P mmap A 4M rw shared file=F align=2M
P write A 4M 0x31
sysfs transparent_hugepage/enabled never
P madvise A 4M collapse
expect P A mapped pmd
expect P A+2M mapped pmd
expect P rss shmem 4M
P read A 4M 0x31

# A write to the read-only PMD clears it (a file PMD is not copied on
# write) and the write fault maps the folio by a PMD again, writable.
test shmem-write-after-collapse-remaps-pmd
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x32
P madvise A 2M collapse
P write A+8K 4K 0x33
expect P A mapped pmd
expect P rss shmem 2M
P read A+8K 4K 0x33
P read A+12K 4K 0x32

# deny refuses even MADV_COLLAPSE.
test shmem-deny-refuses-madvise-collapse
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x34
sysfs transparent_hugepage/shmem_enabled deny
expect-error EINVAL P madvise A 2M collapse
expect P A mapped pte
sysfs transparent_hugepage/shmem_enabled never

# A range that is mostly holes collapses too: the holes become zeroed pages
# of the new folio.
test shmem-madvise-collapse-fills-holes
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A+1M 4K 0x35
P madvise A 2M collapse
expect P A mapped pmd
expect P rss shmem 2M
P read A 4K 0
P read A+1M 4K 0x35

# MADV_HUGEPAGE on a memfd's VMA does not register the mm with khugepaged
# under shmem_enabled "advise": khugepaged_enter_vma() is asked with the
# new flags, but shmem_allowable_huge_orders() reads the VMA's, which do not
# have VM_HUGEPAGE yet. Nothing else registers this mm: nothing collapses.
test shmem-madv-hugepage-does-not-register
sysfs transparent_hugepage/shmem_enabled advise
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x36
P madvise A 2M hugepage
khugepaged 2
expect P A mapped pte

# An anonymous THP fault registers the mm; khugepaged's scan then takes
# the memfd too. It only removes the page table (collapse_pte_mapped_thp
# without install_pmd): the next fault maps the THP by a PMD.
test shmem-khugepaged-collapse-then-fault-maps-pmd
sysfs transparent_hugepage/shmem_enabled advise
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x37
P madvise A 2M hugepage
khugepaged 2
expect P A mapped none
expect P rss shmem 0
P read A 4K 0x37
expect P A mapped pmd
expect P rss shmem 2M

# MADV_COLLAPSE of a range khugepaged collapsed and left without a page
# table installs the PMD from the page cache (madvise_retracted_page_tables).
test shmem-madvise-collapse-installs-pmd-after-khugepaged
sysfs transparent_hugepage/shmem_enabled advise
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x38
P madvise A 2M hugepage
khugepaged 2
expect P A mapped none
P madvise A 2M collapse
expect P A mapped pmd
expect P rss shmem 2M
P read A 2M 0x38

# With MADV_NOHUGEPAGE the fault may not map it by a PMD (do_set_pmd
# refuses where THP is disabled for the VMA): a write fault maps all 512
# pages of the folio by PTEs at once (finish_fault), and so does a read
# fault (fault-around maps a large folio whole where it lies inside the VMA
# and one page table, not only its 16-page window).
test shmem-nohugepage-write-fault-maps-whole-folio-by-ptes
sysfs transparent_hugepage/shmem_enabled advise
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x39
P madvise A 2M hugepage
khugepaged 2
expect P A mapped none
P madvise A 2M nohugepage
P write A+64K 4K 0x3a
expect P A mapped pte
expect P A+2044K mapped pte
expect P rss shmem 2M
P read A+64K 4K 0x3a
P read A+68K 4K 0x39

test shmem-nohugepage-read-fault-maps-whole-folio-by-ptes
sysfs transparent_hugepage/shmem_enabled advise
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x3b
P madvise A 2M hugepage
khugepaged 2
expect P A mapped none
P madvise A 2M nohugepage
P read A+64K 4K 0x3b
expect P A mapped pte
expect P A+2044K mapped pte
expect P rss shmem 2M

# shmem_enabled "never" keeps khugepaged away from the memfd, MADV_HUGEPAGE
# or not (the per-size "inherit" of the PMD size follows it).
test shmem-khugepaged-never
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x3c
P madvise A 2M hugepage
khugepaged 2
expect P A mapped pte

# transparent_hugepage/enabled does not govern shmem: with it "never",
# khugepaged still collapses the memfd (shmem_enabled "advise" and
# MADV_HUGEPAGE allow it; the thread runs for shmem's sake).
test shmem-khugepaged-ignores-thp-enabled
sysfs transparent_hugepage/shmem_enabled advise
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x3d
P madvise A 2M hugepage
sysfs transparent_hugepage/enabled never
khugepaged 2
expect P A mapped none
P read A 2M 0x3d

# Shared anonymous memory (and a memfd: both are "anonymous shmem") follows
# the per-size controls: with the PMD size's shmem_enabled "never", even
# MADV_COLLAPSE is refused; "inherit" (the default) lets it collapse, even
# under shmem_enabled "never".
test shmem-anon-shared-pmd-size-never-refuses-collapse
P mmap A 2M rw shared align=2M
P write A 2M 0x3e
sysfs transparent_hugepage/hugepages-2048kB/shmem_enabled never
expect-error EINVAL P madvise A 2M collapse
sysfs transparent_hugepage/hugepages-2048kB/shmem_enabled inherit
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x3e

# A hole punched into the THP splits it: every mapping goes (page-cache
# pages are refaulted after a split), the hole reads zeros, the rest keeps
# its data, mapped again page by page.
test shmem-punch-hole-splits-thp
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x3d
P madvise A 2M collapse
punch-hole F 8K 4K
expect P A mapped none
expect P rss shmem 0
P read A+8K 4K 0
P read A+4K 4K 0x3d
P read A+12K 4K 0x3d
expect P A+12K mapped pte

# Truncating into the THP splits it too; past the new size is SIGBUS.
test shmem-truncate-splits-thp
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x3e
P madvise A 2M collapse
truncate F 1M
P read A+1020K 4K 0x3e
expect-error SIGBUS P read A+1M 4K

# shmem THP at fault time (shmem_get_folio_gfp's huge orders): with
# shmem_enabled "advise" a fault on a hole of a VMA with MADV_HUGEPAGE
# allocates a PMD-order folio, which the fault maps by a PMD.
test shmem-fault-thp-advise-hugepage
sysfs transparent_hugepage/shmem_enabled advise
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P madvise A 2M hugepage
P write A+8K 4K 0x41
expect P A mapped pmd
expect P A order 9
expect P rss shmem 2M
P read A 4K 0
P read A+8K 4K 0x41

# ... and without MADV_HUGEPAGE it does not.
test shmem-fault-advise-without-hugepage-is-small
sysfs transparent_hugepage/shmem_enabled advise
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A+8K 4K 0x42
expect P A+8K mapped pte
expect P A+8K order 0
expect P rss shmem 4K

# "always" needs no advice; the PMD-order folio is mapped by a PMD.
test shmem-fault-thp-always
sysfs transparent_hugepage/shmem_enabled always
P mmap A 2M rw shared align=2M
P write A 4K 0x43
expect P A mapped pmd
expect P rss shmem 2M

# The per-size controls govern a memfd too: with hugepages-64kB/shmem_enabled
# "always" a fault allocates a 64K folio, mapped whole by 16 PTEs.
test shmem-fault-mthp-64k
sysfs transparent_hugepage/hugepages-64kB/shmem_enabled always
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A+72K 4K 0x44
expect P A+72K order 4
expect P A+64K mapped pte
expect P A+124K mapped pte
expect P A+128K mapped none
expect P rss shmem 64K
P read A+64K 4K 0

# MADV_COLLAPSE of a range of 64K folios copies them into one PMD-order
# folio like small ones.
test shmem-madvise-collapse-of-mthps
sysfs transparent_hugepage/hugepages-64kB/shmem_enabled always
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x45
expect P A order 4
P madvise A 2M collapse
expect P A mapped pmd
expect P A order 9
P read A 2M 0x45

# khugepaged's limits apply to shmem too (hpage_collapse_scan_file): the
# pages present in the page cache must be at least 512 - max_ptes_none ...
test shmem-khugepaged-max-ptes-none
sysfs transparent_hugepage/shmem_enabled advise
sysfs transparent_hugepage/khugepaged/max_ptes_none 256
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 1020K 0x46
P madvise A 2M hugepage
khugepaged 2
expect P A mapped pte
P write A+1020K 4K 0x47
khugepaged 2
expect P A mapped none
P read A 1020K 0x46
P read A+1020K 4K 0x47
P read A+1M 4K 0

# ... and at most max_ptes_swap of them swapped out (those are read back
# by the collapse itself).
test shmem-khugepaged-max-ptes-swap
swap 16M zram
sysfs transparent_hugepage/shmem_enabled advise
P mmap B 2M rw private align=2M
P madvise B 2M hugepage
P write B 4K 1
file F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x48
P madvise A 260K pageout
expect P A mapped none
P madvise A 2M hugepage
khugepaged 2
expect P A+260K mapped pte
P write A+4K 4K 0x49
khugepaged 2
expect P A+260K mapped none
P read A 4K 0x48
P read A+4K 4K 0x49
P read A+256K 4K 0x48

# A file on a tmpfs mounted with huge= (a linked file) follows the mount
# option, not the per-size controls: huge=always makes a PMD THP at the
# first fault without any advice ...
test shmem-tmpfs-huge-always-fault
file F 2M huge=always
truncate F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A+8K 4K 0x51
expect P A mapped pmd
expect P rss shmem 2M

# ... huge=advise needs MADV_HUGEPAGE; then the fault allocates a PMD-order
# folio once the block is empty again, mapped by PTEs (all 512 at once)
# because the emptied page table is still there (do_set_pmd wants a none
# PMD) ...
test shmem-tmpfs-huge-advise-fault
file F 2M huge=advise
truncate F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 4K 0x52
expect P A mapped pte
P madvise A 2M hugepage
P write A+1M 4K 0x53
expect P A+1M mapped pte
truncate F 0
truncate F 2M
P write A+1M 4K 0x54
expect P A+1M order 9
expect P A mapped pte
expect P rss shmem 2M

# ... and huge=never keeps faults small even where the per-size control of
# the PMD size says always, which only "anonymous" shmem follows.
test shmem-tmpfs-huge-never-ignores-per-size
sysfs transparent_hugepage/hugepages-2048kB/shmem_enabled always
file F 2M huge=never
truncate F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P madvise A 2M hugepage
P write A 4K 0x55
expect P A mapped pte
expect P A order 0

# MADV_COLLAPSE of a huge=never tmpfs file: shmem_enabled's force for a
# collapse makes the mount's answer the PMD order, and a tmpfs file has no
# per-size controls to refuse it.
test shmem-tmpfs-huge-never-madvise-collapse
file F 2M huge=never
truncate F 0
truncate F 2M
P mmap A 2M rw shared file=F align=2M
P write A 2M 0x56
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x56

# A 1M file on a tmpfs mounted huge=always: its fallocate (every `file` is
# fallocated) allocates one PMD-order folio that reaches past EOF
# (shmem_fallocate has no VMA to fit, and huge=always allows every order).
# The first fault maps all of it by a PMD, past EOF too: the host maps it
# so (ShmemPmdMapped 2048 kB) and a read at 1M completes, no SIGBUS.
test shmem-tmpfs-huge-always-folio-past-eof
file F 1M huge=always
P mmap A 2M rw shared file=F align=2M
P write A 4K 0x61
expect P A order 9
expect P A mapped pmd
P read A+1M 4K 0
expect P rss shmem 2M

# ... and the superblock's shrinker (shrink-slab: drop_caches 2 on the
# host) splits it (shmem_unused_huge_shrink), freeing the pages past EOF:
# the split unmaps the rest, which comes back by faults, order 0 (fault-around
# maps 16 pages), and an
# access past EOF is now SIGBUS. (The split counters are machine-wide on
# the host: not compared.) khugepaged is stopped first: the mapping
# registered the mm (huge=always makes the VMA eligible), and a scan that
# holds a reference on the folio at the moment of the split makes it fail
# (the file goes back on the list), which the host showed once.
test shmem-tmpfs-huge-always-shrinker-splits-past-eof
sysfs transparent_hugepage/enabled never
file F 1M huge=always
P mmap A 2M rw shared file=F align=2M
P write A 4K 0x62
shrink-slab
expect P A mapped none
P read A 4K 0x62
expect P A order 0
expect P rss shmem 64K
expect-error SIGBUS P read A+1M 4K

# A file whose THP ends at EOF is not queued: nothing to split.
test shmem-tmpfs-huge-always-shrinker-keeps-whole-thp
file F 2M huge=always
P mmap A 2M rw shared file=F align=2M
P write A 4K 0x63
expect P A order 9
shrink-slab
expect P A mapped pmd
expect P A order 9
