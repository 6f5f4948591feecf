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
