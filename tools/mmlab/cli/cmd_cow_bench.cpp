// `mmlab cow-bench`: the command line and the report of the CoW benchmark
// (cow_bench.h, docs/COW_BENCH.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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
  uint64_t khugepaged_speedup = 1000;
};

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


std::string mib(int64_t b) { return fmt::format("{:.1f}", static_cast<double>(b) / (1 << 20)); }

// khugepaged beside the writers: times and counts summed over the seeds,
// the longest write hold the longest of any.
void merge_khugepaged(cowbench::KhugepagedFigures* into, const cowbench::KhugepagedFigures& k) {
  if (!k.ran) return;
  into->ran = true;
  into->cpu_ms += k.cpu_ms;
  into->busy_ms += k.busy_ms;
  into->collapse_ms += k.collapse_ms;
  into->mmap_write_ms += k.mmap_write_ms;
  into->mmap_write_max_ms = std::max(into->mmap_write_max_ms, k.mmap_write_max_ms);
  into->virtual_s += k.virtual_s;
  into->wakes += k.wakes;
  into->full_scans += k.full_scans;
  into->attempts += k.attempts;
  into->collapses += k.collapses;
  into->write_locked += k.write_locked;
}

// The khugepaged object of a column's report.json entry, per seed (the
// longest hold over every seed).
nlohmann::json khugepaged_json(const cowbench::KhugepagedFigures& k, unsigned seeds, uint64_t speedup) {
  const double n = seeds;
  return {{"speedup", speedup},
          {"cpu_ms", k.cpu_ms / n},
          {"busy_ms", k.busy_ms / n},
          {"collapse_ms", k.collapse_ms / n},
          {"mmap_write_ms", k.mmap_write_ms / n},
          {"mmap_write_max_ms", k.mmap_write_max_ms},
          {"virtual_s", k.virtual_s / n},
          {"wakes", static_cast<double>(k.wakes) / n},
          {"full_scans", static_cast<double>(k.full_scans) / n},
          {"attempts", static_cast<double>(k.attempts) / n},
          {"collapses", static_cast<double>(k.collapses) / n},
          {"write_locked", static_cast<double>(k.write_locked) / n}};
}

std::string khugepaged_text(const std::string& column, const cowbench::KhugepagedFigures& k, unsigned seeds,
                            uint64_t speedup) {
  const double n = seeds;
  return fmt::format(
      "\n{}: khugepaged beside the writers (sleeps sped up {}x): {:.1f} wakes, {:.1f} full scans, {:.2f} s of virtual "
      "time; {:.1f} collapses of {:.1f} attempts; CPU {:.2f} ms in its wakes ({:.2f} ms wall); {:.2f} ms in "
      "collapse_huge_page(), {:.2f} ms of it holding mmap_lock for write, the longest hold {:.3f} ms (per seed; the "
      "longest over the seeds).\n",
      column, speedup, static_cast<double>(k.wakes) / n, static_cast<double>(k.full_scans) / n, k.virtual_s / n,
      static_cast<double>(k.collapses) / n, static_cast<double>(k.attempts) / n, k.cpu_ms / n, k.busy_ms / n,
      k.collapse_ms / n, k.mmap_write_ms / n, k.mmap_write_max_ms);
}

// Every seed's run merged: latencies pooled, counts summed, rates averaged.
void merge(cowbench::Result* into, const cowbench::Result& r) {
  into->ran = true;
  into->write_ns.insert(into->write_ns.end(), r.write_ns.begin(), r.write_ns.end());
  into->service_ns.insert(into->service_ns.end(), r.service_ns.begin(), r.service_ns.end());
  into->zero_subpages += r.zero_subpages;
  into->exit_tracked = r.exit_tracked;
  into->exited_sharer_untouched += r.exited_sharer_untouched;
  into->copied_after_exit += r.copied_after_exit;
  into->filler_pages += r.filler_pages;
  into->anon_fault_fallback += r.anon_fault_fallback;
  into->thp_fault_fallback += r.thp_fault_fallback;
  into->wp_fault_fallback += r.wp_fault_fallback;
  into->anon_fault_alloc += r.anon_fault_alloc;
  into->wp_fault_alloc += r.wp_fault_alloc;
  into->elapsed_s += r.elapsed_s;
  into->child_kbps_mean += r.child_kbps_mean;
  into->child_kbps_sum += r.child_kbps_sum;
  into->wp_copy += r.wp_copy;
  into->wp_reuse += r.wp_reuse;
  into->anon += r.anon;
  into->zero += r.zero;
  into->bytes_copied += r.bytes_copied;
  into->bytes_written += r.bytes_written;
  into->rss_peak = std::max(into->rss_peak, r.rss_peak);
  into->warnings += r.warnings;
  into->collapses += r.collapses;
  into->violations += r.violations;
  merge_khugepaged(&into->khugepaged, r.khugepaged);
  cowbench::merge_metrics(&into->metrics, r.metrics);
  into->copies_by_order.resize(std::max(into->copies_by_order.size(), r.copies_by_order.size()));
  for (size_t o = 0; o < r.copies_by_order.size(); o++) into->copies_by_order[o] += r.copies_by_order[o];
}

int run_cow_bench(const CowCli& o) {
  std::vector<const cowbench::Workload*> ws;
  std::vector<const cowbench::Column*> cs;
  if (!pick("workload", o.workloads, cowbench::workloads(), &ws) || !pick("column", o.cols, cowbench::columns(), &cs))
    return 2;
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
  if (!o.profile.empty()) {
    std::string perr;
    if (host::load_cost_profile(o.profile, &profile, &perr)) {
      std::fprintf(stderr, "mmlab cow-bench: --profile %s: %s\n", o.profile.c_str(), perr.c_str());
      return 2;
    }
  }
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

  Report rep;
  rep.add("# mmlab cow-bench\n\n");
  rep.add(environment_text(&rep.json["environment"]));
  if (!o.profile.empty()) {
    rep.profile = &profile;
    rep.add(profile_text(profile, o.profile, &rep.json["modelled"]["profile"]));
  }
  rep.add(fmt::format("\nregion {} MiB, {} children (usemem, prefork), write share {:.4f} (cow-rand, prefork), {} seed(s); "
                      "`base`, `rfc` and the alternatives fault the region in with 64K folios, `fixed-N` with N folios. "
                      "Latency: each 4K page write the workload makes after the fork (or after the zero-page read), "
                      "fault included, measured time on this machine (only ratios between columns transfer to a kernel). "
                      "Copied: by CoW faults and by MADV_COLLAPSE. Waste: bytes copied that the copying processes never wrote "
                      "afterwards; zero pages copied: pages CoW faults or collapses copied whose bytes were all zero (cow. and collapse.zero_subpages_copied; a collapse zero-fills none and zero-page slots, collapse.bytes_zeroed, and does not count them here); "
                      "exited-sharer untouched (fork-exec, snapshot): the parent's copied pages it had not begun to write "
                      "when the sharer's exit returned. snapshot: {} 64-byte writes, Poisson arrivals at {:.0f}/s, "
                      "Zipf s={:.2f} over the pages; its latency runs from each write's scheduled time (coordinated "
                      "omission corrected), its service time from the write's start. Every run ends with the invariant "
                      "checker.\n",
                      p.size >> 20, p.procs, p.write_fraction, seeds, p.snapshot_writes, p.snapshot_rate, p.zipf_s));
  rep.add(fmt::format("TLB geometry: {}; sampler {}; per-page latency {}.\n", o.geometry, p.sample ? "on" : "off (--no-sampler)",
                      p.time_writes ? "on" : "off (--no-latency)"));
  rep.json["params"] = {{"size", p.size},
                        {"procs", p.procs},
                        {"write_fraction", p.write_fraction},
                        {"seeds", seeds},
                        {"snapshot_writes", p.snapshot_writes},
                        {"snapshot_rate", p.snapshot_rate},
                        {"zipf_s", p.zipf_s},
                        {"geometry", o.geometry},
                        {"sampler", p.sample},
                        {"latency", p.time_writes},
                        {"khugepaged_speedup", p.khugepaged_speedup}};
  for (const cowbench::Workload* w : ws) {
    rep.add(fmt::format("\n## {}: {}\n\n", w->name, w->what));
    const bool usemem = w->name == "usemem", snapshot = w->name == "snapshot", frag = w->name == "fragmented";
    const bool exits = w->name == "fork-exec" || snapshot;
    rep.add(fmt::format("| column | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs |{} CoW copies | reuses | copied MiB | "
                        "copied never written MiB | zero pages copied |{} peak RSS MiB | collapses | warnings | violations |",
                        snapshot ? " service p50 µs | service p99 µs | service max µs |" : "",
                        exits ? " exited-sharer untouched MiB | copied after exit MiB |" : ""));
    if (usemem) rep.add(" KB/s per child | vs base |");
    if (frag) rep.add(" anon_fault_fallback | anon_fault_alloc | wp_fault_fallback | wp_fault_alloc | thp_fault_fallback |");
    const int ncols = 14 + (snapshot ? 3 : 0) + (exits ? 2 : 0) + (usemem ? 2 : 0) + (frag ? 5 : 0);
    rep.add("\n|---|");
    for (int i = 1; i < ncols; i++) rep.add("---:|");
    rep.add("\n");
    Plot cdf;
    cdf.file = "cow-" + w->name + "-latency";
    cdf.title = fmt::format("cow-bench {}: page-write latency percentiles", w->name);
    cdf.xlabel = "percentile";
    cdf.ylabel = "µs";
    cdf.lines = true;
    const std::vector<double> qs = {0.5, 0.9, 0.99, 0.999, 1.0};
    for (size_t i = 0; i < qs.size(); i++) cdf.xtics.push_back({static_cast<double>(i), fmt::format("p{}", qs[i] * 100)});
    double base_kbps = 0;
    cowbench::MetricsReport metrics(w->name, o.geometry, rep.profile);
    // One untimed run first: the frame store's host memory is then touched,
    // and every timed column reuses it (the same RAM size throughout).
    {
      progress(fmt::format("{}: warm-up", w->name));
      cowbench::Result r;
      std::string err;
      p.seed = 1;
      if (cowbench::run(*w, *cs.front(), p, &r, &err) < 0) {
        progress_done();
        std::fprintf(stderr, "mmlab cow-bench: %s warm-up: %s\n", w->name.c_str(), err.c_str());
        return 1;
      }
    }
    for (const cowbench::Column* c : cs) {
      cowbench::Result all;
      std::string not_run;
      for (unsigned s = 0; s < seeds; s++) {
        progress(fmt::format("{} / {} (seed {}/{})", w->name, c->name, s + 1, seeds));
        p.seed = s + 1;
        cowbench::Result r;
        std::string err;
        if (int e = cowbench::run(*w, *c, p, &r, &err); e < 0) {
          progress_done();
          std::fprintf(stderr, "mmlab cow-bench: %s under %s: %s\n", w->name.c_str(), c->name.c_str(), err.c_str());
          return 1;
        }
        if (!r.ran) {
          not_run = r.not_run;
          break;
        }
        merge(&all, r);
      }
      progress_done();
      if (!all.ran) {
        rep.add(fmt::format("| {} | not run: {} |\n", c->name, not_run));
        rep.json["workloads"][w->name][c->name] = {{"not_run", not_run}};
        continue;
      }
      const double n = seeds;
      std::vector<double> us;
      for (double q : qs) us.push_back(cowbench::percentile(all.write_ns, q) / 1000);
      std::string lat;
      for (size_t i = 0; i < us.size(); i++)
        lat += all.write_ns.empty() ? std::string(" - |")
                                    : fmt::format(" {:.{}f} |", us[i], i + 1 < us.size() ? 2 : 1);
      std::string service;
      if (snapshot)
        for (double q : {0.5, 0.99, 1.0}) service += fmt::format(" {:.2f} |", cowbench::percentile(all.service_ns, q) / 1000);
      rep.add(fmt::format("| {} |{}{} {} | {} | {} | {} | {} |", c->name, lat, service, all.wp_copy / seeds,
                          all.wp_reuse / seeds, mib(all.bytes_copied / seeds), mib(all.waste() / seeds),
                          all.zero_subpages / seeds));
      if (exits)
        rep.add(fmt::format(" {} | {} |", mib(all.exited_sharer_untouched / seeds), mib(all.copied_after_exit / seeds)));
      rep.add(fmt::format(" {} | {} | {} | {} |", mib(all.rss_peak), all.collapses / seeds, all.warnings, all.violations));
      if (frag)
        rep.add(fmt::format(" {} | {} | {} | {} | {} |", all.anon_fault_fallback / seeds, all.anon_fault_alloc / seeds,
                            all.wp_fault_fallback / seeds, all.wp_fault_alloc / seeds, all.thp_fault_fallback / seeds));
      if (w->name == "usemem") {
        const double kbps = all.child_kbps_mean / n;
        if (c->name == "base") base_kbps = kbps;
        rep.add(fmt::format(" {:.0f} | {} |", kbps, base_kbps > 0 ? fmt::format("{:+.1f}%", 100 * (kbps / base_kbps - 1)) : "-"));
      }
      rep.add("\n");
      if (!all.write_ns.empty()) {  // --no-latency: nothing to plot
        PlotSeries ser{c->name, {}};
        for (size_t i = 0; i < us.size(); i++) ser.points.push_back({static_cast<double>(i), us[i], us[i], us[i]});
        cdf.series.push_back(ser);
      }
      rep.json["workloads"][w->name][c->name] = {
          {"latency_us", {{"p50", us[0]}, {"p90", us[1]}, {"p99", us[2]}, {"p99.9", us[3]}, {"max", us[4]}}},
          {"writes", all.write_ns.size()},
          {"wp_copy", all.wp_copy / seeds},
          {"wp_reuse", all.wp_reuse / seeds},
          {"anon_faults", all.anon / seeds},
          {"zero_faults", all.zero / seeds},
          {"bytes_copied", all.bytes_copied / seeds},
          {"bytes_written", all.bytes_written / seeds},
          {"copied_never_written", all.waste() / seeds},
          {"rss_peak", all.rss_peak},
          {"collapses", all.collapses / seeds},
          {"warnings", all.warnings},
          {"violations", all.violations},
          {"child_kbps_mean", all.child_kbps_mean / n},
          {"child_kbps_sum", all.child_kbps_sum / n},
          {"elapsed_s", all.elapsed_s / n},
          {"zero_subpages_copied", all.zero_subpages / seeds},
          {"anon_fault_fallback", all.anon_fault_fallback / seeds},
          {"anon_fault_alloc", all.anon_fault_alloc / seeds},
          {"wp_fault_fallback", all.wp_fault_fallback / seeds},
          {"wp_fault_alloc", all.wp_fault_alloc / seeds},
          {"thp_fault_fallback", all.thp_fault_fallback / seeds}};
      auto& j = rep.json["workloads"][w->name][c->name];
      if (exits) {
        j["exited_sharer_untouched"] = all.exited_sharer_untouched / seeds;
        j["copied_after_exit"] = all.copied_after_exit / seeds;
      }
      if (snapshot)
        j["service_us"] = {{"p50", cowbench::percentile(all.service_ns, 0.5) / 1000},
                           {"p99", cowbench::percentile(all.service_ns, 0.99) / 1000},
                           {"max", cowbench::percentile(all.service_ns, 1.0) / 1000}};
      if (frag) j["filler_pages"] = all.filler_pages / seeds;
      if (all.khugepaged.ran) j["khugepaged"] = khugepaged_json(all.khugepaged, seeds, p.khugepaged_speedup);
      metrics.add(c->name, all.metrics, all.copies_by_order, seeds, &j);
      if (all.khugepaged.ran) rep.add(khugepaged_text(c->name, all.khugepaged, seeds, p.khugepaged_speedup));
    }
    if (w->name == "usemem")
      rep.add("\nThe series reported +9/+12/+14% usemem throughput for its mTHP CoW; compare the `vs base` column's "
              "ratios, never the absolute KB/s.\n");
    if (!cdf.series.empty()) rep.plots.push_back(cdf);
    metrics.finish(&rep);
  }
  return write_report(rep, o.out);
}

}  // namespace

void add_cow_bench(CLI::App& app) {
  auto o = std::make_shared<CowCli>();
  auto* sub = app.add_subcommand("cow-bench", "CoW latency, waste and RSS per workload and CoW policy (docs/COW_BENCH.md)");
  sub->add_flag("--quick", o->quick, "a 16 MiB region, 2 children, one seed: a run under a minute");
  sub->add_option("--workload", o->workloads,
                  "all, or a comma list of usemem, cow-rand, fork-exec, prefork, read-then-write, snapshot, fragmented");
  sub->add_option("--column", o->cols, "all, or a comma list of the columns (docs/COW_BENCH.md)");
  sub->add_option("--size", o->size, "the region (a multiple of 2M; default 64M, 16M with --quick)");
  sub->add_option("--procs", o->procs, "children of usemem and prefork (default 4, 2 with --quick)")->check(CLI::Range(1, 64));
  sub->add_option("--seeds", o->seeds, "seeds per column (default 3, 1 with --quick)")->check(CLI::Range(1, 100));
  sub->add_option("--write-fraction", o->write_fraction, "the share of pages cow-rand and prefork write (default 1/32)")
      ->check(CLI::Range(0.0001, 1.0));
  sub->add_option("--snapshot-writes", o->snapshot_writes, "snapshot: writes in the stream (default 20000, 5000 with --quick)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{10000000}));
  sub->add_option("--snapshot-rate", o->snapshot_rate, "snapshot: mean arrival rate, writes per second (default 100000)")
      ->check(CLI::Range(1.0, 1e8));
  sub->add_option("--zipf", o->zipf_s, "snapshot: the Zipf exponent of page popularity (default 0.99)")
      ->check(CLI::Range(0.0, 5.0));
  sub->add_flag("--no-latency", o->no_latency,
                "time each writer as a whole, not each page write: the run that shows the latency instrumentation "
                "does not move the throughput ratios");
  sub->add_flag("--no-sampler", o->no_sampler,
                "no RSS/PSS/TLB sampling thread: the run that shows the sampler does not move the ratios");
  sub->add_option("--geometry", o->geometry, "tune tlb.geometry in every column: off (default), x86-intel, x86-amd, arm64");
  sub->add_option("--profile", o->profile, "cost profile from `mmlab calibrate`: add modelled CoW time, apart from measured time");
  sub->add_option("--khugepaged-speedup", o->khugepaged_speedup,
                  "base-khugepaged: khugepaged's sleeps last 1/N of scan_sleep_millisecs and alloc_sleep_millisecs in "
                  "host time, so that it wakes beside a short run (default 1000)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000000}));
  sub->add_option("--out", o->out, "directory for report.md, report.json and the plots (made if missing)");
  add_trace_options(sub);
  register_action(sub, [o] { return run_cow_bench(*o); });
}

}  // namespace mmlab::cli
