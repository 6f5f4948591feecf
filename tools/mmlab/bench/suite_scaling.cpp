// The scaling suite: cost as the work grows. GUP time per page over region
// sizes, with a least-squares fit of get time against pages (linear is the
// expectation).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gup_table.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"

namespace mmlab::cli {

namespace {
std::vector<uint64_t> scaling_sizes_mb(const BenchOptions& o) {
  return o.quick ? std::vector<uint64_t>{4, 16, 64} : std::vector<uint64_t>{4, 16, 64, 256, 1024, 4096};
}
}  // namespace

// Its largest region, whatever --size-mb says.
static HostNeed need_scaling(const BenchOptions& o) {
  const uint64_t mb = scaling_sizes_mb(o).back();
  return {gup_bench_host_need(longterm(mb, -1, 1, "4K")), mb, false};
}

static int suite_scaling(const BenchOptions& o, Report* rep) {
  std::vector<uint64_t> sizes = scaling_sizes_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  rep->add("\n## scaling: pin_user_pages(FOLL_LONGTERM) of the whole region, per region size\n\n");
  rep->add("| folio | variant | sizes (MiB) | ns/page per size | fit: us = a + b * pages | R^2 |\n|---|---|---|---|---|---:|\n");
  Plot plot;
  plot.file = "scaling";
  plot.title = fmt::format("scaling: pin_user_pages(FOLL_LONGTERM) of the whole region, {} repeats", r);
  plot.lines = true;
  plot.logx = true;
  plot.xlabel = "region size (MiB)";
  plot.ylabel = "median get ns/page (bars: IQR)";
  for (uint64_t mb : sizes) plot.xtics.push_back({static_cast<double>(mb), std::to_string(mb)});
  for (const char* f : {"4K", "64K", "2M"}) {
    for (const char* v : {"legacy", "batch"}) {
      PlotSeries series{fmt::format("{} {}", f, v), {}};
      std::vector<double> xs, ys;
      std::string per;
      for (uint64_t mb : sizes) {
        progress(fmt::format("scaling {} {} {} MiB", f, v, mb));
        GupBenchConfig c = longterm(mb, -1, r, f);
        c.variants = {{"gup.walk", v}};
        c.quiet = true;
        GupBenchResult res;
        if (run_gup_bench(c, &res, [](const std::string&) {})) {
          progress_done();
          std::fprintf(stderr, "mmlab bench: scaling %s %s %llu MiB: %s\n", f, v, static_cast<unsigned long long>(mb), res.error.c_str());
          return 1;
        }
        std::vector<double> g;
        for (auto& it : res.iters) g.push_back(it.get_us);
        double m = median_of(g);
        series.points.push_back(sample_point(static_cast<double>(mb), g, 1000.0 / static_cast<double>(res.region_pages)));
        xs.push_back(static_cast<double>(res.region_pages));
        ys.push_back(m);
        per += fmt::format("{}{:.2f}", per.empty() ? "" : " / ", m * 1000.0 / static_cast<double>(res.region_pages));
        rep->json["scaling"][f][v][std::to_string(mb)] = g;
      }
      plot.series.push_back(series);
      const LinearFit fit = linear_fit(xs, ys);
      std::string mbs;
      for (uint64_t mb : sizes) mbs += (mbs.empty() ? "" : ", ") + std::to_string(mb);
      rep->add(fmt::format("| {} | {} | {} | {} | {:.1f} + {:.2f} ns * pages | {:.4f} |\n", f, v, mbs, per, fit.a, fit.b * 1000.0, fit.r2));
    }
  }
  progress_done();
  rep->plots.push_back(plot);
  return 0;
}

extern const BenchSuite kBenchSuite_scaling = {
    .name = "scaling",
    .summary = "GUP time per page from 4 MiB to 4 GiB, with a linear fit",
    .need = need_scaling,
    .run = suite_scaling};

}  // namespace mmlab::cli
