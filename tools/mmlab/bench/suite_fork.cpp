// The fork suite: fork of a populated region, then CoW faults: the copy
// (beside a native memcpy) and the bookkeeping per CoW fault.
#include <algorithm>
#include <cstdio>
#include <optional>
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

struct ForkSample {
  double fork_s = 0, cow_s = 0, copy_ns = 0;
  int64_t pte_batches = 0, wp_copies = 0;
  long host_faults = 0;
  std::map<std::string, int64_t> fork_counts, cow_counts;  // System::all_counters() over each timed part
};

// Populate `size` with folios of one size, fork, then write one byte into
// every page of the first cow_bytes of the parent: every write is a CoW fault
// that copies 4K.
ForkSample fork_once(const FolioCase& c, uint64_t size, uint64_t cow_bytes, DataTiming timing, int* err) {
  auto sys = bench_system(size * 3 + (256ull << 20), c, err);
  if (!sys) return {};
  Process* p = sys->new_process("parent");
  long raw = p->mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  uint64_t addr = static_cast<uint64_t>(raw);
  if (c.sysfs_dir) (void)p->madvise(addr, size, MADV_HUGEPAGE);
  if (p->madvise(addr, size, MADV_POPULATE_WRITE)) {
    *err = -ENOMEM;
    return {};
  }
  ForkSample s;
  sys->reset_counters();
  std::map<std::string, int64_t> c0 = sys->all_counters();
  auto t0 = Clock::now();
  Process* child = p->fork("child");
  s.fork_s = seconds_since(t0);
  for (auto& [n, v] : sys->all_counters()) s.fork_counts[n] = v - c0.at(n);
  if (!child) {
    *err = -ENOMEM;
    return {};
  }
  s.pte_batches = sys->counter("fork.pte_batches");
  sys->reset_counters();
  c0 = sys->all_counters();
  sys->set_data_timing(timing == DataTiming::kOn);
  const long hf0 = host_faults_now();
  t0 = Clock::now();
  for (uint64_t off = 0; off < cow_bytes; off += PAGE_SIZE) {
    uint8_t b = 2;
    if (!p->write(addr + off, &b, 1).ok()) {
      *err = -EFAULT;
      return {};
    }
  }
  s.cow_s = seconds_since(t0);
  s.host_faults = host_faults_now() - hf0;
  s.copy_ns = static_cast<double>(sys->data_time_ns("copy"));
  s.wp_copies = sys->counter("fault.wp_copy");
  for (auto& [n, v] : sys->all_counters()) s.cow_counts[n] = v - c0.at(n);
  child->exit();
  p->exit();
  return s;
}

}  // namespace

namespace {
uint64_t fork_size(const BenchOptions& o) { return (o.size_mb ? o.size_mb : (o.quick ? 128 : 1024)) << 20; }
uint64_t fork_cow_bytes(uint64_t size) { return std::min<uint64_t>(size, 64ull << 20); }
}  // namespace

// Two native buffers of the CoW span beside one System with the populated
// region, the child's tables and the CoW copies.
static HostNeed need_fork(const BenchOptions& o) {
  const uint64_t size = fork_size(o), cow = fork_cow_bytes(size);
  return {2 * cow + model_host_need(size + size / 512 + cow), size >> 20};
}

// The timed rounds after a discarded warm-up: every case's fork and CoW
// faults (and, in a second run, the copies), then the native memcpy of the
// same bytes.
static int fork_rounds(uint64_t size, uint64_t cow_bytes, long repeats, NativeBuffer& src, NativeBuffer& dst,
                       std::vector<std::vector<ForkSample>>* samples, std::vector<double>* memcpy_s) {
  for (long r = -1; r < repeats; r++) {  // round -1: the warm-up, discarded
    for (size_t i = 0; i < std::size(kCases); i++) {
      progress(fmt::format("fork {} ({}/{})", kCases[i].name, r + 1, repeats));
      int err = 0;
      ForkSample s = fork_once(kCases[i], size, cow_bytes, DataTiming::kOff, &err);
      ForkSample c = err ? ForkSample{} : fork_once(kCases[i], size, cow_bytes, DataTiming::kOn, &err);
      if (err) {
        progress_done();
        std::fprintf(stderr, "mmlab bench: fork %s failed: %s\n", kCases[i].name, errno_name(err));
        return 1;
      }
      s.copy_ns = c.copy_ns;
      if (r >= 0) (*samples)[i].push_back(s);
    }
    const auto t0 = Clock::now();  // native: the same bytes, 4 KiB per call, as the CoW faults copy them
    for (uint64_t off = 0; off < cow_bytes; off += PAGE_SIZE) std::memcpy(dst.data() + off, src.data() + off, PAGE_SIZE);
    if (r >= 0) memcpy_s->push_back(seconds_since(t0));
  }
  return 0;
}

static int suite_fork(const BenchOptions& o, Report* rep) {
  const uint64_t size = fork_size(o);
  const uint64_t cow_bytes = fork_cow_bytes(size);
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  NativeBuffer src(cow_bytes), dst(cow_bytes);
  if (!src.data() || !dst.data()) return 1;
  std::vector<std::vector<ForkSample>> samples(std::size(kCases));
  std::vector<double> memcpy_s;
  if (int e = fork_rounds(size, cow_bytes, repeats, src, dst, &samples, &memcpy_s)) return e;
  progress_done();
  const double native_ns_page = median_of(memcpy_s) * 1e9 / static_cast<double>(cow_bytes / PAGE_SIZE);
  rep->add(fmt::format("\n## fork of {} MiB of anonymous memory, then CoW write faults on the first {} MiB (median of {} runs; cow.policy base)\n\n",
                       size >> 20, cow_bytes >> 20, repeats));
  rep->add("The copy is timed inside the model in a second run of each case; bookkeeping = the rest of the CoW loop "
           "per fault. Native memcpy: the same bytes, 4 KiB per call, between buffers touched before. fork vs 4K and "
           "copy vs memcpy are ratios of medians with their 95% bootstrap intervals, paired over the rounds (each round "
           "runs every case and the memcpy once).\n\n");
  rep->add("| folio | fork ms | fork vs 4K (95% CI) | PTE batches | CoW faults | ns per CoW fault | copy ns/fault | native memcpy ns/4K | "
           "copy vs memcpy (95% CI) | bookkeeping ns/CoW fault | host faults |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> base_f;  // the 4K case's fork times: fork vs 4K's base
  std::vector<double> memcpy_ns;  // per 4K page, as the copy column
  for (double x : memcpy_s) memcpy_ns.push_back(x * 1e9 / static_cast<double>(cow_bytes / PAGE_SIZE));
  Plot fork_plot = bar_plot("fork", fmt::format("fork: fork() of {} MiB populated, {} runs", size >> 20, repeats),
                            "fork ms (median; bars: IQR)", {"4K", "64K", "2M"}, {"fork"});
  Plot cow_plot = bar_plot("fork_cow", fmt::format("fork: CoW write faults on the first {} MiB after fork, {} runs", cow_bytes >> 20, repeats),
                           "ns per CoW fault (median; bars: IQR)", {"4K", "64K", "2M"},
                           {"model CoW fault", "of which the copy", "native memcpy of 4K"});
  fork_plot.xlabel = cow_plot.xlabel = "folio size";
  for (size_t i = 0; i < std::size(kCases); i++) {
    std::vector<double> f, c, cp, hf;
    for (auto& s : samples[i]) {
      f.push_back(s.fork_s);
      c.push_back(s.wp_copies ? s.cow_s * 1e9 / static_cast<double>(s.wp_copies) : 0);
      cp.push_back(s.wp_copies ? s.copy_ns / static_cast<double>(s.wp_copies) : 0);
      hf.push_back(static_cast<double>(s.host_faults));
    }
    const double mf = median_of(f), mc = median_of(c), mcp = median_of(cp);
    if (i == 0) base_f = f;
    const RatioCi vs_4k = median_ratio_ci(base_f, f);       // median(4K) / median(this case)
    const RatioCi copy_vs = median_ratio_ci(cp, memcpy_ns);  // the model's copy over the memcpy
    // Bookkeeping is the CoW fault's median less the copy's, timed in
    // another run: the two runs' noise can put the part above the total.
    // Flagged, not printed negative.
    const std::optional<double> book = remainder_of(mc, mcp);
    std::string book_text = "copy exceeds total: noise";
    nlohmann::ordered_json book_json;  // null where flagged
    if (book) {
      book_text = fmt::format("{:.0f}", book.value());
      book_json = book.value();
    } else {
      cow_plot.categories[i] += " (copy > total: noise)";
    }
    const long host = static_cast<long>(median_of(hf));
    const double x = static_cast<double>(i);
    fork_plot.series[0].points.push_back(sample_point(x, f, 1e3));
    cow_plot.series[0].points.push_back(sample_point(x, c));
    cow_plot.series[1].points.push_back(sample_point(x, cp));
    cow_plot.series[2].points.push_back(sample_point(x, memcpy_s, 1e9 / static_cast<double>(cow_bytes / PAGE_SIZE)));
    rep->add(fmt::format("| {} | {:.2f} | {} | {} | {} | {:.0f} | {:.0f} | {:.0f} | {} | {} | {}{} |\n",
                         kCases[i].name, mf * 1e3, i == 0 ? std::string("1.00x (base)") : ratio_ci_text(vs_4k),
                         samples[i].back().pte_batches, samples[i].back().wp_copies, mc, mcp, native_ns_page,
                         ratio_ci_text(copy_vs), book_text, host,
                         first_touch_note(host, cow_bytes / PAGE_SIZE)));
    rep->json["fork"][kCases[i].name] = {{"fork_s", f},
                                         {"cow_ns_per_fault", c},
                                         {"copy_ns_per_fault", cp},
                                         {"native_memcpy_ns_per_4k", native_ns_page},
                                         {"fork_vs_4k", vs_4k.ratio},
                                         {"fork_vs_4k_ci95", ci_json(vs_4k)},
                                         {"copy_vs_memcpy", copy_vs.ratio},
                                         {"copy_vs_memcpy_ci95", ci_json(copy_vs)},
                                         {"bookkeeping_ns_per_cow_fault", book_json},
                                         {"copy_exceeds_total", !book},
                                         {"host_faults", host},
                                         {"pte_batches", samples[i].back().pte_batches},
                                         {"wp_copies", samples[i].back().wp_copies}};
  }
  rep->plots.push_back(fork_plot);
  rep->plots.push_back(cow_plot);
  if (rep->profile) {
    std::vector<std::map<std::string, int64_t>> fork_counts, cow_counts;
    for (auto& s : samples) {
      fork_counts.push_back(s.back().fork_counts);
      cow_counts.push_back(s.back().cow_counts);
    }
    modelled_fork(size, fork_counts, cow_counts, rep);
  }
  return 0;
}

extern const BenchSuite kBenchSuite_fork = {
    .name = "fork",
    .summary = "fork of a populated region, then CoW faults, per folio size",
    .need = need_fork,
    .run = suite_fork};

}  // namespace mmlab::cli
