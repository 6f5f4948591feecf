// The deterministic scheduler (issue 34, docs/RACES.md): real threads, one
// of which runs at a time, passing a baton at schedule points. A schedule
// point sits before every visible operation (a lock's acquire, try-acquire
// and release, a wait's test of its condition); at each one a strategy
// (src/process/explore.cpp: PCT, replay) chooses which thread takes the next
// step, so that the choices alone reproduce the run.
//
// Without an explorer a point is one test of a thread-local pointer: the
// model's threads never pay more than that (sched::active()). Under one,
// every blocking primitive tries, and if that fails blocks on its object
// until a release of the object wakes it, instead of spinning or sleeping
// in the OS, which would hang the run (only one thread may move); a wait
// for a condition no release announces (sched::wait_until) disables its
// thread until another thread has taken a step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace mmlab::sched {

// What the thread is about to do at a point.
enum class Op : uint8_t {
  kStart,              // a thread's first step
  kAcquire,            // a blocking acquire (exclusive)
  kTryAcquire,         // a try-acquire (exclusive)
  kRelease,            // release (exclusive)
  kAcquireShared,      // down_read
  kTryAcquireShared,   // down_read_trylock
  kReleaseShared,      // up_read
  kDowngrade,          // downgrade_write
  kWait,               // wait_until's test of its condition, or a yield
  kRead,               // an atomic read of shared data (an entry, a refcount, a flag, a sequence count)
  kWrite,              // an atomic write of shared data
  kLabel,              // a named point (a window a directed schedule names)
  kRmw,                // an atomic read-modify-write (exchange, fetch-add, compare-and-swap, set_bit)
};
const char* op_name(Op op);

// The kind of object a point names. With the number it makes the object's
// name in a schedule's trace and a deadlock report, the same in every run
// with the same choices: never a host address.
enum class ObjKind : uint8_t {
  kNone,
  kSpinLock,
  kMutex,
  kRwSem,
  kFolioLock,   // numbered by pfn
  kBitLock,     // the large-mapcount bit lock, numbered by pfn of the folio
  kRefcount,    // a folio's refcount, numbered by pfn
  kVma,         // a VMA's refcount (vma_start_write's drain)
  kWalkers,     // the lockless-walker epochs of one Kernel
  kSwapSlot,    // a swap-cache slot, numbered by offset
  kDataPath,    // a PhysMem's plain/atomic data-path handshake
  kWord,        // a word of test data
  kEntry,       // a page-table entry, numbered by (table pfn, index)
  kPincount,    // a large folio's pincount, numbered by the head's pfn
  kPageFlags,   // a page's flags word (PG_anon_exclusive), numbered by pfn
  kSeqCount,    // an mm's write_protect_seq, numbered by mm id
  kMmFlags,     // an mm's flags word (MMF_HAS_PINNED), numbered by mm id
  kLabel,       // a named point's object when it has none of its own
  kNumKinds,
};
const char* kind_name(ObjKind kind);

// Numbers an object without a natural number: by the order in which the
// run first names it (one counter per kind). Given the same choices a run
// names the same objects in the same order, so the number is canonical
// across runs where a host address is not.
inline constexpr uint64_t kByFirstUse = ~0ull;

// Numbers an object by where it lives in a System's simulated memory, found
// from its key in the slow path only (the fast path computes nothing): a
// key inside a frame store's frames is an entry, numbered (pfn << 9 |
// index); a key inside a memmap is a word of a struct page, numbered by
// pfn (its kind says which field). A key in neither falls back to
// kByFirstUse. Resolved numbers carry kAtFrame, so that a name says "pfn".
inline constexpr uint64_t kByAddress = ~0ull - 1;
inline constexpr uint64_t kAtFrame = 1ull << 63;

// The frame stores (phys/frame_store.cpp) tell the scheduler where their
// frames and memmaps lie, so that kByAddress can be resolved. `unit` is the
// size of one frame (PAGE_SIZE) or one struct page; `entries` says which.
void register_memory(const void* base, uint64_t bytes, uint32_t unit, bool entries);
void unregister_memory(const void* base);

// An object at a point: `key` identifies it within a run (blocking and
// waking match on it), `kind` and `number` name it.
struct Object {
  const void* key = nullptr;
  ObjKind kind = ObjKind::kNone;
  uint64_t number = kByFirstUse;
};

// Thrown into a thread of a run the scheduler ends early (deadlock, step
// bound, replay divergence) so that it unwinds; the worker catches it. Not
// a std::exception, so that nothing in the model catches it by accident.
struct RunAborted {};

namespace detail {
struct Worker;
// The calling thread's place in a run, or null (no explorer): the one test
// every point costs without one. Constant-initialised and trivially
// destructible, so the test is a thread-pointer-relative load; in an
// executable (the model is a static library) the local-exec TLS model
// makes it one instruction, `cmpq $0, %fs:OFFSET`, where the default for
// an extern variable takes two (the offset from the GOT, then the load); a
// shared-library build keeps the default. It is set by the worker before a
// race body and cleared after it, never while model code runs on the
// thread (sched::Unscheduled mutes the worker instead). Reading it through
// a [[gnu::const]] out-of-line function instead (one read per function,
// every later test threaded on the first) was measured and was slower on
// most paths: docs/NOTES.md, issue 34 item 1.
#if defined(__PIE__) || !defined(__PIC__)
#define MMLAB_SCHED_TLS_MODEL [[gnu::tls_model("local-exec")]]
#else
#define MMLAB_SCHED_TLS_MODEL
#endif
MMLAB_SCHED_TLS_MODEL extern thread_local constinit Worker* t_worker;
[[gnu::always_inline]] inline Worker* current_worker() noexcept { return t_worker; }
// The object as scalars, in registers (see point()).
[[gnu::cold]] void point_slow(const char* site, Op op, const void* key, ObjKind kind, uint64_t number);
void block_on_slow(const char* site, const Object& obj);
void wake_slow(const void* key);
void wait_slow(const char* site, const Object& obj, bool (*test)(void*), void* ctx);
void yield_slow(const char* site, const Object& obj);
void mute(int delta);
}  // namespace detail

// Whether the build has schedule points. The bench preset builds without
// them (CMake MMLAB_SCHED_POINTS=OFF): a point's test costs 3-13% on the
// per-page GUP and fault loops (docs/NOTES.md), which the benchmark report
// must not carry; every other build, the tests' included, keeps them.
#ifndef MMLAB_SCHED_POINTS
#define MMLAB_SCHED_POINTS 1
#endif
inline constexpr bool kPoints = MMLAB_SCHED_POINTS != 0;

// Whether the calling thread runs under an explorer: constant false in a
// build without points, so that every point, wake and wait folds away.
[[gnu::always_inline]] inline bool active() { return kPoints && detail::current_worker() != nullptr; }

// While one lives, the calling thread's points are not steps (debug
// builds' VM_* conditions: a debug build must take a release build's
// steps), and its waits poll as without an explorer. Nothing inside may
// block.
class Unscheduled {
 public:
  Unscheduled() {
    if (active()) [[unlikely]]
      detail::mute(1);
  }
  ~Unscheduled() {
    if (active()) [[unlikely]]
      detail::mute(-1);
  }
  Unscheduled(const Unscheduled&) = delete;
  Unscheduled& operator=(const Unscheduled&) = delete;
};

// A schedule point before `op` on `obj`. Under an explorer the strategy
// may run other threads first. An acquire point may throw RunAborted when
// the run is being ended; a release point never throws (it sits in
// destructors).
//
// The test is in a function of scalars: GCC splits a function whose tail is
// a cold call, and a split tail taking the Object by reference would make
// every caller build the Object in memory before the test, on the fast
// path. Here the Object's fields are read where the branch-free overload
// is inlined, so they are plain values the compiler sinks into the branch.
[[gnu::always_inline]] inline void point(const char* site, Op op, const void* key, ObjKind kind, uint64_t number) {
  if (active()) [[unlikely]]
    detail::point_slow(site, op, key, kind, number);
}
[[gnu::always_inline]] inline void point(const char* site, Op op, const Object& obj) {
  point(site, op, obj.key, obj.kind, obj.number);
}

// Under an explorer, after a failed try: the thread blocks on `obj` until
// wake(obj.key), then returns (to try again; the caller loops). Only call
// when active().
inline void block_on(const char* site, const Object& obj) { detail::block_on_slow(site, obj); }

// After a release of the object `key`: every thread blocked on it may run
// again (each retries). Free without an explorer.
[[gnu::always_inline]] inline void wake(const void* key) {
  if (active()) [[unlikely]]
    detail::wake_slow(key);
}

// How a wait spins without an explorer, as the loop it replaces did.
enum class Spin : uint8_t { kYield, kSpinThenYield };

// Returns once test() holds. Without an explorer it polls as before
// (std::this_thread::yield between tests, after 64 plain spins with
// kSpinThenYield). Under one, each test is a step (a kWait point); after a
// failed test the thread is disabled until another thread takes a step.
// test() may have an effect when it succeeds (a test-and-set).
template <typename Test>
void wait_until(const char* site, const Object& obj, Test&& test, Spin spin = Spin::kYield) {
  if (!active()) [[likely]] {
    for (unsigned spins = 0; !test(); spins++)
      if (spin == Spin::kYield || spins > 64) std::this_thread::yield();
    return;
  }
  using T = std::remove_reference_t<Test>;
  detail::wait_slow(site, obj, [](void* c) -> bool { return (*static_cast<T*>(c))(); },
                    const_cast<void*>(static_cast<const void*>(&test)));
}

// One std::this_thread::yield() of a retry loop whose retry is elsewhere
// (a fault that returns to be retried): under an explorer, the thread is
// disabled until another thread takes a step, so that a strategy that
// prefers it cannot spin it forever while the thread it waits for starves.
inline void yield(const char* site, const Object& obj) {
  if (!active()) [[likely]] {
    std::this_thread::yield();
    return;
  }
  detail::yield_slow(site, obj);
}

// ---- the scheduler's side: runs, strategies, outcomes ----------------------

// A thread's pending step, as the strategy and the trace see it.
struct Step {
  const char* site = "start";
  Op op = Op::kStart;
  ObjKind kind = ObjKind::kNone;
  uint64_t number = 0;
};
std::string step_name(const Step& s);  // "Mutex::lock acquire mutex#1"

// What a strategy is asked at each decision.
struct Decision {
  uint64_t step;                  // 0-based index of this decision in the run
  int current;                    // the thread at the point, or -1 (a thread ended, or the start)
  const std::vector<int>& enabled;  // the threads that may take the next step, ascending; never empty
  const std::vector<Step>& pending;  // each thread's pending step
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The thread to take the next step: one of d.enabled, or -1 to end the
  // run as diverged (a replay that no longer matches), with why in *why.
  virtual int pick(const Decision& d, std::string* why) = 0;
};

enum class Outcome : uint8_t {
  kClean,      // every thread ran to its end
  kDeadlock,   // no thread enabled, some not finished (detail names each one's object)
  kStepBound,  // more steps than the bound (a livelock)
  kDiverged,   // the strategy gave up (a replay's choices no longer fit)
  kException,  // a thread body threw (detail says what)
};
const char* outcome_name(Outcome o);

struct RunRecord {
  Outcome outcome = Outcome::kClean;
  uint64_t steps = 0;
  std::vector<uint8_t> choices;  // the thread chosen at each decision
  uint64_t trace_hash = 0;       // FNV-1a over each step's (thread, site, op)
  std::string detail;            // deadlock, bound, divergence or exception text
  // Some thread was unwound (RunAborted) rather than run to its end: the
  // model takes many locks without a guard, as the kernel does, so such a
  // lock may still be held and what the bodies used must not be torn down.
  // A diverged or step-bound run is first drained (each thread run to its
  // end, lowest enabled first, unrecorded), so only a deadlock, an exception
  // or a drain that itself cannot end abandons its objects.
  bool abandoned = false;
};

// A set of persistent worker threads (one per race body, kept for the
// session so that thread creation is paid once and each holds its
// simulated CPU id throughout) and the baton between them. One run at a
// time; run() is called from a thread that is not one of the workers.
class Scheduler {
 public:
  explicit Scheduler(int nthreads);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  int nthreads() const;
  // Runs bodies[i] on worker i, one step at a time as `strategy` picks,
  // and returns when every body has ended (or been unwound). step_bound:
  // the number of decisions after which the run ends as kStepBound.
  RunRecord run(const std::vector<std::function<void()>>& bodies, Strategy& strategy, uint64_t step_bound);

  struct Impl;

 private:
  Impl* impl_;
};

}  // namespace mmlab::sched
