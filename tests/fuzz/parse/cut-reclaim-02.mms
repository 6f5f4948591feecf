test cold-whole-pmd-thp-keeps-it
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x34
P madvise A 2M cold
expect P A mapped pmd
expect vmstat thp_split_pmd 0
P read A 2M 0x34
