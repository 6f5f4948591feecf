test collapse-madvise-4k-pages
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x11
expect P A mapped pte
counters reset
P madvise A 2M collapse
expect P A mapped pmd
expect P A order 9
expect P A exclusive yes
expect P rss anon 2M
P read A 2M 0x11
expect vmstat thp_collapse_alloc 1
expect counter collapse.bytes_copied 2097152
expect counter collapse.bytes_zeroed 0
expect counter collapse.pmd_flush 1
expect counter collapse.table_sync 1
check
