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
