# Hand-written scenarios: anonymous faults, folio orders, GUP accounting and
# the batching series' counter facts. Every test ends with the checker.

test anon-read-maps-zero-page
proc P
P mmap A 16K rw private
P read A 16K 0
expect P A zero yes
expect P A mapped pte
expect P rss anon 0
P write A+4K 4K 7
expect P A+4K zero no
expect P A+4K exclusive yes
expect P rss anon 4K
expect counter fault.wp_copy 1

test mthp-64k-order-and-stats
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 1M rw private align=1M
P write A+20K 4K 1
expect P A order 4
expect P A+60K order 4
expect P A+64K mapped none
expect sysfs transparent_hugepage/hugepages-64kB/stats/anon_fault_alloc 1
expect P rss anon 64K

# A split of a PTE-mapped mTHP unmaps it one page at a time
# (try_to_migrate_one): from the first page on the folio is partially mapped
# and queued for deferred split, which counts; the split then takes it off
# the queue and clears the flag.
test split-of-mthp-passes-through-partially-mapped
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 1M rw private align=1M
P write A 64K 1
expect P A order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/split_deferred 0
P madvise A 4K pageout
expect P A+16K order 0
expect sysfs transparent_hugepage/hugepages-64kB/stats/split 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/split_deferred 1
expect sysfs transparent_hugepage/hugepages-64kB/stats/nr_anon_partially_mapped 0

test pmd-thp-and-partial-dontneed
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P write A 2M 0x11
expect P A mapped pmd
expect vmstat thp_fault_alloc 1
P madvise A+1M 1M dontneed
expect P A mapped pte
expect P A order 9
expect vmstat thp_split_pmd 1
expect sysfs transparent_hugepage/hugepages-2048kB/stats/split_deferred 1
P read A 1M 0x11
P read A+1M 1M 0

test huge-zero-then-write
proc P
P mmap A 2M rw private align=2M
P madvise A 2M hugepage
P read A 2M 0
expect P A mapped pmd
expect P A zero yes
P write A 4K 1
expect P A zero no
expect P A order 9
expect vmstat thp_fault_alloc 1

test bad-accesses-signal
proc P
P mmap A 8K r private
expect-error SIGSEGV P write A 4K 1
P mprotect A 4K none
expect-error SIGSEGV P read A 4K
P munmap A 8K
expect-error SIGSEGV P read A 4K
expect-error EINVAL P munmap A+1 4K
expect-error EINVAL P madvise A+1 4K dontneed

test gup-invalid-args
proc P
P mmap A 4K rw private
P write A 4K 1
P gup H A 1 get,fast,longterm
expect H -EINVAL
P gup H2 A 1 pin,longterm
expect H2 1
expect P A pinned yes
unpin H2
expect P A pinned no

test pin-small-and-large
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 3
P gup H A 16 pin,fast,write,longterm
expect H 16
expect P A pinned yes
expect vmstat nr_foll_pin_acquired 16
H write 0 4K 9
P read A 4K 9
unpin H dirty
expect vmstat nr_foll_pin_released 16

test legacy-walk-counters
tune gup.walk legacy
proc P
P mmap A 2M rw private align=2M
P madvise A 2M nohugepage
P write A 2M 1
counters reset
P gup H A 512 pin,longterm
expect H 512
expect counter gup.descents 512
expect counter gup.pte_lock 512
unpin H

test walk-counters
tune gup.walk walk
proc P
P mmap A 2M rw private align=2M
P madvise A 2M nohugepage
P write A 2M 1
counters reset
P gup H A 512 pin,longterm
expect H 512
expect counter gup.descents 1
expect counter gup.pte_lock 1
expect counter gup.grab 512
unpin H

test batch-mark-accessed-once-per-run
tune gup.walk batch
sysfs transparent_hugepage/hugepages-64kB/enabled always
sysfs transparent_hugepage/hugepages-2048kB/enabled never
proc P
P mmap A 2M rw private align=2M
P madvise A 2M populate_write
counters reset
P gup H A 512 get
expect H 512
expect counter gup.grab 32
expect counter gup.mark_accessed 32
unpin H

test dump-holes
proc P
P mmap A 12K rw private
P write A 4K 1
P read A+4K 4K 0
P dump D A 12K
expect D pages 1 holes 2

test hugetlb-unaligned-split-is-einval
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 4M rw private hugetlb=2M
expect-error EINVAL P mprotect A 4K r
expect-error EINVAL P munmap A+4K 4K
P mprotect A 2M r
expect-error SIGSEGV P write A 4K 1
P write A+2M 4K 1
expect P A+2M mapped pmd
expect sysfs hugepages/hugepages-2048kB/free_hugepages 1
