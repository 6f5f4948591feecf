// Races on purpose (issue 34, docs/RACES.md): run a few thread bodies under
// the deterministic scheduler, one step at a time, with the interleaving
// chosen by a strategy, and get back a schedule line that replays the run
// exactly.
//
//   explore::Race<Fx> r;
//   r.setup([](Fx& f) { ... });            // before every run, one thread
//   r.thread("A", [](Fx& f) { ... });
//   r.thread("B", [](Fx& f) { ... });
//   r.check([](Fx& f) -> std::optional<std::string> { ... });  // nullopt: fine
//   auto res = r.explore(explore::Pct{.depth = 2, .runs = 500, .seed = 1});
//   if (res.found) r.replay(res.failure.line);      // the same run again
//   r.replay_directed("A@some.label B A");          // a window, by name
//
// The choices alone are the thread chosen at each step, run-length encoded:
// "0*12,1*3,0*7" is 12 steps of thread 0, 3 of thread 1, 7 of thread 0. A
// schedule line (format_line) adds the format version, the build, the test,
// its tune values, the step hash and each step's site, so that a replay
// checks every step and names the first one that differs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mmlab::explore {

enum class Outcome : uint8_t {
  kClean,      // every thread ended and the check found nothing
  kViolation,  // the check said what is wrong
  kDeadlock,   // no thread could run (detail names what each one waits for)
  kStepBound,  // more steps than the bound: a livelock
  kDiverged,   // a replay's schedule no longer fits the run (detail: the step)
  kException,  // a thread body threw
  kCrash,      // the process running the session died (mmlab explore only)
};
inline constexpr int kOutcomes = 7;
const char* outcome_name(Outcome o);

// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): each
// run gives the threads random distinct priorities and lowers the running
// thread's at depth-1 random points of the k a run meets; the highest
// enabled thread always runs. A bug of depth d is found in one run with
// probability at least 1/(n * k^(d-1)).
struct Pct {
  int depth = 0;            // 0: cycle 2, 3, 2, 3, ... over the runs
  int runs = 1000;
  uint64_t seed = 1;
  uint64_t k = 0;           // points per run; 0: measured by a profile run
  uint64_t step_bound = 0;  // 0: 10 * steps of the profile run, at least 10,000
  bool filter = true;       // count only points at objects two threads touch
  // The runs made are first_run, first_run + run_stride, ... (`runs` of
  // them): several sessions share one seed's runs (mmlab explore --jobs).
  uint64_t first_run = 0;
  uint64_t run_stride = 1;
};

// Bounded depth-first search: every schedule with at most `bound`
// preemptions (a switch away from a thread that could go on), branching
// only at the counted points; exhaustive unless max_runs stops it first.
struct Dfs {
  int bound = 2;
  uint64_t max_runs = 1'000'000;
  uint64_t step_bound = 0;
  bool filter = true;
};

// One step of a run, as a trace keeps it. site is a string literal of the
// model (valid for the life of the program, in a forked child too).
struct TraceStep {
  int thread = 0;
  const char* site = "";
  uint8_t op = 0;      // sched::Op
  uint8_t kind = 0;    // sched::ObjKind
  uint64_t number = 0;
};
std::string step_text(const TraceStep& s);  // "mutex_lock acquire mutex#1"

struct RunResult {
  Outcome outcome = Outcome::kClean;
  std::string schedule;     // run-length encoded choices: replays this run
  std::string line;         // the schedule line (filled for findings and replays)
  uint64_t steps = 0;
  uint64_t trace_hash = 0;  // over each step's (thread, site, op)
  std::string detail;       // the check's message, the deadlock, ...
  // A thread was unwound rather than run to its end (a deadlock, an
  // exception): locks may still be held, so the run's objects are kept,
  // never torn down (Race keeps its fixture alive for the process).
  bool abandoned = false;
  std::string how;          // which strategy made it: "pct d=2 seed 1 run 17"
  std::vector<TraceStep> trace;
  std::string summary() const;
};

struct ExploreResult {
  bool found = false;  // some run was not clean
  int runs = 0;        // runs made (up to and including the finding), not counting the profile run
  uint64_t k = 0;      // points per run PCT was sized for (filtered if filtering)
  uint64_t k_unfiltered = 0;  // steps of the profile run
  RunResult failure;   // the first run that was not clean (if found)
  Outcome outcome = Outcome::kClean;  // failure.outcome
  std::string replay;                 // failure.line: r.replay(res.replay) runs it again
  // Bounded DFS: whether every schedule within the bound was run, and how
  // many the last (complete) pass ran.
  bool exhausted = false;
  uint64_t schedules = 0;
  // Over all runs:
  uint64_t outcomes[kOutcomes] = {};
  uint64_t steps_min = 0, steps_max = 0, steps_sum = 0;
  uint64_t points_min = 0, points_max = 0, points_sum = 0;  // counted points
  std::vector<std::string> sites;            // every site a run reached
  std::vector<std::string> preempted_sites;  // those where a run preempted
  uint64_t shared_objects = 0;               // the filter's set at the end
  std::string summary() const;
};

// The encoding of the choices, both ways. decode_schedule returns nullopt
// on a malformed string.
std::string encode_schedule(const std::vector<uint8_t>& choices);
std::optional<std::vector<uint8_t>> decode_schedule(std::string_view s);

// A schedule line: "mmlab-schedule v1 build=… test=… tune=… threads=A,B
// choices=0*3,1*2 hash=… sites=mutex_lock:acquire;test.w:label steps=ABAAB". Values are
// %-escaped (space, %, and the list separators). steps holds one index
// into sites per step (one base-64 digit, two if there are more than 64
// sites).
struct ScheduleLine {
  std::string build;
  std::string test;
  std::string tune;
  std::vector<std::string> threads;
  std::vector<uint8_t> choices;
  uint64_t hash = 0;
  bool has_hash = false;
  std::vector<std::string> sites;  // "site:op"
  std::vector<uint32_t> steps;     // per step, an index into sites; empty: unchecked
};
inline constexpr int kLineVersion = 1;
std::string format_line(const ScheduleLine& l);
// Accepts a full line or bare choices ("0*3,1*2"). nullopt with *err set
// on a malformed one (the token named).
std::optional<ScheduleLine> parse_line(std::string_view s, std::string* err);

// Receives each run's steps as they are taken, so that a parent process
// knows the choices of a run that crashes its child (mmlab explore).
struct StepSink {
  virtual ~StepSink() = default;
  virtual void begin_run(const std::string& how) = 0;
  virtual void step(int thread, const char* site, uint8_t op) = 0;
};

// Whether this build can explore: not one built without schedule points
// (CMake MMLAB_SCHED_POINTS=OFF, the bench preset), in which a Session's
// constructor throws std::runtime_error with unavailable_reason(); callers
// that can say so first (a scenario's race block SKIPs, the CLI exits 2)
// ask available().
bool available();
const char* unavailable_reason();

// Persistent worker threads (one per body) for many runs: thread creation
// is paid once, and each worker keeps its simulated CPU id for the session.
class Session {
 public:
  explicit Session(int nthreads);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  using Bodies = std::vector<std::function<void()>>;
  // One run under PCT: `run` selects the run's random draws from `seed`
  // (unfiltered: k counts every step).
  RunResult run_pct(const Bodies& bodies, int depth, uint64_t k, uint64_t seed, uint64_t run, uint64_t step_bound);
  // One run that takes the lowest enabled thread at every step (the
  // profile run that measures k).
  RunResult run_first(const Bodies& bodies, uint64_t step_bound);
  // One run that takes a uniformly random enabled thread at every step,
  // drawn from `seed` and `run` (mmlab stress --sched random).
  RunResult run_random(const Bodies& bodies, uint64_t seed, uint64_t run, uint64_t step_bound);
  // The run `schedule` (bare choices or a schedule line) describes;
  // kDiverged, with the step, if the run asks for a choice the schedule
  // does not give or cannot make, or (a line with sites) takes a step at
  // another site than the recorded one.
  RunResult replay(const Bodies& bodies, std::string_view schedule, uint64_t step_bound = 1'000'000);
  // The steps every run of the session has taken so far (the decisions a
  // strategy made), readable from any thread while a run goes on: a
  // watchdog's measure of progress that no wall clock decides.
  uint64_t steps_taken() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// For code outside the model that a Session's bodies run (a tool's own
// lock held across model calls): whether the calling thread is in a run,
// and a wait that is one step per attempt there. attempt() may take what
// it tests for (a try_lock); after a failed one the thread waits until
// another thread has taken a step (an OS block would hang the run: only
// one thread moves). Outside a run it polls with a yield between attempts.
bool in_run();
void wait_until(const char* site, const std::function<bool()>& attempt);

// The untyped core of Race<Fx>: fresh() makes a new fixture and sets it up
// (every run starts from it), bodies() its thread bodies, check() its
// verdict after a run in which every thread ended.
struct RaceHooks {
  std::function<void()> fresh;
  std::function<Session::Bodies()> bodies;
  std::function<std::optional<std::string>()> check;
  // After a run whose result is `abandoned`: keep the fixture from being
  // destroyed (its System may hold locks nobody will release).
  std::function<void()> abandon;
  int nthreads = 0;
  std::vector<std::string> names;  // the threads' names (directed schedules, --explain)
  std::string test_id;             // for the schedule line
  std::string tune;                // "key=value,..." for the schedule line
};

struct Options {
  std::variant<Pct, Dfs> strategy = Pct{};
  bool stop_at_first = true;   // false: run them all, count the outcomes
  StepSink* sink = nullptr;
  std::function<bool()> stop = {};  // asked between runs: true ends the exploration
};

ExploreResult explore(const RaceHooks& h, const Options& o);
inline ExploreResult explore_pct(const RaceHooks& h, const Pct& pct) { return explore(h, Options{.strategy = pct}); }
RunResult replay(const RaceHooks& h, std::string_view schedule);
// A directed schedule: "T@label U T" runs T until it is about to execute
// a point whose site is `label`, then U to its end (or to its own label),
// then T; threads left over run to their ends, lowest first. Threads by
// the names given to Race::thread (or T0, T1, ...). A label never reached
// or a malformed schedule ends as kDiverged with the reason.
RunResult replay_directed(const RaceHooks& h, std::string_view spec);
// Checks a directed schedule's syntax and names; "" when it is fine.
std::string check_directed(std::string_view spec, const std::vector<std::string>& names);
// The interleaving of a run (its trace) as text: one column per thread,
// each step with its site, op and object.
std::string explain(const RunResult& r, const std::vector<std::string>& names);
// The schedule line of a run of these hooks.
std::string line_of(const RaceHooks& h, const RunResult& r);

template <typename Fx>
class Race {
 public:
  using Fn = std::function<void(Fx&)>;
  void setup(Fn f) { setup_ = std::move(f); }
  void thread(std::string name, Fn f) {
    names_.push_back(std::move(name));
    threads_.push_back(std::move(f));
  }
  void check(std::function<std::optional<std::string>(Fx&)> f) { check_ = std::move(f); }
  // What the schedule line names: the test and its tune values.
  void id(std::string test_id, std::string tune = "") {
    test_id_ = std::move(test_id);
    tune_ = std::move(tune);
  }

  ExploreResult explore(const Pct& pct) { return explore::explore(hooks(), Options{.strategy = pct}); }
  ExploreResult explore(const Options& o) { return explore::explore(hooks(), o); }
  RunResult replay(std::string_view schedule) { return explore::replay(hooks(), schedule); }
  RunResult replay_directed(std::string_view spec) { return explore::replay_directed(hooks(), spec); }
  std::string explain(const RunResult& r) const { return explore::explain(r, names_); }
  // The fixture of the last run (kept until the next run starts, or for
  // good if the run abandoned it), to look at the end state.
  Fx* last() { return last_; }

 private:
  RaceHooks hooks() {
    RaceHooks h;
    h.nthreads = static_cast<int>(threads_.size());
    h.names = names_;
    h.test_id = test_id_;
    h.tune = tune_;
    h.fresh = [this] {
      fx_.reset();
      fx_ = std::make_unique<Fx>();
      last_ = fx_.get();
      if (setup_) setup_(*fx_);
    };
    h.abandon = [this] {
      // Never destroyed, and still reachable (no leak report).
      static auto* kept = new std::vector<std::unique_ptr<Fx>>;
      kept->push_back(std::move(fx_));
    };
    h.bodies = [this] {
      Session::Bodies b;
      for (Fn& f : threads_) b.push_back([&f, this] { f(*fx_); });
      return b;
    };
    h.check = [this]() -> std::optional<std::string> {
      return check_ ? check_(*fx_) : std::nullopt;
    };
    return h;
  }

  Fn setup_;
  std::vector<std::string> names_;
  std::vector<Fn> threads_;
  std::function<std::optional<std::string>(Fx&)> check_;
  std::unique_ptr<Fx> fx_;
  Fx* last_ = nullptr;
  std::string test_id_, tune_;
};

}  // namespace mmlab::explore
