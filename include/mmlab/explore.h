// Races on purpose (issue 34, docs/RACES.md): run a few thread bodies under
// the deterministic scheduler, one step at a time, with the interleaving
// chosen by a strategy, and get back a schedule that replays the run
// exactly.
//
//   explore::Race<Fx> r;
//   r.setup([](Fx& f) { ... });            // before every run, one thread
//   r.thread("A", [](Fx& f) { ... });
//   r.thread("B", [](Fx& f) { ... });
//   r.check([](Fx& f) -> std::optional<std::string> { ... });  // nullopt: fine
//   auto res = r.explore(explore::Pct{.depth = 2, .runs = 500, .seed = 1});
//   if (res.found) r.replay(res.failure.schedule);  // the same run again
//
// A schedule is the thread chosen at each step, run-length encoded:
// "0*12,1*3,0*7" is 12 steps of thread 0, 3 of thread 1, 7 of thread 0.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mmlab::explore {

enum class Outcome : uint8_t {
  kClean,      // every thread ended and the check found nothing
  kViolation,  // the check said what is wrong
  kDeadlock,   // no thread could run (detail names what each one waits for)
  kStepBound,  // more steps than the bound: a livelock
  kDiverged,   // a replay's schedule no longer fits the run (detail: the step)
  kException,  // a thread body threw
};
const char* outcome_name(Outcome o);

// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): each
// run gives the threads random distinct priorities and lowers the running
// thread's at depth-1 random steps of the k a run takes; the highest
// enabled thread always runs. A bug of depth d is found in one run with
// probability at least 1/(n * k^(d-1)).
struct Pct {
  int depth = 2;
  int runs = 1000;
  uint64_t seed = 1;
  uint64_t k = 0;           // steps per run; 0: measured by a first run
  uint64_t step_bound = 0;  // 0: 10 * k, at least 10,000
};

struct RunResult {
  Outcome outcome = Outcome::kClean;
  std::string schedule;     // run-length encoded choices: replays this run
  uint64_t steps = 0;
  uint64_t trace_hash = 0;  // over each step's (thread, site, op)
  std::string detail;       // the check's message, the deadlock, ...
  // A thread was unwound rather than run to its end (a deadlock, an
  // exception): locks may still be held, so the run's objects are kept,
  // never torn down (Race keeps its fixture alive for the process).
  bool abandoned = false;
  std::string summary() const;
};

struct ExploreResult {
  bool found = false;  // some run was not clean
  int runs = 0;        // runs made (up to and including the finding)
  uint64_t k = 0;      // steps per run PCT was sized for
  RunResult failure;   // the first run that was not clean (if found)
  std::string summary() const;
};

// The schedule's encoding, both ways. decode_schedule returns nullopt on a
// malformed string.
std::string encode_schedule(const std::vector<uint8_t>& choices);
std::optional<std::vector<uint8_t>> decode_schedule(std::string_view s);

// Persistent worker threads (one per body) for many runs: thread creation
// is paid once, and each worker keeps its simulated CPU id for the session.
class Session {
 public:
  explicit Session(int nthreads);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  using Bodies = std::vector<std::function<void()>>;
  // One run under PCT: `run` selects the run's random draws from `seed`.
  RunResult run_pct(const Bodies& bodies, int depth, uint64_t k, uint64_t seed, uint64_t run, uint64_t step_bound);
  // One run that takes the lowest enabled thread at every step (the
  // profile run that measures k).
  RunResult run_first(const Bodies& bodies, uint64_t step_bound);
  // The run `schedule` describes; kDiverged, with the step, if the run asks
  // for a choice the schedule does not give or cannot make.
  RunResult replay(const Bodies& bodies, std::string_view schedule, uint64_t step_bound = 1'000'000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
};
ExploreResult explore_pct(const RaceHooks& h, const Pct& pct);
RunResult replay(const RaceHooks& h, std::string_view schedule);

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

  ExploreResult explore(const Pct& pct) { return explore_pct(hooks(), pct); }
  RunResult replay(std::string_view schedule) { return explore::replay(hooks(), schedule); }
  // The fixture of the last run (kept until the next run starts, or for
  // good if the run abandoned it), to look at the end state.
  Fx* last() { return last_; }

 private:
  RaceHooks hooks() {
    RaceHooks h;
    h.nthreads = static_cast<int>(threads_.size());
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
};

}  // namespace mmlab::explore
