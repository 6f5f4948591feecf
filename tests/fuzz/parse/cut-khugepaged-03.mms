proc P
sysfs transparent_hugepage/use_zero_page 0
sysfs transparent_hugepage/khugepaged/defrag 1
sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10
sysfs transparent_hugepage/khugepaged/max_ptes_none 511
sysfs transparent_hugepage/khugepaged/max_ptes_swap 64
sysfs transparent_hugepage/khugepaged/max_ptes_shared 256
sysfs transparent_hugepage/khugepaged/pages_to_scan 4096
test khugepaged-madvise-anon-collapse-empty-s4
# [RUN] collapse_empty (madvise:anon -s 4): Do not collapse empty PTE table
sysfs transparent_hugepage/hugepages-64kB/enabled always
P mmap A 2M rw private align=2M
sysfs transparent_hugepage/enabled never
P madvise A 2M hugepage
expect-error EINVAL P madvise A 2M collapse
expect P A mapped none
sysfs transparent_hugepage/enabled madvise
