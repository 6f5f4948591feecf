// The workloads and columns of `mmlab cow-bench` (cow_bench.h).
#include "cowbench/cow_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "mmlab/cost.h"
#include "mmlab/system.h"
#include "mmlab/trace.h"

namespace mmlab::cli::cowbench {

namespace {

using Clock = std::chrono::steady_clock;

double ns_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::nano>(b - a).count(); }

// The base, rfc and alternative columns use 64K folios: the arm64 contpte
// block the series was posted for.
Column col(std::string name, unsigned kb, const char* policy, int max_order = -1, bool whole = false,
           Extra extra = Extra::kNone) {
  return Column{std::move(name), kb, policy, max_order, whole, extra};
}

struct Run {
  std::unique_ptr<System> sys;
  Process* parent = nullptr;
  Process* filler = nullptr;  // fragmented's: holds memory, never part of the workload
  uint64_t addr = 0;
};

// The workload's processes: every process but fragmented's filler.
std::vector<Process*> workload_procs(const Run& r) {
  std::vector<Process*> v;
  for (Process* q : r.sys->processes())
    if (q != r.filler) v.push_back(q);
  return v;
}

// The mTHP sizes a column enables: c.folio_kb, and the size of a
// cow.max_order cap, which only the CoW path then uses (a CoW copies at an
// enabled order). khugepaged's column: PMD THP for MADV_HUGEPAGE regions
// only, so that the faults stay at c.folio_kb until the region is advised
// once it is populated.
void enable_sizes(System* s, const Column& c) {
  const unsigned cap_kb = c.max_order >= 2 ? 4u << c.max_order : 0;
  for (unsigned kb = 16; kb <= 2048; kb *= 2)
    (void)s->sysfs_write(fmt::format("transparent_hugepage/hugepages-{}kB/enabled", kb),
                         kb == c.folio_kb || kb == cap_kb ? "always" : "never");
  if (c.extra == Extra::kKhugepaged) (void)s->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "madvise");
}

}  // namespace

int apply_column(System* s, const Column& c, std::string* err) {
  (void)s->sysfs_write("transparent_hugepage/enabled", "never");
  enable_sizes(s, c);  // the region faults in with c.folio_kb folios
  if (int t = s->tune("cow.policy", c.policy); t < 0) {
    *err = fmt::format("tune cow.policy {}: {}", c.policy, errno_name(-t));
    return t;
  }
  if (c.max_order >= 0) (void)s->tune("cow.max_order", std::to_string(c.max_order));
  if (c.reuse_whole) (void)s->tune("cow.reuse", "whole");
  if (c.extra == Extra::kKhugepaged) (void)s->tune("khugepaged.mthp", "on");
  return 0;
}

namespace {

// fragmented's RAM is twice the others': half of it ends up in the filler's
// order-0 holes, which are what the workload then allocates from.
uint64_t ram_of_run(const Params& p, unsigned nr_procs, bool fragmented) {
  const uint64_t need = fragmented ? 2 * p.size * (nr_procs + 2) + (64ull << 20) : p.size * (nr_procs + 2) + (256ull << 20);
  return (need + (4ull << 20) - 1) & ~((4ull << 20) - 1);
}

int set_up(const Column& c, const Params& p, unsigned nr_procs, bool fragmented, Run* r, std::string* err) {
  SystemConfig cfg;
  cfg.ram_bytes = ram_of_run(p, nr_procs, fragmented);
  int e = 0;
  r->sys = System::create(cfg, &e);
  if (!r->sys) {
    *err = fmt::format("System::create: {}", errno_name(-e));
    return e ? e : -ENOMEM;
  }
  System* s = r->sys.get();
  if (int t = apply_column(s, c, err); t < 0) return t;
  if (int t = set_geometry(s, p.geometry, err); t < 0) return t;
  r->parent = s->new_process("parent");
  // PMD-aligned, so that MADV_COLLAPSE has whole PMD ranges to work on.
  const long raw = r->parent->mmap(0, p.size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = fmt::format("mmap: {}", errno_name(static_cast<int>(-raw)));
    return static_cast<int>(raw);
  }
  r->addr = (static_cast<uint64_t>(raw) + PMD_SIZE - 1) & ~(PMD_SIZE - 1);
  return 0;
}

// The parent's memory before the fork: every page written (the data a
// process has), or for usemem populated as its --prefault does it
// (MAP_POPULATE of a writable private mapping: zero-filled folios faulted in
// for write, so its children's CoW copies zeroes).
bool prefault(Run* r, const Params& p, uint8_t byte, bool populate) {
  if (populate) return r->parent->madvise(r->addr, p.size, MADV_POPULATE_WRITE) == 0;
  return r->parent->fill(r->addr, byte, p.size).ok();
}

struct Writer {
  Process* proc = nullptr;
  std::vector<uint64_t> pages;     // the page of each write, in order
  std::vector<double> due_ns;      // snapshot: each write's scheduled time from the start (empty: back to back, 4K each)
  std::vector<uint16_t> offs;      // snapshot: each 64-byte write's offset in its page
  bool track_starts = false;       // record each write's start (the exited-sharer waste needs them)
  std::vector<double> ns, service_ns;
  std::vector<Clock::time_point> starts;
  double seconds = 0;
  bool ok = true;
  // Each timed write's modelled ns: the profile's price of the events its
  // thread counted during the write (EventTally, open on the writer's thread).
  const cost::TallyPricer* pricer = nullptr;
  const EventTally* tally = nullptr;
  std::vector<double> modelled_ns;
  double priced() const { return tally ? pricer->ns(*tally) : 0; }
};

Writer writer(Process* q, std::vector<uint64_t> pages) {
  Writer w;
  w.proc = q;
  w.pages = std::move(pages);
  return w;
}

// Every page of w.pages written whole with `byte`, back to back, each timed
// unless !timed.
bool write_pages(Writer* w, uint64_t addr, uint8_t byte, bool timed) {
  if (timed) w->ns.reserve(w->pages.size());
  for (uint64_t i : w->pages) {
    const double before = w->priced();
    const auto t0 = Clock::now();
    if (w->track_starts) w->starts.push_back(t0);
    if (!w->proc->fill(addr + i * PAGE_SIZE, byte, PAGE_SIZE).ok()) return false;
    if (timed) w->ns.push_back(ns_between(t0, Clock::now()));
    if (timed && w->tally) w->modelled_ns.push_back(w->priced() - before);
  }
  return true;
}

// The open-loop stream: write i waits for its scheduled time (spinning: the
// arrivals are microseconds apart), and its latency runs from that time, so
// a write queued behind a slow one counts its wait (coordinated omission
// corrected); its service time runs from its actual start.
bool write_scheduled(Writer* w, uint64_t addr, uint8_t byte) {
  uint8_t buf[64];
  std::memset(buf, byte, sizeof(buf));
  w->ns.reserve(w->pages.size());
  w->service_ns.reserve(w->pages.size());
  const auto epoch = Clock::now();
  for (size_t i = 0; i < w->pages.size(); i++) {
    const auto due = epoch + std::chrono::nanoseconds(static_cast<int64_t>(w->due_ns[i]));
    while (Clock::now() < due) {
    }
    const double before = w->priced();
    const auto t0 = Clock::now();
    w->starts.push_back(t0);
    if (!w->proc->write(addr + w->pages[i] * PAGE_SIZE + w->offs[i], buf, sizeof(buf)).ok()) return false;
    const auto t1 = Clock::now();
    w->ns.push_back(ns_between(due, t1));
    w->service_ns.push_back(ns_between(t0, t1));
    if (w->tally) w->modelled_ns.push_back(w->priced() - before);
  }
  return true;
}

// Page popularity by Zipf's law (rank r weighs 1/r^s) over the pages in a
// seeded random order, so that the hot pages are scattered over the region
// as a hash table's are; sampled by inverting the CDF.
class ZipfPages {
 public:
  ZipfPages(uint64_t n, double s, uint64_t seed) : cdf_(n), page_(n), rng_(seed) {
    double sum = 0;
    for (uint64_t r = 0; r < n; r++) cdf_[r] = sum += 1.0 / std::pow(static_cast<double>(r + 1), s);
    for (double& x : cdf_) x /= sum;
    std::iota(page_.begin(), page_.end(), uint64_t{0});
    std::shuffle(page_.begin(), page_.end(), rng_);
  }
  uint64_t next() {
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const size_t r = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return page_[std::min(r, page_.size() - 1)];
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::vector<double> cdf_;
  std::vector<uint64_t> page_;
  std::mt19937_64 rng_;
};

// snapshot's trace, made before the run from the seed alone: Poisson
// arrivals at p.snapshot_rate, Zipfian pages, 64-byte-aligned offsets.
Writer snapshot_writer(Process* q, const Params& p) {
  Writer w;
  w.proc = q;
  ZipfPages z(p.size / PAGE_SIZE, p.zipf_s, p.seed * 104729);
  double t = 0;
  for (uint64_t i = 0; i < p.snapshot_writes; i++) {
    const double u = static_cast<double>(z.rng()() >> 11) * 0x1.0p-53;
    t += -std::log1p(-u) / p.snapshot_rate * 1e9;
    w.due_ns.push_back(t);
    w.pages.push_back(z.next());
    w.offs.push_back(static_cast<uint16_t>((z.rng()() % (PAGE_SIZE / 64)) * 64));
  }
  w.track_starts = true;
  return w;
}

std::vector<uint64_t> all_pages(const Params& p) {
  std::vector<uint64_t> v(p.size / PAGE_SIZE);
  for (uint64_t i = 0; i < v.size(); i++) v[i] = i;
  return v;
}

// A random share of the pages, each at most once, in random order.
std::vector<uint64_t> some_pages(const Params& p, uint64_t seed) {
  std::vector<uint64_t> v = all_pages(p);
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  const uint64_t n = std::max<uint64_t>(1, static_cast<uint64_t>(p.write_fraction * static_cast<double>(v.size())));
  v.resize(std::min<uint64_t>(n, v.size()));
  return v;
}

// Each writer on its own thread, all at once, as forked children run, and
// `beside` (if any) on one more (a sharer's exec or BGSAVE); with
// kCollapseAfterFork each writer first collapses the region (MADV_COLLAPSE).
void run_writers(std::vector<Writer>* ws, uint64_t addr, uint64_t size, Extra extra, bool timed,
                 const std::function<void()>& beside = {}) {
  std::vector<std::thread> t;
  // In a --trace, the writers' events belong to the System they write in.
  const uint32_t trace_pid = trace::current_system();
  if (beside)
    t.emplace_back([&beside, trace_pid] {  // first: the writers race it, never get a head start
      trace::adopt_system(trace_pid);
      beside();
    });
  for (size_t k = 0; k < ws->size(); k++) {
    t.emplace_back([ws, k, addr, size, extra, timed, trace_pid] {
      trace::adopt_system(trace_pid);
      Writer& w = (*ws)[k];
      std::optional<EventTally> tally;
      if (w.pricer) w.tally = &tally.emplace();
      const auto t0 = Clock::now();  // the collapse is the writer's time too
      if (extra == Extra::kCollapseAfterFork) (void)w.proc->madvise(addr, size, MADV_COLLAPSE);
      const auto byte = static_cast<uint8_t>(0x40 + k);
      w.ok = w.due_ns.empty() ? write_pages(&w, addr, byte, timed) : write_scheduled(&w, addr, byte);
      w.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      w.tally = nullptr;
    });
  }
  for (auto& th : t) th.join();
}

int64_t distinct_pages(const std::vector<uint64_t>& pages) {
  std::vector<uint64_t> v = pages;
  std::sort(v.begin(), v.end());
  return std::unique(v.begin(), v.end()) - v.begin();
}

// What the writers did: their latencies, the distinct bytes they wrote, and
// the workload's RSS at the end of the writes.
void account(const Run& r, const std::vector<Writer>& ws, MetricSet* m) {
  int64_t written = 0, rss = 0;
  size_t writes = 0;
  std::vector<double> us, modelled_us;
  for (const Writer& w : ws) {
    for (double ns : w.ns) us.push_back(ns / 1000);
    for (double ns : w.modelled_ns) modelled_us.push_back(ns / 1000);
    writes += w.ns.size();
    written += distinct_pages(w.pages) * static_cast<int64_t>(PAGE_SIZE);
  }
  m->add_samples("latency_us", us);
  if (!modelled_us.empty()) m->add_samples("modelled.latency_us", modelled_us);
  m->set("writes", static_cast<double>(writes));
  m->set("bytes_written", static_cast<double>(written));
  for (Process* q : workload_procs(r)) rss += q->rss_anon();
  m->set("rss_peak", static_cast<double>(rss));
}

// The frame behind each page of the parent's region.
std::vector<uint64_t> region_pfns(Process* q, uint64_t addr, uint64_t size) {
  std::vector<uint64_t> v(size / PAGE_SIZE);
  for (uint64_t i = 0; i < v.size(); i++) v[i] = q->page_info(addr + i * PAGE_SIZE).pfn;
  return v;
}

// The parent's pages whose frame changed since the fork (they were copied)
// and that the parent had not begun to write when the sharer's exit returned
// at `exited`: copied for a sharer that went away before the copy was used.
int64_t exited_sharer_untouched(const Run& r, const Params& p, const std::vector<uint64_t>& pfn_at_fork,
                                const Writer& parent, Clock::time_point exited) {
  std::vector<bool> touched(pfn_at_fork.size());
  for (size_t j = 0; j < parent.pages.size() && j < parent.starts.size(); j++)
    if (parent.starts[j] < exited) touched[parent.pages[j]] = true;
  const std::vector<uint64_t> now = region_pfns(r.parent, r.addr, p.size);
  int64_t n = 0;
  for (size_t i = 0; i < now.size(); i++) n += now[i] != pfn_at_fork[i] && !touched[i] ? 1 : 0;
  return n * static_cast<int64_t>(PAGE_SIZE);
}

// fragmented: a filler process faults nearly all free memory at 4K, then
// drops (MADV_DONTNEED) its pages on even frames, so that no two free frames
// are buddies and the only free blocks above order 0 are in the reserve it
// leaves; it stays alive. The column's sizes are enabled again afterwards.
int fragment(Run* r, const Column& c, MetricSet* m, std::string* err) {
  System* s = r->sys.get();
  for (unsigned kb = 16; kb <= 2048; kb *= 2)
    (void)s->sysfs_write(fmt::format("transparent_hugepage/hugepages-{}kB/enabled", kb), "never");
  Process* f = r->filler = s->new_process("filler");
  constexpr uint64_t kReserve = 1ull << 20, kChunk = 64ull << 10;
  const uint64_t len = s->nr_free_pages() * PAGE_SIZE & ~(PMD_SIZE - 1);
  const long a = f->mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (a < 0) {
    *err = fmt::format("filler mmap: {}", errno_name(static_cast<int>(-a)));
    return static_cast<int>(a);
  }
  const auto base = static_cast<uint64_t>(a);
  uint64_t filled = 0;
  while (filled + kChunk <= len && s->nr_free_pages() * PAGE_SIZE > kReserve + kChunk) {
    if (!f->fill(base + filled, 0x33, kChunk).ok()) {
      *err = "the filler's fault failed";
      return -ENOMEM;
    }
    filled += kChunk;
  }
  int64_t kept = 0;
  for (uint64_t off = 0; off < filled; off += PAGE_SIZE) {
    if (f->page_info(base + off).pfn % 2) {
      kept++;
      continue;
    }
    if (int e = f->madvise(base + off, PAGE_SIZE, MADV_DONTNEED); e < 0) {
      *err = fmt::format("filler MADV_DONTNEED: {}", errno_name(-e));
      return e;
    }
  }
  m->set("filler_pages", static_cast<double>(kept));
  enable_sizes(s, c);
  return 0;
}

// khugepaged beside the writers: its thread, paced, from the start of the
// measured phase to the end of the writes. The figures are the phase's.
class KhugepagedBeside {
 public:
  KhugepagedBeside(System* s, uint64_t speedup) : s_(s), speedup_(speedup) {
    t0_ = s->collapse_timing();
    w0_ = s->khugepaged_timing();
    clock0_ = s->clock_ns();
    wakes0_ = s->counter("khugepaged.wakes");
    scans0_ = full_scans();
    started_ = s->start_khugepaged_thread(speedup) == 0;
    wait_first_wake();
  }
  ~KhugepagedBeside() { stop(nullptr); }
  KhugepagedBeside(const KhugepagedBeside&) = delete;
  KhugepagedBeside& operator=(const KhugepagedBeside&) = delete;

  // Stops the thread; with `out`, its work over the phase as khugepaged.*.
  void stop(MetricSet* out) {
    if (started_) s_->stop_khugepaged_thread();
    started_ = false;
    if (!out) return;
    const CollapseTiming t = s_->collapse_timing();
    const KhugepagedTiming w = s_->khugepaged_timing();
    auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
    out->set("khugepaged.speedup", static_cast<double>(speedup_));
    out->set("khugepaged.cpu_ms", ms(w.cpu_ns - w0_.cpu_ns));
    out->set("khugepaged.busy_ms", ms(w.busy_ns - w0_.busy_ns));
    out->set("khugepaged.collapse_ms", ms(t.total_ns - t0_.total_ns));
    out->set("khugepaged.mmap_write_ms", ms(t.mmap_write_ns - t0_.mmap_write_ns));
    // No collapse runs before the phase (nothing is advised until the
    // region is populated, and no MADV_COLLAPSE in this column): the
    // System's longest hold is the phase's.
    out->set("khugepaged.mmap_write_max_ms", ms(t.mmap_write_max_ns));
    out->set("khugepaged.virtual_s", static_cast<double>(s_->clock_ns() - clock0_) / 1e9);
    out->set("khugepaged.wakes", static_cast<double>(s_->counter("khugepaged.wakes") - wakes0_));
    out->set("khugepaged.full_scans", static_cast<double>(full_scans() - scans0_));
    out->set("khugepaged.attempts", static_cast<double>(t.attempts - t0_.attempts));
    out->set("khugepaged.collapses", static_cast<double>(t.collapsed - t0_.collapsed));
    out->set("khugepaged.write_locked", static_cast<double>(t.write_locked - t0_.write_locked));
  }

 private:
  // The thread's first wake is due at once; the writers start once it has
  // begun (and then race its scan), so that a loaded host cannot leave a
  // short phase without any wake. A kthread that never wakes (no THP size
  // it serves) is waited for a second at most.
  void wait_first_wake() const {
    const auto give_up = Clock::now() + std::chrono::seconds(1);
    while (started_ && s_->counter("khugepaged.wakes") == wakes0_ && Clock::now() < give_up) std::this_thread::yield();
  }
  int64_t full_scans() const {
    std::string v;
    return s_->sysfs_read("transparent_hugepage/khugepaged/full_scans", &v) == 0 ? std::stoll(v) : 0;
  }
  System* s_;
  uint64_t speedup_;
  CollapseTiming t0_;
  KhugepagedTiming w0_;
  uint64_t clock0_ = 0;
  int64_t wakes0_ = 0, scans0_ = 0;
  bool started_ = false;
};

// A statistic summed over every mTHP size.
int64_t mthp_sum(const System* s, const char* name) {
  int64_t n = 0;
  for (unsigned order = 2; order <= PMD_ORDER; order++) n += std::max<int64_t>(0, s->mthp_stat(order, name));
  return n;
}

int64_t bytes_copied(const System* s) { return s->counter("cow.bytes_copied") + s->counter("collapse.bytes_copied"); }

// The counted values of a run: each the difference of a System reading
// over the measured phase (the set-up's faults and copies excluded).
struct CountedValue {
  const char* key;  // cow_metrics()
  int64_t (*read)(const System* s);
};
const CountedValue kCounted[] = {
    {"bytes_copied", bytes_copied},
    {"wp_copy", [](const System* s) { return s->counter("fault.wp_copy"); }},
    {"wp_reuse", [](const System* s) { return s->counter("fault.wp_reuse"); }},
    {"anon_faults", [](const System* s) { return s->counter("fault.anon"); }},
    {"zero_faults", [](const System* s) { return s->counter("fault.zero"); }},
    {"collapses", [](const System* s) { return s->counter("collapse.success"); }},
    {"zero_subpages_copied",
     [](const System* s) { return s->counter("cow.zero_subpages_copied") + s->counter("collapse.zero_subpages_copied"); }},
    {"anon_fault_fallback", [](const System* s) { return mthp_sum(s, "anon_fault_fallback"); }},
    {"thp_fault_fallback", [](const System* s) { return s->vmstat("thp_fault_fallback"); }},
    {"wp_fault_fallback", [](const System* s) { return mthp_sum(s, "wp_fault_fallback"); }},
    {"anon_fault_alloc", [](const System* s) { return mthp_sum(s, "anon_fault_alloc"); }},
    {"wp_fault_alloc", [](const System* s) { return mthp_sum(s, "wp_fault_alloc"); }},
};

// Why a column does not apply to a workload, or nullptr.
const char* not_applicable(const Workload& w, const Column& c) {
  if (is_trace_workload(w))
    return c.extra == Extra::kDontfork || c.extra == Extra::kCollapseAfterFork ? "a recorded program's calls are its own"
                                                                              : nullptr;
  const bool forks = w.name != "read-then-write";
  if (c.extra == Extra::kDontfork && w.name != "fork-exec") return "the children use the region";
  if (c.extra == Extra::kCollapseAfterFork && (!forks || w.name == "fork-exec"))
    return forks ? "the child never writes" : "no fork";
  return nullptr;
}

// One run of a workload under a column, step by step: set up, prepare the
// writers (fork, or read the zero page), the measured phase, the figures,
// and the end (every process exits, then the invariant checker).
class WorkloadRun {
 public:
  WorkloadRun(const Workload& w, const Column& c, const Params& p, Result* out)
      : w_(w), c_(c), p_(p), out_(out), forks_(w.name != "read-then-write"),
        sharer_exits_(w.name == "fork-exec" || w.name == "snapshot"), fragmented_(w.name == "fragmented") {}
  int set_up(std::string* err);
  int prepare(std::string* err);
  int measure(std::string* err);
  void record();
  int finish(std::string* err);

 private:
  unsigned nr_children() const { return (w_.name == "usemem" || w_.name == "prefork") ? p_.procs : forks_ ? 1 : 0; }
  int advise_hugepage(std::string* err);
  int prepare_zero_page_reads(std::string* err);
  int prepare_fork(std::string* err);
  void writers_after_fork(const std::vector<Process*>& kids);
  void begin_measured(std::vector<Process*> procs);

  const Workload& w_;
  const Column& c_;
  const Params& p_;
  Result* out_;
  const bool forks_, sharer_exits_, fragmented_;
  Run r_;
  System* s_ = nullptr;
  std::vector<int64_t> counted0_;
  std::map<std::string, int64_t> counts0_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<KhugepagedBeside> khugepaged_;
  std::vector<Writer> ws_;
  std::function<void()> beside_;
  std::vector<uint64_t> pfn_at_fork_;
  Clock::time_point exited_{};
  int64_t copied_at_exit_ = 0;
  bool reader_ok_ = true;  // snapshot's child: its reads all succeeded
  double elapsed_s_ = 0;
};

int WorkloadRun::set_up(std::string* err) {
  if (int e = mmlab::cli::cowbench::set_up(c_, p_, nr_children(), fragmented_, &r_, err); e < 0) return e;
  s_ = r_.sys.get();
  if (fragmented_)
    if (int e = fragment(&r_, c_, &out_->m, err); e < 0) return e;
  for (const CountedValue& v : kCounted) counted0_.push_back(v.read(s_));
  counts0_ = s_->all_counters();
  return 0;
}

// khugepaged's column: the region advised MADV_HUGEPAGE once populated
// (which is when the kernel hands an mm to khugepaged; a child inherits
// VM_HUGEPAGE and is registered by fork).
int WorkloadRun::advise_hugepage(std::string* err) {
  if (c_.extra != Extra::kKhugepaged || r_.parent->madvise(r_.addr, p_.size, MADV_HUGEPAGE) == 0) return 0;
  *err = "MADV_HUGEPAGE failed";
  return -EINVAL;
}

// The measured phase starts after the fork (or the zero-page reads); the
// sampler follows the processes that live through it, khugepaged's thread
// runs beside the writers.
void WorkloadRun::begin_measured(std::vector<Process*> procs) {
  sampler_ = std::make_unique<Sampler>(s_, std::move(procs), p_.sample);
  sampler_->start();
  if (c_.extra == Extra::kKhugepaged) khugepaged_ = std::make_unique<KhugepagedBeside>(s_, p_.khugepaged_speedup);
}

int WorkloadRun::prepare(std::string* err) { return forks_ ? prepare_fork(err) : prepare_zero_page_reads(err); }

// read-then-write: every page read first (the zero page), then written.
int WorkloadRun::prepare_zero_page_reads(std::string* err) {
  std::vector<uint8_t> buf(PAGE_SIZE);
  for (uint64_t off = 0; off < p_.size; off += PAGE_SIZE)
    if (!r_.parent->read(r_.addr + off, buf.data(), PAGE_SIZE).ok()) {
      *err = "read fault failed";
      return -EFAULT;
    }
  ws_.push_back(writer(r_.parent, all_pages(p_)));
  if (int e = advise_hugepage(err)) return e;
  begin_measured({r_.parent});
  return 0;
}

int WorkloadRun::prepare_fork(std::string* err) {
  if (!prefault(&r_, p_, 0x11, w_.name == "usemem")) {
    *err = "prefault failed";
    return -ENOMEM;
  }
  if (int e = advise_hugepage(err)) return e;
  if (c_.extra == Extra::kDontfork) (void)r_.parent->madvise(r_.addr, p_.size, MADV_DONTFORK);
  std::vector<Process*> kids;
  for (unsigned k = 0; k < nr_children(); k++) {
    Process* q = r_.parent->fork(fmt::format("child{}", k));
    if (!q) {
      *err = "fork failed";
      return -ENOMEM;
    }
    kids.push_back(q);
  }
  if (sharer_exits_) pfn_at_fork_ = region_pfns(r_.parent, r_.addr, p_.size);
  // A child that exits during the phase is not sampled (fork-exec,
  // snapshot), nor is fragmented's filler.
  std::vector<Process*> sampled;
  for (Process* q : workload_procs(r_))
    if (!sharer_exits_ || q == r_.parent) sampled.push_back(q);
  begin_measured(std::move(sampled));
  writers_after_fork(kids);
  return 0;
}

void WorkloadRun::writers_after_fork(const std::vector<Process*>& kids) {
  // The sharer's exit, and the bytes copied by then.
  auto exit_sharer = [this, q = kids[0]] {
    q->exit();
    exited_ = Clock::now();
    copied_at_exit_ = bytes_copied(s_);
  };
  if (w_.name == "usemem") {
    for (Process* q : kids) ws_.push_back(writer(q, all_pages(p_)));
  } else if (w_.name == "cow-rand" || w_.name == "prefork" || fragmented_) {
    for (unsigned k = 0; k < kids.size(); k++) ws_.push_back(writer(kids[k], some_pages(p_, p_.seed * 7919 + k)));
  } else if (w_.name == "fork-exec") {  // the child's mm goes away (exec) as the parent writes
    ws_.push_back(writer(r_.parent, all_pages(p_)));
    ws_[0].track_starts = true;
    beside_ = exit_sharer;
  } else {  // snapshot: the child reads the region once (BGSAVE) and exits as the parent serves writes
    ws_.push_back(snapshot_writer(r_.parent, p_));
    beside_ = [this, q = kids[0], exit_sharer] {
      std::vector<uint8_t> buf(64ull << 10);
      for (uint64_t off = 0; off < p_.size; off += buf.size())
        if (!q->read(r_.addr + off, buf.data(), buf.size()).ok()) reader_ok_ = false;
      exit_sharer();
    };
  }
}

int WorkloadRun::measure(std::string* err) {
  const auto t0 = Clock::now();
  for (Writer& x : ws_) x.pricer = p_.pricer;
  run_writers(&ws_, r_.addr, p_.size, c_.extra, p_.time_writes, beside_);
  elapsed_s_ = std::chrono::duration<double>(Clock::now() - t0).count();
  if (khugepaged_) khugepaged_->stop(&out_->m);
  Sampled sampled;
  sampler_->stop(&sampled);
  record_sampled(sampled, p_.geometry, &out_->m);
  out_->curve = std::move(sampled.samples);
  for (const Writer& x : ws_)
    if (!x.ok) {
      *err = "a write failed";
      return -EFAULT;
    }
  if (!reader_ok_) {
    *err = "the snapshot child's read failed";
    return -EFAULT;
  }
  return 0;
}

void WorkloadRun::record() {
  MetricSet& m = out_->m;
  m.set("elapsed_s", elapsed_s_);
  if (sharer_exits_) {
    m.set("exited_sharer_untouched", static_cast<double>(exited_sharer_untouched(r_, p_, pfn_at_fork_, ws_[0], exited_)));
    m.set("copied_after_exit", static_cast<double>(bytes_copied(s_) - copied_at_exit_));
  }
  if (w_.name == "snapshot") {
    std::vector<double> us;
    for (double ns : ws_[0].service_ns) us.push_back(ns / 1000);
    m.add_samples("service_us", us);
  }
  account(r_, ws_, &m);
  double sum = 0;
  std::vector<double> kbps;
  for (const Writer& x : ws_) kbps.push_back(static_cast<double>(p_.size) / 1024 / x.seconds);
  for (double k : kbps) sum += k;
  m.set("child_kbps_mean", w_.name == "usemem" ? sum / static_cast<double>(ws_.size()) : 0);
  m.set("child_kbps_sum", w_.name == "usemem" ? sum : 0);
  if (w_.name == "usemem") m.add_samples("child_kbps", kbps);
  for (size_t i = 0; i < std::size(kCounted); i++)
    m.set(kCounted[i].key, static_cast<double>(kCounted[i].read(s_) - counted0_[i]));
  for (auto& [n, v] : s_->all_counters()) out_->counts[n] = v - counts0_[n];
  m.set("warnings", static_cast<double>(s_->warnings().size()));
}

int WorkloadRun::finish(std::string* err) {
  for (Process* q : s_->processes()) q->exit();
  CheckReport rep = s_->check();
  out_->m.set("violations", static_cast<double>(rep.violations.size()));
  // cow.policy rfc is the posting as sent: what it breaks is a result.
  if (!rep.ok() && std::string(c_.policy) != "rfc") {
    *err = fmt::format("the invariant checker failed after {} under {}: {}", w_.name, c_.name,
                       rep.violations.empty() ? "" : rep.violations.front().invariant);
    return -EIO;
  }
  out_->ran = true;
  return 0;
}

}  // namespace

void Result::merge(const Result& r) {
  if (!r.ran) return;
  if (!ran) curve = r.curve;
  ran = true;
  m.merge(r.m);
  for (auto& [n, v] : r.counts) counts[n] += v;
}

const std::vector<Column>& columns() {
  static const std::vector<Column> v = {
      col("base", 64, "base"),
      col("rfc", 64, "rfc"),
      col("fixed-16K", 16, "fixed"),
      col("fixed-32K", 32, "fixed"),
      col("fixed-64K", 64, "fixed"),
      col("fixed-128K", 128, "fixed"),
      col("fixed-512K", 512, "fixed"),
      col("fixed-512K-max2", 512, "fixed", 2),
      col("fixed-512K-max4", 512, "fixed", 4),
      col("fixed-512K-max6", 512, "fixed", 6),
      col("fixed-64K-reuse-whole", 64, "fixed", -1, true),
      col("base-collapse-after-fork", 64, "base", -1, false, Extra::kCollapseAfterFork),
      col("base-dontfork", 64, "base", -1, false, Extra::kDontfork),
      col("base-khugepaged", 64, "base", -1, false, Extra::kKhugepaged),
  };
  return v;
}

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> v = {
      {"usemem", "the series' usemem: the parent prefaults, K children each write every page at once", {"usemem"}},
      {"cow-rand", "sparse writes after fork: one child writes a random share of the pages"},
      {"fork-exec", "a child that exits right after fork while the parent writes every page", {"exits"}},
      {"prefork", "K long-lived children, each writing a random share of the pages"},
      {"read-then-write", "no fork: every page read (the zero page), then written"},
      {"snapshot", "Redis BGSAVE: the parent serves an open-loop Zipfian stream of 64-byte writes while a child reads "
                   "the region once and exits",
       {"snapshot", "exits"}},
      {"fragmented", "cow-rand on memory a live filler process left in 4K holes: large allocations fall back",
       {"fragmented"}},
  };
  return v;
}

uint64_t host_bytes_needed(const Params& p, bool fragmented) {
  uint64_t ram = ram_of_run(p, p.procs, false);
  if (fragmented) ram = std::max(ram, ram_of_run(p, 1, true));
  return system_host_memory(ram).at_most;  // the frames and their memmap
}

int run(const Workload& w, const Column& c, const Params& p, Result* out, std::string* err) {
  *out = Result{};
  if (const char* why = not_applicable(w, c)) {
    out->not_run = why;
    return 0;
  }
  if (is_trace_workload(w)) return run_trace(w, c, p, out, err);
  WorkloadRun run(w, c, p, out);
  if (int e = run.set_up(err); e < 0) return e;
  if (int e = run.prepare(err); e < 0) return e;
  if (int e = run.measure(err); e < 0) return e;
  run.record();
  return run.finish(err);
}

}  // namespace mmlab::cli::cowbench
