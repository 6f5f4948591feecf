// The sampler, the geometry and the modelled time of `mmlab cow-bench`
// (cow_bench_metrics.h).
#include "cowbench/cow_bench_metrics.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "fmt/format.h"

namespace mmlab::cli::cowbench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPeriod = std::chrono::milliseconds(1);
// A PSS walk is the expensive part of a sample (every page table locked in
// turn): the next one waits at least 1/kPssDuty times the last one's cost.
constexpr double kPssDuty = 0.01;

double mib_s(int64_t bytes, double s) { return static_cast<double>(bytes) / (1 << 20) * s; }

}  // namespace

const std::vector<std::string>& geometries() {
  static const std::vector<std::string> v = {"off", "x86-intel", "x86-amd", "arm64"};
  return v;
}

bool geometry_known(const std::string& name) {
  const auto& g = geometries();
  return std::find(g.begin(), g.end(), name) != g.end();
}

int set_geometry(System* s, const std::string& name, std::string* err) {
  if (name.empty() || name == "off") return 0;
  if (int e = s->tune("tlb.geometry", name); e < 0) {
    *err = fmt::format("tune tlb.geometry {}: {}", name, errno_name(-e));
    return e;
  }
  return 0;
}

TlbCounts read_tlb(const System* s) {
  TlbCounts t;
  t.lookups = s->counter("tlb.lookup");
  t.l1_misses = s->counter("tlb.l1_miss");
  t.l2_misses = s->counter("tlb.l2_miss");
  t.flushes = s->counter("tlb.flush");
  t.flush_full = s->counter("tlb.flush_full");
  t.flush_range = s->counter("tlb.flush_range");
  t.flush_single = s->counter("tlb.flush_single");
  t.ipis = s->counter("tlb.ipi");
  t.remote_flush_rounds = s->vmstat("nr_tlb_remote_flush");
  t.folds = s->counter("tlb.contpte_fold");
  t.unfolds = s->counter("tlb.contpte_unfold");
  return t;
}

namespace {

TlbCounts minus(const TlbCounts& a, const TlbCounts& b) {
  return {a.lookups - b.lookups,         a.l1_misses - b.l1_misses,     a.l2_misses - b.l2_misses,
          a.flushes - b.flushes,         a.flush_full - b.flush_full,   a.flush_range - b.flush_range,
          a.flush_single - b.flush_single, a.ipis - b.ipis,             a.remote_flush_rounds - b.remote_flush_rounds,
          a.folds - b.folds,             a.unfolds - b.unfolds};
}

void add(TlbCounts* a, const TlbCounts& b) {
  a->lookups += b.lookups;
  a->l1_misses += b.l1_misses;
  a->l2_misses += b.l2_misses;
  a->flushes += b.flushes;
  a->flush_full += b.flush_full;
  a->flush_range += b.flush_range;
  a->flush_single += b.flush_single;
  a->ipis += b.ipis;
  a->remote_flush_rounds += b.remote_flush_rounds;
  a->folds += b.folds;
  a->unfolds += b.unfolds;
}

}  // namespace

Sampler::Sampler(System* s, std::vector<Process*> procs, bool on) : sys_(s), procs_(std::move(procs)), on_(on) {}

Sampler::~Sampler() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

Sample Sampler::take(double t_s, int64_t lookups0, int64_t l2_0, bool with_pss) const {
  Sample x;
  x.t_s = t_s;
  x.has_pss = with_pss;
  for (Process* q : procs_) {
    x.rss += q->rss_anon();
    if (with_pss) x.pss += q->pss();
  }
  x.lookups = sys_->counter("tlb.lookup") - lookups0;
  x.l2_misses = sys_->counter("tlb.l2_miss") - l2_0;
  const System::TlbOccupancy o = sys_->tlb_occupancy();
  x.l2_entries = static_cast<int64_t>(o.l2_entries);
  x.l2_reach = static_cast<int64_t>(o.l2_bytes);
  return x;
}

void Sampler::loop() {
  Clock::time_point next_pss = next_pss_;
  for (;;) {
    {
      std::unique_lock<std::mutex> g(mu_);
      if (cv_.wait_for(g, kPeriod, [this] { return stopping_; })) return;
    }
    const auto a = Clock::now();
    const bool with_pss = a >= next_pss;
    samples_.push_back(take(std::chrono::duration<double>(a - t0_).count(), start_tlb_.lookups, start_tlb_.l2_misses, with_pss));
    const auto b = Clock::now();
    busy_s_ += std::chrono::duration<double>(b - a).count();
    if (with_pss) next_pss = b + std::chrono::duration_cast<Clock::duration>((b - a) / kPssDuty);
  }
}

void Sampler::start() {
  start_tlb_ = read_tlb(sys_);
  t0_ = Clock::now();
  if (!on_) return;
  // The first sample, before the writers start, is the state at time 0 and
  // prices the first PSS walk.
  samples_.push_back(take(0, start_tlb_.lookups, start_tlb_.l2_misses, true));
  const auto a = t0_;
  t0_ = Clock::now();
  next_pss_ = t0_ + std::chrono::duration_cast<Clock::duration>((t0_ - a) / kPssDuty);
  thread_ = std::thread([this] { loop(); });
}

void Sampler::stop(Metrics* m) {
  const double end_s = std::chrono::duration<double>(Clock::now() - t0_).count();
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  *m = Metrics{};
  m->tlb = minus(read_tlb(sys_), start_tlb_);
  if (!on_) return;
  samples_.push_back(take(end_s, start_tlb_.lookups, start_tlb_.l2_misses, true));
  m->sampled = true;
  m->sampler_s = busy_s_;
  const Sample* last_pss = nullptr;
  double reach_s = 0;  // bytes x seconds
  for (size_t i = 0; i < samples_.size(); i++) {
    const Sample& x = samples_[i];
    m->rss_peak = std::max(m->rss_peak, x.rss);
    m->l2_reach_peak = std::max(m->l2_reach_peak, x.l2_reach);
    if (i > 0)
      reach_s += static_cast<double>(x.l2_reach + samples_[i - 1].l2_reach) / 2 * (x.t_s - samples_[i - 1].t_s);
    if (i > 0) m->rss_mib_s += (mib_s(x.rss, x.t_s - samples_[i - 1].t_s) + mib_s(samples_[i - 1].rss, x.t_s - samples_[i - 1].t_s)) / 2;
    if (!x.has_pss) continue;
    m->pss_peak = std::max(m->pss_peak, x.pss);
    if (last_pss) m->pss_mib_s += (mib_s(x.pss, x.t_s - last_pss->t_s) + mib_s(last_pss->pss, x.t_s - last_pss->t_s)) / 2;
    last_pss = &x;
  }
  if (end_s > 0) m->l2_reach_mean = reach_s / end_s;
  m->samples = std::move(samples_);
}

void merge_metrics(Metrics* into, const Metrics& r) {
  const bool first = into->samples.empty() && !into->sampled;
  into->sampled = into->sampled || r.sampled;
  if (first) into->samples = r.samples;
  into->rss_peak = std::max(into->rss_peak, r.rss_peak);
  into->pss_peak = std::max(into->pss_peak, r.pss_peak);
  into->rss_mib_s += r.rss_mib_s;
  into->pss_mib_s += r.pss_mib_s;
  into->sampler_s += r.sampler_s;
  into->l2_reach_peak = std::max(into->l2_reach_peak, r.l2_reach_peak);
  into->l2_reach_mean += r.l2_reach_mean;
  add(&into->tlb, r.tlb);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0 ? 1 : 0));
  return v[i];
}

std::vector<int64_t> copies_by_order(const System* s) {
  std::vector<int64_t> v;
  for (unsigned o = 0;; o++) {
    const int64_t n = s->counter(fmt::format("cow.copy.order{}", o));
    if (n < 0) break;
    v.push_back(n);
  }
  return v;
}

ModelledCow modelled_cow_ms(const std::vector<int64_t>& copies_by_order, const host::CostProfile& p) {
  ModelledCow m;
  double ns = 0;
  for (size_t o = 0; o < copies_by_order.size(); o++) {
    if (!copies_by_order[o]) continue;
    const host::FaultCost* fc = p.fault_cost(PAGE_SIZE << o);
    if (!fc) return {};
    const double per = o == 0 ? fc->cow_ns_per_fault : fc->ns_per_fault;
    m.approximated |= o > 0;
    ns += static_cast<double>(copies_by_order[o]) * per;
  }
  m.ms = ns / 1e6;
  return m;
}

}  // namespace mmlab::cli::cowbench

namespace mmlab::cli::cowbench {

namespace {

// At most this many points of a curve go into a plot.
constexpr size_t kPlotPoints = 200;

std::string mib(int64_t b) { return fmt::format("{:.1f}", static_cast<double>(b) / (1 << 20)); }

// Every step-th sample, the last one always.
template <typename F>
PlotSeries curve(const std::string& title, const std::vector<Sample>& v, F y) {
  PlotSeries s{title, {}};
  const size_t step = std::max<size_t>(1, v.size() / kPlotPoints);
  for (size_t i = 0; i < v.size(); i += step) {
    const double val = y(v, i);
    s.points.push_back({v[i].t_s * 1e3, val, val, val});
  }
  if (!v.empty() && (v.size() - 1) % step) {
    const double val = y(v, v.size() - 1);
    s.points.push_back({v.back().t_s * 1e3, val, val, val});
  }
  return s;
}

// Page walks per 1000 lookups between sample i - 1 and i (0 for the first).
double walks_per_1000(const std::vector<Sample>& v, size_t i) {
  if (i == 0) return 0;
  const int64_t lk = v[i].lookups - v[i - 1].lookups;
  return lk > 0 ? 1000.0 * static_cast<double>(v[i].l2_misses - v[i - 1].l2_misses) / static_cast<double>(lk) : 0;
}

Plot line_plot(const std::string& file, const std::string& title, const std::string& ylabel, std::vector<PlotSeries> s) {
  Plot p;
  p.file = file;
  p.title = title;
  p.xlabel = "ms since the measured phase began (seed 1)";
  p.ylabel = ylabel;
  p.lines = true;
  p.series = std::move(s);
  return p;
}

}  // namespace

void MetricsReport::add(const std::string& column, const Metrics& m, const std::vector<int64_t>& copies, unsigned seeds, nlohmann::json* j) {
  const double n = seeds;
  const TlbCounts& t = m.tlb;
  const double per_1000 = t.lookups ? 1000.0 * static_cast<double>(t.l2_misses) / static_cast<double>(t.lookups) : 0;
  std::string row = fmt::format("| {} | {} | {} | {} | {} |", column, m.sampled ? mib(m.rss_peak) : "-",
                                m.sampled ? mib(m.pss_peak) : "-", m.sampled ? fmt::format("{:.2f}", m.rss_mib_s / n) : "-",
                                m.sampled ? fmt::format("{:.2f}", m.pss_mib_s / n) : "-");
  row += fmt::format(" {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} |", t.flushes / n, t.flush_full / n, t.flush_range / n,
                     t.flush_single / n, t.ipis / n);
  if (tlb()) {
    row += fmt::format(" {:.0f} | {:.0f} | {:.0f} | {:.1f} | {:.0f} | {:.0f} |", t.lookups / n, t.l1_misses / n,
                       t.l2_misses / n, per_1000, t.folds / n, t.unfolds / n);
    row += m.sampled ? fmt::format(" {} | {:.1f} |", mib(m.l2_reach_peak), m.l2_reach_mean / n / (1 << 20)) : " - | - |";
  }
  rows_ += row + "\n";
  (*j)["metrics"] = {{"sampled", m.sampled},
                     {"samples", m.samples.size()},
                     {"rss_peak", m.rss_peak},
                     {"pss_peak", m.pss_peak},
                     {"rss_mib_s", m.rss_mib_s / n},
                     {"pss_mib_s", m.pss_mib_s / n},
                     {"sampler_s", m.sampler_s / n},
                     {"tlb",
                      {{"geometry", tlb() ? geometry_ : "off"},
                       {"lookups", t.lookups / n},
                       {"l1_misses", t.l1_misses / n},
                       {"misses", t.l2_misses / n},
                       {"misses_per_1000_lookups", per_1000},
                       {"flushes", t.flushes / n},
                       {"flush_full", t.flush_full / n},
                       {"flush_range", t.flush_range / n},
                       {"flush_single", t.flush_single / n},
                       {"ipis", t.ipis / n},
                       {"remote_flush_rounds", t.remote_flush_rounds / n},
                       {"contpte_folds", t.folds / n},
                       {"contpte_unfolds", t.unfolds / n},
                       {"l2_reach_peak_bytes", m.l2_reach_peak},
                       {"l2_reach_mean_bytes", m.l2_reach_mean / n}}}};
  if (m.sampled) {
    rss_.push_back(curve(column, m.samples, [](const std::vector<Sample>& v, size_t i) {
      return static_cast<double>(v[i].rss) / (1 << 20);
    }));
    std::vector<Sample> with_pss;
    std::copy_if(m.samples.begin(), m.samples.end(), std::back_inserter(with_pss), [](const Sample& x) { return x.has_pss; });
    pss_.push_back(curve(column, with_pss, [](const std::vector<Sample>& v, size_t i) {
      return static_cast<double>(v[i].pss) / (1 << 20);
    }));
    if (tlb()) misses_.push_back(curve(column, m.samples, walks_per_1000));
  }
  if (!profile_) return;
  std::vector<int64_t> per_seed = copies;
  for (auto& c : per_seed) c = static_cast<int64_t>(static_cast<double>(c) / n);
  const ModelledCow mc = modelled_cow_ms(per_seed, *profile_);
  approximated_ |= mc.approximated;
  std::string orders;
  for (size_t o = 0; o < per_seed.size(); o++)
    if (per_seed[o]) orders += fmt::format("{}{}K x {}", orders.empty() ? "" : ", ", 4u << o, per_seed[o]);
  modelled_rows_ += fmt::format("| {} | {} | {}{} |\n", column, orders.empty() ? "-" : orders,
                                mc.ms < 0 ? "n/a" : fmt::format("{:.2f}", mc.ms), mc.approximated ? " *" : "");
  (*j)["modelled"] = {{"profile", profile_->name},
                      {"cow_ms", mc.ms < 0 ? nlohmann::json() : nlohmann::json(mc.ms)},
                      {"cow_ms_approximated", mc.approximated}};
}

void MetricsReport::finish(Report* rep) {
  rep->add(fmt::format("\n### {}: RSS and PSS over the measured phase, TLB flushes and IPIs{}\n\n", workload_,
                       tlb() ? fmt::format(", TLB misses (tlb.geometry {})", geometry_) : ""));
  std::string head = "| column | peak RSS MiB | peak PSS MiB | RSS MiB·s | PSS MiB·s | flushes | full | ranged | single | IPIs |";
  std::string rule = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  if (tlb()) {
    head += " lookups | L1 misses | L2 misses (walks) | walks per 1000 | contpte folds | unfolds | L2 reach peak MiB | L2 reach mean MiB |";
    rule += "---:|---:|---:|---:|---:|---:|---:|---:|";
  }
  rep->add(head + "\n" + rule + "\n" + rows_);
  rep->add("\nPeaks and integrals (MiB·s, per seed) from the sampler: RSS and the TLB counters every ~1 ms of measured "
           "time, PSS (smaps' Pss in the model's mapcount mode, CONFIG_PAGE_MAPCOUNT) at the phase's start and end and "
           "in between as often as a hundredth of a CPU allows. Flushes, IPIs and TLB figures are the TLB model's "
           "events over the phase, per seed, never time. L2 reach: the bytes the L2 TLB's valid entries translate, "
           "summed over the simulated CPUs (System::tlb_occupancy), its peak over the samples and its time average.\n");
  if (geometry_ == "arm64")
    rep->add("\nWith arm64 and 4K base pages a contpte block is 64K (16 x 4K): a 16K or 32K folio never folds, so no "
             "gain of the fixed-16K or fixed-32K column is TLB reach; only 64K and larger folios can fold.\n");
  if (geometry_ == "x86-amd")
    rep->add("\nWith x86-amd, 4 aligned contiguous 4K PTEs of one folio fill one 16K entry: 16K and larger folios gain "
             "reach from that coalescing.\n");
  if (profile_) {
    rep->add(fmt::format("\n#### modelled (profile {}): CoW copies x the host's cost per copy\n\n", profile_->name));
    rep->add("| column | CoW copies by size (per seed) | modelled CoW ms |\n|---|---|---:|\n");
    rep->add(modelled_rows_);
    rep->add("\nModelled, not measured: a 4K copy costs the host's CoW fault; the host profile was measured after a "
             "discarded warm-up run of each case, on memory the host had already backed (recycled), so its first-touch "
             "cost is the kernel's, not the hypervisor's.");
    if (approximated_)
      rep->add(" \\* a larger copy costs the host's first-touch fault of a folio of that size (allocation, zeroing and "
               "mapping of as many bytes): the host kernel has no mTHP CoW to measure.");
    rep->add("\n");
  }
  const std::string slug = "cow-" + workload_;
  if (!rss_.empty())
    rep->plots.push_back(line_plot(slug + "-rss", fmt::format("cow-bench {}: RSS over time (sum over processes)", workload_),
                                   "MiB", std::move(rss_)));
  if (!pss_.empty())
    rep->plots.push_back(line_plot(slug + "-pss",
                                   fmt::format("cow-bench {}: PSS over time (sum over processes: the memory used)", workload_),
                                   "MiB", std::move(pss_)));
  if (!misses_.empty())
    rep->plots.push_back(line_plot(slug + "-tlb-misses",
                                   fmt::format("cow-bench {}: page walks per 1000 TLB lookups ({})", workload_, geometry_),
                                   "walks per 1000 lookups", std::move(misses_)));
}

}  // namespace mmlab::cli::cowbench
