// `mmlab cow-bench`'s figures (docs/COW_BENCH.md): the table of its named
// values, a sampler that follows RSS, PSS and the TLB model's counters
// through a workload's measured phase, the TLB geometry a run selects, and
// the modelled time a cost profile gives the fault counts. A consumer of the
// public API only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "report/metrics.h"
#include "report/report.h"
#include "mmlab/calibrate.h"
#include "mmlab/system.h"

namespace mmlab::cli::cowbench {

// Every value a cow-bench run reports, with its unit, source and merge;
// tables "main" (latency, copies, waste) and "memory" (RSS, PSS, TLB), and
// the groups of optional columns a workload's tables show (Workload::groups,
// "tlb" with a geometry).
const std::vector<MetricDef>& cow_metrics();

// The values of `tune tlb.geometry` a run may select ("off": none).
const std::vector<std::string>& geometries();
bool geometry_known(const std::string& name);
// `tune tlb.geometry` on s (nothing for "off" or ""). 0, or -errno with *err.
int set_geometry(System* s, const std::string& name, std::string* err);

// One point of the measured phase, at t_s seconds from its start.
struct Sample {
  double t_s = 0;
  int64_t rss = 0, pss = 0;             // summed over the sampled processes, bytes
  bool has_pss = false;                 // pss was read at this point
  int64_t lookups = 0, l2_misses = 0;   // tlb.lookup, tlb.l2_miss since the start
  int64_t l2_entries = 0, l2_reach = 0;  // System::tlb_occupancy's L2 at this point (bytes)
};

// The TLB model's counters over the measured phase (deltas; zero without a
// geometry except the flushes, which are counted always).
struct TlbCounts {
  int64_t lookups = 0, l1_misses = 0, l2_misses = 0;
  int64_t flushes = 0, flush_full = 0, flush_range = 0, flush_single = 0;
  int64_t ipis = 0, remote_flush_rounds = 0, folds = 0, unfolds = 0;
};

// The sampler's figures of one run.
struct Sampled {
  bool sampled = false;  // false with --no-sampler: no peaks, integrals or curves
  std::vector<Sample> samples;
  int64_t rss_peak = 0, pss_peak = 0;       // bytes
  double rss_mib_s = 0, pss_mib_s = 0;      // time integrals (trapezoids over the samples)
  double sampler_s = 0;                     // the sampler's own time (inside its samples)
  TlbCounts tlb;
  // The L2 TLB's reach over the samples (bytes; zero without a geometry):
  // its peak, and its time average (the integral over the phase's length).
  int64_t l2_reach_peak = 0;
  double l2_reach_mean = 0;
};

// Every ~1 ms of measured time (the model's virtual clock does not move while
// the workloads run: only khugepaged's schedule lives on it) the sampler
// reads each process's RSS (the mm counters, no lock) and the TLB counters;
// their PSS (Process::pss(): each page table locked while read, as smaps
// does) at the start and the end of the phase, and in between no more often
// than keeps the PSS walks under a hundredth of a CPU. The processes must not
// exit while it runs. With on == false it only takes the TLB deltas.
class Sampler {
 public:
  Sampler(System* s, std::vector<Process*> procs, bool on);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  void start();
  // Ends the phase: a last sample, the integrals and the TLB deltas into *m.
  void stop(Sampled* m);

 private:
  Sample take(double t_s, int64_t lookups0, int64_t l2_0, bool with_pss) const;
  void loop();
  System* sys_;
  std::vector<Process*> procs_;
  bool on_;
  TlbCounts start_tlb_;
  std::chrono::steady_clock::time_point t0_, next_pss_;
  std::vector<Sample> samples_;  // written by the sampler thread until it is joined
  double busy_s_ = 0;
  uint32_t trace_pid_ = 0;  // the System's process in a --trace (trace::current_system at start)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

TlbCounts read_tlb(const System* s);

// The sampler's figures as named values (metrics.*) of a run.
void record_sampled(const Sampled& m, const std::string& geometry, MetricSet* out);

// Modelled time of a measured phase: its counts (per seed) times the
// profile's costs (include/mmlab/cost.h), the kernel's and the program's
// own, with the band the terms' 95% intervals give, and the terms a copy
// larger than 4K on a write fault rests on: the host never runs one (no
// mTHP CoW), so that time is extrapolated from the per-order copy cost
// measured on the host and the 4K CoW fault's fitted cost.
struct ModelledPhase {
  double kernel_ms = 0, user_ms = 0, lo_ms = 0, hi_ms = 0;
  std::vector<std::string> extrapolated;  // "copy_o4", ...
  std::vector<std::string> missing;       // terms counted that the profile lacks or never calibrated (they count 0)
  std::vector<std::pair<std::string, double>> by_term_ms;  // the terms that priced something, in table order
  double total_ms() const { return kernel_ms + user_ms; }
};
ModelledPhase modelled_phase(const std::map<std::string, int64_t>& counts, const host::CostProfile& p);

// One workload's "memory" table, its modelled-time table (with a profile)
// and its plots (RSS and PSS over time; TLB misses over time with a
// geometry), built column by column beside the main table.
class MetricsReport {
 public:
  MetricsReport(std::string workload, std::string geometry, const host::CostProfile* profile)
      : workload_(std::move(workload)), geometry_(std::move(geometry)), profile_(profile) {}
  // A column's merged values (modelled.* added to them with a profile), its
  // curve and its copies per order summed over the seeds; m must live until finish().
  void add(const std::string& column, MetricSet* m, const std::vector<Sample>& curve,
           const std::map<std::string, int64_t>& counts);
  // The tables, the mechanism sentences and the plots into rep.
  void finish(Report* rep);
  // With a profile: the modelled values of every column (before the main
  // table, which shows them), then their table (in finish()).
  void compute_modelled();
  void modelled_table(Report* rep);
  void by_term_table(Report* rep);
  bool modelled() const { return profile_ != nullptr; }

 private:
  bool tlb() const { return !geometry_.empty() && geometry_ != "off"; }
  std::string workload_, geometry_;
  const host::CostProfile* profile_;
  std::vector<MetricRow> rows_;
  struct ModelledRow {
    std::string column;
    MetricSet* m;
    ModelledPhase t;
  };
  std::vector<ModelledRow> modelled_;
  std::vector<PlotSeries> rss_, pss_, misses_;
  size_t pss_reads_min_ = 0, pss_reads_max_ = 0;  // points of the PSS curves: the plot says how few
};

}  // namespace mmlab::cli::cowbench
