// The threads suite: split PTE locks should let two threads pinning disjoint
// ranges of one process scale: 1 thread over the region against 2 threads
// over its halves.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/gup_table.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"

namespace mmlab::cli {

namespace {
uint64_t threads_mb(const BenchOptions& o) { return o.size_mb ? o.size_mb : (o.quick ? 64 : 256); }
}  // namespace

static HostNeed need_threads(const BenchOptions& o) { return {gup_bench_host_need(longterm(threads_mb(o), 512, 1, "4K")), threads_mb(o)}; }

static int suite_threads(const BenchOptions& o, Report* rep) {
  uint64_t mb = threads_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? kMinCiSamples + 1 : 16);  // --quick: 5 after the warm-up
  rep->add(fmt::format("\n## two threads pinning disjoint halves of {} MiB against one thread pinning all of it (get time of the slower thread)\n\n", mb));
  rep->add("The first repeat of each run is a warm-up, discarded. speedup: the median get time of one thread over the "
           "slower of two's, with its 95% bootstrap interval (the two runs are apart: resampled independently).\n\n");
  rep->add("| folio | variant | 1 thread us | 2 threads us | speedup (95% CI) |\n|---|---|---:|---:|---:|\n");
  Plot plot = bar_plot("threads", fmt::format("threads: pin_user_pages(FOLL_LONGTERM) of {} MiB, -n 512, {} repeats", mb, r),
                       "get us of the slower thread (median; bars: IQR)", {"4K legacy", "4K batch", "64K legacy", "64K batch"},
                       {"1 thread, whole region", "2 threads, a half each"});
  plot.xlabel = "folio size and gup.walk";
  double x = 0;
  bool superlinear = false;
  for (const char* f : {"4K", "64K"}) {
    for (const char* v : {"legacy", "batch"}) {
      std::vector<double> wall[2];
      for (int t = 1; t <= 2; t++) {
        progress(fmt::format("threads {} {} x{}", f, v, t));
        GupBenchConfig c = longterm(mb, 512, r, f);
        c.variants = {{"gup.walk", v}};
        c.threads = t;
        c.split_threads = true;
        c.quiet = true;
        GupBenchResult res;
        if (run_gup_bench(c, &res, [](const std::string&) {})) {
          progress_done();
          std::fprintf(stderr, "mmlab bench: threads: %s\n", res.error.c_str());
          return 1;
        }
        // Per round, the slower thread's get time (thread start-up and join are not GUP work).
        std::map<long, double> per_round;
        const long warmup = r > 1 ? 1 : 0;
        for (auto& it : res.iters)
          if (it.repeat >= warmup) per_round[it.repeat] = std::max(per_round[it.repeat], it.get_us);
        std::vector<double> w;
        for (auto& [rnd, us] : per_round) w.push_back(us);
        wall[t - 1] = w;
        plot.series[static_cast<size_t>(t - 1)].points.push_back(sample_point(x, w));
        rep->json["threads"][f][v][std::to_string(t)] = w;
      }
      const RatioCi speedup = median_ratio_ci(wall[0], wall[1], Pairing::kIndependent);
      // Above 2 with 2 threads on 2 CPUs, beyond its interval's doubt.
      const bool above = speedup.valid && speedup.lo > 2.0;
      superlinear |= above;
      rep->add(fmt::format("| {} | {} | {:.1f} | {:.1f} | {}{} |\n", f, v, median_of(wall[0]), median_of(wall[1]),
                           ratio_ci_text(speedup), above ? " (super-linear)" : ""));
      rep->json["threads"][f][v]["speedup"] = speedup.ratio;
      rep->json["threads"][f][v]["speedup_ci95"] = ci_json(speedup);
      x += 1;
    }
  }
  progress_done();
  if (superlinear)
    rep->add(fmt::format("\nA speedup above 2 with 2 threads is no kernel effect: one thread walks {}, each of two "
                         "threads half of it, which the caches hold better. The model's time, not the kernel's.\n",
                         model_footprint_text(mb)));
  rep->plots.push_back(plot);
  return 0;
}

extern const BenchSuite kBenchSuite_threads = {
    .name = "threads",
    .summary = "two threads pinning disjoint halves against one thread",
    .need = need_threads,
    .run = suite_threads};

}  // namespace mmlab::cli
