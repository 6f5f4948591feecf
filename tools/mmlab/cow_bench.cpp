// The workloads and columns of `mmlab cow-bench` (cow_bench.h).
#include "cow_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "mmlab/system.h"

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
  uint64_t addr = 0;
};

int set_up(const Column& c, const Params& p, unsigned nr_procs, Run* r, std::string* err) {
  SystemConfig cfg;
  cfg.ram_bytes = ((p.size * (nr_procs + 2) + (256ull << 20)) + (4ull << 20) - 1) & ~((4ull << 20) - 1);
  int e = 0;
  r->sys = System::create(cfg, &e);
  if (!r->sys) {
    *err = fmt::format("System::create: {}", errno_name(-e));
    return e ? e : -ENOMEM;
  }
  System* s = r->sys.get();
  (void)s->sysfs_write("transparent_hugepage/enabled", "never");
  // The region faults in with c.folio_kb folios (the largest size enabled);
  // a cow.max_order cap also enables the size of that order, which only the
  // CoW path then uses (a CoW copies at an enabled order).
  const unsigned cap_kb = c.max_order >= 2 ? 4u << c.max_order : 0;
  for (unsigned kb = 16; kb <= 2048; kb *= 2)
    (void)s->sysfs_write(fmt::format("transparent_hugepage/hugepages-{}kB/enabled", kb),
                         kb == c.folio_kb || kb == cap_kb ? "always" : "never");
  // khugepaged's column: PMD THP for MADV_HUGEPAGE regions only, so that the
  // faults stay at c.folio_kb until the region is advised after the writes.
  if (c.extra == Extra::kKhugepaged) (void)s->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "madvise");
  if (int t = s->tune("cow.policy", c.policy); t < 0) {
    *err = fmt::format("tune cow.policy {}: {}", c.policy, errno_name(-t));
    return t;
  }
  if (c.max_order >= 0) (void)s->tune("cow.max_order", std::to_string(c.max_order));
  if (c.reuse_whole) (void)s->tune("cow.reuse", "whole");
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

// The parent's memory before the fork: every page written (usemem's
// --prefault writes too: MAP_POPULATE of a writable private mapping faults
// every page in for write).
bool prefault(Run* r, const Params& p, uint8_t byte) { return r->parent->fill(r->addr, byte, p.size).ok(); }

// Write the pages `which` (indices) with `byte`, timing each (ns == nullptr: none).
bool write_pages(Process* q, uint64_t addr, const std::vector<uint64_t>& which, uint8_t byte, std::vector<double>* ns) {
  if (!ns) {
    for (uint64_t i : which)
      if (!q->fill(addr + i * PAGE_SIZE, byte, PAGE_SIZE).ok()) return false;
    return true;
  }
  ns->reserve(ns->size() + which.size());
  for (uint64_t i : which) {
    const auto t0 = Clock::now();
    if (!q->fill(addr + i * PAGE_SIZE, byte, PAGE_SIZE).ok()) return false;
    ns->push_back(ns_between(t0, Clock::now()));
  }
  return true;
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

struct Writer {
  Process* proc = nullptr;
  std::vector<uint64_t> pages;
  std::vector<double> ns;
  double seconds = 0;
  bool ok = true;
};

// Each writer on its own thread, all at once, as forked children run; with
// kCollapseAfterFork each first collapses the region (MADV_COLLAPSE).
void run_writers(std::vector<Writer>* ws, uint64_t addr, uint64_t size, Extra extra, bool timed) {
  std::vector<std::thread> t;
  for (size_t k = 0; k < ws->size(); k++) {
    t.emplace_back([ws, k, addr, size, extra, timed] {
      Writer& w = (*ws)[k];
      const auto t0 = Clock::now();  // the collapse is the writer's time too
      if (extra == Extra::kCollapseAfterFork) (void)w.proc->madvise(addr, size, MADV_COLLAPSE);
      w.ok = write_pages(w.proc, addr, w.pages, static_cast<uint8_t>(0x40 + k), timed ? &w.ns : nullptr);
      w.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  }
  for (auto& th : t) th.join();
}

void account(Run* r, const std::vector<Writer>& ws, Result* out) {
  for (const Writer& w : ws) {
    out->write_ns.insert(out->write_ns.end(), w.ns.begin(), w.ns.end());
    out->bytes_written += static_cast<int64_t>(w.pages.size() * PAGE_SIZE);
  }
  for (Process* q : r->sys->processes()) out->rss_peak += q->rss_anon();
}

}  // namespace

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
      {"usemem", "the series' usemem: the parent prefaults, K children each write every page at once"},
      {"cow-rand", "sparse writes after fork: one child writes a random share of the pages"},
      {"fork-exec", "a child that exits right after fork while the parent writes every page"},
      {"prefork", "K long-lived children, each writing a random share of the pages"},
      {"read-then-write", "no fork: every page read (the zero page), then written"},
  };
  return v;
}

int run(const Workload& w, const Column& c, const Params& p, Result* out, std::string* err) {
  *out = Result{};
  const bool forks = w.name != "read-then-write";
  if (c.extra == Extra::kDontfork && w.name != "fork-exec") {
    out->not_run = "the children use the region";
    return 0;
  }
  if (c.extra == Extra::kCollapseAfterFork && (!forks || w.name == "fork-exec")) {
    out->not_run = forks ? "the child never writes" : "no fork";
    return 0;
  }
  const unsigned nr_children = (w.name == "usemem" || w.name == "prefork") ? p.procs : forks ? 1 : 0;
  Run r;
  if (int e = set_up(c, p, nr_children, &r, err); e < 0) return e;
  System* s = r.sys.get();
  auto copied = [s] { return s->counter("cow.bytes_copied") + s->counter("collapse.bytes_copied"); };
  const int64_t copy0 = copied(), wpc0 = s->counter("fault.wp_copy"),
                reu0 = s->counter("fault.wp_reuse"), anon0 = s->counter("fault.anon"), zero0 = s->counter("fault.zero"),
                col0 = s->counter("collapse.success");
  const std::vector<int64_t> orders0 = copies_by_order(s);
  std::unique_ptr<Sampler> sampler;
  // The measured phase starts after the fork (or the zero-page reads); the
  // sampler follows the processes that live through it.
  auto begin_measured = [&](std::vector<Process*> procs) {
    sampler = std::make_unique<Sampler>(s, std::move(procs), p.sample);
    sampler->start();
  };
  std::vector<Writer> ws;
  if (!forks) {
    std::vector<uint8_t> buf(PAGE_SIZE);
    for (uint64_t off = 0; off < p.size; off += PAGE_SIZE)
      if (!r.parent->read(r.addr + off, buf.data(), PAGE_SIZE).ok()) {
        *err = "read fault failed";
        return -EFAULT;
      }
    ws.push_back({r.parent, all_pages(p), {}, 0, true});
    begin_measured({r.parent});
  } else {
    if (!prefault(&r, p, 0x11)) {
      *err = "prefault failed";
      return -ENOMEM;
    }
    if (c.extra == Extra::kDontfork) (void)r.parent->madvise(r.addr, p.size, MADV_DONTFORK);
    std::vector<Process*> kids;
    for (unsigned k = 0; k < nr_children; k++) {
      Process* q = r.parent->fork(fmt::format("child{}", k));
      if (!q) {
        *err = "fork failed";
        return -ENOMEM;
      }
      kids.push_back(q);
    }
    // fork-exec's child exits during the phase: only the parent is sampled.
    begin_measured(w.name == "fork-exec" ? std::vector<Process*>{r.parent} : s->processes());
    if (w.name == "usemem") {
      for (Process* q : kids) ws.push_back({q, all_pages(p), {}, 0, true});
    } else if (w.name == "cow-rand" || w.name == "prefork") {
      for (unsigned k = 0; k < kids.size(); k++) ws.push_back({kids[k], some_pages(p, p.seed * 7919 + k), {}, 0, true});
    } else {  // fork-exec: the child's mm goes away (exec) as the parent writes
      std::thread exec([q = kids[0]] { q->exit(); });
      ws.push_back({r.parent, all_pages(p), {}, 0, true});
      const auto t0 = Clock::now();
      ws[0].ok = write_pages(r.parent, r.addr, ws[0].pages, 0x22, p.time_writes ? &ws[0].ns : nullptr);
      ws[0].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      exec.join();
    }
  }
  const auto t0 = Clock::now();
  if (w.name != "fork-exec") run_writers(&ws, r.addr, p.size, c.extra, p.time_writes);
  out->elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  sampler->stop(&out->metrics);
  for (const Writer& x : ws)
    if (!x.ok) {
      *err = "a write failed";
      return -EFAULT;
    }
  account(&r, ws, out);
  if (c.extra == Extra::kKhugepaged) {
    // khugepaged fixes the mappings up afterwards, the processes still
    // alive: every process advises the region MADV_HUGEPAGE (which is when
    // the kernel hands an mm to khugepaged), PMD collapse and the mTHP
    // collapse series both on, two full scans of every mm; its time is the
    // model's (collapse_huge_page's).
    const CollapseTiming before = s->collapse_timing();
    (void)s->tune("khugepaged.mthp", "on");
    for (Process* q : s->processes()) (void)q->madvise(r.addr, p.size, MADV_HUGEPAGE);
    if (int e = s->run_khugepaged(2); e < 0) {
      *err = fmt::format("run_khugepaged: {}", errno_name(-e));
      return e;
    }
    const CollapseTiming after = s->collapse_timing();
    out->khugepaged_ms = static_cast<double>(after.total_ns - before.total_ns) / 1e6;
    out->mmap_write_ms = static_cast<double>(after.mmap_write_ns - before.mmap_write_ns) / 1e6;
    int64_t rss = 0;
    for (Process* q : s->processes()) rss += q->rss_anon();
    out->rss_peak = std::max(out->rss_peak, rss);
  }
  if (w.name == "usemem") {
    for (const Writer& x : ws) out->child_kbps_sum += static_cast<double>(p.size) / 1024 / x.seconds;
    out->child_kbps_mean = out->child_kbps_sum / static_cast<double>(ws.size());
  }
  out->copies_by_order = copies_by_order(s);
  for (size_t o = 0; o < out->copies_by_order.size() && o < orders0.size(); o++) out->copies_by_order[o] -= orders0[o];
  out->bytes_copied = copied() - copy0;
  out->wp_copy = s->counter("fault.wp_copy") - wpc0;
  out->wp_reuse = s->counter("fault.wp_reuse") - reu0;
  out->anon = s->counter("fault.anon") - anon0;
  out->zero = s->counter("fault.zero") - zero0;
  out->collapses = s->counter("collapse.success") - col0;
  out->warnings = static_cast<int64_t>(s->warnings().size());
  for (Process* q : s->processes()) q->exit();
  CheckReport rep = s->check();
  out->violations = static_cast<int64_t>(rep.violations.size());
  // cow.policy rfc is the posting as sent: what it breaks is a result.
  if (!rep.ok() && std::string(c.policy) != "rfc") {
    *err = fmt::format("the invariant checker failed after {} under {}: {}", w.name, c.name,
                       rep.violations.empty() ? "" : rep.violations.front().invariant);
    return -EIO;
  }
  out->ran = true;
  return 0;
}

}  // namespace mmlab::cli::cowbench
