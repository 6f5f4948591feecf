# The kernel's historical races as race blocks (docs/RACES.md, "The
# historical races"; docs/scenario-language.md, "Races"). For each race:
# a directed minimal schedule that fails under the revert and passes
# without it, and a PCT block that finds it under the revert and nothing
# without. The reverted tests set the revert with `tune` and say what
# breaks with `expect violation`; a reverted race block stops at the first
# run that shows it. The gtests (tests/unit/race_history_test.cpp) hold
# the same races with 2,000-run PCT searches per seed and K2, M3; here the
# fixed PCT blocks run fewer runs to keep ctest cheap.

# ---------------------------------------------------------------------------
# K1: fork against a GUP-fast pin. Fix: 57efa1fe5957 "mm/gup: prevent
# gup_fast from racing with COW during fork" (revert.gup-fast-wp-seq).
# G pins P's page for writing after fork has shared it with the child but
# before it write-protects P's PTE (fork.before_wrprotect): the PTE is
# still writable, so the pin needs no unshare. P's next write copies, and
# the pin is left on the child's page: the device's write is not P's.

test k1-fork-gup-fast-directed-reverted
tune revert.gup-fast-wp-seq on
proc P
P mmap A 4K rw private
P write A 4K 1
expect violation expected every byte of A
race schedule="F@fork.before_wrprotect G F"
thread F
P fork C
thread G
P gup H A 1 pin,fast,write,longterm
end
P write A 1 2
H write 0 1 9
P read A 1 9

test k1-fork-gup-fast-directed-fixed
proc P
P mmap A 4K rw private
P write A 4K 1
race schedule="F@fork.before_wrprotect G F"
thread F
P fork C
thread G
P gup H A 1 pin,fast,write,longterm
end
P write A 1 2
H write 0 1 9
P read A 1 9

test k1-fork-gup-fast-pct-reverted
tune revert.gup-fast-wp-seq on
proc P
P mmap A 4K rw private
P write A 4K 1
expect violation expected every byte of A
race pct=2 runs=2000 seed=1
thread F
P fork C
thread G
P gup H A 1 pin,fast,write,longterm
end
P write A 1 2
H write 0 1 9
P read A 1 9

test k1-fork-gup-fast-pct-fixed
proc P
P mmap A 4K rw private
P write A 4K 1
race pct=2 runs=200 seed=1
thread F
P fork C
thread G
P gup H A 1 pin,fast,write,longterm
end
P write A 1 2
H write 0 1 9
P read A 1 9

# ---------------------------------------------------------------------------
# K3: GUP-fast against a split. Fix: c24d37322548 "mm/gup: fix
# try_grab_compound_head() race with split_huge_page()"
# (revert.gup-fast-folio-recheck). G pins page X (A+20K) of a 64K mTHP;
# it has read X's folio and not yet referenced it (gup_fast.folio_read)
# when S splits the folio (a partial munmap queues it, the shrinker splits
# it). Without the re-check of page_folio the reference lands on the old
# head, an order-0 folio now: the checker, told of the pin on X, finds the
# reference counts wrong.

test k3-gup-fast-split-directed-reverted
tune revert.gup-fast-folio-recheck on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
expect violation invariant checker
race schedule="G@gup_fast.folio_read S G"
thread G
P gup H A+20K 1 pin,fast
thread S
P munmap A+60K 4K
shrink-slab
end
check

test k3-gup-fast-split-directed-fixed
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
race schedule="G@gup_fast.folio_read S G"
thread G
P gup H A+20K 1 pin,fast
thread S
P munmap A+60K 4K
shrink-slab
end
check

test k3-gup-fast-split-pct-reverted
tune revert.gup-fast-folio-recheck on
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
expect violation invariant checker
race pct=2 runs=2000 seed=1
thread G
P gup H A+20K 1 pin,fast
thread S
P munmap A+60K 4K
shrink-slab
end
check

test k3-gup-fast-split-pct-fixed
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
race pct=2 runs=200 seed=1
thread G
P gup H A+20K 1 pin,fast
thread S
P munmap A+60K 4K
shrink-slab
end
check

# ---------------------------------------------------------------------------
# K4: Dirty COW, CVE-2016-5195. Fix: 19be0eaffa3a "mm: remove gup_flags
# FOLL_WRITE games from __get_user_pages()" (revert.gup-force drop-write).
# W pokes a byte into a read-only private mapping of F with FOLL_FORCE |
# FOLL_WRITE, as /proc/PID/mem does; its write fault breaks CoW and, before
# the fix, the retry looks the page up without FOLL_WRITE. D's
# MADV_DONTNEED between the fault and the retry (gup.after_faultin) makes
# the retry read-fault the page-cache page back in, and the poke lands in
# the file (read through the shared mapping S).

test k4-dirty-cow-directed-reverted
tune revert.gup-force drop-write
file F 4K
proc P
P mmap S 4K rw shared file=F
P write S 4K 0x41
P mmap A 4K r private file=F
P read A 4K 0x41
expect violation expected every byte of S
race schedule="W@gup.after_faultin D W"
thread W
P gup H A 1 get,write,force
H write 0 1 0x58
unpin H dirty
thread D
P madvise A 4K dontneed
end
P read S 4K 0x41

test k4-dirty-cow-directed-fixed
file F 4K
proc P
P mmap S 4K rw shared file=F
P write S 4K 0x41
P mmap A 4K r private file=F
P read A 4K 0x41
race schedule="W@gup.after_faultin D W"
thread W
P gup H A 1 get,write,force
H write 0 1 0x58
unpin H dirty
thread D
P madvise A 4K dontneed
end
P read S 4K 0x41

test k4-dirty-cow-pct-reverted
tune revert.gup-force drop-write
file F 4K
proc P
P mmap S 4K rw shared file=F
P write S 4K 0x41
P mmap A 4K r private file=F
P read A 4K 0x41
expect violation expected every byte of S
race pct=2 runs=2000 seed=1
thread W
P gup H A 1 get,write,force
H write 0 1 0x58
unpin H dirty
thread D
P madvise A 4K dontneed
end
P read S 4K 0x41

test k4-dirty-cow-pct-fixed
file F 4K
proc P
P mmap S 4K rw shared file=F
P write S 4K 0x41
P mmap A 4K r private file=F
P read A 4K 0x41
race pct=2 runs=200 seed=1
thread W
P gup H A 1 get,write,force
H write 0 1 0x58
unpin H dirty
thread D
P madvise A 4K dontneed
end
P read S 4K 0x41

# ---------------------------------------------------------------------------
# K8: mTHP CoW against a read-only long-term pin of part of the folio.
# Source: "[RFC PATCH 6/7] mm: memory: add mTHP support for wp" as posted
# (cow.policy rfc); the fix is the corrected posting (cow.policy fixed).
# W writes page 0 of a 64K mTHP shared with the child and stops before the
# re-validation (wp_copy.before_revalidate); G pins page 5 read-only and
# long-term (its unshare copies the run); W re-validates with
# pte_range_readonly only and installs its copy over G's pinned pages: the
# pin no longer sees what P writes.

test k8-mthp-cow-pin-directed-reverted
tune cow.policy rfc
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
expect violation expected every byte H reads
race schedule="W@wp_copy.before_revalidate G W"
thread W
P write A 4K 2
thread G
P gup H A+20K 1 pin,longterm
end
P write A+20K 1 7
H read 0 1 7
C read A+20K 4K 1

test k8-mthp-cow-pin-directed-fixed
tune cow.policy fixed
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
race schedule="W@wp_copy.before_revalidate G W"
thread W
P write A 4K 2
thread G
P gup H A+20K 1 pin,longterm
end
P write A+20K 1 7
H read 0 1 7
C read A+20K 4K 1

test k8-mthp-cow-pin-pct-reverted
tune cow.policy rfc
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
expect violation expected every byte H reads
race pct=2 runs=2000 seed=1
thread W
P write A 4K 2
thread G
P gup H A+20K 1 pin,longterm
end
P write A+20K 1 7
H read 0 1 7
C read A+20K 4K 1

test k8-mthp-cow-pin-pct-fixed
tune cow.policy fixed
sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
race pct=2 runs=200 seed=1
thread W
P write A 4K 2
thread G
P gup H A+20K 1 pin,longterm
end
P write A+20K 1 7
H read 0 1 7
C read A+20K 4K 1

# ---------------------------------------------------------------------------
# M2: the model's own hugetlb reservation race. Fix: d3c00a0 "hugetlb:
# model the hugetlb VMA lock of private owners (resv_map->rw_sema), and
# audit reservations in the checker" (revert.hugetlb-zap-vma-lock). Z
# (MADV_DONTNEED by the reservation owner) unmaps the 2M page; before it
# restores the index's reservation (hugetlb_zap.after_unmap), F faults the
# index back in from another thread, consuming no reservation; Z then
# reserves an index that is mapped: the checker's reservation audit.

test m2-hugetlb-zap-directed-reverted
tune revert.hugetlb-zap-vma-lock on
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 1 1
expect violation invariant checker
race schedule="Z@hugetlb_zap.after_unmap F Z"
thread Z
P madvise A 2M dontneed
thread F
P write A 1 2
end
check

test m2-hugetlb-zap-directed-fixed
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 1 1
race schedule="Z@hugetlb_zap.after_unmap F Z"
thread Z
P madvise A 2M dontneed
thread F
P write A 1 2
end
check

test m2-hugetlb-zap-pct-reverted
tune revert.hugetlb-zap-vma-lock on
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 1 1
expect violation invariant checker
race pct=2 runs=2000 seed=1
thread Z
P madvise A 2M dontneed
thread F
P write A 1 2
end
check

test m2-hugetlb-zap-pct-fixed
sysfs hugepages/hugepages-2048kB/nr_hugepages 2
proc P
P mmap A 2M rw private hugetlb=2M
P write A 1 1
race pct=2 runs=200 seed=1
thread Z
P madvise A 2M dontneed
thread F
P write A 1 2
end
check
