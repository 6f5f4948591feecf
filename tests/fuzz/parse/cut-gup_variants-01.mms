test pin-readonly-64k-after-fork
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 256K rw private align=64K
P write A 256K 1
P fork C
P gup H A 64 pin,longterm
expect H 64
expect P A exclusive yes
expect P A+60K exclusive yes
P write A 256K 2
H read 0 256K 2
C read A 256K 1
unpin H
C exit
