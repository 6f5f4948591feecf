// `mmlab cow-bench`: the command line and the report of the CoW benchmark
// (cow_bench.h, docs/COW_BENCH.md).
#include <algorithm>
#include <deque>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "record/mmtrace.h"
#include "report/plot.h"
#include "report/report.h"
#include "report/statistics.h"
#include "cli/commands.h"
#include "cowbench/cow_bench.h"
#include "fmt/format.h"
#include "mmlab/system.h"

namespace mmlab::cli {
namespace {

struct CowCli {
  bool quick = false;
  std::string workloads = "all", cols = "all", size, out = "cow-bench-report";
  unsigned procs = 0, seeds = 0;
  double write_fraction = 1.0 / 32;
  bool no_latency = false;
  uint64_t snapshot_writes = 0;
  double snapshot_rate = 0, zipf_s = 0.99;
  bool no_sampler = false;
  std::string geometry = "off", profile;
  bool force = false;
  uint64_t khugepaged_speedup = 1000;
};

// A name outside the catalogue that still names an item: `trace:F` for a
// workload (a recorded program; its file is read when it runs).
template <typename T>
const T* extra_item(const std::string&) {
  return nullptr;
}
template <>
const cowbench::Workload* extra_item<cowbench::Workload>(const std::string& n) {
  static std::deque<cowbench::Workload> traces;
  if (n.rfind(cowbench::kTracePrefix, 0) != 0 || n.size() == std::string(cowbench::kTracePrefix).size()) return nullptr;
  for (const cowbench::Workload& w : traces)
    if (w.name == n) return &w;
  traces.push_back(cowbench::Workload{n, "a recorded program (mmlab record), replayed"});
  return &traces.back();
}

// Names from a comma list against the catalogue ("all": every one); false
// (with a message naming the token) on an unknown name.
template <typename T>
bool pick(const char* what, const std::string& list, const std::vector<T>& all, std::vector<const T*>* out) {
  if (list == "all") {
    for (const T& x : all) out->push_back(&x);
    return true;
  }
  const std::vector<std::string> names = split_list(list);
  if (names.empty()) {
    std::fprintf(stderr, "mmlab cow-bench: --%s: empty list\n", what);
    return false;
  }
  for (const std::string& n : names) {
    if (const T* extra = extra_item<T>(n)) {
      out->push_back(extra);
      continue;
    }
    auto it = std::find_if(all.begin(), all.end(), [&](const T& x) { return x.name == n; });
    if (it == all.end()) {
      std::string names;
      for (const T& x : all) names += (names.empty() ? "" : ", ") + x.name;
      std::fprintf(stderr, "mmlab cow-bench: --%s: unknown name '%s' (expected: all, or a comma list of %s)\n", what,
                   n.c_str(), names.c_str());
      return false;
    }
    out->push_back(&*it);
  }
  return true;
}


int run_cow_bench(const CowCli& o) {
  std::vector<const cowbench::Workload*> ws;
  std::vector<const cowbench::Column*> cs;
  if (!pick("workload", o.workloads, cowbench::workloads(), &ws) || !pick("column", o.cols, cowbench::columns(), &cs))
    return 2;
  for (const cowbench::Workload* w : ws) {
    std::string err;
    record::Trace t;
    if (cowbench::is_trace_workload(*w) &&
        record::read_mmtrace(w->name.substr(std::string(cowbench::kTracePrefix).size()), &t, &err)) {
      std::fprintf(stderr, "mmlab cow-bench: --workload %s: %s\n", w->name.c_str(), err.c_str());
      return 2;
    }
  }
  cowbench::Params p;
  p.size = o.quick ? (16ull << 20) : (64ull << 20);
  // Every process may hold a private copy: the System needs size * (procs + 2)
  // of RAM, and fragmented (one child) twice size * 3.
  constexpr uint64_t kMaxRam = 64ull << 30;
  if (std::string msg; !o.size.empty() && !parse_size_option("--size", o.size, PMD_SIZE, PMD_SIZE, kMaxRam,
                                                              "the simulated RAM a run may have", &p.size, &msg)) {
    std::fprintf(stderr, "mmlab cow-bench: %s\n", msg.c_str());
    return 2;
  }
  p.procs = o.procs ? o.procs : (o.quick ? 2 : 4);
  p.write_fraction = o.write_fraction;
  p.time_writes = !o.no_latency;
  p.snapshot_writes = o.snapshot_writes ? o.snapshot_writes : (o.quick ? 5000 : 20000);
  if (o.snapshot_rate > 0) p.snapshot_rate = o.snapshot_rate;
  p.zipf_s = o.zipf_s;
  p.sample = !o.no_sampler;
  if (!cowbench::geometry_known(o.geometry)) {
    std::fprintf(stderr, "mmlab cow-bench: --geometry: unknown geometry '%s' (expected off, x86-intel, x86-amd or arm64)\n",
                 o.geometry.c_str());
    return 2;
  }
  p.geometry = o.geometry;
  p.khugepaged_speedup = o.khugepaged_speedup;
  host::CostProfile profile;
  std::string profile_file = o.profile, no_profile;
  if (o.profile.empty() && !default_profile(&profile, &profile_file, &no_profile)) profile_file.clear();
  if (!o.profile.empty() && load_profile_option("cow-bench", o.profile, o.force, false, &profile)) return 2;
  const bool fragmented = std::any_of(ws.begin(), ws.end(), [](const cowbench::Workload* w) { return w->name == "fragmented"; });
  if (p.size > kMaxRam / std::max(p.procs + 2, fragmented ? 6u : 0u)) {
    std::fprintf(stderr, "mmlab cow-bench: --size %s with --procs %u needs more than the %llu GiB of simulated RAM a run may have%s\n",
                 o.size.c_str(), p.procs, static_cast<unsigned long long>(kMaxRam >> 30),
                 fragmented ? " (fragmented needs 6 times the size)" : "");
    return 2;
  }
  // The processes' copies are real bytes of the frame store: a grid the
  // host cannot hold is refused before its first run, not killed in it.
  if (const uint64_t need = cowbench::host_bytes_needed(p, fragmented), avail = host_memory_available(); avail && need > avail) {
    std::fprintf(stderr, "mmlab cow-bench: --size %s with --procs %u: a run may touch %llu MiB of host memory, the host has %llu MiB available\n",
                 o.size.empty() ? size_text(p.size).c_str() : o.size.c_str(), p.procs, static_cast<unsigned long long>(need >> 20),
                 static_cast<unsigned long long>(avail >> 20));
    return 2;
  }
  const unsigned seeds = o.seeds ? o.seeds : (o.quick ? 1 : 3);
  std::string why;
  if (!out_dir_usable(o.out, &why)) {
    std::fprintf(stderr, "mmlab cow-bench: --out %s: %s\n", o.out.c_str(), why.c_str());
    return 2;
  }

  cowbench::Grid g;
  for (const cowbench::Workload* w : ws) g.workloads.push_back(w);
  for (const cowbench::Column* c : cs) g.columns.push_back(c);
  g.p = p;
  g.seeds = seeds;
  g.profile = profile_file.empty() ? nullptr : &profile;
  g.profile_file = profile_file;
  g.no_profile = no_profile;
  g.out = o.out;
  return cowbench::run_grid(g);
}

}  // namespace

void add_cow_bench(CLI::App& app) {
  auto o = std::make_shared<CowCli>();
  auto* sub = app.add_subcommand("cow-bench", "CoW latency, waste and RSS per workload and CoW policy (docs/COW_BENCH.md)");
  sub->add_flag("--quick", o->quick, "a 16 MiB region, 2 children, one seed: a run under a minute");
  sub->add_option("--workload", o->workloads,
                  "all, or a comma list of usemem, cow-rand, fork-exec, prefork, read-then-write, snapshot, fragmented, "
                  "trace:F.mmtrace (a recorded program)");
  sub->add_option("--column", o->cols, "all, or a comma list of the columns (docs/COW_BENCH.md)");
  sub->add_option("--size", o->size, "the region (a multiple of 2M; default 64M, 16M with --quick)");
  sub->add_option("--procs", o->procs, "children of usemem and prefork (default 4, 2 with --quick)")->check(unsigned_number() & CLI::Range(1, 64));
  sub->add_option("--seeds", o->seeds, "seeds per column (default 3, 1 with --quick)")->check(unsigned_number() & CLI::Range(1, 100));
  sub->add_option("--write-fraction", o->write_fraction, "the share of pages cow-rand and prefork write (default 1/32)")
      ->check(finite_range(0.0001, 1.0));
  sub->add_option("--snapshot-writes", o->snapshot_writes, "snapshot: writes in the stream (default 20000, 5000 with --quick)")
      ->check(unsigned_number() & CLI::Range(uint64_t{1}, uint64_t{10000000}));
  sub->add_option("--snapshot-rate", o->snapshot_rate, "snapshot: mean arrival rate, writes per second (default 100000)")
      ->check(finite_range(1.0, 1e8));
  sub->add_option("--zipf", o->zipf_s, "snapshot: the Zipf exponent of page popularity (default 0.99)")
      ->check(finite_range(0.0, 5.0));
  sub->add_flag("--no-latency", o->no_latency,
                "time each writer as a whole, not each page write: the run that shows the latency instrumentation "
                "does not move the throughput ratios");
  sub->add_flag("--no-sampler", o->no_sampler,
                "no RSS/PSS/TLB sampling thread: the run that shows the sampler does not move the ratios");
  sub->add_option("--geometry", o->geometry, "tune tlb.geometry in every column: off (default), x86-intel, x86-amd, arm64");
  sub->add_option("--profile", o->profile, "cost profile from `mmlab calibrate` for the modelled table (default: a committed profile of this machine's kind, if any)");
  sub->add_flag("--force", o->force, "use a --profile measured on another kind of machine (every modelled figure is marked FORCED)");
  sub->add_option("--khugepaged-speedup", o->khugepaged_speedup,
                  "base-khugepaged: khugepaged's sleeps last 1/N of scan_sleep_millisecs and alloc_sleep_millisecs in "
                  "host time, so that it wakes beside a short run (default 1000)")
      ->check(unsigned_number() & CLI::Range(uint64_t{1}, uint64_t{1000000000}));
  sub->add_option("--out", o->out, "directory for report.md, report.json and the plots (made if missing)");
  add_trace_options(sub);
  register_action(sub, [o] { return run_cow_bench(*o); });
}

}  // namespace mmlab::cli
