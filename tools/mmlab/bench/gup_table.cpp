#include "bench/gup_table.h"

#include <fstream>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "bench/modelled.h"
#include "report/statistics.h"
#include "fmt/format.h"
#include "mmlab/tune.h"
#include "mmlab/types.h"

namespace mmlab::cli {

const Posting kBatchSeriesV5 = {
    "[v5]",
    "\"[RFC PATCH v5 0/8] batch lookups in follow_page_mask()\" (Rik van Riel), the tables in the changelogs of patches "
    "7/8 (walk) and 8/8 (batch): gup_test -L -m 256 -n 65536 -r 16 -t, median of 16, 4-CPU VM",
    "v5 of 2026-11-02 (the review quotes it as posted \"11/2/26\", month first: after v3 of 2026-08-11)", true};
const Posting kBatchV5Review = {
    "[v5 review]", "David Hildenbrand's reply to \"[PATCH 8/8] mm/gup: batch contiguous same-folio PTEs into one refcount grab\"",
    "reply to the v5 posting of 2026-11-02", true};
const Posting kUnifyHugetlb = {
    "[unify]",
    "\"[PATCH 0/7] mm/gup: Unify hugetlb, speed up thp\" (Peter Xu), cover letter: chrt -f 1 ./gup_test -m 512 -t -L -n 1024 -r 10",
    "2023-06-13 (linux-mm)", false};

double Published::speedup(const std::string& variant) const {
  for (auto& [v, us] : after_us)
    if (v == variant && us > 0) return before_us / us;
  return std::numeric_limits<double>::quiet_NaN();
}

namespace {

// "[v5] 2753 us -> walk 1178 us (2.3x), batch 1198 us (2.3x); 42.0 -> 18.0 / 18.3 ns/page"
std::string published_text(const Published& k) {
  if (!k.source) return "none published";
  std::string s = std::string(k.source->cite) + " ";
  if (k.after_us.empty()) return s + k.remark;
  s += fmt::format("{:g} us ->", k.before_us);
  std::string per_page;
  for (auto& [v, us] : k.after_us) {
    s += fmt::format("{} {} {:g} us ({:.1f}x)", &v == &k.after_us.front().first ? "" : ",", v, us, k.before_us / us);
    if (k.pages) per_page += fmt::format("{}{:.1f}", per_page.empty() ? "" : " / ", us * 1000 / static_cast<double>(k.pages));
  }
  if (k.pages) s += fmt::format("; {:.1f} -> {} ns/page", k.before_us * 1000 / static_cast<double>(k.pages), per_page);
  return s;
}

// The sources the table's kernel column cites, one line each.
std::string sources_text(const std::vector<GupRow>& rows) {
  std::vector<const Posting*> seen;
  for (auto& r : rows)
    if (r.kernel.source && std::find(seen.begin(), seen.end(), r.kernel.source) == seen.end()) seen.push_back(r.kernel.source);
  std::string s;
  for (auto* p : seen)
    s += fmt::format("- {} {}; {}{}\n", p->cite, p->what, p->date,
                     p->seed_only ? "; seed only: known to this project from its copy of the posting, not from a public "
                                    "archive a reader can check"
                                  : "");
  return s.empty() ? "" : "\nkernel column:\n\n" + s;
}

nlohmann::ordered_json published_json(const Published& k) {
  if (!k.source) return nullptr;
  nlohmann::ordered_json after = nlohmann::ordered_json::object();
  for (auto& [v, us] : k.after_us) after[v] = us;
  return {{"source", k.source->what}, {"date", k.source->date}, {"seed_only", k.source->seed_only},
          {"before_us", k.after_us.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(k.before_us)}, {"after_us", after},
          {"remark", k.remark}};
}

}  // namespace

int run_rows(const std::string& title, std::vector<GupRow>& rows, const std::string& base_variant, Report* rep,
             const std::string& key, std::vector<RowResult>* out) {
  rep->add(fmt::format("\n## {}\n\n", title));
  rep->add("The first repeat of each variant is a warm-up, discarded (with one repeat, nothing is); n counts the rest, "
           "and flags samples beyond Tukey's far-out fences (Q1 - 3 IQR, Q3 + 3 IQR) as outliers. The speedup and the "
           "difference are the same statistic, the ratio of median get times, with a 95% bootstrap interval "
           "(paired over the alternated repeats), marked '*' where it leaves out 1 (significant); with fewer than " + std::to_string(kMinCiSamples) +
           " samples a side there is none (\"n/a (n<" + std::to_string(kMinCiSamples) + ")\"): so few cannot give a 95% interval. "
           "x floor: the median get time over the median time of the physical floor, a plain loop over the same "
           "range that reads each leaf entry and stores its page (no lock, no reference, no check): how far the "
           "variant is above the least work any GUP of the range must do (1.0x would be that loop).\n\n");
  rep->add("| case | variant | n | median get us | median put us | get speedup vs the row's base"
           " | diff (95% CI) | ns/page | x floor | descents/page | PTE locks/page | grabs/page | mark_accessed/page | flushes/page | speculative/page | host faults | kernel |\n"
           "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::vector<PinRow> pins;
  std::vector<ModelledGup> modelled;
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
    std::string base_name;
    RowResult rr;
    rr.region_pages = res.region_pages;
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
      std::string vname = v.substr(v.find('=') + 1);
      if (is_base) {
        base = sg;
        base_g = g;
        base_name = vname;
        rr.base = rr.variants.size();
      }
      rr.variants.push_back({vname, g});
      for (auto& it : res.iters)
        if (it.variant == v) {
          modelled.push_back({row.label, vname, it.cost_counts, is_base, row.kernel.speedup(vname)});
          break;
        }
      const RatioCi speedup = median_ratio_ci(base_g, g);
      const long outliers = count_outliers(g);
      if (g.size() >= 4) rep->spreads.push_back(relative_iqr(g));  // fewer samples have no quartiles
      const std::string diff = is_base ? std::string("-") : diff_ci_text(speedup);
      double pages = static_cast<double>(res.region_pages) * static_cast<double>(g.size());
      auto per = [&](const char* c) { return pages ? ctr[c] / pages : 0.0; };
      double floor_med = median_of(fl);
      const long host = static_cast<long>(median_of(hf));
      rep->add(fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {} | {} | {:.2f} | {} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.3f} | {:.4f} | {}{} | {} |\n",
                           row.label, vname,
                           outliers ? fmt::format("{} ({} outlier{})", sg.n, outliers, outliers > 1 ? "s" : "") : std::to_string(sg.n),
                           sg.median, median_of(p),
                           is_base ? std::string("1.00x (base)") : fmt::format("{:.2f}x vs {}", speedup.ratio, base_name), diff, sg.median * 1000.0 / static_cast<double>(res.region_pages),
                           floor_med > 0 ? fmt::format("{:.1f}x", sg.median / floor_med) : std::string("-"),
                           per("gup.descents"), per("gup.pte_lock"), per("gup.grab"), per("gup.mark_accessed"),
                           per("gup.cache_flush"), per("gup.fast_speculative"), host,
                           first_touch_note(host, res.region_pages),
                           &v == &res.variants.front() ? published_text(row.kernel) : std::string()));
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
                                          {"speedup_ci95", ci_json(speedup)},
                                          {"folios_by_size", res.folios_by_size}, {"counters_total", ctr}};
    }
    if (row.pin_folio) pins.push_back({row.label, row.pin_folio, res.region_pages});
    rep->json["kernel_figures"][key][row.label] = published_json(row.kernel);
    if (out) out->push_back(std::move(rr));
  }
  progress_done();
  rep->add(sources_text(rows));
  if (rep->profile && !pins.empty()) modelled_pins(pins, key, rep);
  if (rep->profile) modelled_gup(modelled, key, rep);
  return 0;
}

PlotPoint speedup_point(double x, const std::vector<double>& base, const std::vector<double>& v) {
  const double mb = median_of(base);
  const Quartiles q = quartiles_of(v);
  PlotPoint p;
  p.x = x;
  p.y = q.median > 0 ? mb / q.median : 0;
  p.lo = q.q3 > 0 ? mb / q.q3 : 0;  // the slower quartile is the smaller speedup
  p.hi = q.q1 > 0 ? mb / q.q1 : 0;
  return p;
}

namespace {

// Registration order of a variant value among its key's (gup.walk, then gup.fast).
size_t variant_rank(const std::string& name) {
  size_t rank = 0;
  for (const char* key : {"gup.walk", "gup.fast"}) {
    const std::vector<std::string> vals = tune_values(key);
    auto it = std::find(vals.begin(), vals.end(), name);
    if (it != vals.end()) return rank + static_cast<size_t>(it - vals.begin());
    rank += vals.size();
  }
  return rank;
}

}  // namespace

Plot speedup_bars(const std::string& file, const std::string& title, const std::vector<GupRow>& rows,
                  const std::vector<RowResult>& results) {
  Plot p;
  p.file = file;
  p.title = title;
  p.ratio = true;
  p.xlabel = "case";
  p.ylabel = "get-time speedup vs the row's base (median ratio; bars: IQR)";
  // The first series is the rows' base, grey. Where the rows have
  // different bases (unify: v6.5 on THP, legacy on hugetlb), it is one
  // series holding each row's base, titled with their names, so that no
  // row's base takes a variant's colour; a variant that is one row's base
  // and another's variant (legacy) then has its own series for the latter.
  std::vector<std::string> bases;
  for (auto& r : results)
    if (std::find(bases.begin(), bases.end(), r.variants[r.base].name) == bases.end()) bases.push_back(r.variants[r.base].name);
  std::string base_title = bases.size() == 1 ? bases.front() : "the row's base: ";
  for (size_t i = 0; bases.size() > 1 && i < bases.size(); i++) base_title += (i ? ", " : "") + bases[i];
  std::vector<std::string> names;  // the variants other than a row's base, by registration
  for (auto& r : results)
    for (auto& v : r.variants)
      if (&v != &r.variants[r.base] && (bases.size() > 1 || v.name != bases.front()) &&
          std::find(names.begin(), names.end(), v.name) == names.end())
        names.push_back(v.name);
  std::stable_sort(names.begin(), names.end(),
                   [](const std::string& a, const std::string& b) { return variant_rank(a) < variant_rank(b); });
  if (!results.empty()) p.series.push_back({base_title, {}});
  for (auto& n : names) p.series.push_back({n, {}});
  for (size_t i = 0; i < results.size(); i++) {
    p.categories.push_back(rows[i].plot_label.empty() ? rows[i].label : rows[i].plot_label);
    const auto& r = results[i];
    for (auto& v : r.variants) {
      const bool is_base = &v == &r.variants[r.base];
      const size_t s = is_base ? 0 : 1 + static_cast<size_t>(std::find(names.begin(), names.end(), v.name) - names.begin());
      PlotPoint pt = speedup_point(static_cast<double>(i), r.variants[r.base].get_us, v.get_us);
      if (!is_base) pt.published = rows[i].kernel.speedup(v.name);
      p.series[s].points.push_back(pt);
    }
  }
  return p;
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

std::vector<std::string> variants_from_default(const std::string& key) {
  std::vector<std::string> all = tune_values(key);
  auto from = std::find(all.begin(), all.end(), tune_default(key));
  return {from == all.end() ? all.begin() : from, all.end()};
}

void walk_variants(GupBenchConfig* c, std::vector<std::string> vs) {
  for (auto& v : vs) c->variants.push_back({"gup.walk", v});
}

std::string model_footprint_text(uint64_t mb) {
  std::string llc;
  for (const char* idx : {"index3", "index2"}) {
    std::ifstream in(std::string("/sys/devices/system/cpu/cpu0/cache/") + idx + "/size");
    if (in >> llc) break;
  }
  return fmt::format("{} MiB of struct pages and PTEs for {} MiB of 4K pages{}", mb * 72 / 4096, mb,
                     llc.empty() ? "" : ", against this CPU's " + llc + " last-level cache");
}

}  // namespace mmlab::cli
