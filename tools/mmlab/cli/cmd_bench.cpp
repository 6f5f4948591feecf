// `mmlab bench`: mmlab's main job. Runs the standard suites and prints
// their tables (and writes them as Markdown and JSON into --out):
//   fault     fault-in of a region with 4K, 64K and 2M folios (the foundation),
//             zeroing and bookkeeping apart
//   fork      fork of a populated region, then CoW faults, per folio size
//   data      bulk loads and stores through the CPU model beside native passes
//   corpus    a fixed subset of cow.mms on the model and on the host kernel
//   gup       gup-batch-follow-page-mask v5's tables (patches 7 and 8):
//             gup_test -L -m 256 -n 65536 -r 16 -t on 4K, 64K mTHP and 2M THP,
//             every gup.walk value from legacy on, interleaved per repeat
//   unify     gup-unify-hugetlb-speed-up-thp: -m 512 -t -L -n 1024, v6.5 vs legacy
//             on THP, legacy vs batch on hugetlb
//   fast      GUP-fast (-u, -a) on 4K and 64K mTHP, every gup.fast value
//   ro-pin    R/O long-term pins of read-only 64K mTHP: batch vs batch-ro
//   sweep     pages per call 1, 16, 64, 123, 512 and the whole region
//   scaling   GUP time per page from 4 MiB to 4 GiB, with a linear fit
//   threads   two threads pinning disjoint halves against one thread
//   collapse  MADV_COLLAPSE of 256 MiB of 4K pages and of 64K mTHPs: time per
//             2M, the copy's share, mmap_lock write-hold time, bytes copied
//   cow       a small `mmlab cow-bench` grid (base, rfc, fixed-64K, fixed-512K,
//             base-khugepaged over usemem and cow-rand): CoW latency, waste, PSS
// Every GUP row also shows the physical floor: a plain loop reading the
// entries and filling pages[] for the same request.
// With --profile (a cost profile from `mmlab calibrate`), the fault, fork,
// gup and ro-pin suites add "modelled" tables (the cow suite a column): the
// model's event counts times the host's measured cost per event. They stay
// apart from the measured figures (and under "modelled" in the JSON).
//
// Each suite is a file of its own (bench_suite_*.cpp, declared in
// bench_suites.h); the statistics are bench_stats.cpp, the report and its
// files bench_report.cpp, the modelled tables bench_modelled.cpp. This file
// is the command line and the order the suites run in.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "report/report.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/calibrate.h"
#include "mmlab/system.h"

namespace mmlab::cli {
namespace {

// A noisy run, told from the run itself: the GUP rows' spread (the median
// row's interquartile range above kNoisySpread of its median), or, for
// suites without such rows, the preemptions per second of the run.
constexpr double kNoisySpread = 0.10;
constexpr double kNoisyPreemptionsPerSecond = 50;

void note_noise(const std::vector<double>& spreads, long ivcsw, double seconds, Report* rep) {
  const double spread = median_of(spreads);
  const double rate = seconds > 0 ? static_cast<double>(ivcsw) / seconds : 0;
  rep->json["environment"]["median_row_relative_iqr"] = spreads.empty() ? nlohmann::json() : nlohmann::json(spread);
  const bool noisy = spreads.empty() ? rate > kNoisyPreemptionsPerSecond : spread > kNoisySpread;
  rep->json["environment"]["noisy"] = noisy;
  if (!noisy) return;
  rep->add(spreads.empty()
               ? fmt::format("\nwarning: noisy run: {} involuntary context switches in {:.0f} s ({:.0f}/s, above {:.0f}/s)\n",
                             ivcsw, seconds, rate, kNoisyPreemptionsPerSecond)
               : fmt::format("\nwarning: noisy run: the median row's interquartile range is {:.0f}% of its median get time "
                             "(above {:.0f}%); {} involuntary context switches in {:.0f} s\n",
                             100 * spread, 100 * kNoisySpread, ivcsw, seconds));
}

int run_bench(const BenchOptions& o) {
  struct Suite {
    const char* name;
    int (*run)(const BenchOptions&, Report*);
    HostNeed (*need)(const BenchOptions&);
  };
  static const Suite kSuites[] = {
      {"fault", suite_fault, need_fault},       {"fork", suite_fork, need_fork},          {"data", suite_data, need_data},
      {"gup", suite_gup, need_gup},             {"unify", suite_unify, need_unify},       {"fast", suite_fast, need_fast},
      {"ro-pin", suite_ro_pin, need_ro_pin},    {"sweep", suite_sweep, need_sweep},       {"scaling", suite_scaling, need_scaling},
      {"threads", suite_threads, need_threads}, {"collapse", suite_collapse, need_collapse}, {"cow", suite_cow, need_cow},
      {"corpus", suite_corpus, need_corpus}};
  std::vector<std::string> chosen = o.suites;
  if (chosen.empty())
    for (auto& s : kSuites) chosen.push_back(s.name);
  // Every argument is checked before any suite runs: a typo in the last
  // --suite, or an --out that cannot be written, never costs a run.
  std::string names;
  for (auto& s : kSuites) names += (names.empty() ? "" : ", ") + std::string(s.name);
  for (auto& name : chosen)
    if (std::none_of(std::begin(kSuites), std::end(kSuites), [&](auto& s) { return name == s.name; })) {
      std::fprintf(stderr, "mmlab bench: --suite %s: no such suite (suites: %s)\n", name.c_str(), names.c_str());
      return 2;
    }
  // What each suite will touch, against what the host has now: a size the
  // host cannot hold is refused here, not killed or failed half-way.
  if (const uint64_t avail = host_memory_available())
    for (auto& s : kSuites) {
      if (std::find(chosen.begin(), chosen.end(), s.name) == chosen.end()) continue;
      const HostNeed need = s.need(o);
      if (need.bytes <= avail) continue;
      const auto mib = [](uint64_t b) { return static_cast<unsigned long long>(b >> 20); };
      if (o.size_mb && need.sized_by_option)
        std::fprintf(stderr, "mmlab bench: --size-mb %llu: the %s suite needs %llu MiB of host memory, the host has %llu MiB available\n",
                     static_cast<unsigned long long>(o.size_mb), s.name, mib(need.bytes), mib(avail));
      else
        std::fprintf(stderr, "mmlab bench: --suite %s: needs %llu MiB of host memory (its %llu MiB region%s), the host has %llu MiB "
                     "available (%s)\n",
                     s.name, mib(need.bytes), static_cast<unsigned long long>(need.region_mb),
                     need.sized_by_option ? "" : ", whatever --size-mb", mib(avail),
                     need.sized_by_option ? "--size-mb or --quick makes it smaller" : "--quick makes it smaller");
      return 2;
    }
  std::string err;
  if (o.out.empty() || !out_dir_usable(o.out, &err)) {
    std::fprintf(stderr, "mmlab bench: --out '%s': cannot write reports there: %s\n", o.out.c_str(),
                 o.out.empty() ? "empty path" : err.c_str());
    return 2;
  }
  if (build_is_instrumented()) {
    std::fprintf(stderr, "mmlab bench: refusing to report timings from a debug or sanitizer build; build the release preset\n");
    return 2;
  }
  Report rep;
  host::CostProfile profile;
  if (!o.profile.empty()) {
    std::string err;
    if (host::load_cost_profile(o.profile, &profile, &err)) {
      std::fprintf(stderr, "mmlab bench: --profile: %s\n", err.c_str());
      return 2;
    }
    rep.profile = &profile;
  }
  rep.add("# mmlab bench\n\n");
  rep.add(environment_text(&rep.json["environment"]));
  if (rep.profile) rep.add(profile_text(profile, o.profile, &rep.json["modelled"]["profile"]));
  struct rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& name : chosen)
    for (auto& s : kSuites)
      if (name == s.name)
        if (int e = s.run(o, &rep)) return e;
  struct rusage ru1;
  getrusage(RUSAGE_SELF, &ru1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  long ivcsw = ru1.ru_nivcsw - ru0.ru_nivcsw;
  rep.json["environment"]["involuntary_context_switches"] = ivcsw;
  rep.json["environment"]["run_seconds"] = seconds;
  note_noise(rep.spreads, ivcsw, seconds, &rep);
  return write_report(rep, o.out);
}

}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("bench", "run the benchmark report (mmlab's main job)");
  sub->add_flag("--quick", o->quick, "smaller regions and fewer repeats: a run under a minute");
  sub->add_option("--size-mb", o->size_mb, "region size in MiB for every suite")->check(CLI::Range(4, 65536));
  sub->add_option("--repeats", o->repeats, "repeats per variant")->check(CLI::Range(1, 1000));
  sub->add_option("--suite", o->suites,
                  "suites to run: fault, fork, data, gup, unify, fast, ro-pin, sweep, scaling, threads, collapse, cow, corpus "
                  "(default: all)");
  sub->add_option("--corpus", o->corpus, "scenario file of the corpus suite (default: the source tree's tests/scenarios/cow.mms)")
      ->check(CLI::ExistingFile);
  sub->add_option("--out", o->out, "directory for report.md, report.json and the plots (made if missing)");
  sub->add_option("--profile", o->profile, "cost profile from `mmlab calibrate`: add modelled-time tables")->check(CLI::ExistingFile);
  add_trace_options(sub);
  register_action(sub, [o] { return run_bench(*o); });
}

}  // namespace mmlab::cli
