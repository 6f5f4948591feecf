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
#include <set>
#include <sstream>
#include <algorithm>

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
  int depth = -1, bound = -1, runs = -1, jobs = 1;
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

// The strategy the options and the block choose: "pct", "dfs" or
// "directed" (a directed schedule or a schedule line in *schedule).
std::string strategy_of(const ExploreCli& o, const RaceSettings& st, std::string* schedule) {
  *schedule = o.schedule;
  std::string strategy = o.strategy;
  if (strategy.empty()) strategy = !schedule->empty() || st.mode == "schedule" ? "directed" : st.mode;
  if (schedule->empty() && st.mode == "schedule" && strategy == "directed") *schedule = st.schedule;
  return strategy;
}

// The exploration job `job` of `jobs` makes: PCT's runs job, job + jobs, ...
explore::Options options_of(const ExploreCli& o, const RaceSettings& st, const std::string& strategy, int job, int jobs) {
  explore::Options opt;
  opt.stop_at_first = false;
  const bool filter = st.filter && !o.no_filter;
  if (strategy == "dfs") {
    explore::Dfs d;
    d.bound = o.bound >= 0 ? o.bound : st.bound;
    d.max_runs = o.runs > 0 ? static_cast<uint64_t>(o.runs) : st.runs > 0 && st.mode == "dfs" ? static_cast<uint64_t>(st.runs) : 1'000'000;
    d.filter = filter;
    opt.strategy = d;
    return opt;
  }
  explore::Pct p;
  p.depth = o.depth >= 0 ? o.depth : st.mode == "pct" ? st.depth : 0;
  const int runs = o.runs > 0 ? o.runs : st.runs > 0 && st.mode == "pct" ? st.runs : 1000;
  p.runs = (runs - job + jobs - 1) / jobs;
  p.first_run = static_cast<uint64_t>(job);
  p.run_stride = static_cast<uint64_t>(jobs);
  p.seed = o.seed_set ? o.seed : st.seed;
  p.filter = filter;
  opt.strategy = p;
  return opt;
}

// What a job's child sends its parent: the exploration's result as
// "key value" lines (a failure's detail on one line).
std::string encode_result(const explore::ExploreResult& r, bool unexpected) {
  std::string s = fmt::format("runs {}\nk {}\nku {}\nshared {}\nsteps {} {} {}\npoints {} {} {}\nunexpected {}\n", r.runs, r.k,
                              r.k_unfiltered, r.shared_objects, r.steps_min, r.steps_max, r.steps_sum, r.points_min,
                              r.points_max, r.points_sum, unexpected ? 1 : 0);
  for (int i = 0; i < explore::kOutcomes; i++) s += fmt::format("outcome {} {}\n", i, r.outcomes[i]);
  for (const std::string& x : r.sites) s += "site " + x + "\n";
  for (const std::string& x : r.preempted_sites) s += "pre " + x + "\n";
  if (r.found) {
    std::string detail = r.failure.detail;
    std::replace(detail.begin(), detail.end(), '\n', ' ');
    s += fmt::format("fail {} {}\nhow {}\ndetail {}\nline {}\n", static_cast<int>(r.failure.outcome), r.failure.steps,
                     r.failure.how, detail, r.failure.line);
  }
  return s;
}

// Merges a job's lines into *r; the failure of the lowest run wins.
void merge_result(const std::string& text, explore::ExploreResult* r, bool* unexpected, bool first) {
  std::istringstream in(text);
  explore::ExploreResult j;
  bool un = false;
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
    std::istringstream v(val);
    if (key == "runs") v >> j.runs;
    else if (key == "k") v >> j.k;
    else if (key == "ku") v >> j.k_unfiltered;
    else if (key == "shared") v >> j.shared_objects;
    else if (key == "steps") v >> j.steps_min >> j.steps_max >> j.steps_sum;
    else if (key == "points") v >> j.points_min >> j.points_max >> j.points_sum;
    else if (key == "unexpected") un = val == "1";
    else if (key == "outcome") {
      int i = 0;
      uint64_t n = 0;
      v >> i >> n;
      if (i >= 0 && i < explore::kOutcomes) j.outcomes[i] = n;
    } else if (key == "site") j.sites.push_back(val);
    else if (key == "pre") j.preempted_sites.push_back(val);
    else if (key == "fail") {
      int o = 0;
      v >> o >> j.failure.steps;
      j.found = true;
      j.failure.outcome = static_cast<explore::Outcome>(o);
    } else if (key == "how") j.failure.how = val;
    else if (key == "detail") j.failure.detail = val;
    else if (key == "line") j.failure.line = val;
  }
  auto run_of = [](const std::string& how) {
    const size_t at = how.rfind(" run ");
    return at == std::string::npos ? 0ull : std::strtoull(how.c_str() + at + 5, nullptr, 10);
  };
  if (first) {
    r->steps_min = j.steps_min;
    r->points_min = j.points_min;
    r->k = j.k;
    r->k_unfiltered = j.k_unfiltered;
  }
  r->runs += j.runs;
  r->shared_objects = std::max(r->shared_objects, j.shared_objects);
  r->steps_min = std::min(r->steps_min, j.steps_min);
  r->steps_max = std::max(r->steps_max, j.steps_max);
  r->steps_sum += j.steps_sum;
  r->points_min = std::min(r->points_min, j.points_min);
  r->points_max = std::max(r->points_max, j.points_max);
  r->points_sum += j.points_sum;
  for (int i = 0; i < explore::kOutcomes; i++) r->outcomes[i] += j.outcomes[i];
  std::set<std::string> sites(r->sites.begin(), r->sites.end()), pre(r->preempted_sites.begin(), r->preempted_sites.end());
  sites.insert(j.sites.begin(), j.sites.end());
  pre.insert(j.preempted_sites.begin(), j.preempted_sites.end());
  r->sites.assign(sites.begin(), sites.end());
  r->preempted_sites.assign(pre.begin(), pre.end());
  if (j.found && (!r->found || run_of(j.failure.how) < run_of(r->failure.how))) {
    r->found = true;
    r->failure = j.failure;
    *unexpected = un;
  }
}

// The end of a session, in whichever process holds its result: the first
// failure, its interleaving, and the exit status (0: nothing found, or,
// under `expect violation`, the violation found; 1 otherwise).
int finish(const ExploreCli& o, ScenarioRace& race, bool found, const explore::RunResult& failure, bool unexpected,
           bool directed) {
  explore::RaceHooks h = race.hooks();
  if (found) {
    std::printf("first failure: %s (%s): %s\n", explore::outcome_name(failure.outcome), failure.how.c_str(),
                failure.detail.c_str());
    std::printf("schedule: %s\n", failure.line.c_str());
    if (o.explain) {
      explore::RunResult again = explore::replay(h, failure.line);
      std::fputs(explore::explain(again, h.names).c_str(), stdout);
    }
  } else if (o.explain && directed) {
    std::fputs(explore::explain(failure, h.names).c_str(), stdout);
  }
  std::fflush(stdout);
  const bool ok = race.expect_violation() ? found && failure.outcome == explore::Outcome::kViolation && !unexpected : !found;
  return ok ? 0 : 1;
}

// The session: explore (or replay one schedule) and print the report; as
// job `job` of several (out_fd >= 0), send the result to the parent instead.
int run_session(const ExploreCli& o, ScenarioRace& race, explore::StepSink* sink, int job = 0, int jobs = 1,
                int out_fd = -1) {
  explore::RaceHooks h = race.hooks();
  const RaceSettings st = race.settings();
  std::string schedule;
  const std::string strategy = strategy_of(o, st, &schedule);
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (strategy == "directed") {
    const bool line = schedule.rfind("mmlab-schedule", 0) == 0 || explore::decode_schedule(schedule);
    if (sink) sink->begin_run(line ? "replay" : "directed");
    explore::RunResult r = line ? explore::replay(h, schedule) : explore::replay_directed(h, schedule);
    std::printf("%s: %s after %llu steps%s%s\n", line ? "replay" : "directed", explore::outcome_name(r.outcome),
                static_cast<unsigned long long>(r.steps), r.detail.empty() ? "" : ": ", r.detail.c_str());
    return finish(o, race, r.outcome != explore::Outcome::kClean, r, race.unexpected(), true);
  }
  explore::Options opt = options_of(o, st, strategy, job, jobs);
  opt.sink = sink;
  if (o.seconds > 0) opt.stop = [&] { return secs() >= o.seconds; };
  explore::ExploreResult r = explore::explore(h, opt);
  if (out_fd >= 0) {
    const std::string text = encode_result(r, race.unexpected());
    for (size_t off = 0; off < text.size();) {
      const ssize_t n = write(out_fd, text.data() + off, text.size() - off);
      if (n <= 0 && errno != EINTR) return 1;
      if (n > 0) off += static_cast<size_t>(n);
    }
    return 0;
  }
  print_report(r, secs());
  return finish(o, race, r.found, r.failure, race.unexpected(), false);
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
  std::printf("outcome: crash (signal %d, %s) in the session's run %llu (%s), after %llu steps\n", sig, strsignal(sig),
              static_cast<unsigned long long>(s.started.load()), s.how, static_cast<unsigned long long>(n));
  std::printf("schedule: %s\n", explore::line_of(h, r).c_str());
  std::fflush(stdout);
}

// --jobs J: J sessions at once, each in a child of its own (PCT: job j
// makes runs j, j + J, ... of the seed); the parent merges their results
// and reports a crash with the job whose child died.
int run_jobs(const ExploreCli& o, ScenarioRace& race) {
  struct Job {
    pid_t pid = -1;
    int fd = -1;
    SharedRun* shared = nullptr;
    std::string text;
  };
  std::vector<Job> jobs(static_cast<size_t>(o.jobs));
  const auto t0 = std::chrono::steady_clock::now();
  std::fflush(stdout);
  for (int j = 0; j < o.jobs; j++) {
    Job& job = jobs[static_cast<size_t>(j)];
    void* mem = mmap(nullptr, sizeof(SharedRun), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fds[2];
    if (mem == MAP_FAILED || pipe(fds) != 0) {
      std::perror("mmlab explore: --jobs");
      return 1;
    }
    job.shared = new (mem) SharedRun;
    job.pid = fork();
    if (job.pid < 0) {
      std::perror("mmlab explore: fork");
      return 1;
    }
    if (job.pid == 0) {
      close(fds[0]);
      SharedSink sink(job.shared);
      _exit(run_session(o, race, &sink, j, o.jobs, fds[1]));
    }
    close(fds[1]);
    job.fd = fds[0];
  }
  explore::ExploreResult all;
  bool unexpected = false, crashed = false;
  for (size_t j = 0; j < jobs.size(); j++) {
    char buf[4096];
    for (ssize_t n; (n = read(jobs[j].fd, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      jobs[j].text.append(buf, static_cast<size_t>(n));
    }
    close(jobs[j].fd);
    int status = 0;
    while (waitpid(jobs[j].pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      std::printf("job %zu: ", j);
      report_crash(WTERMSIG(status), *jobs[j].shared, race);
      all.outcomes[static_cast<int>(explore::Outcome::kCrash)]++;
      crashed = true;
    } else {
      merge_result(jobs[j].text, &all, &unexpected, j == 0);
    }
    munmap(jobs[j].shared, sizeof(SharedRun));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("jobs: %d\n", o.jobs);
  print_report(all, secs);
  const int rc = finish(o, race, all.found, all.failure, unexpected, false);
  return crashed ? 1 : rc;
}

// A build without schedule points cannot explore (the bench preset).
int refuse_without_points() {
  std::fprintf(stderr, "mmlab explore: %s\n", explore::unavailable_reason());
  return 2;
}

int run_explore(const ExploreCli& o) {
  if (o.jobs > 1 && (o.strategy == "dfs" || o.strategy == "directed" || !o.schedule.empty())) {
    std::fprintf(stderr, "mmlab explore: --jobs %d: PCT only (DFS and one schedule are one session)\n", o.jobs);
    return 2;
  }
  if (o.jobs > 1 && o.in_process) {
    std::fprintf(stderr, "mmlab explore: --jobs %d: each job is a child process, not with --in-process\n", o.jobs);
    return 2;
  }
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
  if (!fork_it && o.jobs > 1) {
    std::fprintf(stderr, "mmlab explore: --jobs %d: each job is a child process (none under TSan)\n", o.jobs);
    return 2;
  }
  if (!fork_it) return run_session(o, *race, nullptr);
  if (o.jobs > 1) {
    const RaceSettings st = race->settings();
    std::string schedule;
    if (strategy_of(o, st, &schedule) != "pct") {
      std::fprintf(stderr, "mmlab explore: --jobs %d: PCT only; test %s's block is %s\n", o.jobs, o.test.c_str(), st.mode.c_str());
      return 2;
    }
  }

  if (o.jobs > 1) return run_jobs(o, *race);
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
  sub->add_option("--jobs,-j", o->jobs, "PCT sessions at once, each in a child process (job j makes runs j, j+J, ...)")
      ->check(CLI::Range(1, 64));
  sub->add_flag("--explain", o->explain, "print the failing run's interleaving step by step");
  sub->add_flag("--no-filter", o->no_filter, "count every point, not only those at objects two threads touch");
  sub->add_flag("--in-process", o->in_process, "run the session in this process (a crash is then mmlab's)");
  sub->add_option("--variant", o->variants, "KEY=VALUE: a tune value for the test (one value per key)");
  register_action(sub, [o] { return explore::available() ? run_explore(*o) : refuse_without_points(); });
}

}  // namespace mmlab::cli
