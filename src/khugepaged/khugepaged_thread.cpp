// The model's khugepaged thread, which mm/khugepaged.c's khugepaged() loop
// stands for: its wake schedule on the System's virtual clock (next_run,
// step), the wakes run by advance() and run_full_scans() or by a thread of
// its own, back to back or paced against host time, and the host-time
// statistics of wakes and collapses (CollapseTimer). No kernel counterpart:
// the kernel's thread sleeps in real time.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>

#include "khugepaged/khugepaged.h"
#include "khugepaged/khugepaged_internal.h"
#include "mm/kernel.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The calling thread's CPU time: a wake blocked on an mm's lock spends wall
// time, not CPU.
uint64_t thread_cpu_ns() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// The schedule: a runnable thread runs now, a sleeping one when its timer
// expires, one waiting for an event not until a wake_up_interruptible.
bool Khugepaged::next_run(uint64_t* at) const {
  if (!kthread_) return false;
  switch (wait_) {
    case Wait::kRunnable:
      *at = clock_->load();
      return true;
    case Wait::kTimer:
      *at = wake_at_;
      return true;
    case Wait::kEvent:
      return false;
  }
  return false;
}

// One wake (khugepaged_do_scan) at the current clock, then the sleep it
// chooses (khugepaged_wait_work, or the alloc sleep), with the wake's host
// time counted.
void Khugepaged::step() {
  const uint64_t w0 = now_ns(), c0 = thread_cpu_ns();
  const StepEnd end = khugepaged_do_scan();
  const uint64_t busy = now_ns() - w0;
  t_wake_busy_ns_.fetch_add(busy, std::memory_order_relaxed);
  t_wake_cpu_ns_.fetch_add(thread_cpu_ns() - c0, std::memory_order_relaxed);
  MutexGuard g(&mm_lock_);
  // A paced thread's wake takes its host time on the clock too: the sleep
  // after it starts when it ends. Elsewhere time stays deterministic.
  if (threaded_ && speedup_) clock_->fetch_add(busy);
  if (end == StepEnd::kAllocSleep) {
    wait_ = Wait::kTimer;
    wake_at_ = clock_->load() + uint64_t{k_->settings.alloc_sleep_millisecs.load()} * 1000000;
    return;
  }
  if (wake_cost_) clock_->fetch_add(wake_cost_(wake_stats_));
  khugepaged_wait_work();
}

void Khugepaged::set_wake_cost(std::function<uint64_t(const KhugepagedWakeStats&)> cost) {
  MutexGuard g(&run_lock_);
  wake_cost_ = std::move(cost);
}

namespace {
// Wakes at one instant beyond this mean they come without end (no sleep
// between them, and no cost).
constexpr unsigned kMaxRunsAtOneInstant = 100000;
}  // namespace

// The wakes due by `end`, each at its time on the clock, until `done` says
// enough (checked before each wake). 0, or -ELOOP if wakes would come
// without end.
int Khugepaged::run_wakes(uint64_t end, const std::function<bool()>& done) {
  unsigned same_instant = 0;
  uint64_t last = ~0ull;
  while (!done()) {
    uint64_t at = 0;
    {
      MutexGuard g(&mm_lock_);
      if (!next_run(&at) || at > end) break;  // stopped, or nothing registered: nothing to run
    }
    const uint64_t now = std::max(clock_->load(), at);
    clock_->store(now);
    same_instant = now == last ? same_instant + 1 : 0;
    last = now;
    if (same_instant > kMaxRunsAtOneInstant) return -ELOOP;
    step();
  }
  return 0;
}

int Khugepaged::advance(uint64_t ns) {
  {
    MutexGuard g(&mm_lock_);
    if (threaded_) return -EBUSY;
  }
  MutexGuard run(&run_lock_);
  const uint64_t end = clock_->load() + ns;
  if (const int err = run_wakes(end, [] { return false; })) return err;
  if (clock_->load() < end) clock_->store(end);
  return 0;
}

int Khugepaged::run_full_scans(unsigned n) {
  MutexGuard lk(&mm_lock_);
  if (!kthread_ || !n) return 0;
  const unsigned target = full_scans() + n + (cursor_valid_ ? 1 : 0);
  if (threaded_) {
    exit_cv_.wait(mm_lock_, [&]() REQUIRES(mm_lock_) {
      return full_scans() >= target || !kthread_ || mm_head_.empty() || !threaded_;
    });
    return 0;
  }
  lk.unlock();
  MutexGuard run(&run_lock_);
  return run_wakes(~0ull, [&] { return full_scans() >= target; });
}

int Khugepaged::start_thread(uint64_t speedup) {
  MutexGuard g(&mm_lock_);
  if (threaded_) return -EBUSY;
  threaded_ = true;
  stop_thread_ = false;
  speedup_ = speedup;
  host_ref_ = std::chrono::steady_clock::now();
  clock_ref_ = clock_->load();
  // The thread's events are its System's in the trace.
  thread_ = std::thread([this, system = trace::current_system()] {
    trace::adopt_system(system);
    thread_main();
  });
  return 0;
}

void Khugepaged::stop_thread() {
  {
    MutexGuard g(&mm_lock_);
    if (!threaded_) return;
    stop_thread_ = true;
    work_cv_.notify_all();
  }
  thread_.join();
  MutexGuard g(&mm_lock_);
  // A paced thread's sleep under way when it stopped has lasted so far.
  if (speedup_) {
    uint64_t at = paced_clock(std::chrono::steady_clock::now());
    if (kthread_ && wait_ == Wait::kTimer) at = std::min(at, wake_at_);
    if (clock_->load() < at) clock_->store(at);
  }
  speedup_ = 0;
  threaded_ = false;
  exit_cv_.notify_all();
}

uint64_t Khugepaged::paced_clock(std::chrono::steady_clock::time_point now) const {
  const double host = std::chrono::duration<double, std::nano>(now - host_ref_).count();
  return clock_ref_ + static_cast<uint64_t>(std::max(0.0, host) * static_cast<double>(speedup_));
}

std::chrono::steady_clock::time_point Khugepaged::paced_host_time(uint64_t at) const {
  const uint64_t ahead = at > clock_ref_ ? at - clock_ref_ : 0;
  return host_ref_ + std::chrono::nanoseconds(ahead / speedup_);
}

// After a wake: the next sleep is measured from here, on both clocks.
void Khugepaged::paced_resync() {
  MutexGuard g(&mm_lock_);
  host_ref_ = std::chrono::steady_clock::now();
  clock_ref_ = clock_->load();
}

// Back to back, the thread runs each wake as soon as it is due in virtual
// time, that is at once: the clock jumps over the sleeps. Paced, it waits
// for the host time the wake falls at (a sysfs store or a new mm may bring
// it forward: the wait is woken and looks again). A timer's wake happens at
// its virtual time, the host's lateness in waking it not counted; a wake
// that waited for an event happens at the virtual time now.
void Khugepaged::thread_main() {
  while (!stop_thread_) {
    uint64_t at = 0;
    {
      MutexGuard g(&mm_lock_);
      work_cv_.wait(mm_lock_, [&]() REQUIRES(mm_lock_) { return stop_thread_ || next_run(&at); });
      if (stop_thread_) break;
      if (speedup_) {
        const auto due = paced_host_time(at);
        const auto now = std::chrono::steady_clock::now();
        if (now < due) {
          work_cv_.wait_until(mm_lock_, due);
          continue;
        }
        if (wait_ != Wait::kTimer) at = std::max(at, paced_clock(now));
      }
    }
    MutexGuard run(&run_lock_);
    if (clock_->load() < at) clock_->store(at);
    step();
    paced_resync();
  }
}

void Khugepaged::account_collapse(const CollapseAttempt& a) {
  const uint64_t write_ns = a.write_ns;
  t_attempts_.fetch_add(1, std::memory_order_relaxed);
  if (a.ok) t_collapsed_.fetch_add(1, std::memory_order_relaxed);
  if (a.write_locked) t_write_locked_.fetch_add(1, std::memory_order_relaxed);
  t_total_ns_.fetch_add(a.total_ns, std::memory_order_relaxed);
  t_write_ns_.fetch_add(write_ns, std::memory_order_relaxed);
  uint64_t longest = t_write_max_ns_.load(std::memory_order_relaxed);
  while (write_ns > longest && !t_write_max_ns_.compare_exchange_strong(longest, write_ns, std::memory_order_relaxed)) {
  }
  t_copy_ns_.fetch_add(a.copy_ns, std::memory_order_relaxed);
}

CollapseTimer::CollapseTimer(Mm* mm, const int* result) : mm_(mm), result_(result), t0_(now_ns()) {}

CollapseTimer::~CollapseTimer() {
  if (Khugepaged* kh = mm_->kernel->khugepaged)
    kh->account_collapse({.total_ns = now_ns() - t0_,
                          .write_ns = t_write_ ? write_ns_ : 0,
                          .copy_ns = copy_ns_,
                          .write_locked = t_write_ != 0,
                          .ok = *result_ == SCAN_SUCCEED});
}

void CollapseTimer::mmap_write_locked() { t_write_ = now_ns(); }
void CollapseTimer::mmap_write_unlocking() { write_ns_ = now_ns() - t_write_; }

CollapseTimer::Span::Span(uint64_t* into) : into_(into), t0_(now_ns()) {}
CollapseTimer::Span::~Span() { *into_ += now_ns() - t0_; }

CollapseTiming Khugepaged::timing() const {
  CollapseTiming t;
  t.attempts = t_attempts_.load();
  t.collapsed = t_collapsed_.load();
  t.write_locked = t_write_locked_.load();
  t.total_ns = t_total_ns_.load();
  t.mmap_write_ns = t_write_ns_.load();
  t.copy_ns = t_copy_ns_.load();
  t.mmap_write_max_ns = t_write_max_ns_.load();
  return t;
}

KhugepagedTiming Khugepaged::wake_timing() const {
  KhugepagedTiming t;
  t.cpu_ns = t_wake_cpu_ns_.load();
  t.busy_ns = t_wake_busy_ns_.load();
  return t;
}

}  // namespace mmlab
