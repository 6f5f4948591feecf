test pageout-pmd-thp-without-swap
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x11
expect P A mapped pmd
P madvise A 2M pageout
expect P A mapped pte
expect P A order 0
expect P A+2044K order 0
expect P A swapped no
expect vmstat thp_swpout_fallback 1
expect vmstat thp_split_pmd 1
expect vmstat thp_split_page 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/swpout_fallback 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split 1
expect P rss anon 2M
P read A 2M 0x11
