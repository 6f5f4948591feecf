// The host backend: a test runs on the machine's own kernel. Each named
// process is a real process (src/host/agent.h), settings are the real
// /sys/kernel/mm files (restored when the test ends), expectations are read
// from pagemap, PAGEMAP_SCAN and kpageflags. What the host cannot do makes
// the test SKIP with the reason; what it cannot observe (PageAnonExclusive,
// pins, model counters, the invariant checker), what depends on a
// capability its kernel lacks (host/probe.h: the zero page, soft-dirty, the
// swap device's kind, ...; the pages concerned are tracked in HostPages)
// and machine-wide statistics that other processes moved meanwhile are
// skipped expectation by expectation and counted (host_expect.cpp).
#include <fcntl.h>
#include <fnmatch.h>
#include <sched.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
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
#include "host/host_file.h"
#include "host/sysfs.h"
#include "mmlab/gup.h"
#include "mmlab/types.h"
#include "scenario/host_run.h"

namespace mmlab {
namespace {

using host::Agent;
using host::Cap;

// The hugetlb pools (2M, 1G) as /sys/kernel/mm paths.
constexpr const char* kPools[2] = {"hugepages/hugepages-2048kB/", "hugepages/hugepages-1048576kB/"};

// The advices whose reclaim starts with lru_add_drain(): the local CPU's batches only.
bool drains_local_lru(int advice) { return advice == MADV_COLD || advice == MADV_PAGEOUT || advice == MADV_FREE; }

// SIGKILL: the process died or hung during the access (agent.h).
const char* sig_name(int sig) {
  return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGKILL ? "SIGKILL" : sig ? "SIG?" : "";
}

// Whether the gigantic pool an earlier test of this run sized may stay as
// it is: this test sizes it itself, or never looks at 1 GiB pages. A
// gigantic page costs seconds to clear the first time it is faulted on
// this project's paravirtualised hosts (the hypervisor backs the guest's
// memory on first touch, ~2.5 s per GiB, and takes freed memory back), a
// few tens of ms once backed; emptying the pool between the tests that
// use it paid that again for each.
bool keeps_gigantic_pool(const std::vector<const Stmt*>& stmts) {
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

bool process_lives(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  auto rp = line.rfind(')');
  return rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] != 'Z' && line[rp + 2] != 'X';
}

// The khugepaged kthread's pid, or 0: it exists only while a THP size it
// serves is enabled (start_stop_khugepaged).
pid_t khugepaged_pid() {
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
long thread_switches(pid_t pid, bool* asleep) {
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

long khugepaged_full_scans() {
  std::string v;
  return host::sysfs_read("transparent_hugepage/khugepaged/full_scans", &v) == 0 ? std::strtol(v.c_str(), nullptr, 10) : -1;
}

}  // namespace

void HostRun::start(const std::vector<const Stmt*>& stmts) {
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
void HostRun::pin_to_one_cpu() {
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

std::vector<std::string> HostRun::teardown() {
  handles_.clear();
  std::vector<int> pids;
  for (auto& [n, p] : procs_) {
    pids.push_back(p.agent->pid());
    if (p.agent->alive()) p.agent->exit();
    p.agent.reset();
  }
  for (auto& [n, fd] : files_) close(fd);
  files_.clear();
  // IPC_RMID: the processes are gone, so the segments go now (one removed
  // by the test already is EINVAL).
  for (auto& [n, sg] : segs_) {
    (void)shmctl(sg.id, IPC_RMID, nullptr);
    host::journal_extra_remove("shmrm", std::to_string(sg.id));
  }
  segs_.clear();
  attached_.clear();
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

HostRun::Proc& HostRun::proc(const Stmt& st, const std::string& name) {
  auto it = procs_.find(name);
  if (it == procs_.end()) fail(st, fmt::format("no process named {}", name));
  if (!it->second.agent || !it->second.agent->alive()) fail(st, fmt::format("process {} has exited", name));
  return it->second;
}

Agent& HostRun::agent(const Stmt& st, const std::string& name) { return *proc(st, name).agent; }

// A system call's result; a host process that stopped answering ends the test.
long HostRun::sys(const Stmt& st, long ret) {
  if (ret == -EPIPE || ret == -ETIMEDOUT) fail(st, fmt::format("the host process died or hung ({})", errno_name(static_cast<int>(ret))));
  return ret;
}

void HostRun::add_proc(const Stmt& st, const std::string& name, std::unique_ptr<Agent> a, HostPages pages) {
  host::register_host_pid(a->pid());
  if (cpu_ >= 0) sys(st, a->pin_cpu(cpu_));
  procs_[name] = Proc{std::move(a), std::move(pages), {}};
}

// One overload per statement struct: a statement kind without one does not compile.
void HostRun::exec(const Stmt& st) {
  std::visit([&](const auto& s) { run(st, s); }, st.body);
}

void HostRun::run(const Stmt&, const stmt::Tune& s) {
  // zero_page is a property of the host's kernel, found by the probe: a
  // test asking for the behaviour the host has runs, the other is skipped.
  if (s.key == "mm.zero_page") {
    const bool host_maps_it = probes_.have(Cap::kZeroPage);
    // A probe forced missing (--fake-probe) is not what the kernel does.
    if (!host_maps_it && probes_[Cap::kZeroPage].faked) throw SkipTest{probes_.reason(Cap::kZeroPage)};
    if ((s.value == "on") == host_maps_it) {
      // The model allocates on read faults too: the pages need no taint.
      zero_page_off_ = !host_maps_it;
      return;
    }
    throw SkipTest{host_maps_it ? "tune mm.zero_page off: this host's read faults map the zero page"
                                : "tune mm.zero_page on: " + probes_.reason(Cap::kZeroPage)};
  }
  // CONFIG_READ_ONLY_THP_FOR_FS is the host kernel's build option, found
  // by the probe: a test asking for what the host has runs.
  if (s.key == "mm.read_only_thp_for_fs") {
    const bool host_has_it = probes_.have(Cap::kReadOnlyThp);
    if ((s.value == "on") == host_has_it) return;
    throw SkipTest{host_has_it ? "tune mm.read_only_thp_for_fs off: this host's kernel has CONFIG_READ_ONLY_THP_FOR_FS"
                               : "tune mm.read_only_thp_for_fs on: " + probes_.reason(Cap::kReadOnlyThp)};
  }
  throw SkipTest{fmt::format("tune {} is a model variant the host kernel does not have", s.key)};
}

void HostRun::run(const Stmt& st, const stmt::Proc& s) {
  bind(st, s.proc, 'p');
  std::string err;
  auto a = Agent::spawn(s.proc, &err);
  if (!a) fail(st, "cannot start a host process: " + err);
  add_proc(st, s.proc, std::move(a), {});
  procs_[s.proc].status_at_start = read_proc_text(fmt::format("/proc/{}/status", procs_[s.proc].agent->pid()));
}

void HostRun::run(const Stmt& st, const stmt::Exit& s) { agent(st, s.proc).exit(); }

void HostRun::run(const Stmt& st, const stmt::Munmap& s) {
  Proc& p = proc(st, s.proc);
  long r = sys(st, p.agent->munmap(addr(st, s.addr), s.size));
  check_errno(st, r, "munmap");
  if (r == 0) p.pages.unmap(addr(st, s.addr), s.size);
}

void HostRun::run(const Stmt& st, const stmt::Mprotect& s) {
  check_errno(st, sys(st, agent(st, s.proc).mprotect(addr(st, s.addr), s.size, s.prot)), "mprotect");
}

void HostRun::run(const Stmt& st, const stmt::Mremap& s) {
  int flags = MREMAP_MAYMOVE | (s.to ? MREMAP_FIXED : 0) | (s.dontunmap ? MREMAP_DONTUNMAP : 0);
  Proc& p = proc(st, s.proc);
  const uint64_t old = addr(st, s.addr);
  long r = sys(st, p.agent->mremap(old, s.old_size, s.new_size, flags, s.to ? addr(st, *s.to) : 0));
  check_errno(st, r, "mremap");
  bind(st, s.region, 'r');
  if (r >= 0) {
    regions_[s.region] = static_cast<uint64_t>(r);
    // MREMAP_DONTUNMAP leaves the old range mapped, of its kind, and empty.
    struct Kept {
      uint64_t from, to;
      HostRangeKind kind;
    };
    std::vector<Kept> kept;
    if (s.dontunmap)
      for (auto& [from, to] : p.pages.pieces(old, s.old_size))
        kept.push_back({from, to, std::prev(p.pages.ranges().upper_bound(from))->second.kind});
    p.pages.remap(old, s.old_size, static_cast<uint64_t>(r), s.new_size);
    for (const Kept& k : kept) p.pages.map(k.from, k.to - k.from, k.kind);
  }
}

void HostRun::run(const Stmt& st, const stmt::Mlock& s) {
  Proc& p = proc(st, s.proc);
  const uint64_t at = addr(st, s.addr);
  if (s.unlock) return check_errno(st, sys(st, p.agent->munlock(at, s.size)), "munlock");
  const ReadWatch w = s.onfault ? ReadWatch{} : watch_read(st, p, at, s.size);
  const long r = sys(st, p.agent->mlock2(at, s.size, s.onfault ? MLOCK_ONFAULT : 0));
  taint_populate(st, p, w, at, s.size);  // also after an error: what it populated stays
  check_errno(st, r, s.onfault ? "mlock2" : "mlock");
}

void HostRun::run(const Stmt& st, const stmt::Mseal& s) {
  Proc& p = proc(st, s.proc);
  const long r = sys(st, p.agent->mseal(addr(st, s.addr), s.size));
  if (r == -ENOSYS) throw SkipTest{"mseal: this host's kernel has no mseal(2) (before v6.10, or not 64-bit)"};
  check_errno(st, r, "mseal");
}

void HostRun::run(const Stmt& st, const stmt::Mlockall& s) {
  Proc& p = proc(st, s.proc);
  if (!s.flags) return check_errno(st, sys(st, p.agent->munlockall()), "munlockall");
  const bool populates = (s.flags & MCL_CURRENT) && !(s.flags & MCL_ONFAULT);
  const ReadWatch w = populates ? watch_read(st, p, 0, TASK_SIZE) : ReadWatch{};
  const long r = sys(st, p.agent->mlockall(s.flags));
  taint_populate(st, p, w, 0, TASK_SIZE);
  check_errno(st, r, "mlockall");
}

void HostRun::taint_populate(const Stmt& st, Proc& p, const ReadWatch& w, uint64_t at, uint64_t len) {
  if (w.pieces.empty()) return;
  taint_read(st, p, w, at, len);
  std::ifstream maps("/proc/" + std::to_string(p.agent->pid()) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long a = 0, b = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &a, &b, perms) != 3) continue;
    if (perms[1] == 'w' && perms[3] == 'p' && a < at + len && at < b) {
      const uint64_t from = std::max<uint64_t>(a, at), to = std::min<uint64_t>(b, at + len);
      p.pages.clear(from, to - from, kTaintZero);
    }
  }
}

void HostRun::run(const Stmt&, const stmt::Advance&) {
  throw SkipTest{"`advance` moves the model's virtual clock; the host's time is its own"};
}

void HostRun::run(const Stmt&, const stmt::Inject&) {
  throw SkipTest{"host cannot inject: `inject` arms the model's fault injector (the host's fail_page_alloc needs debugfs and CONFIG_FAULT_INJECTION, and would fail other processes' allocations)"};
}

void HostRun::run(const Stmt&, const stmt::ThpDisable&) { throw SkipTest{"the host agent has no prctl or userfaultfd request"}; }

void HostRun::run(const Stmt&, const stmt::UffdRegister&) { throw SkipTest{"the host agent has no prctl or userfaultfd request"}; }

void HostRun::run(const Stmt&, const stmt::UffdWp&) { throw SkipTest{"the host agent has no prctl or userfaultfd request"}; }

// Counter expectations are skipped on the host; the reset starts the
// measured part of a cost-model case (sample_cost).
void HostRun::run(const Stmt&, const stmt::CountersReset&) {
  cpu_base_.clear();
  for (auto& [n, p] : procs_) cpu_base_[n] = p.agent->cpu_ns();
  cpu_timed_ = true;
}

void HostRun::sample_cost(ScenarioResult* res) {
  if (!cpu_timed_) return;
  uint64_t ns = 0;
  for (auto& [n, p] : procs_) {
    auto b = cpu_base_.find(n);
    ns += p.agent->cpu_ns() - (b == cpu_base_.end() ? 0 : b->second);
  }
  res->cpu_ns = static_cast<int64_t>(ns);
}

void HostRun::run(const Stmt&, const stmt::CountersPrint& s) { exec_counters_print(s); }

void HostRun::run(const Stmt& st, const stmt::Print& s) { exec_print(st, s); }

std::vector<std::string> HostRun::state_lines(const Stmt& st, const std::string& pname, stmt::PrintWhat what,
                                              uint64_t start, uint64_t end) {
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
std::vector<std::string> HostRun::counter_lines(const std::string& glob) {
  std::vector<std::string> out{"(the model's event counters do not exist on the host; vmstat: deltas since the test began, machine-wide)"};
  for (auto& [name, v] : read_vmstat()) {
    auto it = vmstat_at_start_.find(name);
    const int64_t d = v - (it == vmstat_at_start_.end() ? 0 : it->second);
    if (glob.empty() ? d != 0 : fnmatch(glob.c_str(), name.c_str(), 0) == 0) out.push_back(fmt::format("vmstat {} {}", name, d));
  }
  return out;
}

void HostRun::run(const Stmt& st, const stmt::Write& s) {
  Proc& p = proc(st, s.proc);
  const uint64_t at = addr(st, s.addr);
  host::HostAccess r = p.agent->write(at, s.size, s.byte);
  // A written page is no zero page upstream either (CoW from it).
  p.pages.clear(at, r.sig ? std::min(r.fault_addr - std::min(r.fault_addr, at), s.size) : s.size, kTaintZero);
  check_signal(st, sig_name(r.sig), r.fault_addr, "write");
}

void HostRun::run(const Stmt& st, const stmt::VmRead& s) {
  Proc& target = proc(st, s.target);
  const long r = sys(st, agent(st, s.proc).process_vm_readv(target.agent->pid(), addr(st, s.local), addr(st, s.remote), s.size));
  check_vm_read(st, s, r);
}

void HostRun::run(const Stmt& st, const stmt::Unpin& s) {
  handle(st, s.handle);  // a name that holds nothing is an error, as in the model
  handles_.erase(s.handle);
}

void HostRun::run(const Stmt&, const stmt::Dump&) {
  throw SkipTest{"the host has no get_dump_page interface (a core dump) for `dump`"};
}

void HostRun::run(const Stmt&, const stmt::Check&) { skip_expectation("check (the invariant checker is the model's)"); }

void HostRun::run(const Stmt&, const stmt::Skip& s) { exec_skip(s); }

// The interleaving of a race block is the model's scheduler's choice; the
// real kernel's scheduler cannot be made to take it.
void HostRun::run(const Stmt&, const stmt::Race&) {
  throw SkipTest{"a race block needs the model's scheduler: the real kernel's cannot be controlled"};
}

void HostRun::run(const Stmt&, const stmt::Xfail& s) { exec_xfail(s); }

// A knob or statistic an older kernel does not have: the scenario is
// valid, the host just cannot express it.
void HostRun::require_sysfs_file(const std::string& rel) {
  if (access(("/sys/kernel/mm/" + rel).c_str(), F_OK) != 0)
    throw SkipTest{"the host kernel has no /sys/kernel/mm/" + rel};
}

// A reservation no process owns any more (a kernel can leak one, and only
// a reboot clears it) holds a page of its pool for good. Such a pool is
// sized that many pages larger for the test, and its counts read that
// many lower, so the test sees the pool a fresh boot would give it.
long HostRun::leaked_resv(const std::string& rel) const {
  for (const char* pool : kPools)
    if (rel.rfind(pool, 0) == 0) {
      auto it = outside_resv_.find(pool);
      return it == outside_resv_.end() ? 0 : it->second;
    }
  return 0;
}

void HostRun::run(const Stmt& st, const stmt::Sysfs& s) {
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
  // A pool the host could not fill: the selftests skip when short of huge
  // pages. A pool lowered below its pages in use reads more than was
  // written, legally (set_max_huge_pages() makes them surplus): only fewer
  // is a failed allocation.
  if (r == 0 && pool) {
    auto short_of = [&](const std::string& got) {
      return std::strtoll(got.c_str(), nullptr, 10) < std::strtoll(value.c_str(), nullptr, 10);
    };
    std::string got;
    if (host::sysfs_read(s.path, &got) == 0 && short_of(got)) {
      // Gigantic pages need contiguous memory: drop clean page cache,
      // compact, and try once more.
      std::ofstream("/proc/sys/vm/drop_caches") << "1";
      std::ofstream("/proc/sys/vm/compact_memory") << "1";
      write();
      (void)host::sysfs_read(s.path, &got);  // unread, got differs from value below
    }
    if (short_of(got))
      throw SkipTest{fmt::format("the host could allocate only {} of {} pages for {}", got, value, s.path)};
  }
}

// `khugepaged N`: wait for N full scans the host's khugepaged starts after
// now (the one in progress may have passed the test's mm already, hence
// start + N + 1), with the scan sleep lowered meanwhile.
void HostRun::run(const Stmt& st, const stmt::Khugepaged& s) {
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

void HostRun::run(const Stmt& st, const stmt::File& s) {
  bind(st, s.name, 'f');
  std::string why;
  int fd = s.huge.empty() ? host::host_create_file(s.size, s.fs, s.hugetlb_shift, s.name, &why, s.read_only, s.uncached)
                          : host::host_create_tmpfs_file(s.size, s.huge, s.noswap, s.name, &why);
  if (fd == host::kNoSuchFs) throw SkipTest{why};
  check_errno(st, fd, "file");
  if (fd >= 0) files_[s.name] = fd;
  if (fd >= 0 && s.hugetlb_shift) hugetlb_files_.insert(s.name);
}

// System V shared memory: the runner makes, locks and removes the segments
// (the ids are the IPC namespace's, not a process's); its processes attach
// them.
void HostRun::run(const Stmt& st, const stmt::Shmget& s) {
  bind(st, s.seg, 's');
  const int id = ::shmget(IPC_PRIVATE, s.size, IPC_CREAT | 0600 | (s.hugetlb ? SHM_HUGETLB : 0));
  if (id < 0 && errno == ENOSYS) throw SkipTest{"shmget: this host's kernel has no System V IPC (CONFIG_SYSVIPC off)"};
  check_errno(st, id < 0 ? -errno : 0, "shmget");
  if (id < 0) return;
  host::journal_extra("shmrm", std::to_string(id));  // a killed run's segment is removed by the next
  // shmat maps the segment whole: whole huge pages for SHM_HUGETLB.
  const uint64_t unit = s.hugetlb ? 2ull << 20 : PAGE_SIZE;
  segs_[s.seg] = Seg{id, round_up(s.size, unit), s.hugetlb};
}

const HostRun::Seg& HostRun::seg(const Stmt& st, const std::string& name) {
  auto it = segs_.find(name);
  if (it == segs_.end()) fail(st, fmt::format("no shared memory segment named {}", name));
  return it->second;
}

void HostRun::run(const Stmt& st, const stmt::Shmctl& s) {
  const int r = ::shmctl(seg(st, s.seg).id, s.cmd, nullptr);
  check_errno(st, r < 0 ? -errno : 0, "shmctl");
}

void HostRun::run(const Stmt& st, const stmt::Shmat& s) {
  Proc& p = proc(st, s.proc);
  bind(st, s.region, 'r');
  const Seg& sg = seg(st, s.seg);
  const long r = sys(st, p.agent->shmat(sg.id, s.read_only ? SHM_RDONLY : 0));
  check_errno(st, r, "shmat");
  if (r < 0) return;
  regions_[s.region] = static_cast<uint64_t>(r);
  attached_[{s.proc, static_cast<uint64_t>(r)}] = sg.size;
  p.pages.map(static_cast<uint64_t>(r), sg.size, sg.hugetlb ? HostRangeKind::kHugetlb : HostRangeKind::kOther);
}

void HostRun::run(const Stmt& st, const stmt::Shmdt& s) {
  Proc& p = proc(st, s.proc);
  const uint64_t at = addr(st, s.addr);
  const long r = sys(st, p.agent->shmdt(at));
  check_errno(st, r, "shmdt");
  // What the segment attached there mapped.
  auto it = attached_.find({s.proc, at});
  if (r == 0 && it != attached_.end()) {
    p.pages.unmap(at, it->second);
    attached_.erase(it);
  }
}

// The kind the test names when the host can make it (probe blkdev_swap /
// file_swap); else the other kind, and expectations on the large folios
// that it then swaps out differently are skipped (kTaintSwapKind).
void HostRun::run(const Stmt&, const stmt::Swap& s) {
  if (s.kind == "zram") {
    if (!probes_.have(Cap::kZramSwap)) throw SkipTest{probes_.reason(Cap::kZramSwap)};
    std::string why;
    if (swap_.add(s.size, host::HostSwapKind::kZram, &why)) throw SkipTest{"no zram swap device on the host: " + why};
    return;
  }
  const bool blkdev = s.kind != "file";
  const Cap want = blkdev ? Cap::kBlkdevSwap : Cap::kFileSwap;
  const bool other = !probes_.have(want);
  if (other) swap_kind_reason_ = probes_.reason(want);
  auto kind = blkdev != other ? host::HostSwapKind::kBlkdev : host::HostSwapKind::kFile;
  std::string why;
  if (swap_.add(s.size, kind, &why)) throw SkipTest{"no swap device on the host: " + why};
}

// ftruncate and fallocate(PUNCH_HOLE | KEEP_SIZE) on the runner's fd of the
// file (every process maps the same inode), hugetlbfs memfds included.
void HostRun::run(const Stmt& st, const stmt::Truncate& s) {
  auto it = files_.find(s.file);
  if (it == files_.end()) fail(st, fmt::format("no file named {}", s.file));
  const int r = ftruncate(it->second, static_cast<off_t>(s.size)) ? -errno : 0;
  check_errno(st, r, "truncate");
}

void HostRun::run(const Stmt& st, const stmt::PunchHole& s) {
  auto it = files_.find(s.file);
  if (it == files_.end()) fail(st, fmt::format("no file named {}", s.file));
  const int r = fallocate(it->second, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(s.offset),
                          static_cast<off_t>(s.len))
                    ? -errno
                    : 0;
  check_errno(st, r, "punch-hole");
}

// `writeback`: the host's swap writes complete on their own; wait until no
// page is under writeback anywhere (nr_writeback is machine-wide: other
// processes' writeback delays the statement, bounded).
void HostRun::run(const Stmt& st, const stmt::Writeback&) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto vm = read_vmstat();
    auto it = vm.find("nr_writeback");
    if (it == vm.end()) fail(st, "the host's /proc/vmstat has no nr_writeback");
    if (it->second == 0 || std::chrono::steady_clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// `shrink-slab`: drop_slab(), which runs every shrinker, the deferred-split
// one among them (writing 2 frees no page cache).
void HostRun::run(const Stmt& st, const stmt::ShrinkSlab&) {
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "2";
  if (!f.flush()) fail(st, "cannot write 2 to /proc/sys/vm/drop_caches");
}

void HostRun::run(const Stmt& st, const stmt::Mmap& s) {
  Proc& p = proc(st, s.proc);
  bind(st, s.region, 'r');
  int flags = (s.shared ? MAP_SHARED : MAP_PRIVATE) | s.map_flags;
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
    // A placement (never with align=, which picks its own address).
    const uint64_t at = s.place == stmt::Mmap::Place::kAny ? 0 : addr(st, s.place_addr);
    const int place = s.place == stmt::Mmap::Place::kFixed       ? MAP_FIXED
                      : s.place == stmt::Mmap::Place::kNoReplace ? MAP_FIXED_NOREPLACE
                                                                 : 0;
    r = do_map(at, s.size, place);
  } else if (s.size > TASK_SIZE - s.align) {
    r = -ENOMEM;  // no aligned place: the reservation's length would wrap (as the model answers)
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
    // MAP_POPULATE or MAP_LOCKED read-faulted a read-only private mapping:
    // this host may have mapped fresh pages where upstream maps the zero page.
    const bool read_populated = (s.map_flags & (MAP_POPULATE | MAP_LOCKED)) && !(s.prot & PROT_WRITE);
    if (read_populated && kind == HostRangeKind::kAnonPrivate && !probes_.have(Cap::kZeroPage) && !zero_page_off_) {
      p.pages.set(static_cast<uint64_t>(r), s.size, kTaintZeroPte);
      zero_used_ |= kTaintZeroPte;
    }
  }
}

void HostRun::run(const Stmt& st, const stmt::Fork& s) {
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

void HostRun::run(const Stmt& st, const stmt::Madvise& s) {
  Proc& p = proc(st, s.proc);
  const uint64_t at = addr(st, s.addr);
  if (s.advice == MADV_PAGEOUT && !swap_.on() && !probes_.have(Cap::kNoHostSwap))
    throw SkipTest{probes_.reason(Cap::kNoHostSwap)};
  if (s.advice == MADV_PAGEOUT && swap_.on()) {
    if (!probes_.have(Cap::kZswapOff)) zswap_used_ = true;
    if (!swap_kind_reason_.empty()) mark_large_folios(st, p, at, s.size);
  }
  if ((s.advice == MADV_GUARD_INSTALL || s.advice == MADV_GUARD_REMOVE) && !probes_.have(Cap::kGuardRegions))
    throw SkipTest{probes_.reason(Cap::kGuardRegions)};
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
void HostRun::mark_large_folios(const Stmt& st, Proc& p, uint64_t at, uint64_t len) {
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
void HostRun::run(const Stmt& st, const stmt::ClearSoftDirty& s) {
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

HostRun::ReadWatch HostRun::watch_read(const Stmt& st, Proc& p, uint64_t at, uint64_t len) {
  ReadWatch w;
  if ((probes_.have(Cap::kZeroPage) && probes_.have(Cap::kHugeZeroPage)) || zero_page_off_ || !len) return w;
  const uint64_t from = round_down(at, PMD_SIZE), to = round_up(at + len, PMD_SIZE);
  w.pieces = p.pages.pieces(from, to - from, HostRangeKind::kAnonPrivate);
  for (auto& [a, b] : w.pieces) {
    w.before.emplace_back();
    if (host::pagemap_entries(p.agent->pid(), a, (b - a) >> PAGE_SHIFT, &w.before.back()))
      fail(st, "cannot read the host's pagemap");
  }
  return w;
}

void HostRun::taint_read(const Stmt& st, Proc& p, const ReadWatch& w, uint64_t at, uint64_t len) {
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

void HostRun::run(const Stmt& st, const stmt::Read& s) {
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
void HostRun::taint_collapsed(Proc& p, uint64_t at, uint64_t len) {
  const uint64_t from = round_down(at, PMD_SIZE), to = round_up(at + len, PMD_SIZE);
  for (auto& [a, b] : p.pages.pieces(from, to - from, HostRangeKind::kAnonPrivate))
    p.pages.set(a, b - a, kTaintZeroMapped | kTaintZeroFolio);
}

// vmsplice() is get_user_pages_fast(0); io_uring buffer registration is
// pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM). Nothing else has a
// host interface without the gup_test debugfs file.
void HostRun::run(const Stmt& st, const stmt::Gup& s) {
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

HostRun::Handle& HostRun::handle(const Stmt& st, const std::string& name) {
  auto it = handles_.find(name);
  if (it == handles_.end()) fail(st, fmt::format("no GUP handle named {}", name));
  return it->second;
}

// Beyond what the handle holds is -EFAULT, as on the model: checked
// before a buffer of the statement's size is allocated.
bool HostRun::beyond_held(const Handle& h, uint64_t off, uint64_t len) {
  const uint64_t held = h.gup && h.gup->ret > 0 ? static_cast<uint64_t>(h.gup->ret) * PAGE_SIZE : 0;
  return off > held || len > held - off;
}

void HostRun::run(const Stmt& st, const stmt::HandleWrite& s) {
  Handle& h = handle(st, s.handle);
  if (beyond_held(h, s.offset, s.size)) return check_errno(st, -EFAULT, "write through the handle");
  int r = h.gup->fill(s.offset, s.size, s.byte);
  if (r == -EOPNOTSUPP) throw SkipTest{"a vmsplice() handle cannot be written through on the host"};
  check_errno(st, r, "write through the handle");
}

void HostRun::run(const Stmt& st, const stmt::HandleRead& s) {
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

std::unique_ptr<TestRun> make_host_run(const ScenarioOptions& opt) { return std::make_unique<HostRun>(opt); }

}  // namespace mmlab
