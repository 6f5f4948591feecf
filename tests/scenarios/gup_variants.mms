# Scenarios where the GUP walk variants could differ: the same requests
# under every `gup.walk` (ctest runs this file under each), and the input of
# `mmlab diff --expect-nfc` for the batching series (docs/VARIANTS.md).

test get-touch-64k-folios
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 2M rw private align=2M
P madvise A 2M populate_write
P gup H A 512 get
expect H 512
unpin H
P gup H2 A 512 get,write
expect H2 512
unpin H2

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

test short-read-at-hole
proc P
P mmap A 64K rw private
P write A 32K 1
P mprotect A+32K 32K none
P gup H A 16 get
expect H 8
unpin H

test pmd-thp-get-and-pin
proc P
P mmap A 4M rw private align=2M
P madvise A 4M hugepage
P write A 4M 1
P gup H A 1024 get
expect H 1024
unpin H
P gup H2 A+1M 600 pin,longterm
expect H2 600
expect P A+2M pinned yes
unpin H2
