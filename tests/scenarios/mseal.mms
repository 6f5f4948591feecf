# mseal(2) (mm/mseal.c, v6.10; its madvise rule as v6.18 has it): a sealed
# VMA refuses munmap, mmap(MAP_FIXED) over it, mremap, mprotect (even to the
# protection it has), and the advice that discards data of an anonymous
# mapping the caller cannot write. Each test runs on the model and on the
# host (`mmlab diff --a model --b host tests/scenarios/mseal.mms`).

test mseal-refuses-munmap-mprotect-mremap
proc P
P mmap A 16K rw private
P write A 16K 1
P mseal A 16K
expect-error EPERM P munmap A 16K
expect-error EPERM P munmap A+4K 4K
expect-error EPERM P mprotect A 16K r
expect-error EPERM P mprotect A 16K rw
expect-error EPERM P mremap A 16K 8K B
expect-error EPERM P mremap A 16K 32K B
P read A 16K 1
expect P A+12K mapped pte

test mseal-twice-is-no-error
proc P
P mmap A 8K rw private
P mseal A 8K
P mseal A 8K
P mseal A+4K 4K
expect-error EPERM P munmap A 8K

test mseal-bad-arguments
proc P
P mmap A 16K rw private
expect-error EINVAL P mseal A+1 4K
P munmap A+4K 4K
# A hole anywhere in the range: at the start, inside, or at the end.
expect-error ENOMEM P mseal A 16K
expect-error ENOMEM P mseal A+4K 8K
expect-error ENOMEM P mseal A 8K
# Nothing was sealed by the refused calls.
P munmap A 4K
P mseal A+8K 8K
expect-error EPERM P munmap A+8K 4K

test mseal-part-of-a-vma
# The seal splits the VMA: the unsealed rest can still change.
proc P
P mmap A 16K rw private
P write A 16K 2
P mseal A+4K 4K
P mprotect A 4K r
P munmap A+8K 8K
expect-error EPERM P munmap A 8K
expect-error EPERM P mprotect A 8K rw
expect P A mapped pte
expect P A+4K mapped pte
expect P A+8K mapped none
P read A 8K 2

test mseal-munmap-across-sealed-refuses-all
# One sealed VMA in the range refuses the whole unmap: nothing goes.
proc P
P mmap A 16K rw private
P write A 16K 3
P mprotect A+8K 8K r
P mseal A+8K 8K
expect-error EPERM P munmap A 16K
expect P A mapped pte
expect P A+4K mapped pte
P read A 16K 3

test mseal-mmap-fixed-over-sealed
proc P
P mmap A 8K rw private
P write A 8K 4
P mseal A 8K
expect-error EPERM P mmap B 4K rw private fixed=A
P read A 8K 4

test mseal-madvise-discard-writable-private
# The caller could zero a writable mapping anyway: discarding is allowed.
proc P
P mmap A 8K rw private
P write A 8K 5
P mseal A 8K
P madvise A 8K dontneed
expect P rss anon 0
P read A 8K 0

test mseal-madvise-discard-readonly-private
proc P
P mmap A 8K rw private
P write A 8K 6
P mprotect A 8K r
P mseal A 8K
expect-error EPERM P madvise A 8K dontneed
expect-error EPERM P madvise A 8K free
expect-error EPERM P madvise A 8K dontfork
expect-error EPERM P madvise A 8K wipeonfork
expect-error EPERM P madvise A 8K guard_install
# Advice that discards nothing is allowed.
P madvise A 8K hugepage
P madvise A 8K cold
P read A 8K 6

test mseal-madvise-discard-readonly-shared
# A shared mapping's data stays in its object: discarding is allowed.
proc P
P mmap A 8K rw shared
P write A 8K 7
P mprotect A 8K r
P mseal A 8K
P madvise A 8K dontneed
P read A 8K 7

test mseal-madvise-discard-readonly-private-file
# A file mapping is not anonymous: the kernel lets the discard through,
# even of a private mapping's CoW copies, which are lost (the reads see the
# file again).
file F 8K
proc P
P mmap A 8K rw private file=F
P write A 8K 8
P mprotect A 8K r
P mseal A 8K
P madvise A 8K dontneed
P read A 8K 0

test mseal-inherited-by-fork
proc P
P mmap A 8K rw private
P write A 8K 9
P mseal A 8K
P fork C
expect-error EPERM C munmap A 8K
expect-error EPERM C mprotect A 8K r
C read A 8K 9
C write A 4K 10
C read A 4K 10
P read A 4K 9
