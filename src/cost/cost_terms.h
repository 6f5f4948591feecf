// The cost model's terms, written down once. A prediction of a run's CPU
// time is the sum over these terms of (the model's count of the term's
// counter) x (the term's cost in the profile). Each row:
//   id          the term's name in profiles and reports
//   counter     the counter it multiplies: a System::counter() name or a
//               /proc/vmstat item, as ScenarioResult::cost_counts names it
//   unit        what one count is, so the cost reads "ns per <unit>"
//   side        Kernel (the kernel's time), User (the program's own loads
//               and stores) or Harness (what measuring a case on the host
//               adds per request: counted to fit and validate the cases,
//               never in a tool's modelled time)
//   calibration Fit: non-negative least squares over the calibration cases
//                    (bench/cost/calibrate.mms) run on the host;
//               Measured: timed on its own, in user space, by the mechanism
//                    the kernel uses (rep stosb / rep movsb per folio size);
//   arch        the architectures the term applies to as written
//   meaning     what the kernel does per count
// Zeroing and copying are per order because a 4K page is cleared in cache
// and a 2M folio streams; there is no interpolation across orders.
#pragma once

#define MMLAB_COST_TERMS(X)                                                                                           \
  X(syscall, "mm.syscall", "call", Kernel, Fit, "any",                                                                \
    "system-call entry and exit of an mm call (mmap, munmap, mprotect, mremap, madvise, mlock*, fork)")            \
  X(fault_exception, "fault.exception", "exception", Kernel, Fit, "any",                                                \
    "a page-fault exception's entry and exit (do_user_addr_fault, its retries included); a guest whose hypervisor reflects the exception pays the round trip") \
  X(fault, "pgfault", "fault", Kernel, Fit, "any", "VMA lookup and lock and handle_mm_fault(), from an exception or from GUP")   \
  X(fault_anon, "fault.anon", "fault", Kernel, Fit, "any", "do_anonymous_page() or the PMD THP fault, beyond the entry") \
  X(fault_wp_copy, "fault.wp_copy", "fault", Kernel, Fit, "any", "wp_page_copy(): CoW fault beyond the entry and the copy") \
  X(fault_wp_reuse, "fault.wp_reuse", "fault", Kernel, Fit, "any", "wp_page_reuse(): the page made writable in place")     \
  X(fault_unshare, "fault.unshare", "fault", Kernel, Fit, "any", "FAULT_FLAG_UNSHARE copies beyond the entry")             \
  X(fault_mmap_lock, "fault.mmap_lock", "fault", Kernel, Fit, "any",                                                     \
    "a fault retried under mmap_lock after the per-VMA lock (a second entry)")                                           \
  X(alloc_pcp, "alloc.pcp", "folio", Kernel, Fit, "any", "a folio allocation from a per-CPU list (orders 0-3 and the PMD order)") \
  X(alloc_zone, "alloc.zone_lock", "folio", Kernel, Fit, "any", "a folio allocation under zone->lock (orders 4-8)")           \
  X(free_pcp, "free.pcp", "folio", Kernel, Fit, "any", "a folio freed to a per-CPU list")                                   \
  X(free_zone, "free.zone_lock", "folio", Kernel, Fit, "any", "a folio freed under zone->lock")                              \
  X(free_page, "pgfree", "page", Kernel, Fit, "any", "a base page returned to the allocator (pgfree counts pages)")          \
  X(rmap_update, "rmap.update", "run", Kernel, Fit, "any",                                                               \
    "the mapcount and refcount atomics of one folio run's add, dup or remove")                                          \
  X(pte_set, "pgtable.pte_set", "entry", Kernel, Fit, "x86_64",                                                           \
    "a PTE written by set_ptes() (with its folio's refcount and mapcount atomics, amortised per entry)")                \
  X(pte_clear, "pgtable.pte_clear", "entry", Kernel, Fit, "x86_64", "a present PTE cleared by zap or migration, with the rmap removal") \
  X(pte_modify, "pgtable.pte_modify", "entry", Kernel, Fit, "x86_64", "a PTE changed in place by mprotect (change_pte_range)") \
  X(pte_wrprotect, "pgtable.pte_wrprotect", "entry", Kernel, Fit, "x86_64", "a PTE write-protected by fork (wrprotect_ptes, a run at a time)") \
  X(zap_batch, "zap.pte_batches", "batch", Kernel, Fit, "any", "a zap of a run of PTEs of one large folio (one rmap and refcount update)") \
  X(pmd_move, "mremap.pmd_move", "table", Kernel, Fit, "x86_64 arm64", "a PTE table moved whole by mremap (move_normal_pmd)") \
  X(pgtable_alloc, "pgtable.alloc", "table", Kernel, Fit, "any", "a page-table page allocated and zeroed")                    \
  X(pgtable_free, "pgtable.free", "table", Kernel, Fit, "any", "a page-table page freed")                                   \
  X(lru_add, "lru.add", "folio", Kernel, Fit, "any", "folio_add_lru() (its per-CPU batch, drained)")                         \
  X(tlb_flush_single, "tlb.flush_single", "flush", Kernel, Fit, "x86_64", "flush_tlb_mm_range() of one entry (INVLPG)")      \
  X(tlb_flush_range, "tlb.flush_range", "flush", Kernel, Fit, "x86_64", "flush_tlb_mm_range() of 2 to 33 entries")           \
  X(tlb_flush_entry, "tlb.flush_entries", "entry", Kernel, Fit, "x86_64",                                               \
    "an entry of such a flush, invalidated on its own (INVLPG; a guest whose hypervisor traps it pays an exit each)")   \
  X(tlb_flush_full, "tlb.flush_full", "flush", Kernel, Fit, "x86_64", "flush_tlb_mm_range() of the whole address space")     \
  X(tlb_ipi, "tlb.ipi", "IPI", Kernel, Fit, "x86_64 without INVLPGB",                                                    \
    "a TLB-shootdown IPI to another CPU of the mm's mask (arm64's broadcast TLBI sends none)")                           \
  X(fork, "fork.mm", "fork", Kernel, Fit, "any",                                                                          \
    "dup_mm() and the task's creation, with the forking program's own address space (on the host: mmlab's agent)")      \
  X(fork_vma, "fork.vmas", "VMA", Kernel, Fit, "any", "a VMA duplicated by dup_mmap() (anon_vma_fork, the maple tree)")        \
  X(thp_split_pmd, "thp_split_pmd", "split", Kernel, Fit, "any", "a PMD mapping split into PTEs (__split_huge_pmd)")         \
  X(gup_walk, "gup.descents", "walk", Kernel, Fit, "any", "a follow_page_mask() walk from the top level")                     \
  X(gup_grab, "gup.grab_ref", "run", Kernel, Fit, "any", "try_grab_folio() of one same-folio run, taking its references")                                \
  X(gup_pin_page, "nr_foll_pin_acquired", "page", Kernel, Fit, "any", "a page pinned (FOLL_PIN), with its unpin")              \
  X(collapse, "collapse.attempt", "range", Kernel, Fit, "any",                                                            \
    "collapse_huge_page(): mmap write lock, pmdp_collapse_flush, the new PMD")                                           \
  X(collapse_folio, "collapse.folios_isolated", "folio", Kernel, Fit, "any", "a folio a collapse locked, isolated and released") \
  X(collapse_pte, "collapse.ptes_scanned", "entry", Kernel, Fit, "any", "a PTE read by the collapse scan")                   \
  X(collapse_copy, "collapse.bytes_copied", "byte", Kernel, Fit, "any", "a byte copied into a collapsed folio (page by page)") \
  X(zero_o0, "data.zeroed.order0", "byte", Kernel, Measured, "any", "a byte zeroed in a new 4K page")                         \
  X(zero_o1, "data.zeroed.order1", "byte", Kernel, Measured, "any", "a byte zeroed in a new 8K folio")                        \
  X(zero_o2, "data.zeroed.order2", "byte", Kernel, Measured, "any", "a byte zeroed in a new 16K folio")                       \
  X(zero_o3, "data.zeroed.order3", "byte", Kernel, Measured, "any", "a byte zeroed in a new 32K folio")                       \
  X(zero_o4, "data.zeroed.order4", "byte", Kernel, Measured, "any", "a byte zeroed in a new 64K folio")                       \
  X(zero_o5, "data.zeroed.order5", "byte", Kernel, Measured, "any", "a byte zeroed in a new 128K folio")                      \
  X(zero_o6, "data.zeroed.order6", "byte", Kernel, Measured, "any", "a byte zeroed in a new 256K folio")                      \
  X(zero_o7, "data.zeroed.order7", "byte", Kernel, Measured, "any", "a byte zeroed in a new 512K folio")                      \
  X(zero_o8, "data.zeroed.order8", "byte", Kernel, Measured, "any", "a byte zeroed in a new 1M folio")                        \
  X(zero_o9, "data.zeroed.order9", "byte", Kernel, Measured, "any", "a byte zeroed in a new 2M folio")                        \
  X(copy_o0, "data.copied.order0", "byte", Kernel, Measured, "any", "a byte copied into a 4K page (CoW, fork)")               \
  X(copy_o1, "data.copied.order1", "byte", Kernel, Measured, "any", "a byte copied into an 8K folio")                         \
  X(copy_o2, "data.copied.order2", "byte", Kernel, Measured, "any", "a byte copied into a 16K folio")                        \
  X(copy_o3, "data.copied.order3", "byte", Kernel, Measured, "any", "a byte copied into a 32K folio")                        \
  X(copy_o4, "data.copied.order4", "byte", Kernel, Measured, "any", "a byte copied into a 64K folio")                        \
  X(copy_o5, "data.copied.order5", "byte", Kernel, Measured, "any", "a byte copied into a 128K folio")                       \
  X(copy_o6, "data.copied.order6", "byte", Kernel, Measured, "any", "a byte copied into a 256K folio")                       \
  X(copy_o7, "data.copied.order7", "byte", Kernel, Measured, "any", "a byte copied into a 512K folio")                       \
  X(copy_o8, "data.copied.order8", "byte", Kernel, Measured, "any", "a byte copied into a 1M folio")                         \
  X(copy_o9, "data.copied.order9", "byte", Kernel, Measured, "any", "a byte copied into a 2M folio")                         \
  X(harness_case, "harness.case", "case", Harness, Fit, "any",                                                            \
    "what measuring one case on the host costs once (its first request after the reset: cold caches and TLB)")        \
  X(user_access, "user.accesses", "request", Harness, Fit, "any",                                                         \
    "one read or write request of a case's process: the host agent's wake-up and return, cold caches included")        \
  X(pte_first_use, "mmu.pte_first_use", "entry", User, Fit, "any",                                                       \
    "a load or store through a PTE for the first time since it was installed: a walk nothing cached and, on a guest whose hypervisor shadows its page tables, the exit that fills the shadow entry") \
  X(pte_first_use_kernel, "mmu.pte_first_use_kernel", "entry", Kernel, Fit, "any",                                     \
    "the same first use by the kernel's copy_to_user (process_vm_readv's copy into the reader's buffer)")             \
  X(user_write, "user.bytes_written", "byte", User, Fit, "any", "a byte the program stored (its memset)")                   \
  X(user_read, "user.bytes_read", "byte", User, Fit, "any", "a byte the program loaded")

// Not counted yet, so not in any prediction: rmap walks per mapping visited
// (rmap.update counts the mapcount changes, not walks),
// mmap_lock and per-VMA lock acquisitions apart from the fault's, the PMD
// entry written or cleared per huge mapping, a PMD leaf's first use (one per
// PMD fault, so it merges into the fault on every case), and TLB misses
// other than an entry's first use (the TLB model counts capacity misses
// with a tlb.geometry; on a VM with nested paging each is a two-dimensional
// walk, on one with shadow paging a walk of the shadow table).
