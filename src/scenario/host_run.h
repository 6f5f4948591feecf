// The host backend's test run, shared by its two files: host_run.cpp runs
// the statements on the machine's kernel, host_expect.cpp checks the
// expectations against what pagemap, kpageflags, sysfs and vmstat show
// (and skips, one by one, those the host cannot observe as upstream would).
#pragma once

#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "host/agent.h"
#include "host/host_gup.h"
#include "host/pagemap.h"
#include "host/probe.h"
#include "host/host_swap.h"
#include "host/sysfs.h"
#include "scenario/host_pages.h"
#include "scenario/test_run.h"

namespace mmlab {

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
    std::unique_ptr<host::Agent> agent;
    HostPages pages;  // what the test mapped, and which pages may differ from upstream
    // /proc/PID/status when `proc` started it: the agent's own memory, which
    // `expect P status` subtracts. Empty for a fork's child (its share of
    // the agent's own memory is not known).
    std::string status_at_start;
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
  // A read-type fault (a load, MADV_POPULATE_READ, GUP without FOLL_WRITE)
  // maps the zero page upstream where it finds nothing. On a host that does
  // not (probes zero_page, huge_zero_page), the pages that became present
  // meanwhile in private anonymous memory are told apart: the fault's folio
  // (an mTHP or THP) may map more than the range read.
  struct ReadWatch {
    std::vector<std::pair<uint64_t, uint64_t>> pieces;
    std::vector<std::vector<uint64_t>> before;  // pagemap entries
  };

  // ---- the test's life (host_run.cpp) ----
  void start(const std::vector<const Stmt*>& stmts) override;
  void pin_to_one_cpu();
  std::vector<std::string> teardown() override;
  void sample_cost(ScenarioResult* res) override;
  Proc& proc(const Stmt& st, const std::string& name);
  host::Agent& agent(const Stmt& st, const std::string& name);
  long sys(const Stmt& st, long ret);
  void add_proc(const Stmt& st, const std::string& name, std::unique_ptr<host::Agent> a, HostPages pages);
  Handle& handle(const Stmt& st, const std::string& name);
  static bool beyond_held(const Handle& h, uint64_t off, uint64_t len);
  std::vector<std::string> state_lines(const Stmt& st, const std::string& pname, stmt::PrintWhat what, uint64_t start,
                                       uint64_t end) override;
  std::vector<std::string> counter_lines(const std::string& glob) override;
  static void require_sysfs_file(const std::string& rel);
  long leaked_resv(const std::string& rel) const;
  void mark_large_folios(const Stmt& st, Proc& p, uint64_t at, uint64_t len);
  ReadWatch watch_read(const Stmt& st, Proc& p, uint64_t at, uint64_t len);
  void taint_read(const Stmt& st, Proc& p, const ReadWatch& w, uint64_t at, uint64_t len);
  // After a populating call (mlock, mlockall): populate_vma_page_range
  // read-faults what is not private and writable, so those pages are
  // tainted as a read's; the writable ones were written.
  void taint_populate(const Stmt& st, Proc& p, const ReadWatch& w, uint64_t at, uint64_t len);
  void taint_collapsed(Proc& p, uint64_t at, uint64_t len);

  // One overload per statement struct: a statement kind without one does not compile.
  void exec(const Stmt& st) override;
  void run(const Stmt&, const stmt::Tune& s);
  void run(const Stmt& st, const stmt::Proc& s);
  void run(const Stmt& st, const stmt::Exit& s);
  void run(const Stmt& st, const stmt::Munmap& s);
  void run(const Stmt& st, const stmt::Mprotect& s);
  void run(const Stmt& st, const stmt::Mremap& s);
  void run(const Stmt& st, const stmt::Mlock& s);
  void run(const Stmt& st, const stmt::Mlockall& s);
  void run(const Stmt& st, const stmt::Mseal& s);
  void run(const Stmt&, const stmt::Advance&);
  void run(const Stmt&, const stmt::Inject&);
  void run(const Stmt&, const stmt::ThpDisable&);
  void run(const Stmt&, const stmt::UffdRegister&);
  void run(const Stmt&, const stmt::UffdWp&);
  void run(const Stmt&, const stmt::CountersReset&);
  void run(const Stmt&, const stmt::CountersPrint& s);
  void run(const Stmt& st, const stmt::Print& s);
  void run(const Stmt& st, const stmt::Write& s);
  void run(const Stmt& st, const stmt::Unpin& s);
  void run(const Stmt& st, const stmt::VmRead& s);
  void run(const Stmt&, const stmt::Dump&);
  void run(const Stmt&, const stmt::Check&);
  void run(const Stmt&, const stmt::Skip& s);
  void run(const Stmt&, const stmt::Xfail& s);
  void run(const Stmt& st, const stmt::Sysfs& s);
  void run(const Stmt& st, const stmt::Khugepaged& s);
  void run(const Stmt& st, const stmt::File& s);
  void run(const Stmt&, const stmt::Swap& s);
  void run(const Stmt& st, const stmt::Truncate& s);
  void run(const Stmt& st, const stmt::PunchHole& s);
  void run(const Stmt& st, const stmt::Shmget& s);
  void run(const Stmt& st, const stmt::Shmctl& s);
  void run(const Stmt& st, const stmt::Shmat& s);
  void run(const Stmt& st, const stmt::Shmdt& s);
  void run(const Stmt& st, const stmt::Writeback&);
  void run(const Stmt& st, const stmt::ShrinkSlab&);
  void run(const Stmt& st, const stmt::Mmap& s);
  void run(const Stmt& st, const stmt::Fork& s);
  void run(const Stmt& st, const stmt::Madvise& s);
  void run(const Stmt& st, const stmt::ClearSoftDirty& s);
  void run(const Stmt& st, const stmt::Read& s);
  void run(const Stmt& st, const stmt::Gup& s);
  void run(const Stmt& st, const stmt::HandleWrite& s);
  void run(const Stmt& st, const stmt::HandleRead& s);

  // ---- expectations (host_expect.cpp) ----
  void run(const Stmt& st, const stmt::ExpectHandle& s);
  void run(const Stmt& st, const stmt::ExpectRss& s);
  void run(const Stmt& st, const stmt::ExpectLocked& s);
  void run(const Stmt& st, const stmt::ExpectFaults& s);
  void run(const Stmt& st, const stmt::ExpectSysfs& s);
  void run(const Stmt& st, const stmt::ExpectVmstat& s);
  void run(const Stmt&, const stmt::ExpectCounter&);
  void run(const Stmt&, const stmt::ExpectViolation&);
  void run(const Stmt& st, const stmt::ExpectDump&);
  void run(const Stmt& st, const stmt::ExpectMapped& s);
  void run(const Stmt& st, const stmt::ExpectOrder& s);
  void run(const Stmt& st, const stmt::ExpectPageBit& s);
  void run(const Stmt& st, const stmt::ExpectSame& s);
  void run(const Stmt& st, const stmt::ExpectProcField& s);
  void run(const Stmt& st, const stmt::Remember& s);
  void run(const Stmt& st, const stmt::ExpectFrame& s);
  void run(const Stmt& st, const stmt::Race& s);
  std::string taint_reason(uint8_t bits) const;
  bool skip_for(uint8_t bits, uint8_t mask);
  std::optional<std::string> statistic_skip(const std::string& name) const;
  static std::map<std::string, int64_t> read_vmstat();
  static bool sysfs_is_counter(const std::string& path);
  static std::string vmstat_key(const std::string& name);
  static std::string sysfs_key(const std::string& path);
  static int64_t read_counter(const std::string& key);
  std::optional<std::string> background(const std::string& key, int64_t found, int64_t expected);
  void expect_statistic(const Stmt& st, const std::string& key, const std::string& what, int64_t expected, int64_t found);
  host::HostPageInfo page(const Stmt& st, const std::string& pname, const AddrExpr& a);
  uint8_t taints_at(const Stmt& st, const std::string& pname, const AddrExpr& a);

  host::HostProbes probes_;
  host::SysfsGuard guard_;
  host::HostSwap swap_;
  std::map<std::string, Proc> procs_;
  std::map<std::string, uint64_t> cpu_base_;  // each process's Agent::cpu_ns() at the last `counters reset`
  bool cpu_timed_ = false;
  std::map<std::string, Handle> handles_;
  std::map<std::string, int> files_;
  // The SysV segments the test made (the runner's shmget; removed at teardown).
  struct Seg {
    int id = -1;
    uint64_t size = 0;  // rounded up to what shmat maps
    bool hugetlb = false;
  };
  std::map<std::string, Seg> segs_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> attached_;  // (process, shmat's address) -> size
  const Seg& seg(const Stmt& st, const std::string& name);
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
  bool zero_page_off_ = false;  // `tune mm.zero_page off` on a host whose read faults allocate too
  bool soft_dirty_used_ = false, swap_kind_used_ = false, zswap_used_ = false;
  std::string swap_kind_reason_;  // the swap device is not the kind asked for: the probe's reason
};

// The whole text of a /proc file ("" if it cannot be read).
std::string read_proc_text(const std::string& path);

}  // namespace mmlab
