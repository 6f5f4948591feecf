// The .mms scenario language, version 1: parse files whole, then run each
// test on a fresh System and report in kselftest TAP. The reference for
// users (every statement, its errors, `mmlab run` and `mmlab diff`) is
// docs/scenario-language.md. Besides version 1's statements this build has:
//   advance DURATION                         virtual clock forward (ns/us/ms/s
//                                            suffix required); runs the
//                                            khugepaged wakes inside it
//   P thp-disable yes|no [except-advised]    prctl(PR_SET_THP_DISABLE)
//   P userfaultfd ADDR SIZE missing|wp|missing,wp   UFFDIO_REGISTER
//   P uffd-wp ADDR SIZE on|off               UFFDIO_WRITEPROTECT
//   when KEY=V1[,V2...] STATEMENT            STATEMENT only under those values of a tune key
//   expect violation TEXT                    violations are collected, one must contain TEXT
//   P print smaps|pagetable [ADDR SIZE], P print folio ADDR, counters print [GLOB]
//                                            state as `#` lines in the TAP output
//   expect P ADDR soft-dirty|uffd-wp yes|no  the PTE's bits
//   P vm-read Q ADDR SIZE LOCAL              process_vm_readv of Q's range into P
//   expect P smaps ADDR FIELD SIZE, expect P status FIELD SIZE
//                                            a size field of /proc/PID/smaps (the VMA
//                                            containing ADDR) or /proc/PID/status
//   P remember ADDR, expect P ADDR same-frame|other-frame
//                                            the frame mapped at ADDR is (not) the one
//                                            remembered there
// and `khugepaged [N]` runs N full scans of khugepaged over every
// registered mm on that clock.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mmlab {

struct ScenarioProgram;  // parsed files (opaque)

// Parse every file whole. nullptr on error, with *error =
// "file:line:column: expected ..." (or "file: cannot read").
std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse(const std::vector<std::string>& paths,
                                                                             std::string* error);
// Parse from a string (tests); `name` stands in for the file name.
std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse_text(const std::string& name,
                                                                                  const std::string& text,
                                                                                  std::string* error);

// Which tests run, by name: globs (fnmatch) that select and globs that
// exclude ("!GLOB", or `--exclude GLOB` on the command line). A test runs
// when it matches a selecting glob (or there is none) and no excluding one.
struct TestFilter {
  std::vector<std::string> include, exclude;
  TestFilter() = default;
  TestFilter(const std::string& glob) { add(glob); }  // NOLINT: one glob reads as a filter
  TestFilter(const char* glob) { add(glob); }         // NOLINT
  void add(const std::string& glob);  // "!GLOB" excludes; "" adds nothing
  bool matches(const std::string& name) const;
  bool empty() const { return include.empty() && exclude.empty(); }
  std::string text() const;  // "a*, !b*"
};

// The tests of prog that the filter selects (all with an empty one).
// `mmlab run` and `mmlab diff` refuse to run none (exit 2).
size_t scenario_count_tests(const ScenarioProgram& prog, const TestFilter& filter);
// Their names, file by file in order: `mmlab run --list`.
std::vector<std::string> scenario_test_names(const ScenarioProgram& prog, const TestFilter& filter);

enum class Outcome { kPass, kFail, kXfail, kXpass, kSkip, kError };
const char* outcome_name(Outcome o);
// The language's word for a madvise advice (`dontneed`), or nullptr when it
// has none; for tools that write scenarios.
const char* scenario_advice_word(int advice);

// Expectations of one kind a backend skipped, and why: "KEY: ..." or
// "KEY (...)", where KEY is a host probe's name (zero_page, soft_dirty, ...),
// `background` (machine-wide statistics other processes moved), or what the
// host has no interface for (exclusive, pinned, counter, check).
struct SkippedExpectations {
  std::string key, why;
  int count = 0;
};

struct ScenarioResult {
  std::string file, name;
  // Expectations the backend cannot observe (the host has no interface for
  // PageAnonExclusive, pins, model counters or the invariant checker) or
  // whose meaning depends on a capability the host lacks (host probes): each
  // is skipped on its own and counted; the rest of the test still runs.
  int skipped_expectations = 0;
  std::vector<SkippedExpectations> skips;  // per reason, in the order first seen
  std::string variant;  // "gup.walk=batch" when run under --variant
  Outcome outcome = Outcome::kPass;
  std::string reason;                    // skip/xfail reason
  std::vector<std::string> diagnostics;  // "file:line: expected ..., found ..."
  // Under `expect violation`: every violation detected (checker, data
  // checks, the model's recorded findings, the leak check), in order.
  std::vector<std::string> violations;
  // What the checker found after the teardown (every process exited, every
  // handle released, every file closed): frames or page-table pages still
  // in use, a broken invariant. Unless the test errored or was skipped, each
  // is also in diagnostics or violations.
  std::vector<std::string> leaks;
  double seconds = 0;                    // wall time of the test
  // The selftest's own `[RUN] ...` text of a generated replay ("" if none),
  // and what `print` statements printed: both go out as `#` lines before
  // the result line. A failure's state (smaps, page table, folio, counters
  // of what the failing statement named) follows its message in diagnostics.
  std::string run_text;
  std::vector<std::string> output;
  // With ScenarioOptions::record_states: "FILE:LINE DIGEST" after every
  // statement run, the digest of the end state `mmlab diff` compares (every
  // present entry, rss, vmstat, mTHP statistics and the model's counters).
  std::vector<std::string> states;
  // With ScenarioOptions::cost_sample, for a test that ran to its end after
  // a `counters reset`: what ran after the last reset, the cost model's two
  // sides. The model: every counter's growth by name (System::counter()'s
  // names and the /proc/vmstat items); the host: the CPU time its processes
  // spent serving the statements, user and kernel, in ns (-1: not measured).
  std::map<std::string, int64_t> cost_counts;
  int64_t cpu_ns = -1;
  // With ScenarioOptions::record_counters, for a model test that was neither
  // skipped nor errored: every counter (System::all_counters()) at its end,
  // counted from its start or its last `counters reset`.
  std::map<std::string, int64_t> counters;
};

// Where a scenario runs: the model, or the machine's own kernel (real
// processes and system calls; needs root, see src/host/).
enum class Backend { kModel, kHost };

// Whether the host backend can run here; otherwise false and why.
bool scenario_host_available(std::string* why);

// A test whose outcome differs for a documented reason: between the model
// and a host kernel (tests/scenarios/host-known.txt, `mmlab diff --known`),
// or under a model variant (`mmlab run --known`): GLOB REASON...
struct KnownDifference {
  std::string glob, reason;
};
// The host capability probes (measured once per process, under the host
// lock; see docs/HOST.md), for reports.
struct HostProbeReport {
  std::string name;
  bool available = false;
  bool forced = false;  // forced "missing" by scenario_host_fake_probes / MMLAB_HOST_FAKE_PROBES
  std::string detail;
};
std::vector<HostProbeReport> scenario_host_probes();
// Forces host probes to "missing" (a comma list of probe names, or "all"):
// the skip paths of a host without them, on a host that has them. 0, or -1
// with *error naming an unknown probe.
int scenario_host_fake_probes(const std::string& list, std::string* error);

// Called once per test as its result is reported, on one thread and in
// order: tests done, tests in the run, and whether this one failed. For a
// progress line (`mmlab run` and `mmlab diff` draw one on stderr).
using TestProgress = std::function<void(size_t done, size_t total, bool failed)>;

struct ScenarioOptions;
// The sizes of a parsed program against the run's System and host: a
// `file` (allocated whole) larger than the System's RAM or the host's
// available memory, or a `swap` device larger than the System's RAM (on the
// host backend: the host's available memory), is refused before anything is
// allocated. false with *error = "file:line:column: expected ..., not 'TOKEN'".
bool scenario_check_sizes(const ScenarioProgram& prog, const ScenarioOptions& opt, std::string* error);

struct ScenarioOptions {
  TestFilter filter;  // over test names; empty: all
  Backend backend = Backend::kModel;
  // --variant KEY=V1,V2: each file runs once per value (in order).
  std::vector<std::pair<std::string, std::vector<std::string>>> variants;
  uint64_t ram_bytes = 4ull << 30;
  // Tests this run expects to fail (`mmlab run --known`): a listed test that
  // fails is reported as XFAIL with the listed reason; one that passes, and
  // an entry that names no test, fail the run (the list must stay true).
  std::vector<KnownDifference> known;
  // Model tests run this many at a time, each on a thread and a System of
  // its own (0: one per CPU), no more than fit mem_budget bytes of frame
  // store (0: the host's available memory). The host backend runs one at a
  // time: its settings are machine-wide.
  int jobs = 1;
  uint64_t mem_budget = 0;
  bool times = false;  // the "# time: N ms total" line (every test has its "# time: N ms" line)
  // `--debug-vm` (or MMLAB_DEBUG_VM=all): the model's invariant checker
  // after every statement, not only at the end of each test; a violation
  // fails the test at the statement that made it.
  bool debug_vm = false;
  // Model backend: ScenarioResult::states, so that two builds' end states
  // can be compared statement by statement (`mmlab run --states`).
  bool record_states = false;
  // ScenarioResult::cost_counts / cpu_ns (`mmlab calibrate`, `mmlab validate`).
  bool cost_sample = false;
  // ScenarioResult::counters (`mmlab run --counters`).
  bool record_counters = false;
  TestProgress progress;
};

// Runs the tests, printing TAP to `tap` in file order as they finish (plan
// line first); the output is the same whatever opt.jobs, but for the "# time"
// lines. Returns the results; the exit status is scenario_exit_status(results).
std::vector<ScenarioResult> scenario_run(const ScenarioProgram& prog, const ScenarioOptions& opt, std::ostream& tap);
int scenario_exit_status(const std::vector<ScenarioResult>& results);

// ---- `mmlab explore`: a test's race block as the explorer's hooks ---------

}  // namespace mmlab
namespace mmlab::explore {
struct RaceHooks;
}
namespace mmlab {

// What a race block says (`race pct=2 runs=500 seed=3`, docs/RACES.md).
struct RaceSettings {
  std::string mode;      // "pct", "dfs" or "schedule"
  int depth = 0;         // pct=D (0: cycle 2..3)
  int bound = 2;         // dfs=C
  std::string schedule;  // schedule="...": a schedule line or a directed schedule
  int runs = 0;          // 0: the default
  uint64_t seed = 1;
  bool filter = true;
};

// The race of one test: each run of the explorer is the whole test on a
// fresh System of the model (prelude and the statements before `race` on
// the caller's thread, each `thread` on an explorer thread, the statements
// after `end` and the checker as the run's check). Under `expect
// violation` a run is a finding when the expected violation shows (and
// unexpected() tells a failure of another kind); without it, when the
// test fails.
class ScenarioRace {
 public:
  virtual ~ScenarioRace() = default;
  virtual explore::RaceHooks hooks() = 0;  // valid while this lives
  virtual bool expect_violation() const = 0;
  virtual bool unexpected() const = 0;
  virtual RaceSettings settings() const = 0;
};
// nullptr with *error if no test of prog is named `test` or it has no race
// block. `tunes`: KEY=VALUE pairs applied before the test (--variant).
std::unique_ptr<ScenarioRace> scenario_race(const ScenarioProgram& prog, const std::string& test, const ScenarioOptions& opt,
                                            const std::vector<std::pair<std::string, std::string>>& tunes, std::string* error);

// `mmlab diff`: run every test under two configurations in lockstep and
// report, per test, a changed outcome (with the first diverging statement)
// and, for model against model, after every statement, the end state that
// differs and the counter deltas. A test either side skips is not compared.
// Returns the exit status: 1 if an outcome changed (unless the test is a
// known difference), or with expect_nfc if any end state differs; else 0.
struct DiffConfig {
  std::string name = "model";
  Backend backend = Backend::kModel;
  std::vector<std::pair<std::string, std::string>> tunes;  // model variants
};
int load_known_differences(const std::string& path, std::vector<KnownDifference>* out, std::string* err);

struct DiffOptions {
  TestFilter filter;
  DiffConfig a, b;
  std::vector<KnownDifference> known;
  bool expect_nfc = false;
  uint64_t ram_bytes = 4ull << 30;
  int max_lines_per_test = 12;
  bool full = false;  // every differing line (else 4 a side per statement, max_lines_per_test statements)
  // The model's own mechanism counters (model_only_counter_prefixes())
  // differ wherever a variant changes a mechanism: shown, counted apart,
  // and judged by expect_nfc only with counters_all (`--counters all`).
  bool counters_all = false;
  int jobs = 1;  // model against model: as ScenarioOptions::jobs; with the host, one at a time
  uint64_t mem_budget = 0;
  TestProgress progress;
};

// The prefixes of the counters only the model has (how it did something:
// gup.descents, fault.wp_copy, cow.copy.order4, ...), which `diff` compares
// after each statement apart from what the kernel shows (page state,
// vmstat, sysfs and /proc statistics).
const std::vector<std::string>& model_only_counter_prefixes();

// What `diff` found, for --json: totals and a record per test.
struct DiffTestRecord {
  std::string file, name;
  // agree, counters (only model-only counters differ), state (end state
  // differs), outcome (changed), known (changed, a known difference),
  // skip (a side skipped it)
  std::string verdict;
  std::string a_outcome, b_outcome, detail;
  bool rerun = false;  // host: agreed only when run again
};
struct DiffSummary {
  int tests = 0, compared = 0, agree = 0, counters_only = 0, state = 0, outcome_changes = 0, known = 0, not_compared = 0;
  int state_statements = 0, skipped_expectations = 0, reruns = 0;
  std::vector<DiffTestRecord> records;
};
// TAP on `out` (plan first, a line per test, details as `#` lines, totals
// at the end); the summary in *summary if given.
int scenario_diff(const ScenarioProgram& prog, const DiffOptions& opt, std::ostream& out, DiffSummary* summary = nullptr);

}  // namespace mmlab
