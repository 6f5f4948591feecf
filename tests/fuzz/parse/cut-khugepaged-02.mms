proc P
sysfs transparent_hugepage/use_zero_page 0
sysfs transparent_hugepage/khugepaged/defrag 1
sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/max_ptes_none 511
sysfs transparent_hugepage/khugepaged/max_ptes_swap 64
sysfs transparent_hugepage/khugepaged/max_ptes_shared 256
sysfs transparent_hugepage/khugepaged/pages_to_scan 4096
test khugepaged-madvise-anon-collapse-single-pte-entry-s2
# [RUN] collapse_single_pte_entry (madvise:anon -s 2): Collapse PTE table with single PTE entry present
sysfs transparent_hugepage/hugepages-16kB/enabled always
P mmap A 2M rw private align=2M
P write A 4K 1
sysfs transparent_hugepage/enabled never
P madvise A 2M hugepage
P madvise A 2M collapse
expect P A mapped pmd
sysfs transparent_hugepage/enabled madvise
P read A 4K 1
