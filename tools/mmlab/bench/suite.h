// The `mmlab bench` suites (bench_suite_*.cpp), their options, and what they
// share about folio sizes. cmd_bench.cpp runs them in the order asked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/report.h"

namespace mmlab::cli {

struct BenchOptions {
  bool quick = false;
  uint64_t size_mb = 0;  // 0: the suite's own size
  long repeats = 0;      // 0: the suite's own count
  std::vector<std::string> suites;
  std::string out = "bench-out";
  std::string profile;  // cost profile file, or empty
  std::string corpus;   // the corpus suite's scenario file (default: the source tree's cow.mms)
};

// Bytes of a folio-size label: "4K", "64K", "2M".
uint64_t folio_bytes_of(const std::string& label);

// The host memory a suite takes at its largest moment with these options
// (its Systems' frames, memmap and tables, and its native buffers), and the
// region that sets it (MiB): run_bench refuses, before any suite runs, what
// the host cannot hold. bytes 0: nothing to check (corpus: fixed tests).
struct HostNeed {
  uint64_t bytes = 0;
  uint64_t region_mb = 0;
  bool sized_by_option = true;  // false: --size-mb does not change it (scaling's fixed sizes)
};
HostNeed need_fault(const BenchOptions& o);
HostNeed need_fork(const BenchOptions& o);
HostNeed need_data(const BenchOptions& o);
HostNeed need_collapse(const BenchOptions& o);
HostNeed need_corpus(const BenchOptions& o);
HostNeed need_gup(const BenchOptions& o);
HostNeed need_unify(const BenchOptions& o);
HostNeed need_fast(const BenchOptions& o);
HostNeed need_ro_pin(const BenchOptions& o);
HostNeed need_sweep(const BenchOptions& o);
HostNeed need_scaling(const BenchOptions& o);
HostNeed need_threads(const BenchOptions& o);
HostNeed need_cow(const BenchOptions& o);

// The model's own costs.
int suite_fault(const BenchOptions& o, Report* rep);     // bench_suite_fault.cpp
int suite_fork(const BenchOptions& o, Report* rep);      // bench_suite_fork.cpp
int suite_data(const BenchOptions& o, Report* rep);      // bench_suite_data.cpp
int suite_collapse(const BenchOptions& o, Report* rep);  // bench_suite_collapse.cpp
int suite_corpus(const BenchOptions& o, Report* rep);    // bench_suite_corpus.cpp
// GUP over the gup_test engine: the patch series' tables (bench_suite_gup.cpp).
int suite_gup(const BenchOptions& o, Report* rep);
int suite_unify(const BenchOptions& o, Report* rep);
int suite_fast(const BenchOptions& o, Report* rep);
int suite_ro_pin(const BenchOptions& o, Report* rep);
int suite_sweep(const BenchOptions& o, Report* rep);
int suite_scaling(const BenchOptions& o, Report* rep);  // bench_suite_scaling.cpp
int suite_threads(const BenchOptions& o, Report* rep);  // bench_suite_threads.cpp
// A small `mmlab cow-bench` grid: CoW latency, waste, PSS (bench_suite_cow.cpp).
int suite_cow(const BenchOptions& o, Report* rep);

}  // namespace mmlab::cli
