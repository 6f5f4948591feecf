test lang-fork-cow
proc P
P mmap A 4K rw private
P write A 4K 1
P fork C
expect P A same C A
counters reset
C write A 4K 2
expect P A differ C A
expect counter fault.wp_copy 1
P read A 4K 1
C read A 4K 2
P write A 4K 3
expect counter fault.wp_reuse 1
