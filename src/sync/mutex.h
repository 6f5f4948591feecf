// struct mutex: a sleeping lock the compiler's thread-safety analysis and the
// lock-order checker both see. Every lock of the model that is not a
// page-table spinlock or an rw_semaphore is one of these (std::mutex is
// invisible to -Wthread-safety and to lockdep). The lock class is the one
// the lock has in sync/lock_order.h; kGeneric for the model's leaf
// bookkeeping locks.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "sync/annotations.h"
#include "sync/lockdep.h"
#include "sync/sched.h"

namespace mmlab {

class CAPABILITY("mutex") Mutex {
 public:
  // constexpr: a global Mutex is initialised before any constructor runs.
  constexpr explicit Mutex(LockClass cls = LockClass::kGeneric) : cls_(cls) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock(int subclass = 0) ACQUIRE() {
    sched::point("mutex_lock", sched::Op::kAcquire, sched_object());
    lockdep_acquire(this, cls_, subclass);
    if (sched::active()) [[unlikely]] {
      // Under the explorer a sleeping m_.lock() would park this OS thread
      // while the holder waits for the baton: try, else block on the lock.
      // (glibc's pthread_mutex_trylock fails only when the mutex is held.)
      // A run ended meanwhile unwinds from here without the lock.
      try {
        while (!m_.try_lock()) sched::block_on("mutex_lock", sched_object());
      } catch (const sched::RunAborted&) {
        lockdep_release(this);
        throw;
      }
    } else {
      m_.lock();
    }
    set_owner();
  }
  bool try_lock() TRY_ACQUIRE(true) {
    sched::point("mutex_trylock", sched::Op::kTryAcquire, sched_object());
    if (!m_.try_lock()) return false;
    lockdep_acquire(this, cls_, 0, LockdepTry::kTry);
    set_owner();
    return true;
  }
  void unlock() RELEASE() {
    sched::point("mutex_unlock", sched::Op::kRelease, sched_object());
    clear_owner();
    lockdep_release(this);
    m_.unlock();
    sched::wake(this);
  }
  // For code that requires the lock (lockdep_assert_held): checked in debug
  // builds against the owning thread.
  void assert_held() const ASSERT_CAPABILITY(this) {
#if defined(MMLAB_DEBUG_VM)
    if (owner_.load(std::memory_order_relaxed) != &t_owner_tag) {
      std::fprintf(stderr, "Mutex %p: assert_held() by a thread that does not hold it\n",
                   static_cast<const void*>(this));
      std::abort();
    }
#endif
  }

 private:
#if defined(MMLAB_DEBUG_VM)
  // A thread is named by the address of its own thread_local tag.
  static inline thread_local char t_owner_tag;
  void set_owner() { owner_.store(&t_owner_tag, std::memory_order_relaxed); }
  void clear_owner() { owner_.store(nullptr, std::memory_order_relaxed); }
  std::atomic<const char*> owner_{nullptr};
#else
  void set_owner() {}
  void clear_owner() {}
#endif
  sched::Object sched_object() const { return {this, sched::ObjKind::kMutex}; }

  std::mutex m_;  // the primitive this capability wraps
  LockClass cls_;
};

// mutex_lock() ... mutex_unlock() over a scope; unlock() where the kernel
// drops the lock before the end of the function.
class SCOPED_CAPABILITY MutexGuard {
 public:
  explicit MutexGuard(Mutex* m, int subclass = 0) ACQUIRE(m) : m_(m) { m_->lock(subclass); }
  ~MutexGuard() RELEASE() {
    if (m_) m_->unlock();
  }
  void unlock() RELEASE() {
    m_->unlock();
    m_ = nullptr;
  }
  MutexGuard(const MutexGuard&) = delete;
  MutexGuard& operator=(const MutexGuard&) = delete;

 private:
  Mutex* m_;
};

}  // namespace mmlab
