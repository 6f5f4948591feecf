#include "sync/sched.h"

#include "sync/cpu.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

namespace mmlab::sched {

const char* op_name(Op op) {
  switch (op) {
    case Op::kStart: return "start";
    case Op::kAcquire: return "acquire";
    case Op::kTryAcquire: return "try-acquire";
    case Op::kRelease: return "release";
    case Op::kAcquireShared: return "acquire-shared";
    case Op::kTryAcquireShared: return "try-acquire-shared";
    case Op::kReleaseShared: return "release-shared";
    case Op::kDowngrade: return "downgrade";
    case Op::kWait: return "wait";
    case Op::kRead: return "read";
    case Op::kWrite: return "write";
    case Op::kLabel: return "label";
    case Op::kRmw: return "rmw";
  }
  return "?";
}

const char* kind_name(ObjKind kind) {
  switch (kind) {
    case ObjKind::kNone: return "none";
    case ObjKind::kSpinLock: return "spinlock";
    case ObjKind::kMutex: return "mutex";
    case ObjKind::kRwSem: return "rwsem";
    case ObjKind::kFolioLock: return "folio-lock";
    case ObjKind::kBitLock: return "mapcount-lock";
    case ObjKind::kRefcount: return "refcount";
    case ObjKind::kVma: return "vma";
    case ObjKind::kWalkers: return "walkers";
    case ObjKind::kSwapSlot: return "swap-slot";
    case ObjKind::kDataPath: return "data-path";
    case ObjKind::kWord: return "word";
    case ObjKind::kEntry: return "entry";
    case ObjKind::kPincount: return "pincount";
    case ObjKind::kPageFlags: return "page-flags";
    case ObjKind::kSeqCount: return "write_protect_seq";
    case ObjKind::kMmFlags: return "mm-flags";
    case ObjKind::kLabel: return "label";
    case ObjKind::kNumKinds: break;
  }
  return "?";
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kClean: return "clean";
    case Outcome::kDeadlock: return "deadlock";
    case Outcome::kStepBound: return "step bound exceeded";
    case Outcome::kDiverged: return "diverged";
    case Outcome::kException: return "exception";
  }
  return "?";
}

namespace {

std::string object_name(ObjKind kind, uint64_t number) {
  char buf[80];
  const bool pfn = kind == ObjKind::kFolioLock || kind == ObjKind::kBitLock || kind == ObjKind::kRefcount;
  if (kind == ObjKind::kEntry && (number & kAtFrame)) {
    const uint64_t n = number & ~kAtFrame;
    std::snprintf(buf, sizeof buf, "entry pfn %#" PRIx64 "[%" PRIu64 "]", n >> 9, n & 511);
  } else if (pfn || (number & kAtFrame)) {
    std::snprintf(buf, sizeof buf, "%s pfn %#" PRIx64, kind_name(kind), number & ~kAtFrame);
  } else {
    std::snprintf(buf, sizeof buf, "%s#%" PRIu64, kind_name(kind), number);
  }
  return buf;
}

// The frame stores' frames and memmaps (register_memory). Registration is
// rare (a store is mapped once and recycled across Systems); lookups happen
// only in the slow path of a point under an explorer. A std::mutex: the
// model's Mutex would be a schedule point inside the scheduler.
struct MemRange {
  uintptr_t base, end;
  uint32_t unit;
  bool entries;
};
std::mutex g_mem_lock;
std::vector<MemRange>& mem_ranges() {
  static std::vector<MemRange> r;
  return r;
}

// (pfn << 9 | index) for an entry, pfn for a memmap word; false if the
// address is in no registered range.
bool resolve_address(const void* key, uint64_t* number) {
  const auto a = reinterpret_cast<uintptr_t>(key);
  std::lock_guard<std::mutex> g(g_mem_lock);
  for (const MemRange& r : mem_ranges()) {
    if (a < r.base || a >= r.end) continue;
    const uint64_t off = a - r.base;
    *number = kAtFrame | (r.entries ? (off / r.unit) << 9 | (off % r.unit) / 8 : off / r.unit);
    return true;
  }
  return false;
}

}  // namespace

void register_memory(const void* base, uint64_t bytes, uint32_t unit, bool entries) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> g(g_mem_lock);
  mem_ranges().push_back({b, b + bytes, unit, entries});
}

void unregister_memory(const void* base) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> g(g_mem_lock);
  auto& v = mem_ranges();
  for (size_t i = 0; i < v.size(); i++)
    if (v[i].base == b) {
      v.erase(v.begin() + static_cast<long>(i));
      return;
    }
}

std::string step_name(const Step& s) {
  std::string r = std::string(s.site) + " " + op_name(s.op);
  if (s.kind != ObjKind::kNone) r += " " + object_name(s.kind, s.number);
  return r;
}

// A worker's state in the current run. Only the thread holding the baton
// reads or writes any of it (the baton's release/acquire orders the
// accesses), so none of it needs to be atomic.
enum class WState : uint8_t {
  kReady,    // at a point (or not started): may be chosen
  kRunning,  // holds the baton
  kBlocked,  // blocked on `blocked_key` until a wake of it
  kWaiting,  // a failed wait: disabled until another thread takes a step
  kDone,     // its body ended (or was unwound)
};

namespace detail {

struct Worker {
  Scheduler::Impl* s = nullptr;
  int index = 0;
  int muted = 0;  // sched::Unscheduled scopes open: points are not steps
  WState state = WState::kDone;
  const void* blocked_key = nullptr;
  bool yielding = false;  // kWaiting from a yield, not from a wait's test
  std::thread thread;
};

MMLAB_SCHED_TLS_MODEL thread_local constinit Worker* t_worker = nullptr;

}  // namespace detail

using detail::Worker;

namespace {
constexpr int kController = -1;  // the thread in Scheduler::run
constexpr int kShutdown = -2;
}  // namespace

struct Scheduler::Impl {
  explicit Impl(int n) : workers(n), pending(n) {
    for (int i = 0; i < n; i++) {
      workers[i].s = this;
      workers[i].index = i;
      workers[i].thread = std::thread([this, i] { worker_main(i); });
    }
  }

  ~Impl() {
    pass_baton(kShutdown);
    for (Worker& w : workers) w.thread.join();
  }

  // ---- the baton ----

  // turn holds the index of the thread allowed to run (or kController,
  // kShutdown). The store releases what the passer wrote; the load in
  // wait_turn acquires it: the run's state moves with the baton.
  std::atomic<int> turn{kController};

  void pass_baton(int to) {
    turn.store(to, std::memory_order_release);
    turn.notify_all();
  }
  // Returns false on shutdown.
  bool wait_turn(int me) {
    for (;;) {
      const int t = turn.load(std::memory_order_acquire);
      if (t == me) return true;
      if (t == kShutdown) return false;
      turn.wait(t, std::memory_order_acquire);
    }
  }

  // ---- the run (touched only by the baton's holder) ----

  std::vector<Worker> workers;
  std::vector<Step> pending;
  const std::vector<std::function<void()>>* bodies = nullptr;
  Strategy* strategy = nullptr;
  uint64_t step_bound = 0;
  RunRecord rec;
  bool aborting = false;
  bool draining = false;     // the outcome is decided; the threads run to their ends
  uint64_t drain_steps = 0;
  std::map<std::pair<ObjKind, const void*>, uint64_t> first_use;
  uint64_t next_number[static_cast<int>(ObjKind::kNumKinds)] = {};
  std::vector<int> enabled;

  uint64_t number_of(const Object& o) {
    if (o.number == kByAddress) {
      uint64_t n;
      if (resolve_address(o.key, &n)) return n;
    } else if (o.number != kByFirstUse || o.kind == ObjKind::kNone) {
      return o.number == kByFirstUse ? 0 : o.number;
    }
    auto [it, fresh] = first_use.try_emplace({o.kind, o.key}, 0);
    if (fresh) it->second = next_number[static_cast<int>(o.kind)]++;
    return it->second;
  }

  // FNV-1a over the chosen thread and its step's site and op: the step
  // sequence a replay must reproduce, in 64 bits.
  void hash_step(int t, const Step& s) {
    auto mix = [&](uint8_t b) { rec.trace_hash = (rec.trace_hash ^ b) * 0x100000001b3ull; };
    mix(static_cast<uint8_t>(t));
    for (const char* c = s.site; *c; c++) mix(static_cast<uint8_t>(*c));
    mix(static_cast<uint8_t>(s.op));
  }

  // Another thread took a step: a failed wait may now succeed.
  void enable_waiters(int except) {
    for (Worker& w : workers)
      if (w.state == WState::kWaiting && w.index != except) w.state = WState::kReady;
  }

  // The threads unwind: every acquire, block or wait throws RunAborted.
  void begin_abort(Outcome o, std::string detail) {
    if (aborting) return;
    aborting = true;
    rec.abandoned = true;
    if (draining) {
      rec.detail += "; then " + detail;
      return;
    }
    rec.outcome = o;
    rec.detail = std::move(detail);
  }

  // The run's outcome is decided but its threads hold what they hold: run
  // each to its end (lowest enabled first, not recorded), so that the locks
  // the model takes without a guard are released by their own code.
  void begin_drain(Outcome o, std::string detail) {
    draining = true;
    rec.outcome = o;
    rec.detail = std::move(detail);
  }

  // A drain gets the run's bound again and a margin (a tiny bound given to
  // catch a livelock says nothing of what the threads need to finish).
  int drain_pick(int me) {
    const uint64_t drain_bound = step_bound + 100'000;
    if (++drain_steps > drain_bound) {
      begin_abort(rec.outcome, "the threads did not end within " + std::to_string(drain_bound) + " more steps");
      return me >= 0 ? me : next_to_unwind();
    }
    return enabled.front();
  }

  std::string deadlock_detail() const {
    std::string r = "no thread can run:";
    for (const Worker& w : workers) {
      if (w.state == WState::kDone) continue;
      const Step& p = pending[w.index];
      r += " T" + std::to_string(w.index) + (w.state == WState::kWaiting ? " waits at " : " blocked at ") +
           step_name(p) + ";";
    }
    return r;
  }

  // The decision at a point (or at a thread's end, me = kController then):
  // which thread takes the next step. Returns the chosen index, or
  // kController when the run is over or being ended.
  int decide(int me) {
    if (aborting) return next_to_unwind();
    enabled.clear();
    bool any_left = false;
    for (const Worker& w : workers) {
      if (w.state == WState::kReady) enabled.push_back(w.index);
      if (w.state != WState::kDone) any_left = true;
    }
    if (enabled.empty()) {
      if (!any_left) return kController;  // every body ended (clean, or drained)
      // A yield waits for another thread's step only while one can be
      // taken: its retry is elsewhere (a fault that found the migration
      // entry gone returns and refaults), so with every other thread
      // blocked, perhaps on a lock the yielder holds, it goes on.
      for (Worker& w : workers)
        if (w.state == WState::kWaiting && w.yielding) {
          w.state = WState::kReady;
          enabled.push_back(w.index);
        }
    }
    if (enabled.empty()) {
      begin_abort(Outcome::kDeadlock, deadlock_detail());
      return next_to_unwind();
    }
    if (draining) return drain_pick(me);
    if (rec.steps >= step_bound) {
      begin_drain(Outcome::kStepBound, "more than " + std::to_string(step_bound) + " steps");
      return drain_pick(me);
    }
    std::string why;
    const int t = strategy->pick(Decision{rec.steps, me, enabled, pending}, &why);
    bool ok = false;
    for (int e : enabled) ok |= e == t;
    if (!ok) {
      begin_drain(Outcome::kDiverged, why.empty() ? "strategy chose no enabled thread" : why);
      return drain_pick(me);
    }
    rec.steps++;
    rec.choices.push_back(static_cast<uint8_t>(t));
    hash_step(t, pending[t]);
    return t;
  }

  // While a run is being ended, threads unwind one at a time, lowest first.
  int next_to_unwind() const {
    for (const Worker& w : workers)
      if (w.state != WState::kDone) return w.index;
    return kController;
  }

  // The calling worker (state already set: ready, blocked or waiting) gives
  // the baton to `to` and waits for it to come back.
  void switch_to(Worker* me, int to) {
    if (to == me->index) {
      me->state = WState::kRunning;
      return;
    }
    if (to >= 0) workers[to].state = WState::kRunning;
    pass_baton(to);
    wait_turn(me->index);
    me->state = WState::kRunning;
  }

  // A point where the thread may be told to unwind.
  void maybe_throw(Op op) {
    if (!aborting) return;
    const bool release = op == Op::kRelease || op == Op::kReleaseShared || op == Op::kDowngrade;
    if (!release) throw RunAborted{};
  }

  void point(Worker* me, const char* site, Op op, const Object& obj) {
    if (aborting) {
      // Ending the run: acquires unwind; a release (in a destructor, most
      // likely) lets its thread go on unwinding without a switch.
      maybe_throw(op);
      return;
    }
    pending[me->index] = Step{site, op, obj.kind, number_of(obj)};
    enable_waiters(me->index);
    me->state = WState::kReady;
    switch_to(me, decide(me->index));
    maybe_throw(op);
  }

  void block_on(Worker* me, const char* site, const Object& obj) {
    maybe_throw(Op::kAcquire);
    pending[me->index] = Step{site, Op::kAcquire, obj.kind, number_of(obj)};
    enable_waiters(me->index);
    me->state = WState::kBlocked;
    me->blocked_key = obj.key;
    switch_to(me, decide(me->index));
    maybe_throw(Op::kAcquire);
  }

  void wake(const void* key) {
    for (Worker& w : workers)
      if (w.state == WState::kBlocked && w.blocked_key == key) {
        w.state = WState::kReady;
        w.blocked_key = nullptr;
      }
  }

  // Disabled until another thread steps; then, when chosen, back to the caller.
  void wait_once(Worker* me, const char* site, const Object& obj) {
    pending[me->index] = Step{site, Op::kWait, obj.kind, number_of(obj)};
    me->state = WState::kWaiting;
    switch_to(me, decide(me->index));
    maybe_throw(Op::kWait);
  }

  void worker_main(int i) {
    Worker* me = &workers[i];
    // Take the simulated CPU id now, outside any run: taken inside a body
    // it would add the id table's lock steps to the session's first run
    // only, and a replay of that run in the same session would diverge.
    (void)this_cpu();
    while (wait_turn(i)) {
      me->state = WState::kRunning;
      if (!aborting) {
        detail::t_worker = me;
        try {
          (*bodies)[i]();
        } catch (const RunAborted&) {
          // the run is being ended; this thread has unwound
        } catch (const std::exception& e) {
          begin_abort(Outcome::kException, "T" + std::to_string(i) + " threw: " + e.what());
        } catch (...) {
          begin_abort(Outcome::kException, "T" + std::to_string(i) + " threw a non-std exception");
        }
        detail::t_worker = nullptr;
      }
      me->state = WState::kDone;
      enable_waiters(i);  // its end is a step other threads may have waited for
      const int next = decide(kController);
      if (next >= 0) workers[next].state = WState::kRunning;
      pass_baton(next);
    }
  }

  RunRecord run(const std::vector<std::function<void()>>& b, Strategy& s, uint64_t bound) {
    bodies = &b;
    strategy = &s;
    step_bound = bound;
    rec = RunRecord{};
    rec.trace_hash = 0xcbf29ce484222325ull;
    aborting = false;
    draining = false;
    drain_steps = 0;
    first_use.clear();
    for (uint64_t& n : next_number) n = 0;
    for (size_t i = 0; i < workers.size(); i++) {
      workers[i].state = WState::kReady;
      workers[i].blocked_key = nullptr;
      workers[i].muted = 0;
      pending[i] = Step{};
    }
    const int first = decide(kController);
    if (first >= 0) {
      workers[first].state = WState::kRunning;
      pass_baton(first);
      wait_turn(kController);
    }
    // Every worker is done (or never started, in a run ended before it ran).
    for (Worker& w : workers) w.state = WState::kDone;
    bodies = nullptr;
    strategy = nullptr;
    return std::move(rec);
  }
};

Scheduler::Scheduler(int nthreads) : impl_(new Impl(nthreads)) {}
Scheduler::~Scheduler() { delete impl_; }
int Scheduler::nthreads() const { return static_cast<int>(impl_->workers.size()); }

RunRecord Scheduler::run(const std::vector<std::function<void()>>& bodies, Strategy& strategy, uint64_t step_bound) {
  if (static_cast<int>(bodies.size()) != nthreads()) {
    RunRecord r;
    r.outcome = Outcome::kException;
    r.detail = "run: " + std::to_string(bodies.size()) + " bodies for " + std::to_string(nthreads()) + " workers";
    return r;
  }
  return impl_->run(bodies, strategy, step_bound);
}

namespace detail {

void point_slow(const char* site, Op op, const void* key, ObjKind kind, uint64_t number) {
  if (t_worker->muted) return;
  t_worker->s->point(t_worker, site, op, Object{key, kind, number});
}

void mute(int delta) { t_worker->muted += delta; }
void block_on_slow(const char* site, const Object& obj) { t_worker->s->block_on(t_worker, site, obj); }
void wake_slow(const void* key) { t_worker->s->wake(key); }

void wait_slow(const char* site, const Object& obj, bool (*test)(void*), void* ctx) {
  Worker* me = t_worker;
  if (me->muted) {
    while (!test(ctx)) std::this_thread::yield();
    return;
  }
  me->s->point(me, site, Op::kWait, obj);
  while (!test(ctx)) me->s->wait_once(me, site, obj);
}

void yield_slow(const char* site, const Object& obj) {
  Worker* me = t_worker;
  if (me->muted) {
    std::this_thread::yield();
    return;
  }
  me->s->point(me, site, Op::kWait, obj);
  // Cleared however the wait ends (an ended run unwinds through here).
  struct Yielding {
    Worker* w;
    explicit Yielding(Worker* w) : w(w) { w->yielding = true; }
    ~Yielding() { w->yielding = false; }
  } yielding(me);
  me->s->wait_once(me, site, obj);
}

}  // namespace detail

}  // namespace mmlab::sched
