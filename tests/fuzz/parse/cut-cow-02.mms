proc P
test cow-anon-iouring-fork-thp-single-32kB
# [RUN] fork() with an iouring fixed buffer ... with single PTE of THP (32 kB)
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-32kB/enabled always
P mmap A 32K rw private align=32K
P madvise A 32K hugepage
P write A 32K 1
expect P A+28K order 3
P madvise A+4K 28K dontneed
P gup H A 1 pin,fast,write,longterm
expect H 1
P fork C
P write A 4K 0xff
H read 0 4K 0xff
unpin H
C read A 4K 1
C exit
