// The host capability probes: each one an experiment on the running
// kernel, in a process of its own (an Agent, as a scenario's process), with
// the model's default settings applied through a SysfsGuard and put back.
#include "host/probe.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "fmt/format.h"
#include "host/agent.h"
#include "host/host_file.h"
#include "host/host_gup.h"
#include "host/pagemap.h"
#include "host/host_swap.h"
#include "host/sysfs.h"
#include "mmlab/host.h"
#include "mmlab/types.h"

// After mmlab/types.h, which declares the model's constants under the same names.
#include <sys/mman.h>

namespace mmlab::host {
namespace {

constexpr const char* kCapNames[kNumCaps] = {"zero_page",  "huge_zero_page", "soft_dirty", "zswap_off",  "no_host_swap",
                                             "blkdev_swap", "file_swap",     "io_uring",   "hugetlb_2M", "hugetlb_1G",
                                             "zram_swap",   "guard_regions",  "read_only_thp_for_fs"};

std::optional<HostProbes> g_measured;
std::set<int> g_forced_env, g_forced_api;  // caps forced to "missing"

CapResult yes(std::string detail) { return CapResult{true, false, std::move(detail)}; }
CapResult no(std::string detail) { return CapResult{false, false, std::move(detail)}; }

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A private anonymous mapping of `len` bytes in `a`, its start aligned to
// `align` (a reservation of len + align, trimmed). 0 on failure.
uint64_t map_anon(Agent& a, uint64_t len, uint64_t align) {
  long r = a.mmap(0, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r < 0) return 0;
  auto base = static_cast<uint64_t>(r);
  uint64_t start = round_up(base, align);
  if (start > base) a.munmap(base, start - base);
  if (base + len + align > start + len) a.munmap(start + len, base + len + align - (start + len));
  return start;
}

// The page a read of the first byte of a fresh private anonymous range of
// `len` (aligned to it) maps, after madvise(advice). 0, or -1 with *why.
int read_fresh_page(Agent& a, uint64_t len, int advice, HostPageInfo* pi, std::string* why) {
  uint64_t m = map_anon(a, len, len);
  if (!m || a.madvise(m, len, advice) < 0) {
    *why = "cannot map anonymous memory in a probe process";
    return -1;
  }
  if (a.read(m, 1, -1).sig) {
    *why = "a read of fresh anonymous memory faulted";
    return -1;
  }
  return host_page_info(a.pid(), m, pi, why) ? -1 : 0;
}

// do_anonymous_page() maps the shared zero page for a read fault unless
// mm_forbids_zeropage(); this machine kind's kernels may not (e.g. booted
// with pvm_no_zero_page=1), and then allocate a page per read fault.
CapResult probe_zero_page(Agent& a) {
  HostPageInfo pi;
  std::string why;
  if (read_fresh_page(a, PAGE_SIZE, MADV_NOHUGEPAGE, &pi, &why)) return no(why);
  if (pi.present && pi.zero)
    return yes(fmt::format("an anonymous read fault mapped the shared zero page (pfn {:#x} has KPF_ZERO_PAGE)", pi.pfn));
  std::string cmdline = file_text("/proc/cmdline");
  std::string note = cmdline.find("pvm_no_zero_page") != std::string::npos ? "; the kernel command line has pvm_no_zero_page" : "";
  return no(pi.present ? fmt::format("an anonymous read fault mapped a fresh page (pfn {:#x}, KPF_ZERO_PAGE clear){}", pi.pfn, note)
                       : "an anonymous read fault left nothing mapped");
}

// do_huge_pmd_anonymous_page() maps the huge zero folio for a read fault
// when use_zero_page is 1. Seen in the page's own flags, never inferred from
// thp_zero_page_alloc: a huge zero folio that already exists leaves it alone.
CapResult probe_huge_zero_page(Agent& a) {
  HostPageInfo pi;
  std::string why;
  if (read_fresh_page(a, PMD_SIZE, MADV_HUGEPAGE, &pi, &why)) return no(why);
  if (pi.present && pi.huge && pi.zero)
    return yes(fmt::format("a read of a fresh MADV_HUGEPAGE range mapped the huge zero folio by a PMD (pfn {:#x}, KPF_ZERO_PAGE)", pi.pfn));
  if (!pi.present) return no("a read of a fresh MADV_HUGEPAGE range left nothing mapped");
  return no(fmt::format("a read of a fresh MADV_HUGEPAGE range mapped {} (pfn {:#x}, order {}, KPF_ZERO_PAGE {})",
                        pi.huge ? "a PMD leaf" : "a PTE", pi.pfn, pi.order, pi.zero ? "set" : "clear"));
}

// clear_refs_write(CLEAR_REFS_SOFT_DIRTY) clears the PTEs' soft-dirty bits
// and write-protects them; without CONFIG_MEM_SOFT_DIRTY it does nothing
// and pagemap bit 55 is never set.
CapResult probe_soft_dirty(Agent& a) {
  uint64_t m = map_anon(a, PAGE_SIZE, PAGE_SIZE);
  if (!m) return no("cannot map anonymous memory in a probe process");
  auto bit55 = [&] {
    std::vector<uint64_t> pm;
    return pagemap_entries(a.pid(), m, 1, &pm) == 0 && (pm[0] & kPmSoftDirty);
  };
  a.write(m, 1, 1);
  bool after_write = bit55();
  std::ofstream(fmt::format("/proc/{}/clear_refs", a.pid())) << "4";
  bool after_clear = bit55();
  a.write(m, 1, 2);
  bool after_rewrite = bit55();
  if (after_write && !after_clear && after_rewrite)
    return yes("clear_refs 4 cleared pagemap bit 55 and the next write set it again");
  return no(fmt::format("pagemap bit 55 read {}/{}/{} after a write, clear_refs 4, and a write: no soft-dirty tracking "
                        "(CONFIG_MEM_SOFT_DIRTY off?), so clear-soft-dirty write-protects nothing",
                        int{after_write}, int{after_clear}, int{after_rewrite}));
}

// CONFIG_READ_ONLY_THP_FOR_FS, by its effect (not /boot/config): without
// it file_thp_enabled() is false and MADV_COLLAPSE of a private mapping of
// a regular file nobody has open for write is EINVAL before anything is
// looked at; with it the range collapses (or fails for another reason).
CapResult probe_read_only_thp(Agent& a) {
  std::string why;
  int fd = host_create_file(PMD_SIZE, "ext4", 0, "probe-ro-thp", &why, /*read_only=*/true);
  if (fd == kNoSuchFs) return no("no ext4 file system to try: " + why);
  if (fd < 0) return no(fmt::format("cannot make a read-only ext4 file: errno {}", -fd));
  CapResult r = no("cannot map the file in a probe process");
  if (uint64_t m = map_anon(a, PMD_SIZE, PMD_SIZE)) {
    if (a.mmap(m, PMD_SIZE, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == static_cast<long>(m)) {
      const long e = a.madvise(m, PMD_SIZE, MADV_COLLAPSE);
      if (e == -EINVAL)
        r = no("MADV_COLLAPSE of a read-only ext4 mapping is EINVAL: no CONFIG_READ_ONLY_THP_FOR_FS");
      else
        r = yes(fmt::format("MADV_COLLAPSE of a read-only ext4 mapping returned {}", e));
    }
    a.munmap(m, PMD_SIZE);
  }
  close(fd);
  return r;
}

CapResult probe_guard_regions(Agent& a) {
  uint64_t m = map_anon(a, 2 * PAGE_SIZE, PAGE_SIZE);
  if (!m) return no("cannot map anonymous memory in a probe process");
  a.write(m, 2 * PAGE_SIZE, 1);
  long r = a.madvise(m, PAGE_SIZE, MADV_GUARD_INSTALL);
  if (r < 0) return no(fmt::format("MADV_GUARD_INSTALL failed with errno {} (a kernel before 6.13)", -r));
  std::vector<uint64_t> pm;
  if (pagemap_entries(a.pid(), m, 2, &pm) != 0) return no("cannot read the probe process's pagemap");
  a.madvise(m, PAGE_SIZE, MADV_GUARD_REMOVE);
  if (!(pm[0] & kPmGuardRegion) || (pm[1] & kPmGuardRegion))
    return no(fmt::format("pagemap bit 58 read {}/{} for a guarded and an unguarded page: no PM_GUARD_REGION (a kernel "
                          "before 6.14), so `expect guard` cannot be read",
                          int{(pm[0] & kPmGuardRegion) != 0}, int{(pm[1] & kPmGuardRegion) != 0}));
  return yes("MADV_GUARD_INSTALL installed a guard region and pagemap bit 58 shows it");
}

CapResult probe_zswap() {
  std::string v = file_text("/sys/module/zswap/parameters/enabled");
  if (v.empty()) return yes("the kernel has no zswap");
  if (v == "Y" || v == "1")
    return no("zswap is enabled (/sys/module/zswap/parameters/enabled): swap-out goes to zswap and counts zswpout, not "
              "pswpout, thp_swpout or the per-size swpout");
  return yes("zswap is disabled (/sys/module/zswap/parameters/enabled: " + v + ")");
}

CapResult probe_host_swap() {
  std::ifstream in("/proc/swaps");
  std::string line, devices;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string dev;
    ls >> dev;
    if (!dev.empty()) devices += (devices.empty() ? "" : ", ") + dev;
  }
  if (devices.empty()) return yes("no swap device in /proc/swaps");
  return no("the host swaps to " + devices + ": MADV_PAGEOUT in a test without `swap` would swap out there");
}

// Swap out one mTHP of `kb` with MADV_PAGEOUT on a fresh device of `kind`
// and read that size's statistics: a block device takes it whole (swpout),
// a swap file splits it first (swpout_fallback, split). Read back, the
// folio comes from the swap cache when writeback was asynchronous (it is
// freed later, by reclaim); a SWP_SYNCHRONOUS_IO device (zram) would have
// freed it and swapped in a new mTHP (swpin).
CapResult probe_swap_kind(HostSwapKind kind, unsigned kb, int cpu) {
  const char* what = kind == HostSwapKind::kBlkdev ? "a loop block device" : kind == HostSwapKind::kFile ? "a swap file" : "a zram device";
  if (kind == HostSwapKind::kZram && !zram_available()) return no("the kernel cannot hot-add zram devices (/sys/class/zram-control)");
  if (!kb) return no("the kernel has no mTHP sizes to try a large folio with");
  HostSwap swap;
  std::string why;
  if (swap.add(16ull << 20, kind, &why)) return no(fmt::format("cannot swapon {}: {}", what, why));
  SysfsGuard guard;
  const std::string dir = fmt::format("transparent_hugepage/hugepages-{}kB/", kb);
  if (guard.write(dir + "enabled", "always")) return no("cannot enable " + dir);
  std::string err;
  auto a = Agent::spawn("swap-probe", &err);
  if (!a) return no("cannot start a probe process: " + err);
  if (cpu >= 0) a->pin_cpu(cpu);
  const uint64_t len = uint64_t{kb} << 10;
  uint64_t m = map_anon(*a, len, len);
  if (!m) return no("cannot map anonymous memory in a probe process");
  auto stat = [&](const char* item) {
    std::string v;
    return sysfs_read(dir + "stats/" + item, &v) == 0 ? std::strtoll(v.c_str(), nullptr, 10) : -1;
  };
  a->write(m, len, 0x5a);  // not zero: a zero-filled folio is only marked in the zeromap
  HostPageInfo before, pi;
  if (host_page_info(a->pid(), m, &before, &why)) return no(why);
  if (before.order <= 0) return no(fmt::format("a write of a fresh {}kB range did not allocate a {}kB mTHP", kb, kb));
  long long out0 = stat("swpout"), fb0 = stat("swpout_fallback"), split0 = stat("split");
  if (a->madvise(m, len, MADV_PAGEOUT) < 0) return no("MADV_PAGEOUT failed");
  long long out = stat("swpout") - out0, fb = stat("swpout_fallback") - fb0, split = stat("split") - split0;
  if (host_page_info(a->pid(), m, &pi, &why)) return no(why);
  if (!pi.swapped) return no(fmt::format("MADV_PAGEOUT of a {}kB mTHP left it in memory on {}", kb, what));
  long long in0 = stat("swpin");
  a->read(m, len, 0x5a);
  long long in = stat("swpin") - in0;
  if (host_page_info(a->pid(), m, &pi, &why)) return no(why);
  std::string seen = fmt::format(
      "MADV_PAGEOUT of a {}kB mTHP on {} {}: hugepages-{}kB/stats swpout +{}, swpout_fallback +{}, split +{}; read "
      "back: {}, order {}, swpin +{}",
      kb, what, swap.device(), kb, out, fb, split, pi.pfn == before.pfn ? "the same frame" : "another frame",
      pi.order, in);
  if (kind == HostSwapKind::kBlkdev) return out >= 1 && fb == 0 && in == 0 ? yes(seen) : no(seen);
  // zram: written and freed in one pass, then read back whole by alloc_swap_folio() (which a kernel
  // where zswap was ever enabled never does). The pfn proves nothing here: the freed frame is often
  // the one the swap-in gets again; swpin counts only a read from the device.
  if (kind == HostSwapKind::kZram)
    return out >= 1 && fb == 0 && pi.order == before.order && in >= 1
               ? yes(seen)
               : no(seen + " (expected a read of the same order: mTHP swap-in)");
  return out == 0 && fb >= 1 ? yes(seen) : no(seen + " (the model's swap file never takes a large folio whole)");
}

// Whether one huge page can be had for the pool, as a test's `sysfs
// .../nr_hugepages N` would: retried once after dropping clean page cache
// and compacting (gigantic pages need contiguous memory).
CapResult probe_pool(const char* kb) {
  const std::string rel = fmt::format("hugepages/hugepages-{}kB/nr_hugepages", kb);
  if (access(("/sys/kernel/mm/" + rel).c_str(), F_OK) != 0) return no(fmt::format("the kernel has no hugepages-{}kB pool", kb));
  SysfsGuard guard;
  std::string got;
  if (guard.write(rel, "1") || sysfs_read(rel, &got)) return no("cannot write " + rel);
  if (got != "1") {
    std::ofstream("/proc/sys/vm/drop_caches") << "1";
    std::ofstream("/proc/sys/vm/compact_memory") << "1";
    // A failed read leaves got as it was, which the check below reports.
    if (guard.write(rel, "1") == 0) (void)sysfs_read(rel, &got);
  }
  if (got != "1")
    return no(fmt::format("the hugepages-{}kB pool could not get a single page, even after dropping clean page cache and compacting", kb));
  std::string free, resv;
  // Unreadable counters stay empty, which reads as "not 0" below.
  (void)sysfs_read(fmt::format("hugepages/hugepages-{}kB/free_hugepages", kb), &free);
  (void)sysfs_read(fmt::format("hugepages/hugepages-{}kB/resv_hugepages", kb), &resv);
  if (resv != "0")
    return yes(fmt::format("the hugepages-{}kB pool took a page; resv_hugepages reads {} (free {}) with no test process "
                           "alive: reservations leaked by an earlier process, so a test's pool is sized that many pages "
                           "larger and its counts read that many lower",
                           kb, resv, free));
  return yes(fmt::format("the hugepages-{}kB pool took a page, free of reservations", kb));
}

// The CPU probe processes that use MADV_PAGEOUT run on (agent.h pin_cpu).
int first_allowed_cpu() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) return c;
  return -1;
}

HostProbes measure() {
  HostProbes p;
  auto set = [&](Cap c, CapResult r) { p.caps[static_cast<int>(c)] = std::move(r); };
  for (unsigned order = 1; order <= PMD_ORDER; order++) {
    unsigned kb = static_cast<unsigned>((PAGE_SIZE << order) / 1024);
    const std::string dir = fmt::format("/sys/kernel/mm/transparent_hugepage/hugepages-{}kB", kb);
    if (access((dir + "/enabled").c_str(), F_OK) == 0)
      p.mthp_kb.push_back(kb);
    else if (access(dir.c_str(), F_OK) == 0)
      p.mthp_other_kb.push_back(kb);
  }
  set(Cap::kZswapOff, probe_zswap());
  set(Cap::kNoHostSwap, probe_host_swap());  // before our own devices come and go
  {
    SysfsGuard guard;
    std::string why, err;
    auto a = guard.apply_defaults(&why) ? nullptr : Agent::spawn("probe", &err);
    if (!a) {
      if (why.empty()) why = "cannot start a probe process: " + err;
      for (Cap c : {Cap::kZeroPage, Cap::kHugeZeroPage, Cap::kSoftDirty, Cap::kGuardRegions, Cap::kReadOnlyThp})
        set(c, no(why));
    } else {
      set(Cap::kZeroPage, probe_zero_page(*a));
      set(Cap::kHugeZeroPage, probe_huge_zero_page(*a));
      set(Cap::kSoftDirty, probe_soft_dirty(*a));
      set(Cap::kGuardRegions, probe_guard_regions(*a));
      set(Cap::kReadOnlyThp, probe_read_only_thp(*a));
      a->exit();
    }
  }
  // A 64K mTHP where the kernel has one, as the experiment; else the smallest size.
  unsigned kb = 0;
  for (unsigned s : p.mthp_kb)
    if (s == 64 || (!kb && s < PMD_SIZE / 1024)) kb = s;
  const int cpu = first_allowed_cpu();
  set(Cap::kBlkdevSwap, probe_swap_kind(HostSwapKind::kBlkdev, kb, cpu));
  set(Cap::kFileSwap, probe_swap_kind(HostSwapKind::kFile, kb, cpu));
  set(Cap::kZramSwap, probe_swap_kind(HostSwapKind::kZram, kb, cpu));
  std::string why;
  set(Cap::kIoUring, host_io_uring_available(&why) ? yes("a ring can be made") : no(why));
  set(Cap::kHugetlb2M, probe_pool("2048"));
  set(Cap::kHugetlb1G, probe_pool("1048576"));
  return p;
}

int parse_caps(const std::string& list, std::set<int>* out, std::string* why) {
  std::set<int> caps;
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');) {
    if (name.empty()) continue;
    if (name == "all") {
      for (int i = 0; i < kNumCaps; i++) caps.insert(i);
      continue;
    }
    int found = -1;
    for (int i = 0; i < kNumCaps; i++)
      if (name == kCapNames[i]) found = i;
    if (found < 0) {
      std::string names;
      for (auto* n : kCapNames) names += std::string(names.empty() ? "" : ", ") + n;
      *why = fmt::format("unknown host probe '{}' (probes: {}, or all)", name, names);
      return -EINVAL;
    }
    caps.insert(found);
  }
  *out = std::move(caps);
  return 0;
}

}  // namespace

const char* cap_name(Cap c) { return kCapNames[static_cast<int>(c)]; }

std::string HostProbes::reason(Cap c) const {
  const CapResult& r = (*this)[c];
  if (r.faked) return fmt::format("{}: forced missing (measured: {})", cap_name(c), r.detail);
  return fmt::format("{}: {}", cap_name(c), r.detail);
}

int set_fake_probes(const std::string& list, std::string* why) { return parse_caps(list, &g_forced_api, why); }

HostProbes host_probes() {
  if (!g_measured) {
    if (const char* env = std::getenv("MMLAB_HOST_FAKE_PROBES")) {
      std::string why;
      if (parse_caps(env, &g_forced_env, &why)) fmt::print(stderr, "mmlab: MMLAB_HOST_FAKE_PROBES: {} (ignored)\n", why);
    }
    g_measured = measure();
  }
  HostProbes p = *g_measured;
  for (const std::set<int>* forced : {&g_forced_env, &g_forced_api})
    for (int c : *forced)
      if (p.caps[c].have) {
        p.caps[c].have = false;
        p.caps[c].faked = true;
      }
  return p;
}

std::vector<std::string> host_probe_lines(const HostProbes& p) {
  std::vector<std::string> lines;
  for (int i = 0; i < kNumCaps; i++) {
    const CapResult& r = p.caps[i];
    lines.push_back(r.faked ? fmt::format("# host probe {}: no, forced (measured yes: {})", kCapNames[i], r.detail)
                            : fmt::format("# host probe {}: {} ({})", kCapNames[i], r.have ? "yes" : "no", r.detail));
  }
  std::string sizes, other;
  for (unsigned kb : p.mthp_kb) sizes += fmt::format(" {}kB", kb);
  for (unsigned kb : p.mthp_other_kb) other += fmt::format(" {}kB", kb);
  lines.push_back("# host anonymous mTHP sizes:" + (sizes.empty() ? std::string(" none") : sizes) +
                  (other.empty() ? "" : "; without an anonymous `enabled` (shmem only):" + other));
  return lines;
}

int probe_zero_page_here(std::string* detail) {
  void* p = mmap(nullptr, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *detail = "cannot map a page";
    return -ENOMEM;
  }
  madvise(p, PAGE_SIZE, MADV_NOHUGEPAGE);
  (void)*static_cast<volatile const char*>(p);  // the read fault
  HostPageInfo pi;
  int err = host_page_info(getpid(), reinterpret_cast<uint64_t>(p), &pi, detail);
  munmap(p, PAGE_SIZE);
  if (err) return err;
  if (!pi.present) {
    *detail = "an anonymous read fault left nothing mapped";
    return -EAGAIN;
  }
  *detail = pi.zero ? fmt::format("an anonymous read fault mapped the shared zero page (pfn {:#x} has KPF_ZERO_PAGE)", pi.pfn)
                    : fmt::format("an anonymous read fault mapped a fresh page (pfn {:#x}, KPF_ZERO_PAGE clear)", pi.pfn);
  return pi.zero ? 1 : 0;
}

}  // namespace mmlab::host
