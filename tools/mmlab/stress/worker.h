// The insides of `mmlab stress` (stress.h): the operations, the memory
// types, a worker thread with the regions it owns and its tracker, and
// what the workers share. worker.cpp holds the operations; stress.cpp the
// set-up, the run and its stop-the-world checks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "stress/stress.h"

namespace mmlab::stress {

enum Op : unsigned {
  kRead, kWrite, kPin, kCrossPin, kPinFork, kFork, kMprotect, kDontneed, kPageout, kFree, kCold,
  kCollapse, kRemap, kMremap, kVariant, kNrOps
};
inline constexpr const char* kOpNames[kNrOps] = {"read",     "write",   "pin",     "cross-pin", "pin-fork",
                                      "fork",     "mprotect", "dontneed", "pageout",  "free",
                                      "cold",     "collapse", "remap",    "mremap",   "variant"};
inline constexpr unsigned kDefaultWeight[kNrOps] = {20, 20, 12, 8, 3, 3, 4, 4, 4, 3, 2, 2, 3, 3, 2};
constexpr unsigned kCrossPinSlots = 4;  // cross pins a worker holds between operations

enum class Backing : uint8_t { kAnonPrivate, kAnonShared, kFile, kHugetlbPrivate, kHugetlbShared };

struct TypeInfo {
  std::string name;
  Backing backing;
  uint64_t len, align;
  FsClass fs = FsClass::kShmem;
  unsigned huge_shift = 0;  // hugetlb page shift
  bool thp_advise = false;
};

// Every memory type, in the order they are reported.
std::vector<TypeInfo> all_types();

inline bool is_private(Backing b) { return b == Backing::kAnonPrivate || b == Backing::kHugetlbPrivate; }
inline bool is_hugetlb(Backing b) { return b == Backing::kHugetlbPrivate || b == Backing::kHugetlbShared; }

enum class ForkMode : uint8_t { kNormal, kDontfork, kWipeonfork };

// The injection sites whose failure can end a CPU access with a signal, and
// that signal: an allocation, a charge or a page table that fails makes the
// fault VM_FAULT_OOM (SIGKILL); a machine check in a copy makes it
// VM_FAULT_HWPOISON (SIGBUS). folio_trylock and fault_retry make a fault
// retry, never fail it; hugetlb_resv fails an mmap; a failed swap-in's
// SIGBUS sticks to the page (Worker::swapin_outcome).
struct AccessCause {
  Signal sig;
  const char* site;
};
inline constexpr AccessCause kAccessCauses[] = {
    {Signal::kSigkill, "page_alloc"}, {Signal::kSigkill, "charge"}, {Signal::kSigkill, "pgtable_alloc"}, {Signal::kSigbus, "copy_mc"}};
// The calling thread's injected failures at each of those sites.
struct InjectSnapshot {
  uint64_t n[std::size(kAccessCauses)] = {};
};
InjectSnapshot injected_snapshot();
// The site whose failure, injected on this thread between `before` and
// `now`, can end an access with `sig`; nullptr when none can (then the
// signal is a mismatch, whatever else was injected meanwhile).
const char* access_cause(const InjectSnapshot& before, const InjectSnapshot& now, Signal sig);

// One region and what the tracker expects of it.
struct Region {
  const TypeInfo* type = nullptr;
  std::atomic<uint64_t> addr{0};  // read by other threads' cross pins
  int fd = -1;
  bool ro = false;
  ForkMode fork_mode = ForkMode::kNormal;
  std::vector<uint8_t> val;   // each page is filled with one byte value
  std::vector<uint8_t> lazy;  // MADV_FREE'd: reads val or zeros until written
  // MADV_PAGEOUT'd since the page was last written or zapped: 1 + the
  // System's count of injected swap-in failures at that MADV_PAGEOUT (0: not
  // paged out). A swap-in failure since then may have stuck to the page.
  std::vector<uint64_t> paged_out;
  uint64_t pages() const { return type->len / PAGE_SIZE; }
};

struct Shared;

class Worker {
 public:
  Worker(Shared* s, unsigned id, uint64_t seed) : s_(s), id_(id), rng_(seed) {}
  bool setup(std::string* err);
  void run() { one_op(); }
  void release_held() {
    for (auto& h : held_) h.release();
  }
  void teardown();
  void verify_all(const char* when);
  void plant_corruption();
  std::vector<std::unique_ptr<Region>> regions;
  // Operations run, per kind: read by the progress line and a hang's
  // partial report while the worker runs.
  std::atomic<uint64_t> ops[kNrOps] = {};
  std::map<std::string, uint64_t> errors;
  uint64_t quota = 0, done = 0;
  bool choices_spent() const;
  std::atomic<uint64_t> progress{0};   // operations finished, for the watchdog
  std::atomic<int> current{-1};        // the operation in progress (-1: none)
  // "KIND TYPE" of the operation in progress and of the last ones before
  // it, oldest first: where a stuck thread was (read by the watchdog).
  std::vector<std::string> recent_ops() const;

 private:
  void one_op();
  Op pick_op();
  Region* pick_region(bool (*eligible)(const Region&) = nullptr);
  uint8_t new_byte() { return static_cast<uint8_t>(1 + next() % 255); }
  uint64_t rnd(uint64_t n) { return n ? next() % n : 0; }
  // The next choice: the random stream, or Config::choices two bytes at a
  // time (zeros once they have run out).
  uint64_t next();
  void error(Op op, long ret) { errors[fmt::format("{}: {}", kOpNames[op], errno_name(static_cast<int>(-ret)))]++; }
  void mismatch(const std::string& what);
  // Whether a call this thread made since `before` was failed by
  // injection at a site that can end an access with `sig`; if so the
  // failure is an expected outcome, counted as "OP: injected SIG (SITE)".
  bool injected_outcome(const InjectSnapshot& before, const char* what, Signal sig);
  // injected_snapshot(), or zeros when no site is armed: taken around every
  // access, the per-site look-ups by name were ~8% of a fuzz input's time, for
  // counts that cannot move.
  InjectSnapshot inject_snapshot() const;
  // A SIGBUS at page i of r that a failed swap-in explains: it was paged out
  // and a swap-in failure was injected (on any thread, or in khugepaged)
  // since. The unread folio stays in the swap cache and fails every fault
  // on the page, in every process sharing the swap entry, until the entry
  // goes (docs/STRESS.md). Counted as "OP: injected swap-in SIGBUS".
  bool swapin_outcome(const Region* r, uint64_t i, const char* what, Signal sig);
  bool pool_empty_outcome(const std::optional<EventTally>& tally, const char* what, Signal sig);
  bool map_region(Region* r);
  bool map_region_retrying(Region* r);
  void apply_fork_mode(Region* r);
  // Check page i of r as process p sees it: expected `want` (or zeros if lazy).
  void check_page(Process* p, Region* r, uint64_t i, uint8_t want, bool lazy, const char* what);
  // The parent's pages [i, end) of r, which the tracker expects to hold one
  // byte and none lazily freed, read in one pass; a page that does not read
  // as expected is then checked alone, for check_page's verdict.
  void check_run(Region* r, uint64_t i, uint64_t end, const char* what);
  // Check page i of a file region through the page cache (pread): zeros expected.
  void check_file_page(const Region* r, uint64_t i, const char* when);
  std::vector<const TypeInfo*> types_to_map();
  // Pages [i, end) of r's file, expected to hold zeros, read a chunk per pread.
  void check_file_pages(const Region* r, uint64_t i, uint64_t end, const char* when);
  static constexpr uint64_t kFileChunk = 16;
  void op_read();
  void op_write();
  void op_pin();
  void op_cross_pin();
  void op_pin_fork();
  void op_fork();
  void op_mprotect();
  void op_madvise(Op op, int advice);
  void race_swapin_failure(const Region* r, uint64_t i);
  void op_remap();
  void op_mremap();
  void op_variant();

  // The last kRecent operations, each (kind << 8 | type index), type
  // 0xff for none; recent_[recent_at_ % kRecent] is the one in progress.
  static constexpr unsigned kRecent = 8;
  std::atomic<uint32_t> recent_[kRecent] = {};
  std::atomic<uint64_t> recent_at_{0};
  void note_type(const Region* r);

  Shared* s_;
  unsigned id_;
  std::mt19937_64 rng_;
  size_t choice_at_ = 0;
  GupPages held_[kCrossPinSlots];  // cross pins held between operations
};

// A std::mutex that a worker may hold across model calls. Under the
// scheduler those calls pass the baton, so another worker that blocked on
// it in the OS would hang the run (only one thread moves): there it is
// taken by a try_lock that is one step per attempt (explore::wait_until).
class PlacementMutex {
 public:
  void lock() {
    if (explore::in_run()) explore::wait_until("stress.placement", [this] { return m_.try_lock(); });
    else m_.lock();
  }
  void unlock() { m_.unlock(); }

 private:
  std::mutex m_;
};

struct Shared {
  const Config* cfg;
  System* sys = nullptr;  // the Machine's
  Process* parent = nullptr;
  std::vector<const TypeInfo*> types;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<unsigned> mix_cdf;  // cumulative weights by Op
  bool khugepaged = false;       // the System's khugepaged thread runs (free-running)
  bool khugepaged_body = false;  // under the scheduler: khugepaged's scans are a session thread
  bool injecting = false;  // a fault-injection site may be armed (--inject, the swap-in race)
  std::chrono::steady_clock::time_point start;
  std::atomic<bool> stop{false};
  // The run's phase and the main thread's steps in it, for the watchdog
  // once the workers are done (the final sweep, the teardown).
  std::atomic<const char*> phase{"setup"};
  std::atomic<uint64_t> main_progress{0};
  std::atomic<bool> collected{false};
  bool sched = false;  // the workers run under the deterministic scheduler
  // Under it: the explorer session whose persistent workers are the stress
  // threads (and khugepaged's), made before the watchdog starts and ended
  // after it stops, which reads its steps (Session::steps_taken).
  std::unique_ptr<explore::Session> session;
  bool abandoned = false;  // a round under it unwound a thread: the model may hold locks  // the result's errors, statistics and injections are in
  std::mutex mu;  // guards the result's vectors below
  // Held by a thread from taking a range from the kernel's placement until
  // it no longer needs to clean a failed attempt up: a failed mremap (or
  // MAP_FIXED mmap) may have unmapped the thread's reservation already, and
  // unmapping that range again must not hit another thread's new mapping
  // placed into the hole meanwhile.
  PlacementMutex placement;
  Result* res;
  uint64_t mismatches_kept = 0;
  // A kept machine's statistics and model warnings before this run: the
  // run reports what it added.
  std::map<std::string, int64_t> stats_before;
  size_t warnings_before = 0;
};

inline constexpr uint64_t kMaxMismatchesKept = 20;

}  // namespace mmlab::stress
