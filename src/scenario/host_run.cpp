// The host backend: a test runs on the machine's own kernel. Each named
// process is a real process (src/host/agent.h), settings are the real
// /sys/kernel/mm files (restored when the test ends), expectations are read
// from pagemap, PAGEMAP_SCAN and kpageflags. What the host cannot do makes
// the test SKIP with the reason; what it cannot observe (PageAnonExclusive,
// pins, model counters, the invariant checker), what depends on a
// capability its kernel lacks (host/probe.h: the zero page, soft-dirty, the
// swap device's kind, ...; the pages concerned are tracked in HostPages)
// and machine-wide statistics that other processes moved meanwhile are
// skipped expectation by expectation and counted.
#include <fcntl.h>
#include <fnmatch.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "fmt/format.h"
#include "host/agent.h"
#include "host/host_file.h"
#include "host/host_gup.h"
#include "host/pagemap.h"
#include "host/probe.h"
#include "host/host_swap.h"
#include "host/sysfs.h"
#include "mmlab/gup.h"
#include "mmlab/types.h"
#include "scenario/host_pages.h"
#include "scenario/test_run.h"

namespace mmlab {
namespace {

using host::Agent;
using host::Cap;

std::map<std::string, int64_t> read_vmstat() {
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
bool sysfs_is_counter(const std::string& path) { return path.find("/stats/") != std::string::npos; }

// Statistics of swap I/O, which zswap counts elsewhere (zswpout, zswpin).
// A fallback (no swap space for a large folio) happens before zswap.
bool is_swap_io_stat(const std::string& name) {
  return name.find("swp") != std::string::npos && name.find("fallback") == std::string::npos;
}

// A statistic as `vmstat NAME` or `sysfs PATH`: the keys of the baselines.
std::string vmstat_key(const std::string& name) { return "vmstat " + name; }
std::string sysfs_key(const std::string& path) { return "sysfs " + path; }

// The hugetlb pools (2M, 1G) as /sys/kernel/mm paths.
constexpr const char* kPools[2] = {"hugepages/hugepages-2048kB/", "hugepages/hugepages-1048576kB/"};

// The advices whose reclaim starts with lru_add_drain(): the local CPU's batches only.
bool drains_local_lru(int advice) { return advice == MADV_COLD || advice == MADV_PAGEOUT || advice == MADV_FREE; }

// SIGKILL: the process died or hung during the access (agent.h).
const char* sig_name(int sig) {
  return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGKILL ? "SIGKILL" : sig ? "SIG?" : "";
}

class HostRun final : public TestRun {
 public:
  static constexpr unsigned kTestTimeoutSec = 600;
  // How long the runner watches the machine's statistics with the test's
  // processes idle: before the test (when it expects statistics) and again,
  // at most, when such an expectation does not hold. Any process that
  // starts (a shell's pipeline, a monitor's poll) faults a few dozen mTHPs
  // in its first milliseconds, so the second watch must outlast a poller's
  // period of a second or two; it ends as soon as the statistic moves.
  static constexpr useconds_t kIdleBeforeUs = 100'000, kIdleAfterUs = 3'000'000, kIdleStepUs = 50'000;

  explicit HostRun(const ScenarioOptions& opt) : TestRun(opt) {}

 private:
  struct Proc {
    std::unique_ptr<Agent> agent;
    HostPages pages;  // what the test mapped, and which pages may differ from upstream
  };
  struct Handle {
    std::unique_ptr<host::HostGupHandle> gup;
    // What it holds differs from what upstream's would: the zero page
    // (upstream's handle keeps it when the process writes) or pages whose
    // write fault does not happen here.
    uint8_t taint = 0;
    std::string proc;
    uint64_t addr = 0, len = 0;
  };

  // Whether the gigantic pool an earlier test of this run sized may stay as
  // it is: this test sizes it itself, or never looks at 1 GiB pages. A
  // gigantic page costs seconds to clear the first time it is faulted on
  // this project's paravirtualised hosts (the hypervisor backs the guest's
  // memory on first touch, ~2.5 s per GiB, and takes freed memory back), a
  // few tens of ms once backed; emptying the pool between the tests that
  // use it paid that again for each.
  static bool keeps_gigantic_pool(const std::vector<const Stmt*>& stmts) {
    bool sizes = false, looks = false;
    for (const Stmt* st : stmts) {
      if (auto* w = st->as<stmt::Sysfs>()) {
        sizes |= w->path == host::kGiganticPool && w->value != "0";
        looks |= w->path.find("hugepages-1048576kB") != std::string::npos;
      }
      if (auto* e = st->as<stmt::ExpectSysfs>()) looks |= e->path.find("hugepages-1048576kB") != std::string::npos;
      if (auto* m = st->as<stmt::Mmap>()) looks |= m->hugetlb_shift == PUD_SHIFT;
      if (auto* f = st->as<stmt::File>()) looks |= f->hugetlb_shift == PUD_SHIFT;
    }
    return sizes || !looks;
  }

  void start(const std::vector<const Stmt*>& stmts) override {
    probes_ = host::host_probes();
    // mmlab's own allocations must not fault THPs and count in the test's
    // statistics; the host processes clear this for themselves (agent.cpp).
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    // A hung test ends the run through the restoring SIGALRM handler (host/sysfs.h).
    alarm(kTestTimeoutSec);
    std::string why;
    if (guard_.apply_defaults(&why, keeps_gigantic_pool(stmts))) throw StartError{"cannot reset the host's settings: " + why};
    for (const char* pool : kPools) outside_resv_[pool] = host::pool_outside_reservations(pool);
    std::set<std::string> counters;
    bool drains = false;
    for (const Stmt* st : stmts) {
      if (auto* m = st->as<stmt::Madvise>(); m && drains_local_lru(m->advice)) drains = true;
      if (auto* e = st->as<stmt::ExpectVmstat>()) counters.insert(vmstat_key(e->item));
      if (auto* e = st->as<stmt::ExpectSysfs>(); e && sysfs_is_counter(e->path)) counters.insert(sysfs_key(e->path));
    }
    if (drains) pin_to_one_cpu();
    vmstat_at_start_ = read_vmstat();  // `counters print` and a failure's state print deltas since
    // Activity the test does not cause, seen while nothing of the test runs.
    std::map<std::string, int64_t> before;
    for (auto& k : counters) before[k] = read_counter(k);
    if (!counters.empty()) usleep(kIdleBeforeUs);
    for (auto& k : counters) {
      base_[k] = read_counter(k);
      if (before[k] != std::numeric_limits<int64_t>::min()) idle_before_[k] = base_[k] - before[k];
    }
  }

  // The runner too (it fills files' page cache, which MADV_PAGEOUT and
  // MADV_COLD reclaim); its processes are pinned by pin_cpu() (agent.h).
  void pin_to_one_cpu() {
    if (sched_getaffinity(0, sizeof(saved_affinity_), &saved_affinity_) != 0) return;
    int cpu = sched_getcpu();
    if (cpu < 0 || !CPU_ISSET(cpu, &saved_affinity_))
      for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved_affinity_); cpu++) {
      }
    if (cpu >= CPU_SETSIZE) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) cpu_ = cpu;
  }

  std::vector<std::string> teardown() override {
    handles_.clear();
    std::vector<int> pids;
    for (auto& [n, p] : procs_) {
      pids.push_back(p.agent->pid());
      if (p.agent->alive()) p.agent->exit();
      p.agent.reset();
    }
    for (auto& [n, fd] : files_) close(fd);
    files_.clear();
    swap_.remove();
    guard_.restore();
    if (cpu_ >= 0) sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
    cpu_ = -1;
    alarm(0);
    std::vector<std::string> leaks;
    for (int pid : pids) {
      host::unregister_host_pid(pid);
      // The exit is seen at exit_files(); the process is gone moments later.
      for (int i = 0; i < 2000 && process_lives(pid); i++) usleep(1000);
      if (process_lives(pid)) leaks.push_back(fmt::format("host process {} outlived its test", pid));
    }
    return leaks;
  }

  static bool process_lives(int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return false;
    std::string line;
    std::getline(stat, line);
    auto rp = line.rfind(')');
    return rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] != 'Z' && line[rp + 2] != 'X';
  }

  Proc& proc(const Stmt& st, const std::string& name) {
    auto it = procs_.find(name);
    if (it == procs_.end()) fail(st, fmt::format("no process named {}", name));
    if (!it->second.agent || !it->second.agent->alive()) fail(st, fmt::format("process {} has exited", name));
    return it->second;
  }
  Agent& agent(const Stmt& st, const std::string& name) { return *proc(st, name).agent; }

  // A system call's result; a host process that stopped answering ends the test.
  long sys(const Stmt& st, long ret) {
    if (ret == -EPIPE || ret == -ETIMEDOUT) fail(st, fmt::format("the host process died or hung ({})", errno_name(static_cast<int>(ret))));
    return ret;
  }

  void add_proc(const Stmt& st, const std::string& name, std::unique_ptr<Agent> a, HostPages pages) {
    host::register_host_pid(a->pid());
    if (cpu_ >= 0) sys(st, a->pin_cpu(cpu_));
    procs_[name] = Proc{std::move(a), std::move(pages)};
  }

  // One overload per statement struct: a statement kind without one does not compile.
  void exec(const Stmt& st) override {
    std::visit([&](const auto& s) { run(st, s); }, st.body);
  }

  void run(const Stmt&, const stmt::Tune& s) {
    throw SkipTest{fmt::format("tune {} is a model variant the host kernel does not have", s.key)};
  }
  void run(const Stmt& st, const stmt::Proc& s) {
    bind(st, s.proc, 'p');
    std::string err;
    auto a = Agent::spawn(s.proc, &err);
    if (!a) fail(st, "cannot start a host process: " + err);
    add_proc(st, s.proc, std::move(a), {});
  }
  void run(const Stmt& st, const stmt::Exit& s) { agent(st, s.proc).exit(); }
  void run(const Stmt& st, const stmt::Munmap& s) {
    Proc& p = proc(st, s.proc);
    long r = sys(st, p.agent->munmap(addr(st, s.addr), s.size));
    check_errno(st, r, "munmap");
    if (r == 0) p.pages.unmap(addr(st, s.addr), s.size);
  }
  void run(const Stmt& st, const stmt::Mprotect& s) {
    check_errno(st, sys(st, agent(st, s.proc).mprotect(addr(st, s.addr), s.size, s.prot)), "mprotect");
  }
  void run(const Stmt& st, const stmt::Mremap& s) {
    int flags = MREMAP_MAYMOVE | (s.to ? MREMAP_FIXED : 0);
    Proc& p = proc(st, s.proc);
    const uint64_t old = addr(st, s.addr);
    long r = sys(st, p.agent->mremap(old, s.old_size, s.new_size, flags, s.to ? addr(st, *s.to) : 0));
    check_errno(st, r, "mremap");
    bind(st, s.region, 'r');
    if (r >= 0) {
      regions_[s.region] = static_cast<uint64_t>(r);
      p.pages.remap(old, s.old_size, static_cast<uint64_t>(r), s.new_size);
    }
  }
  void run(const Stmt&, const stmt::Advance&) {
    throw SkipTest{"`advance` moves the model's virtual clock; the host's time is its own"};
  }
  void run(const Stmt&, const stmt::Inject&) {
    throw SkipTest{"host cannot inject: `inject` arms the model's fault injector (the host's fail_page_alloc needs debugfs and CONFIG_FAULT_INJECTION, and would fail other processes' allocations)"};
  }
  void run(const Stmt&, const stmt::ThpDisable&) { throw SkipTest{"the host agent has no prctl or userfaultfd request"}; }
  void run(const Stmt&, const stmt::UffdRegister&) { throw SkipTest{"the host agent has no prctl or userfaultfd request"}; }
  void run(const Stmt&, const stmt::UffdWp&) { throw SkipTest{"the host agent has no prctl or userfaultfd request"}; }
  void run(const Stmt&, const stmt::CountersReset&) {}  // counter expectations are skipped on the host
  void run(const Stmt&, const stmt::CountersPrint& s) { exec_counters_print(s); }
  void run(const Stmt& st, const stmt::Print& s) { exec_print(st, s); }

  std::vector<std::string> state_lines(const Stmt& st, const std::string& pname, stmt::PrintWhat what, uint64_t start,
                                       uint64_t end) override {
    const int pid = agent(st, pname).pid();
    switch (what) {
      case stmt::PrintWhat::kSmaps: {
        std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
        std::stringstream text;
        text << in.rdbuf();
        if (!in) return {fmt::format("(cannot read /proc/{}/smaps)", pid)};
        return smaps_of_range(text.str(), start, end);
      }
      case stmt::PrintWhat::kPagetable:
        return {"(model-only: user space cannot read the host's page tables; `print folio` shows what pagemap and kpageflags say)"};
      case stmt::PrintWhat::kFolio: {
        host::HostPageInfo pi;
        std::string why;
        if (host::host_page_info(pid, start, &pi, &why)) return {"(cannot read the host's pagemap: " + why + ")"};
        if (!pi.present) return {pi.swapped ? "(a swap entry: no folio mapped)" : "(nothing mapped)"};
        return {fmt::format("pagemap/kpageflags: pfn:{:#x} order:{} huge-leaf:{} hugetlb:{} zero:{} anon:{} swapbacked:{} "
                            "(refcount, mapcount and pincount are not shown to user space)",
                            pi.pfn, pi.order, pi.huge, pi.hugetlb, pi.zero, pi.anon, pi.swapbacked)};
      }
    }
    return {};
  }

  // /proc/vmstat deltas since the test began (machine-wide: other processes move them too).
  std::vector<std::string> counter_lines(const std::string& glob) override {
    std::vector<std::string> out{"(the model's event counters do not exist on the host; vmstat: deltas since the test began, machine-wide)"};
    for (auto& [name, v] : read_vmstat()) {
      auto it = vmstat_at_start_.find(name);
      const int64_t d = v - (it == vmstat_at_start_.end() ? 0 : it->second);
      if (glob.empty() ? d != 0 : fnmatch(glob.c_str(), name.c_str(), 0) == 0) out.push_back(fmt::format("vmstat {} {}", name, d));
    }
    return out;
  }
  void run(const Stmt& st, const stmt::Write& s) {
    Proc& p = proc(st, s.proc);
    const uint64_t at = addr(st, s.addr);
    host::HostAccess r = p.agent->write(at, s.size, s.byte);
    // A written page is no zero page upstream either (CoW from it).
    p.pages.clear(at, r.sig ? std::min(r.fault_addr - std::min(r.fault_addr, at), s.size) : s.size, kTaintZero);
    check_signal(st, sig_name(r.sig), r.fault_addr, "write");
  }
  void run(const Stmt& st, const stmt::Unpin& s) {
    handle(st, s.handle);  // a name that holds nothing is an error, as in the model
    handles_.erase(s.handle);
  }
  void run(const Stmt&, const stmt::Dump&) {
    throw SkipTest{"the host has no get_dump_page interface (a core dump) for `dump`"};
  }
  void run(const Stmt&, const stmt::Check&) { skip_expectation("check (the invariant checker is the model's)"); }
  void run(const Stmt&, const stmt::Skip& s) { exec_skip(s); }
  void run(const Stmt&, const stmt::Xfail& s) { exec_xfail(s); }

  // A knob or statistic an older kernel does not have: the scenario is
  // valid, the host just cannot express it.
  static void require_sysfs_file(const std::string& rel) {
    if (access(("/sys/kernel/mm/" + rel).c_str(), F_OK) != 0)
      throw SkipTest{"the host kernel has no /sys/kernel/mm/" + rel};
  }

  // A reservation no process owns any more (a kernel can leak one, and only
  // a reboot clears it) holds a page of its pool for good. Such a pool is
  // sized that many pages larger for the test, and its counts read that
  // many lower, so the test sees the pool a fresh boot would give it.
  long leaked_resv(const std::string& rel) const {
    for (const char* pool : kPools)
      if (rel.rfind(pool, 0) == 0) {
        auto it = outside_resv_.find(pool);
        return it == outside_resv_.end() ? 0 : it->second;
      }
    return 0;
  }
  static bool pool_count_file(const std::string& rel) {
    for (const char* f : {"/nr_hugepages", "/free_hugepages", "/resv_hugepages"})
      if (rel.size() > std::strlen(f) && rel.compare(rel.size() - std::strlen(f), std::strlen(f), f) == 0) return true;
    return false;
  }

  void run(const Stmt& st, const stmt::Sysfs& s) {
    require_sysfs_file(s.path);
    const bool pool = s.path.find("/nr_hugepages") != std::string::npos;
    std::string value = s.value;
    for (int i = 0; i < 2; i++) {
      if (!pool || s.path.rfind(kPools[i], 0) != 0 || s.value == "0") continue;
      // A pool the probe found this host cannot fill at all: skipped at once.
      const Cap cap = i == 0 ? Cap::kHugetlb2M : Cap::kHugetlb1G;
      if (!probes_.have(cap)) throw SkipTest{probes_.reason(cap)};
      if (long resv = leaked_resv(s.path)) {
        char* end = nullptr;
        const long n = std::strtol(s.value.c_str(), &end, 10);
        if (*end == '\0' && n >= 0) value = std::to_string(n + resv);
      }
    }
    auto write = [&] { return s.path == host::kGiganticPool ? host::keep_pool_write(s.path, value) : guard_.write(s.path, value); };
    int r = write();
    check_errno(st, r, "sysfs write");
    // A pool the host could not fill: the selftests skip when short of huge pages.
    if (r == 0 && pool) {
      std::string got;
      if (host::sysfs_read(s.path, &got) == 0 && got != value) {
        // Gigantic pages need contiguous memory: drop clean page cache,
        // compact, and try once more.
        std::ofstream("/proc/sys/vm/drop_caches") << "1";
        std::ofstream("/proc/sys/vm/compact_memory") << "1";
        write();
        (void)host::sysfs_read(s.path, &got);  // unread, got differs from value below
      }
      if (got != value)
        throw SkipTest{fmt::format("the host could allocate only {} of {} pages for {}", got, value, s.path)};
    }
  }

  // The khugepaged kthread's pid, or 0: it exists only while a THP size it
  // serves is enabled (start_stop_khugepaged).
  static pid_t khugepaged_pid() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      std::ifstream comm(e.path() / "comm");
      std::string name;
      if (comm && std::getline(comm, name) && name == "khugepaged")
        return static_cast<pid_t>(std::strtol(e.path().filename().c_str(), nullptr, 10));
    }
    return 0;
  }

  // How often the thread has been switched out (voluntarily or not), and
  // whether it is asleep now (state S); -1 if its status cannot be read.
  static long thread_switches(pid_t pid, bool* asleep) {
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    std::string line;
    long switches = -1;
    *asleep = false;
    while (std::getline(status, line)) {
      if (line.rfind("State:", 0) == 0) {
        const size_t at = line.find_first_not_of(" \t", 6);
        *asleep = at != std::string::npos && line[at] == 'S';
      }
      for (const char* key : {"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"})
        if (line.rfind(key, 0) == 0) switches = std::max(switches, 0L) + std::strtol(line.c_str() + std::strlen(key), nullptr, 10);
    }
    return switches;
  }

  static long khugepaged_full_scans() {
    std::string v;
    return host::sysfs_read("transparent_hugepage/khugepaged/full_scans", &v) == 0 ? std::strtol(v.c_str(), nullptr, 10) : -1;
  }

  // `khugepaged N`: wait for N full scans the host's khugepaged starts after
  // now (the one in progress may have passed the test's mm already, hence
  // start + N + 1), with the scan sleep lowered meanwhile.
  void run(const Stmt& st, const stmt::Khugepaged& s) {
    if (!s.scans) return;
    const pid_t thread = khugepaged_pid();
    if (!thread)
      throw SkipTest{"the host's khugepaged thread is not running (it runs only while a THP size it serves is enabled)"};
    // Both sleeps lowered meanwhile (a write also wakes the thread): after an
    // allocation failure it would otherwise sleep alloc_sleep_millisecs.
    const std::string sleep_files[] = {"transparent_hugepage/khugepaged/scan_sleep_millisecs",
                                       "transparent_hugepage/khugepaged/alloc_sleep_millisecs"};
    std::string sleep_was[2];
    for (int i = 0; i < 2; i++)
      if (host::sysfs_read(sleep_files[i], &sleep_was[i])) throw SkipTest{"the host kernel has no /sys/kernel/mm/" + sleep_files[i]};
    const long start = khugepaged_full_scans();
    if (start < 0) throw SkipTest{"the host kernel has no khugepaged full_scans counter"};
    constexpr long kSleepMs = 10;
    bool lower[2];
    for (int i = 0; i < 2; i++) {
      lower[i] = std::strtol(sleep_was[i].c_str(), nullptr, 10) > kSleepMs;
      if (lower[i]) check_errno(st, guard_.write(sleep_files[i], std::to_string(kSleepMs)), "sysfs write");
    }
    // A full scan visits every registered mm on the machine, and a wake may
    // sit in compaction or an alloc sleep: allow for a busy machine.
    // With no mm registered (an anonymous VMA without an anon_vma is not:
    // thp_vma_allowable_orders refuses it to khugepaged), the thread sleeps
    // without a timeout (khugepaged_wait_work) and never completes a scan,
    // as the model's `khugepaged` returns at once then. With work it wakes
    // at least every kSleepMs. So a thread found asleep that has not been
    // switched once in kIdleQuiet has nothing to scan; where its status
    // cannot be read, no full scan within kIdleWait says the same.
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::seconds(60 + 30 * s.scans);
    constexpr auto kIdleWait = std::chrono::seconds(10);
    constexpr auto kIdleQuiet = std::chrono::milliseconds(500);
    bool asleep = false;
    long switches = thread_switches(thread, &asleep);
    auto quiet_since = t0;
    auto idle = [&](std::chrono::steady_clock::time_point now) {
      const long seen = thread_switches(thread, &asleep);
      if (seen < 0 || switches < 0) return now - t0 >= kIdleWait;
      if (seen != switches || !asleep) {
        switches = seen;
        quiet_since = now;
      }
      return now - quiet_since >= kIdleQuiet || now - t0 >= kIdleWait;
    };
    long now = start;
    while ((now = khugepaged_full_scans()) < start + static_cast<long>(s.scans) + 1 && std::chrono::steady_clock::now() < deadline &&
           (now > start || !idle(std::chrono::steady_clock::now())))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int i = 0; i < 2; i++)
      if (lower[i]) guard_.write(sleep_files[i], sleep_was[i]);
    khugepaged_ran_ = true;
    // A zero-page stand-in counts as present where upstream's zero page
    // counts as none (max_ptes_none): its PMD may have collapsed here only.
    for (auto& [name, p] : procs_) {
      std::vector<std::pair<uint64_t, uint64_t>> stand_ins;
      for (auto& [from, t] : p.pages.taints())
        if (t.bits & kTaintStandIn) stand_ins.emplace_back(from, t.end);
      for (auto& [from, to] : stand_ins) taint_collapsed(p, from, to - from);
    }
    if (now == start) return;
    if (now < start + static_cast<long>(s.scans) + 1)
      fail(st, fmt::format("the host's khugepaged made {} of {} full scans before the timeout", now - start, s.scans + 1));
  }

  // A statistic that the host's khugepaged moves for whichever mm it scans:
  // once the test waited for full scans, those scans visited every process
  // on the machine, so more than the test's own collapses may count.
  static bool khugepaged_statistic(const std::string& key) {
    return key.find("collapse") != std::string::npos || key.find("khugepaged/") != std::string::npos ||
           key.find("thp_scan_exceed") != std::string::npos;
  }

  void run(const Stmt& st, const stmt::File& s) {
    bind(st, s.name, 'f');
    std::string why;
    int fd = host::host_create_file(s.size, s.fs, s.hugetlb_shift, s.name, &why);
    if (fd == host::kNoSuchFs) throw SkipTest{why};
    check_errno(st, fd, "file");
    if (fd >= 0) files_[s.name] = fd;
    if (fd >= 0 && s.hugetlb_shift) hugetlb_files_.insert(s.name);
  }

  // The kind the test names when the host can make it (probe blkdev_swap /
  // file_swap); else the other kind, and expectations on the large folios
  // that it then swaps out differently are skipped (kTaintSwapKind).
  void run(const Stmt&, const stmt::Swap& s) {
    const bool blkdev = s.kind != "file";
    const Cap want = blkdev ? Cap::kBlkdevSwap : Cap::kFileSwap;
    const bool other = !probes_.have(want);
    if (other) swap_kind_reason_ = probes_.reason(want);
    auto kind = blkdev != other ? host::HostSwapKind::kBlkdev : host::HostSwapKind::kFile;
    std::string why;
    if (swap_.add(s.size, kind, &why)) throw SkipTest{"no swap device on the host: " + why};
  }

  void run(const Stmt& st, const stmt::Mmap& s) {
    Proc& p = proc(st, s.proc);
    bind(st, s.region, 'r');
    int flags = s.shared ? MAP_SHARED : MAP_PRIVATE;
    int fd = -1;
    if (!s.file.empty()) {
      auto it = files_.find(s.file);
      if (it == files_.end()) fail(st, fmt::format("no file named {}", s.file));
      fd = it->second;
    }
    if (fd < 0) {
      flags |= MAP_ANONYMOUS;
      if (s.hugetlb_shift) flags |= MAP_HUGETLB | (s.hugetlb_shift == 30 ? MAP_HUGE_1GB : MAP_HUGE_2MB);
    }
    auto do_map = [&](uint64_t at, uint64_t len, int extra) {
      return sys(st, p.agent->mmap(at, len, s.prot, flags | extra, fd, fd >= 0 ? s.file_off : 0));
    };
    long r;
    if (s.align <= PAGE_SIZE) {
      r = do_map(0, s.size, 0);
    } else {
      // As a selftest does: reserve size + align of nothing, place the mapping at the aligned start inside.
      long probe = sys(st, p.agent->mmap(0, s.size + s.align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      check_errno(st, probe, "mmap");
      uint64_t start = round_up(static_cast<uint64_t>(probe), s.align);
      r = do_map(start, s.size, MAP_FIXED);
      if (start > static_cast<uint64_t>(probe)) p.agent->munmap(static_cast<uint64_t>(probe), start - static_cast<uint64_t>(probe));
      uint64_t end = static_cast<uint64_t>(probe) + s.size + s.align;
      if (end > start + s.size) p.agent->munmap(start + s.size, end - (start + s.size));
      if (r < 0) p.agent->munmap(start, s.size);
    }
    check_errno(st, r, "mmap");
    if (r >= 0) {
      regions_[s.region] = static_cast<uint64_t>(r);
      HostRangeKind kind = HostRangeKind::kOther;
      if (s.hugetlb_shift || hugetlb_files_.count(s.file))
        kind = HostRangeKind::kHugetlb;
      else if (fd < 0 && !s.shared)
        kind = HostRangeKind::kAnonPrivate;
      p.pages.map(static_cast<uint64_t>(r), s.size, kind);
    }
  }

  void run(const Stmt& st, const stmt::Fork& s) {
    bind(st, s.child, 'p');
    Proc& parent = proc(st, s.parent);
    long err = 0;
    auto c = parent.agent->fork(s.child, &err);
    check_errno(st, c ? 0 : sys(st, err), "fork");
    if (!c) return;
    // The child has what the parent had, but for what it did not inherit
    // (MADV_DONTFORK, MADV_WIPEONFORK): its pagemap says.
    HostPages pages = parent.pages;
    for (auto& [from, t] : parent.pages.taints()) {
      std::vector<uint64_t> pm;
      if (host::pagemap_entries(c->pid(), from, (t.end - from) >> PAGE_SHIFT, &pm)) fail(st, "cannot read the host's pagemap");
      for (uint64_t i = 0, run = 0; i <= pm.size(); i++) {  // clear runs of pages the child lacks
        if (i < pm.size() && !(pm[i] & (host::kPmPresent | host::kPmSwap))) continue;
        if (i > run) pages.clear(from + run * PAGE_SIZE, (i - run) * PAGE_SIZE, 0xff);
        run = i + 1;
      }
    }
    add_proc(st, s.child, std::move(c), std::move(pages));
  }

  void run(const Stmt& st, const stmt::Madvise& s) {
    Proc& p = proc(st, s.proc);
    const uint64_t at = addr(st, s.addr);
    if (s.advice == MADV_PAGEOUT && !swap_.on() && !probes_.have(Cap::kNoHostSwap))
      throw SkipTest{probes_.reason(Cap::kNoHostSwap)};
    if (s.advice == MADV_PAGEOUT && swap_.on()) {
      if (!probes_.have(Cap::kZswapOff)) zswap_used_ = true;
      if (!swap_kind_reason_.empty()) mark_large_folios(st, p, at, s.size);
    }
    ReadWatch w;
    if (s.advice == MADV_POPULATE_READ) w = watch_read(st, p, at, s.size);
    const uint8_t stand_in = s.advice == MADV_COLLAPSE ? p.pages.in(at, s.size) & kTaintStandIn : 0;
    long r = sys(st, p.agent->madvise(at, s.size, s.advice));
    if (stand_in) {
      // Upstream finds zero pages where this host mapped fresh ones: for
      // MADV_COLLAPSE they are not writable PTEs (SCAN_PAGE_RO when no other
      // is) and not counted as present, so whether it collapses, and with what
      // error, may differ, and so does the mapping after it.
      taint_collapsed(p, at, s.size);
      if (st.expect_error ? r != st.expect_errno : r < 0) {
        skip_expectation(taint_reason(stand_in));
        return;
      }
    }
    check_errno(st, r, ("madvise " + s.advice_name).c_str());
    if (r != 0) return;
    switch (s.advice) {
      case MADV_DONTNEED: p.pages.clear(at, s.size, 0xff); break;  // the pages are gone
      case MADV_POPULATE_READ: taint_read(st, p, w, at, s.size); break;
      case MADV_POPULATE_WRITE: p.pages.clear(at, s.size, kTaintZero); break;
      // Reclaim takes the fresh pages this host mapped; upstream's zero page stays.
      case MADV_PAGEOUT:
      case MADV_FREE: p.pages.add_where(at, s.size, kTaintZeroPte | kTaintZeroPmd, kTaintZeroMapped); break;
      default: break;
    }
  }

  // Before MADV_PAGEOUT on the other kind of swap device than the test
  // asked for: the pages of large folios, which that device splits or keeps whole.
  void mark_large_folios(const Stmt& st, Proc& p, uint64_t at, uint64_t len) {
    for (auto& [from, to] : p.pages.pieces(at, len)) {
      std::vector<bool> large;
      if (host::pagemap_large_folio(p.agent->pid(), from, (to - from) >> PAGE_SHIFT, &large))
        fail(st, "cannot read the host's pagemap");
      for (uint64_t i = 0; i < large.size(); i++)
        if (large[i]) {
          p.pages.set(from + i * PAGE_SIZE, PAGE_SIZE, kTaintSwapKind);
          swap_kind_used_ = true;
        }
    }
  }

  // clear_refs 4 does nothing on a kernel without soft-dirty tracking: the
  // statement is skipped (counted), and what depends on the write-protection
  // it would have made is skipped where it is read (kTaintSoftDirty). Not
  // hugetlb: clear_refs never walks it, and mprotect never maps it writable
  // ahead of a write fault, on any kernel.
  void run(const Stmt& st, const stmt::ClearSoftDirty& s) {
    Proc& p = proc(st, s.proc);
    if (!probes_.have(Cap::kSoftDirty)) {
      bool changed = false;  // upstream would have changed anything
      for (auto& [from, r] : p.pages.ranges())
        if (r.kind != HostRangeKind::kHugetlb) {
          p.pages.set(from, r.end - from, kTaintSoftDirty);
          changed = true;
        }
      if (!changed) return;
      skip_expectation(probes_.reason(Cap::kSoftDirty));
      for (auto& [n, h] : handles_)
        if (h.proc == s.proc) h.taint |= p.pages.in(h.addr, h.len) & kTaintSoftDirty;
      soft_dirty_used_ = true;
      return;
    }
    std::ofstream f("/proc/" + std::to_string(p.agent->pid()) + "/clear_refs");
    f << "4";
    if (!f.flush()) fail(st, "cannot write clear_refs");
  }

  // A read-type fault (a load, MADV_POPULATE_READ, GUP without FOLL_WRITE)
  // maps the zero page upstream where it finds nothing. On a host that does
  // not (probes zero_page, huge_zero_page), the pages that became present
  // meanwhile in private anonymous memory are told apart: the fault's folio
  // (an mTHP or THP) may map more than the range read.
  struct ReadWatch {
    std::vector<std::pair<uint64_t, uint64_t>> pieces;
    std::vector<std::vector<uint64_t>> before;  // pagemap entries
  };

  ReadWatch watch_read(const Stmt& st, Proc& p, uint64_t at, uint64_t len) {
    ReadWatch w;
    if ((probes_.have(Cap::kZeroPage) && probes_.have(Cap::kHugeZeroPage)) || !len) return w;
    const uint64_t from = round_down(at, PMD_SIZE), to = round_up(at + len, PMD_SIZE);
    w.pieces = p.pages.pieces(from, to - from, HostRangeKind::kAnonPrivate);
    for (auto& [a, b] : w.pieces) {
      w.before.emplace_back();
      if (host::pagemap_entries(p.agent->pid(), a, (b - a) >> PAGE_SHIFT, &w.before.back()))
        fail(st, "cannot read the host's pagemap");
    }
    return w;
  }

  void taint_read(const Stmt& st, Proc& p, const ReadWatch& w, uint64_t at, uint64_t len) {
    for (size_t i = 0; i < w.pieces.size(); i++) {
      auto [from, to] = w.pieces[i];
      const uint64_t n = (to - from) >> PAGE_SHIFT;
      std::vector<uint64_t> now;
      std::vector<bool> huge;
      if (host::pagemap_entries(p.agent->pid(), from, n, &now) || host::pagemap_huge(p.agent->pid(), from, n, &huge))
        fail(st, "cannot read the host's pagemap");
      std::optional<bool> use_zero_page;
      std::vector<bool> large;  // read only if a stand-in page is found
      for (uint64_t j = 0; j < n; j++) {
        if ((w.before[i][j] & (host::kPmPresent | host::kPmSwap)) || !(now[j] & host::kPmPresent)) continue;
        uint8_t bits = 0;
        if (huge[j]) {
          if (!use_zero_page) {
            std::string v;
            use_zero_page = host::sysfs_read("transparent_hugepage/use_zero_page", &v) == 0 && v == "1";
          }
          if (!probes_.have(Cap::kHugeZeroPage) && *use_zero_page) bits = kTaintZeroPmd;
        } else if (!probes_.have(Cap::kZeroPage)) {
          bits = kTaintZeroPte;
          if (large.empty() && host::pagemap_large_folio(p.agent->pid(), from, n, &large))
            fail(st, "cannot read the host's pagemap");
          if (large[j]) bits |= kTaintZeroFolio;
        }
        const uint64_t page = from + j * PAGE_SIZE;
        if (bits && (page + PAGE_SIZE <= at || page >= at + len)) bits |= kTaintZeroMapped;
        p.pages.set(page, PAGE_SIZE, bits);
        zero_used_ |= bits;
      }
    }
  }

  void run(const Stmt& st, const stmt::Read& s) {
    Proc& p = proc(st, s.proc);
    const uint64_t at = addr(st, s.addr);
    ReadWatch w = watch_read(st, p, at, s.size);
    host::HostAccess r = p.agent->read(at, s.size, s.byte ? *s.byte : -1);
    taint_read(st, p, w, at, s.size);
    check_signal(st, sig_name(r.sig), r.fault_addr, "read");
    expect_bytes(st, s, r.bad, r.found);
  }

  // The PMD ranges around [at, at + len) that a collapse may have made
  // whole where upstream leaves them PTE-mapped, or the reverse.
  void taint_collapsed(Proc& p, uint64_t at, uint64_t len) {
    const uint64_t from = round_down(at, PMD_SIZE), to = round_up(at + len, PMD_SIZE);
    for (auto& [a, b] : p.pages.pieces(from, to - from, HostRangeKind::kAnonPrivate))
      p.pages.set(a, b - a, kTaintZeroMapped | kTaintZeroFolio);
  }

  // vmsplice() is get_user_pages_fast(0); io_uring buffer registration is
  // pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM). Nothing else has a
  // host interface without the gup_test debugfs file.
  void run(const Stmt& st, const stmt::Gup& s) {
    bind(st, s.handle, 'h');
    const GupEntry entry = s.entry;
    Proc& p = proc(st, s.proc);
    uint64_t at = addr(st, s.addr);
    const uint64_t len = s.nr_pages * PAGE_SIZE;
    Handle h{nullptr, 0, s.proc, at, len};
    if (entry == GupEntry::kGetUserPagesFast && s.gup_flags == 0) {
      ReadWatch w = watch_read(st, p, at, len);
      h.gup = host::host_gup_vmsplice(*p.agent, at, static_cast<long>(s.nr_pages));
      taint_read(st, p, w, at, len);
      h.taint = p.pages.in(at, len) & (kTaintZero | kTaintSoftDirty);
    } else if (entry == GupEntry::kPinUserPagesFast && s.gup_flags == (foll::WRITE | foll::LONGTERM)) {
      if (!probes_.have(Cap::kIoUring)) throw SkipTest{probes_.reason(Cap::kIoUring)};
      h.gup = host::host_gup_iouring(*p.agent, at, static_cast<long>(s.nr_pages));
      // FOLL_WRITE unshares a zero page upstream: a page of its own, as here.
      if (h.gup->ret > 0) p.pages.clear(at, static_cast<uint64_t>(h.gup->ret) * PAGE_SIZE, kTaintZero);
      h.taint = p.pages.in(at, len) & kTaintSoftDirty;
    } else {
      throw SkipTest{fmt::format("the host has no interface for {} with these flags (it would need gup_test)", gup_entry_name(entry))};
    }
    if (h.gup->ret == -EPIPE || h.gup->ret == -ETIMEDOUT) sys(st, h.gup->ret);
    handles_[s.handle] = std::move(h);
  }

  Handle& handle(const Stmt& st, const std::string& name) {
    auto it = handles_.find(name);
    if (it == handles_.end()) fail(st, fmt::format("no GUP handle named {}", name));
    return it->second;
  }

  // Beyond what the handle holds is -EFAULT, as on the model: checked
  // before a buffer of the statement's size is allocated.
  static bool beyond_held(const Handle& h, uint64_t off, uint64_t len) {
    const uint64_t held = h.gup && h.gup->ret > 0 ? static_cast<uint64_t>(h.gup->ret) * PAGE_SIZE : 0;
    return off > held || len > held - off;
  }
  void run(const Stmt& st, const stmt::HandleWrite& s) {
    Handle& h = handle(st, s.handle);
    if (beyond_held(h, s.offset, s.size)) return check_errno(st, -EFAULT, "write through the handle");
    int r = h.gup->fill(s.offset, s.size, s.byte);
    if (r == -EOPNOTSUPP) throw SkipTest{"a vmsplice() handle cannot be written through on the host"};
    check_errno(st, r, "write through the handle");
  }
  void run(const Stmt& st, const stmt::HandleRead& s) {
    Handle& h = handle(st, s.handle);
    if (beyond_held(h, s.offset, s.size)) return check_errno(st, -EFAULT, "read through the handle");
    int64_t bad = -1;
    uint8_t found = 0;
    int r = h.gup->read_expect(s.offset, s.size, s.byte, &bad, &found);
    check_errno(st, r, "read through the handle");
    if (h.taint) {
      skip_expectation(taint_reason(h.taint));
      return;
    }
    expect_handle_mismatch(st, s, bad, found);
  }

  // The probe a page's taint comes from, as the skip reason.
  std::string taint_reason(uint8_t bits) const {
    if (bits & kTaintZeroPte) return probes_.reason(Cap::kZeroPage);
    if (bits & kTaintZeroPmd) return probes_.reason(Cap::kHugeZeroPage);
    if (bits & kTaintZeroFolio)
      return probes_.reason(probes_.have(Cap::kZeroPage) ? Cap::kHugeZeroPage : Cap::kZeroPage);
    if (bits & kTaintSoftDirty) return probes_.reason(Cap::kSoftDirty);
    return swap_kind_reason_;
  }

  // Whether a page-state expectation is skipped: the page has one of `mask`.
  bool skip_for(uint8_t bits, uint8_t mask) {
    if (!(bits & mask)) return false;
    skip_expectation(taint_reason(bits & mask));
    return true;
  }

  // A machine-wide statistic the test's statements may not alone have
  // moved: after a zero-page stand-in, a clear-soft-dirty that did nothing,
  // or swap-out to the other kind of device, every statistic may differ;
  // with zswap, the swap I/O ones.
  std::optional<std::string> statistic_skip(const std::string& name) const {
    if (zero_used_ & kTaintZeroPte) return probes_.reason(Cap::kZeroPage);
    if (zero_used_ & kTaintZeroPmd) return probes_.reason(Cap::kHugeZeroPage);
    if (soft_dirty_used_) return probes_.reason(Cap::kSoftDirty);
    if (swap_kind_used_) return swap_kind_reason_;
    if (zswap_used_ && is_swap_io_stat(name)) return probes_.reason(Cap::kZswapOff);
    return std::nullopt;
  }

  // A value, or INT64_MIN if the statistic cannot be read.
  static int64_t read_counter(const std::string& key) {
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
  std::optional<std::string> background(const std::string& key, int64_t found, int64_t expected) {
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

  void expect_statistic(const Stmt& st, const std::string& key, const std::string& what, int64_t expected, int64_t found) {
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

  void run(const Stmt& st, const stmt::ExpectHandle& s) { expect_handle_ret(st, s, handle(st, s.handle).gup->ret); }
  void run(const Stmt& st, const stmt::ExpectRss& s) {
    Proc& p = proc(st, s.proc);
    if (skip_for(p.pages.any(), kTaintZero)) return;  // upstream's zero page is not counted
    uint64_t anon = 0, file = 0, shmem = 0;
    for (auto& [a, r] : p.pages.ranges())
      if (host::host_rss(p.agent->pid(), a, r.end - a, &anon, &file, &shmem)) fail(st, "cannot read the host's pagemap");
    expect_rss(st, s, s.kind == "anon" ? anon : s.kind == "file" ? file : shmem);
  }
  void run(const Stmt& st, const stmt::ExpectSysfs& s) {
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
  void run(const Stmt& st, const stmt::ExpectVmstat& s) {
    auto now = read_vmstat();
    auto it = now.find(s.item);
    if (it == now.end()) {
      skip_expectation("vmstat-absent (vmstat items this kernel does not have)");
      return;
    }
    expect_statistic(st, vmstat_key(s.item), "vmstat " + s.item + " (since the test began)", s.value,
                     it->second - base_[vmstat_key(s.item)]);
  }
  void run(const Stmt&, const stmt::ExpectCounter&) { skip_expectation("counter (the model's event counters)"); }
  // The test expects the model to detect a violation it then goes on from;
  // a real kernel has no such report (it would corrupt itself or oops).
  void run(const Stmt&, const stmt::ExpectViolation&) {
    throw SkipTest{"expect violation: the violations are the model's findings (its checker, data tracker and recorded warnings)"};
  }
  void run(const Stmt& st, const stmt::ExpectDump&) { fail(st, "no dump to check"); }

  host::HostPageInfo page(const Stmt& st, const std::string& pname, const AddrExpr& a) {
    host::HostPageInfo pi;
    std::string why;
    if (host::host_page_info(agent(st, pname).pid(), addr(st, a), &pi, &why)) throw SkipTest{why};
    return pi;
  }
  // The taints of the page at the expectation's address (docs/HOST.md has
  // the table of which taints change which answer).
  uint8_t taints_at(const Stmt& st, const std::string& pname, const AddrExpr& a) { return proc(st, pname).pages.at(addr(st, a)); }

  void run(const Stmt& st, const stmt::ExpectMapped& s) {
    if (skip_for(taints_at(st, s.proc, s.addr), kTaintZeroMapped | kTaintZeroFolio | kTaintSoftDirty)) return;
    host::HostPageInfo pi = page(st, s.proc, s.addr);
    expect_mapped(st, s, !pi.present ? "none" : !pi.huge ? "pte" : pi.order >= static_cast<int>(PUD_SHIFT - PAGE_SHIFT) ? "pud" : "pmd");
  }
  void run(const Stmt& st, const stmt::ExpectOrder& s) {
    if (skip_for(taints_at(st, s.proc, s.addr), kTaintZero | kTaintZeroFolio | kTaintSoftDirty | kTaintSwapKind)) return;
    host::HostPageInfo pi = page(st, s.proc, s.addr);
    expect_order(st, s, pi.present, pi.order);
  }
  void run(const Stmt& st, const stmt::ExpectPageBit& s) {
    switch (s.bit) {
      case stmt::PageBit::kExclusive:
        skip_expectation("exclusive (no host interface shows PageAnonExclusive; pagemap bit 56 is another thing)");
        return;
      case stmt::PageBit::kPinned: skip_expectation("pinned (no host interface shows folio_maybe_dma_pinned)"); return;
      case stmt::PageBit::kSoftDirty:
      case stmt::PageBit::kUffdWp: skip_expectation("soft-dirty/uffd-wp (not read from the host's pagemap yet)"); return;
      case stmt::PageBit::kZero:
      case stmt::PageBit::kSwapped: break;
    }
    if (skip_for(taints_at(st, s.proc, s.addr), kTaintZero)) return;
    host::HostPageInfo pi = page(st, s.proc, s.addr);
    if (s.bit == stmt::PageBit::kZero) expect_yes_no(st, s, pi.present, pi.present && pi.zero);
    else expect_yes_no(st, s, pi.present, pi.swapped);
  }
  void run(const Stmt& st, const stmt::ExpectSame& s) {
    const uint8_t bits = taints_at(st, s.proc, s.addr);
    if (skip_for(bits | taints_at(st, s.other_proc, s.other_addr), kTaintZero | kTaintSoftDirty)) return;
    host::HostPageInfo pi = page(st, s.proc, s.addr);
    host::HostPageInfo other = page(st, s.other_proc, s.other_addr);
    expect_same(st, s, pi.present && other.present && pi.pfn == other.pfn);
  }

  host::HostProbes probes_;
  host::SysfsGuard guard_;
  host::HostSwap swap_;
  std::map<std::string, Proc> procs_;
  std::map<std::string, Handle> handles_;
  std::map<std::string, int> files_;
  std::set<std::string> hugetlb_files_;
  std::map<std::string, long> outside_resv_;  // by pool: reservations when the test began
  bool khugepaged_ran_ = false;  // the test waited for the host's khugepaged
  std::map<std::string, int64_t> vmstat_at_start_;
  std::map<std::string, int64_t> base_, idle_before_;  // by statistic key: value when the test began, idle drift before
  int cpu_ = -1;  // the CPU the test runs on, or -1 (not pinned)
  cpu_set_t saved_affinity_{};
  // What happened in this test that makes every later statistic differ
  // from upstream's (statistic_skip).
  uint8_t zero_used_ = 0;
  bool soft_dirty_used_ = false, swap_kind_used_ = false, zswap_used_ = false;
  std::string swap_kind_reason_;  // the swap device is not the kind asked for: the probe's reason
};

}  // namespace

std::unique_ptr<TestRun> make_host_run(const ScenarioOptions& opt) { return std::make_unique<HostRun>(opt); }

}  // namespace mmlab
