// Helpers of the revert and race-history tests (revert_test.cpp,
// race_history_test.cpp): a race's minimal schedule, and
// the PCT search every historical race runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "mmlab/explore.h"
#include "repeats.h"
#include "sync/sched.h"

namespace mmlab::test {

// A race's parts (the fixture's setup, the thread bodies, the check), kept
// so that they make an explore::Race and also run under a strategy of the
// test's own: the directed schedule below.
template <typename Fx>
class RaceSpec {
 public:
  using Fn = std::function<void(Fx&)>;
  using CheckFn = std::function<std::optional<std::string>(Fx&)>;
  void setup(Fn f) { setup_ = std::move(f); }
  void thread(std::string name, Fn f) {
    names_.push_back(std::move(name));
    threads_.push_back(std::move(f));
  }
  void check(CheckFn f) { check_ = std::move(f); }

  explore::Race<Fx> race() const {
    explore::Race<Fx> r;
    r.setup(setup_);
    for (size_t i = 0; i < threads_.size(); i++) r.thread(names_[i], threads_[i]);
    if (check_) r.check(check_);
    return r;
  }

  // The directed schedule "T@label U T" of a two-thread race, from one run
  // on a fresh fixture: thread 0 runs until it is about to take `label`,
  // then thread 1 runs while it can, then thread 0 (and thread 1 again
  // whenever thread 0 cannot run). Every run ends with its threads done
  // (no run is cut short: the model's manual lock/unlock pairs are not
  // exception-safe). *hit says whether thread 0 reached the label.
  // The schedule that runs thread `first` whenever it can, the other one
  // otherwise: the two bodies one after the other (as far as locks allow).
  std::string serial(int first) const {
    class Serial final : public sched::Strategy {
     public:
      explicit Serial(int f) : first_(f) {}
      int pick(const sched::Decision& d, std::string*) override {
        return std::find(d.enabled.begin(), d.enabled.end(), first_) != d.enabled.end() ? first_ : d.enabled.front();
      }

     private:
      int first_;
    };
    Serial strategy(first);
    return run_strategy(strategy);
  }

  std::string directed(const std::string& label, bool* hit) const { return directed({{0, label}}, hit); }

  // The same with several stops, "T@L0 U@L1 T U" being {{0, L0}, {1, L1}}:
  // each stop's thread runs (the other one only when it cannot) until it is
  // about to take its label; after the last stop the other thread runs.
  // *hit says whether every stop was reached.
  std::string directed(std::vector<std::pair<int, std::string>> stops, bool* hit) const {
    class Directed final : public sched::Strategy {
     public:
      explicit Directed(std::vector<std::pair<int, std::string>> s) : stops_(std::move(s)) {}
      int pick(const sched::Decision& d, std::string*) override {
        auto enabled = [&](int t) { return std::find(d.enabled.begin(), d.enabled.end(), t) != d.enabled.end(); };
        while (phase_ < stops_.size() && enabled(stops_[phase_].first) &&
               stops_[phase_].second == d.pending[static_cast<size_t>(stops_[phase_].first)].site)
          phase_++;
        const int want = phase_ < stops_.size() ? stops_[phase_].first : 1 - stops_.back().first;
        return enabled(want) ? want : d.enabled.front();
      }
      bool all_reached() const { return phase_ == stops_.size(); }

     private:
      std::vector<std::pair<int, std::string>> stops_;
      size_t phase_ = 0;
    };
    Directed strategy(std::move(stops));
    std::string s = run_strategy(strategy);
    *hit = strategy.all_reached();
    return s;
  }

 private:
  // One run on a fresh fixture under `strategy`; its schedule.
  std::string run_strategy(sched::Strategy& strategy) const {
    auto fx = std::make_unique<Fx>();
    if (setup_) setup_(*fx);
    std::vector<std::function<void()>> bodies;
    for (const Fn& f : threads_) bodies.push_back([&f, &fx] { f(*fx); });
    sched::Scheduler s(static_cast<int>(threads_.size()));
    sched::RunRecord rec = s.run(bodies, strategy, 1'000'000);
    EXPECT_EQ(rec.outcome, sched::Outcome::kClean) << rec.detail;
    return explore::encode_schedule(rec.choices);
  }

  Fn setup_;
  std::vector<std::string> names_;
  std::vector<Fn> threads_;
  CheckFn check_;
};

// Whether a race's PCT search runs with filtering as well as without. Every
// historical race now runs both: GUP-fast's entry reads and its speculative
// reference are points at (table pfn, index) and the refcount's pfn, which
// fork, the collapse and the split touch too, so the filter counts them.
enum class Filter : uint8_t { kBoth, kOnOnly, kOffOnly };

// A finding's schedule line with one step's site edited (the middle step
// gets another site of the run): its replay must stop there and say so.
template <typename Fx>
void expect_edited_line_diverges(explore::Race<Fx>& race, const std::string& line, const char* what) {
  std::string err;
  auto parsed = explore::parse_line(line, &err);
  ASSERT_TRUE(parsed) << what << ": " << err << "\n" << line;
  ASSERT_GE(parsed->sites.size(), 2u) << line;
  explore::ScheduleLine edited = *parsed;
  const size_t at = edited.steps.size() / 2;
  edited.steps[at] = edited.steps[at] == 0 ? 1 : 0;
  auto r = race.replay(explore::format_line(edited));
  EXPECT_EQ(r.outcome, explore::Outcome::kDiverged) << what << ": " << r.summary();
  EXPECT_NE(r.detail.find("diverged at step " + std::to_string(at) + ": expected"), std::string::npos)
      << what << ": " << r.detail;
}

// PCT at depth `depth` with each of seeds 1-5 (seed 1 alone under a
// sanitizer: repeats.h), `runs` runs at most,
// filtering on (the default) and off: each must find a violation, and the
// finding must replay (from its schedule line) to the same violation, step
// count and step hash, 100 times for seed 1's filtered finding; that line
// with one step edited diverges at that step. Prints the runs each seed
// took, k, and the time. k = 0: the profile run's.
template <typename Fx>
void expect_pct_finds(explore::Race<Fx>& race, const char* what, int runs, const char* expect_in_detail,
                      Filter which = Filter::kBoth, int depth = 2, uint64_t k_given = 0) {
  auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  for (bool filter : {true, false}) {
    if ((filter && which == Filter::kOffOnly) || (!filter && which == Filter::kOnOnly)) continue;
    int total = 0;
    uint64_t k = 0;
    std::string counts;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t seed = 1; seed <= static_cast<uint64_t>(repeats(5)); seed++) {
      auto res = race.explore({.depth = depth, .runs = runs, .seed = seed, .k = k_given, .filter = filter});
      ASSERT_TRUE(res.found) << what << " seed " << seed << (filter ? "" : " unfiltered") << ": " << res.summary();
      ASSERT_EQ(res.failure.outcome, explore::Outcome::kViolation) << res.summary();
      EXPECT_NE(res.failure.detail.find(expect_in_detail), std::string::npos) << res.failure.detail;
      // The finding replays to the same run from its line: 100 times for
      // seed 1 (repeats.h), once for the others.
      const bool first = seed == 1 && (filter || which == Filter::kOffOnly);
      ASSERT_FALSE(res.failure.line.empty());
      for (int rep = 0; rep < (first ? repeats(100) : 1); rep++) {
        auto again = race.replay(res.failure.line);
        ASSERT_EQ(again.outcome, explore::Outcome::kViolation) << "replay " << rep << ": " << again.summary();
        ASSERT_EQ(first_line(again.detail), first_line(res.failure.detail)) << "replay " << rep;
        ASSERT_EQ(again.trace_hash, res.failure.trace_hash) << "replay " << rep;
        ASSERT_EQ(again.steps, res.failure.steps) << "replay " << rep;
      }
      if (first) {
        expect_edited_line_diverges(race, res.failure.line, what);
        std::printf("# %s, seed 1: %s\n#   schedule %s\n", what, first_line(res.failure.detail).c_str(),
                    res.failure.schedule.c_str());
      }
      total += res.runs;
      k = res.k;
      counts += (counts.empty() ? "" : " ") + std::to_string(res.runs);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("# %s: PCT d=%d %s (k %llu) found it in %s runs (seeds 1-%d), %.2f s\n", what, depth,
                filter ? "filtered" : "unfiltered", static_cast<unsigned long long>(k), counts.c_str(), repeats(5), s);
  }
}

// Bounded DFS with `bound` preemptions (d - 1) under the revert: it finds
// the race. Prints the schedules run up to the finding and the time.
template <typename Fx>
void expect_dfs_finds(explore::Race<Fx>& race, const char* what, int bound, const char* expect_in_detail) {
  const auto t0 = std::chrono::steady_clock::now();
  auto res = race.explore(explore::Options{.strategy = explore::Dfs{.bound = bound, .max_runs = 200'000}});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(res.found) << what << " DFS c=" << bound << ": " << res.summary();
  EXPECT_NE(res.failure.detail.find(expect_in_detail), std::string::npos) << res.failure.detail;
  std::printf("# %s: DFS c=%d (filtered) found it in run %d, %.2f s\n#   schedule %s\n", what, bound, res.runs, s,
              res.failure.schedule.c_str());
}

// PCT at depth 2, `runs` runs, seed 1, filtering on and off: nothing found.
template <typename Fx>
void expect_pct_clean(explore::Race<Fx>& race, const char* what, int runs, Filter which = Filter::kBoth) {
  for (bool filter : {true, false}) {
    if ((filter && which == Filter::kOffOnly) || (!filter && which == Filter::kOnOnly)) continue;
    const auto t0 = std::chrono::steady_clock::now();
    auto res = race.explore({.depth = 2, .runs = runs, .seed = 1, .filter = filter});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_FALSE(res.found) << what << (filter ? "" : " unfiltered") << ": " << res.summary() << "\nschedule "
                            << res.failure.schedule;
    std::printf("# %s, fixed: %d PCT d=2 %s runs clean (k %llu), %.0f runs/s\n", what, res.runs,
                filter ? "filtered" : "unfiltered", static_cast<unsigned long long>(res.k),
                s > 0 ? res.runs / s : 0.0);
  }
}

}  // namespace mmlab::test
