// khugepaged and MADV_COLLAPSE (mm/khugepaged.c, v6.18): anonymous memory
// and shmem collapsed into a PMD-order folio, or, anonymous memory with
// `tune khugepaged.mthp on`, into
// mTHPs as "khugepaged: add mTHP collapse support" v18 posts it (with the
// fix-ups docs/VARIANTS.md lists).
//
// The layer sits above gup/ and below process/. The call sites below it
// (registration, fork, exit, MADV_COLLAPSE) reach it through the table of
// mm/khugepaged_hooks.h, kKhugepagedHooks, which the System installs in its
// Kernel next to GUP's.
//
// Files: khugepaged.cpp (registration, the mm_slot list and its scan,
// MADV_COLLAPSE), khugepaged_collapse.cpp (the scan of one PMD range and
// collapse_huge_page), khugepaged_file.cpp (collapse_file and the page
// tables of shmem), khugepaged_thread.cpp (the model's thread and clock),
// khugepaged_internal.h (what they share).
//
// Time is virtual. The khugepaged thread's life is modelled as the kernel's
// khugepaged() loop: a wake (khugepaged_do_scan), then a sleep of
// scan_sleep_millisecs, or of alloc_sleep_millisecs inside a wake after an
// allocation failure, or an untimed wait while no mm is registered. Nothing
// runs until the System moves its clock (advance(), run_full_scans()); a wake
// costs no virtual time unless a cost function says otherwise. On request
// the wakes run instead on a thread of their own (start_thread()), back to
// back, concurrently with the application's threads.
//
// Locking (sync/lock_order.h): mm_lock_ is khugepaged_mm_lock, a leaf lock
// (the mm_slot list, the scan cursor, the counters and the wake schedule);
// run_lock_ is held by whoever runs wakes (a caller of advance() or the
// thread), outside every mm lock.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <thread>
#include <unordered_map>

#include "mmlab/types.h"  // KhugepagedWakeStats, CollapseTiming
#include "sync/mutex.h"

namespace mmlab {

struct Kernel;
struct KhugepagedHooks;
struct Mm;

// The table through which mm/ and fault/ reach khugepaged and MADV_COLLAPSE
// (mm/khugepaged_hooks.h); the System installs it in its Kernel.
extern const KhugepagedHooks kKhugepagedHooks;

class Khugepaged {
 public:
  // Registers itself as k's khugepaged; clock is the System's virtual clock (ns).
  Khugepaged(Kernel* k, std::atomic<uint64_t>* clock);
  ~Khugepaged();
  Khugepaged(const Khugepaged&) = delete;
  Khugepaged& operator=(const Khugepaged&) = delete;

  // transparent_hugepage/khugepaged/{pages_collapsed,full_scans}; -ENOENT otherwise.
  [[nodiscard]] int sysfs_read(const std::string& path, std::string* out) const;
  // After a successful sysfs store: enabled files start or stop the thread
  // (start_stop_khugepaged), the sleep stores wake it.
  void sysfs_written(const std::string& path);

  // `khugepaged N`: run wakes (moving the clock as the sleeps between them
  // would) until every registered mm has had N full scans: N passes, plus
  // the rest of a pass that is under way. Returns at once when khugepaged
  // is not running or no mm is registered. 0, or -ELOOP (see advance()).
  [[nodiscard]] int run_full_scans(unsigned n);
  // `advance D`: move the clock by ns, running the wakes due meanwhile.
  // -EBUSY while the thread runs; -ELOOP if wakes would come without end
  // (scan_sleep_millisecs 0 and wakes that cost no time).
  [[nodiscard]] int advance(uint64_t ns);
  // The virtual cost of a wake, in ns (default: none).
  void set_wake_cost(std::function<uint64_t(const KhugepagedWakeStats&)> cost);

  // khugepaged on a thread (and simulated CPU) of its own. speedup 0: wakes
  // back to back, the clock moved to each one's time. speedup N: paced, a
  // sleep of S virtual ns lasting S/N host ns, each wake's host (wall) time
  // added to the clock. -EBUSY if already running.
  [[nodiscard]] int start_thread(uint64_t speedup = 0);
  void stop_thread();

  bool kthread_running() const;  // the khugepaged kthread exists (some THP size enabled)
  unsigned full_scans() const { return full_scans_.load(std::memory_order_acquire); }
  unsigned pages_collapsed() const { return pages_collapsed_.load(std::memory_order_acquire); }
  CollapseTiming timing() const;
  KhugepagedTiming wake_timing() const;

  // ---- for the registration hooks and CollapseTimer (khugepaged_internal.h) ----
  void __khugepaged_enter(Mm* mm);
  void __khugepaged_exit(Mm* mm);
  // One collapse_huge_page call: its time, the part under mmap_lock for
  // write and the copy's; whether it got that far, and whether it collapsed.
  struct CollapseAttempt {
    uint64_t total_ns, write_ns, copy_ns;
    bool write_locked, ok;
  };
  void account_collapse(const CollapseAttempt& a);

 private:
  struct MmSlot {
    Mm* mm;
  };
  using SlotList = std::list<MmSlot>;
  enum class Wait : uint8_t { kRunnable, kTimer, kEvent };
  // khugepaged_do_scan's loop variables, kept across an alloc sleep.
  struct DoScan {
    bool active = false;
    unsigned pages = 0, progress = 0, pass_through_head = 0;
    bool wait = true;
  };
  enum class StepEnd : uint8_t { kDone, kAllocSleep };

  bool hugepage_pmd_enabled() const;
  bool khugepaged_has_work() const REQUIRES(mm_lock_);
  void wake_up_interruptible() REQUIRES(mm_lock_);
  void start_stop_khugepaged() EXCLUDES(mm_lock_);
  void collect_mm_slot(SlotList::iterator slot) REQUIRES(mm_lock_);
  // Drops mm_lock_ while it scans; holds it again on return.
  unsigned khugepaged_scan_mm_slot(unsigned pages, int* result) REQUIRES(run_lock_, mm_lock_);
  StepEnd khugepaged_do_scan() REQUIRES(run_lock_) EXCLUDES(mm_lock_);
  void khugepaged_wait_work() REQUIRES(mm_lock_);
  // One run of the khugepaged thread at the current clock.
  void step() REQUIRES(run_lock_) EXCLUDES(mm_lock_);
  // advance()'s and run_full_scans()' loop: the wakes due by `end` until
  // `done`; 0 or -ELOOP.
  int run_wakes(uint64_t end, const std::function<bool()>& done) REQUIRES(run_lock_) EXCLUDES(mm_lock_);
  // The time the next run is due, or false if it waits for an event.
  bool next_run(uint64_t* at) const REQUIRES(mm_lock_);
  void thread_main();
  // A paced thread: the virtual time that corresponds to host time `now`,
  // and the host time the virtual time `at` falls at.
  uint64_t paced_clock(std::chrono::steady_clock::time_point now) const REQUIRES(mm_lock_);
  std::chrono::steady_clock::time_point paced_host_time(uint64_t at) const REQUIRES(mm_lock_);
  void paced_resync() EXCLUDES(mm_lock_);
  // __khugepaged_exit's wait for a scan to leave mm (mm_lock_ dropped
  // meanwhile).
  void wait_scan_left(Mm* mm) REQUIRES(mm_lock_);

  Kernel* const k_;
  std::atomic<uint64_t>* const clock_;

  mutable Mutex mm_lock_;  // khugepaged_mm_lock
  std::condition_variable_any exit_cv_;   // a scan left an mm (exit waits for it)
  std::condition_variable_any work_cv_;   // the thread's untimed wait
  SlotList mm_head_ GUARDED_BY(mm_lock_);
  std::unordered_map<Mm*, SlotList::iterator> mm_slots_hash_ GUARDED_BY(mm_lock_);
  // khugepaged_scan.mm_slot (valid iff cursor_valid_)
  SlotList::iterator cursor_ GUARDED_BY(mm_lock_);
  bool cursor_valid_ GUARDED_BY(mm_lock_) = false;
  uint64_t scan_address_ GUARDED_BY(mm_lock_) = 0;  // khugepaged_scan.address
  // The mm a scan works on with mm_lock_ dropped.
  Mm* scanning_mm_ GUARDED_BY(mm_lock_) = nullptr;
  std::atomic<unsigned> pages_collapsed_{0};
  std::atomic<unsigned> full_scans_{0};
  // The schedule of the khugepaged thread.
  bool kthread_ GUARDED_BY(mm_lock_) = false;
  Wait wait_ GUARDED_BY(mm_lock_) = Wait::kEvent;
  uint64_t wake_at_ GUARDED_BY(mm_lock_) = 0;
  DoScan scan_ GUARDED_BY(mm_lock_);
  // Of the wake under way.
  KhugepagedWakeStats wake_stats_ GUARDED_BY(run_lock_);
  std::function<uint64_t(const KhugepagedWakeStats&)> wake_cost_ GUARDED_BY(run_lock_);

  Mutex run_lock_;  // whoever runs wakes
  std::thread thread_;
  std::atomic<bool> stop_thread_{false};
  bool threaded_ GUARDED_BY(mm_lock_) = false;
  // A paced thread's speed-up (0: back to back) and the last moment its
  // virtual clock and host time were matched.
  uint64_t speedup_ GUARDED_BY(mm_lock_) = 0;
  std::chrono::steady_clock::time_point host_ref_ GUARDED_BY(mm_lock_){};
  uint64_t clock_ref_ GUARDED_BY(mm_lock_) = 0;

  std::atomic<uint64_t> t_attempts_{0}, t_collapsed_{0}, t_write_locked_{0}, t_total_ns_{0}, t_write_ns_{0},
      t_copy_ns_{0}, t_write_max_ns_{0}, t_wake_cpu_ns_{0}, t_wake_busy_ns_{0};
};

}  // namespace mmlab
