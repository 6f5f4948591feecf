// The GUP suites that reproduce a patch series' tables over the gup_test
// engine, the variants interleaved per repeat:
//   gup     gup-batch-follow-page-mask v5 (patches 7 and 8): gup_test -L -m 256
//           -n 65536 -r 16 -t on 4K, 64K mTHP and 2M THP, every gup.walk value
//           from legacy on (legacy / walk / batch / batch-ro, and any added)
//   unify   gup-unify-hugetlb-speed-up-thp: -m 512 -t -L -n 1024, v6.5 vs legacy
//   fast    GUP-fast (-u, -a) on 4K and 64K mTHP, every gup.fast value
//   ro-pin  R/O long-term pins of read-only 64K mTHP: batch vs batch-ro
//   sweep   pages per call 1, 16, 64, 123, 512 and the whole region
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

// The series' figures at 256 MiB, 65536 pages per call: before = its base
// (legacy), walk from patch 7's table, batch from patch 8's.
Published batch_series_figures(const std::string& folio) {
  Published k;
  k.source = &kBatchSeriesV5;
  k.pages = 65536;
  if (folio == "4K") k.before_us = 2753, k.after_us = {{"walk", 1178}, {"batch", 1198}};
  if (folio == "64K") k.before_us = 2946, k.after_us = {{"walk", 1361}, {"batch", 231}};
  if (folio == "2M") k.before_us = 72, k.after_us = {{"walk", 70}, {"batch", 71}};
  return k;
}

// Only batch's figure: what the sweep's legacy/batch rows compare.
Published batch_only(const std::string& folio) {
  Published k = batch_series_figures(folio);
  k.after_us.erase(k.after_us.begin());
  return k;
}

}  // namespace

namespace {
// Each suite's region in MiB: --size-mb, or its own.
uint64_t gup_mb(const BenchOptions& o) { return o.size_mb ? o.size_mb : (o.quick ? 64 : 256); }
uint64_t unify_mb(const BenchOptions& o) { return o.size_mb ? o.size_mb : (o.quick ? 64 : 512); }
uint64_t sweep_mb(const BenchOptions& o) { return o.size_mb ? o.size_mb : (o.quick ? 32 : 256); }
// One gup_test System at a time, the region pre-faulted.
HostNeed gup_need(uint64_t mb) { return {gup_bench_host_need(longterm(mb, -1, 1, "4K")), mb}; }
// --quick's repeats for the GUP tables: the first is a warm-up, and five
// samples are the fewest that carry an interval (kMinCiSamples).
constexpr long kQuickRepeats = kMinCiSamples + 1;
}  // namespace

static HostNeed need_gup(const BenchOptions& o) { return gup_need(gup_mb(o)); }
static HostNeed need_unify(const BenchOptions& o) { return gup_need(unify_mb(o)); }
static HostNeed need_fast(const BenchOptions& o) { return gup_need(gup_mb(o)); }
static HostNeed need_ro_pin(const BenchOptions& o) { return gup_need(gup_mb(o)); }
static HostNeed need_sweep(const BenchOptions& o) { return gup_need(sweep_mb(o)); }

static int suite_gup(const BenchOptions& o, Report* rep) {
  uint64_t mb = gup_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? kQuickRepeats : 16);
  std::vector<GupRow> rows;
  for (const char* f : {"4K", "64K", "2M"}) {
    GupBenchConfig c = longterm(mb, -1, r, f);
    walk_variants(&c, variants_from_default("gup.walk"));
    rows.push_back({fmt::format("{} -L -m {} -n {}", f, mb, c.nr_per_call), c, batch_series_figures(f), f, f});
  }
  std::vector<RowResult> res;
  const std::string title = "gup-batch-follow-page-mask v5, patches 7 and 8: pin_user_pages(FOLL_LONGTERM), whole region per call";
  if (int e = run_rows(title, rows, "legacy", rep, "gup", &res)) return e;
  rep->plots.push_back(speedup_bars("gup", fmt::format("gup: pin_user_pages(FOLL_LONGTERM), -L -m {} -n whole -r {} -t", mb, r), rows, res));
  return 0;
}

static int suite_unify(const BenchOptions& o, Report* rep) {
  uint64_t mb = unify_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 10);
  GupBenchConfig thp = longterm(mb, 1024, r, "2M");
  walk_variants(&thp, {"v6.5", "legacy"});
  GupBenchConfig ht = longterm(mb, 1024, r, "2M");
  ht.hugetlb = true;
  ht.thp = 0;
  walk_variants(&ht, {"legacy", "batch"});
  Published unify;
  unify.source = &kUnifyHugetlb;
  unify.before_us = 13992.5;
  unify.after_us = {{"legacy", 378.5}};
  unify.pages = 131072;
  std::vector<GupRow> rows = {{"2M THP", thp, unify, nullptr, "2M THP: v6.5 -> legacy"},
                              {"2M hugetlb", ht, {}, nullptr, "2M hugetlb: legacy -> batch"}};
  std::vector<RowResult> res;
  if (int e = run_rows("gup-unify-hugetlb-speed-up-thp: -m " + std::to_string(mb) +
                           " -t -L -n 1024 (THP: v6.5, before the series, against legacy, v6.18; hugetlb, which the series "
                           "moved onto the generic walk: legacy against batch)",
                       rows, "v6.5", rep, "unify", &res))
    return e;
  rep->plots.push_back(speedup_bars("unify", fmt::format("unify: -m {} -t -L -n 1024 -r {}", mb, r), rows, res));
  return 0;
}

static int suite_fast(const BenchOptions& o, Report* rep) {
  uint64_t mb = gup_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? kQuickRepeats : 16);
  std::vector<GupRow> rows;
  for (auto cmd : {GupCmd::kGupFast, GupCmd::kPinFast}) {
    for (const char* f : {"4K", "64K"}) {
      GupBenchConfig c = longterm(mb, -1, r, f);
      c.cmd = cmd;
      for (auto& v : variants_from_default("gup.fast")) c.variants.push_back({"gup.fast", v});
      const std::string label = fmt::format("{} {} -n whole", f, cmd == GupCmd::kGupFast ? "-u" : "-a");
      rows.push_back({label, c, {}, nullptr, label});
    }
  }
  std::vector<RowResult> res;
  if (int e = run_rows("GUP-fast: one speculative reference per PTE (legacy) or per same-folio run (batch)", rows, "legacy", rep,
                       "fast", &res))
    return e;
  rep->plots.push_back(speedup_bars("fast", fmt::format("fast: GUP-fast by gup.fast, -m {} -r {}", mb, r), rows, res));
  return 0;
}

static int suite_ro_pin(const BenchOptions& o, Report* rep) {
  uint64_t mb = gup_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? kQuickRepeats : 16);
  GupBenchConfig c = longterm(mb, -1, r, "64K");
  c.gup_flags = 0;  // -W: read-only
  c.protect_read = true;
  walk_variants(&c, {"legacy", "batch", "batch-ro"});
  Published review;
  review.source = &kBatchV5Review;
  review.remark = "\"That's a clear indication that this needs more work\" (no figures)";
  std::vector<GupRow> rows = {{"64K -L -W", c, review, "64K", "64K -L -W"}};
  std::vector<RowResult> res;
  if (int e = run_rows("R/O long-term pin of read-only 64K mTHP (mprotect(PROT_READ) after pre-faulting): batch vs batch-ro",
                       rows, "legacy", rep, "ro_pin", &res))
    return e;
  rep->plots.push_back(speedup_bars("ro_pin", fmt::format("ro-pin: read-only 64K mTHP, -L -W -m {} -r {}", mb, r), rows, res));
  return 0;
}

namespace {

// Pages per call on a numeric log axis: 1 ... 512 and the whole region.
Plot sweep_plot(const std::string& file, const std::string& title, const std::string& ylabel, bool ratio) {
  Plot p;
  p.file = file;
  p.title = title;
  p.lines = true;
  p.logx = true;
  p.ratio = ratio;
  p.xlabel = "pages per call (-n)";
  p.ylabel = ylabel;
  return p;
}

}  // namespace

static int suite_sweep(const BenchOptions& o, Report* rep) {
  uint64_t mb = sweep_mb(o);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 8);
  std::vector<GupRow> rows;
  const std::vector<long> per_call = {1L, 16L, 64L, 123L, 512L, -1L};
  for (const char* f : {"4K", "64K"}) {
    for (long n : per_call) {
      GupBenchConfig c = longterm(mb, n, r, f);
      walk_variants(&c, {"legacy", "batch"});
      const std::string label = fmt::format("{} -L -n {}", f, n < 0 ? std::string("whole") : std::to_string(n));
      rows.push_back({label, c, n < 0 ? batch_only(f) : Published{}, nullptr, label});
    }
  }
  std::vector<RowResult> res;
  if (int e = run_rows("pages per call (real callers pin a few pages per call)", rows, "legacy", rep, "sweep", &res)) return e;
  const std::string where = fmt::format("-L -m {} -r {} -t", mb, r);
  Plot ratio = sweep_plot("sweep", "sweep: batch vs legacy by pages per call, " + where,
                          "get-time speedup of batch vs legacy (median ratio; bars: IQR)", true);
  Plot time = sweep_plot("sweep_ns_per_page", "sweep: get time per page by pages per call, " + where,
                         "median get ns/page (bars: IQR)", false);
  const double whole = static_cast<double>(res.empty() ? 0 : res.front().region_pages);
  for (long n : per_call)
    ratio.xtics.push_back({n < 0 ? whole : static_cast<double>(n),
                           n < 0 ? fmt::format("whole ({})", res.empty() ? 0 : res.front().region_pages) : std::to_string(n)});
  time.xtics = ratio.xtics;
  for (size_t i = 0, f = 0; f < 2; f++) {
    const std::string folio = f ? "64K" : "4K";
    PlotSeries sr{folio + ": batch vs legacy", {}}, sl{folio + " legacy", {}}, sb{folio + " batch", {}};
    for (long n : per_call) {
      const RowResult& rr = res[i];
      const double x = n < 0 ? static_cast<double>(rr.region_pages) : static_cast<double>(n);
      PlotPoint pt = speedup_point(x, rr.variants[rr.base].get_us, rr.variants.back().get_us);
      pt.published = rows[i].kernel.speedup("batch");
      sr.points.push_back(pt);
      for (auto* s : {&sl, &sb}) {
        const Quartiles q = quartiles_of(rr.variants[s == &sl ? rr.base : rr.variants.size() - 1].get_us);
        const double k = 1000.0 / static_cast<double>(rr.region_pages);
        s->points.push_back({x, q.median * k, q.q1 * k, q.q3 * k});
      }
      i++;
    }
    ratio.series.push_back(sr);
    time.series.push_back(sl);
    time.series.push_back(sb);
  }
  rep->plots.push_back(ratio);
  rep->plots.push_back(time);
  return 0;
}

extern const BenchSuite kBenchSuite_gup = {
    .name = "gup",
    .summary = "gup-batch-follow-page-mask v5's tables: gup_test -L -m 256 -n 65536 -r 16 -t on 4K, 64K and 2M, every gup.walk from legacy on",
    .need = need_gup,
    .run = suite_gup};
extern const BenchSuite kBenchSuite_unify = {
    .name = "unify",
    .summary = "gup-unify-hugetlb-speed-up-thp: -m 512 -t -L -n 1024, v6.5 vs legacy on THP, legacy vs batch on hugetlb",
    .need = need_unify,
    .run = suite_unify};
extern const BenchSuite kBenchSuite_fast = {
    .name = "fast",
    .summary = "GUP-fast (-u, -a) on 4K and 64K mTHP, every gup.fast value",
    .need = need_fast,
    .run = suite_fast};
extern const BenchSuite kBenchSuite_ro_pin = {
    .name = "ro-pin",
    .summary = "R/O long-term pins of read-only 64K mTHP: batch vs batch-ro",
    .need = need_ro_pin,
    .run = suite_ro_pin};
extern const BenchSuite kBenchSuite_sweep = {
    .name = "sweep",
    .summary = "pages per call 1, 16, 64, 123, 512 and the whole region, legacy vs batch",
    .need = need_sweep,
    .run = suite_sweep};

}  // namespace mmlab::cli
