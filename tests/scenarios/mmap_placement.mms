# mmap placement (mm/mmap.c do_mmap, __get_unmapped_area,
# arch_get_unmapped_area_topdown): a hint is taken when the range is free
# and ignored otherwise, MAP_FIXED replaces what the range holds (the
# old pages are zapped and their VMAs split as munmap would),
# MAP_FIXED_NOREPLACE is EEXIST over any overlap.

proc P

test mmap-hint-taken-when-free
P mmap W 64K none private
P munmap W 64K
P mmap A 16K rw private at=W+16K
P write A 16K 1
P read W+16K 16K 1
expect-error SIGSEGV P read W 4K

test mmap-hint-elsewhere-when-taken
P mmap W 16K rw private
P write W 16K 1
P mmap A 16K rw private at=W
# The hint overlaps W, so the mapping went elsewhere and W is untouched.
P write A 16K 2
P read W 16K 1
expect P A differ P W

test mmap-fixed-replaces-the-middle
P mmap W 16K rw private
P write W 16K 1
P mmap A 8K rw private fixed=W+4K
P read W 4K 1
P read W+4K 8K 0
P read W+12K 4K 1
expect P rss anon 8K
P write W+4K 4K 3
expect P rss anon 12K

test mmap-fixed-over-a-thp-zaps-the-huge-page
P mmap W 2M rw private align=2M
P madvise W 2M hugepage
P write W 2M 1
expect P W mapped pmd
P mmap A 4K r private fixed=W+1M
expect P W mapped pte
P read W 4K 1
P read W+1M 4K 0
P read W+1028K 4K 1
expect-error SIGSEGV P write W+1M 4K 2

test mmap-fixed-noreplace-adjacent-both-sides
P mmap W 12K none private
P munmap W 12K
P mmap M 4K rw private noreplace=W+4K
expect-error EEXIST P mmap X 8K rw private noreplace=W
expect-error EEXIST P mmap X 8K rw private noreplace=W+4K
P mmap L 4K rw private noreplace=W
P mmap R 4K rw private noreplace=W+8K
P write W 12K 5
P read W 12K 5
