// The host backend: a test runs on the machine's own kernel. Each named
// process is a real process (src/host/agent.h), settings are the real
// /sys/kernel/mm files (restored when the test ends), expectations are read
// from pagemap, PAGEMAP_SCAN and kpageflags. What the host cannot do makes
// the test SKIP with the reason; what it cannot observe (PageAnonExclusive,
// pins, model counters, the invariant checker) is skipped expectation by
// expectation and counted.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "fmt/format.h"
#include "host/agent.h"
#include "host/host_file.h"
#include "host/host_gup.h"
#include "host/pagemap.h"
#include "host/swapfile.h"
#include "host/sysfs.h"
#include "mmlab/gup.h"
#include "mmlab/types.h"
#include "scenario/test_run.h"

namespace mmlab {
namespace {

using host::Agent;

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

// SIGKILL: the process died or hung during the access (agent.h).
const char* sig_name(int sig) {
  return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGKILL ? "SIGKILL" : sig ? "SIG?" : "";
}

class HostRun final : public TestRun {
 public:
  static constexpr unsigned kTestTimeoutSec = 600;

  explicit HostRun(const ScenarioOptions& opt) : TestRun(opt) {}

 private:
  struct Proc {
    std::unique_ptr<Agent> agent;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // what the test mapped: rss is counted there
  };

  void start(const TestCase& tc) override {
    // mmlab's own allocations must not fault THPs and count in the test's
    // statistics; the host processes clear this for themselves (agent.cpp).
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    // A hung test ends the run through the restoring SIGALRM handler (host/sysfs.h).
    alarm(kTestTimeoutSec);
    std::string why;
    if (guard_.apply_defaults(&why)) throw StartError{"cannot reset the host's settings: " + why};
    vmstat_base_ = read_vmstat();
    for (auto& st : tc.stmts)
      if (st.op == Op::kExpectSysfs && sysfs_is_counter(st.str)) {
        std::string v;
        if (host::sysfs_read(st.str, &v) == 0) sysfs_base_[st.str] = std::strtoll(v.c_str(), nullptr, 10);
      }
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

  void add_proc(const std::string& name, std::unique_ptr<Agent> a, std::vector<std::pair<uint64_t, uint64_t>> ranges) {
    host::register_host_pid(a->pid());
    procs_[name] = Proc{std::move(a), std::move(ranges)};
  }

  void exec(const Stmt& st) override {
    switch (st.op) {
      case Op::kSysfs: exec_sysfs(st); break;
      case Op::kTune: throw SkipTest{fmt::format("tune {} is a model variant the host kernel does not have", st.str)};
      case Op::kProc: {
        bind(st, st.p, 'p');
        std::string err;
        auto a = Agent::spawn(st.p, &err);
        if (!a) fail(st, "cannot start a host process: " + err);
        add_proc(st.p, std::move(a), {});
        break;
      }
      case Op::kFork: {
        bind(st, st.q, 'p');
        Proc& parent = proc(st, st.p);
        long err = 0;
        auto c = parent.agent->fork(st.q, &err);
        check_errno(st, c ? 0 : sys(st, err), "fork");
        if (c) add_proc(st.q, std::move(c), parent.ranges);
        break;
      }
      case Op::kExit: agent(st, st.p).exit(); break;
      case Op::kFile: exec_file(st); break;
      case Op::kSwap: {
        std::string why;
        if (swap_.add(st.size, &why)) throw SkipTest{"no swap device on the host: " + why};
        break;
      }
      case Op::kMmap: exec_mmap(st); break;
      case Op::kMunmap: check_errno(st, sys(st, agent(st, st.p).munmap(addr(st, st.addr), st.size)), "munmap"); break;
      case Op::kMprotect:
        check_errno(st, sys(st, agent(st, st.p).mprotect(addr(st, st.addr), st.size, st.prot)), "mprotect");
        break;
      case Op::kMadvise:
        check_errno(st, sys(st, agent(st, st.p).madvise(addr(st, st.addr), st.size, st.advice)), ("madvise " + st.str).c_str());
        break;
      case Op::kMremap: {
        int flags = MREMAP_MAYMOVE | (st.has_to ? MREMAP_FIXED : 0);
        Proc& p = proc(st, st.p);
        long r = sys(st, p.agent->mremap(addr(st, st.addr), st.size, st.size2, flags, st.has_to ? addr(st, st.addr2) : 0));
        check_errno(st, r, "mremap");
        bind(st, st.name, 'r');
        if (r >= 0) {
          regions_[st.name] = static_cast<uint64_t>(r);
          p.ranges.push_back({static_cast<uint64_t>(r), st.size2});
        }
        break;
      }
      case Op::kClearSoftDirty: {
        std::ofstream f("/proc/" + std::to_string(agent(st, st.p).pid()) + "/clear_refs");
        f << "4";
        if (!f.flush()) fail(st, "cannot write clear_refs");
        break;
      }
      case Op::kKhugepaged: exec_khugepaged(st); break;
      case Op::kAdvance: throw SkipTest{"`advance` moves the model's virtual clock; the host's time is its own"};
      case Op::kThpDisable:
      case Op::kUffdRegister:
      case Op::kUffdWp: throw SkipTest{"the host agent has no prctl or userfaultfd request"};
      case Op::kCountersReset: break;  // counter expectations are skipped on the host
      case Op::kWrite: {
        host::HostAccess r = agent(st, st.p).write(addr(st, st.addr), st.size, static_cast<uint8_t>(st.byte));
        check_signal(st, sig_name(r.sig), r.fault_addr, "write");
        break;
      }
      case Op::kRead: exec_read(st); break;
      case Op::kGup: exec_gup(st); break;
      case Op::kHandleWrite:
      case Op::kHandleRead: exec_handle_io(st); break;
      case Op::kUnpin:
        handle(st, st.name);  // a name that holds nothing is an error, as in the model
        handles_.erase(st.name);
        break;
      case Op::kDump: throw SkipTest{"the host has no get_dump_page interface (a core dump) for `dump`"};
      case Op::kCheck: skip_expectation("check (the invariant checker is the model's)"); break;
      case Op::kSkip:
      case Op::kXfail: exec_outcome_stmt(st); break;
      default: exec_expect(st); break;
    }
  }

  // A knob or statistic an older kernel does not have: the scenario is
  // valid, the host just cannot express it.
  static void require_sysfs_file(const std::string& rel) {
    if (access(("/sys/kernel/mm/" + rel).c_str(), F_OK) != 0)
      throw SkipTest{"the host kernel has no /sys/kernel/mm/" + rel};
  }

  void exec_sysfs(const Stmt& st) {
    require_sysfs_file(st.str);
    int r = guard_.write(st.str, st.str2);
    check_errno(st, r, "sysfs write");
    // A pool the host could not fill: the selftests skip when short of huge pages.
    if (r == 0 && st.str.find("/nr_hugepages") != std::string::npos) {
      std::string got;
      if (host::sysfs_read(st.str, &got) == 0 && got != st.str2) {
        // Gigantic pages need contiguous memory: drop clean page cache,
        // compact, and try once more.
        std::ofstream("/proc/sys/vm/drop_caches") << "1";
        std::ofstream("/proc/sys/vm/compact_memory") << "1";
        guard_.write(st.str, st.str2);
        host::sysfs_read(st.str, &got);
      }
      if (got != st.str2)
        throw SkipTest{fmt::format("the host could allocate only {} of {} pages for {}", got, st.str2, st.str)};
    }
  }

  // The khugepaged kthread exists only while a THP size it serves is enabled
  // (start_stop_khugepaged).
  static bool khugepaged_thread_running() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      std::ifstream comm(e.path() / "comm");
      std::string name;
      if (comm && std::getline(comm, name) && name == "khugepaged") return true;
    }
    return false;
  }

  static long khugepaged_full_scans() {
    std::string v;
    return host::sysfs_read("transparent_hugepage/khugepaged/full_scans", &v) == 0 ? std::strtol(v.c_str(), nullptr, 10) : -1;
  }

  // `khugepaged N`: wait for N full scans the host's khugepaged starts after
  // now (the one in progress may have passed the test's mm already, hence
  // start + N + 1), with the scan sleep lowered meanwhile.
  void exec_khugepaged(const Stmt& st) {
    if (!st.n) return;
    if (!khugepaged_thread_running())
      throw SkipTest{"the host's khugepaged thread is not running (it runs only while a THP size it serves is enabled)"};
    const std::string sleep_file = "transparent_hugepage/khugepaged/scan_sleep_millisecs";
    std::string sleep_was;
    if (host::sysfs_read(sleep_file, &sleep_was)) throw SkipTest{"the host kernel has no /sys/kernel/mm/" + sleep_file};
    const long start = khugepaged_full_scans();
    if (start < 0) throw SkipTest{"the host kernel has no khugepaged full_scans counter"};
    constexpr long kScanSleepMs = 10;
    const bool lower = std::strtol(sleep_was.c_str(), nullptr, 10) > kScanSleepMs;
    if (lower) check_errno(st, guard_.write(sleep_file, std::to_string(kScanSleepMs)), "sysfs write");
    // A full scan visits every registered mm on the machine, and a wake may
    // sit in compaction or an alloc sleep: allow for a busy machine.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60 + 30 * st.n);
    long now = start;
    while ((now = khugepaged_full_scans()) < start + static_cast<long>(st.n) + 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (lower) guard_.write(sleep_file, sleep_was);
    if (now < start + static_cast<long>(st.n) + 1)
      fail(st, fmt::format("the host's khugepaged made {} of {} full scans before the timeout", now - start, st.n + 1));
  }

  void exec_file(const Stmt& st) {
    bind(st, st.name, 'f');
    std::string why;
    int fd = host::host_create_file(st.size, st.fs, st.hugetlb_shift, st.name, &why);
    if (fd == host::kNoSuchFs) throw SkipTest{why};
    check_errno(st, fd, "file");
    if (fd >= 0) files_[st.name] = fd;
  }

  void exec_mmap(const Stmt& st) {
    Proc& p = proc(st, st.p);
    bind(st, st.name, 'r');
    int flags = st.flag ? MAP_SHARED : MAP_PRIVATE;
    int fd = -1;
    if (!st.file_ref.empty()) {
      auto it = files_.find(st.file_ref);
      if (it == files_.end()) fail(st, fmt::format("no file named {}", st.file_ref));
      fd = it->second;
    }
    if (fd < 0) {
      flags |= MAP_ANONYMOUS;
      if (st.hugetlb_shift) flags |= MAP_HUGETLB | (st.hugetlb_shift == 30 ? MAP_HUGE_1GB : MAP_HUGE_2MB);
    }
    auto do_map = [&](uint64_t at, uint64_t len, int extra) {
      return sys(st, p.agent->mmap(at, len, st.prot, flags | extra, fd, fd >= 0 ? st.file_off : 0));
    };
    long r;
    if (st.align <= PAGE_SIZE) {
      r = do_map(0, st.size, 0);
    } else {
      // As a selftest does: reserve size + align of nothing, place the mapping at the aligned start inside.
      long probe = sys(st, p.agent->mmap(0, st.size + st.align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      check_errno(st, probe, "mmap");
      uint64_t start = round_up(static_cast<uint64_t>(probe), st.align);
      r = do_map(start, st.size, MAP_FIXED);
      if (start > static_cast<uint64_t>(probe)) p.agent->munmap(static_cast<uint64_t>(probe), start - static_cast<uint64_t>(probe));
      uint64_t end = static_cast<uint64_t>(probe) + st.size + st.align;
      if (end > start + st.size) p.agent->munmap(start + st.size, end - (start + st.size));
      if (r < 0) p.agent->munmap(start, st.size);
    }
    check_errno(st, r, "mmap");
    if (r >= 0) {
      regions_[st.name] = static_cast<uint64_t>(r);
      p.ranges.push_back({static_cast<uint64_t>(r), st.size});
    }
  }

  void exec_read(const Stmt& st) {
    host::HostAccess r = agent(st, st.p).read(addr(st, st.addr), st.size, st.byte);
    check_signal(st, sig_name(r.sig), r.fault_addr, "read");
    expect_bytes(st, r.bad, r.found);
  }

  // vmsplice() is get_user_pages_fast(0); io_uring buffer registration is
  // pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM). Nothing else has a
  // host interface without the gup_test debugfs file.
  void exec_gup(const Stmt& st) {
    bind(st, st.name, 'h');
    auto entry = static_cast<GupEntry>(st.gup_entry);
    Agent& a = agent(st, st.p);
    uint64_t at = addr(st, st.addr);
    std::unique_ptr<host::HostGupHandle> h;
    if (entry == GupEntry::kGetUserPagesFast && st.gup_flags == 0)
      h = host::host_gup_vmsplice(a, at, static_cast<long>(st.n));
    else if (entry == GupEntry::kPinUserPagesFast && st.gup_flags == (foll::WRITE | foll::LONGTERM)) {
      std::string why;
      if (!host::host_io_uring_available(&why)) throw SkipTest{why};
      h = host::host_gup_iouring(a, at, static_cast<long>(st.n));
    }
    else
      throw SkipTest{fmt::format("the host has no interface for {} with these flags (it would need gup_test)", gup_entry_name(entry))};
    if (h->ret == -EPIPE || h->ret == -ETIMEDOUT) sys(st, h->ret);
    handles_[st.name] = std::move(h);
  }

  host::HostGupHandle& handle(const Stmt& st, const std::string& name) {
    auto it = handles_.find(name);
    if (it == handles_.end()) fail(st, fmt::format("no GUP handle named {}", name));
    return *it->second;
  }

  void exec_handle_io(const Stmt& st) {
    host::HostGupHandle& h = handle(st, st.p);
    std::vector<uint8_t> buf(st.size, static_cast<uint8_t>(st.byte));
    if (st.op == Op::kHandleWrite) {
      int r = h.write(st.size2, buf.data(), st.size);
      if (r == -EOPNOTSUPP) throw SkipTest{"a vmsplice() handle cannot be written through on the host"};
      check_errno(st, r, "write through the handle");
      return;
    }
    int r = h.read(st.size2, buf.data(), st.size);
    check_errno(st, r, "read through the handle");
    expect_handle_bytes(st, buf);
  }

  void exec_expect(const Stmt& st) {
    switch (st.op) {
      case Op::kExpectHandle: expect_handle_ret(st, handle(st, st.p).ret); break;
      case Op::kExpectRss: {
        Proc& p = proc(st, st.p);
        uint64_t anon = 0, file = 0, shmem = 0;
        for (auto& [a, len] : p.ranges)
          if (host::host_rss(p.agent->pid(), a, len, &anon, &file, &shmem)) fail(st, "cannot read the host's pagemap");
        expect_rss(st, st.str == "anon" ? anon : st.str == "file" ? file : shmem);
        break;
      }
      case Op::kExpectSysfs: {
        require_sysfs_file(st.str);
        std::string v;
        if (int r = host::sysfs_read(st.str, &v)) fail(st, fmt::format("sysfs {}: {}", st.str, errno_name(r)));
        char* end = nullptr;
        int64_t n = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end) fail(st, fmt::format("expected sysfs {} == {}, found {}", st.str, st.value, v));
        if (sysfs_is_counter(st.str)) n -= sysfs_base_[st.str];
        expect_number(st, "sysfs " + st.str + (sysfs_is_counter(st.str) ? " (since the test began)" : ""), n);
        break;
      }
      case Op::kExpectVmstat: {
        auto now = read_vmstat();
        auto it = now.find(st.str);
        if (it == now.end()) {
          skip_expectation("vmstat items this kernel does not have");
          break;
        }
        int64_t n = it->second - vmstat_base_[st.str];
        expect_number(st, "vmstat " + st.str + " (since the test began)", n);
        break;
      }
      case Op::kExpectCounter: skip_expectation("counter (the model's event counters)"); break;
      case Op::kExpectExclusive:
        skip_expectation("exclusive (no host interface shows PageAnonExclusive; pagemap bit 56 is another thing)");
        break;
      case Op::kExpectPinned: skip_expectation("pinned (no host interface shows folio_maybe_dma_pinned)"); break;
      case Op::kExpectSoftDirty:
      case Op::kExpectUffdWp: skip_expectation("soft-dirty/uffd-wp (not read from the host's pagemap yet)"); break;
      case Op::kExpectViolation: skip_expectation("violation (the model's checker and recorded findings)"); break;
      case Op::kExpectDump: fail(st, "no dump to check");
      default: exec_expect_page(st); break;
    }
  }

  host::HostPageInfo page(const Stmt& st, const std::string& pname, const AddrExpr& a) {
    host::HostPageInfo pi;
    std::string why;
    if (host::host_page_info(agent(st, pname).pid(), addr(st, a), &pi, &why)) throw SkipTest{why};
    return pi;
  }

  void exec_expect_page(const Stmt& st) {
    host::HostPageInfo pi = page(st, st.p, st.addr);
    switch (st.op) {
      case Op::kExpectMapped:
        expect_mapped(st, !pi.present ? "none" : !pi.huge ? "pte" : pi.order >= static_cast<int>(PUD_SHIFT - PAGE_SHIFT) ? "pud" : "pmd");
        break;
      case Op::kExpectOrder: expect_order(st, pi.present, pi.order); break;
      case Op::kExpectZero: expect_yes_no(st, "zero", false, pi.present, pi.present && pi.zero); break;
      case Op::kExpectSwapped: expect_yes_no(st, "swapped", false, pi.present, pi.swapped); break;
      case Op::kExpectSame: {
        host::HostPageInfo other = page(st, st.q, st.addr2);
        expect_same(st, pi.present && other.present && pi.pfn == other.pfn);
        break;
      }
      default: fail(st, "unknown expectation");
    }
  }

  host::SysfsGuard guard_;
  host::HostSwap swap_;
  std::map<std::string, Proc> procs_;
  std::map<std::string, std::unique_ptr<host::HostGupHandle>> handles_;
  std::map<std::string, int> files_;
  std::map<std::string, int64_t> vmstat_base_, sysfs_base_;
};

}  // namespace

std::unique_ptr<TestRun> make_host_run(const ScenarioOptions& opt) { return std::make_unique<HostRun>(opt); }

}  // namespace mmlab
