// The scaling suite: cost as the work grows. GUP time per page over region
// sizes, with a fit of get time against pages (linear is the expectation):
// non-negative (a cost per call and a cost per page are never below 0) and
// weighted by relative error (an ordinary fit is the largest size's alone),
// beside how much the cost per page rises from the smallest size to the
// largest, which a straight line hides.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gup_table.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"
#include "mmlab/cost.h"

namespace mmlab::cli {

namespace {

struct ScalingFit {
  double a_us = 0, b_ns = 0;  // us = a + b * pages
  double worst = 0;           // the largest |fit - median| / median over the sizes
};

ScalingFit fit_scaling(const std::vector<double>& pages, const std::vector<double>& us) {
  std::vector<double> a, b;
  for (size_t i = 0; i < pages.size(); i++) {
    a.push_back(1.0 / us[i]);
    a.push_back(pages[i] / us[i]);
    b.push_back(1.0);
  }
  const std::vector<double> x = cost::nnls(a, pages.size(), 2, b);
  ScalingFit f{x[0], x[1] * 1000.0, 0};
  for (size_t i = 0; i < pages.size(); i++) f.worst = std::max(f.worst, std::abs(x[0] + x[1] * pages[i] - us[i]) / us[i]);
  return f;
}

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
  rep->add("| folio | variant | sizes (MiB) | ns/page per size | per page, largest vs smallest | fit: us = a + b * pages "
           "(a, b >= 0; relative) | its largest miss |\n|---|---|---|---|---:|---|---:|\n");
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
      const ScalingFit fit = fit_scaling(xs, ys);
      const double rise = (ys.back() / xs.back()) / (ys.front() / xs.front()) - 1;
      std::string mbs;
      for (uint64_t mb : sizes) mbs += (mbs.empty() ? "" : ", ") + std::to_string(mb);
      rep->add(fmt::format("| {} | {} | {} | {} | {:+.0f}% | {:.1f} us + {:.2f} ns * pages | {:.0f}% |\n", f, v, mbs, per,
                           rise * 100, fit.a_us, fit.b_ns, fit.worst * 100));
      rep->json["scaling"][f][v]["per_page_rise"] = rise;
      rep->json["scaling"][f][v]["fit"] = {{"a_us", fit.a_us}, {"b_ns_per_page", fit.b_ns}, {"largest_miss", fit.worst}};
    }
  }
  progress_done();
  rep->add(fmt::format(
      "\nThese are the model's times on this machine, not a kernel's. A cost per page that rises with the size is the "
      "model's own data outgrowing the host's caches (at the largest size, {}); a straight line through such points "
      "has a large miss, shown beside it.\n",
      model_footprint_text(sizes.back())));
  rep->plots.push_back(plot);
  return 0;
}

extern const BenchSuite kBenchSuite_scaling = {
    .name = "scaling",
    .summary = "GUP time per page from 4 MiB to 4 GiB, with a linear fit",
    .need = need_scaling,
    .run = suite_scaling};

}  // namespace mmlab::cli
