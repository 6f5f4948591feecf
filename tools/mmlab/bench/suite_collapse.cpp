// The collapse suite: MADV_COLLAPSE of 4K pages and of 64K mTHPs: time per
// 2M, the copy's share, mmap_lock write-hold time, bytes copied.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/model_common.h"
#include "bench/modelled.h"
#include "report/report.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"
#include "mmlab/system.h"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names
// (with the same values).
#include <sys/mman.h>

namespace mmlab::cli {

namespace {

struct CollapseSample {
  double us_per_2m = 0, copy_us_per_2m = 0, copy_share = 0, write_hold_us = 0;
  int64_t bytes_copied = 0, collapses = 0;
};

// Fault `size` in with folios of one size, then MADV_COLLAPSE it one PMD at
// a time. The System's collapse timing splits collapse_huge_page() into its
// mmap_lock write-held part and the copy.
CollapseSample collapse_once(const FolioCase& c, uint64_t size, int* err) {
  SystemConfig cfg;
  cfg.ram_bytes = round_up(size * 2 + (256ull << 20), 4ull << 20);
  cfg.host_thp = HostThp::kHugepage;
  auto sys = System::create(cfg, err);
  if (!sys) return {};
  if (c.sysfs_dir) sys->sysfs_write(std::string("transparent_hugepage/") + c.sysfs_dir + "/enabled", "always");
  Process* p = sys->new_process("bench");
  long raw = p->mmap(0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  const uint64_t addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
  if (p->madvise(addr, size, MADV_POPULATE_WRITE)) {
    *err = -ENOMEM;
    return {};
  }
  sys->reset_counters();
  const CollapseTiming t0 = sys->collapse_timing();
  const auto w0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < size; off += PMD_SIZE) {
    if (int r = p->madvise(addr + off, PMD_SIZE, MADV_COLLAPSE)) {
      *err = r;
      return {};
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const CollapseTiming t1 = sys->collapse_timing();
  CollapseSample s;
  s.collapses = static_cast<int64_t>(t1.collapsed - t0.collapsed);
  s.us_per_2m = wall * 1e6 / static_cast<double>(size / PMD_SIZE);
  const double total = static_cast<double>(t1.total_ns - t0.total_ns);
  s.copy_share = total > 0 ? static_cast<double>(t1.copy_ns - t0.copy_ns) / total : 0;
  s.copy_us_per_2m = static_cast<double>(t1.copy_ns - t0.copy_ns) / 1e3 / static_cast<double>(size / PMD_SIZE);
  const uint64_t locked = t1.write_locked - t0.write_locked;
  s.write_hold_us = locked ? static_cast<double>(t1.mmap_write_ns - t0.mmap_write_ns) / 1e3 / static_cast<double>(locked) : 0;
  s.bytes_copied = sys->counter("collapse.bytes_copied");
  p->exit();
  return s;
}

}  // namespace

namespace {
uint64_t collapse_size(const BenchOptions& o) { return (o.size_mb ? o.size_mb : (o.quick ? 64 : 256)) << 20; }
}  // namespace

// The populated region and, at most, a new huge folio for each of its PMDs.
static HostNeed need_collapse(const BenchOptions& o) { return {model_host_need(2 * collapse_size(o)), collapse_size(o) >> 20}; }

static int suite_collapse(const BenchOptions& o, Report* rep) {
  const uint64_t size = collapse_size(o);
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  const FolioCase cases[] = {kCases[0], kCases[1]};  // 4K pages and 64K mTHPs
  std::vector<std::vector<CollapseSample>> samples(std::size(cases));
  for (long r = -1; r < repeats; r++) {  // round -1: the warm-up, discarded
    for (size_t i = 0; i < std::size(cases); i++) {  // the cases interleaved per repeat
      progress(fmt::format("collapse {} ({}/{})", cases[i].name, r + 1, repeats));
      int err = 0;
      CollapseSample s = collapse_once(cases[i], size, &err);
      if (err) {
        progress_done();
        std::fprintf(stderr, "mmlab bench: collapse of %s folios failed: %s\n", cases[i].name, errno_name(err));
        return 1;
      }
      if (r >= 0) samples[i].push_back(s);
    }
  }
  progress_done();
  rep->add(fmt::format("\n## MADV_COLLAPSE of {} MiB, one 2M range per call (median of {} runs)\n\n", size >> 20, repeats));
  rep->add("| source folios | us per 2M | copy share | mmap_lock write-held per collapse (us) | bytes copied | collapses |\n"
           "|---|---:|---:|---:|---:|---:|\n");
  Plot plot = bar_plot("collapse", fmt::format("collapse: MADV_COLLAPSE of {} MiB, one 2M range per call, {} runs", size >> 20, repeats),
                       "us (median; bars: IQR)", {"4K", "64K"},
                       {"MADV_COLLAPSE per 2M", "of which the copy", "mmap_lock write-held per collapse"});
  plot.xlabel = "source folios";
  for (size_t i = 0; i < std::size(cases); i++) {
    std::vector<double> us, share, hold, copy_us;
    for (auto& s : samples[i]) {
      us.push_back(s.us_per_2m);
      share.push_back(s.copy_share);
      hold.push_back(s.write_hold_us);
      copy_us.push_back(s.copy_us_per_2m);
    }
    const double x = static_cast<double>(i);
    plot.series[0].points.push_back(sample_point(x, us));
    plot.series[1].points.push_back(sample_point(x, copy_us));
    plot.series[2].points.push_back(sample_point(x, hold));
    const CollapseSample& last = samples[i].back();
    rep->add(fmt::format("| {} | {:.1f} | {:.0f}% | {:.1f} | {} | {} |\n", cases[i].name, median_of(us), median_of(share) * 100,
                         median_of(hold), last.bytes_copied, last.collapses));
    rep->json["collapse"][cases[i].name] = {{"us_per_2m", us}, {"copy_share", share}, {"write_hold_us", hold},
                                            {"bytes_copied", last.bytes_copied}, {"collapses", last.collapses}};
  }
  rep->plots.push_back(plot);
  return 0;
}

extern const BenchSuite kBenchSuite_collapse = {
    .name = "collapse",
    .summary = "MADV_COLLAPSE of 4K pages and of 64K mTHPs: time per 2M, the copy's share, mmap_lock write hold",
    .need = need_collapse,
    .run = suite_collapse};

}  // namespace mmlab::cli
