# mremap() moves that span several VMAs (v6.17, mm/mremap.c remap_move()):
# a pure move (MREMAP_FIXED, old size == new size) moves every VMA of the
# range and keeps the gaps between them and at the end; a gap at the start,
# or no VMA at all, is EFAULT; what is mapped in the target's gaps stays.

test mremap-move-two-vmas-keeps-the-gap
proc P
P mmap A 12K rw private
P write A 12K 1
P munmap A+4K 4K
P write A+8K 4K 2
P mmap T 64K none private
P mremap A 12K 12K B to=T+16K
P read B 4K 1
P read B+8K 4K 2
expect-error SIGSEGV P read B+4K 4K
expect-error SIGSEGV P read A 4K
expect-error SIGSEGV P read A+8K 4K
expect P B mapped pte
expect P B+8K mapped pte

test mremap-move-keeps-what-is-mapped-in-the-target-gap
proc P
P mmap A 12K rw private
P write A 12K 1
P munmap A+4K 4K
P write A+8K 4K 2
P mmap T 12K rw private
P write T 12K 9
P mremap A 12K 12K B to=T
# The gap moves as a gap: the target's page there is not unmapped.
P read B 4K 1
P read B+4K 4K 9
P read B+8K 4K 2

test mremap-move-vmas-of-different-protections
proc P
P mmap A 16K rw private
P write A 16K 3
P mprotect A+8K 8K r
P mmap T 64K none private
P mremap A 16K 16K B to=T+32K
P read B 16K 3
P write B 8K 4
expect-error SIGSEGV P write B+8K 4K 5
expect-error SIGSEGV P read A 4K

test mremap-move-trailing-gap-is-kept
proc P
P mmap A 12K rw private
P write A 12K 1
P munmap A+8K 4K
P mmap T 12K rw private
P write T 12K 7
P mremap A 12K 12K B to=T
P read B 8K 1
P read B+8K 4K 7

test mremap-move-gap-at-start-is-efault
proc P
P mmap T 64K none private
P mmap A 12K rw private
P write A 12K 1
P munmap A 4K
expect-error EFAULT P mremap A 12K 12K B to=T
P read A+4K 8K 1

test mremap-move-no-vma-is-efault
proc P
P mmap T 64K none private
P mmap A 12K rw private
P munmap A 12K
expect-error EFAULT P mremap A 12K 12K B to=T

test mremap-resize-across-vmas-is-still-efault
proc P
P mmap A 12K rw private
P write A 12K 1
P mprotect A+4K 4K r
P mmap T 64K none private
# Only a pure move may span VMAs: a resize, or a move without MREMAP_FIXED, may not.
expect-error EFAULT P mremap A 12K 16K B to=T
expect-error EFAULT P mremap A 12K 16K B
P read A 12K 1

test mremap-move-uffd-vma-must-be-alone
proc P
P mmap A 16K rw private
P write A 16K 1
P userfaultfd A+8K 8K missing
P mmap T 64K none private
# The second VMA may not move with others (vma_multi_allowed): the first moved already.
expect-error EFAULT P mremap A 16K 16K B to=T
expect-error SIGSEGV P read A 4K
P read T 8K 1
P read A+8K 8K 1

test mremap-move-uffd-vma-first-must-cover-the-range
proc P
P mmap A 12K rw private
P write A 12K 1
P userfaultfd A 12K missing
P munmap A+8K 4K
P mmap T 64K none private
# A first VMA that may not move with others must cover the range, its trailing gap included.
expect-error EFAULT P mremap A 12K 12K B to=T
P read A 8K 1
P mremap A 8K 8K C to=T
P read C 8K 1

test mremap-move-pmd-thp-and-pte-vma
proc P
P mmap A 4M rw private align=2M
P madvise A 2M hugepage
P write A 4M 5
expect P A mapped pmd
P mprotect A+2M 2M r
P mmap T 8M none private align=2M
P mremap A 4M 4M B to=T+2M
expect P B mapped pmd
P read B 4M 5
expect-error SIGSEGV P write B+2M 4K 6
