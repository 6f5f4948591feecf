sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
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
