sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
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
