// `mmlab cow-bench`: the numbers the mTHP-CoW review asked for (CoW fault
// latency, memory waste, RSS), per workload and per column (a CoW policy,
// folio size and the alternatives), on the model's threads (docs/COW_BENCH.md).
// A consumer of the public API only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cowbench/cow_bench_metrics.h"

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
};

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
};

// base-khugepaged: what khugepaged did beside the writers (one seed, or
// summed over the seeds; the longest hold is the longest of them all).
struct KhugepagedFigures {
  bool ran = false;
  double cpu_ms = 0;             // the thread's CPU time in its wakes
  double busy_ms = 0;            // the wakes' wall time (charged to the virtual clock)
  double collapse_ms = 0;        // inside collapse_huge_page()
  double mmap_write_ms = 0;      // of which holding mmap_lock for write
  double mmap_write_max_ms = 0;  // the longest single write hold
  double virtual_s = 0;          // the virtual clock's advance over the phase
  int64_t wakes = 0, full_scans = 0;
  int64_t attempts = 0, collapses = 0;  // collapse_huge_page() calls, and those that collapsed
  int64_t write_locked = 0;             // calls that took mmap_lock for write
};

struct Result {
  bool ran = false;
  std::string not_run;                // why the column does not apply to the workload
  std::vector<double> write_ns;       // each measured page write's latency (snapshot: from its scheduled time)
  std::vector<double> service_ns;     // snapshot: each write from its actual start
  double elapsed_s = 0;               // the measured phase, wall clock
  double child_kbps_mean = 0;         // usemem: KB/s per child (mean) ...
  double child_kbps_sum = 0;          // ... and summed
  std::vector<double> child_kbps;     // ... and each child's
  int64_t wp_copy = 0, wp_reuse = 0, anon = 0, zero = 0;  // faults by kind
  int64_t bytes_copied = 0;           // cow.bytes_copied + collapse.bytes_copied
  int64_t bytes_written = 0;          // distinct pages written after the fork (or the zero-page read), bytes
  int64_t rss_peak = 0;               // sum of rss_anon over the processes, at the end of the writes
  int64_t warnings = 0;               // model warnings (cow.policy rfc's recorded violations)
  int64_t collapses = 0;              // MADV_COLLAPSE successes
  KhugepagedFigures khugepaged;       // kKhugepaged
  int64_t violations = 0;             // invariant-checker findings at the end (rfc only; any other fails the run)
  int64_t zero_subpages = 0;          // cow. + collapse.zero_subpages_copied: copied pages whose bytes were all zero
  // Workloads whose sharer exits while the parent writes (fork-exec,
  // snapshot): the parent's pages copied (their frame changed since the
  // fork, by CoW or collapse) that the parent had not touched by the time
  // the sharer's exit returned, bytes; and the bytes copied after that exit
  // (0 when the survivor reuses, as it should: then the first is exact).
  bool exit_tracked = false;
  int64_t exited_sharer_untouched = 0;
  int64_t copied_after_exit = 0;
  // fragmented: the filler's pages left mapped, and the fallbacks of the run
  // (summed over every size): anon_fault_fallback (mTHP), thp_fault_fallback
  // (PMD), wp_fault_fallback (the large-CoW path of cow.policy fixed/rfc).
  int64_t filler_pages = 0;
  int64_t anon_fault_fallback = 0, thp_fault_fallback = 0, wp_fault_fallback = 0;
  int64_t anon_fault_alloc = 0, wp_fault_alloc = 0;
  Metrics metrics;                    // RSS and PSS over time, the TLB's counters (the measured phase)
  std::vector<int64_t> copies_by_order;  // cow.copy.order<N> over the run (modelled time)
  // Copied bytes never written afterwards (copied minus what the copiers wrote, at least 0).
  int64_t waste() const { return bytes_copied > bytes_written ? bytes_copied - bytes_written : 0; }
};

// The host memory a run of the grid may touch at these parameters: its
// System's RAM (every process's copy of the region) and that RAM's memmap;
// `fragmented` when the grid has that workload (twice the RAM).
uint64_t host_bytes_needed(const Params& p, bool fragmented);

// Runs one workload under one column on a fresh System. 0, or -errno with
// *err saying what failed.
int run(const Workload& w, const Column& c, const Params& p, Result* out, std::string* err);

}  // namespace mmlab::cli::cowbench
