# tune mm.zero_page off: kernels whose read faults never map the shared zero page
# (mm_forbids_zeropage(); a vendor boot option such as pvm_no_zero_page=1
# does this). A read fault allocates a zeroed page and maps it as a write
# fault would (writable and dirty where the VMA allows), so a later write
# is no CoW; a PMD-sized read in a THP VMA gets a THP, not the huge zero
# page. On the host backend each test runs where the host's kernel behaves
# so (the zero_page probe) and is skipped elsewhere.

test zero-page-off-read-allocates
tune mm.zero_page off
proc P
P mmap A 16K rw private
P read A 16K 0
expect P A zero no
expect P A exclusive yes
expect P A mapped pte
expect P rss anon 16K
P write A+4K 4K 7
expect counter fault.wp_copy 0
expect P rss anon 16K

test zero-page-off-read-only-mapping
tune mm.zero_page off
proc P
P mmap A 8K r private
P read A 8K 0
expect P A zero no
expect P rss anon 8K

test zero-page-off-pmd-thp-on-read
tune mm.zero_page off
sysfs transparent_hugepage/enabled always
proc P
P mmap A 2M rw private align=2M
P read A 4K 0
expect P A mapped pmd
expect P rss anon 2M

# The switch changes what read faults map, nothing else: a split of a
# folio still maps its zero-filled pages by the shared zero page
# (try_to_map_unused_to_zeropage), as this machine's kernel shows. Here a
# MADV_PAGEOUT that covers a read-faulted 16K folio in part splits it;
# its pages were never written, so all four become zero-page mappings and
# nothing is left to page out.
test zero-page-off-split-remaps-to-zero-page
tune mm.zero_page off
sysfs transparent_hugepage/hugepages-16kB/enabled always
swap 64M
proc P
P mmap A 64K rw private align=64K
P read A 16K 0
expect P A order 2
P write A+16K 16K 5
P madvise A+4K 28K pageout
expect P A zero yes
expect P A+4K zero yes
expect P A+12K zero yes
expect P A+16K swapped yes
expect P rss anon 0
P read A 16K 0
