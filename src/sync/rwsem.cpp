#include "sync/rwsem.h"

#include <cstdio>
#include <cstdlib>

#include "sync/sched.h"

namespace mmlab {

// Every blocking acquire takes a ticket. A ticket is granted when it is the
// oldest ungranted one and the lock is compatible; granting a reader lets the
// next ticket (if also a reader) be considered at once, so a run of queued
// readers enters together, but a reader never overtakes a queued writer.
//
// The gate bit in state_ keeps that order with the fast path: it is set
// (under m_) before a ticket waits or a writer enters, so a reader's
// compare-and-exchange from a state without it fails from then on, and the
// reader queues. A waiter holds its ticket from before it first waits until
// it is granted, so with no ticket outstanding nobody can be waiting and a
// release need not wake anyone.

// A ticket's wait for its grant. Under the explorer the thread blocks on
// the semaphore in the scheduler rather than on cv_ (where it would hold
// the OS thread while the baton waits for it); every release wakes it to
// test its grant again, so the ticket order above is kept as it is.
template <typename Granted>
void RwSemaphore::wait_granted(std::unique_lock<std::mutex>& g, const char* site, Granted granted) {
  if (!sched::active()) {
    cv_.wait(g, granted);
    return;
  }
  while (!granted()) {
    // Only this thread runs until block_on passes the baton, so no release
    // can slip in between the test and the block.
    g.unlock();
    try {
      sched::block_on(site, sched_object());
    } catch (const sched::RunAborted&) {
      // The run is being ended: unwind without the lock (the ticket stays
      // taken; the run's System is not used again).
      lockdep_release(this);
      throw;
    }
    g.lock();
  }
}

void RwSemaphore::update_gate() {
  if (writer_ || queued()) state_.fetch_or(kGate, std::memory_order_seq_cst);
  else state_.fetch_and(~kGate, std::memory_order_seq_cst);
}

// The fast paths' CAS is strong (issue 34 §4): a spurious failure would
// cost nothing here, but the model's CAS loops are all strong so that none
// can depend on the host's LL/SC behaviour.
void RwSemaphore::down_read() {
  sched::point("down_read", sched::Op::kAcquireShared, sched_object());
  lockdep_acquire(this, cls_, 0);
  uint64_t s = state_.load(std::memory_order_relaxed);
  while (!(s & kGate))
    if (state_.compare_exchange_strong(s, s + 1, std::memory_order_seq_cst)) return;
  down_read_slow();
}

void RwSemaphore::down_read_slow() {
  std::unique_lock<std::mutex> g(m_);
  uint64_t t = next_ticket_++;
  update_gate();
  wait_granted(g, "down_read", [&] { return serving_ == t && !writer_; });
  serving_++;
  state_.fetch_add(1, std::memory_order_seq_cst);
  update_gate();
  if (queued()) cv_.notify_all();  // the next ticket may be a reader too
}

bool RwSemaphore::down_read_trylock() {
  sched::point("down_read_trylock", sched::Op::kTryAcquireShared, sched_object());
  uint64_t s = state_.load(std::memory_order_relaxed);
  while (!(s & kGate))
    if (state_.compare_exchange_strong(s, s + 1, std::memory_order_seq_cst)) {
      lockdep_acquire(this, cls_, 0, LockdepTry::kTry);
      return true;
    }
  return false;
}

void RwSemaphore::up_read() {
  sched::point("up_read", sched::Op::kReleaseShared, sched_object());
  lockdep_release(this);
  const uint64_t s = state_.fetch_sub(1, std::memory_order_seq_cst);
  // The last reader out while the gate is closed: a queued writer may be
  // waiting for the readers to drain (it re-reads the count under m_, so
  // taking m_ here cannot slip between its check and its wait).
  if ((s & kGate) && (s & kReaders) == 1) {
    std::lock_guard<std::mutex> g(m_);
    cv_.notify_all();
  }
  sched::wake(this);
}

void RwSemaphore::down_write() {
  sched::point("down_write", sched::Op::kAcquire, sched_object());
  lockdep_acquire(this, cls_, 0);
  std::unique_lock<std::mutex> g(m_);
  uint64_t t = next_ticket_++;
  waiting_writers_++;
  update_gate();
  wait_granted(g, "down_write", [&] { return serving_ == t && !writer_ && active_readers() == 0; });
  waiting_writers_--;
  serving_++;
  writer_ = true;
  update_gate();
}

bool RwSemaphore::down_write_trylock() {
  sched::point("down_write_trylock", sched::Op::kTryAcquire, sched_object());
  std::lock_guard<std::mutex> g(m_);
  if (writer_ || queued()) return false;
  // Close the gate first, so that no fast reader enters after the count is read.
  state_.fetch_or(kGate, std::memory_order_seq_cst);
  if (active_readers() != 0) {
    update_gate();
    return false;
  }
  next_ticket_++;
  serving_++;
  writer_ = true;
  lockdep_acquire(this, cls_, 0, LockdepTry::kTry);
  return true;
}

void RwSemaphore::up_write() {
  sched::point("up_write", sched::Op::kRelease, sched_object());
  lockdep_release(this);
  {
    std::lock_guard<std::mutex> g(m_);
    writer_ = false;
    update_gate();
    if (queued()) cv_.notify_all();
  }
  sched::wake(this);
}

void RwSemaphore::downgrade_write() {
  sched::point("downgrade_write", sched::Op::kDowngrade, sched_object());
  {
    std::lock_guard<std::mutex> g(m_);
    writer_ = false;
    state_.fetch_add(1, std::memory_order_seq_cst);
    update_gate();
    if (queued()) cv_.notify_all();
  }
  sched::wake(this);
}

bool RwSemaphore::is_write_locked() const {
  std::lock_guard<std::mutex> g(m_);
  return writer_;
}

int RwSemaphore::nr_readers() const { return static_cast<int>(active_readers()); }

int RwSemaphore::nr_waiting_writers() const {
  std::lock_guard<std::mutex> g(m_);
  return waiting_writers_;
}

int RwSemaphore::nr_waiting() const {
  std::lock_guard<std::mutex> g(m_);
  return static_cast<int>(next_ticket_ - serving_);
}

void RwSemaphore::check_held(bool write) const {
  std::lock_guard<std::mutex> g(m_);
  if (write ? !writer_ : (active_readers() == 0 && !writer_)) {
    std::fprintf(stderr, "RwSemaphore %p: %s on a semaphore not so held\n",
                 static_cast<const void*>(this), write ? "assert_write_held()" : "assert_held()");
    std::abort();
  }
}

}  // namespace mmlab
