// The fault suite: fault-in of a region with 4K, 64K and 2M folios, split
// into the zeroing (beside a native memset of the same bytes) and the
// bookkeeping per fault (allocation, walk, rmap, LRU, statistics).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/model_common.h"
#include "bench/modelled.h"
#include "report/report.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"
#include "mmlab/system.h"
#include "mmlab/trace.h"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names
// (with the same values).
#include <sys/mman.h>

namespace mmlab::cli {

namespace {

struct FaultSample {
  double seconds = 0;  // the fault-in loop
  double zero_ns = 0;  // of which zeroing (a run with data timing on)
  long pgtables_bytes = 0;
  int64_t faults = 0;
  long host_faults = 0;
  FrameStoreInfo store;
  std::map<std::string, int64_t> counts;  // System::all_counters() over the fault-in loop (the modelled time's input)
};

// First touch of every page of `size`: one byte written per base page.
FaultSample fault_in_once(const FolioCase& c, uint64_t size, DataTiming timing, int* err) {
  auto sys = bench_system(size + (256ull << 20), c, err);
  if (!sys) return {};
  Process* p = sys->new_process("bench");
  long raw = p->mmap(0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  uint64_t addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
  if (c.sysfs_dir) (void)p->madvise(addr, size, MADV_HUGEPAGE);
  int64_t faults0 = sys->vmstat("pgfault");
  const std::map<std::string, int64_t> counts0 = sys->all_counters();
  sys->set_data_timing(timing == DataTiming::kOn);
  const long hf0 = host_faults_now();
  const auto t0 = Clock::now();
  for (uint64_t off = 0; off < size; off += PAGE_SIZE) {
    uint8_t b = 1;
    if (!p->write(addr + off, &b, 1).ok()) {
      *err = -EFAULT;
      return {};
    }
  }
  FaultSample s;
  s.seconds = seconds_since(t0);
  s.host_faults = host_faults_now() - hf0;
  s.zero_ns = static_cast<double>(sys->data_time_ns("zero"));
  s.pgtables_bytes = p->pgtables_bytes();
  s.faults = sys->vmstat("pgfault") - faults0;
  for (auto& [n, v] : sys->all_counters()) s.counts[n] = v - counts0.at(n);
  s.store = sys->frame_store_info();
  p->exit();
  return s;
}

// One MM_TRACE check as the model's call sites compile it with the trace
// off: a relaxed load of the flag and a branch not taken. The asm after it
// clobbers memory, so that the compiler must load the flag again at the
// next site rather than reuse this load or hoist it out of the loop (the
// object file shows the 16 loads and branches per iteration). Escaping
// the loaded value into a register instead would add an instruction the
// real site does not have.
inline void trace_site() {
  if (trace::on()) std::abort();  // never: the trace is off here
  asm volatile("" : : : "memory");
}

template <size_t... I>
inline void trace_sites(std::index_sequence<I...>) {
  ((static_cast<void>(I), trace_site()), ...);
}

// The cost of one trace call site with the trace off, in ns: a loop of
// kSites checks back to back beside the same loop without them (each
// loop's fastest of seven runs, the two interleaved). One check per
// iteration measures nothing: that loop is bound by its own taken branch,
// an iteration per cycle, and the check's load and branch issue beside it
// for free, which is how a 0.00 came out of it. Sites back to back compete
// for the load and branch units as a fault's sites do: the difference is
// their issue cost. nullopt if the difference is not above the bare loop's
// own spread (the figure is then not resolved).
std::optional<double> trace_off_ns_per_site() {
  constexpr size_t kSites = 16;
  constexpr long kIters = 8'000'000;
  double with = 1e9, without = 1e9, without_max = 0;
  for (int round = 0; round < 7; round++) {
    auto t0 = Clock::now();
    for (long i = 0; i < kIters; i++) trace_sites(std::make_index_sequence<kSites>());
    with = std::min(with, seconds_since(t0));
    t0 = Clock::now();
    for (long i = 0; i < kIters; i++) asm volatile("" : : : "memory");
    const double w = seconds_since(t0);
    without = std::min(without, w);
    without_max = std::max(without_max, w);
  }
  const double sites = static_cast<double>(kIters) * static_cast<double>(kSites);
  if (with - without <= (without_max - without) / 7) return std::nullopt;
  return (with - without) * 1e9 / sites;
}

// The 4K fault-in with the trace off and on (events kept in memory, written
// to /dev/null), interleaved per repeat, and the per-site cost when off.
// table_ns: the fault-in table's 4K ns/page, the same code timed earlier in
// the run, which the text sets beside this table's `off` row.
void trace_cost(uint64_t size, long repeats, double table_ns, Report* rep) {
  if (trace::on()) {
    rep->add("\n## trace cost\n\nNot measured: this run traces (`--trace`).\n");
    return;
  }
  std::vector<double> off, on;
  uint64_t events = 0;
  int64_t faults = 0;
  for (long r = -1; r < repeats; r++) {
    progress(fmt::format("trace cost ({}/{})", r + 1, repeats));
    int err = 0;
    FaultSample a = fault_in_once(kCases[0], size, DataTiming::kOff, &err);
    std::string why;
    if (err || trace::start("/dev/null", trace::Format::kFtrace, &why) != 0) return;
    FaultSample b = fault_in_once(kCases[0], size, DataTiming::kOff, &err);
    events = trace::events();
    (void)trace::stop(&why);
    if (err) return;
    faults = b.faults;
    if (r < 0) continue;
    off.push_back(a.seconds);
    on.push_back(b.seconds);
  }
  progress_done();
  const double pages = static_cast<double>(size / PAGE_SIZE);
  const std::optional<double> site = trace_off_ns_per_site();
  const double site_ns = site.value_or(0);
  const double per_fault = faults ? static_cast<double>(events) / static_cast<double>(faults) : 0;
  const double off_ns = median_of(off) * 1e9 / pages, on_ns = median_of(on) * 1e9 / pages;
  const double spread =
      100 * (*std::max_element(off.begin(), off.end()) - *std::min_element(off.begin(), off.end())) / median_of(off);
  rep->add(fmt::format("\n## trace cost: 4K fault-in of {} MiB, off and on (median of {} runs, interleaved)\n\n",
                       size >> 20, repeats));
  // vs off: median(on) / median(off), paired over the interleaved repeats.
  const RatioCi vs_off = median_ratio_ci(on, off);
  rep->add("| trace | ns/page | events per fault | vs off (95% CI) |\n|---|---:|---:|---:|\n");
  rep->add(fmt::format("| off | {:.1f} | - | 1.00x (base) |\n", off_ns));
  rep->add(fmt::format("| on (kept in memory, written to /dev/null) | {:.1f} | {:.2f} | {} |\n", on_ns, per_fault,
                       ratio_ci_text(vs_off)));
  if (site)
    rep->add(fmt::format("\nOff, a call site costs {:.3f} ns (16 checks back to back in a loop, beside the same loop "
                         "without them); a fault passes {:.2f} sites (the events one fault records when on), so the "
                         "trace adds {:.2f} ns to a {:.0f} ns fault ({:.3f}%; the off runs spread {:.1f}%).\n",
                         site_ns, per_fault, site_ns * per_fault, off_ns,
                         off_ns > 0 ? 100 * site_ns * per_fault / off_ns : 0.0, spread));
  else
    rep->add(fmt::format("\nOff, a call site's cost was not resolved: 16 checks back to back in a loop took no longer "
                         "than the same loop without them, beyond that loop's own spread (a busy machine). A fault passes "
                         "{:.2f} sites (the events one fault records when on); the off runs spread {:.1f}%.\n",
                         per_fault, spread));
  // The same fault-in timed twice in one run gives two figures: say why.
  if (table_ns > 0)
    rep->add(fmt::format("\nThe `off` row is the fault-in table's 4K case again ({:.1f} ns/page there, {:+.1f}% here): the "
                         "same code, timed at another moment of the run and after other work (there after the previous round's 2M case and "
                         "the memsets, here after a traced run), so the two differ by this machine's drift and cache "
                         "state. Read each table's ratio, which pairs runs timed side by side, not one table's ns/page "
                         "against the other's.\n",
                         table_ns, 100 * (off_ns / table_ns - 1)));
  rep->json["fault"]["trace"] = {{"off_ns_per_page", off_ns},   {"on_ns_per_page", on_ns}, {"fault_table_ns_per_page", table_ns},
                                 {"events_per_fault", per_fault}, {"off_ns_per_site", site ? nlohmann::ordered_json(site_ns) : nlohmann::ordered_json()},
                                 {"on_vs_off", vs_off.ratio},     {"on_vs_off_ci95", ci_json(vs_off)},
                                 {"off_samples", off},          {"on_samples", on}};
}

}  // namespace

namespace {
uint64_t fault_size(const BenchOptions& o) { return (o.size_mb ? o.size_mb : (o.quick ? 256 : 1024)) << 20; }
}  // namespace

// The native buffer beside one System faulting the region in.
static HostNeed need_fault(const BenchOptions& o) { return {fault_size(o) + model_host_need(fault_size(o)), fault_size(o) >> 20}; }

// The timed rounds, the cases interleaved per round after a discarded
// warm-up: each case's fault-in (and, in a second run, its zeroing), then
// the native memsets of the same bytes.
static int fault_rounds(uint64_t size, long repeats, NativeBuffer& native, std::vector<std::vector<FaultSample>>* samples,
                        std::vector<std::vector<double>>* memset_s) {
  for (long r = -1; r < repeats; r++) {  // round -1: the warm-up, discarded
    for (size_t i = 0; i < std::size(kCases); i++) {  // variants interleaved per repeat
      progress(fmt::format("fault-in {} ({}/{})", kCases[i].name, r + 1, repeats));
      int err = 0;
      FaultSample s = fault_in_once(kCases[i], size, DataTiming::kOff, &err);
      FaultSample z = err ? FaultSample{} : fault_in_once(kCases[i], size, DataTiming::kOn, &err);
      if (err) {
        progress_done();
        std::fprintf(stderr, "mmlab bench: fault-in %s failed: %s\n", kCases[i].name, errno_name(err));
        return 1;
      }
      s.zero_ns = z.zero_ns;
      if (r >= 0) (*samples)[i].push_back(s);
    }
    // Native: the same bytes, one memset per folio, as the kernel zeroes them.
    for (size_t i = 0; i < std::size(kCases); i++) {
      const uint64_t chunk = folio_bytes_of(kCases[i].name);
      const auto t0 = Clock::now();
      for (uint64_t off = 0; off < size; off += chunk) std::memset(native.data() + off, 0, chunk);
      if (r >= 0) (*memset_s)[i].push_back(seconds_since(t0));
    }
  }
  return 0;
}

static int suite_fault(const BenchOptions& o, Report* rep) {
  const uint64_t size = fault_size(o);
  const long repeats = o.repeats ? o.repeats : (o.quick ? 3 : 5);
  NativeBuffer native(size);
  if (!native.data()) {
    std::fprintf(stderr, "mmlab bench: fault: no native buffer of %llu MiB\n", static_cast<unsigned long long>(size >> 20));
    return 1;
  }
  std::vector<std::vector<FaultSample>> samples(std::size(kCases));
  std::vector<std::vector<double>> memset_s(std::size(kCases));
  if (int e = fault_rounds(size, repeats, native, &samples, &memset_s)) return e;
  progress_done();
  const double pages = static_cast<double>(size / PAGE_SIZE);
  rep->add(fmt::format("\n## fault-in: first touch of every page of {} MiB (median of {} runs; per-frame metadata {} bytes)\n\n",
                       size >> 20, repeats, 64));
  rep->add("Zeroing is timed inside the model in a second run of each case; bookkeeping = the rest of the fault-in "
           "loop per fault (allocation, walk, rmap, LRU, statistics, the CPU model's access). Native memset: the same "
           "bytes, one call per folio, on a buffer touched before.\n\n");
  rep->add("vs 4K and zeroing vs memset are ratios of medians with their 95% bootstrap intervals, paired over the "
           "rounds (each round runs every case and the memsets once).\n\n");
  rep->add("| folio | median ms | ns/page | vs 4K (95% CI) | faults | zeroing ns/page | native memset ns/page | zeroing vs memset (95% CI) | "
           "bookkeeping ns/fault | host faults | page tables |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> base_t;  // the 4K case's fault-in times: vs 4K's base
  Plot plot = bar_plot("fault", fmt::format("fault: first touch of every page of {} MiB, {} runs", size >> 20, repeats),
                       "ns per 4K page (median; bars: IQR)", {"4K", "64K", "2M"},
                       {"model fault-in", "of which zeroing", "native memset"});
  plot.xlabel = "folio size";
  for (size_t i = 0; i < std::size(kCases); i++) {
    std::vector<double> t, z, hf;
    for (auto& s : samples[i]) {
      t.push_back(s.seconds);
      z.push_back(s.zero_ns);
      hf.push_back(static_cast<double>(s.host_faults));
    }
    const double m = median_of(t), mz = median_of(z);
    const double native_ns_page = median_of(memset_s[i]) * 1e9 / pages;
    const int64_t faults = samples[i].back().faults;
    if (i == 0) base_t = t;
    // vs 4K: median(4K) / median(this case), a speedup; zeroing vs memset:
    // the model's zeroing time over the memset's, both per round.
    const RatioCi vs_4k = median_ratio_ci(base_t, t);
    std::vector<double> memset_ns;
    for (double x : memset_s[i]) memset_ns.push_back(x * 1e9);
    const RatioCi zero_vs = median_ratio_ci(z, memset_ns);
    const double zero_page = mz / pages;
    // Bookkeeping is the fault-in's median less the zeroing's, timed in
    // another run: where zeroing is nearly all of a fault (2M), the two
    // runs' noise can put the part above the total. Flagged, not printed
    // negative.
    const std::optional<double> rest_ns = remainder_of(m * 1e9, mz);
    std::string book_text = "zeroing exceeds total: noise";
    nlohmann::ordered_json book_json;  // null where flagged
    if (rest_ns && faults) {
      const double book = rest_ns.value() / static_cast<double>(faults);
      book_text = fmt::format("{:.0f}", book);
      book_json = book;
    } else if (rest_ns) {
      book_text = "-";
    } else {
      plot.categories[i] += " (zeroing > total: noise)";
    }
    const long host = static_cast<long>(median_of(hf));
    const double x = static_cast<double>(i);
    plot.series[0].points.push_back(sample_point(x, t, 1e9 / pages));
    plot.series[1].points.push_back(sample_point(x, z, 1 / pages));
    plot.series[2].points.push_back(sample_point(x, memset_s[i], 1e9 / pages));
    rep->add(fmt::format("| {} | {:.2f} | {:.1f} | {} | {} | {:.1f} | {:.1f} | {} | {} | {}{} | {} KiB |\n",
                         kCases[i].name, m * 1e3, m * 1e9 / pages, i == 0 ? std::string("1.00x (base)") : ratio_ci_text(vs_4k),
                         faults, zero_page, native_ns_page, ratio_ci_text(zero_vs),
                         book_text, host,
                         first_touch_note(host, size / PAGE_SIZE), samples[i].back().pgtables_bytes / 1024));
    rep->json["fault"][kCases[i].name] = {{"median_s", m},
                                          {"samples", t},
                                          {"faults", faults},
                                          {"zero_ns", mz},
                                          {"native_memset_ns_per_page", native_ns_page},
                                          {"vs_4k", vs_4k.ratio},
                                          {"vs_4k_ci95", ci_json(vs_4k)},
                                          {"zeroing_vs_memset", zero_vs.ratio},
                                          {"zeroing_vs_memset_ci95", ci_json(zero_vs)},
                                          {"bookkeeping_ns_per_fault", book_json},
                                          {"zeroing_exceeds_total", !rest_ns},
                                          {"host_faults", host},
                                          {"pgtables_bytes", samples[i].back().pgtables_bytes}};
  }
  rep->plots.push_back(plot);
  rep->add("\n" + store_text(samples.back().back().store) + "\n");
  trace_cost(size, repeats, median_of(base_t) * 1e9 / pages, rep);
  if (rep->profile) {
    std::vector<std::map<std::string, int64_t>> counts;
    for (auto& s : samples) counts.push_back(s.back().counts);
    modelled_fault_in(size, counts, rep);
  }
  return 0;
}

extern const BenchSuite kBenchSuite_fault = {
    .name = "fault",
    .summary = "fault-in of a region with 4K, 64K and 2M folios, zeroing and bookkeeping apart",
    .need = need_fault,
    .run = suite_fault};

}  // namespace mmlab::cli
