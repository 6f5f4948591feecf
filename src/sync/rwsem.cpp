#include "sync/rwsem.h"

#include <cstdio>
#include <cstdlib>

namespace mmlab {

// Every blocking acquire takes a ticket. A ticket is granted when it is the
// oldest ungranted one and the lock is compatible; granting a reader lets the
// next ticket (if also a reader) be considered at once, so a run of queued
// readers enters together, but a reader never overtakes a queued writer.

void RwSemaphore::down_read() {
  lockdep_acquire(this, cls_, 0);
  std::unique_lock<std::mutex> g(m_);
  uint64_t t = next_ticket_++;
  cv_.wait(g, [&] { return serving_ == t && !writer_; });
  serving_++;
  readers_++;
  cv_.notify_all();  // the next ticket may be a reader too
}

bool RwSemaphore::down_read_trylock() {
  std::lock_guard<std::mutex> g(m_);
  if (writer_ || serving_ != next_ticket_) return false;
  next_ticket_++;
  serving_++;
  readers_++;
  lockdep_acquire(this, cls_, 0, LockdepTry::kTry);
  return true;
}

void RwSemaphore::up_read() {
  lockdep_release(this);
  std::lock_guard<std::mutex> g(m_);
  if (--readers_ == 0) cv_.notify_all();
}

void RwSemaphore::down_write() {
  lockdep_acquire(this, cls_, 0);
  std::unique_lock<std::mutex> g(m_);
  uint64_t t = next_ticket_++;
  waiting_writers_++;
  cv_.wait(g, [&] { return serving_ == t && !writer_ && readers_ == 0; });
  waiting_writers_--;
  serving_++;
  writer_ = true;
}

bool RwSemaphore::down_write_trylock() {
  std::lock_guard<std::mutex> g(m_);
  if (writer_ || readers_ || serving_ != next_ticket_) return false;
  next_ticket_++;
  serving_++;
  writer_ = true;
  lockdep_acquire(this, cls_, 0, LockdepTry::kTry);
  return true;
}

void RwSemaphore::up_write() {
  lockdep_release(this);
  std::lock_guard<std::mutex> g(m_);
  writer_ = false;
  cv_.notify_all();
}

void RwSemaphore::downgrade_write() {
  std::lock_guard<std::mutex> g(m_);
  writer_ = false;
  readers_++;
  cv_.notify_all();
}

bool RwSemaphore::is_write_locked() const {
  std::lock_guard<std::mutex> g(m_);
  return writer_;
}

int RwSemaphore::nr_readers() const {
  std::lock_guard<std::mutex> g(m_);
  return readers_;
}

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
  if (write ? !writer_ : (readers_ == 0 && !writer_)) {
    std::fprintf(stderr, "RwSemaphore %p: %s on a semaphore not so held\n",
                 static_cast<const void*>(this), write ? "assert_write_held()" : "assert_held()");
    std::abort();
  }
}

}  // namespace mmlab
