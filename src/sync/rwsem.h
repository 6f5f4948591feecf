// rw_semaphore with the kernel's fairness: waiters are served in arrival
// order, and once a writer waits, new readers queue behind it (libstdc++'s
// std::shared_mutex prefers readers and would starve a writer under a stream
// of faults). Consecutive waiting readers are woken together.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "sync/annotations.h"
#include "sync/lockdep.h"
#include "sync/sched.h"

namespace mmlab {

class CAPABILITY("rw_semaphore") RwSemaphore {
 public:
  explicit RwSemaphore(LockClass cls = LockClass::kGeneric) : cls_(cls) {}
  RwSemaphore(const RwSemaphore&) = delete;
  RwSemaphore& operator=(const RwSemaphore&) = delete;

  void down_read() ACQUIRE_SHARED();
  bool down_read_trylock() TRY_ACQUIRE_SHARED(true);
  void up_read() RELEASE_SHARED();
  void down_write() ACQUIRE();
  bool down_write_trylock() TRY_ACQUIRE(true);
  void up_write() RELEASE();
  // Writer to reader without letting another writer in (mmap_write_downgrade).
  void downgrade_write() RELEASE() ACQUIRE_SHARED();

  bool is_write_locked() const;
  int nr_readers() const;
  int nr_waiting_writers() const;  // for tests of the fairness rule
  int nr_waiting() const;          // readers and writers queued (for tests that force an interleaving)
  // Checked in debug builds: held (for write) and, by lockdep, by this thread.
  void assert_held() const ASSERT_SHARED_CAPABILITY(this) {
#if defined(MMLAB_DEBUG_VM)
    check_held(/*write=*/false);
    lockdep_assert_held(this);
#endif
  }
  void assert_write_held() const ASSERT_CAPABILITY(this) {
#if defined(MMLAB_DEBUG_VM)
    check_held(/*write=*/true);
    lockdep_assert_held(this);
#endif
  }

 private:
  void check_held(bool write) const;  // aborts if not (write-)locked

  // Readers that find the gate open enter with one compare-and-exchange on
  // state_ and leave with one decrement, as the kernel's rwsem fast path
  // does; the gate is closed while a writer holds the lock or any ticket
  // waits, and then everyone goes through m_ and the ticket queue.
  static constexpr uint64_t kGate = 1ull << 63;
  static constexpr uint64_t kReaders = kGate - 1;  // active readers, fast and slow
  void update_gate();  // m_ held: kGate set iff a writer holds it or a ticket waits
  bool queued() const { return serving_ != next_ticket_; }  // m_ held: a ticket waits
  uint64_t active_readers() const { return state_.load(std::memory_order_seq_cst) & kReaders; }
  void down_read_slow();
  template <typename Granted>
  void wait_granted(std::unique_lock<std::mutex>& g, const char* site, Granted granted);
  sched::Object sched_object() const { return {this, sched::ObjKind::kRwSem}; }

  std::atomic<uint64_t> state_{0};
  // The primitive the slow path is built on (std::mutex for cv_).
  mutable std::mutex m_;
  std::condition_variable cv_;
  // Ticket queue: every waiter takes a ticket; the head ticket may proceed
  // when compatible; readers at the head proceed in a batch.
  uint64_t next_ticket_ = 0;   // protected by m_
  uint64_t serving_ = 0;       // protected by m_: lowest ticket not yet granted
  bool writer_ = false;        // protected by m_: a writer holds the lock
  int waiting_writers_ = 0;    // protected by m_
  LockClass cls_;
};

class SCOPED_CAPABILITY ReadGuard {
 public:
  explicit ReadGuard(RwSemaphore* s) ACQUIRE_SHARED(s) : s_(s) { s_->down_read(); }
  ~ReadGuard() RELEASE() { if (s_) s_->up_read(); }
  void unlock() RELEASE() { s_->up_read(); s_ = nullptr; }
  ReadGuard(const ReadGuard&) = delete;
  ReadGuard& operator=(const ReadGuard&) = delete;
 private:
  RwSemaphore* s_;
};

class SCOPED_CAPABILITY WriteGuard {
 public:
  explicit WriteGuard(RwSemaphore* s) ACQUIRE(s) : s_(s) { s_->down_write(); }
  ~WriteGuard() RELEASE() { if (s_) s_->up_write(); }
  void unlock() RELEASE() { s_->up_write(); s_ = nullptr; }
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;
 private:
  RwSemaphore* s_;
};

// A hold on an RwSemaphore that may not exist, or that its holder may see
// released by someone else: the kernel's `if (anon_vma) down_write(...)`,
// the hugetlb VMA lock only a private mapping's owner has, and a GUP caller
// whose lock a fault dropped (*locked = 0). Whether it is held lives in a
// member, which clang's analysis cannot follow: lock() and unlock() are
// opted out, once, here.
class RwSemHold {
 public:
  enum class Mode : uint8_t { kRead, kWrite };
  RwSemHold(RwSemaphore* sem, Mode mode) : sem_(sem), mode_(mode) { lock(); }
  ~RwSemHold() { unlock(); }
  RwSemHold(const RwSemHold&) = delete;
  RwSemHold& operator=(const RwSemHold&) = delete;
  // Take it (again, after unlock()); nothing without a semaphore.
  void lock() NO_THREAD_SAFETY_ANALYSIS {
    if (!sem_ || held_) return;
    if (mode_ == Mode::kWrite) sem_->down_write();
    else sem_->down_read();
    held_ = true;
  }
  // Release it if held (idempotent).
  void unlock() NO_THREAD_SAFETY_ANALYSIS {
    if (!held_) return;
    if (mode_ == Mode::kWrite) sem_->up_write();
    else sem_->up_read();
    held_ = false;
  }
  // Someone else released it (GUP's *locked = 0): nothing left to release.
  void forget() { held_ = false; }

 private:
  RwSemaphore* sem_;
  Mode mode_;
  bool held_ = false;
};

}  // namespace mmlab
