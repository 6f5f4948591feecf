// A lock-order checker for debug builds (CONFIG_DEBUG_VM / lockdep): records
// which lock classes are taken while others are held and aborts on an
// inversion. Two locks of one class may nest only with distinct subclasses
// (fork and mremap hold the destination PTL, then the source PTL as
// SINGLE_DEPTH_NESTING). Compiled to nothing unless MMLAB_DEBUG_VM.
#pragma once

#include <cstdint>

namespace mmlab {

// Lock classes in the kernel's order, outermost first (see lock_order.h).
enum class LockClass : uint8_t {
  kGeneric = 0,       // leaf locks that are never nested with the ones below
  kMmapLock,          // mm->mmap_lock (rw_semaphore)
  kVmaLock,           // per-VMA lock
  kHugetlbFaultMutex, // hugetlb_fault_mutex_table[hash] (sleeping)
  kHugetlbVmaLock,    // the hugetlb VMA lock, resv_map->rw_sema (sleeping)
  kFolioLock,         // PG_locked (sleeping)
  kImmapLock,         // mapping->i_mmap_rwsem (before an anon_vma's, as vma_prepare takes them)
  kRmapLock,          // anon_vma->rwsem
  kPageTableLock,     // mm->page_table_lock (upper levels, PUD leaves)
  kPmdLock,           // split PMD lock
  kPteLock,           // split PTE lock
  kPageCacheLock,     // mapping->i_pages xa_lock
  kSplitQueueLock,    // ds_queue->split_queue_lock
  kDeferredFreeLock,  // the deferred page-table free list (mmu_gather's batch)
  kZoneLock,          // zone->lock
  kPcpLock,           // per-CPU page list lock
  kTlbLock,           // one simulated CPU's TLB (the model's; innermost)
  kNrClasses,
};

enum class LockdepTry : uint8_t { kBlocking, kTry };

#if defined(MMLAB_DEBUG_VM)
void lockdep_acquire(const void* lock, LockClass cls, int subclass, LockdepTry t = LockdepTry::kBlocking);
void lockdep_release(const void* lock);
// Aborts unless the calling thread holds no lock of class >= cls (e.g. before sleeping).
void lockdep_assert_none_held_from(LockClass cls);
// lockdep_assert_held: aborts unless the calling thread holds `lock`.
void lockdep_assert_held(const void* lock);
// Whether the calling thread holds lock (for asserts of "one of these").
bool lockdep_is_held(const void* lock);
#else
inline void lockdep_acquire(const void*, LockClass, int, LockdepTry = LockdepTry::kBlocking) {}
inline void lockdep_release(const void*) {}
inline void lockdep_assert_none_held_from(LockClass) {}
inline void lockdep_assert_held(const void*) {}
inline bool lockdep_is_held(const void*) { return true; }
#endif

}  // namespace mmlab
