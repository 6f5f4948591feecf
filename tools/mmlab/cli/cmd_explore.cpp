// `mmlab explore FILE --test NAME`: the race block of one test under the
// explorer (docs/RACES.md), with the strategy of the block or of the
// options, and a report: runs/s, points per run filtered and unfiltered,
// the sites reached and those where a run preempted, the outcome counts and
// the first failure's schedule line; `--explain` prints the failing run's
// interleaving step by step.
//
// The session runs in a child process, so that a run that crashes the
// model becomes the outcome "crash" with that run's choices: each step's
// thread and site go to a shared mapping as they are taken, and the parent
// makes the schedule line from it when the child dies of a signal. Under
// TSan the session runs in this process (TSan does not support fork of a
// multithreaded process well, and a crash is then the run's end anyway).
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <cerrno>
#include <new>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/explore.h"
#include "mmlab/scenario.h"

#if defined(__SANITIZE_THREAD__)
#define MMLAB_EXPLORE_NO_FORK 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MMLAB_EXPLORE_NO_FORK 1
#endif
#endif

namespace mmlab::cli {
namespace {

struct ExploreCli {
  std::string file, test, strategy, schedule;
  int depth = -1, bound = -1, runs = -1;
  double seconds = 0;
  uint64_t seed = 0;
  bool seed_set = false, explain = false, no_filter = false, in_process = false;
  std::vector<std::string> variants;
};

// The steps of the run in progress, in memory the parent still reads after
// the child died. A site is a pointer to a string literal of the binary:
// the child is a fork without exec, so it is valid in the parent too.
struct SharedRun {
  std::atomic<uint64_t> nsteps;
  std::atomic<uint64_t> started;  // runs begun
  char how[128];
  struct Step {
    uint8_t thread, op;
    const char* site;
  };
  static constexpr uint64_t kMaxSteps = 1u << 20;
  Step steps[kMaxSteps];
};

// MMLAB_EXPLORE_TEST_CRASH=RUN:STEP (tests only): the child kills itself
// with SIGSEGV as run RUN (1 = the first, the profile run counting) takes
// step STEP, so that the crash path can be tested without a model bug.
struct TestCrash {
  uint64_t run = 0, step = 0;
  static TestCrash from_env() {
    TestCrash c;
    if (const char* e = std::getenv("MMLAB_EXPLORE_TEST_CRASH"))
      if (std::sscanf(e, "%" SCNu64 ":%" SCNu64, &c.run, &c.step) != 2) c = {};
    return c;
  }
};

class SharedSink final : public explore::StepSink {
 public:
  explicit SharedSink(SharedRun* s) : s_(s), crash_(TestCrash::from_env()) {}
  void begin_run(const std::string& how) override {
    s_->nsteps.store(0, std::memory_order_relaxed);
    std::snprintf(s_->how, sizeof s_->how, "%s", how.c_str());
    s_->started.fetch_add(1, std::memory_order_relaxed);
  }
  void step(int thread, const char* site, uint8_t op) override {
    const uint64_t n = s_->nsteps.load(std::memory_order_relaxed);
    if (n < SharedRun::kMaxSteps) s_->steps[n] = {static_cast<uint8_t>(thread), op, site};
    s_->nsteps.store(n + 1, std::memory_order_release);
    if (crash_.run && s_->started.load(std::memory_order_relaxed) == crash_.run && n == crash_.step) raise(SIGSEGV);
  }

 private:
  SharedRun* s_;
  TestCrash crash_;
};

std::string count_line(const explore::ExploreResult& r) {
  std::string s;
  for (int o = 0; o < explore::kOutcomes; o++) {
    if (o == static_cast<int>(explore::Outcome::kDiverged)) continue;
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", explore::outcome_name(static_cast<explore::Outcome>(o)), r.outcomes[o]);
  }
  return s;
}

void print_report(const explore::ExploreResult& r, double secs) {
  const uint64_t n = std::max(r.runs, 1);
  std::printf("runs: %d in %.2f s (%.0f runs/s)\n", r.runs, secs, secs > 0 ? r.runs / secs : 0.0);
  std::printf("points per run (counted): %llu/%llu/%llu min/mean/max; steps (unfiltered): %llu/%llu/%llu\n",
              static_cast<unsigned long long>(r.points_min), static_cast<unsigned long long>(r.points_sum / n),
              static_cast<unsigned long long>(r.points_max), static_cast<unsigned long long>(r.steps_min),
              static_cast<unsigned long long>(r.steps_sum / n), static_cast<unsigned long long>(r.steps_max));
  std::printf("k: %llu counted, %llu unfiltered; shared objects: %llu\n", static_cast<unsigned long long>(r.k),
              static_cast<unsigned long long>(r.k_unfiltered), static_cast<unsigned long long>(r.shared_objects));
  std::string sites, pre;
  for (auto& s : r.sites) sites += (sites.empty() ? "" : " ") + s;
  for (auto& s : r.preempted_sites) pre += (pre.empty() ? "" : " ") + s;
  std::printf("sites reached (%zu): %s\n", r.sites.size(), sites.c_str());
  std::printf("sites preempted (%zu of %zu): %s\n", r.preempted_sites.size(), r.sites.size(), pre.c_str());
  if (r.exhausted) std::printf("exhausted %llu schedules\n", static_cast<unsigned long long>(r.schedules));
  std::printf("outcomes: %s\n", count_line(r).c_str());
}

// The session: explore (or replay one schedule) and print the report.
// Returns the exit status: 0 nothing found (or, under `expect violation`,
// the violation found), 1 otherwise.
int run_session(const ExploreCli& o, ScenarioRace& race, explore::StepSink* sink) {
  explore::RaceHooks h = race.hooks();
  const RaceSettings st = race.settings();
  std::string strategy = o.strategy;
  std::string schedule = o.schedule;
  if (strategy.empty()) strategy = !schedule.empty() ? "directed" : st.mode == "schedule" ? "directed" : st.mode;
  if (schedule.empty() && st.mode == "schedule" && (o.strategy.empty() || o.strategy == "directed")) schedule = st.schedule;
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  explore::RunResult failure;
  bool found = false;
  if (strategy == "directed") {
    const bool line = schedule.rfind("mmlab-schedule", 0) == 0 || explore::decode_schedule(schedule);
    if (sink) sink->begin_run(line ? "replay" : "directed");
    failure = line ? explore::replay(h, schedule) : explore::replay_directed(h, schedule);
    found = failure.outcome != explore::Outcome::kClean;
    std::printf("%s: %s after %llu steps%s%s\n", line ? "replay" : "directed", explore::outcome_name(failure.outcome),
                static_cast<unsigned long long>(failure.steps), failure.detail.empty() ? "" : ": ", failure.detail.c_str());
  } else {
    explore::Options opt;
    opt.stop_at_first = false;
    opt.sink = sink;
    const bool filter = st.filter && !o.no_filter;
    if (o.seconds > 0) opt.stop = [&] { return secs() >= o.seconds; };
    if (strategy == "dfs") {
      explore::Dfs d;
      d.bound = o.bound >= 0 ? o.bound : st.bound;
      d.max_runs = o.runs > 0 ? static_cast<uint64_t>(o.runs) : st.runs > 0 && st.mode == "dfs" ? static_cast<uint64_t>(st.runs) : 1'000'000;
      d.filter = filter;
      opt.strategy = d;
    } else {
      explore::Pct p;
      p.depth = o.depth >= 0 ? o.depth : st.mode == "pct" ? st.depth : 0;
      p.runs = o.runs > 0 ? o.runs : st.runs > 0 && st.mode == "pct" ? st.runs : 1000;
      p.seed = o.seed_set ? o.seed : st.seed;
      p.filter = filter;
      opt.strategy = p;
    }
    explore::ExploreResult r = explore::explore(h, opt);
    print_report(r, secs());
    found = r.found;
    failure = r.failure;
  }
  if (found) {
    std::printf("first failure: %s (%s): %s\n", explore::outcome_name(failure.outcome), failure.how.c_str(),
                failure.detail.c_str());
    std::printf("schedule: %s\n", failure.line.c_str());
    if (o.explain) {
      explore::RunResult again = explore::replay(h, failure.line);
      std::fputs(explore::explain(again, h.names).c_str(), stdout);
    }
  } else if (o.explain && strategy == "directed") {
    std::fputs(explore::explain(failure, h.names).c_str(), stdout);
  }
  std::fflush(stdout);
  const bool ok = race.expect_violation() ? found && failure.outcome == explore::Outcome::kViolation && !race.unexpected() : !found;
  return ok ? 0 : 1;
}

// The crash of the child: its last run's steps as a schedule line.
void report_crash(int sig, const SharedRun& s, ScenarioRace& race) {
  explore::RaceHooks h = race.hooks();
  explore::RunResult r;
  r.outcome = explore::Outcome::kCrash;
  const uint64_t n = std::min(s.nsteps.load(std::memory_order_acquire), SharedRun::kMaxSteps);
  std::vector<uint8_t> choices;
  for (uint64_t i = 0; i < n; i++) {
    const SharedRun::Step& st = s.steps[i];
    choices.push_back(st.thread);
    r.trace.push_back(explore::TraceStep{st.thread, st.site, st.op, 0, 0});
  }
  r.schedule = explore::encode_schedule(choices);
  r.steps = n;
  std::printf("outcome: crash (signal %d, %s) in run %llu (%s), after %llu steps\n", sig, strsignal(sig),
              static_cast<unsigned long long>(s.started.load()), s.how, static_cast<unsigned long long>(n));
  std::printf("schedule: %s\n", explore::line_of(h, r).c_str());
  std::fflush(stdout);
}

int run_explore(const ExploreCli& o) {
  if (o.strategy == "pct" && o.bound >= 0) {
    std::fprintf(stderr, "mmlab explore: --bound %d: a DFS option, not with --strategy pct\n", o.bound);
    return 2;
  }
  if (o.strategy == "dfs" && o.depth >= 0) {
    std::fprintf(stderr, "mmlab explore: --depth %d: a PCT option, not with --strategy dfs\n", o.depth);
    return 2;
  }
  if (!o.schedule.empty() && !o.strategy.empty() && o.strategy != "directed") {
    std::fprintf(stderr, "mmlab explore: --schedule replays one run: not with --strategy %s\n", o.strategy.c_str());
    return 2;
  }
  std::vector<Variant> variants;
  std::string msg;
  if (!parse_variant_items(o.variants, &variants, &msg)) {
    std::fprintf(stderr, "mmlab explore: --variant %s\n", msg.c_str());
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> tunes;
  for (auto& [k, vals] : variants) {
    if (vals.size() != 1) {
      std::fprintf(stderr, "mmlab explore: --variant %s: one value (an exploration runs one configuration)\n", k.c_str());
      return 2;
    }
    tunes.push_back({k, vals.front()});
  }
  std::string err;
  auto prog = scenario_parse({o.file}, &err);
  if (!prog) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  ScenarioOptions sopt;
  auto race = scenario_race(*prog, o.test, sopt, tunes, &err);
  if (!race) {
    std::fprintf(stderr, "mmlab explore: --test %s: %s\n", o.test.c_str(), err.c_str());
    return 2;
  }
#ifdef MMLAB_EXPLORE_NO_FORK
  const bool fork_it = false;
  std::fprintf(stderr, "mmlab explore: the session runs in this process (no fork under TSan): a crash is mmlab's\n");
#else
  const bool fork_it = !o.in_process;
#endif
  if (!fork_it) return run_session(o, *race, nullptr);

  void* mem = mmap(nullptr, sizeof(SharedRun), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmlab explore: mmap");
    return 1;
  }
  auto* shared = new (mem) SharedRun;  // the mapping is zeroed: no need to touch its 16 MiB
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("mmlab explore: fork");
    return 1;
  }
  if (pid == 0) {
    SharedSink sink(shared);
    const int rc = run_session(o, *race, &sink);
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int rc = 1;
  if (WIFEXITED(status)) {
    rc = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    report_crash(WTERMSIG(status), *shared, *race);
    rc = 1;
  }
  munmap(mem, sizeof(SharedRun));
  return rc;
}

}  // namespace

void add_explore(CLI::App& app) {
  auto o = std::make_shared<ExploreCli>();
  auto* sub = app.add_subcommand("explore", "explore the interleavings of a test's race block (docs/RACES.md)");
  sub->add_option("file", o->file, "the .mms file")->required();
  sub->add_option("--test", o->test, "the test whose race block to explore")->required();
  sub->add_option("--strategy", o->strategy, "pct, dfs or directed (default: the race block's)")
      ->check(CLI::IsMember({"pct", "dfs", "directed"}));
  sub->add_option("--depth", o->depth, "PCT depth, 2 or 3 (0: cycle 2..3)")->check(CLI::Range(0, 3));
  sub->add_option("--bound", o->bound, "DFS preemption bound, 1 to 3")->check(CLI::Range(1, 3));
  sub->add_option("--runs", o->runs, "runs at most")->check(CLI::Range(1, 100'000'000));
  sub->add_option("--seconds", o->seconds, "stop after this long")->check(finite_range(0, 86400));
  sub->add_option("--seed", o->seed, "PCT seed")->check(unsigned_number())->each([o](const std::string&) { o->seed_set = true; });
  sub->add_option("--schedule,--replay", o->schedule, "replay this schedule line, or run this directed schedule (T@label U T)");
  sub->add_flag("--explain", o->explain, "print the failing run's interleaving step by step");
  sub->add_flag("--no-filter", o->no_filter, "count every point, not only those at objects two threads touch");
  sub->add_flag("--in-process", o->in_process, "run the session in this process (a crash is then mmlab's)");
  sub->add_option("--variant", o->variants, "KEY=VALUE: a tune value for the test (one value per key)");
  register_action(sub, [o] { return run_explore(*o); });
}

}  // namespace mmlab::cli
