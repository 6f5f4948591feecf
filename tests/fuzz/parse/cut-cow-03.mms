proc P
test cow-anon-ropin-prevshared-thp-mremap-1024kB
# [RUN] R/O GUP pin on R/O-mapped previously-shared page ... with partially mremap()'ed THP (1024 kB)
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-1024kB/enabled always
P mmap A 1M rw private align=1M
P madvise A 1M hugepage
P write A 1M 1
expect P A+1020K order 8
P mmap B 512K none private
P mremap A+512K 512K 512K M2 to=B
P fork C
C exit
P gup H A 128 pin,longterm
expect H 128
P write A 512K 0xff
H read 0 512K 0xff
unpin H
