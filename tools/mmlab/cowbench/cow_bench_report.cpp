// The grid and the report of `mmlab cow-bench` (cow_bench.h): every chosen
// workload under every chosen column, each over the seeds, into report.md,
// report.json and the plots. The tables, the JSON and the merge over the
// seeds are loops over cow_metrics()'s named values.
#include <cstddef>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cowbench/cow_bench.h"
#include "fmt/format.h"
#include "mmlab/cost.h"
#include "report/metrics.h"
#include "report/report.h"

namespace mmlab::cli::cowbench {
namespace {

// The charts a plot of more columns than a chart holds is split into, by
// what the columns compare; the plot's first series (base, when it runs)
// is in each, as the reference.
std::vector<SeriesGroup> column_groups(const std::vector<const Column*>& cols) {
  std::vector<SeriesGroup> g = {{"sizes", "rfc and fixed sizes", {}},
                                {"512K", "fixed-512K by cow.max_order", {}},
                                {"alternatives", "reuse and alternatives", {}}};
  for (const Column* c : cols) {
    if (c->folio_kb == 512)
      g[1].names.push_back(c->name);
    else if (c->extra != Extra::kNone || c->reuse_whole)
      g[2].names.push_back(c->name);
    else if (std::string(c->policy) != "base")
      g[0].names.push_back(c->name);
  }
  return g;
}

void report_header(const Grid& g, Report* rep) {
  const Params& p = g.p;
  rep->add("# mmlab cow-bench\n\n");
  rep->add(environment_text(&rep->json["environment"]));
  if (g.profile) rep->add(profile_text(*g.profile, g.profile_file, &rep->json["modelled"]["profile"]));
  else rep->add(no_profile_text(g.no_profile));
  rep->add(fmt::format(
      "\nregion {} MiB, {} children (usemem, prefork), write share {:.4f} (cow-rand, prefork), {} seed(s); "
      "`base`, `rfc` and the alternatives fault the region in with 64K folios, `fixed-N` with N folios. "
      "Latency: each 4K page write the workload makes after the fork (or after the zero-page read), "
      "fault included, measured time on this machine (only ratios between columns transfer to a kernel). "
      "Copied: by CoW faults and by MADV_COLLAPSE. Waste: bytes copied that the copying processes never wrote "
      "afterwards; zero pages copied: pages CoW faults or collapses copied whose bytes were all zero (cow. and "
      "collapse.zero_subpages_copied; a collapse zero-fills none and zero-page slots, collapse.bytes_zeroed, and does "
      "not count them here); exited-sharer untouched (fork-exec, snapshot): the parent's copied pages it had not "
      "begun to write when the sharer's exit returned. snapshot: {} 64-byte writes, Poisson arrivals at {:.0f}/s, "
      "Zipf s={:.2f} over the pages; its latency runs from each write's scheduled time (coordinated "
      "omission corrected), its service time from the write's start. Percentiles interpolate between samples "
      "(type 7). Every run ends with the invariant checker.\n",
      p.size >> 20, p.procs, p.write_fraction, g.seeds, p.snapshot_writes, p.snapshot_rate, p.zipf_s));
  rep->add(fmt::format("TLB geometry: {}; sampler {}; per-page latency {}.\n", p.geometry.empty() ? "off" : p.geometry,
                       p.sample ? "on" : "off (--no-sampler)", p.time_writes ? "on" : "off (--no-latency)"));
  rep->json["params"] = {{"size", p.size},
                         {"procs", p.procs},
                         {"write_fraction", p.write_fraction},
                         {"seeds", g.seeds},
                         {"snapshot_writes", p.snapshot_writes},
                         {"snapshot_rate", p.snapshot_rate},
                         {"zipf_s", p.zipf_s},
                         {"geometry", p.geometry.empty() ? "off" : p.geometry},
                         {"sampler", p.sample},
                         {"latency", p.time_writes},
                         {"khugepaged_speedup", p.khugepaged_speedup}};
}

// One untimed run first: the frame store's host memory is then touched,
// and every timed column reuses it (the same RAM size throughout).
int warm_up(const Workload& w, const Grid& g) {
  progress(fmt::format("{}: warm-up", w.name));
  Params p = g.p;
  p.seed = 1;
  Result r;
  std::string err;
  if (run(w, *g.columns.front(), p, &r, &err) < 0) {
    progress_done();
    std::fprintf(stderr, "mmlab cow-bench: %s warm-up: %s\n", w.name.c_str(), err.c_str());
    return 1;
  }
  return 0;
}

// A column over the seeds, merged into *all (not run: all->not_run says why).
int run_column(const Workload& w, const Column& c, const Grid& g, Result* all) {
  Params p = g.p;
  for (unsigned s = 0; s < g.seeds; s++) {
    progress(fmt::format("{} / {} (seed {}/{})", w.name, c.name, s + 1, g.seeds));
    p.seed = s + 1;
    Result r;
    std::string err;
    if (run(w, c, p, &r, &err) < 0) {
      progress_done();
      std::fprintf(stderr, "mmlab cow-bench: %s under %s: %s\n", w.name.c_str(), c.name.c_str(), err.c_str());
      return 1;
    }
    if (!r.ran) {
      all->not_run = r.not_run;
      break;
    }
    all->merge(r);
  }
  progress_done();
  return 0;
}

std::string khugepaged_text(const std::string& column, const MetricSet& m) {
  auto v = [&m](const char* k) { return m.value(std::string("khugepaged.") + k); };
  return fmt::format(
      "\n{}: khugepaged beside the writers (sleeps sped up {:.0f}x): {:.1f} wakes, {:.1f} full scans, {:.2f} s of "
      "virtual time; {:.1f} collapses of {:.1f} attempts; CPU {:.2f} ms in its wakes ({:.2f} ms wall); {:.2f} ms in "
      "collapse_huge_page(), {:.2f} ms of it holding mmap_lock for write, the longest hold {:.3f} ms (per seed; the "
      "longest over the seeds).\n",
      column, v("speedup"), v("wakes"), v("full_scans"), v("virtual_s"), v("collapses"), v("attempts"), v("cpu_ms"),
      v("busy_ms"), v("collapse_ms"), v("mmap_write_ms"), v("mmap_write_max_ms"));
}

int workload_report(const Workload& w, const Grid& g, Report* rep) {
  rep->add(fmt::format("\n## {}: {}\n\n", w.name, w.what));
  if (int e = warm_up(w, g)) return e;
  std::vector<Result> results(g.columns.size());
  std::vector<MetricRow> rows;
  MetricsReport memory(w.name, g.p.geometry, g.profile);
  std::string notes;
  for (size_t i = 0; i < g.columns.size(); i++) {
    const Column& c = *g.columns[i];
    Result& all = results[i];
    if (int e = run_column(w, c, g, &all)) return e;
    if (!all.ran) {
      rows.push_back({c.name, nullptr, all.not_run});
      rep->json["workloads"][w.name][c.name] = {{"not_run", all.not_run}};
      continue;
    }
    memory.add(c.name, &all.m, all.curve, all.counts);
    rows.push_back({c.name, &all.m, ""});
    rep->json["workloads"][w.name][c.name] = all.m.json();
    if (all.m.has("khugepaged.wakes")) notes += khugepaged_text(c.name, all.m);
  }
  std::set<std::string> groups = w.groups;
  if (memory.modelled()) {
    memory.compute_modelled();
    groups.insert("modelled");
  }
  rep->add(metric_table(cow_metrics(), "main", groups, rows));
  rep->add(notes);
  if (w.name == "usemem")
    rep->add("\nThe series reported +9/+12/+14% usemem throughput for its mTHP CoW. Two `vs base` columns: beside "
             "`modelled ms`, the kernel's and the program's CPU time predicted from the counts (the same in every run; "
             "read this one), and beside `KB/s per child`, this machine's measured speed of the model's own code (it "
             "moves between runs); never the absolute KB/s.\n");
  const size_t first_plot = rep->plots.size();
  Plot cdf = metric_plot(cow_metrics(), "latency_us", rows, "cow-" + w.name + "-latency",
                         fmt::format("cow-bench {}: page-write latency percentiles", w.name));
  cdf.ylabel = "µs (log scale)";
  // From a 4K write's microsecond to a scheduler's stall at the max: on a
  // linear axis the max flattens every other percentile onto the floor.
  cdf.logy = true;
  if (!cdf.series.empty()) rep->plots.push_back(cdf);
  memory.finish(rep);
  // finish() adds the modelled values (they need base's): the JSON again.
  for (size_t i = 0; i < g.columns.size(); i++)
    if (results[i].ran) rep->json["workloads"][w.name][g.columns[i]->name] = results[i].m.json();
  // Every plot of this workload has a series per column: split those with
  // more than a chart holds.
  std::vector<Plot> drawn(rep->plots.begin(), rep->plots.begin() + static_cast<std::ptrdiff_t>(first_plot));
  for (size_t i = first_plot; i < rep->plots.size(); i++)
    for (Plot& c : split_plot(rep->plots[i], column_groups(g.columns))) drawn.push_back(std::move(c));
  rep->plots = std::move(drawn);
  return 0;
}

}  // namespace

int run_grid(const Grid& grid) {
  Grid g = grid;
  std::optional<cost::TallyPricer> pricer;
  if (g.profile) g.p.pricer = &pricer.emplace(*g.profile);
  Report rep;
  report_header(g, &rep);
  for (const Workload* w : g.workloads)
    if (int e = workload_report(*w, g, &rep)) return e;
  return write_report(rep, g.out);
}

}  // namespace mmlab::cli::cowbench
