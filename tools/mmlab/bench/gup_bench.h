// The gup_test engine shared by `mmlab gup-test` and `mmlab bench`: sets up
// a System and a region as the gup_test tool does, then runs the ioctl
// equivalent, alternating variants per repeat.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mmlab/gup.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {

enum class GupCmd { kGupFast, kPinFast, kPinLongterm, kGupBasic, kPinBasic, kDump };

struct GupBenchConfig {
  uint64_t size = 128ull << 20;
  GupCmd cmd = GupCmd::kGupFast;
  long nr_per_call = 1;
  long repeats = 1;
  long threads = 1;
  int thp = 0;  // 1 MADV_HUGEPAGE, -1 MADV_NOHUGEPAGE
  bool shared = false;
  bool hugetlb = false;
  std::string file;
  bool dump_use_pin = false;
  unsigned gup_flags = 0;
  std::vector<long> which_pages;
  std::vector<std::pair<std::string, std::string>> sysfs, tune, variants;
  bool protect_read = false;  // model option: mprotect(PROT_READ) after pre-faulting
  bool split_threads = false;  // model option: each -j thread takes its own slice of the region
  bool floor = false;          // also time the physical floor (gup_physical_floor_us) each repeat
  bool quiet = false;  // no per-iteration lines
};

struct GupIteration {
  std::string variant;  // "gup.walk=batch" or "" when none
  long repeat = 0;
  long thread = 0;
  double get_us = 0, put_us = 0;
  uint64_t size_done = 0;
  long check_failures = 0;
  std::map<std::string, int64_t> counters;  // event counters for this iteration (get + put)
  std::map<std::string, int64_t> cost_counts;  // System::all_counters()' growth over the round, per thread (the modelled time's input)
  double wall_us = 0;   // the whole ioctl round, all threads (for the thread-scaling suite)
  double floor_us = -1;  // the physical floor for the same request, if asked
  long host_faults = 0;  // host page faults of the process during the round (first touches)
  long stop_ret = 0;     // the return of the GUP call that ended the round short (-errno or 0)
  std::map<uint64_t, uint64_t> folios_by_size;  // distinct folios obtained by size in bytes (0: zero-page pages)
};

struct GupBenchResult {
  std::vector<std::string> variants;
  std::vector<GupIteration> iters;
  std::map<std::string, int64_t> folios_by_size;  // anon_fault_alloc per mTHP size after pre-faulting
  uint64_t region_pages = 0;
  std::string error;
  bool usage_error = false;  // the error names a bad option value (exit 2), not a failure of the run
};

// Host memory run_gup_bench takes for cfg (the pre-faulted region's frames,
// memmap and tables); it refuses, as a usage error, more than the host has.
uint64_t gup_bench_host_need(const GupBenchConfig& cfg);

// Runs the configuration; `line` receives each output line (the kernel
// tool's exact per-iteration text). Returns 0 or -errno with res->error set.
int run_gup_bench(const GupBenchConfig& cfg, GupBenchResult* res, const std::function<void(const std::string&)>& line);
std::string format_gup_summary(const GupBenchResult& res);
nlohmann::ordered_json gup_result_json(const GupBenchConfig& cfg, const GupBenchResult& res);
// Host page faults of the process so far (getrusage's minor and major
// faults): taken around a timed region, the difference is how often the host
// had to provide memory meanwhile (a frame store touched for the first time).
long host_faults_now();
const char* gup_cmd_name(GupCmd c);
// "2048kB x 64, 4kB x 3, zero page x 12": what a GUP round obtained.
std::string format_folio_sizes(const std::map<uint64_t, uint64_t>& by_size);

}  // namespace mmlab::cli
