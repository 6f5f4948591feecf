// The cow suite of `mmlab bench`: a small grid of `mmlab cow-bench`
// (cow_bench.h) — base, rfc, fixed-64K, fixed-512K and base-khugepaged over
// usemem and cow-rand — so that the report carries the CoW latency, waste
// and memory figures beside the other suites.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "report/report.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "cowbench/cow_bench.h"
#include "fmt/format.h"

namespace mmlab::cli {

namespace {

constexpr const char* kWorkloads[] = {"usemem", "cow-rand"};
constexpr const char* kColumns[] = {"base", "rfc", "fixed-64K", "fixed-512K", "base-khugepaged"};

template <typename T>
const T* by_name(const std::vector<T>& all, const std::string& name) {
  auto it = std::find_if(all.begin(), all.end(), [&](const T& x) { return x.name == name; });
  return it == all.end() ? nullptr : &*it;
}

// One column over the seeds, merged (cow_bench.h's Result::merge).
int run_column(const cowbench::Workload& w, const cowbench::Column& c, cowbench::Params p, unsigned seeds,
               cowbench::Result* out) {
  for (unsigned s = 0; s < seeds; s++) {
    p.seed = s + 1;
    cowbench::Result r;
    std::string err;
    if (cowbench::run(w, c, p, &r, &err) < 0) {
      progress_done();
      std::fprintf(stderr, "mmlab bench: cow %s under %s: %s\n", w.name.c_str(), c.name.c_str(), err.c_str());
      return 1;
    }
    out->merge(r);
  }
  return 0;
}

// The figures of the suite's table and JSON, named values of cow-bench's
// (cowbench::cow_metrics()): a quantile of a distribution, or the value.
struct Figure {
  const char* json;
  const char* header;
  const char* key;
  double quantile;  // kSamples values only
  int decimals;
};
constexpr Figure kFigures[] = {
    {"p50_us", "p50 µs", "latency_us", 0.5, 2},
    {"p99_us", "p99 µs", "latency_us", 0.99, 2},
    {"wp_copy", "CoW copies", "wp_copy", 0, 0},
    {"bytes_copied", "copied MiB", "bytes_copied", 0, -1},
    {"copied_never_written", "copied never written MiB", "copied_never_written", 0, -1},
    {"pss_peak", "peak PSS MiB", "metrics.pss_peak", 0, -1},
    {"pss_mib_s", "PSS MiB·s", "metrics.pss_mib_s", 0, 2},
    {"flushes", "flushes", "metrics.tlb.flushes", 0, 0},
    {"ipis", "IPIs", "metrics.tlb.ipis", 0, 0},
    {"violations", "violations", "violations", 0, 0},
};

double figure(const MetricSet& m, const Figure& f) {
  return f.key == std::string("latency_us") ? quantile_of(m.samples(f.key), f.quantile) : m.value(f.key);
}

// A figure as the table prints it: bytes (decimals -1) as MiB.
std::string figure_text(const MetricSet& m, const Figure& f) {
  const double v = figure(m, f);
  return f.decimals < 0 ? fmt::format("{:.1f}", v / (1 << 20)) : fmt::format("{:.{}f}", v, f.decimals);
}

}  // namespace

namespace {
cowbench::Params cow_params(const BenchOptions& o) {
  cowbench::Params p;
  p.size = (o.size_mb ? o.size_mb : (o.quick ? 16 : 64)) << 20;
  p.size = std::max<uint64_t>(PMD_SIZE, p.size & ~(PMD_SIZE - 1));
  p.procs = o.quick ? 2 : 4;
  return p;
}
}  // namespace

// One cow-bench run at a time: every process's copy of the region.
static HostNeed need_cow(const BenchOptions& o) {
  const cowbench::Params p = cow_params(o);
  return {cowbench::host_bytes_needed(p, false), p.size >> 20};
}

// The modelled column of a row: the measured phase's counts per seed times
// the profile's costs, and the change against base's (kept in *base_ms).
static std::string modelled_cell(const cowbench::Result& r, unsigned seeds, bool is_base, double* base_ms,
                          nlohmann::ordered_json* j, Report* rep) {
  std::map<std::string, int64_t> per_seed = r.counts;
  for (auto& [n, v] : per_seed) v /= seeds;
  const cowbench::ModelledPhase mp = cowbench::modelled_phase(per_seed, *rep->profile);
  if (is_base) *base_ms = mp.total_ms();
  const double vs = *base_ms > 0 ? (mp.total_ms() / *base_ms - 1) * 100 : 0;
  *j = {{"kernel_ms", mp.kernel_ms}, {"user_ms", mp.user_ms}, {"total_ms", mp.total_ms()}, {"vs_base_pct", vs},
        {"extrapolated", !mp.extrapolated.empty()}};
  return fmt::format(" {:.2f} ({:+.1f}%){} |", mp.total_ms(), vs, mp.extrapolated.empty() ? "" : " *");
}

static int suite_cow(const BenchOptions& o, Report* rep) {
  cowbench::Params p = cow_params(o);
  p.write_fraction = 1.0 / 32;
  const unsigned seeds = o.repeats ? static_cast<unsigned>(o.repeats) : (o.quick ? 1 : 3);
  rep->add(fmt::format("\n## cow: `mmlab cow-bench` over {} MiB, {} children (usemem), write share 1/32 (cow-rand), {} seed(s)\n\n"
                       "Latency: each 4K page write after the fork, fault included (measured). Waste: bytes copied that "
                       "the copiers never wrote. PSS (smaps' sum, CONFIG_PAGE_MAPCOUNT) peak and time integral from the "
                       "sampler; flushes and IPIs: the TLB model's events (no geometry here: `mmlab cow-bench --geometry` "
                       "adds the misses). The full grid, plots and mechanism sentences: `mmlab cow-bench` (docs/COW_BENCH.md).\n",
                       p.size >> 20, p.procs, seeds));
  // The plot: page-write latency per workload, a bar per column (base first, grey).
  Plot plot = bar_plot("cow", fmt::format("cow: page-write latency after fork, {} MiB, {} seed(s)", p.size >> 20, seeds),
                       "page-write latency us (p50; bars: p25-p75)",
                       std::vector<std::string>(std::begin(kWorkloads), std::end(kWorkloads)),
                       std::vector<std::string>(std::begin(kColumns), std::end(kColumns)));
  plot.xlabel = "workload";
  for (const char* wn : kWorkloads) {
    const cowbench::Workload* w = by_name(cowbench::workloads(), wn);
    if (!w) {
      std::fprintf(stderr, "mmlab bench: cow: no workload %s\n", wn);
      return 1;
    }
    // One untimed run first, as cow-bench does: the frame store is then
    // touched, and the timed columns reuse it.
    {
      progress(fmt::format("cow {}: warm-up", wn));
      cowbench::Result warm;
      if (int e = run_column(*w, cowbench::columns().front(), p, 1, &warm)) return e;
    }
    const bool usemem = w->name == "usemem";
    rep->add(fmt::format("\n### cow {}: {}\n\n", wn, w->what));
    if (usemem)
      rep->add("vs base: the median of the children's KB/s over base's, with its 95% bootstrap interval (the children "
               "of every seed; two columns' children ran apart, so they are resampled independently).\n\n");
    std::string head = "| column |", rule = "|---|";
    for (const Figure& f : kFigures) head += fmt::format(" {} |", f.header), rule += "---:|";
    if (usemem) {
      head += " KB/s per child (median) | vs base (95% CI) |";
      rule += "---:|---:|";
    }
    if (rep->profile) {
      head += " modelled ms (vs base) |";
      rule += "---:|";
    }
    rep->add(head + "\n" + rule + "\n");
    std::vector<double> base_kbps;  // base's children: vs base's reference
    double modelled_base = 0;       // base's modelled total, ms per seed
    for (const char* cn : kColumns) {
      const cowbench::Column* c = by_name(cowbench::columns(), cn);
      if (!c) {
        std::fprintf(stderr, "mmlab bench: cow: no column %s\n", cn);
        return 1;
      }
      progress(fmt::format("cow {} / {}", wn, cn));
      cowbench::Result r;
      if (int e = run_column(*w, *c, p, seeds, &r)) return e;
      progress_done();
      const std::vector<double>& us = r.m.samples("latency_us");
      const size_t col = static_cast<size_t>(std::find(std::begin(kColumns), std::end(kColumns), cn) - std::begin(kColumns));
      const double x = static_cast<double>(std::find(std::begin(kWorkloads), std::end(kWorkloads), wn) - std::begin(kWorkloads));
      plot.series[col].points.push_back({x, quantile_of(us, 0.5), quantile_of(us, 0.25), quantile_of(us, 0.75)});
      std::string row = fmt::format("| {} |", cn);
      auto& j = rep->json["cow"][wn][cn];
      for (const Figure& f : kFigures) {
        row += " " + figure_text(r.m, f) + " |";
        j[f.json] = figure(r.m, f);
      }
      if (usemem) {
        // The children of two columns ran apart: their KB/s are compared
        // as independent samples (a ratio of medians, median(this) / median(base)).
        const std::vector<double>& kbps = r.m.samples("child_kbps");
        const bool is_base = c->name == std::string("base");
        if (is_base) base_kbps = kbps;
        const RatioCi vs = median_ratio_ci(kbps, base_kbps, Pairing::kIndependent);
        row += fmt::format(" {:.0f} | {} |", median_of(kbps),
                           is_base ? std::string("1.00x (base)") : base_kbps.empty() ? std::string("-") : ratio_ci_text(vs));
        j["child_kbps_mean"] = r.m.value("child_kbps_mean");
        j["child_kbps"] = kbps;
        if (!is_base && !base_kbps.empty()) {
          j["vs_base"] = vs.ratio;
          j["vs_base_ci95"] = ci_json(vs);
        }
      }
      if (rep->profile) row += modelled_cell(r, seeds, c->name == std::string("base"), &modelled_base, &rep->json["modelled"]["cow"][wn][cn], rep);
      rep->add(row + "\n");
    }
    if (rep->profile)
      rep->add("\nmodelled ms: the measured phase's counts x the profile's costs per seed (kernel and program), with its "
               "change against base; not measured here. \\* extrapolated: a copy larger than 4K on a write fault, which the "
               "host never makes (the per-order copy measured on the host plus the 4K CoW fault's cost).\n");
  }
  rep->plots.push_back(plot);
  return 0;
}

extern const BenchSuite kBenchSuite_cow = {
    .name = "cow",
    .summary = "a small cow-bench grid (base, rfc, fixed-64K, fixed-512K, base-khugepaged over usemem and cow-rand)",
    .need = need_cow,
    .run = suite_cow};

}  // namespace mmlab::cli
