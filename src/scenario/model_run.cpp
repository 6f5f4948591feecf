// The model backend: each test on a fresh System, every statement through
// the model's real mechanisms (System, Process, the GUP entry points).
#include <algorithm>
#include <cerrno>
#include <climits>
#include <fnmatch.h>
#include <cstdlib>
#include <map>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/trace.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "mmlab/explore.h"
#include "phys/store_use.h"
#include "scenario/parallel.h"
#include "scenario/test_run.h"

namespace mmlab {
namespace {

struct Handle {
  long ret = 0;
  GupPages pages;
};

struct DumpResult {
  long pages = 0, holes = 0;
};

// What snapshot() prints, unformatted: one process's header and leaf
// entries, vmstat's text, the mTHP statistics. Every field a line shows is
// here, so equal facts format to equal lines.
struct LeafFact {
  uint64_t addr;
  uint64_t bits;  // the raw entry (a swap line shows its exclusive bit)
  PageInfo pi;
  int level;
  bool swap;
  uint8_t same;  // 0 new, 1 same-frame, 2 other-frame
  bool operator==(const LeafFact& o) const {
    const PageInfo& a = pi;
    const PageInfo& b = o.pi;
    if (addr != o.addr || level != o.level || swap != o.swap || same != o.same) return false;
    if (swap) return (bits & (1ull << 3)) == (o.bits & (1ull << 3));
    return a.zero == b.zero && a.anon == b.anon && a.writable == b.writable && a.dirty == b.dirty && a.young == b.young &&
           a.soft_dirty == b.soft_dirty && a.uffd_wp == b.uffd_wp && a.order == b.order && a.refcount == b.refcount &&
           a.mapcount == b.mapcount && a.pincount == b.pincount && a.anon_exclusive == b.anon_exclusive &&
           a.lru == b.lru && a.referenced == b.referenced && a.active == b.active && a.folio_dirty == b.folio_dirty;
  }
};

struct ProcFact {
  std::string name;
  bool exited = false;
  long anon = 0, file = 0, shmem = 0;
  std::vector<LeafFact> leaves;
  bool operator==(const ProcFact&) const = default;
};

constexpr const char* kSnapshotMthpItems[] = {"anon_fault_alloc", "anon_fault_fallback", "split", "split_deferred",
                                              "nr_anon", "nr_anon_partially_mapped", "swpout", "swpin",
                                              "wp_fault_alloc", "wp_fault_fallback", "wp_fault_fallback_charge"};

class ModelFacts final : public TestRun::StateFacts {
 public:
  std::vector<ProcFact> procs;
  std::string vmstat;
  std::vector<int64_t> mthp;  // orders 2..9, kSnapshotMthpItems each

  bool equals(const StateFacts& o) const override {
    const auto* x = dynamic_cast<const ModelFacts*>(&o);
    return x && x->procs == procs && x->vmstat == vmstat && x->mthp == mthp;
  }

  // The fields equals() compares, in its order (LeafFact::operator==).
  std::pair<uint64_t, uint64_t> digest() const override {
    FactHash h;
    h.add(procs.size());
    for (const ProcFact& p : procs) {
      h.add(p.name);
      h.add(p.exited);
      h.add(static_cast<uint64_t>(p.anon));
      h.add(static_cast<uint64_t>(p.file));
      h.add(static_cast<uint64_t>(p.shmem));
      h.add(p.leaves.size());
      for (const LeafFact& l : p.leaves) {
        h.add(l.addr);
        h.add(static_cast<uint64_t>(l.level) | uint64_t{l.swap} << 8 | uint64_t{l.same} << 16);
        if (l.swap) {
          h.add(l.bits & (1ull << 3));
          continue;
        }
        const PageInfo& a = l.pi;
        const uint64_t flags = uint64_t{a.zero} | uint64_t{a.anon} << 1 | uint64_t{a.writable} << 2 |
                               uint64_t{a.dirty} << 3 | uint64_t{a.young} << 4 | uint64_t{a.soft_dirty} << 5 |
                               uint64_t{a.uffd_wp} << 6 | uint64_t{a.anon_exclusive} << 7 | uint64_t{a.lru} << 8 |
                               uint64_t{a.referenced} << 9 | uint64_t{a.active} << 10 | uint64_t{a.folio_dirty} << 11;
        h.add(flags);
        h.add(static_cast<uint64_t>(static_cast<uint32_t>(a.order)) | static_cast<uint64_t>(static_cast<uint32_t>(a.refcount)) << 32);
        h.add(static_cast<uint64_t>(static_cast<uint32_t>(a.mapcount)) | static_cast<uint64_t>(static_cast<uint32_t>(a.pincount)) << 32);
      }
    }
    h.add(vmstat);
    h.add(mthp.size());
    for (int64_t v : mthp) h.add(static_cast<uint64_t>(v));
    return h.value();
  }

  std::vector<std::string> lines() const override {
    std::vector<std::string> out;
    for (const ProcFact& p : procs) {
      if (p.exited) {
        out.push_back(p.name + " exited");
        continue;
      }
      out.push_back(fmt::format("{} rss anon={} file={} shmem={}", p.name, p.anon, p.file, p.shmem));
      for (const LeafFact& l : p.leaves) {
        std::string key = fmt::format("{} {:#x}", p.name, l.addr);
        if (l.swap) {
          out.push_back(fmt::format("{} swap {}", key, (l.bits & (1ull << 3)) ? "exclusive" : ""));
          continue;
        }
        const PageInfo& pi = l.pi;
        static const char* const kSame[] = {"new", "same-frame", "other-frame"};
        const char* cls = pi.zero ? "zero" : pi.anon ? "anon" : "file";
        out.push_back(fmt::format(
            "{} {} {} {} w={} d={} y={} sd={} uw={} | folio order={} ref={} map={} pin={} excl={} lru={} ref'd={} active={} dirty={}",
            key, l.level == 1 ? "pte" : l.level == 2 ? "pmd" : "pud", cls, kSame[l.same], pi.writable, pi.dirty, pi.young,
            pi.soft_dirty, pi.uffd_wp, pi.order, pi.refcount, pi.mapcount, pi.pincount, pi.anon_exclusive, pi.lru,
            pi.referenced, pi.active, pi.folio_dirty));
      }
    }
    std::istringstream vm(vmstat);
    for (std::string l; std::getline(vm, l);) out.push_back("vmstat " + l);
    size_t i = 0;
    for (unsigned o = 2; o <= 9; o++)
      for (const char* item : kSnapshotMthpItems) out.push_back(fmt::format("mthp order{} {} {}", o, item, mthp[i++]));
    return out;
  }
};

class ModelRun final : public TestRun {
 public:
  ModelRun(const ScenarioOptions& opt, TuneList tunes) : TestRun(opt), tunes_(std::move(tunes)) {}

  // The end state after a statement, one canonical line per fact: every
  // present entry (frame class, whether it is the frame mapped there before,
  // its bits, its folio's counts and flags), rss, vmstat and mTHP statistics.
  std::vector<std::string> snapshot() override { return take_facts()->lines(); }
  std::unique_ptr<StateFacts> state_facts() override { return take_facts(); }
  std::map<std::string, int64_t> counters() override {
    // The model's own mechanism counters, by model_only_counter_prefixes().
    static const std::vector<std::string> names = [] {
      std::vector<std::string> v;
      for (const std::string& n : counter_names())
        for (const std::string& p : model_only_counter_prefixes())
          if (n.rfind(p, 0) == 0) v.push_back(n);
      return v;
    }();
    std::map<std::string, int64_t> c;
    for (const std::string& n : names) c[n] = sys_->counter(n);
    return c;
  }

 private:
  // The facts of snapshot(); the frames each address maps become the
  // reference the next one names frames against.
  std::unique_ptr<ModelFacts> take_facts() {
    auto f = std::make_unique<ModelFacts>();
    std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> now;
    for (auto& [pname, proc] : procs_) {
      ProcFact& pf = f->procs.emplace_back();
      pf.name = pname;
      if (proc->exited()) {
        pf.exited = true;
        continue;
      }
      pf.anon = proc->rss_anon();
      pf.file = proc->rss_file();
      pf.shmem = proc->rss_shmem();
      // One walk (leaf_infos) in address order; the last snapshot's frames
      // of this process are looked up in its own address-ordered list.
      const auto pit = prev_.find(pname);
      const std::vector<std::pair<uint64_t, uint64_t>>* before = pit == prev_.end() ? nullptr : &pit->second;
      std::vector<std::pair<uint64_t, uint64_t>>& mine = now[pname];
      auto infos = proc->leaf_infos();
      pf.leaves.reserve(infos.size());
      mine.reserve(infos.size());
      for (auto& [e, pi] : infos) {
        mine.emplace_back(e.addr, pi.pfn);
        uint8_t same = 0;
        if (before) {
          auto it = std::lower_bound(before->begin(), before->end(), std::pair<uint64_t, uint64_t>{e.addr, 0});
          if (it != before->end() && it->first == e.addr) same = it->second == pi.pfn ? 1 : 2;
        }
        pf.leaves.push_back({e.addr, e.bits, pi, e.level, e.swap, same});
      }
      // A walk lists each address once, ascending; sorting anyway keeps the
      // lookup right should two entries ever share a start.
      std::sort(mine.begin(), mine.end());
    }
    prev_ = std::move(now);
    f->vmstat = sys_->vmstat_text();
    f->mthp.reserve(8 * std::size(kSnapshotMthpItems));
    for (unsigned o = 2; o <= 9; o++)
      for (const char* item : kSnapshotMthpItems) f->mthp.push_back(sys_->mthp_stat(o, item));
    return f;
  }

  void start(const std::vector<const Stmt*>& stmts) override {
    SystemConfig cfg;
    cfg.ram_bytes = opt_.ram_bytes;
    int err = 0;
    {
      ScopedStoreUse use(test_touch_estimate(stmts) >= kLargeTestBytes ? StoreUse::kLarge : StoreUse::kSmall);
      sys_ = System::create(cfg, &err);
    }
    if (!sys_) throw StartError{fmt::format("cannot create a system: {}", errno_name(err))};
    trace::name_system(res_.name);
    for (auto& [k, v] : tunes_)
      if (sys_->tune(k, v)) throw Failure{fmt::format("variant {}={} refused", k, v)};
  }

  std::vector<std::string> teardown() override {
    std::vector<std::string> leaks;
    if (!sys_) return leaks;
    // Release what handles hold, tear every process down, check nothing leaked.
    handles_.clear();
    for (Process* p : sys_->processes()) p->exit();
    for (auto& [n, fd] : files_) sys_->close_file(fd);
    for (auto& [n, id] : segs_) (void)sys_->shmctl(id, 0);  // IPC_RMID (an id removed already is EINVAL)
    CheckReport rep = sys_->check();
    for (auto& v : rep.violations) leaks.push_back(v.invariant + " at " + v.where);
    for (auto& w : new_violations()) leaks.push_back(w);  // found while tearing down
    return leaks;
  }

  std::vector<std::string> new_violations() override {
    if (!sys_) return {};
    std::vector<std::string> all = sys_->warnings();
    std::vector<std::string> fresh(all.begin() + static_cast<long>(std::min(warnings_seen_, all.size())), all.end());
    warnings_seen_ = all.size();
    // The kernel log's new lines go out under this test, as dmesg would show them.
    std::vector<std::string> log = sys_->kernel_log();
    for (size_t i = log_seen_; i < log.size(); i++) res_.output.push_back("dmesg: " + log[i]);
    log_seen_ = log.size();
    if (opt_.debug_vm)
      for (auto& v : check_now().violations) fresh.push_back("invariant checker: " + v.invariant + " at " + v.where);
    return fresh;
  }

  std::string tune_value(const std::string& key) override {
    std::string v;
    if (!sys_ || sys_->tune_read(key, &v)) return TestRun::tune_value(key);
    return v;
  }

  void check_access(const Stmt& st, const AccessResult& r, const char* what) {
    check_signal(st, r.ok() ? "" : signal_name(r.sig), r.fault_addr, what);
  }

  Process* proc(const Stmt& st, const std::string& name) {
    auto it = procs_.find(name);
    if (it == procs_.end()) fail(st, fmt::format("no process named {}", name));
    return it->second;
  }
  Handle& handle(const Stmt& st, const std::string& name) {
    auto it = handles_.find(name);
    if (it == handles_.end()) fail(st, fmt::format("no GUP handle named {}", name));
    return it->second;
  }
  // One overload per statement struct: a statement kind without one does not compile.
  void exec(const Stmt& st) override {
    std::visit([&](const auto& s) { run(st, s); }, st.body);
  }

  void run(const Stmt& st, const stmt::Sysfs& s) { check_errno(st, sys_->sysfs_write(s.path, s.value), "sysfs write"); }
  void run(const Stmt& st, const stmt::Tune& s) { check_errno(st, sys_->tune(s.key, s.value), "tune"); }
  void run(const Stmt& st, const stmt::Proc& s) {
    bind(st, s.proc, 'p');
    Process* p = sys_->new_process(s.proc);
    if (!p) fail(st, "cannot create the process");
    procs_[s.proc] = p;
  }
  void run(const Stmt& st, const stmt::Fork& s) {
    bind(st, s.child, 'p');
    int err = 0;
    Process* c = proc(st, s.parent)->fork(s.child, &err);
    check_errno(st, c ? 0 : err, "fork");
    if (c) procs_[s.child] = c;
  }
  void run(const Stmt& st, const stmt::Exit& s) { proc(st, s.proc)->exit(); }
  void run(const Stmt& st, const stmt::File& s) {
    bind(st, s.name, 'f');
    FsClass fs;
    fs_class_from_name(s.fs, &fs);
    if (s.hugetlb_shift) fs = FsClass::kHugetlbfs;
    // scenario_check_sizes() refuses this before a run; a caller that did
    // not ask it still gets no allocation that cannot succeed.
    if (s.size > opt_.ram_bytes)
      fail(st, fmt::format("file {} of {} bytes: larger than the System's RAM ({} bytes); a file is allocated whole", s.name, s.size,
                           opt_.ram_bytes));
    int fd = s.huge.empty() ? sys_->create_file(s.size, fs, s.hugetlb_shift, s.name)
                            : sys_->create_tmpfs_file(s.size, s.huge, s.name, s.noswap);
    if (fd >= 0 && s.read_only) check_errno(st, sys_->file_reopen_read_only(fd), "file");
    if (fd >= 0 && s.uncached) check_errno(st, sys_->file_fadvise_dontneed(fd), "file");
    check_errno(st, fd, "file");
    if (fd >= 0) files_[s.name] = fd;
  }
  void run(const Stmt& st, const stmt::Swap& s) {
    if (s.size > opt_.ram_bytes)
      fail(st, fmt::format("swap of {} bytes: larger than the System's RAM ({} bytes)", s.size, opt_.ram_bytes));
    const SwapKind kind = s.kind == "file" ? SwapKind::kFile : s.kind == "zram" ? SwapKind::kZram : SwapKind::kBlkdev;
    check_errno(st, sys_->add_swap(s.size, kind), "swap");
  }
  int fd_of(const Stmt& st, const std::string& name) {
    auto it = files_.find(name);
    if (it == files_.end()) fail(st, fmt::format("no file named {}", name));
    return it->second;
  }
  void run(const Stmt& st, const stmt::Truncate& s) {
    int r = sys_->file_ftruncate(fd_of(st, s.file), static_cast<int64_t>(s.size));
    check_errno(st, r, "truncate");
  }
  void run(const Stmt& st, const stmt::PunchHole& s) {
    int r = sys_->file_punch_hole(fd_of(st, s.file), static_cast<int64_t>(s.offset), static_cast<int64_t>(s.len));
    check_errno(st, r, "punch-hole");
  }
  void run(const Stmt&, const stmt::Writeback&) { (void)sys_->swap_writeback_wait(); }
  void run(const Stmt&, const stmt::ShrinkSlab&) { (void)sys_->run_shrinkers(); }
  void run(const Stmt& st, const stmt::Khugepaged& s) {
    check_errno(st, sys_->run_khugepaged(static_cast<unsigned>(s.scans)), "khugepaged");
  }
  void run(const Stmt& st, const stmt::Advance& s) { check_errno(st, sys_->advance_clock(s.ns), "advance"); }
  void run(const Stmt& st, const stmt::Inject& s) { check_errno(st, sys_->inject(s.site, s.spec), "inject"); }
  void run(const Stmt&, const stmt::CountersReset&) {
    sys_->reset_counters();
    cost_base_ = sys_->all_counters();
    cost_timed_ = true;
  }
  void sample_cost(ScenarioResult* res) override {
    if (!cost_timed_) return;
    for (auto& [n, v] : sys_->all_counters()) res->cost_counts[n] = v - cost_base_[n];
  }
  void sample_counters(ScenarioResult* res) override { res->counters = sys_->all_counters(); }
  void run(const Stmt&, const stmt::CountersPrint& s) { exec_counters_print(s); }
  void run(const Stmt& st, const stmt::Print& s) { exec_print(st, s); }

  std::vector<std::string> state_lines(const Stmt& st, const std::string& pname, stmt::PrintWhat what, uint64_t start,
                                       uint64_t end) override {
    Process* p = proc(st, pname);
    if (p->exited()) return {"(the process has exited)"};
    switch (what) {
      case stmt::PrintWhat::kSmaps: return smaps_of_range(p->smaps(), start, end);
      case stmt::PrintWhat::kPagetable: {
        std::vector<std::string> l = split_lines(p->pagetable_dump_text(start, end ? end : ~0ull));
        if (l.size() == 1) l.push_back("(no entry in the range)");
        return l;
      }
      case stmt::PrintWhat::kFolio: {
        std::string d = p->folio_dump(start);
        if (d.empty()) return {p->page_info(start).swap ? "(a swap entry: no folio mapped)" : "(nothing mapped)"};
        return split_lines(d);
      }
    }
    return {};
  }

  // `counter NAME N` for the event counters, `vmstat NAME N` for /proc/vmstat.
  std::vector<std::string> counter_lines(const std::string& glob) override {
    std::vector<std::string> out;
    auto wanted = [&](const std::string& name, int64_t v) {
      return glob.empty() ? v != 0 : fnmatch(glob.c_str(), name.c_str(), 0) == 0;
    };
    for (const std::string& n : counter_names())
      if (int64_t v = sys_->counter(n); wanted(n, v)) out.push_back(fmt::format("counter {} {}", n, v));
    std::istringstream vm(sys_->vmstat_text());
    std::string name;
    int64_t v = 0;
    while (vm >> name >> v)
      if (wanted(name, v)) out.push_back(fmt::format("vmstat {} {}", name, v));
    if (out.empty()) out.push_back(glob.empty() ? "(every counter is zero)" : "(no counter matches " + glob + ")");
    return out;
  }
  void run(const Stmt& st, const stmt::Shmget& s) {
    bind(st, s.seg, 's');
    const long id = sys_->shmget(s.size, s.hugetlb);
    check_errno(st, id, "shmget");
    if (id >= 0) segs_[s.seg] = static_cast<int>(id);
  }
  int seg_of(const Stmt& st, const std::string& name) {
    auto it = segs_.find(name);
    if (it == segs_.end()) fail(st, fmt::format("no shared memory segment named {}", name));
    return it->second;
  }
  void run(const Stmt& st, const stmt::Shmctl& s) {
    check_errno(st, sys_->shmctl(seg_of(st, s.seg), s.cmd), "shmctl");
  }
  void run(const Stmt& st, const stmt::Shmat& s) {
    Process* p = proc(st, s.proc);
    bind(st, s.region, 'r');
    const long r = p->shmat(seg_of(st, s.seg), s.read_only);
    check_errno(st, r, "shmat");
    if (r >= 0) regions_[s.region] = static_cast<uint64_t>(r);
  }
  void run(const Stmt& st, const stmt::Shmdt& s) {
    check_errno(st, proc(st, s.proc)->shmdt(addr(st, s.addr)), "shmdt");
  }
  void run(const Stmt& st, const stmt::Munmap& s) {
    check_errno(st, proc(st, s.proc)->munmap(addr(st, s.addr), s.size), "munmap");
  }
  void run(const Stmt& st, const stmt::Mprotect& s) {
    check_errno(st, proc(st, s.proc)->mprotect(addr(st, s.addr), s.size, s.prot), "mprotect");
  }
  void run(const Stmt& st, const stmt::Madvise& s) {
    int r = proc(st, s.proc)->madvise(addr(st, s.addr), s.size, s.advice);
    // The model's answer for a file or shmem range: collapse_file() is not modelled.
    if (s.advice == MADV_COLLAPSE && r == -ENOSYS) throw SkipTest{"file/shmem collapse not modelled"};
    check_errno(st, r, ("madvise " + s.advice_name).c_str());
  }
  void run(const Stmt& st, const stmt::Mremap& s) {
    int flags = MREMAP_MAYMOVE | (s.to ? MREMAP_FIXED : 0) | (s.dontunmap ? MREMAP_DONTUNMAP : 0);
    long r = proc(st, s.proc)->mremap(addr(st, s.addr), s.old_size, s.new_size, flags, s.to ? addr(st, *s.to) : 0);
    check_errno(st, r, "mremap");
    bind(st, s.region, 'r');
    if (r >= 0) regions_[s.region] = static_cast<uint64_t>(r);
  }
  void run(const Stmt& st, const stmt::Mlock& s) {
    Process* p = proc(st, s.proc);
    const uint64_t at = addr(st, s.addr);
    if (s.unlock) return check_errno(st, p->munlock(at, s.size), "munlock");
    check_errno(st, p->mlock2(at, s.size, s.onfault ? MLOCK_ONFAULT : 0), s.onfault ? "mlock2" : "mlock");
  }
  void run(const Stmt& st, const stmt::Mseal& s) {
    check_errno(st, proc(st, s.proc)->mseal(addr(st, s.addr), s.size), "mseal");
  }
  void run(const Stmt& st, const stmt::Mlockall& s) {
    Process* p = proc(st, s.proc);
    if (!s.flags) return check_errno(st, p->munlockall(), "munlockall");
    check_errno(st, p->mlockall(s.flags), "mlockall");
  }
  void run(const Stmt& st, const stmt::ClearSoftDirty& s) { proc(st, s.proc)->clear_soft_dirty(); }
  void run(const Stmt& st, const stmt::ThpDisable& s) {
    check_errno(st, proc(st, s.proc)->prctl_set_thp_disable(s.disable, s.except_advised ? Process::PR_THP_DISABLE_EXCEPT_ADVISED : 0),
                "thp-disable");
  }
  void run(const Stmt& st, const stmt::UffdRegister& s) {
    unsigned modes = (s.missing ? Process::kUffdMissing : 0) | (s.wp ? Process::kUffdWp : 0);
    check_errno(st, proc(st, s.proc)->uffd_register(addr(st, s.addr), s.size, modes), "userfaultfd");
  }
  void run(const Stmt& st, const stmt::UffdWp& s) {
    check_errno(st, proc(st, s.proc)->uffd_writeprotect(addr(st, s.addr), s.size, s.on), "uffd-wp");
  }
  void run(const Stmt& st, const stmt::Write& s) {
    check_access(st, proc(st, s.proc)->fill(addr(st, s.addr), s.byte, s.size), "write");
  }
  void run(const Stmt& st, const stmt::Read& s) {
    Process* p = proc(st, s.proc);
    uint64_t a = addr(st, s.addr);
    if (!s.byte) {
      // In pieces: the SIZE is the scenario's (up to the address space), the
      // buffer only a piece of it; the first fault ends the read as one would.
      constexpr uint64_t kPiece = 1ull << 20;
      std::vector<uint8_t> buf(std::min(s.size, kPiece));
      AccessResult r;
      for (uint64_t done = 0; done < s.size && r.ok(); done += kPiece)
        r = p->read(a + done, buf.data(), std::min(kPiece, s.size - done));
      check_access(st, r, "read");
      return;
    }
    int64_t bad = -1;
    uint8_t found = 0;
    AccessResult r = p->read_expect(a, *s.byte, s.size, &bad, &found);
    check_access(st, r, "read");
    expect_bytes(st, s, bad, found);
  }
  void run(const Stmt& st, const stmt::Gup& s) {
    bind(st, s.handle, 'h');
    // The caller's pages array (one pointer per page, as gup_test's
    // kvcalloc) must be one the kernel could allocate: kvmalloc refuses
    // more than INT_MAX bytes, and it must fit the simulated RAM.
    // Checked before the model allocates it on the host.
    if (const uint64_t limit = std::min<uint64_t>(INT_MAX, opt_.ram_bytes); s.nr_pages * sizeof(void*) > limit)
      fail(st, fmt::format("NPAGES {}: a pages array of {} bytes is larger than a caller could allocate ({} bytes: "
                           "kvmalloc's INT_MAX limit or the simulated RAM, whichever is less)",
                           s.nr_pages, s.nr_pages * sizeof(void*), limit));
    // The call gets the count as written (the kernel returns what it can),
    // but a large pages array only as many slots as the mapped run from the
    // address holds: a count far beyond the region costs no host memory.
    // A small array (kSmallPagesArray slots) is taken whole without that
    // walk, whose mmap_read_lock would make a `pin,fast` in a race block
    // wait for a fork's mmap_write_lock, so that it could never overlap
    // copy_page_range (K1 in tests/scenarios/races.mms). A large count is
    // still walked first: in a race block, a thread that grows the run
    // after the walk would leave the array short (gup()'s VM_BUG_ON).
    Process* p = proc(st, s.proc);
    const uint64_t at = addr(st, s.addr);
    const long nr = static_cast<long>(s.nr_pages);
    Handle& h = handles_[s.handle];
    constexpr long kSmallPagesArray = 512;  // 4 KiB of pointers
    const long slots = nr <= kSmallPagesArray ? nr : gup_reachable_pages(p, at, nr);
    h.ret = gup(p, s.entry, at, nr, s.gup_flags, &h.pages, slots);
  }
  void run(const Stmt& st, const stmt::HandleWrite& s) {
    check_errno(st, handle(st, s.handle).pages.fill(s.offset, s.byte, s.size), "write through the handle");
  }
  void run(const Stmt& st, const stmt::HandleRead& s) {
    int64_t bad = -1;
    uint8_t found = 0;
    int r = handle(st, s.handle).pages.read_expect(s.offset, s.byte, s.size, &bad, &found);
    check_errno(st, r, "read through the handle");
    expect_handle_mismatch(st, s, bad, found);
  }
  void run(const Stmt& st, const stmt::VmRead& s) {
    const long r = process_vm_readv(proc(st, s.proc), addr(st, s.local), proc(st, s.target), addr(st, s.remote), s.size);
    check_vm_read(st, s, r);
  }
  void run(const Stmt& st, const stmt::Unpin& s) { handle(st, s.handle).pages.release(s.dirty ? Dirty::kYes : Dirty::kNo); }
  void run(const Stmt& st, const stmt::Dump& s) {
    bind(st, s.dump, 'd');
    DumpResult d;
    dump_range(proc(st, s.proc), addr(st, s.addr), s.size, &d.pages, &d.holes);
    dumps_[s.dump] = d;
  }
  // The checker mid-test: what the GUP handles hold is not a leak.
  CheckReport check_now() {
    std::map<uint64_t, long> refs;
    for (auto& [n, h] : handles_) h.pages.add_refs(&refs);
    return sys_->check_with_refs(refs);
  }
  void run(const Stmt& st, const stmt::Check&) {
    CheckReport r = check_now();
    if (!r.ok())
      violation(st, fmt::format("invariant checker: {} at {}{}", r.violations.front().invariant, r.violations.front().where,
                                r.violations.size() > 1 ? fmt::format(" (and {} more)", r.violations.size() - 1) : ""));
  }
  void run(const Stmt&, const stmt::Skip& s) { exec_skip(s); }
  // Outside an exploration (`mmlab diff`, a caller of TestRun::run) a race
  // block's threads run one after the other, in the order written: one of
  // the interleavings, and the one a reader expects first.
  void run(const Stmt&, const stmt::Race& s) {
    for (const stmt::RaceThread& t : s.block->threads)
      for (const Stmt& st : t.stmts)
        if (!step(st)) return;
  }
  void run(const Stmt&, const stmt::Xfail& s) { exec_xfail(s); }
  void run(const Stmt& st, const stmt::ExpectViolation& s) { expect_violation(st, s); }
  void run(const Stmt& st, const stmt::ExpectHandle& s) { expect_handle_ret(st, s, handle(st, s.handle).ret); }
  void run(const Stmt& st, const stmt::ExpectDump& s) {
    auto it = dumps_.find(s.dump);
    if (it == dumps_.end()) fail(st, fmt::format("no dump named {}", s.dump));
    if (it->second.pages != static_cast<long>(s.pages) || it->second.holes != static_cast<long>(s.holes))
      fail(st, fmt::format("expected {} pages {} holes {}, found pages {} holes {}", s.dump, s.pages, s.holes, it->second.pages,
                           it->second.holes));
  }
  void run(const Stmt& st, const stmt::ExpectRss& s) {
    Process* p = proc(st, s.proc);
    long v = s.kind == "anon" ? p->rss_anon() : s.kind == "file" ? p->rss_file() : p->rss_shmem();
    expect_rss(st, s, static_cast<uint64_t>(v));
  }
  void run(const Stmt& st, const stmt::ExpectLocked& s) {
    expect_locked(st, s, static_cast<uint64_t>(proc(st, s.proc)->locked_vm()));
  }
  void run(const Stmt& st, const stmt::ExpectFaults& s) {
    Process* p = proc(st, s.proc);
    expect_faults(st, s, s.major ? p->maj_flt() : p->min_flt());
  }
  void run(const Stmt& st, const stmt::ExpectSysfs& s) {
    std::string v;
    int r = sys_->sysfs_read(s.path, &v);
    if (r) fail(st, fmt::format("sysfs {}: {}", s.path, errno_name(r)));
    char* end = nullptr;
    int64_t n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end) fail(st, fmt::format("expected sysfs {} == {}, found {}", s.path, s.value, v));
    expect_number(st, "sysfs " + s.path, s.value, n);
  }
  void run(const Stmt& st, const stmt::ExpectVmstat& s) {
    int64_t v = sys_->vmstat(s.item);
    if (v < 0) fail(st, fmt::format("no vmstat item named {}", s.item));
    expect_number(st, "vmstat " + s.item, s.value, v);
  }
  void run(const Stmt& st, const stmt::ExpectCounter& s) {
    int64_t v = sys_->counter(s.counter);
    if (v < 0) fail(st, fmt::format("no counter named {}", s.counter));
    expect_number(st, "counter " + s.counter, s.value, v);
  }
  void run(const Stmt& st, const stmt::ExpectMapped& s) {
    static const char* lv[] = {"none", "pte", "pmd", "pud"};
    expect_mapped(st, s, lv[page_at(st, s.proc, s.addr).level]);
  }
  void run(const Stmt& st, const stmt::ExpectOrder& s) {
    PageInfo pi = page_at(st, s.proc, s.addr);
    expect_order(st, s, pi.level, pi.order);
  }
  void run(const Stmt& st, const stmt::ExpectPageBit& s) {
    PageInfo pi = page_at(st, s.proc, s.addr);
    switch (s.bit) {
      case stmt::PageBit::kExclusive: expect_yes_no(st, s, pi.level != 0, pi.anon_exclusive); break;
      case stmt::PageBit::kPinned: expect_yes_no(st, s, pi.level != 0, pi.maybe_pinned); break;
      case stmt::PageBit::kZero: expect_yes_no(st, s, pi.level != 0, pi.level && pi.zero); break;
      case stmt::PageBit::kSwapped: expect_yes_no(st, s, pi.level != 0, pi.swap); break;
      case stmt::PageBit::kSoftDirty: expect_yes_no(st, s, pi.level != 0, pi.soft_dirty); break;
      case stmt::PageBit::kUffdWp: expect_yes_no(st, s, pi.level != 0, pi.uffd_wp); break;
      case stmt::PageBit::kGuard: expect_yes_no(st, s, pi.level != 0, pi.guard); break;
    }
  }
  void run(const Stmt& st, const stmt::ExpectProcField& s) {
    Process* p = proc(st, s.proc);
    std::optional<uint64_t> at;
    if (s.smaps) at = addr(st, s.addr);
    uint64_t bytes = 0;
    std::string why;
    if (!proc_field_bytes(s.smaps ? p->smaps() : p->status_rss(), at, s.field, &bytes, &why))
      fail(st, fmt::format("{} {}: {}", s.proc, s.smaps ? "smaps" : "status", why));
    expect_proc_field(st, s, bytes);
  }
  // A frame: a present entry, not a swap entry, migration entry or marker.
  void run(const Stmt& st, const stmt::Remember& s) {
    PageInfo pi = page_at(st, s.proc, s.addr);
    remember_frame(st, s, pi.level && !pi.swap, pi.pfn);
  }
  void run(const Stmt& st, const stmt::ExpectFrame& s) {
    PageInfo pi = page_at(st, s.proc, s.addr);
    expect_frame(st, s, pi.level && !pi.swap, pi.pfn);
  }
  void run(const Stmt& st, const stmt::ExpectSame& s) {
    PageInfo pi = page_at(st, s.proc, s.addr);
    PageInfo other = proc(st, s.other_proc)->page_info(addr(st, s.other_addr));
    expect_same(st, s, pi.level && other.level && pi.pfn == other.pfn);
  }

  void run(const Stmt& st, const stmt::Mmap& s) {
    Process* p = proc(st, s.proc);
    bind(st, s.region, 'r');
    int prot = s.prot;
    int flags = (s.shared ? MAP_SHARED : MAP_PRIVATE) | s.map_flags;
    uint64_t slack = s.align > PAGE_SIZE ? s.align : 0;
    long r;
    int fd = -1;
    if (!s.file.empty()) {
      auto it = files_.find(s.file);
      if (it == files_.end()) fail(st, fmt::format("no file named {}", s.file));
      fd = it->second;
    }
    // A placement (never with align=, which picks its own address).
    const uint64_t at = s.place == stmt::Mmap::Place::kAny ? 0 : addr(st, s.place_addr);
    flags |= s.place == stmt::Mmap::Place::kFixed       ? MAP_FIXED
             : s.place == stmt::Mmap::Place::kNoReplace ? MAP_FIXED_NOREPLACE
                                                        : 0;
    auto do_map = [&](uint64_t len) {
      if (fd >= 0) return p->mmap_file(at, len, prot, flags, fd, s.file_off);
      int f = flags | MAP_ANONYMOUS;
      if (s.hugetlb_shift) f |= MAP_HUGETLB | (s.hugetlb_shift == 30 ? MAP_HUGE_1GB : MAP_HUGE_2MB);
      return p->mmap(at, len, prot, f);
    };
    // The over-allocation must not wrap: a SIZE with no room for the slack
    // in the user address space has no aligned place (ENOMEM, the kernel's
    // answer for a length beyond TASK_SIZE), never one placed by a wrapped
    // length.
    uint64_t with_slack = 0;
    if (slack && (__builtin_add_overflow(s.size, slack, &with_slack) || with_slack > TASK_SIZE)) {
      check_errno(st, -ENOMEM, "mmap");
      return;
    }
    if (!slack || fd >= 0 || s.hugetlb_shift) {
      r = do_map(s.size);
      if (r >= 0 && slack && (static_cast<uint64_t>(r) & (s.align - 1))) {
        // A file mapping cannot be over-allocated and trimmed here: place it by hand.
        p->munmap(static_cast<uint64_t>(r), s.size);
        long probe = p->mmap(0, s.size + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS);
        check_errno(st, probe, "mmap");
        uint64_t aligned = round_up(static_cast<uint64_t>(probe), s.align);
        p->munmap(static_cast<uint64_t>(probe), s.size + slack);
        r = fd >= 0 ? p->mmap_file(aligned, s.size, prot, flags | MAP_FIXED, fd, s.file_off)
                    : p->mmap(aligned, s.size, prot, flags | MAP_ANONYMOUS | MAP_FIXED);
      }
    } else {
      // As a selftest does: over-allocate, keep the aligned part, trim the rest.
      r = do_map(s.size + slack);
      if (r >= 0) {
        uint64_t start = round_up(static_cast<uint64_t>(r), s.align);
        if (start > static_cast<uint64_t>(r)) p->munmap(static_cast<uint64_t>(r), start - static_cast<uint64_t>(r));
        uint64_t tail = static_cast<uint64_t>(r) + s.size + slack - (start + s.size);
        if (tail) p->munmap(start + s.size, tail);
        r = static_cast<long>(start);
      }
    }
    check_errno(st, r, "mmap");
    if (r >= 0) regions_[s.region] = static_cast<uint64_t>(r);
  }

  PageInfo page_at(const Stmt& st, const std::string& name, const AddrExpr& a) {
    Process* p = proc(st, name);
    return p->page_info(addr(st, a));
  }

  TuneList tunes_;
  std::unique_ptr<System> sys_;
  std::map<std::string, Process*> procs_;
  std::map<std::string, Handle> handles_;
  std::map<std::string, DumpResult> dumps_;
  std::map<std::string, int> files_;
  std::map<std::string, int> segs_;  // shmget's ids
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> prev_;  // snapshot(): per process, (address, frame) last time, ascending
  std::map<std::string, int64_t> cost_base_;  // System::all_counters() at the last `counters reset`
  bool cost_timed_ = false;
  size_t warnings_seen_ = 0;              // System::warnings() already reported
  size_t log_seen_ = 0;                   // System::kernel_log() lines already printed
};

}  // namespace

std::unique_ptr<TestRun> make_model_run(const ScenarioOptions& opt, TuneList tunes) {
  return std::make_unique<ModelRun>(opt, std::move(tunes));
}

// ---- race blocks: the whole test is each run's program ----------------------

const stmt::RaceBlock* race_block_of(const TestCase& tc, size_t* at) {
  for (size_t i = 0; i < tc.stmts.size(); i++)
    if (const auto* r = tc.stmts[i].as<stmt::Race>()) {
      if (at) *at = i;
      return r->block.get();
    }
  return nullptr;
}

namespace {

// Whether a `when`-guarded statement runs under these tunes.
bool holds_under(const Stmt& st, const TuneList& tunes) {
  for (const WhenCond& c : st.when) {
    std::string v = tune_default(c.key);
    for (auto& [k, val] : tunes)
      if (k == c.key) v = val;
    if (std::find(c.values.begin(), c.values.end(), v) == c.values.end()) return false;
  }
  return true;
}

}  // namespace

RaceRig::RaceRig(const ScenarioOptions& opt, TuneList tunes, const ScenarioFileAst& file, const TestCase& tc)
    : opt_(opt), tunes_(std::move(tunes)), file_(file), tc_(tc) {
  // Under the explorer the checker runs once, at each run's end (the
  // teardown): after a statement of one thread, another may be half-way
  // through an operation, a state no invariant describes.
  opt_.debug_vm = false;
  opt_.record_states = false;
  block_ = race_block_of(tc, &at_);
  for (const auto* list : {&file.prelude, &tc.stmts})
    for (const Stmt& st : *list)
      if (st.as<stmt::ExpectViolation>() && holds_under(st, tunes_)) expect_violation_ = true;
}

explore::RaceHooks RaceRig::hooks() {
  explore::RaceHooks h;
  h.nthreads = static_cast<int>(block_->threads.size());
  for (const stmt::RaceThread& t : block_->threads) h.names.push_back(t.name);
  h.test_id = tc_.name;
  for (auto& [k, v] : tunes_) h.tune += (h.tune.empty() ? "" : ",") + k + "=" + v;
  h.fresh = [this] {
    cur_.reset();
    cur_ = make_model_run(opt_, tunes_);
    if (!cur_->begin(file_, tc_)) return;
    for (const Stmt& st : file_.prelude)
      if (!cur_->step(st)) return;
    for (size_t i = 0; i < at_; i++)
      if (!cur_->step(tc_.stmts[i])) return;
  };
  h.abandon = [this] {
    // A thread was unwound with locks the model took by hand still held:
    // the run's System is kept for good rather than torn down.
    static auto* kept = new std::vector<std::unique_ptr<TestRun>>;
    kept->push_back(std::move(cur_));
  };
  h.bodies = [this] {
    explore::Session::Bodies b;
    for (const stmt::RaceThread& t : block_->threads)
      b.push_back([this, &t] {
        for (const Stmt& st : t.stmts)
          if (!cur_->step(st)) return;
      });
    return b;
  };
  h.check = [this]() -> std::optional<std::string> {
    for (size_t i = at_ + 1; i < tc_.stmts.size(); i++)
      if (!cur_->step(tc_.stmts[i])) break;
    last_ = cur_->finish();
    cur_.reset();
    if (last_.outcome == Outcome::kSkip || last_.outcome == Outcome::kError) return std::nullopt;
    const bool pass = last_.outcome == Outcome::kPass || last_.outcome == Outcome::kXpass;
    const std::string diag = last_.diagnostics.empty() ? "failed" : last_.diagnostics.front();
    if (!expect_violation_) return pass ? std::nullopt : std::optional<std::string>(diag);
    // Under `expect violation` the run passes when the violation shows.
    if (pass) return last_.violations.empty() ? std::string("the expected violation") : last_.violations.front();
    if (diag.find("expected a violation containing") != std::string::npos) return std::nullopt;
    unexpected_ = true;  // a failure of another kind
    return diag;
  };
  return h;
}

RaceSettings RaceRig::settings() const {
  RaceSettings r;
  using M = stmt::RaceBlock::Mode;
  r.mode = block_->mode == M::kPct ? "pct" : block_->mode == M::kDfs ? "dfs" : "schedule";
  r.depth = block_->depth;
  r.bound = block_->bound;
  r.schedule = block_->schedule;
  r.runs = block_->runs;
  r.seed = block_->seed;
  r.filter = block_->filter;
  return r;
}

std::unique_ptr<ScenarioRace> scenario_race(const ScenarioProgram& prog, const std::string& test, const ScenarioOptions& opt,
                                            const std::vector<std::pair<std::string, std::string>>& tunes, std::string* error) {
  for (const ScenarioFileAst& f : prog.files)
    for (const TestCase& tc : f.tests) {
      if (tc.name != test) continue;
      if (!race_block_of(tc)) {
        *error = fmt::format("{}:{}: test {} has no race block", f.path, tc.line, test);
        return nullptr;
      }
      return std::make_unique<RaceRig>(opt, tunes, f, tc);
    }
  *error = fmt::format("no test named '{}'", test);
  return nullptr;
}

namespace {

std::string stats_line(const explore::ExploreResult& r) {
  const uint64_t n = std::max(r.runs, 1);
  return fmt::format("explored {} runs, points {}/{}/{} (min/mean/max; unfiltered k {}), sites preempted {}/{}", r.runs,
                     r.points_min, r.points_sum / n, r.points_max, r.k_unfiltered, r.preempted_sites.size(), r.sites.size()) +
         (r.exhausted ? fmt::format(", exhausted {} schedules", r.schedules) : "");
}

}  // namespace

ScenarioResult run_race_test(const ScenarioOptions& opt, TuneList tunes, const ScenarioFileAst& file, const TestCase& tc) {
  if (!explore::available()) {
    ScenarioResult res;
    res.file = file.path;
    res.name = tc.name;
    res.outcome = Outcome::kSkip;
    res.reason = explore::unavailable_reason();
    return res;
  }
  RaceRig rig(opt, std::move(tunes), file, tc);
  const stmt::RaceBlock& b = *rig.block();
  explore::RaceHooks h = rig.hooks();
  explore::RunResult found;
  bool any = false;
  std::string what;
  explore::ExploreResult ex;
  if (b.mode == stmt::RaceBlock::Mode::kSchedule) {
    const bool line = b.schedule.rfind("mmlab-schedule", 0) == 0 || explore::decode_schedule(b.schedule);
    found = line ? explore::replay(h, b.schedule) : explore::replay_directed(h, b.schedule);
    any = found.outcome != explore::Outcome::kClean;
    what = line ? "the schedule" : "directed \"" + b.schedule + "\"";
  } else {
    explore::Options o;
    if (b.mode == stmt::RaceBlock::Mode::kDfs)
      o.strategy = explore::Dfs{.bound = b.bound, .max_runs = b.runs ? static_cast<uint64_t>(b.runs) : 1'000'000, .filter = b.filter};
    else
      o.strategy = explore::Pct{.depth = b.depth, .runs = b.runs ? b.runs : 1000, .seed = b.seed, .filter = b.filter};
    ex = explore::explore(h, o);
    any = ex.found;
    found = ex.failure;
  }
  ScenarioResult res = rig.last();
  res.file = file.path;
  res.name = tc.name;
  res.diagnostics.clear();
  res.violations.clear();
  if (res.outcome == Outcome::kSkip || res.outcome == Outcome::kError) return res;
  const std::string where = fmt::format("{}:{}", file.path, b.line);
  const std::string run_no = b.mode == stmt::RaceBlock::Mode::kSchedule ? what : fmt::format("run {} ({})", ex.runs, found.how);
  if (b.mode != stmt::RaceBlock::Mode::kSchedule) res.output.push_back(stats_line(ex));
  const bool violation = any && found.outcome == explore::Outcome::kViolation;
  if (rig.expect_violation()) {
    if (violation && !rig.unexpected()) {
      res.outcome = Outcome::kPass;
      res.output.push_back(fmt::format("found in {}: {}", run_no, found.detail.substr(0, found.detail.find('\n'))));
      res.output.push_back("replay " + found.line);
      return res;
    }
    res.outcome = Outcome::kFail;
    if (any) {
      res.diagnostics.push_back(fmt::format("{}: {} in {}: {}", where, explore::outcome_name(found.outcome), run_no, found.detail));
      if (found.outcome != explore::Outcome::kDiverged) res.diagnostics.push_back("replay " + found.line);
    } else {
      res.diagnostics.push_back(fmt::format("{}: expected a violation; none in {}", where,
                                            b.mode == stmt::RaceBlock::Mode::kSchedule ? what : fmt::format("{} runs", ex.runs)));
    }
    return res;
  }
  if (!any) {
    res.outcome = Outcome::kPass;
    return res;
  }
  res.outcome = Outcome::kFail;
  res.diagnostics.push_back(fmt::format("{}: {} in {}: {}", where, explore::outcome_name(found.outcome), run_no, found.detail));
  // A replay that diverged has no run of its own to replay.
  if (found.outcome != explore::Outcome::kDiverged) res.diagnostics.push_back("replay " + found.line);
  return res;
}

}  // namespace mmlab
