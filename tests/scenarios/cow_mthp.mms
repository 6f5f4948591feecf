# Large-folio copy-on-write (docs/VARIANTS.md, "mTHP copy-on-write"): one
# scenario per objection to "mm: memory: add mTHP support for wp" and per
# rule of its correction. Every test runs under `cow.policy` base, rfc and
# fixed (ctest: --variant cow.policy=base,rfc,fixed): `when` lines hold what
# differs between them, `expect violation` what the posting breaks. Data is
# read back in every process after every write, and the checker runs after
# every step.

# The PMD size off and 64K on unless a test says otherwise; the first write
# of a 64K-aligned range then faults one 64K mTHP.
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P

test cow-mthp-fork-write-one-page
# The case the posting is for: after fork a write copies the whole 64K
# folio (rfc, fixed) instead of one page (base); the parent then reuses.
P mmap A 128K rw private align=64K
P write A 128K 1
expect P A order 4
P fork C
check
counters reset
C write A+8K 4K 2
C read A 8K 1
C read A+8K 4K 2
C read A+12K 116K 1
P read A 128K 1
check
expect counter fault.wp_copy 1
when cow.policy=base expect C A+8K order 0
when cow.policy=base expect counter cow.copy.order0 1
when cow.policy=base expect counter bytes.copied 4096
when cow.policy=rfc,fixed expect C A+8K order 4
when cow.policy=rfc,fixed expect C A+60K order 4
when cow.policy=rfc,fixed expect counter cow.copy.order4 1
when cow.policy=rfc,fixed expect counter bytes.copied 65536
when cow.policy=rfc,fixed expect sysfs transparent_hugepage/hugepages-64kB/stats/wp_fault_alloc 1
when cow.policy=rfc,fixed expect sysfs transparent_hugepage/hugepages-64kB/stats/wp_fault_fallback 0
when cow.policy=rfc,fixed expect C A exclusive yes
expect P A exclusive no
# The rest of C's range copies in order-0 steps under base only.
C write A 64K 4
C read A 64K 4
C read A+64K 64K 1
P read A 128K 1
check
when cow.policy=base expect counter fault.wp_copy 16
when cow.policy=rfc,fixed expect counter fault.wp_copy 1
# The parent's folio is its own again.
P write A 4K 5
P read A 4K 5
P read A+4K 124K 1
C read A 64K 4
check
expect counter fault.wp_reuse 1
C exit
P exit
check

test cow-mthp-mremap-misaligned
# "I am not sure if you are assuming some natural alignment of the old
# folio. Due to mremap() that must not be the case." Two 64K folios moved 4K
# off their alignment: the aligned 64K range at B+64K maps the first
# folio's last page and the second folio's pages 0..14. rfc moves the
# faulting page back by its distance to the aligned start (flaw c): from
# page 0 of the second folio that is page -1, which the kernel's unsigned
# offset turns into a struct page far outside the memmap.
sysfs transparent_hugepage/hugepages-16kB/enabled always
sysfs transparent_hugepage/hugepages-32kB/enabled always
P mmap A 128K rw private align=64K
P write A 64K 1
P write A+64K 64K 2
expect P A order 4
expect P A+64K order 4
P mmap B 192K none private align=64K
P mremap A 128K 128K M to=B+4K
P read M 64K 1
P read M+64K 64K 2
P fork C
check
when cow.policy=rfc expect violation source offset -1 wraps below the old folio
counters reset
C write M+64K 4K 3
C read M 64K 1
C read M+64K 4K 3
C read M+68K 60K 2
P read M 64K 1
P read M+64K 64K 2
check
# fixed: the range around B+68K starts with another folio's page, so no
# aligned range qualifies and one page is copied.
when cow.policy=base,fixed expect C M+64K order 0
when cow.policy=base,fixed expect counter cow.copy.order0 1
# The second folio's pages 7..14 fill the aligned 32K range at B+96K:
# fixed copies them, each from the page its PTE maps.
C write M+92K 4K 4
C read M+64K 4K 3
C read M+68K 24K 2
C read M+92K 4K 4
C read M+96K 32K 2
P read M+64K 64K 2
check
when cow.policy=base expect C M+92K order 0
when cow.policy=fixed expect C M+92K order 3
when cow.policy=fixed expect C M+120K order 3
when cow.policy=fixed expect C M+124K order 4
when cow.policy=fixed expect counter cow.copy.order3 1
C exit
P exit
check

test cow-mthp-mremap-misaligned-one-folio
# The same with nothing after the folio: the range at B+64K maps its last
# page and 15 none entries, which rfc reads as read-only (flaw a). It copies
# 15 frames past the folio's end into the child (not the child's data: none
# entries must read as zeroes), maps them without accounting them, and drops
# 16 references for the one PTE that mapped the folio.
P mmap A 128K rw private align=64K
P write A 64K 1
P mmap B 192K none private align=64K
P mremap A 128K 128K M to=B+4K
P fork C
check
when cow.policy=rfc expect violation references of the old folio for 16 PTEs, 1 of which mapped it
C write M+60K 4K 3
C read M 60K 1
C read M+60K 4K 3
C read M+64K 64K 0
P read M 64K 1
P read M+64K 64K 0
check
when cow.policy=base,fixed expect C M+60K order 0
when cow.policy=base,fixed expect C M+64K zero yes
C exit
P exit
check

test cow-mthp-range-crosses-vma
# "Are you scanning outside of the current VMA, and some PTEs might
# actually belong to a !writable VMA?" A partial mprotect leaves two VMAs
# mapping one 64K folio. thp_vma_suitable_orders keeps the posting's range
# inside the faulting VMA (as its author answered): a 32K copy at most.
sysfs transparent_hugepage/hugepages-16kB/enabled always
sysfs transparent_hugepage/hugepages-32kB/enabled always
P mmap A 64K rw private align=64K
P write A 64K 1
expect P A order 4
P mprotect A+32K 32K r
P fork C
check
C write A+16K 4K 2
C read A 16K 1
C read A+16K 4K 2
C read A+20K 44K 1
P read A 64K 1
check
when cow.policy=base expect C A+16K order 0
when cow.policy=rfc,fixed expect C A+16K order 3
when cow.policy=rfc,fixed expect C A order 3
expect C A+32K order 4
expect-error SIGSEGV C write A+32K 4K 3
C read A+32K 32K 1
check
C exit
P exit
check

test cow-mthp-two-folios
# "Are you assuming that the R/O PTE range is actually mapping all-pages
# from the same large folio?" The child's 16K range maps a folio's pages
# 0, 2 and 3 and, at A+4K, a page of its own (copied while 16K was off).
# rfc copies the folio's page 1 over the child's own data there.
sysfs transparent_hugepage/hugepages-64kB/enabled never
sysfs transparent_hugepage/hugepages-16kB/enabled always
P mmap A 16K rw private align=16K
P write A 16K 1
expect P A order 2
P fork C
sysfs transparent_hugepage/hugepages-16kB/enabled never
C write A+4K 4K 2
sysfs transparent_hugepage/hugepages-16kB/enabled always
expect C A+4K order 0
C fork G
check
when cow.policy=rfc expect violation expected every byte of A+0x1000..+0x1000 == 0x02
C write A+8K 4K 3
C read A 4K 1
C read A+4K 4K 2
C read A+8K 4K 3
C read A+12K 4K 1
G read A 4K 1
G read A+4K 4K 2
G read A+8K 8K 1
P read A 16K 1
check
when cow.policy=base,fixed expect C A+8K order 0
when cow.policy=base,fixed expect C A+4K same G A+4K
G exit
C exit
P exit
check

test cow-mthp-partly-exclusive
# "are you handling having a mixture of PageAnonExclusive within a folio
# properly?" cow.c's partially shared THP: page 0 stays exclusive to the
# parent (MADV_DONTFORK at fork), the others are shared with the child.
# rfc survives this one: page 0's PTE stays writable in the parent (fork
# does not write-protect a VM_DONTCOPY range) and the child's VMA does not
# cover it. fixed leaves the exclusive page out of every copy.
sysfs transparent_hugepage/hugepages-16kB/enabled always
sysfs transparent_hugepage/hugepages-32kB/enabled always
P mmap A 64K rw private align=64K
P write A 64K 1
expect P A order 4
P madvise A 4K dontfork
P fork C
P madvise A 4K dofork
expect P A exclusive yes
expect P A+4K exclusive no
expect P A+60K exclusive no
expect C A mapped none
check
P write A+16K 4K 2
P read A 16K 1
P read A+16K 4K 2
P read A+20K 44K 1
C read A+4K 60K 1
check
when cow.policy=base expect P A+16K order 0
when cow.policy=rfc,fixed expect P A+16K order 2
when cow.policy=rfc,fixed expect P A+28K order 2
expect P A order 4
expect P A exclusive yes
C write A+32K 4K 3
C read A+4K 28K 1
C read A+32K 4K 3
C read A+36K 28K 1
P read A 16K 1
P read A+16K 4K 2
P read A+20K 44K 1
check
when cow.policy=base expect C A+32K order 0
when cow.policy=rfc,fixed expect C A+32K order 3
when cow.policy=rfc,fixed expect C A+60K order 3
C exit
P exit
check

test cow-mthp-uffd-wp
# A userfaultfd-armed VMA needs per-page fault fidelity: every policy
# copies one page (the posting checks userfaultfd_armed()).
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
P userfaultfd A 64K wp
P uffd-wp A+16K 4K on
check
P write A 4K 2
expect P A order 0
expect P A+4K order 4
expect-error SIGBUS P write A+16K 4K 3
P read A 4K 2
P read A+4K 60K 1
C read A 64K 1
check
expect P A+16K uffd-wp yes
C write A+16K 4K 4
C read A+16K 4K 4
P read A+16K 4K 1
check
C exit
P exit
check

test cow-mthp-pinned-old-folio
# A folio with a pinned page: the pin (R/O, long-term) holds the parent's
# exclusive page 0. A debugger's FOLL_FORCE write then CoWs page 4 of the
# read-only VMA. rfc copies page 0 too (flaw f: no AnonExclusive, no pin
# check) and the device's later writes through the pin no longer reach the
# process. fixed copies one page: the folio may be pinned.
sysfs transparent_hugepage/hugepages-16kB/enabled always
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C exit
P write A 4K 2
expect P A exclusive yes
P gup H A 1 pin,longterm
expect H 1
expect P A pinned yes
P fork C2
P mprotect A 64K r
check
when cow.policy=rfc expect violation expected every byte of A+0x0..+0x1000 == 0x77
P gup W A+16K 1 get,write,force
expect W 1
W write 0 4K 5
unpin W
P read A+16K 4K 5
C2 read A 4K 2
C2 read A+4K 60K 1
check
when cow.policy=base,fixed expect P A+16K order 0
when cow.policy=base,fixed expect P A order 4
H write 0 4K 0x77
P read A 4K 0x77
unpin H
check
C2 exit
P exit
check

test cow-mthp-pmd-thp-after-fork
# A PMD-mapped THP after fork: the write fault splits the child's PMD and
# copies at PTE level (do_huge_pmd_wp_page), a 64K folio under rfc and
# fixed, never a PMD-sized one.
sysfs transparent_hugepage/hugepages-2048kB/enabled always
P mmap A 2M rw private align=2M
P write A 2M 1
expect P A mapped pmd
P fork C
check
C write A+1M 4K 2
expect C A mapped pte
expect P A mapped pmd
C read A 1M 1
C read A+1M 4K 2
C read A+1028K 1020K 1
P read A 2M 1
check
when cow.policy=base expect C A+1M order 0
when cow.policy=rfc,fixed expect C A+1M order 4
when cow.policy=rfc,fixed expect C A+1084K order 4
expect C A order 9
# The child still maps most of the folio: the parent's write splits its
# PMD too and copies.
P write A 4K 3
expect P A mapped pte
when cow.policy=base expect P A order 0
when cow.policy=rfc,fixed expect P A order 4
P read A 4K 3
P read A+4K 2044K 1
C read A 1M 1
C read A+1M 4K 2
check
C exit
P exit
check

test cow-mthp-pmd-order-never
# With only the PMD size enabled there is no CoW order but 0: the posting
# asks for BIT(PMD_ORDER) - 1, fixed for the same.
sysfs transparent_hugepage/hugepages-64kB/enabled never
sysfs transparent_hugepage/hugepages-2048kB/enabled always
P mmap A 2M rw private align=2M
P write A 2M 1
P fork C
C write A+1M 4K 2
expect C A+1M order 0
expect C A order 9
C read A 1M 1
C read A+1M 4K 2
C read A+1028K 1020K 1
P read A 2M 1
check
expect counter cow.copy.order0 1
C exit
P exit
check

test cow-mthp-wipeonfork
# MADV_WIPEONFORK on the folio's second half: the child starts with empty
# memory there; nothing it copies may bring the parent's data back.
P mmap A 64K rw private align=64K
P write A 64K 1
P madvise A+32K 32K wipeonfork
P fork C
C read A 32K 1
C read A+32K 32K 0
expect C A+32K zero yes
check
C write A 4K 2
C read A 4K 2
C read A+4K 28K 1
C read A+32K 32K 0
P read A 64K 1
check
C write A+32K 4K 3
C read A+32K 4K 3
C read A+36K 28K 0
P read A 64K 1
check
C exit
P exit
check

test cow-mthp-dontfork
# MADV_DONTFORK on the folio's second half: the child's VMA ends at A+32K,
# so no 64K range fits it.
sysfs transparent_hugepage/hugepages-32kB/enabled always
P mmap A 64K rw private align=64K
P write A 64K 1
P madvise A+32K 32K dontfork
P fork C
expect C A+32K mapped none
check
C write A+8K 4K 2
C read A 8K 1
C read A+8K 4K 2
C read A+12K 20K 1
P read A 64K 1
check
when cow.policy=base expect C A+8K order 0
when cow.policy=rfc,fixed expect C A+8K order 3
expect-error SIGSEGV C write A+32K 4K 3
P write A+32K 4K 4
P read A+32K 4K 4
check
C exit
P exit
check

test cow-mthp-grandchild
# Three sharers: the folio's MM-ID slots hold two mms and the "maybe mapped
# shared" bit the third. Each process copies in turn; the last one left
# mapping the folio reuses it.
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C fork G
check
G write A+4K 4K 3
G read A 4K 1
G read A+4K 4K 3
G read A+8K 56K 1
C read A 64K 1
P read A 64K 1
check
when cow.policy=base expect G A+4K order 0
when cow.policy=rfc,fixed expect G A+4K order 4
C write A+40K 4K 2
C read A 40K 1
C read A+40K 4K 2
C read A+44K 20K 1
G read A+4K 4K 3
P read A 64K 1
check
when cow.policy=rfc,fixed expect P A+4K exclusive no
# rfc and fixed: the parent is the folio's last mapping now and reuses it.
P write A 4K 4
P read A 4K 4
P read A+4K 60K 1
C read A+40K 4K 2
G read A+4K 4K 3
check
when cow.policy=rfc,fixed expect counter fault.wp_reuse 1
G exit
C exit
P exit
check

test cow-mthp-zero-page-range
# A write after reads of a 64K range of zero pages: base and rfc (which
# keeps zero-page CoW at order 0) allocate one page; fixed fills the range
# with one zeroed 64K folio, the folio alloc_anon_folio would have given a
# first write.
P mmap A 128K rw private align=64K
P read A 128K 0
expect P A zero yes
counters reset
P write A+8K 4K 1
P read A 8K 0
P read A+8K 4K 1
P read A+12K 116K 0
check
when cow.policy=base,rfc expect P A+8K order 0
when cow.policy=base,rfc expect P A zero yes
when cow.policy=base,rfc expect P rss anon 4K
when cow.policy=fixed expect P A+8K order 4
when cow.policy=fixed expect P A zero no
when cow.policy=fixed expect P A exclusive yes
when cow.policy=fixed expect P rss anon 64K
when cow.policy=fixed expect counter bytes.copied 0
when cow.policy=fixed expect counter bytes.zeroed 65536
expect P A+64K zero yes
# A range that is partly zero page, partly none: fixed needs every entry to
# map the zero page and copies one page.
P madvise A+96K 4K dontneed
P write A+64K 4K 2
P read A+64K 4K 2
P read A+68K 60K 0
check
expect P A+64K order 0
expect P A+68K zero yes
P fork C
C write A+68K 4K 3
C read A+64K 4K 2
C read A+68K 4K 3
C read A+72K 56K 0
P read A+68K 60K 0
check
expect C A+68K order 0
C exit
P exit
check

test cow-mthp-none-ptes
# cow.c's "single PTE of THP": MADV_DONTNEED leaves page 0 of a 64K folio
# mapped and 15 none entries, which rfc reads as read-only (flaw a). It maps
# the folio's stale pages 1..15 into the child where it must read zeroes,
# removes mappings the child never had and drops 16 references for one PTE.
P mmap A 64K rw private align=64K
P write A 64K 1
P madvise A+4K 60K dontneed
expect P A order 4
P fork C
check
when cow.policy=rfc expect violation expected every byte of A+0x1000..+0xf000 == 0x00
C write A 4K 2
C read A 4K 2
C read A+4K 60K 0
P read A 4K 1
P read A+4K 60K 0
check
when cow.policy=base,fixed expect C A order 0
C exit
P exit
check

test cow-mthp-swap-pte
# A swap entry in the range: the child's page at A+16K is its own and
# swapped out, clean (clear-soft-dirty), so its swap PTE has no soft-dirty
# bit and reads as read-only (flaw a). rfc maps the folio's page 4 over it:
# the child's data is lost and the swap slot leaks.
swap 16M
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C madvise A+16K 4K dontneed
C write A+16K 4K 2
C clear-soft-dirty
C madvise A+16K 4K pageout
expect C A+16K swapped yes
check
when cow.policy=rfc expect violation expected every byte of A+0x4000..+0x1000 == 0x02
C write A 4K 3
C read A 4K 3
C read A+4K 12K 1
C read A+16K 4K 2
C read A+20K 44K 1
P read A 64K 1
check
when cow.policy=base,fixed expect C A order 0
C exit
P exit
check

test cow-mthp-swap-pte-soft-dirty
# The same with the swap entry still soft-dirty: x86 keeps
# _PAGE_SWP_SOFT_DIRTY in the _PAGE_RW bit, so rfc's pte_write() reads the
# entry as writable and copies one page; the data survives.
swap 16M
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C madvise A+16K 4K dontneed
C write A+16K 4K 2
C madvise A+16K 4K pageout
expect C A+16K swapped yes
counters reset
C write A 4K 3
C read A 4K 3
C read A+4K 12K 1
C read A+16K 4K 2
C read A+20K 44K 1
P read A 64K 1
check
expect C A order 0
expect counter cow.copy.order0 1
C exit
P exit
check

test cow-mthp-unshare-soft-dirty
# An unshare fault (a R/O long-term pin of a shared page) copies a 64K
# folio under rfc too (flaw e), every entry read-only with the faulting
# entry's soft-dirty bit: page 4, written since clear-soft-dirty, reads as
# clean afterwards and a checkpoint would miss it. fixed unshares one page.
P mmap A 64K rw private align=64K
P write A 64K 1
P clear-soft-dirty
P write A+16K 4K 2
expect P A+16K soft-dirty yes
expect P A soft-dirty no
P fork C
counters reset
P gup H A 1 pin,longterm
expect H 1
check
when cow.policy=base,fixed expect P A+16K soft-dirty yes
when cow.policy=base,fixed expect P A order 0
when cow.policy=base,fixed expect counter cow.unshare.order0 1
when cow.policy=rfc expect P A+16K soft-dirty no
when cow.policy=rfc expect P A order 4
when cow.policy=rfc expect counter cow.unshare.order4 1
P write A 64K 3
H read 0 4K 3
unpin H
P read A 64K 3
C read A 16K 1
C read A+16K 4K 2
C read A+20K 44K 1
check
C exit
P exit
check

test cow-mthp-last-sharer-exited
# The only other sharer exits before the write: the folio is the parent's
# again and every policy reuses (the race of an exit with a copy in flight
# is a unit test: CowMthpRaceTest).
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C exit
counters reset
P write A+8K 4K 2
P read A 8K 1
P read A+8K 4K 2
P read A+12K 52K 1
check
expect counter fault.wp_reuse 1
expect counter fault.wp_copy 0
expect P A+8K order 4
expect P A+8K exclusive yes
expect P A+12K exclusive no
P exit
check

test cow-mthp-max-order
# cow.max_order caps fixed (a model-only sweep axis); rfc knows no cap.
sysfs transparent_hugepage/hugepages-16kB/enabled always
sysfs transparent_hugepage/hugepages-32kB/enabled always
tune cow.max_order 2
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C write A+40K 4K 2
C read A 40K 1
C read A+40K 4K 2
C read A+44K 20K 1
P read A 64K 1
check
when cow.policy=base expect C A+40K order 0
when cow.policy=rfc expect C A+40K order 4
when cow.policy=fixed expect C A+40K order 2
when cow.policy=fixed expect C A+32K order 2
tune cow.max_order 0
C write A 4K 3
C read A 4K 3
C read A+4K 36K 1
check
when cow.policy=base,fixed expect C A order 0
C exit
P exit
check

test cow-mthp-defrag
# The posting allocates with vma_thp_gfp_mask(): under defrag=madvise a
# MADV_HUGEPAGE VMA's CoW may reclaim and compact directly. fixed never does.
P mmap A 64K rw private align=64K
P madvise A 64K hugepage
P write A 64K 1
P fork C
counters reset
C write A 4K 2
C read A 4K 2
C read A+4K 60K 1
check
when cow.policy=rfc expect counter cow.alloc_direct_reclaim 1
when cow.policy=base,fixed expect counter cow.alloc_direct_reclaim 0
sysfs transparent_hugepage/defrag never
P write A 4K 3
P read A 4K 3
P read A+4K 60K 1
check
when cow.policy=rfc expect counter cow.alloc_direct_reclaim 1
C exit
P exit
check

test cow-mthp-stats-exist-with-policy
# The per-size wp_fault_* statistics are a model extension of the large-CoW
# policies (the posting declares them without sysfs files); v6.18 has none.
when cow.policy=base expect-error ENOENT sysfs transparent_hugepage/hugepages-64kB/stats/wp_fault_alloc 1
when cow.policy=rfc,fixed expect-error EACCES sysfs transparent_hugepage/hugepages-64kB/stats/wp_fault_alloc 1
when cow.policy=rfc,fixed expect sysfs transparent_hugepage/hugepages-64kB/stats/wp_fault_fallback_charge 0

test cow-mthp-private-file
# A private file mapping's CoW is order 0 under every policy: no page-fault
# THP order exists for a non-anonymous VMA.
file F 64K
P mmap M 64K rw private file=F
P read M 64K 0
P write M+8K 4K 1
P read M 8K 0
P read M+8K 4K 1
P read M+12K 52K 0
check
expect P M+8K order 0
P exit
check

test cow-mthp-reuse-whole
# cow.reuse whole: once the folio is this mm's alone, one write fault makes
# its whole read-only run writable, every page AnonExclusive.
tune cow.reuse whole
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C exit
counters reset
P write A+8K 4K 2
P read A 8K 1
P read A+8K 4K 2
P read A+12K 52K 1
check
expect P A exclusive yes
expect P A+60K exclusive yes
expect counter fault.wp_reuse 1
expect counter cow.reuse_pages 16
P write A 64K 3
P read A 64K 3
check
expect counter fault.wp_reuse 1
P exit
check

test cow-mthp-reuse-whole-refused
# cow.reuse whole leaves soft-dirty tracking VMAs (a page made writable
# without a fault would never become soft-dirty) and uffd-wp entries to
# the per-page reuse.
tune cow.reuse whole
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
C exit
P clear-soft-dirty
counters reset
P write A+8K 4K 2
check
expect P A+8K exclusive yes
expect P A+12K exclusive no
expect counter cow.reuse_pages 1
P mmap B 64K rw private align=64K
P write B 64K 1
P fork C2
C2 exit
P userfaultfd B 64K wp
P uffd-wp B+32K 4K on
counters reset
P write B 4K 2
check
expect P B+28K exclusive yes
expect P B+32K exclusive no
expect counter cow.reuse_pages 8
expect-error SIGBUS P write B+32K 4K 3
P read B 4K 2
P read B+4K 60K 1
check
P exit
check
