test pageout-pmd-thp-swap-blkdev
swap 64M blkdev
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x23
P madvise A 2M pageout
expect P A swapped yes
expect P A+2044K swapped yes
expect vmstat thp_swpout 1
expect vmstat thp_swpout_fallback 0
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 0
P read A 2M 0x23
