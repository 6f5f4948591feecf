test pin-readonly-exclusive-64k
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 256K rw private align=64K
P write A 256K 1
P mprotect A 256K r
P gup H A 64 pin,longterm
expect H 64
expect counter fault.unshare 0
unpin H
