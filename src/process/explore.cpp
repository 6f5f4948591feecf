// The strategies of the explorer (issue 34, docs/RACES.md) over the
// scheduler of src/sync/sched.h: PCT (depth cycling 2..3 by default),
// bounded DFS, directed schedules, the first-enabled profile run, and
// replay of a schedule line checking every step (the line's format is in
// schedule_line.cpp); point filtering; and the per-run loop of Race<Fx>.
#include "mmlab/explore.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

#include "mmlab/types.h"
#include "process/schedule_line.h"
#include "sync/sched.h"

namespace mmlab::explore {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kClean: return "clean";
    case Outcome::kViolation: return "violation";
    case Outcome::kDeadlock: return "deadlock";
    case Outcome::kStepBound: return "step bound exceeded";
    case Outcome::kDiverged: return "diverged";
    case Outcome::kException: return "exception";
    case Outcome::kCrash: return "crash";
  }
  return "?";
}

std::string step_text(const TraceStep& s) {
  return sched::step_name(sched::Step{s.site, static_cast<sched::Op>(s.op), static_cast<sched::ObjKind>(s.kind), s.number});
}

std::string RunResult::summary() const {
  std::string r = std::string(outcome_name(outcome)) + " after " + std::to_string(steps) + " steps";
  if (!how.empty()) r += " (" + how + ")";
  if (!detail.empty()) r += ": " + detail;
  r += "; schedule " + (line.empty() ? schedule : line);
  return r;
}

std::string ExploreResult::summary() const {
  std::string r = (found ? "found in run " : "nothing in ") + std::to_string(runs) + (found ? "" : " runs") +
                  " (k " + std::to_string(k) + ", unfiltered " + std::to_string(k_unfiltered) + ")";
  if (exhausted) r += ", exhausted " + std::to_string(schedules) + " schedules";
  if (found) r += ": " + failure.summary();
  return r;
}

namespace {

// ---- point filtering --------------------------------------------------------

// An object as one thread sees it: the thread, the object's kind, and the
// order in which that thread first touched objects of the kind. It depends
// on the thread's own course only, not on the interleaving (a per-run
// number by first use does: a private lock taken first by another thread
// in one run is mutex#0 there and mutex#1 in the next).
struct OwnName {
  int thread;
  uint8_t kind;
  uint32_t ordinal;
  auto operator<=>(const OwnName&) const = default;
};

// The set of shared objects (touched by two or more threads in some run),
// kept across the runs of an exploration, and each run's touches.
class Filter {
 public:
  explicit Filter(bool on) : on_(on) {}
  bool on() const { return on_; }

  void begin_run(int nthreads) {
    objects_.clear();
    next_.assign(static_cast<size_t>(nthreads) * 256, 0);
    grew_ = false;
  }

  // Thread t is at a point on (kind, number): records the touch; returns
  // whether the point counts (its object is known to be shared).
  bool touch(int t, uint8_t kind, uint64_t number, uint32_t* own) {
    *own = ~0u;
    if (kind == static_cast<uint8_t>(sched::ObjKind::kNone)) return !on_;
    Obj& o = objects_[{kind, number}];
    const uint64_t bit = 1ull << (t & 63);
    if (!(o.mask & bit)) {
      o.mask |= bit;
      o.ord[t & 63] = next_[static_cast<size_t>(t) * 256 + kind]++;
      if (o.mask & ~bit) {
        // A second thread: the object is shared, under each thread's name.
        for (int u = 0; u < 64; u++)
          if (o.mask & (1ull << u)) grew_ |= shared_.insert(OwnName{u, kind, o.ord[u]}).second;
      }
    }
    *own = o.ord[t & 63];
    return !on_ || shared_.count(OwnName{t, kind, o.ord[t & 63]}) > 0;
  }

  bool counts(int t, uint8_t kind, uint32_t own) const {
    if (!on_) return true;
    return own != ~0u && shared_.count(OwnName{t, kind, own}) > 0;
  }
  bool grew() const { return grew_; }
  size_t size() const { return shared_.size(); }

 private:
  struct Obj {
    uint64_t mask = 0;
    uint32_t ord[64] = {};
  };
  bool on_;
  std::set<OwnName> shared_;
  std::map<std::pair<uint8_t, uint64_t>, Obj> objects_;
  std::vector<uint32_t> next_;
  bool grew_ = false;
};

// ---- the driver: what every run records, whatever chooses -----------------

// A policy chooses at a decision. `counted`: the current thread is at a
// counted point (a preemption there is one the strategies count);
// `index`: the number of counted points before this one in the run.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual int choose(const sched::Decision& d, bool cur_enabled, bool counted, uint64_t index, std::string* why) = 0;
  // Whether uncounted points may switch threads (replay and directed
  // schedules choose at every step; PCT and DFS filtered do not).
  virtual bool free_everywhere() const { return false; }
};

bool enabled_has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class Driver final : public sched::Strategy {
 public:
  Driver(Policy& p, Filter& f, StepSink* sink, int nthreads, std::atomic<uint64_t>* live = nullptr)
      : policy_(p), filter_(f), sink_(sink), live_(live) {
    filter_.begin_run(nthreads);
  }

  int pick(const sched::Decision& d, std::string* why) override {
    bool counted = false;
    uint32_t own = ~0u;
    if (d.current >= 0) {
      const sched::Step& p = d.pending[static_cast<size_t>(d.current)];
      counted = filter_.touch(d.current, static_cast<uint8_t>(p.kind), p.number, &own);
      if (static_cast<size_t>(d.current) >= pending_own_.size()) pending_own_.resize(static_cast<size_t>(d.current) + 1, ~0u);
      pending_own_[static_cast<size_t>(d.current)] = own;
    }
    const bool cur_en = d.current >= 0 && enabled_has(d.enabled, d.current);
    int t;
    if (cur_en && !counted && !policy_.free_everywhere()) {
      t = d.current;  // an invisible point: no switch here
    } else {
      t = policy_.choose(d, cur_en, counted && cur_en, counted_, why);
      if (t < 0) return t;
    }
    if (cur_en && counted) counted_++;
    if (cur_en && t != d.current) preempted_.insert(d.pending[static_cast<size_t>(d.current)].site);
    const sched::Step& s = d.pending[static_cast<size_t>(t)];
    trace_.push_back(TraceStep{t, s.site, static_cast<uint8_t>(s.op), static_cast<uint8_t>(s.kind), s.number});
    own_.push_back(static_cast<size_t>(t) < pending_own_.size() ? pending_own_[static_cast<size_t>(t)] : ~0u);
    if (sink_) sink_->step(t, s.site, static_cast<uint8_t>(s.op));
    // Only the baton's holder writes it; a watchdog reads it (relaxed).
    if (live_) live_->store(live_->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return t;
  }

  std::vector<TraceStep> trace_;
  std::vector<uint32_t> own_;  // the stepping thread's name of its object, when known
  std::set<const char*> preempted_;
  uint64_t counted_ = 0;

 private:
  std::vector<uint32_t> pending_own_;  // each thread's name of the object at its pending point
  Policy& policy_;
  Filter& filter_;
  StepSink* sink_;
  std::atomic<uint64_t>* live_;
};

// splitmix64: a small generator whose sequence is the same on every
// platform and library (std::uniform_int_distribution's is not).
struct Rng {
  uint64_t x;
  uint64_t next() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

class PctPolicy final : public Policy {
 public:
  PctPolicy(int nthreads, int depth, uint64_t k, uint64_t seed, uint64_t run) {
    Rng rng{seed * 0x2545f4914f6cdd1dull ^ (run + 1) * 0x9e3779b97f4a7c15ull};
    rng.next();
    // Initial priorities depth .. depth+n-1 in random order (higher runs).
    prio_.resize(static_cast<size_t>(nthreads));
    for (int i = 0; i < nthreads; i++) prio_[static_cast<size_t>(i)] = depth + i;
    for (int i = nthreads - 1; i > 0; i--)
      std::swap(prio_[static_cast<size_t>(i)], prio_[rng.below(static_cast<uint64_t>(i) + 1)]);
    // depth-1 change points among the k points; the j-th lowers the thread
    // about to take that step to depth-j, below every initial priority.
    for (int j = 1; j < depth; j++) change_.push_back({rng.below(std::max<uint64_t>(k, 1)), depth - j});
  }
  // Unfiltered (Session::run_pct): the change points index every step.
  void index_steps() { by_step_ = true; }

  int choose(const sched::Decision& d, bool cur_en, bool counted, uint64_t index, std::string*) override {
    int t = highest(d.enabled);
    const uint64_t at = by_step_ ? d.step : index;
    if (by_step_ || (counted && cur_en))
      for (const auto& [step, p] : change_)
        if (step == at) {
          prio_[static_cast<size_t>(t)] = p;
          t = highest(d.enabled);
        }
    return t;
  }
  bool free_everywhere() const override { return by_step_; }

 private:
  int highest(const std::vector<int>& enabled) const {
    int best = enabled.front();
    for (int e : enabled)
      if (prio_[static_cast<size_t>(e)] > prio_[static_cast<size_t>(best)]) best = e;
    return best;
  }
  std::vector<int> prio_;
  std::vector<std::pair<uint64_t, int>> change_;
  bool by_step_ = false;
};

class FirstPolicy final : public Policy {
 public:
  int choose(const sched::Decision& d, bool, bool, uint64_t, std::string*) override { return d.enabled.front(); }
  bool free_everywhere() const override { return true; }
};

// A uniformly random enabled thread at every step (no counted points:
// every step may switch).
class RandomPolicy final : public Policy {
 public:
  RandomPolicy(uint64_t seed, uint64_t run) : rng_{seed * 0x9e3779b97f4a7c15ull ^ (run + 1) * 0xd1b54a32d192ed03ull} {
    rng_.next();
  }
  int choose(const sched::Decision& d, bool, bool, uint64_t, std::string*) override {
    return d.enabled[rng_.below(d.enabled.size())];
  }
  bool free_everywhere() const override { return true; }

 private:
  Rng rng_;
};

// One branch point of a DFS run: the threads it could take, the one taken,
// and those still to try within the bound.
struct DfsFrame {
  int chosen;
  std::vector<int> todo;
  int preemptions_before;
  int current;  // the thread at the point, if it could go on; else -1
};

class DfsPolicy final : public Policy {
 public:
  DfsPolicy(std::vector<DfsFrame>& frames, int bound) : frames_(frames), bound_(bound) {}

  int choose(const sched::Decision& d, bool cur_en, bool counted, uint64_t, std::string* why) override {
    // Branch where more than one thread may go: at a counted point, or
    // where the current thread cannot go on (its switch is free).
    if (d.enabled.size() < 2 || (cur_en && !counted)) return cur_en ? d.current : d.enabled.front();
    int t;
    if (pos_ < frames_.size()) {
      t = frames_[pos_].chosen;
      if (!enabled_has(d.enabled, t)) {
        *why = "dfs: branch " + std::to_string(pos_) + " at step " + std::to_string(d.step) + " cannot take T" +
               std::to_string(t) + " again (the model is not deterministic)";
        return -1;
      }
    } else {
      DfsFrame f{cur_en ? d.current : d.enabled.front(), {}, preemptions_, cur_en ? d.current : -1};
      const bool can_preempt = preemptions_ < bound_;
      for (int e : d.enabled)
        if (e != f.chosen && (!cur_en || can_preempt)) f.todo.push_back(e);
      frames_.push_back(std::move(f));
      t = frames_.back().chosen;
    }
    if (frames_[pos_].current >= 0 && t != frames_[pos_].current) preemptions_++;
    pos_++;
    return t;
  }

 private:
  std::vector<DfsFrame>& frames_;
  int bound_;
  size_t pos_ = 0;
  int preemptions_ = 0;
};

// Moves to the next schedule: the deepest branch with a thread left to
// try takes it; everything after it is forgotten. False: exhausted.
bool dfs_backtrack(std::vector<DfsFrame>& frames) {
  while (!frames.empty()) {
    DfsFrame& f = frames.back();
    if (!f.todo.empty()) {
      f.chosen = f.todo.front();
      f.todo.erase(f.todo.begin());
      return true;
    }
    frames.pop_back();
  }
  return false;
}

class ReplayPolicy final : public Policy {
 public:
  explicit ReplayPolicy(const ScheduleLine& l) : l_(l) {}
  bool free_everywhere() const override { return true; }
  int choose(const sched::Decision& d, bool, bool, uint64_t, std::string* why) override {
    if (d.step >= l_.choices.size()) {
      *why = "replay diverged at step " + std::to_string(d.step) + ": the schedule ends there, the run goes on (" +
             next_steps(d) + ")";
      return -1;
    }
    const int t = l_.choices[d.step];
    if (!enabled_has(d.enabled, t)) {
      *why = "replay diverged at step " + std::to_string(d.step) + ": expected T" + std::to_string(t) +
             expected(d.step) + ", which cannot run (" + next_steps(d) + ")";
      return -1;
    }
    if (!l_.steps.empty()) {
      const sched::Step& p = d.pending[static_cast<size_t>(t)];
      const std::string& want = l_.sites[l_.steps[d.step]];
      if (site_op(p.site, static_cast<uint8_t>(p.op)) != want) {
        *why = "replay diverged at step " + std::to_string(d.step) + ": expected T" + std::to_string(t) + " at " +
               site_shown(want) + ", found T" + std::to_string(t) + " at " + sched::step_name(p);
        return -1;
      }
    }
    return t;
  }

 private:
  std::string expected(uint64_t step) const {
    return l_.steps.empty() ? "" : " at " + site_shown(l_.sites[l_.steps[step]]);
  }
  static std::string next_steps(const sched::Decision& d) {
    std::string r;
    for (int e : d.enabled) {
      if (!r.empty()) r += "; ";
      r += "T" + std::to_string(e) + " at " + sched::step_name(d.pending[static_cast<size_t>(e)]);
    }
    return r;
  }
  const ScheduleLine& l_;
};

// ---- directed schedules -----------------------------------------------------

struct Segment {
  int thread;
  std::string label;  // empty: to the thread's end
};

int thread_index(std::string_view name, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); i++)
    if (names[i] == name) return static_cast<int>(i);
  if (name.size() > 1 && name[0] == 'T') {
    int v = 0;
    auto r = std::from_chars(name.data() + 1, name.data() + name.size(), v);
    if (r.ec == std::errc{} && r.ptr == name.data() + name.size() && v < static_cast<int>(names.size())) return v;
  }
  return -1;
}

std::optional<std::vector<Segment>> parse_directed(std::string_view spec, const std::vector<std::string>& names,
                                                   std::string* err) {
  std::vector<Segment> segs;
  for (std::string_view tok : split_on(spec, ' ')) {
    if (tok.empty()) continue;
    const size_t at = tok.find('@');
    const std::string_view name = tok.substr(0, at);
    const int t = thread_index(name, names);
    if (t < 0) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      *err = "directed schedule: unknown thread '" + std::string(name) + "' in '" + std::string(tok) +
             "' (threads: " + known + ")";
      return std::nullopt;
    }
    std::string label;
    if (at != std::string_view::npos) {
      label = std::string(tok.substr(at + 1));
      if (label.empty()) {
        *err = "directed schedule: empty label in '" + std::string(tok) + "'";
        return std::nullopt;
      }
    }
    segs.push_back({t, std::move(label)});
  }
  if (segs.empty()) {
    *err = "directed schedule: empty";
    return std::nullopt;
  }
  return segs;
}

class DirectedPolicy final : public Policy {
 public:
  DirectedPolicy(std::vector<Segment> segs, int nthreads, const std::vector<std::string>& names)
      : segs_(std::move(segs)), done_(static_cast<size_t>(nthreads)), parked_(static_cast<size_t>(nthreads)),
        names_(names) {}
  bool free_everywhere() const override { return true; }

  int choose(const sched::Decision& d, bool, bool, uint64_t, std::string* why) override {
    // A decision with no current thread after a step of `last_`: it ended.
    if (d.current < 0 && last_ >= 0) done_[static_cast<size_t>(last_)] = true;
    while (idx_ < segs_.size()) {
      const Segment& s = segs_[idx_];
      const size_t t = static_cast<size_t>(s.thread);
      if (!s.label.empty() && !parked_[t] && !done_[t] && s.label == d.pending[t].site) {
        parked_[t] = true;  // at the label: the segment is done, the thread waits there
        idx_++;
        continue;
      }
      if (done_[t]) {
        if (!s.label.empty()) {
          *why = "directed schedule: " + name(s.thread) + " ended without reaching " + s.label;
          return -1;
        }
        idx_++;
        continue;
      }
      if (enabled_has(d.enabled, s.thread)) return take(s.thread);
      // The segment's thread cannot run (it blocks on something another
      // holds): the lowest other thread not parked at a label goes first.
      for (int e : d.enabled)
        if (!parked_[static_cast<size_t>(e)]) return take(e);
      return take(d.enabled.front());
    }
    return take(d.enabled.front());
  }

 private:
  int take(int t) {
    parked_[static_cast<size_t>(t)] = false;
    last_ = t;
    return t;
  }
  std::string name(int t) const {
    return static_cast<size_t>(t) < names_.size() ? names_[static_cast<size_t>(t)] : "T" + std::to_string(t);
  }
  std::vector<Segment> segs_;
  size_t idx_ = 0;
  int last_ = -1;
  std::vector<bool> done_, parked_;
  const std::vector<std::string>& names_;
};

Outcome outcome_of(sched::Outcome o) {
  switch (o) {
    case sched::Outcome::kClean: return Outcome::kClean;
    case sched::Outcome::kDeadlock: return Outcome::kDeadlock;
    case sched::Outcome::kStepBound: return Outcome::kStepBound;
    case sched::Outcome::kDiverged: return Outcome::kDiverged;
    case sched::Outcome::kException: return Outcome::kException;
  }
  return Outcome::kException;
}

RunResult result_of(sched::RunRecord&& rec, Driver& drv) {
  RunResult r;
  r.outcome = outcome_of(rec.outcome);
  r.schedule = encode_schedule(rec.choices);
  r.steps = rec.steps;
  r.trace_hash = rec.trace_hash;
  r.detail = std::move(rec.detail);
  r.abandoned = rec.abandoned;
  r.trace = std::move(drv.trace_);
  return r;
}


}  // namespace

struct Session::Impl {
  explicit Impl(int n) : sched(n) {}
  sched::Scheduler sched;

  // One run with `policy` choosing, through a driver that records it.
  RunResult run(const Bodies& bodies, Policy& policy, Filter& filter, uint64_t bound, StepSink* sink) {
    Driver drv(policy, filter, sink, sched.nthreads(), &live_steps);
    sched::RunRecord rec = sched.run(bodies, drv, bound);
    last_counted = drv.counted_;
    last_own = std::move(drv.own_);
    last_preempted = std::move(drv.preempted_);
    return result_of(std::move(rec), drv);
  }
  std::atomic<uint64_t> live_steps{0};  // every run's steps so far (Session::steps_taken)
  uint64_t last_counted = 0;
  std::vector<uint32_t> last_own;
  std::set<const char*> last_preempted;

  RunResult replay_line(const Bodies& bodies, const ScheduleLine& l, uint64_t bound) {
    ReplayPolicy p(l);
    Filter off(false);
    RunResult r = run(bodies, p, off, bound, nullptr);
    if (r.outcome != Outcome::kDiverged && r.steps < l.choices.size()) {
      r.outcome = Outcome::kDiverged;
      r.detail = "replay diverged at step " + std::to_string(r.steps) + ": the run ended there, the schedule has " +
                 std::to_string(l.choices.size()) + " steps";
    } else if (r.outcome != Outcome::kDiverged && l.has_hash && r.trace_hash != l.hash) {
      r.outcome = Outcome::kDiverged;
      r.detail = "replay diverged: the steps' hash differs from the line's";
    }
    if (r.outcome == Outcome::kDiverged && !l.build.empty() && l.build != build_commit())
      r.detail += " (the line is from build " + l.build + ", this is " + build_commit() + ")";
    return r;
  }
};

bool available() { return sched::kPoints; }
const char* unavailable_reason() {
  return "this build has no schedule points (MMLAB_SCHED_POINTS=OFF, the bench preset): races need a build with "
         "them, e.g. cmake --preset release";
}

// Without points no thread would stop at any step: the bodies would run
// free under a scheduler that believes it runs one at a time.
static std::unique_ptr<Session::Impl> make_session(int nthreads) {
  if (!available()) throw std::runtime_error(unavailable_reason());
  return std::make_unique<Session::Impl>(nthreads);
}

Session::Session(int nthreads) : impl_(make_session(nthreads)) {}
Session::~Session() = default;
uint64_t Session::steps_taken() const { return impl_->live_steps.load(std::memory_order_relaxed); }

RunResult Session::run_pct(const Bodies& bodies, int depth, uint64_t k, uint64_t seed, uint64_t run,
                           uint64_t step_bound) {
  PctPolicy p(impl_->sched.nthreads(), depth, k, seed, run);
  p.index_steps();
  Filter off(false);
  return impl_->run(bodies, p, off, step_bound, nullptr);
}

RunResult Session::run_first(const Bodies& bodies, uint64_t step_bound) {
  FirstPolicy p;
  Filter off(false);
  return impl_->run(bodies, p, off, step_bound, nullptr);
}

RunResult Session::run_random(const Bodies& bodies, uint64_t seed, uint64_t run, uint64_t step_bound) {
  RandomPolicy p(seed, run);
  Filter off(false);
  return impl_->run(bodies, p, off, step_bound, nullptr);
}

bool in_run() { return sched::active(); }

void wait_until(const char* site, const std::function<bool()>& attempt) {
  sched::wait_until(site, sched::Object{site, sched::ObjKind::kWord, sched::kByFirstUse}, [&attempt] { return attempt(); });
}

RunResult Session::replay(const Bodies& bodies, std::string_view schedule, uint64_t step_bound) {
  std::string err;
  auto l = parse_line(schedule, &err);
  if (!l) {
    RunResult r;
    r.outcome = Outcome::kDiverged;
    r.detail = err;
    return r;
  }
  return impl_->replay_line(bodies, *l, step_bound);
}

namespace {

// A run that ended with every thread done is judged by the check; the
// fixture of one that abandoned its objects is kept, not torn down.
RunResult checked(const RaceHooks& h, RunResult r) {
  if (r.abandoned && h.abandon) h.abandon();
  if (r.outcome != Outcome::kClean || !h.check) return r;
  if (auto v = h.check()) {
    r.outcome = Outcome::kViolation;
    r.detail = *v;
  }
  return r;
}

// What explore() keeps over the runs.
struct Tally {
  ExploreResult& res;
  std::set<std::string> sites, preempted;
  bool any_ = false;

  void add(const RunResult& r, uint64_t counted, const std::set<const char*>& pre, bool profile) {
    const bool first = res.runs == 0 && !any_;
    any_ = true;
    if (!profile) res.runs++;
    res.outcomes[static_cast<int>(r.outcome)]++;
    res.steps_min = first ? r.steps : std::min(res.steps_min, r.steps);
    res.steps_max = std::max(res.steps_max, r.steps);
    res.steps_sum += r.steps;
    res.points_min = first ? counted : std::min(res.points_min, counted);
    res.points_max = std::max(res.points_max, counted);
    res.points_sum += counted;
    for (const TraceStep& s : r.trace) sites.insert(s.site);
    for (const char* s : pre) preempted.insert(s);
  }
  // A failure: the first one is kept, with its line. True: stop here.
  bool failed(const RaceHooks& h, RunResult&& r, bool stop_at_first) {
    if (!res.found) {
      res.found = true;
      r.line = line_of(h, r);
      res.outcome = r.outcome;
      res.replay = r.line;
      res.failure = std::move(r);
    }
    return stop_at_first;
  }
  void finish(const Filter& f) {
    res.sites.assign(sites.begin(), sites.end());
    res.preempted_sites.assign(preempted.begin(), preempted.end());
    res.shared_objects = f.size();
  }
};

}  // namespace

std::string line_of(const RaceHooks& h, const RunResult& r) {
  auto choices = decode_schedule(r.schedule);
  ScheduleLine l = line_from(r, choices ? *choices : std::vector<uint8_t>{});
  l.test = h.test_id;
  l.tune = h.tune;
  l.threads = h.names;
  return format_line(l);
}

ExploreResult explore(const RaceHooks& h, const Options& o) {
  ExploreResult res;
  Tally tally{res, {}, {}};
  Session session(h.nthreads);
  Session::Impl& s = session.impl();
  const bool filter_on = std::visit([](const auto& st) { return st.filter; }, o.strategy);
  const uint64_t given_bound = std::visit([](const auto& st) { return st.step_bound; }, o.strategy);
  Filter filter(filter_on);
  uint64_t bound = given_bound ? given_bound : 1'000'000;
  auto one = [&](Policy& p, const std::string& how) -> RunResult {
    h.fresh();
    if (o.sink) o.sink->begin_run(how);
    RunResult r = checked(h, s.run(h.bodies(), p, filter, bound, o.sink));
    r.how = how;
    tally.add(r, s.last_counted, s.last_preempted, how == "profile");
    return r;
  };

  // The profile run: the lowest thread first, to count the steps and to
  // learn which objects two threads touch.
  const Pct* pct = std::get_if<Pct>(&o.strategy);
  if (!pct || pct->k == 0 || filter_on) {
    FirstPolicy first;
    RunResult prof = one(first, "profile");
    res.k_unfiltered = prof.steps;
    uint64_t counted = 0;
    for (size_t i = 0; i < prof.trace.size(); i++)
      counted += filter.counts(prof.trace[i].thread, prof.trace[i].kind, s.last_own[i]);
    res.k = counted;
    if (prof.outcome != Outcome::kClean && tally.failed(h, std::move(prof), o.stop_at_first)) {
      tally.finish(filter);
      return res;
    }
  }
  if (pct && pct->k) res.k = pct->k;
  if (!given_bound) bound = std::max<uint64_t>(10 * std::max(res.k_unfiltered, res.k), 10'000);

  if (pct) {
    for (int i = 0; i < pct->runs; i++) {
      if (o.stop && o.stop()) break;
      const uint64_t run = pct->first_run + static_cast<uint64_t>(i) * std::max<uint64_t>(pct->run_stride, 1);
      const int depth = pct->depth > 0 ? pct->depth : 2 + static_cast<int>(run % 2);
      PctPolicy p(h.nthreads, depth, res.k, pct->seed, run);
      if (!filter_on) p.index_steps();
      char how[96];
      std::snprintf(how, sizeof how, "pct d=%d seed %" PRIu64 " run %" PRIu64, depth, pct->seed, run);
      RunResult r = one(p, how);
      if (r.outcome != Outcome::kClean && tally.failed(h, std::move(r), o.stop_at_first)) break;
    }
  } else {
    const Dfs& dfs = std::get<Dfs>(o.strategy);
    // Each pass is a whole search over the filter's set; a run that meets
    // a new shared object grows the set and starts the search again, so
    // that the pass that ends is exhaustive over the final set.
    bool stopped = false;
    for (uint64_t total = 0; !stopped;) {
      std::vector<DfsFrame> frames;
      uint64_t pass = 0;
      bool restart = false;
      do {
        if ((o.stop && o.stop()) || total >= dfs.max_runs) {
          stopped = true;
          break;
        }
        DfsPolicy p(frames, dfs.bound);
        RunResult r = one(p, "dfs c=" + std::to_string(dfs.bound) + " schedule " + std::to_string(pass));
        pass++;
        total++;
        if (r.outcome != Outcome::kClean && tally.failed(h, std::move(r), o.stop_at_first)) {
          stopped = true;
          break;
        }
        if (filter_on && filter.grew()) {
          restart = true;
          break;
        }
      } while (dfs_backtrack(frames));
      res.schedules = pass;
      if (!stopped && !restart) {
        res.exhausted = true;
        break;
      }
    }
  }
  tally.finish(filter);
  return res;
}

RunResult replay(const RaceHooks& h, std::string_view schedule) {
  std::string err;
  auto l = parse_line(schedule, &err);
  if (!l) {
    RunResult r;
    r.outcome = Outcome::kDiverged;
    r.detail = err;
    return r;
  }
  Session session(h.nthreads);
  h.fresh();
  RunResult r = checked(h, session.impl().replay_line(h.bodies(), *l, 1'000'000));
  r.how = "replay";
  r.line = line_of(h, r);
  return r;
}

std::string check_directed(std::string_view spec, const std::vector<std::string>& names) {
  std::string err;
  return parse_directed(spec, names, &err) ? "" : err;
}

RunResult replay_directed(const RaceHooks& h, std::string_view spec) {
  std::string err;
  auto segs = parse_directed(spec, h.names, &err);
  if (!segs) {
    RunResult r;
    r.outcome = Outcome::kDiverged;
    r.detail = err;
    return r;
  }
  Session session(h.nthreads);
  DirectedPolicy p(std::move(*segs), h.nthreads, h.names);
  Filter off(false);
  h.fresh();
  RunResult r = checked(h, session.impl().run(h.bodies(), p, off, 1'000'000, nullptr));
  r.how = "directed \"" + std::string(spec) + "\"";
  r.line = line_of(h, r);
  return r;
}

std::string explain(const RunResult& r, const std::vector<std::string>& names) {
  auto name = [&](int t) {
    return static_cast<size_t>(t) < names.size() ? names[static_cast<size_t>(t)] : "T" + std::to_string(t);
  };
  int nthreads = 0;
  for (const TraceStep& s : r.trace) nthreads = std::max(nthreads, s.thread + 1);
  constexpr size_t kColumn = 44;
  std::string out = "  step  ";
  for (int t = 0; t < nthreads; t++) {
    std::string head = name(t);
    head.resize(std::max(head.size(), kColumn), ' ');
    out += head;
  }
  out += "\n";
  for (size_t i = 0; i < r.trace.size(); i++) {
    const TraceStep& s = r.trace[i];
    char num[32];
    std::snprintf(num, sizeof num, "%6zu  ", i);
    std::string row = num;
    row += std::string(kColumn * static_cast<size_t>(s.thread), ' ');
    row += step_text(s);
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + "\n";
  }
  out += "  => " + std::string(outcome_name(r.outcome));
  if (!r.detail.empty()) out += ": " + r.detail;
  out += "\n";
  return out;
}

}  // namespace mmlab::explore
