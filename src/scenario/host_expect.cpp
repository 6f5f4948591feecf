// The host backend's expectations: what pagemap, kpageflags, sysfs and
// vmstat show against what the test expects. What the host cannot observe
// as upstream would (a capability its kernel lacks, pages it mapped where
// upstream maps the zero page, statistics other processes moved) is
// skipped expectation by expectation, with the reason, and counted.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "host/pagemap.h"
#include "host/probe.h"
#include "host/sysfs.h"
#include "mmlab/types.h"
#include "scenario/host_pages.h"
#include "scenario/host_run.h"

namespace mmlab {
namespace {

using host::Cap;

// Statistics of swap I/O, which zswap counts elsewhere (zswpout, zswpin).
// A fallback (no swap space for a large folio) happens before zswap.
bool is_swap_io_stat(const std::string& name) {
  return name.find("swp") != std::string::npos && name.find("fallback") == std::string::npos;
}

// The files of a pool's counts, which leaked reservations shift (leaked_resv).
bool pool_count_file(const std::string& rel) {
  for (const char* f : {"/nr_hugepages", "/free_hugepages", "/resv_hugepages"})
    if (rel.size() > std::strlen(f) && rel.compare(rel.size() - std::strlen(f), std::strlen(f), f) == 0) return true;
  return false;
}

// A statistic that the host's khugepaged moves for whichever mm it scans:
// once the test waited for full scans, those scans visited every process
// on the machine, so more than the test's own collapses may count.
bool khugepaged_statistic(const std::string& key) {
  return key.find("collapse") != std::string::npos || key.find("khugepaged/") != std::string::npos ||
         key.find("thp_scan_exceed") != std::string::npos;
}

}  // namespace

std::map<std::string, int64_t> HostRun::read_vmstat() {
  // Node and zone items (nr_foll_pin_acquired, ...) sit in per-CPU diffs
  // until folded; stat_refresh folds them so the deltas are exact.
  std::ofstream("/proc/sys/vm/stat_refresh") << "1";
  std::map<std::string, int64_t> m;
  std::ifstream in("/proc/vmstat");
  std::string k;
  int64_t v;
  while (in >> k >> v) m[k] = v;
  return m;
}

// Files whose value is an event count: expectations on them are deltas
// around the test. Pool sizes and settings are compared as they are.
bool HostRun::sysfs_is_counter(const std::string& path) { return path.find("/stats/") != std::string::npos; }

// A statistic as `vmstat NAME` or `sysfs PATH`: the keys of the baselines.
std::string HostRun::vmstat_key(const std::string& name) { return "vmstat " + name; }
std::string HostRun::sysfs_key(const std::string& path) { return "sysfs " + path; }

// The probe a page's taint comes from, as the skip reason.
std::string HostRun::taint_reason(uint8_t bits) const {
  if (bits & kTaintZeroPte) return probes_.reason(Cap::kZeroPage);
  if (bits & kTaintZeroPmd) return probes_.reason(Cap::kHugeZeroPage);
  if (bits & kTaintZeroFolio)
    return probes_.reason(probes_.have(Cap::kZeroPage) ? Cap::kHugeZeroPage : Cap::kZeroPage);
  if (bits & kTaintSoftDirty) return probes_.reason(Cap::kSoftDirty);
  return swap_kind_reason_;
}

// Whether a page-state expectation is skipped: the page has one of `mask`.
bool HostRun::skip_for(uint8_t bits, uint8_t mask) {
  if (!(bits & mask)) return false;
  skip_expectation(taint_reason(bits & mask));
  return true;
}

// A machine-wide statistic the test's statements may not alone have
// moved: after a zero-page stand-in, a clear-soft-dirty that did nothing,
// or swap-out to the other kind of device, every statistic may differ;
// with zswap, the swap I/O ones.
std::optional<std::string> HostRun::statistic_skip(const std::string& name) const {
  if (zero_used_ & kTaintZeroPte) return probes_.reason(Cap::kZeroPage);
  if (zero_used_ & kTaintZeroPmd) return probes_.reason(Cap::kHugeZeroPage);
  if (soft_dirty_used_) return probes_.reason(Cap::kSoftDirty);
  if (swap_kind_used_) return swap_kind_reason_;
  if (zswap_used_ && is_swap_io_stat(name)) return probes_.reason(Cap::kZswapOff);
  return std::nullopt;
}

// A value, or INT64_MIN if the statistic cannot be read.
int64_t HostRun::read_counter(const std::string& key) {
  if (key.rfind("vmstat ", 0) == 0) {
    auto m = read_vmstat();
    auto it = m.find(key.substr(7));
    return it == m.end() ? std::numeric_limits<int64_t>::min() : it->second;
  }
  std::string v;
  if (host::sysfs_read(key.substr(6), &v)) return std::numeric_limits<int64_t>::min();
  return std::strtoll(v.c_str(), nullptr, 10);
}

// found != expected: whether the machine moved the statistic the same
// way on its own while the test's processes were idle (before the test,
// or now). Only then is the expectation skipped; on a quiet machine it fails.
std::optional<std::string> HostRun::background(const std::string& key, int64_t found, int64_t expected) {
  auto same_way = [&](int64_t moved) { return (moved > 0 && found > expected) || (moved < 0 && found < expected); };
  int64_t moved = idle_before_[key];
  useconds_t us = kIdleBeforeUs;
  if (!same_way(moved)) {
    int64_t a = read_counter(key);
    for (us = 0; us < kIdleAfterUs && !same_way(moved); us += kIdleStepUs) {
      usleep(kIdleStepUs);
      moved = read_counter(key) - a;
    }
  }
  if (!same_way(moved)) return std::nullopt;
  return fmt::format("background: {} moved by {} in {} ms with the test's processes idle (found {}, expected {})", key,
                     moved, us / 1000, found, expected);
}

void HostRun::expect_statistic(const Stmt& st, const std::string& key, const std::string& what, int64_t expected, int64_t found) {
  if (auto why = statistic_skip(key)) {
    skip_expectation(*why);
    return;
  }
  if (found > expected && khugepaged_ran_ && khugepaged_statistic(key)) {
    skip_expectation(fmt::format("khugepaged: {} counts the full scans of every mm on the machine (found {}, expected {})",
                                 key, found, expected));
    return;
  }
  if (found != expected)
    if (auto why = background(key, found, expected)) {
      skip_expectation(*why);
      return;
    }
  expect_number(st, what, expected, found);
}

void HostRun::run(const Stmt& st, const stmt::ExpectHandle& s) { expect_handle_ret(st, s, handle(st, s.handle).gup->ret); }

void HostRun::run(const Stmt& st, const stmt::ExpectRss& s) {
  Proc& p = proc(st, s.proc);
  if (skip_for(p.pages.any(), kTaintZero)) return;  // upstream's zero page is not counted
  uint64_t anon = 0, file = 0, shmem = 0;
  for (auto& [a, r] : p.pages.ranges())
    if (host::host_rss(p.agent->pid(), a, r.end - a, &anon, &file, &shmem)) fail(st, "cannot read the host's pagemap");
  expect_rss(st, s, s.kind == "anon" ? anon : s.kind == "file" ? file : shmem);
}

namespace {

// The VMAs of /proc/PID/smaps whose VmFlags say `lo` (VM_LOCKED), as
// [start, end) pairs; false if the file cannot be read.
bool locked_vmas(int pid, std::vector<std::pair<uint64_t, uint64_t>>* out) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  if (!in) return false;
  std::string line;
  uint64_t start = 0, end = 0;
  while (std::getline(in, line)) {
    unsigned long long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &a, &b) == 2 && line.find("kB") == std::string::npos) {
      start = a, end = b;
    } else if (line.rfind("VmFlags:", 0) == 0) {
      std::istringstream flags(line.substr(8));
      for (std::string f; flags >> f;)
        if (f == "lo") out->emplace_back(start, end);
    }
  }
  return true;
}

}  // namespace

// `expect P locked SIZE`: the bytes of locked VMAs inside the ranges the
// test mapped. /proc/PID/status's VmLck would also count the agent's own
// mappings, which mlockall(MCL_CURRENT) locks too.
void HostRun::run(const Stmt& st, const stmt::ExpectLocked& s) {
  Proc& p = proc(st, s.proc);
  std::vector<std::pair<uint64_t, uint64_t>> locked;
  if (!locked_vmas(p.agent->pid(), &locked)) fail(st, "cannot read the host's /proc/PID/smaps");
  uint64_t bytes = 0;
  for (auto& [a, r] : p.pages.ranges())
    for (auto& [from, to] : locked)
      if (from < r.end && a < to) bytes += std::min(to, r.end) - std::max(from, a);
  expect_locked(st, s, bytes);
}

// `expect P minflt|majflt N`: the faults the kernel counted to the agent
// (getrusage(RUSAGE_THREAD)) while it ran the test's accesses and system
// calls, summed from its creation; its own loop's faults are left out.
void HostRun::run(const Stmt& st, const stmt::ExpectFaults& s) {
  Proc& p = proc(st, s.proc);
  expect_faults(st, s, s.major ? p.agent->maj_flt() : p.agent->min_flt());
}

void HostRun::run(const Stmt& st, const stmt::ExpectSysfs& s) {
  require_sysfs_file(s.path);
  std::string v;
  if (int r = host::sysfs_read(s.path, &v)) fail(st, fmt::format("sysfs {}: {}", s.path, errno_name(r)));
  char* end = nullptr;
  int64_t n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end) fail(st, fmt::format("expected sysfs {} == {}, found {}", s.path, s.value, v));
  if (pool_count_file(s.path)) n -= leaked_resv(s.path);  // see leaked_resv
  if (!sysfs_is_counter(s.path)) {
    expect_number(st, "sysfs " + s.path, s.value, n);
    return;
  }
  expect_statistic(st, sysfs_key(s.path), "sysfs " + s.path + " (since the test began)", s.value,
                   n - base_[sysfs_key(s.path)]);
}

void HostRun::run(const Stmt& st, const stmt::ExpectVmstat& s) {
  auto now = read_vmstat();
  auto it = now.find(s.item);
  if (it == now.end()) {
    skip_expectation("vmstat-absent (vmstat items this kernel does not have)");
    return;
  }
  expect_statistic(st, vmstat_key(s.item), "vmstat " + s.item + " (since the test began)", s.value,
                   it->second - base_[vmstat_key(s.item)]);
}

void HostRun::run(const Stmt&, const stmt::ExpectCounter&) { skip_expectation("counter (the model's event counters)"); }

// The test expects the model to detect a violation it then goes on from;
// a real kernel has no such report (it would corrupt itself or oops).
void HostRun::run(const Stmt&, const stmt::ExpectViolation&) {
  throw SkipTest{"expect violation: the violations are the model's findings (its checker, data tracker and recorded warnings)"};
}

void HostRun::run(const Stmt& st, const stmt::ExpectDump&) { fail(st, "no dump to check"); }

host::HostPageInfo HostRun::page(const Stmt& st, const std::string& pname, const AddrExpr& a) {
  host::HostPageInfo pi;
  std::string why;
  if (host::host_page_info(agent(st, pname).pid(), addr(st, a), &pi, &why)) throw SkipTest{why};
  return pi;
}

// The taints of the page at the expectation's address (docs/HOST.md has
// the table of which taints change which answer).
uint8_t HostRun::taints_at(const Stmt& st, const std::string& pname, const AddrExpr& a) { return proc(st, pname).pages.at(addr(st, a)); }

void HostRun::run(const Stmt& st, const stmt::ExpectMapped& s) {
  if (skip_for(taints_at(st, s.proc, s.addr), kTaintZeroMapped | kTaintZeroFolio | kTaintSoftDirty)) return;
  host::HostPageInfo pi = page(st, s.proc, s.addr);
  expect_mapped(st, s, !pi.present ? "none" : !pi.huge ? "pte" : pi.order >= static_cast<int>(PUD_SHIFT - PAGE_SHIFT) ? "pud" : "pmd");
}

void HostRun::run(const Stmt& st, const stmt::ExpectOrder& s) {
  if (skip_for(taints_at(st, s.proc, s.addr), kTaintZero | kTaintZeroFolio | kTaintSoftDirty | kTaintSwapKind)) return;
  host::HostPageInfo pi = page(st, s.proc, s.addr);
  expect_order(st, s, pi.present, pi.order);
}

void HostRun::run(const Stmt& st, const stmt::ExpectPageBit& s) {
  switch (s.bit) {
    case stmt::PageBit::kExclusive:
      skip_expectation("exclusive (no host interface shows PageAnonExclusive; pagemap bit 56 is another thing)");
      return;
    case stmt::PageBit::kPinned: skip_expectation("pinned (no host interface shows folio_maybe_dma_pinned)"); return;
    case stmt::PageBit::kSoftDirty:
    case stmt::PageBit::kUffdWp: skip_expectation("soft-dirty/uffd-wp (not read from the host's pagemap yet)"); return;
    case stmt::PageBit::kGuard:
      if (!probes_.have(Cap::kGuardRegions)) {
        skip_expectation(probes_.reason(Cap::kGuardRegions));
        return;
      }
      break;
    case stmt::PageBit::kZero:
    case stmt::PageBit::kSwapped: break;
  }
  if (skip_for(taints_at(st, s.proc, s.addr), kTaintZero)) return;
  host::HostPageInfo pi = page(st, s.proc, s.addr);
  if (s.bit == stmt::PageBit::kZero) expect_yes_no(st, s, pi.present, pi.present && pi.zero);
  else if (s.bit == stmt::PageBit::kGuard) expect_yes_no(st, s, pi.present, pi.guard);
  else expect_yes_no(st, s, pi.present, pi.swapped);
}

void HostRun::run(const Stmt& st, const stmt::ExpectSame& s) {
  const uint8_t bits = taints_at(st, s.proc, s.addr);
  if (skip_for(bits | taints_at(st, s.other_proc, s.other_addr), kTaintZero | kTaintSoftDirty)) return;
  host::HostPageInfo pi = page(st, s.proc, s.addr);
  host::HostPageInfo other = page(st, s.other_proc, s.other_addr);
  expect_same(st, s, pi.present && other.present && pi.pfn == other.pfn);
}

std::string read_proc_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `expect P smaps ADDR FIELD SIZE` reads the agent's smaps block of the
// VMA: the test's mapping alone. `expect P status FIELD SIZE` counts the
// whole process, so the agent's own memory at its start is subtracted.
void HostRun::run(const Stmt& st, const stmt::ExpectProcField& s) {
  Proc& p = proc(st, s.proc);
  if (skip_for(p.pages.any(), kTaintZero)) return;  // upstream's zero page is not counted
  const std::string text = read_proc_text(fmt::format("/proc/{}/{}", p.agent->pid(), s.smaps ? "smaps" : "status"));
  std::optional<uint64_t> at;
  if (s.smaps) at = addr(st, s.addr);
  uint64_t bytes = 0, base = 0;
  std::string why;
  if (!proc_field_bytes(text, at, s.field, &bytes, &why)) {
    if (s.smaps && why.rfind("no VMA", 0) == 0) fail(st, fmt::format("{} smaps: {}", s.proc, why));
    skip_expectation(fmt::format("proc-field-absent (this kernel's {} has no {} line)", s.smaps ? "smaps" : "status", s.field));
    return;
  }
  if (!s.smaps) {
    // The agent's own mappings already have the upper tables (PUD, PMD) a
    // test's first mapping needs in the model: only a part of VmPTE's growth
    // shows on the host (measured: 4K where the model's fresh process grows 12K).
    if (s.field == "VmPTE") {
      skip_expectation("status-vmpte (the agent's own mappings share the upper page tables a test mapping needs)");
      return;
    }
    if (p.status_at_start.empty()) {
      skip_expectation("status-fork (a forked host agent's status also counts its share of the agent's own memory)");
      return;
    }
    if (!proc_field_bytes(p.status_at_start, std::nullopt, s.field, &base, &why)) fail(st, why);
    bytes = bytes >= base ? bytes - base : 0;
  }
  expect_proc_field(st, s, bytes);
}

// A remembered page whose host frame differs from upstream's (a zero-page
// stand-in) is remembered as unknown: its same-frame/other-frame is skipped.
void HostRun::run(const Stmt& st, const stmt::Remember& s) {
  if (taints_at(st, s.proc, s.addr) & kTaintZero) {
    remember_unknown_frame(st, s);
    return;
  }
  host::HostPageInfo pi = page(st, s.proc, s.addr);
  remember_frame(st, s, pi.present && !pi.swapped, pi.pfn);
}

void HostRun::run(const Stmt& st, const stmt::ExpectFrame& s) {
  if (skip_for(taints_at(st, s.proc, s.addr), kTaintZero)) return;
  host::HostPageInfo pi = page(st, s.proc, s.addr);
  expect_frame(st, s, pi.present && !pi.swapped, pi.pfn);
}

}  // namespace mmlab
