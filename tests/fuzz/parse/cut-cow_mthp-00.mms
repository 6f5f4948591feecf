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
