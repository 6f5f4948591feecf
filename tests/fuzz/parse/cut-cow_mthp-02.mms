sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
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
