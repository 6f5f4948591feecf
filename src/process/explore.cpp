// The strategies of the explorer (issue 34, docs/RACES.md) over the
// scheduler of src/sync/sched.h: PCT, the first-enabled profile run, and
// replay of a recorded schedule; and the per-run loop of Race<Fx>.
#include "mmlab/explore.h"

#include <algorithm>
#include <charconv>

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
  }
  return "?";
}

std::string RunResult::summary() const {
  std::string r = std::string(outcome_name(outcome)) + " after " + std::to_string(steps) + " steps";
  if (!detail.empty()) r += ": " + detail;
  r += "; schedule " + schedule;
  return r;
}

std::string ExploreResult::summary() const {
  std::string r = (found ? "found in run " : "nothing in ") + std::to_string(runs) + (found ? "" : " runs") +
                  " (k " + std::to_string(k) + ")";
  if (found) r += ": " + failure.summary();
  return r;
}

std::string encode_schedule(const std::vector<uint8_t>& choices) {
  std::string r;
  for (size_t i = 0; i < choices.size();) {
    size_t j = i;
    while (j < choices.size() && choices[j] == choices[i]) j++;
    if (!r.empty()) r += ',';
    r += std::to_string(choices[i]) + "*" + std::to_string(j - i);
    i = j;
  }
  return r;
}

std::optional<std::vector<uint8_t>> decode_schedule(std::string_view s) {
  std::vector<uint8_t> out;
  if (s.empty()) return out;
  for (bool more = true; more;) {
    const size_t comma = s.find(',');
    std::string_view run = s.substr(0, comma);
    more = comma != std::string_view::npos;  // "1*2," ends in an empty run: malformed
    s = more ? s.substr(comma + 1) : std::string_view{};
    const size_t star = run.find('*');
    unsigned t = 0;
    uint64_t n = 1;
    std::string_view ts = run.substr(0, star);
    auto r1 = std::from_chars(ts.data(), ts.data() + ts.size(), t);
    if (ts.empty() || r1.ec != std::errc{} || r1.ptr != ts.data() + ts.size() || t > 255) return std::nullopt;
    if (star != std::string_view::npos) {
      std::string_view ns = run.substr(star + 1);
      auto r2 = std::from_chars(ns.data(), ns.data() + ns.size(), n);
      if (ns.empty() || r2.ec != std::errc{} || r2.ptr != ns.data() + ns.size() || n == 0 || n > 100'000'000)
        return std::nullopt;
    }
    out.insert(out.end(), n, static_cast<uint8_t>(t));
  }
  return out;
}

namespace {

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

class PctStrategy final : public sched::Strategy {
 public:
  PctStrategy(int nthreads, int depth, uint64_t k, uint64_t seed, uint64_t run) {
    Rng rng{seed * 0x2545f4914f6cdd1dull ^ (run + 1) * 0x9e3779b97f4a7c15ull};
    rng.next();
    // Initial priorities depth .. depth+n-1 in random order (higher runs).
    prio_.resize(static_cast<size_t>(nthreads));
    for (int i = 0; i < nthreads; i++) prio_[static_cast<size_t>(i)] = depth + i;
    for (int i = nthreads - 1; i > 0; i--) std::swap(prio_[static_cast<size_t>(i)], prio_[rng.below(static_cast<uint64_t>(i) + 1)]);
    // depth-1 change points among the k steps; the j-th lowers the thread
    // about to take that step to depth-j, below every initial priority.
    for (int j = 1; j < depth; j++) change_.push_back({rng.below(std::max<uint64_t>(k, 1)), depth - j});
  }

  int pick(const sched::Decision& d, std::string*) override {
    int t = highest(d.enabled);
    for (const auto& [step, p] : change_)
      if (step == d.step) {
        prio_[static_cast<size_t>(t)] = p;
        t = highest(d.enabled);
      }
    return t;
  }

 private:
  int highest(const std::vector<int>& enabled) const {
    int best = enabled.front();
    for (int e : enabled)
      if (prio_[static_cast<size_t>(e)] > prio_[static_cast<size_t>(best)]) best = e;
    return best;
  }
  std::vector<int> prio_;
  std::vector<std::pair<uint64_t, int>> change_;
};

class FirstStrategy final : public sched::Strategy {
 public:
  int pick(const sched::Decision& d, std::string*) override { return d.enabled.front(); }
};

class ReplayStrategy final : public sched::Strategy {
 public:
  explicit ReplayStrategy(std::vector<uint8_t> c) : choices_(std::move(c)) {}
  int pick(const sched::Decision& d, std::string* why) override {
    if (d.step >= choices_.size()) {
      *why = "replay diverged at step " + std::to_string(d.step) + ": the schedule ends there, the run goes on (" +
             next_steps(d) + ")";
      return -1;
    }
    const int t = choices_[d.step];
    if (std::find(d.enabled.begin(), d.enabled.end(), t) == d.enabled.end()) {
      *why = "replay diverged at step " + std::to_string(d.step) + ": expected T" + std::to_string(t) +
             ", which cannot run (" + next_steps(d) + ")";
      return -1;
    }
    return t;
  }
  size_t size() const { return choices_.size(); }

 private:
  static std::string next_steps(const sched::Decision& d) {
    std::string r;
    for (int e : d.enabled) {
      if (!r.empty()) r += "; ";
      r += "T" + std::to_string(e) + " at " + sched::step_name(d.pending[static_cast<size_t>(e)]);
    }
    return r;
  }
  std::vector<uint8_t> choices_;
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

RunResult result_of(sched::RunRecord&& rec) {
  RunResult r;
  r.outcome = outcome_of(rec.outcome);
  r.schedule = encode_schedule(rec.choices);
  r.steps = rec.steps;
  r.trace_hash = rec.trace_hash;
  r.detail = std::move(rec.detail);
  r.abandoned = rec.abandoned;
  return r;
}

}  // namespace

struct Session::Impl {
  explicit Impl(int n) : sched(n) {}
  sched::Scheduler sched;
};

Session::Session(int nthreads) : impl_(std::make_unique<Impl>(nthreads)) {}
Session::~Session() = default;

RunResult Session::run_pct(const Bodies& bodies, int depth, uint64_t k, uint64_t seed, uint64_t run,
                           uint64_t step_bound) {
  PctStrategy s(impl_->sched.nthreads(), depth, k, seed, run);
  return result_of(impl_->sched.run(bodies, s, step_bound));
}

RunResult Session::run_first(const Bodies& bodies, uint64_t step_bound) {
  FirstStrategy s;
  return result_of(impl_->sched.run(bodies, s, step_bound));
}

RunResult Session::replay(const Bodies& bodies, std::string_view schedule, uint64_t step_bound) {
  auto choices = decode_schedule(schedule);
  if (!choices) {
    RunResult r;
    r.outcome = Outcome::kDiverged;
    r.detail = "malformed schedule '" + std::string(schedule) + "'";
    return r;
  }
  ReplayStrategy s(std::move(*choices));
  const size_t want = s.size();
  RunResult r = result_of(impl_->sched.run(bodies, s, step_bound));
  if (r.outcome == Outcome::kClean && r.steps < want) {
    r.outcome = Outcome::kDiverged;
    r.detail = "replay diverged: the run ended after " + std::to_string(r.steps) + " steps, the schedule has " +
               std::to_string(want);
  }
  return r;
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

}  // namespace

ExploreResult explore_pct(const RaceHooks& h, const Pct& pct) {
  ExploreResult res;
  Session session(h.nthreads);
  uint64_t bound = pct.step_bound ? pct.step_bound : 1'000'000;
  res.k = pct.k;
  if (res.k == 0) {
    // The profile run: the lowest thread first, to count the steps.
    h.fresh();
    RunResult prof = checked(h, session.run_first(h.bodies(), bound));
    res.k = prof.steps;
    if (prof.outcome != Outcome::kClean) {
      res.found = true;
      res.failure = std::move(prof);
      return res;
    }
  }
  if (!pct.step_bound) bound = std::max<uint64_t>(10 * res.k, 10'000);
  for (int run = 0; run < pct.runs; run++) {
    h.fresh();
    RunResult r = checked(h, session.run_pct(h.bodies(), pct.depth, res.k, pct.seed, static_cast<uint64_t>(run), bound));
    res.runs = run + 1;
    if (r.outcome != Outcome::kClean) {
      res.found = true;
      res.failure = std::move(r);
      break;
    }
  }
  return res;
}

RunResult replay(const RaceHooks& h, std::string_view schedule) {
  Session session(h.nthreads);
  h.fresh();
  return checked(h, session.replay(h.bodies(), schedule));
}

}  // namespace mmlab::explore
