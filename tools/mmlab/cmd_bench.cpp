// `mmlab bench`: mmlab's main job. Runs the standard suites and prints
// their tables (and writes them as Markdown and JSON into --out):
//   fault     fault-in of a region with 4K, 64K and 2M folios (the foundation),
//             zeroing and bookkeeping apart (bench_model.cpp)
//   fork      fork of a populated region, then CoW faults, per folio size
//   data      bulk loads and stores through the CPU model beside native passes
//   corpus    a fixed subset of cow.mms on the model and on the host kernel
//   gup       gup-batch-follow-page-mask v5's tables (patches 7 and 8):
//             gup_test -L -m 256 -n 65536 -r 16 -t on 4K, 64K mTHP and 2M THP,
//             legacy / walk / batch / batch-ro interleaved per repeat
//   unify     gup-unify-hugetlb-speed-up-thp: -m 512 -t -L -n 1024, v6.5 vs legacy
//   fast      GUP-fast (-u, -a) on 64K mTHP, gup.fast legacy vs batch
//   ro-pin    R/O long-term pins of read-only 64K mTHP: batch vs batch-ro
//   sweep     pages per call 1, 16, 64, 123, 512 and the whole region
//   scaling   GUP time per page from 4 MiB to 4 GiB, with a linear fit
//   threads   two threads pinning disjoint halves against one thread
//   collapse  MADV_COLLAPSE of 256 MiB of 4K pages and of 64K mTHPs: time per
//             2M, the copy's share, mmap_lock write-hold time, bytes copied
//             (bench_model.cpp)
// Every GUP row also shows the physical floor: a plain loop reading the
// entries and filling pages[] for the same request.
// With --profile (a cost profile from `mmlab calibrate`), the fault, fork,
// gup and ro-pin suites add "modelled" tables: the model's event counts
// times the host's measured cost per event. They stay apart from the
// measured tables (and under "modelled" in the JSON).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_report.h"
#include "commands.h"
#include "fmt/format.h"
#include "gup_bench.h"
#include "mmlab/calibrate.h"
#include "mmlab/system.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {
namespace {

void modelled_heading(const std::string& what, Report* rep) {
  rep->add(fmt::format("\n### modelled (profile {}): {}\n\n", rep->profile->name, what));
}

// A long-term pin row: its pages x the host's per-page cost of io_uring
// buffer registration (and unregistration, for the put) at the row's folio
// size. The host pins with FOLL_WRITE whatever the row asks.
struct PinRow {
  std::string label, folio;
  uint64_t pages;
};

void modelled_pins(const std::vector<PinRow>& rows, const std::string& key, Report* rep) {
  modelled_heading("long-term pin = pages x host io_uring buffer (un)registration ns/page at the row's folio size "
                   "(pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM))", rep);
  rep->add("| case | pages | host register ns/page | host buffer MiB | modelled get us | host unregister ns/page | modelled put us |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
  bool extrapolated = false;
  for (auto& r : rows) {
    const host::PinCost* pc = rep->profile->pin_cost(folio_bytes_of(r.folio));
    auto& j = rep->json["modelled"][key][r.label];
    j["pages"] = r.pages;
    if (!pc) {
      rep->add(fmt::format("| {} | {} | n/a | n/a | n/a | n/a | n/a |\n", r.label, r.pages));
      j["modelled_get_us"] = nullptr;
      continue;
    }
    double pages = static_cast<double>(r.pages);
    bool other_size = r.pages * PAGE_SIZE != pc->bytes;  // scaled linearly from the host's buffer
    extrapolated |= other_size;
    rep->add(fmt::format("| {} | {} | {:.2f} | {}{} | {:.1f} | {:.2f} | {:.1f} |\n", r.label, r.pages, pc->register_ns_per_4k,
                         pc->bytes >> 20, other_size ? " *" : "", pages * pc->register_ns_per_4k / 1e3,
                         pc->unregister_ns_per_4k, pages * pc->unregister_ns_per_4k / 1e3));
    j["extrapolated"] = other_size;
    j["host_register_ns_per_page"] = pc->register_ns_per_4k;
    j["host_unregister_ns_per_page"] = pc->unregister_ns_per_4k;
    j["host_buffer_bytes"] = pc->bytes;
    j["modelled_get_us"] = pages * pc->register_ns_per_4k / 1e3;
    j["modelled_put_us"] = pages * pc->unregister_ns_per_4k / 1e3;
  }
  if (extrapolated)
    rep->add("\n\\* the host measured another size: scaled linearly, but the host's cost per page grows with the buffer\n");
}

// ---- GUP suites over the gup_test engine ----

struct Stat {
  long n = 0;
  double median = 0, mean = 0, stddev = 0;
};
Stat stat_of(const std::vector<double>& v) {
  Stat s;
  s.n = static_cast<long>(v.size());
  if (v.empty()) return s;
  s.median = median_of(v);
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0;
  return s;
}
// ministat-style: the difference of means and its 95% confidence half-width (Welch, normal approx).
std::string diff_ci(const Stat& a, const Stat& b) {
  if (a.n < 2 || b.n < 2 || a.mean == 0) return "-";
  double d = b.mean - a.mean;
  double hw = 1.96 * std::sqrt(a.stddev * a.stddev / static_cast<double>(a.n) + b.stddev * b.stddev / static_cast<double>(b.n));
  return fmt::format("{:+.1f}% ± {:.1f}%", 100 * d / a.mean, 100 * hw / a.mean);
}

struct GupRow {
  std::string label;
  GupBenchConfig cfg;
  const char* kernel_note = "";  // the series' published figure for this row
  const char* pin_folio = nullptr;  // a long-term pin of the whole region at this folio size: modelled with --profile
};

int run_rows(const std::string& title, std::vector<GupRow> rows, const std::string& base_variant, Report* rep,
             const std::string& key) {
  rep->add(fmt::format("\n## {}\n\n", title));
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
    for (auto& v : res.variants) {
      std::vector<double> g, p, fl, hf;
      std::map<std::string, double> ctr;
      for (auto& it : res.iters)
        if (it.variant == v) {
          g.push_back(it.get_us);
          p.push_back(it.put_us);
          hf.push_back(static_cast<double>(it.host_faults));
          if (it.floor_us >= 0) fl.push_back(it.floor_us);
          for (auto& [c, n] : it.counters) ctr[c] += static_cast<double>(n);
        }
      Stat sg = stat_of(g);
      if (v.find(base_variant) != std::string::npos || base.n == 0) base = sg;
      double pages = static_cast<double>(res.region_pages) * static_cast<double>(g.size());
      auto per = [&](const char* c) { return pages ? ctr[c] / pages : 0.0; };
      std::string vname = v.substr(v.find('=') + 1);
      double floor_med = median_of(fl);
      const long host = static_cast<long>(median_of(hf));
      rep->add(fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f}x | {} | {:.2f} | {} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.3f} | {:.4f} | {}{} | {} |\n",
                           row.label, vname, sg.n, sg.median, median_of(p), sg.median > 0 ? base.median / sg.median : 0.0,
                           &v == &res.variants.front() ? "-" : diff_ci(base, sg), sg.median * 1000.0 / static_cast<double>(res.region_pages),
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

int suite_gup(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  std::vector<GupRow> rows;
  // The series' figures (256 MiB, 65536 pages per call) and their ns per page.
  const std::pair<const char*, const char*> folios[] = {
      {"4K", "2753 -> 1178 us walk (2.3x), 1198 batch; 42.0 -> 18.0 ns/page"},
      {"64K", "2946 -> 1361 us walk (2.2x), 231 batch (12.8x); 45.0 -> 20.8 / 3.5 ns/page"},
      {"2M", "72 -> 70/71 us (flat); 1.10 -> 1.08 ns/page"}};
  for (auto& [f, note] : folios) {
    GupBenchConfig c = longterm(mb, -1, r, f);
    walk_variants(&c, {"legacy", "walk", "batch", "batch-ro"});
    rows.push_back({fmt::format("{} -L -m {} -n {}", f, mb, c.nr_per_call), c, note, f});
  }
  return run_rows("gup-batch-follow-page-mask v5, patches 7 and 8: pin_user_pages(FOLL_LONGTERM), whole region per call",
                  rows, "legacy", rep, "gup");
}

int suite_unify(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 512);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 10);
  GupBenchConfig thp = longterm(mb, 1024, r, "2M");
  walk_variants(&thp, {"v6.5", "legacy"});
  GupBenchConfig ht = longterm(mb, 1024, r, "2M");
  ht.hugetlb = true;
  ht.thp = 0;
  walk_variants(&ht, {"legacy", "batch"});
  return run_rows("gup-unify-hugetlb-speed-up-thp: -m " + std::to_string(mb) + " -t -L -n 1024 (THP: before/after; hugetlb through the generic walk)",
                  {{"2M THP", thp, "13992 -> 378 us (37x); 106.8 -> 2.89 ns/page"}, {"2M hugetlb", ht, "-"}}, "v6.5", rep, "unify");
}

int suite_fast(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  std::vector<GupRow> rows;
  for (auto cmd : {GupCmd::kGupFast, GupCmd::kPinFast}) {
    for (const char* f : {"4K", "64K"}) {
      GupBenchConfig c = longterm(mb, -1, r, f);
      c.cmd = cmd;
      c.variants = {{"gup.fast", "legacy"}, {"gup.fast", "batch"}};
      rows.push_back({fmt::format("{} {} -n whole", f, cmd == GupCmd::kGupFast ? "-u" : "-a"), c, "no published figures"});
    }
  }
  return run_rows("GUP-fast: one speculative reference per PTE (legacy) or per same-folio run (batch)", rows, "legacy", rep, "fast");
}

int suite_ro_pin(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  GupBenchConfig c = longterm(mb, -1, r, "64K");
  c.gup_flags = 0;  // -W: read-only
  c.protect_read = true;
  walk_variants(&c, {"legacy", "batch", "batch-ro"});
  return run_rows("R/O long-term pin of read-only 64K mTHP (mprotect(PROT_READ) after pre-faulting): batch vs batch-ro",
                  {{"64K -L -W", c, "review of patch 8: 'needs more work'", "64K"}}, "legacy", rep, "ro_pin");
}

int suite_sweep(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 32 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 8);
  std::vector<GupRow> rows;
  for (const char* f : {"4K", "64K"}) {
    for (long n : {1L, 16L, 64L, 123L, 512L, -1L}) {
      GupBenchConfig c = longterm(mb, n, r, f);
      walk_variants(&c, {"legacy", "batch"});
      rows.push_back({fmt::format("{} -L -n {}", f, n < 0 ? std::string("whole") : std::to_string(n)), c, ""});
    }
  }
  return run_rows("pages per call (real callers pin a few pages per call)", rows, "legacy", rep, "sweep");
}

// Cost as the work grows: GUP time per page over region sizes, with a
// least-squares fit of get time against pages (linear is the expectation).
int suite_scaling(const BenchOptions& o, Report* rep) {
  std::vector<uint64_t> sizes = o.quick ? std::vector<uint64_t>{4, 16, 64} : std::vector<uint64_t>{4, 16, 64, 256, 1024, 4096};
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  rep->add("\n## scaling: pin_user_pages(FOLL_LONGTERM) of the whole region, per region size\n\n");
  rep->add("| folio | variant | sizes (MiB) | ns/page per size | fit: us = a + b * pages | R^2 |\n|---|---|---|---|---|---:|\n");
  for (const char* f : {"4K", "64K", "2M"}) {
    for (const char* v : {"legacy", "batch"}) {
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
        xs.push_back(static_cast<double>(res.region_pages));
        ys.push_back(m);
        per += fmt::format("{}{:.2f}", per.empty() ? "" : " / ", m * 1000.0 / static_cast<double>(res.region_pages));
        rep->json["scaling"][f][v][std::to_string(mb)] = g;
      }
      double n = static_cast<double>(xs.size()), sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
      for (size_t i = 0; i < xs.size(); i++) {
        sx += xs[i];
        sy += ys[i];
        sxx += xs[i] * xs[i];
        sxy += xs[i] * ys[i];
        syy += ys[i] * ys[i];
      }
      double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
      double rr = (n * sxy - sx * sy) * (n * sxy - sx * sy) / ((n * sxx - sx * sx) * (n * syy - sy * sy));
      std::string mbs;
      for (uint64_t mb : sizes) mbs += (mbs.empty() ? "" : ", ") + std::to_string(mb);
      rep->add(fmt::format("| {} | {} | {} | {} | {:.1f} + {:.2f} ns * pages | {:.4f} |\n", f, v, mbs, per, a, b * 1000.0, rr));
    }
  }
  progress_done();
  return 0;
}

// Split PTE locks should let two threads pinning disjoint ranges of one
// process scale: 1 thread over the region against 2 threads over its halves.
int suite_threads(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  rep->add(fmt::format("\n## two threads pinning disjoint halves of {} MiB against one thread pinning all of it (get time of the slower thread)\n\n", mb));
  rep->add("| folio | variant | 1 thread us | 2 threads us | speedup |\n|---|---|---:|---:|---:|\n");
  for (const char* f : {"4K", "64K"}) {
    for (const char* v : {"legacy", "batch"}) {
      double wall[2];
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
        for (auto& it : res.iters) per_round[it.repeat] = std::max(per_round[it.repeat], it.get_us);
        std::vector<double> w;
        for (auto& [rnd, us] : per_round) w.push_back(us);
        wall[t - 1] = median_of(w);
        rep->json["threads"][f][v][std::to_string(t)] = w;
      }
      rep->add(fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.2f}x |\n", f, v, wall[0], wall[1], wall[0] / wall[1]));
    }
  }
  progress_done();
  return 0;
}

std::string environment_text(nlohmann::json* env) {
  std::string cpu = "unknown";
  std::ifstream ci("/proc/cpuinfo");
  for (std::string line; std::getline(ci, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  std::string kernel;
  std::ifstream kv("/proc/sys/kernel/osrelease");
  std::getline(kv, kernel);
  std::string thp;
  std::ifstream th("/sys/kernel/mm/transparent_hugepage/enabled");
  std::getline(th, thp);
  (*env)["cpu"] = cpu;
  (*env)["host_kernel"] = kernel;
  (*env)["host_thp"] = thp;
  (*env)["nproc"] = sysconf(_SC_NPROCESSORS_ONLN);
  (*env)["build"] = build_description();
  (*env)["commit"] = build_commit();
  (*env)["profile"] = "baseline v6.18 defaults; gup.walk/gup.fast variants as listed per row; classic LRU";
  (*env)["frame_store"] = kFrameStorePreparation;
  return fmt::format("CPU: {} ({} cores); host kernel {}; host THP {}\nframe store: {}\nbuild: {} (commit {})\n", cpu,
                     sysconf(_SC_NPROCESSORS_ONLN), kernel, thp, kFrameStorePreparation, build_description(), build_commit());
}

// Where the modelled tables' host costs come from.
std::string profile_text(const host::CostProfile& p, const std::string& file, nlohmann::json* j) {
  *j = {{"name", p.name}, {"file", file}, {"date", p.date}, {"cpu", p.machine.cpu}, {"kernel", p.machine.kernel},
        {"commit", p.commit}};
  return fmt::format("modelled tables: profile {} ({}; {}, kernel {}; {}): the model's counts x the host's cost per event, "
                     "not measured here\n", p.name, file, p.machine.cpu, p.machine.kernel, p.date);
}

// One bar chart per GUP suite (median get time per case and variant), drawn
// with gnuplot when it is installed. Returns ", <files>" for the summary line.
std::string write_plots(const nlohmann::json& j, const std::string& dir) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) return " (gnuplot not installed: no plots)";
  std::string made;
  for (const char* suite : {"gup", "unify", "fast", "ro_pin", "sweep"}) {
    if (!j.contains(suite)) continue;
    std::string dat = dir + "/" + suite + ".dat", gp = dir + "/" + suite + ".gp", png = dir + "/" + suite + ".png";
    std::ofstream d(dat);
    std::vector<std::string> variants;
    for (auto& [label, per] : j[suite].items())
      for (auto& [v, x] : per.items())
        if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
    d << "case";
    for (auto& v : variants) d << " " << v;
    d << "\n";
    for (auto& [label, per] : j[suite].items()) {
      std::string l = label;
      std::replace(l.begin(), l.end(), ' ', '_');
      d << '"' << l << '"';
      for (auto& v : variants) d << " " << (per.contains(v) ? per[v]["median_get_us"].get<double>() : 0.0);
      d << "\n";
    }
    std::ofstream g(gp);
    g << "set terminal pngcairo size 1200,600 noenhanced\nset output '" << png << "'\nset style data histogram\n"
      << "set style histogram cluster gap 1\nset style fill solid border -1\nset logscale y\n"
      << "set ylabel 'median get time per call (us, log)'\nset xtics rotate by -20\nset key outside\n"
      << "set title 'mmlab bench: " << suite << "'\nplot for [i=2:" << variants.size() + 1 << "] '" << dat
      << "' using i:xtic(1) title columnheader\n";
    g.close();
    d.close();
    if (std::system(("gnuplot '" + gp + "' > /dev/null 2>&1").c_str()) == 0) made += ", " + png;
  }
  return made;
}

int run_bench(const BenchOptions& o) {
  if (build_is_instrumented()) {
    std::fprintf(stderr, "mmlab bench: refusing to report timings from a debug or sanitizer build; build the release preset\n");
    return 2;
  }
  static const std::pair<const char*, int (*)(const BenchOptions&, Report*)> kSuites[] = {
      {"fault", suite_fault}, {"fork", suite_fork}, {"data", suite_data}, {"gup", suite_gup}, {"unify", suite_unify},
      {"fast", suite_fast},   {"ro-pin", suite_ro_pin}, {"sweep", suite_sweep},
      {"scaling", suite_scaling}, {"threads", suite_threads}, {"collapse", suite_collapse}, {"corpus", suite_corpus}};
  std::vector<std::string> chosen = o.suites;
  if (chosen.empty())
    for (auto& [n, f] : kSuites) chosen.push_back(n);
  Report rep;
  host::CostProfile profile;
  if (!o.profile.empty()) {
    std::string err;
    if (host::load_cost_profile(o.profile, &profile, &err)) {
      std::fprintf(stderr, "mmlab bench: --profile: %s\n", err.c_str());
      return 2;
    }
    rep.profile = &profile;
  }
  rep.add("# mmlab bench\n\n");
  rep.add(environment_text(&rep.json["environment"]));
  if (rep.profile) rep.add(profile_text(profile, o.profile, &rep.json["modelled"]["profile"]));
  struct rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  for (auto& name : chosen) {
    bool found = false;
    for (auto& [n, f] : kSuites)
      if (name == n) {
        found = true;
        if (int e = f(o, &rep)) return e;
      }
    if (!found) {
      std::fprintf(stderr, "mmlab bench: no suite named %s\n", name.c_str());
      return 2;
    }
  }
  struct rusage ru1;
  getrusage(RUSAGE_SELF, &ru1);
  long ivcsw = ru1.ru_nivcsw - ru0.ru_nivcsw;
  rep.json["environment"]["involuntary_context_switches"] = ivcsw;
  if (ivcsw > 1000) rep.add(fmt::format("\nwarning: noisy run: {} involuntary context switches\n", ivcsw));
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  std::ofstream md(o.out + "/report.md");
  md << rep.text;
  std::ofstream js(o.out + "/report.json");
  js << rep.json.dump(2) << "\n";
  if (!md || !js) {
    std::fprintf(stderr, "mmlab bench: cannot write into %s\n", o.out.c_str());
    return 1;
  }
  std::string plots = write_plots(rep.json, o.out);
  std::printf("\nreport: %s/report.md, %s/report.json%s\n", o.out.c_str(), o.out.c_str(), plots.c_str());
  return 0;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("bench", "run the benchmark report (mmlab's main job)");
  sub->add_flag("--quick", o->quick, "smaller regions and fewer repeats: a run under a minute");
  sub->add_option("--size-mb", o->size_mb, "region size in MiB for every suite")->check(CLI::Range(4, 65536));
  sub->add_option("--repeats", o->repeats, "repeats per variant")->check(CLI::Range(1, 1000));
  sub->add_option("--suite", o->suites,
                  "suites to run: fault, fork, data, gup, unify, fast, ro-pin, sweep, scaling, threads, collapse, corpus "
                  "(default: all)");
  sub->add_option("--corpus", o->corpus, "scenario file of the corpus suite (default: the source tree's tests/scenarios/cow.mms)");
  sub->add_option("--out", o->out, "directory for report.md and report.json");
  sub->add_option("--profile", o->profile, "cost profile from `mmlab calibrate`: add modelled-time tables")->check(CLI::ExistingFile);
  register_action(sub, [o] { return run_bench(*o); });
}

}  // namespace mmlab::cli
