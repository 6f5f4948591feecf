#include "bench_gup_table.h"

#include <cstdio>
#include <map>

#include "bench_modelled.h"
#include "bench_stats.h"
#include "fmt/format.h"
#include "mmlab/types.h"

namespace mmlab::cli {

int run_rows(const std::string& title, std::vector<GupRow> rows, const std::string& base_variant, Report* rep,
             const std::string& key) {
  rep->add(fmt::format("\n## {}\n\n", title));
  rep->add("The first repeat of each variant is a warm-up, discarded (with one repeat, nothing is); n counts the rest, "
           "and flags samples beyond Tukey's far-out fences (Q1 - 3 IQR, Q3 + 3 IQR) as outliers. The speedup and the "
           "difference are the same statistic, the ratio of median get times, with a 95% bootstrap interval "
           "(paired over the alternated repeats).\n\n");
  rep->add("| case | variant | n | median get us | median put us | get vs " + base_variant +
           " | diff (95% CI) | ns/page | x floor | descents/page | PTE locks/page | grabs/page | mark_accessed/page | flushes/page | speculative/page | host faults | kernel |\n"
           "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::vector<PinRow> pins;
  for (auto& row : rows) {
    progress(row.label);
    GupBenchResult res;
    row.cfg.quiet = true;
    row.cfg.floor = true;
    int err = run_gup_bench(row.cfg, &res, [](const std::string&) {});
    if (err) {
      progress_done();
      std::fprintf(stderr, "mmlab bench: %s: %s\n", row.label.c_str(), res.error.c_str());
      return 1;
    }
    Stat base;
    std::vector<double> base_g;
    const long warmup = row.cfg.repeats > 1 ? 1 : 0;  // repeats discarded per variant
    for (auto& v : res.variants) {
      std::vector<double> g, p, fl, hf;
      std::map<std::string, double> ctr;
      for (auto& it : res.iters)
        if (it.variant == v && it.repeat >= warmup) {
          g.push_back(it.get_us);
          p.push_back(it.put_us);
          hf.push_back(static_cast<double>(it.host_faults));
          if (it.floor_us >= 0) fl.push_back(it.floor_us);
          for (auto& [c, n] : it.counters) ctr[c] += static_cast<double>(n);
        }
      Stat sg = stat_of(g);
      const bool is_base = v.find(base_variant) != std::string::npos || base.n == 0;
      if (is_base) {
        base = sg;
        base_g = g;
      }
      const RatioCi speedup = median_ratio_ci(base_g, g);
      const long outliers = count_outliers(g);
      if (g.size() >= 4) rep->spreads.push_back(relative_iqr(g));  // fewer samples have no quartiles
      std::string diff = "-";
      if (!is_base && speedup.valid)  // v's median against base's: 1/ratio - 1, and the interval's ends swapped
        diff = fmt::format("{:+.1f}% [{:+.1f}%, {:+.1f}%]", 100 * (1 / speedup.ratio - 1), 100 * (1 / speedup.hi - 1),
                           100 * (1 / speedup.lo - 1));
      double pages = static_cast<double>(res.region_pages) * static_cast<double>(g.size());
      auto per = [&](const char* c) { return pages ? ctr[c] / pages : 0.0; };
      std::string vname = v.substr(v.find('=') + 1);
      double floor_med = median_of(fl);
      const long host = static_cast<long>(median_of(hf));
      rep->add(fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f}x | {} | {:.2f} | {} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.3f} | {:.4f} | {}{} | {} |\n",
                           row.label, vname,
                           outliers ? fmt::format("{} ({} outlier{})", sg.n, outliers, outliers > 1 ? "s" : "") : std::to_string(sg.n),
                           sg.median, median_of(p), speedup.ratio, diff, sg.median * 1000.0 / static_cast<double>(res.region_pages),
                           floor_med > 0 ? fmt::format("{:.1f}x", sg.median / floor_med) : std::string("-"),
                           per("gup.descents"), per("gup.pte_lock"), per("gup.grab"), per("gup.mark_accessed"),
                           per("gup.cache_flush"), per("gup.fast_speculative"), host,
                           first_touch_note(host, res.region_pages), row.kernel_note));
      if (&v == &res.variants.back()) {
        std::string fs;
        for (auto& [sz, n] : res.folios_by_size) fs += fmt::format("{}{} x {}", fs.empty() ? "" : ", ", n, sz);
        rep->add(fmt::format("|  | folios obtained (anon_fault_alloc): {} |  |  |  |  |  |  |  |  |  |  |  |  |  |  |  |\n",
                             fs.empty() ? std::string("4K pages only") : fs));
      }
      rep->json[key][row.label][vname] = {{"get_us", g}, {"put_us", p}, {"median_get_us", sg.median}, {"floor_us", fl},
                                          {"mean_get_us", sg.mean}, {"stddev_get_us", sg.stddev},
                                          {"warmup_discarded", warmup}, {"outliers", outliers},
                                          {"relative_iqr_get", relative_iqr(g)}, {"speedup_median_ratio", speedup.ratio},
                                          {"speedup_ci95", speedup.valid ? nlohmann::json::array({speedup.lo, speedup.hi}) : nlohmann::json()},
                                          {"folios_by_size", res.folios_by_size}, {"counters_total", ctr}};
    }
    if (row.pin_folio) pins.push_back({row.label, row.pin_folio, res.region_pages});
  }
  progress_done();
  if (rep->profile && !pins.empty()) modelled_pins(pins, key, rep);
  return 0;
}

GupBenchConfig longterm(uint64_t mb, long n, long r, const std::string& folio) {
  GupBenchConfig c;
  c.size = mb << 20;
  c.cmd = GupCmd::kPinLongterm;
  c.nr_per_call = n < 0 ? static_cast<long>(c.size / 4096) : n;
  c.repeats = r;
  c.thp = 1;
  c.gup_flags = 1;  // FOLL_WRITE, the tool's default
  if (folio == "4K") c.sysfs.push_back({"transparent_hugepage/hugepages-2048kB/enabled", "never"});
  if (folio == "64K") {
    c.sysfs.push_back({"transparent_hugepage/hugepages-2048kB/enabled", "never"});
    c.sysfs.push_back({"transparent_hugepage/hugepages-64kB/enabled", "always"});
  }
  return c;
}

void walk_variants(GupBenchConfig* c, std::vector<std::string> vs) {
  for (auto& v : vs) c->variants.push_back({"gup.walk", v});
}

}  // namespace mmlab::cli
