test pin-small-and-large
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 3
P gup H A 16 pin,fast,write,longterm
expect H 16
expect P A pinned yes
expect vmstat nr_foll_pin_acquired 16
H write 0 4K 9
P read A 4K 9
unpin H dirty
expect vmstat nr_foll_pin_released 16
