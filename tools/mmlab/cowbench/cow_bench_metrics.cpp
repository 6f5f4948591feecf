// The sampler, the geometry and the modelled time of `mmlab cow-bench`
// (cow_bench_metrics.h).
#include "cowbench/cow_bench_metrics.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>

#include "fmt/format.h"
#include "mmlab/cost.h"
#include "mmlab/trace.h"

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

namespace {

using U = Unit;
using S = Source;
using M = Merge;

// Copied bytes never written afterwards: copied minus what the copiers wrote, at least 0.
double copied_never_written(const MetricSet& m) {
  return std::max(0.0, m.value("bytes_copied") - m.value("bytes_written"));
}

// Page walks per 1000 TLB lookups over the phase (0 without lookups).
double misses_per_1000(const MetricSet& m) {
  const double lookups = m.value("metrics.tlb.lookups");
  return lookups > 0 ? 1000 * m.value("metrics.tlb.misses") / lookups : 0;
}

}  // namespace

namespace {

// The main table: latency, faults, copies, waste, memory.
const MetricDef kMainValues[] = {
    {.key = "latency_us", .unit = U::kUs, .source = S::kMeasured, .merge = M::kSamples,
     .what = "page-write latency, µs (snapshot: from each write's scheduled time)", .header = "{q} µs", .table = "main",
     .quantiles = {0.5, 0.9, 0.99, 0.999, 1.0}},
    {.key = "service_us", .unit = U::kUs, .source = S::kMeasured, .merge = M::kSamples,
     .what = "snapshot: each write's time from its actual start, µs", .header = "service {q} µs", .table = "main",
     .group = "snapshot", .quantiles = {0.5, 0.99, 1.0}},
    {.key = "writes", .unit = U::kCount, .source = S::kCounted, .merge = M::kSum, .what = "page writes timed"},
    {.key = "wp_copy", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "CoW faults that copied",
     .header = "CoW copies", .table = "main"},
    {.key = "wp_reuse", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "write faults that reused the page", .header = "reuses", .table = "main"},
    {.key = "anon_faults", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "anonymous first-touch faults"},
    {.key = "zero_faults", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "zero-page read faults"},
    {.key = "bytes_copied", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMean,
     .what = "bytes copied by CoW faults and MADV_COLLAPSE", .header = "copied MiB", .table = "main"},
    {.key = "bytes_written", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMean,
     .what = "distinct pages written after the fork (or the zero-page read), bytes"},
    {.key = "copied_never_written", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMean,
     .what = "bytes copied that the copying processes never wrote afterwards", .header = "copied never written MiB",
     .table = "main", .derive = copied_never_written},
    {.key = "zero_subpages_copied", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "copied pages whose bytes were all zero (cow. and collapse.zero_subpages_copied)",
     .header = "zero pages copied", .table = "main"},
    {.key = "exited_sharer_untouched", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMean,
     .what = "the parent's copied pages it had not begun to write when the sharer's exit returned, bytes",
     .header = "exited-sharer untouched MiB", .table = "main", .group = "exits"},
    {.key = "copied_after_exit", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMean,
     .what = "bytes copied after the sharer's exit returned", .header = "copied after exit MiB", .table = "main",
     .group = "exits"},
    {.key = "rss_peak", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMax,
     .what = "rss_anon summed over the processes at the end of the writes", .header = "peak RSS MiB", .table = "main"},
    {.key = "collapses", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "MADV_COLLAPSE successes",
     .header = "collapses", .table = "main"},
    {.key = "warnings", .unit = U::kCount, .source = S::kCounted, .merge = M::kSum,
     .what = "model warnings (cow.policy rfc's recorded violations)", .header = "warnings", .table = "main"},
    {.key = "violations", .unit = U::kCount, .source = S::kCounted, .merge = M::kSum,
     .what = "invariant-checker findings at the end (rfc only; any other fails the run)", .header = "violations",
     .table = "main"},
    {.key = "child_kbps_mean", .unit = U::kKBps, .source = S::kMeasured, .merge = M::kMean,
     .what = "usemem: KB/s per child, the mean", .header = "KB/s per child", .table = "main", .group = "usemem",
     .vs_base = true},
    {.key = "child_kbps_sum", .unit = U::kKBps, .source = S::kMeasured, .merge = M::kMean,
     .what = "usemem: KB/s of the children, summed"},
    {.key = "child_kbps", .unit = U::kKBps, .source = S::kMeasured, .merge = M::kSamples,
     .what = "usemem: each child's KB/s", .json = false},
    {.key = "elapsed_s", .unit = U::kSeconds, .source = S::kMeasured, .merge = M::kMean,
     .what = "the measured phase, wall clock"},
    {.key = "anon_fault_fallback", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "mTHP anonymous faults that fell back (every size)", .header = "anon_fault_fallback", .table = "main",
     .group = "fragmented"},
    {.key = "anon_fault_alloc", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "mTHP anonymous faults that allocated (every size)", .header = "anon_fault_alloc", .table = "main",
     .group = "fragmented"},
    {.key = "wp_fault_fallback", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "large-CoW faults that fell back (every size)", .header = "wp_fault_fallback", .table = "main",
     .group = "fragmented"},
    {.key = "wp_fault_alloc", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "large-CoW faults that allocated (every size)", .header = "wp_fault_alloc", .table = "main",
     .group = "fragmented"},
    {.key = "thp_fault_fallback", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "PMD THP faults that fell back", .header = "thp_fault_fallback", .table = "main", .group = "fragmented"},
    {.key = "filler_pages", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "fragmented: the filler's pages left mapped"},
};

// base-khugepaged: khugepaged's thread beside the writers.
const MetricDef kKhugepagedValues[] = {
    {.key = "khugepaged.speedup", .unit = U::kCount, .source = S::kCounted, .merge = M::kFirst,
     .what = "its sleeps last 1/speedup of their virtual length in host time"},
    {.key = "khugepaged.cpu_ms", .unit = U::kMs, .source = S::kMeasured, .merge = M::kMean,
     .what = "the thread's CPU time in its wakes"},
    {.key = "khugepaged.busy_ms", .unit = U::kMs, .source = S::kMeasured, .merge = M::kMean,
     .what = "the wakes' wall time (charged to the virtual clock)"},
    {.key = "khugepaged.collapse_ms", .unit = U::kMs, .source = S::kMeasured, .merge = M::kMean,
     .what = "wall time inside collapse_huge_page()"},
    {.key = "khugepaged.mmap_write_ms", .unit = U::kMs, .source = S::kMeasured, .merge = M::kMean,
     .what = "of which holding mmap_lock for write"},
    {.key = "khugepaged.mmap_write_max_ms", .unit = U::kMs, .source = S::kMeasured, .merge = M::kMax,
     .what = "the longest single write hold"},
    {.key = "khugepaged.virtual_s", .unit = U::kSeconds, .source = S::kCounted, .merge = M::kMean,
     .what = "the virtual clock's advance over the phase"},
    {.key = "khugepaged.wakes", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "khugepaged wakes"},
    {.key = "khugepaged.full_scans", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "full scans of the mm list"},
    {.key = "khugepaged.attempts", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "collapse_huge_page() calls"},
    {.key = "khugepaged.collapses", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "collapse_huge_page() calls that collapsed"},
    {.key = "khugepaged.write_locked", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "calls that took mmap_lock for write"},
};

// The memory table: the sampler's RSS and PSS, the TLB model's events.
const MetricDef kMemoryValues[] = {
    {.key = "metrics.sampled", .unit = U::kFlag, .source = S::kCounted, .merge = M::kMax,
     .what = "the sampler ran (not --no-sampler)"},
    {.key = "metrics.samples", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "samples taken"},
    {.key = "metrics.rss_peak", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMax,
     .what = "RSS summed over the sampled processes, its peak", .header = "peak RSS MiB", .table = "memory",
     .valid_if = "metrics.sampled"},
    {.key = "metrics.pss_peak", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMax,
     .what = "PSS summed over the sampled processes, its peak", .header = "peak PSS MiB", .table = "memory",
     .valid_if = "metrics.sampled"},
    {.key = "metrics.rss_mib_s", .unit = U::kMiBSeconds, .source = S::kMeasured, .merge = M::kMean,
     .what = "RSS integrated over the phase, MiB·s", .header = "RSS MiB·s", .table = "memory",
     .valid_if = "metrics.sampled"},
    {.key = "metrics.pss_mib_s", .unit = U::kMiBSeconds, .source = S::kMeasured, .merge = M::kMean,
     .what = "PSS integrated over the phase, MiB·s", .header = "PSS MiB·s", .table = "memory",
     .valid_if = "metrics.sampled"},
    {.key = "metrics.sampler_s", .unit = U::kSeconds, .source = S::kMeasured, .merge = M::kMean,
     .what = "the sampler's own time"},
    {.key = "metrics.tlb.geometry", .unit = U::kText, .source = S::kCounted, .merge = M::kFirst,
     .what = "tune tlb.geometry, or off"},
    {.key = "metrics.tlb.flushes", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "TLB flushes",
     .header = "flushes", .table = "memory"},
    {.key = "metrics.tlb.flush_full", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "full flushes", .header = "full", .table = "memory"},
    {.key = "metrics.tlb.flush_range", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "ranged flushes", .header = "ranged", .table = "memory"},
    {.key = "metrics.tlb.flush_single", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "single-page flushes", .header = "single", .table = "memory"},
    {.key = "metrics.tlb.ipis", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "flush IPIs",
     .header = "IPIs", .table = "memory"},
    {.key = "metrics.tlb.remote_flush_rounds", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "nr_tlb_remote_flush"},
    {.key = "metrics.tlb.lookups", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean, .what = "TLB lookups",
     .header = "lookups", .table = "memory", .group = "tlb"},
    {.key = "metrics.tlb.l1_misses", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "L1 dTLB misses", .header = "L1 misses", .table = "memory", .group = "tlb"},
    {.key = "metrics.tlb.misses", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "L2 TLB misses: page walks", .header = "L2 misses (walks)", .table = "memory", .group = "tlb"},
    {.key = "metrics.tlb.misses_per_1000_lookups", .unit = U::kPerThousand, .source = S::kCounted, .merge = M::kMean,
     .what = "page walks per 1000 lookups", .header = "walks per 1000", .table = "memory", .group = "tlb",
     .derive = misses_per_1000},
    {.key = "metrics.tlb.contpte_folds", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "contpte folds", .header = "contpte folds", .table = "memory", .group = "tlb"},
    {.key = "metrics.tlb.contpte_unfolds", .unit = U::kCount, .source = S::kCounted, .merge = M::kMean,
     .what = "contpte unfolds", .header = "unfolds", .table = "memory", .group = "tlb"},
    {.key = "metrics.tlb.l2_reach_peak_bytes", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMax,
     .what = "the L2 TLB's reach, its peak", .header = "L2 reach peak MiB", .table = "memory", .group = "tlb",
     .valid_if = "metrics.sampled"},
    {.key = "metrics.tlb.l2_reach_mean_bytes", .unit = U::kBytes, .source = S::kCounted, .merge = M::kMean,
     .what = "the L2 TLB's reach, its time average", .header = "L2 reach mean MiB", .table = "memory",
     .group = "tlb", .valid_if = "metrics.sampled"},
};

// With --profile: the model's copies times the host's costs.
const MetricDef kModelledValues[] = {
    {.key = "modelled.profile", .unit = U::kText, .source = S::kModelled, .merge = M::kFirst,
     .what = "the cost profile's name"},
    {.key = "modelled.kernel_ms", .unit = U::kMs, .source = S::kModelled, .merge = M::kFirst,
     .what = "modelled kernel CPU time of the measured phase, per seed"},
    {.key = "modelled.latency_us", .unit = U::kUs, .source = S::kModelled, .merge = M::kSamples,
     .what = "each timed write's modelled kernel and program time, µs: the profile's price of the events its thread "
             "counted during the write (its service; snapshot's queueing is not modelled)",
     .header = "modelled {q} µs", .table = "main", .group = "modelled", .quantiles = {0.5, 0.99, 1.0}},
    {.key = "modelled.user_ms", .unit = U::kMs, .source = S::kModelled, .merge = M::kFirst,
     .what = "modelled CPU time of the program's own loads and stores, per seed"},
    {.key = "modelled.total_ms", .unit = U::kMs, .source = S::kModelled, .merge = M::kFirst,
     .what = "modelled CPU time, kernel and program, per seed", .header = "modelled ms", .table = "main",
     .group = "modelled", .vs_base = true},
    {.key = "modelled.vs_base_pct", .unit = U::kCount, .source = S::kModelled, .merge = M::kFirst,
     .what = "the modelled total's change against base, in percent"},
    {.key = "modelled.extrapolated", .unit = U::kFlag, .source = S::kModelled, .merge = M::kFirst,
     .what = "rests on a copy larger than 4K on a write fault, which the host never runs"},
    {.key = "modelled.by_term", .unit = U::kText, .source = S::kModelled, .merge = M::kFirst,
     .what = "the modelled total per cost term, ms (\"term ms\" pairs, largest first)"},
};

}  // namespace

const std::vector<MetricDef>& cow_metrics() {
  static const std::vector<MetricDef> defs = [] {
    std::vector<MetricDef> v(std::begin(kMainValues), std::end(kMainValues));
    v.insert(v.end(), std::begin(kKhugepagedValues), std::end(kKhugepagedValues));
    v.insert(v.end(), std::begin(kMemoryValues), std::end(kMemoryValues));
    v.insert(v.end(), std::begin(kModelledValues), std::end(kModelledValues));
    return v;
  }();
  return defs;
}

void record_sampled(const Sampled& m, const std::string& geometry, MetricSet* out) {
  const TlbCounts& t = m.tlb;
  out->set("metrics.sampled", m.sampled);
  out->set("metrics.samples", static_cast<double>(m.samples.size()));
  out->set("metrics.rss_peak", static_cast<double>(m.rss_peak));
  out->set("metrics.pss_peak", static_cast<double>(m.pss_peak));
  out->set("metrics.rss_mib_s", m.rss_mib_s);
  out->set("metrics.pss_mib_s", m.pss_mib_s);
  out->set("metrics.sampler_s", m.sampler_s);
  out->set_text("metrics.tlb.geometry", geometry.empty() ? "off" : geometry);
  const std::pair<const char*, int64_t> counts[] = {
      {"lookups", t.lookups},        {"l1_misses", t.l1_misses},     {"misses", t.l2_misses},
      {"flushes", t.flushes},        {"flush_full", t.flush_full},   {"flush_range", t.flush_range},
      {"flush_single", t.flush_single}, {"ipis", t.ipis},            {"remote_flush_rounds", t.remote_flush_rounds},
      {"contpte_folds", t.folds},    {"contpte_unfolds", t.unfolds}};
  for (const auto& [name, v] : counts) out->set(fmt::format("metrics.tlb.{}", name), static_cast<double>(v));
  out->set("metrics.tlb.l2_reach_peak_bytes", static_cast<double>(m.l2_reach_peak));
  out->set("metrics.tlb.l2_reach_mean_bytes", m.l2_reach_mean);
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
  // Counter tracks of a --trace: what the report's curves plot.
  trace::counter("rss_bytes", x.rss);
  if (with_pss) trace::counter("pss_bytes", x.pss);
  trace::counter("tlb_lookups", x.lookups);
  trace::counter("tlb_l2_misses", x.l2_misses);
  trace::counter("tlb_l2_reach_bytes", x.l2_reach);
  return x;
}

void Sampler::loop() {
  trace::adopt_system(trace_pid_);  // its counters go on the System's process in a trace
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
  trace_pid_ = trace::current_system();
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

void Sampler::stop(Sampled* m) {
  const double end_s = std::chrono::duration<double>(Clock::now() - t0_).count();
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  *m = Sampled{};
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

ModelledPhase modelled_phase(const std::map<std::string, int64_t>& counts, const host::CostProfile& p) {
  const cost::Prediction pr = cost::predict(p, counts);
  ModelledPhase m;
  m.kernel_ms = pr.kernel_ns / 1e6;
  m.user_ms = pr.user_ns / 1e6;
  m.lo_ms = pr.lo_ns / 1e6;
  m.hi_ms = pr.hi_ns / 1e6;
  m.missing = pr.missing;
  m.missing.insert(m.missing.end(), pr.not_exercised.begin(), pr.not_exercised.end());
  for (const auto& [id, ns] : pr.by_term) m.by_term_ms.emplace_back(id, ns / 1e6);
  for (unsigned o = 1; o <= PMD_ORDER; o++) {
    auto it = counts.find(fmt::format("cow.copy.order{}", o));
    auto un = counts.find(fmt::format("cow.unshare.order{}", o));
    if ((it != counts.end() && it->second > 0) || (un != counts.end() && un->second > 0))
      m.extrapolated.push_back(fmt::format("copy_o{}", o));
  }
  if (!m.extrapolated.empty()) m.extrapolated.push_back("fault_wp_copy");
  return m;
}

}  // namespace mmlab::cli::cowbench

namespace mmlab::cli::cowbench {

namespace {

// At most this many points of a curve go into a plot.
constexpr size_t kPlotPoints = 200;

// Every step-th sample, the last one always.
template <typename F>
PlotSeries curve_series(const std::string& title, const std::vector<Sample>& v, F y) {
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

void MetricsReport::add(const std::string& column, MetricSet* m, const std::vector<Sample>& curve,
                        const std::map<std::string, int64_t>& counts) {
  rows_.push_back({column, m, ""});
  if (m->value("metrics.sampled") != 0) {
    rss_.push_back(curve_series(column, curve, [](const std::vector<Sample>& v, size_t i) {
      return static_cast<double>(v[i].rss) / (1 << 20);
    }));
    std::vector<Sample> with_pss;
    std::copy_if(curve.begin(), curve.end(), std::back_inserter(with_pss), [](const Sample& x) { return x.has_pss; });
    pss_.push_back(curve_series(column, with_pss, [](const std::vector<Sample>& v, size_t i) {
      return static_cast<double>(v[i].pss) / (1 << 20);
    }));
    pss_reads_min_ = pss_reads_min_ ? std::min(pss_reads_min_, with_pss.size()) : with_pss.size();
    pss_reads_max_ = std::max(pss_reads_max_, with_pss.size());
    if (tlb()) misses_.push_back(curve_series(column, curve, walks_per_1000));
  }
  if (!profile_) return;
  std::map<std::string, int64_t> per_seed = counts;
  for (auto& [n, v] : per_seed) v = static_cast<int64_t>(static_cast<double>(v) / std::max(1u, m->runs()));
  modelled_.push_back({column, m, modelled_phase(per_seed, *profile_)});
}

// The modelled time of each column's measured phase, and its change
// against the first column (base): the model's counts are the same in every
// run of a deterministic workload, so these figures are too. Set before the
// main table, which shows the total and its change against base.
void MetricsReport::compute_modelled() {
  const double base = modelled_.empty() ? 0 : modelled_.front().t.total_ms();
  for (auto& r : modelled_) {
    const double vs = base > 0 ? (r.t.total_ms() / base - 1) * 100 : 0;
    r.m->set_text("modelled.profile", profile_->name);
    r.m->set("modelled.kernel_ms", r.t.kernel_ms);
    r.m->set("modelled.user_ms", r.t.user_ms);
    r.m->set("modelled.total_ms", r.t.total_ms());
    r.m->set("modelled.vs_base_pct", vs);
    r.m->set("modelled.extrapolated", !r.t.extrapolated.empty());
    auto terms = r.t.by_term_ms;
    std::stable_sort(terms.begin(), terms.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string s;
    for (const auto& [id, ms] : terms) s += fmt::format("{}{} {:.3f}", s.empty() ? "" : ", ", id, ms);
    r.m->set_text("modelled.by_term", s);
  }
}

void MetricsReport::modelled_table(Report* rep) {
  rep->add(fmt::format("\n#### modelled (profile {}): the measured phase's counts x the profile's costs, per seed\n\n",
                       profile_->name));
  rep->add("| column | kernel ms | program ms | total ms | band (terms' 95%) | vs base | extrapolated terms |\n"
           "|---|---:|---:|---:|---|---:|---|\n");
  bool any_missing = false;
  for (auto& r : modelled_) {
    std::string ex;
    for (auto& e : r.t.extrapolated) ex += (ex.empty() ? "" : ", ") + e;
    any_missing |= !r.t.missing.empty();
    rep->add(fmt::format("| {} | {:.3f} | {:.3f} | {:.3f} | {:.3f}-{:.3f} | {:+.1f}% | {} |\n", r.column, r.t.kernel_ms,
                         r.t.user_ms, r.t.total_ms(), r.t.lo_ms, r.t.hi_ms, r.m->value("modelled.vs_base_pct"),
                         ex.empty() ? "-" : ex));
  }
  rep->add(fmt::format(
      "\nModelled, not measured: the model's counts over the measured phase times the costs profile {} measured on "
      "its host (docs/BENCH.md, \"The cost model\"); identical in every run where the counts are (usemem with ordered "
      "children, cow-rand, prefork, read-then-write); a workload that races (fork-exec's first writer, snapshot, the "
      "khugepaged column) differs from seed to seed. `vs base`: the total's change against the first column. "
      "Extrapolated: a copy larger than 4K on a write fault, which the host kernel never makes; it costs the "
      "per-order copy measured on the host (copy_oN) plus the 4K CoW fault's fitted cost (fault_wp_copy).{}\n",
      profile_->name, any_missing ? " Some terms counted here have no calibrated cost in the profile and count as 0." : ""));
  by_term_table(rep);
}

// Where each column's modelled time goes: every term that is at least 3% of
// some column's total, in ms per seed, so that a difference between columns
// reads as the events behind it.
void MetricsReport::by_term_table(Report* rep) {
  std::vector<std::string> shown;
  for (const cost::TermDef& d : cost::cost_terms())
    for (auto& r : modelled_)
      for (const auto& [id, ms] : r.t.by_term_ms)
        if (id == d.id && ms >= 0.03 * r.t.total_ms() && std::find(shown.begin(), shown.end(), id) == shown.end())
          shown.push_back(id);
  if (shown.empty()) return;
  std::string head = "| term |", rule = "|---|";
  for (auto& r : modelled_) head += " " + r.column + " |", rule += "---:|";
  rep->add("\nWhere the modelled time goes (ms per seed; terms of at least 3% of some column's total):\n\n" + head + "\n" +
           rule + "\n");
  for (const std::string& id : shown) {
    std::string row = "| " + id + " |";
    for (auto& r : modelled_) {
      double ms = 0;
      for (const auto& [t, v] : r.t.by_term_ms)
        if (t == id) ms = v;
      row += fmt::format(" {:.1f} |", ms);
    }
    rep->add(row + "\n");
  }
  std::string missing;
  for (auto& r : modelled_)
    for (const std::string& t : r.t.missing)
      if (missing.find(t) == std::string::npos) missing += (missing.empty() ? "" : ", ") + t;
  if (!missing.empty()) rep->add("\nCounted but without a cost in this profile (0 above): " + missing + ".\n");
}

void MetricsReport::finish(Report* rep) {
  rep->add(fmt::format("\n### {}: RSS and PSS over the measured phase, TLB flushes and IPIs{}\n\n", workload_,
                       tlb() ? fmt::format(", TLB misses (tlb.geometry {})", geometry_) : ""));
  rep->add(metric_table(cow_metrics(), "memory", tlb() ? std::set<std::string>{"tlb"} : std::set<std::string>{}, rows_));
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
  if (profile_) modelled_table(rep);
  const std::string slug = "cow-" + workload_;
  if (!rss_.empty())
    rep->plots.push_back(line_plot(slug + "-rss", fmt::format("cow-bench {}: RSS over time (sum over processes)", workload_),
                                   "MiB", std::move(rss_)));
  if (!pss_.empty()) {
    // PSS is read as seldom as keeps its page-table walks under 1% of a
    // CPU (see Sampler): often only at the phase's start and end. The
    // title says how many points a line has, so that a straight line
    // between two reads is not taken for a measured ramp.
    const std::string reads = pss_reads_min_ == pss_reads_max_
                                  ? std::to_string(pss_reads_min_)
                                  : fmt::format("{}-{}", pss_reads_min_, pss_reads_max_);
    Plot p = line_plot(slug + "-pss", fmt::format("cow-bench {}: PSS, sum over processes ({} reads a line)", workload_, reads),
                       "MiB", std::move(pss_));
    p.xlabel += "; PSS read at the start, the end, and between as often as 1% of a CPU allows";
    rep->plots.push_back(std::move(p));
  }
  if (!misses_.empty())
    rep->plots.push_back(line_plot(slug + "-tlb-misses",
                                   fmt::format("cow-bench {}: page walks per 1000 TLB lookups ({})", workload_, geometry_),
                                   "walks per 1000 lookups", std::move(misses_)));
}

}  // namespace mmlab::cli::cowbench
