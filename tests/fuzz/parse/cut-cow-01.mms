proc P
test cow-anon-vmsplice-child-mprotect-thp-pte-512kB
# [RUN] vmsplice() + unmap in child with mprotect() optimization ... with PTE-mapped THP (512 kB)
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-512kB/enabled always
P mmap A 512K rw private align=512K
P madvise A 512K hugepage
P write A 512K 1
expect P A+508K order 7
P mprotect A+4K 4K r
P mprotect A+4K 4K rw
expect P A mapped pte
P fork C
C gup H A 16 get,fast
expect H 16
C munmap A 512K
P mprotect A 512K r
P mprotect A 512K rw
P write A 512K 0xff
H read 0 64K 1
unpin H
C exit
