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

std::string mib(double b) { return fmt::format("{:.1f}", b / (1 << 20)); }

// One column over the seeds: latencies pooled, the rest per seed.
struct Pooled {
  std::vector<double> ns;
  std::vector<double> child_kbps;  // usemem: every child's KB/s, over the seeds
  double wp_copy = 0, copied = 0, waste = 0, kbps = 0, pss_mib_s = 0, flushes = 0, ipis = 0;
  int64_t pss_peak = 0, violations = 0;
  std::vector<int64_t> copies_by_order;
};

int run_column(const cowbench::Workload& w, const cowbench::Column& c, cowbench::Params p, unsigned seeds, Pooled* out) {
  for (unsigned s = 0; s < seeds; s++) {
    p.seed = s + 1;
    cowbench::Result r;
    std::string err;
    if (cowbench::run(w, c, p, &r, &err) < 0) {
      progress_done();
      std::fprintf(stderr, "mmlab bench: cow %s under %s: %s\n", w.name.c_str(), c.name.c_str(), err.c_str());
      return 1;
    }
    out->ns.insert(out->ns.end(), r.write_ns.begin(), r.write_ns.end());
    out->child_kbps.insert(out->child_kbps.end(), r.child_kbps.begin(), r.child_kbps.end());
    const double n = seeds;
    out->wp_copy += static_cast<double>(r.wp_copy) / n;
    out->copied += static_cast<double>(r.bytes_copied) / n;
    out->waste += static_cast<double>(r.waste()) / n;
    out->kbps += r.child_kbps_mean / n;
    out->pss_mib_s += r.metrics.pss_mib_s / n;
    out->flushes += static_cast<double>(r.metrics.tlb.flushes) / n;
    out->ipis += static_cast<double>(r.metrics.tlb.ipis) / n;
    out->pss_peak = std::max(out->pss_peak, r.metrics.pss_peak);
    out->violations += r.violations;
    out->copies_by_order.resize(std::max(out->copies_by_order.size(), r.copies_by_order.size()));
    for (size_t o = 0; o < r.copies_by_order.size(); o++) out->copies_by_order[o] += r.copies_by_order[o] / seeds;
  }
  return 0;
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
      Pooled warm;
      if (int e = run_column(*w, cowbench::columns().front(), p, 1, &warm)) return e;
    }
    const bool usemem = w->name == "usemem";
    rep->add(fmt::format("\n### cow {}: {}\n\n", wn, w->what));
    if (usemem)
      rep->add("vs base: the median of the children's KB/s over base's, with its 95% bootstrap interval (the children "
               "of every seed; two columns' children ran apart, so they are resampled independently).\n\n");
    std::string head = "| column | p50 µs | p99 µs | CoW copies | copied MiB | copied never written MiB | peak PSS MiB | PSS MiB·s | "
                       "flushes | IPIs | violations |";
    std::string rule = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
    if (usemem) {
      head += " KB/s per child (median) | vs base (95% CI) |";
      rule += "---:|---:|";
    }
    if (rep->profile) {
      head += " modelled CoW ms |";
      rule += "---:|";
    }
    rep->add(head + "\n" + rule + "\n");
    std::vector<double> base_kbps;  // base's children: vs base's reference
    for (const char* cn : kColumns) {
      const cowbench::Column* c = by_name(cowbench::columns(), cn);
      if (!c) {
        std::fprintf(stderr, "mmlab bench: cow: no column %s\n", cn);
        return 1;
      }
      progress(fmt::format("cow {} / {}", wn, cn));
      Pooled r;
      if (int e = run_column(*w, *c, p, seeds, &r)) return e;
      progress_done();
      const double p50 = cowbench::percentile(r.ns, 0.5) / 1e3, p99 = cowbench::percentile(r.ns, 0.99) / 1e3;
      const size_t col = static_cast<size_t>(std::find(std::begin(kColumns), std::end(kColumns), cn) - std::begin(kColumns));
      const double x = static_cast<double>(std::find(std::begin(kWorkloads), std::end(kWorkloads), wn) - std::begin(kWorkloads));
      plot.series[col].points.push_back(
          {x, p50, cowbench::percentile(r.ns, 0.25) / 1e3, cowbench::percentile(r.ns, 0.75) / 1e3});
      std::string row = fmt::format("| {} | {:.2f} | {:.2f} | {:.0f} | {} | {} | {} | {:.2f} | {:.0f} | {:.0f} | {} |", cn, p50, p99,
                                    r.wp_copy, mib(r.copied), mib(r.waste), mib(static_cast<double>(r.pss_peak)),
                                    r.pss_mib_s, r.flushes, r.ipis, r.violations);
      auto& j = rep->json["cow"][wn][cn];
      j = {{"p50_us", p50},        {"p99_us", p99},         {"wp_copy", r.wp_copy},  {"bytes_copied", r.copied},
           {"copied_never_written", r.waste}, {"pss_peak", r.pss_peak}, {"pss_mib_s", r.pss_mib_s},
           {"flushes", r.flushes}, {"ipis", r.ipis},        {"violations", r.violations}};
      if (usemem) {
        // The children of two columns ran apart: their KB/s are compared
        // as independent samples (a ratio of medians, median(this) / median(base)).
        const bool is_base = c->name == std::string("base");
        if (is_base) base_kbps = r.child_kbps;
        const RatioCi vs = median_ratio_ci(r.child_kbps, base_kbps, Pairing::kIndependent);
        row += fmt::format(" {:.0f} | {} |", median_of(r.child_kbps),
                           is_base ? std::string("1.00x (base)") : base_kbps.empty() ? std::string("-") : ratio_ci_text(vs));
        j["child_kbps_mean"] = r.kbps;
        j["child_kbps"] = r.child_kbps;
        if (!is_base && !base_kbps.empty()) {
          j["vs_base"] = vs.ratio;
          j["vs_base_ci95"] = ci_json(vs);
        }
      }
      if (rep->profile) {
        const cowbench::ModelledCow mc = cowbench::modelled_cow_ms(r.copies_by_order, *rep->profile);
        row += mc.ms < 0 ? " n/a |" : fmt::format(" {:.2f}{} |", mc.ms, mc.approximated ? " *" : "");
        rep->json["modelled"]["cow"][wn][cn] = {{"cow_ms", mc.ms < 0 ? nlohmann::json() : nlohmann::json(mc.ms)},
                                                {"approximated", mc.approximated}};
      }
      rep->add(row + "\n");
    }
    if (rep->profile)
      rep->add("\nmodelled CoW ms: the model's copies per size x the host's cost (its CoW fault for 4K; \\* its first-touch "
               "fault of a folio of the size for larger copies), not measured here.\n");
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
