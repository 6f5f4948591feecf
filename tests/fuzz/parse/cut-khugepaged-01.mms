proc P
sysfs transparent_hugepage/use_zero_page 0
sysfs transparent_hugepage/khugepaged/defrag 1
sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/max_ptes_none 511
sysfs transparent_hugepage/khugepaged/max_ptes_swap 64
sysfs transparent_hugepage/khugepaged/max_ptes_shared 256
sysfs transparent_hugepage/khugepaged/pages_to_scan 4096
test khugepaged-madvise-anon-collapse-full-of-compound
# [RUN] collapse_full_of_compound (madvise:anon): Collapse PTE table full of compound pages
P mmap A 2M rw private align=2M
P write A 256K 1
P write A+256K 256K 2
P write A+512K 256K 3
P write A+768K 256K 4
P write A+1M 256K 5
P write A+1280K 256K 6
P write A+1536K 256K 7
P write A+1792K 256K 8
P madvise A 2M collapse
expect P A mapped pmd
P madvise A 2M hugepage
P madvise A 4K nohugepage
P madvise A 2M nohugepage
expect P A mapped pte
sysfs transparent_hugepage/enabled never
P madvise A 2M hugepage
P madvise A 2M collapse
expect P A mapped pmd
sysfs transparent_hugepage/enabled madvise
P read A 256K 1
P read A+256K 256K 2
P read A+512K 256K 3
P read A+768K 256K 4
P read A+1M 256K 5
P read A+1280K 256K 6
P read A+1536K 256K 7
P read A+1792K 256K 8
