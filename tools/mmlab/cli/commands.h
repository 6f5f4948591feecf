#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mmlab/scenario.h"

namespace mmlab::cli {

// The exit status of a command the host cannot run here (not root, no
// tracefs, another architecture): ctest's skip.
inline constexpr int kExitUnavailable = 4;

// Each subcommand registers itself and the action run after parsing.
void add_bench(CLI::App& app);
void add_gup_test(CLI::App& app);
void add_run(CLI::App& app);
void add_diff(CLI::App& app);
void add_calibrate(CLI::App& app);
void add_counters(CLI::App& app);
void add_stress(CLI::App& app);
void add_variants(CLI::App& app);
void add_explore(CLI::App& app);  // explore (docs/RACES.md)
void add_cow_bench(CLI::App& app);
void add_compare(CLI::App& app);
void add_sweep(CLI::App& app);  // sweep and merge
void add_host(CLI::App& app);   // host restore
void add_validate(CLI::App& app);
void add_record(CLI::App& app);   // record (record/)
void add_replay(CLI::App& app);   // replay (record/)

// --fake-probe NAME[,NAME...] of `run` and `diff` (docs/HOST.md), and
// applying it with MMLAB_HOST_FAKE_PROBES: 0, or -1 with *err.
void add_fake_probe_option(CLI::App* sub, std::vector<std::string>* out);
int fake_host_probes(const std::vector<std::string>& names, std::string* err);

// Registry of actions, keyed by subcommand.
void register_action(CLI::App* sub, std::function<int()> action);

// The command line as given (main sets it), for the JSON a command writes:
// with the commit and the build, what a reader needs to make it again.
void set_command_line(int argc, char** argv);
const std::string& command_line();
// --trace FILE and --trace-format ftrace|json (docs/TRACING.md): the
// trace runs around the subcommand's action; a file that cannot be
// created exits 2 before any work.
void add_trace_options(CLI::App* sub);
int run_selected(CLI::App& app);

// One --variant (run) or --variants (stress) item: KEY=VALUE[,VALUE...],
// KEY=all (every value of the key, in registration order) or KEY=others
// (every value but the default); each value one the build has. false with
// *msg saying what is wrong and what is valid.
using Variant = std::pair<std::string, std::vector<std::string>>;
bool parse_variant_item(const std::string& item, Variant* out, std::string* msg);
// Several items, none naming a key another one names.
bool parse_variant_items(const std::vector<std::string>& items, std::vector<Variant>* out, std::string* msg);

// Checks of numbers on the command line, for ->check(): CLI11's Range lets
// NaN through (every comparison with it is false), and its conversion to
// an unsigned integer wraps "-1" and clamps 2^64. finite_range: a finite
// number in [min, max]; unsigned_number: decimal digits that fit 64 bits.
CLI::Validator finite_range(double min, double max);
CLI::Validator unsigned_number();

// The non-empty items of a comma list.
std::vector<std::string> split_list(const std::string& s);
// A byte size: a number with an optional K, M, G or T suffix ("4G").
enum class SizeParse { kOk, kMalformed, kTooLarge };  // kTooLarge: beyond 64 bits
SizeParse parse_size(const std::string& s, uint64_t* out);
// The largest unit that states it exactly: "4G", "4194300M", "4097".
std::string size_text(uint64_t bytes);
// OPT VALUE as a size in [min, max] and a multiple of `multiple` (0: any):
// false with *msg "OPT VALUE: not a size (...)", "...: too large: at most
// MAX (MAX_WHY)", "...: too small: at least MIN" or "...: not a multiple of M".
bool parse_size_option(const std::string& opt, const std::string& s, uint64_t multiple, uint64_t min, uint64_t max,
                       const std::string& max_why, uint64_t* out, std::string* msg);
// A System's RAM (--ram): a multiple of 4M up to system_max_ram_bytes(),
// whose System the host can make: system_host_memory().at_create within
// `budget` (0: the host's available memory).
bool parse_ram_option(const std::string& opt, const std::string& s, uint64_t budget, uint64_t* out, std::string* msg);
// The options that run tests in parallel (`run`, `diff`): -j, --ram, --mem-budget.
class ProgressLine;
// The progress line of `run` and `diff` (report/progress.h): tests done of
// the total, failures, elapsed time and an estimate of what is left, on
// stderr. Drawn only when stdout is not a terminal: there the TAP lines
// themselves show progress, and a line redrawn on the same screen would land
// among them.
class TestProgressLine {
 public:
  explicit TestProgressLine(std::string prefix);
  ~TestProgressLine();
  TestProgressLine(const TestProgressLine&) = delete;
  TestProgressLine& operator=(const TestProgressLine&) = delete;
  // The callback to give ScenarioOptions / DiffOptions::progress.
  TestProgress callback();

 private:
  std::string state() const;

  std::atomic<size_t> done_{0}, total_{0}, failed_{0};
  const std::chrono::steady_clock::time_point start_;
  std::unique_ptr<ProgressLine> line_;
};

struct ParallelCli {
  int jobs = 0;  // 0: one per CPU
  std::string ram = "4G", mem_budget;
};
void add_parallel_options(CLI::App* sub, ParallelCli* o);

// --filter GLOB (repeatable; "!GLOB" excludes) and --exclude GLOB
// (repeatable): which tests of the files run.
struct FilterCli {
  std::vector<std::string> filter, exclude;
  TestFilter tests() const;
};
void add_filter_options(CLI::App* sub, FilterCli* o, const char* what);
// Nothing to run is a mistake (a glob that matches no test, files with
// none), never a pass: the message for `mmlab CMD`.
std::string no_test_message(const TestFilter& f);
// Fills jobs, ram and budget from the options; false (and a message on stderr) if malformed.
bool parse_parallel_options(const char* cmd, const ParallelCli& o, int* jobs, uint64_t* ram, uint64_t* budget);

}  // namespace mmlab::cli
