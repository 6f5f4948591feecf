// `mmlab cow-bench`: the numbers the mTHP-CoW review asked for (CoW fault
// latency, memory waste, RSS), per workload and per column (a CoW policy,
// folio size and the alternatives), on the model's threads (docs/COW_BENCH.md).
// A consumer of the public API only.
#pragma once

#include <cstdint>
#include <set>
#include <map>
#include <string>
#include <vector>

#include "cowbench/cow_bench_metrics.h"

namespace mmlab::cost {
class TallyPricer;
}

namespace mmlab::cli::cowbench {

// What a column does besides its policy and folio size.
enum class Extra : uint8_t { kNone, kDontfork, kCollapseAfterFork, kKhugepaged };

struct Column {
  std::string name;
  unsigned folio_kb = 64;        // the mTHP size the region faults in with (the only one enabled)
  const char* policy = "base";   // cow.policy
  int max_order = -1;            // cow.max_order (-1: the default)
  bool reuse_whole = false;      // cow.reuse whole
  Extra extra = Extra::kNone;
};

struct Workload {
  std::string name;
  const char* what;  // one line for the report
  std::set<std::string> groups = {};  // the optional columns its tables show (cow_metrics()'s groups)
};

// A column's settings on a fresh System: the one mTHP size its faults use
// (every other size off), its cow.policy, cow.max_order, cow.reuse and
// khugepaged's mTHP collapse. 0, or -errno with *err.
int apply_column(System* s, const Column& c, std::string* err);

// The catalogue, in report order.
const std::vector<Column>& columns();
const std::vector<Workload>& workloads();

struct Params {
  uint64_t size = 0;        // the region, bytes
  unsigned procs = 0;       // children (usemem, prefork)
  double write_fraction = 0;  // cow-rand, prefork: the share of pages each writer writes
  uint64_t seed = 1;
  bool time_writes = true;  // per-page latency (off: only each writer's total time)
  // snapshot: the parent's open-loop stream of 64-byte writes.
  uint64_t snapshot_writes = 20000;  // writes in the stream
  double snapshot_rate = 100000;     // mean arrival rate, writes per second (Poisson arrivals)
  double zipf_s = 0.99;              // the Zipf exponent of the written pages' popularity
  bool sample = true;       // the RSS/PSS/TLB sampler (cow_bench_metrics.h) during the measured phase
  std::string geometry;     // tune tlb.geometry ("" or "off": none)
  // base-khugepaged: khugepaged's thread beside the writers, its sleeps
  // lasting 1/khugepaged_speedup of their virtual length in host time.
  uint64_t khugepaged_speedup = 1000;
  // A profile's costs: each timed write's modelled latency (run_grid sets
  // it from Grid::profile).
  const cost::TallyPricer* pricer = nullptr;
};

// What one run of a workload under a column produced, or several merged:
// the named values of cow_metrics() (latencies, counts, RSS, the TLB
// model's events, khugepaged's work), the sampler's curve for the plots and
// the CoW copies per folio order (the modelled time's input).
struct Result {
  bool ran = false;
  std::string not_run;  // why the column does not apply to the workload
  MetricSet m{&cow_metrics()};
  std::vector<Sample> curve;             // the sampler's points (the first seed's, merged)
  std::map<std::string, int64_t> counts;  // System::all_counters() over the measured phase, summed over the seeds
  // One more seed's run.
  void merge(const Result& r);
};

// The host memory a run of the grid may touch at these parameters: its
// System's RAM (every process's copy of the region) and that RAM's memmap;
// `fragmented` when the grid has that workload (twice the RAM).
uint64_t host_bytes_needed(const Params& p, bool fragmented);

// A grid: every workload under every column, each over `seeds` seeds.
struct Grid {
  std::vector<const Workload*> workloads;
  std::vector<const Column*> columns;
  Params p;
  unsigned seeds = 1;
  const host::CostProfile* profile = nullptr;  // --profile: modelled CoW time
  std::string profile_file;
  std::string no_profile;  // why there is no profile (none given, none of this machine's kind committed)
  std::string out;  // report.md, report.json and the plots (checked usable)
};
// Runs the grid and writes its report into g.out: 0, or 1 (with a message)
// when a run fails or the files cannot be written.
int run_grid(const Grid& g);

// `trace:F.mmtrace`: a recorded program replayed as a workload
// (cow_bench_trace.cpp); its name carries the file.
inline constexpr const char* kTracePrefix = "trace:";
bool is_trace_workload(const Workload& w);
int run_trace(const Workload& w, const Column& c, const Params& p, Result* out, std::string* err);

// Runs one workload under one column on a fresh System. 0, or -errno with
// *err saying what failed.
int run(const Workload& w, const Column& c, const Params& p, Result* out, std::string* err);

}  // namespace mmlab::cli::cowbench
