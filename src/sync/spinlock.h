// spinlock_t: a one-word lock that can live inside per-frame metadata (the
// split PTE lock lives in the page-table page's Page, as in the kernel's
// ptdesc). It is an implicit-lifetime type: all-zero bytes are an unlocked
// lock, so it works inside the lazily-touched memmap without construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "sync/annotations.h"
#include "sync/lock_order.h"
#include "sync/lockdep.h"
#include "sync/sched.h"

namespace mmlab {

class CAPABILITY("spinlock") SpinLock {
 public:
  void lock(LockClass cls = LockClass::kGeneric, int subclass = 0) ACQUIRE() {
    std::atomic_ref<uint32_t> w(word_);
    sched::point("spin_lock", sched::Op::kAcquire, sched_object());
    lockdep_acquire(this, cls, subclass);
    if (sched::active()) [[unlikely]] {
      // One thread runs at a time: spinning would never see the holder
      // move, so a failed try blocks on the lock until unlock() wakes it.
      // A run ended meanwhile unwinds from here without the lock.
      try {
        while (!try_set(w)) sched::block_on("spin_lock", sched_object());
      } catch (const sched::RunAborted&) {
        lockdep_release(this);
        throw;
      }
      return;
    }
    for (unsigned spins = 0;; spins++) {
      uint32_t expected = 0;
      if (w.load(std::memory_order_relaxed) == 0 &&
          w.compare_exchange_weak(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
        return;
      if (spins > 64) std::this_thread::yield();
    }
  }
  bool try_lock(LockClass cls = LockClass::kGeneric) TRY_ACQUIRE(true) {
    std::atomic_ref<uint32_t> w(word_);
    sched::point("spin_trylock", sched::Op::kTryAcquire, sched_object());
    if (!try_set(w)) return false;
    lockdep_acquire(this, cls, 0, LockdepTry::kTry);
    return true;
  }
  void unlock() RELEASE() {
    sched::point("spin_unlock", sched::Op::kRelease, sched_object());
    lockdep_release(this);
    std::atomic_ref<uint32_t>(word_).store(0, std::memory_order_release);
    sched::wake(this);
  }
  bool is_locked() const {
    return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(word_)).load(std::memory_order_relaxed) != 0;
  }
  // For code that knows the lock is held (lockdep_assert_held): checked in
  // debug builds, by lockdep, to be held by this thread.
  void assert_held() const ASSERT_CAPABILITY(this) {
#if defined(MMLAB_DEBUG_VM)
    if (!is_locked()) {
      std::fprintf(stderr, "SpinLock %p: assert_held() on an unlocked lock\n", static_cast<const void*>(this));
      std::abort();
    }
    lockdep_assert_held(this);
#endif
  }

  uint32_t word_;  // 0 unlocked, 1 locked. Public only to stay an aggregate.

 private:
  // Strong: a spurious failure would block a thread under the explorer on
  // a lock nobody holds.
  static bool try_set(std::atomic_ref<uint32_t>& w) {
    uint32_t expected = 0;
    return w.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  sched::Object sched_object() const { return {this, sched::ObjKind::kSpinLock}; }
};
static_assert(sizeof(SpinLock) == 4);

// Take a lock that the function returns to its caller (pmd_lock,
// pte_offset_map_lock's *ptlp). The only opt-out for returned locks: the
// analysis cannot name a lock by a return value or an out-parameter, so the
// caller states it with assert_held() right after the call.
inline SpinLock* spin_lock_returned(SpinLock* l, LockClass cls, int subclass = 0) NO_THREAD_SAFETY_ANALYSIS {
  l->lock(cls, subclass);
  return l;
}

// RAII holder; early release with unlock() where the kernel drops a lock mid-function.
class SCOPED_CAPABILITY SpinGuard {
 public:
  explicit SpinGuard(SpinLock* l, LockClass cls = LockClass::kGeneric, int subclass = 0) ACQUIRE(l)
      : l_(l) {
    l_->lock(cls, subclass);
  }
  ~SpinGuard() RELEASE() {
    if (l_) l_->unlock();
  }
  void unlock() RELEASE() {
    l_->unlock();
    l_ = nullptr;
  }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  SpinLock* l_;
};

// The second of two page-table locks that may be the same lock (both tables
// in one page, or the PUD level's one lock): taken nested, at
// kSingleDepthNesting, unless it is the lock already held (move_ptes,
// move_huge_pmd: `if (new_ptl != old_ptl) spin_lock_nested(...)`).
class SCOPED_CAPABILITY SpinNestedGuard {
 public:
  SpinNestedGuard(SpinLock* l, const SpinLock* held, LockClass cls) ACQUIRE(l) : l_(l != held ? l : nullptr) {
    if (l_) l_->lock(cls, kSingleDepthNesting);
  }
  ~SpinNestedGuard() RELEASE() {
    if (l_) l_->unlock();
  }
  void unlock() RELEASE() {
    if (l_) l_->unlock();
    l_ = nullptr;
  }
  SpinNestedGuard(const SpinNestedGuard&) = delete;
  SpinNestedGuard& operator=(const SpinNestedGuard&) = delete;

 private:
  SpinLock* l_;
};

}  // namespace mmlab
