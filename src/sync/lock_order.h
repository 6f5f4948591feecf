// The lock hierarchy of the model, written down once. It is the kernel's
// (mm/rmap.c header comment): a lock may be
// taken, blocking, only while every lock held is above it in this tree. The
// LockClass enum in sync/lockdep.h lists the same classes outermost first, and
// debug builds (MMLAB_DEBUG_VM) check the order at run time.
//
//   mm->mmap_lock                      LockClass::kMmapLock (rw_semaphore; read
//   |                                  for faults and GUP, write for layout
//   |                                  changes and fork)
//   +- per-VMA lock                    LockClass::kVmaLock (read: faults under
//      |                               lock_vma_under_rcu, instead of mmap_lock;
//      |                               write: vma_start_write, under mmap_lock
//      |                               write)
//      +- hugetlb fault mutex          LockClass::kHugetlbFaultMutex (one of a
//      |  |                            hashed table, per (mapping, index);
//      |  |                            sleeping; taken before the folio lock)
//      |  +- hugetlb VMA lock          LockClass::kHugetlbVmaLock (the reserve
//      |                               map's rw_sema: read for faults, write
//      |                               for zaps; the model takes it under the
//      |                               fault mutex, the order in which
//      |                               hugetlb_wp retakes the two)
//      +- folio lock (PG_locked)       LockClass::kFolioLock (sleeping)
//         +- mapping->i_mmap_rwsem     LockClass::kImmapLock (a file's VMAs:
//         |  |                         read for its rmap walks, write while a
//         |  |                         VMA of it changes its range)
//         |  +- anon_vma->rwsem        LockClass::kRmapLock
//         +- mm->page_table_lock,      LockClass::kPageTableLock (upper levels,
//            |                         PUD leaves)
//            +- split PMD lock         LockClass::kPmdLock
//               +- split PTE lock      LockClass::kPteLock; one per page-table
//                  |                   page. Two PTLs at once (fork's
//                  |                   copy_pte_range, mremap's move_ptes):
//                  |                   destination first at subclass 0, then
//                  |                   source at kSingleDepthNesting. A PMD
//                  |                   lock is never taken under a PTE lock of
//                  |                   a table below it.
//                  +- i_pages lock     LockClass::kPageCacheLock (the
//                  |                   mapping's xa_lock)
//                  +- split_queue_lock LockClass::kSplitQueueLock (deferred
//                  |                   split queue; under i_pages in
//                  |                   __folio_split, under the PTL when an
//                  |                   rmap removal queues a folio)
//                  +- deferred-free    LockClass::kDeferredFreeLock (page
//                  |  list             tables waiting for lockless walkers)
//                  +- zone->lock       LockClass::kZoneLock
//                     +- pcp lock      LockClass::kPcpLock (per-CPU page lists)
//                        +- TLB lock   LockClass::kTlbLock (one simulated CPU's
//                                      TLB: its fills and the flushes other
//                                      CPUs' IPIs apply; taken under any lock,
//                                      never holding another)
//
//   Leaf locks that never nest with the ones above (swap, LRU, counters, the
//   model's own bookkeeping): LockClass::kGeneric, exempt from the order check
//   but still never taken twice by one thread.
//
// Rules the tree alone does not say:
//   - Under any page-table lock the folio lock may only be tried
//     (folio_trylock in wp_can_reuse_anon_folio, hugetlb_fault). To sleep on
//     it: take a folio reference, drop the PTL, lock the folio, retake the PTL
//     and re-validate the entry (do_huge_pmd_wp_page). A successful trylock is
//     recorded as held but adds no order edge.
//   - One inversion the kernel's lockdep never sees (PG_locked is a bit
//     lock): hugetlb_wp of the reserve owner drops the fault mutex and the
//     hugetlb VMA lock to unmap the other mappers, then retakes both with the
//     old anon folio still locked. That folio is reached only through page
//     tables, where every locker only tries it (hugetlb_fault), so no thread
//     waits for it while holding the mutex; the retake hides the folio's lock
//     from the checker (hugetlb_wp_retake_locks in fault/hugetlb.cpp).
//   - Two locks of one class nest only with distinct subclasses, always in the
//     same subclass order (0 outside, kSingleDepthNesting inside).
//   - Sleeping (rw_semaphore, folio lock) under a spinlock (page-table, zone,
//     pcp) is forbidden; lockdep_assert_none_held_from() checks it.
#pragma once

namespace mmlab {

// The subclass of the inner of two nested locks of one class (the kernel's
// SINGLE_DEPTH_NESTING): spin_lock_nested(src_ptl, SINGLE_DEPTH_NESTING).
inline constexpr int kSingleDepthNesting = 1;

}  // namespace mmlab
