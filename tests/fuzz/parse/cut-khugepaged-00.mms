proc P
sysfs transparent_hugepage/use_zero_page 0
sysfs transparent_hugepage/khugepaged/defrag 1
sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/max_ptes_none 511
sysfs transparent_hugepage/khugepaged/max_ptes_swap 64
sysfs transparent_hugepage/khugepaged/max_ptes_shared 256
sysfs transparent_hugepage/khugepaged/pages_to_scan 4096
test khugepaged-alloc-at-fault
# [RUN] alloc_at_fault (khugepaged)
sysfs transparent_hugepage/enabled always
P mmap A 2M rw private align=2M
P write A 4K 1
expect P A mapped pmd
sysfs transparent_hugepage/enabled madvise
P madvise A 4K dontneed
expect P A+4K mapped pte
