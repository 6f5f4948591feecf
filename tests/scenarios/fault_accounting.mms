# Fault accounting (mm_account_fault): a fault counts once it completes, in
# pgfault and to the faulting task (getrusage's ru_minflt/ru_majflt: `expect
# P minflt|majflt`), so a fault retried under mmap_lock counts once; and the
# first fault of an anonymous VMA attaches its anon_vma under a tried
# mmap_lock (__vmf_anon_prepare) instead of retrying. pgfault is
# machine-wide on the host: the host side compares the per-process counts.

# "mmap 8K, write two pages": two faults, both finished under the per-VMA
# lock; the model used to retry the first under mmap_lock (three faults).
test anon-two-pages-two-faults
sysfs transparent_hugepage/enabled never
proc P
P mmap A 8K rw private
counters reset
P write A 8K 1
expect P minflt 2
expect P majflt 0
expect counter fault.vma_lock 2
expect counter fault.mmap_lock 0

# A fault that retries under mmap_lock (the kernel's __folio_lock_or_retry,
# injected) counts once: pgfault 2 for the two writes, not 3.
test retried-fault-counts-once
sysfs transparent_hugepage/enabled never
proc P
P mmap A 8K rw private
P write A 4K 1
counters reset
inject fault_retry times 1
P write A+4K 4K 2
expect counter inject.fault_retry 1
expect counter fault.vma_lock 1
expect counter fault.mmap_lock 1
expect vmstat pgfault 2
expect P minflt 2
expect P majflt 0

# Retried once more under mmap_lock, the fault completes with
# FAULT_FLAG_TRIED: the task counts it as major (pgmajfault does not move:
# the handlers that read count that).
test fault-retried-under-mmap-lock-is-major
sysfs transparent_hugepage/enabled never
proc P
P mmap A 8K rw private
P write A 4K 1
inject fault_retry times 2
P write A+4K 4K 2
expect counter inject.fault_retry 2
expect vmstat pgfault 2
expect vmstat pgmajfault 0
expect P minflt 1
expect P majflt 1

# Each process counts its own faults, those of its system calls too
# (MADV_POPULATE_WRITE); a forked child starts at 0 and a copy-on-write
# fault counts to the writer.
test fault-counts-per-process
sysfs transparent_hugepage/enabled never
proc P
P mmap A 16K rw private
P madvise A 8K populate_write
expect P minflt 2
P write A 16K 1
expect P minflt 4
P fork C
expect C minflt 0
C write A 4K 2
expect C minflt 1
expect P minflt 4
P read A+4K 4K 1
P write A+8K 4K 3
expect P minflt 5
expect P majflt 0
expect C majflt 0
