// The model backend: each test on a fresh System, every statement through
// the model's real mechanisms (System, Process, the GUP entry points).
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
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

class ModelRun final : public TestRun {
 public:
  ModelRun(const ScenarioOptions& opt, TuneList tunes) : TestRun(opt), tunes_(std::move(tunes)) {}

  // The end state after a statement, one canonical line per fact: every
  // present entry (frame class, whether it is the frame mapped there before,
  // its bits, its folio's counts and flags), rss, vmstat and mTHP statistics.
  std::vector<std::string> snapshot() override {
    std::vector<std::string> out;
    std::map<std::string, uint64_t> now;
    for (auto& [pname, proc] : procs_) {
      if (proc->exited()) {
        out.push_back(pname + " exited");
        continue;
      }
      out.push_back(fmt::format("{} rss anon={} file={} shmem={}", pname, proc->rss_anon(), proc->rss_file(), proc->rss_shmem()));
      for (auto& e : proc->pagetable_dump()) {
        uint64_t leaf = e.level == 3 ? PUD_SIZE : e.level == 2 ? PMD_SIZE : PAGE_SIZE;
        for (uint64_t a = e.addr; a < e.addr + leaf; a += (e.level == 1 ? PAGE_SIZE : leaf)) {
          PageInfo pi = proc->page_info(a);
          std::string key = fmt::format("{} {:#x}", pname, a);
          now[key] = pi.pfn;
          auto it = prev_.find(key);
          const char* same = it == prev_.end() ? "new" : it->second == pi.pfn ? "same-frame" : "other-frame";
          if (e.swap) {
            out.push_back(fmt::format("{} swap {}", key, (e.bits & (1ull << 3)) ? "exclusive" : ""));
            continue;
          }
          const char* cls = pi.zero ? "zero" : pi.anon ? "anon" : "file";
          out.push_back(fmt::format(
              "{} {} {} {} w={} d={} y={} sd={} uw={} | folio order={} ref={} map={} pin={} excl={} lru={} ref'd={} active={} dirty={}",
              key, e.level == 1 ? "pte" : e.level == 2 ? "pmd" : "pud", cls, same, pi.writable, pi.dirty, pi.young,
              pi.soft_dirty, pi.uffd_wp, pi.order, pi.refcount, pi.mapcount, pi.pincount, pi.anon_exclusive, pi.lru,
              pi.referenced, pi.active, pi.folio_dirty));
        }
      }
    }
    prev_ = std::move(now);
    std::istringstream vm(sys_->vmstat_text());
    for (std::string l; std::getline(vm, l);) out.push_back("vmstat " + l);
    for (unsigned o = 2; o <= 9; o++)
      for (const char* item : {"anon_fault_alloc", "anon_fault_fallback", "split", "split_deferred", "nr_anon",
                               "nr_anon_partially_mapped", "swpout", "swpin", "wp_fault_alloc", "wp_fault_fallback",
                               "wp_fault_fallback_charge"})
        out.push_back(fmt::format("mthp order{} {} {}", o, item, sys_->mthp_stat(o, item)));
    return out;
  }
  std::map<std::string, int64_t> counters() override {
    std::map<std::string, int64_t> c;
    for (const char* n : {"gup.descents", "gup.pte_lock", "gup.pmd_lock", "gup.grab", "gup.mark_accessed", "gup.cache_flush",
                          "gup.fast_speculative", "gup.fast_fallback", "fault.anon", "fault.wp_copy", "fault.wp_reuse",
                          "fault.unshare", "bytes.copied", "cow.reuse_pages"})
      c[n] = sys_->counter(n);
    for (const std::string& n : counter_names())
      if (n.rfind("cow.", 0) == 0) c[n] = sys_->counter(n);
    return c;
  }

 private:
  void start(const std::vector<const Stmt*>&) override {
    SystemConfig cfg;
    cfg.ram_bytes = opt_.ram_bytes;
    int err = 0;
    sys_ = System::create(cfg, &err);
    if (!sys_) throw StartError{fmt::format("cannot create a system: {}", errno_name(err))};
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
  void exec(const Stmt& st) override {
    switch (st.op) {
      case Op::kSysfs: {
        int r = sys_->sysfs_write(st.str, st.str2);
        check_errno(st, r, "sysfs write");
        break;
      }
      case Op::kTune: check_errno(st, sys_->tune(st.str, st.str2), "tune"); break;
      case Op::kProc: {
        bind(st, st.p, 'p');
        Process* p = sys_->new_process(st.p);
        if (!p) fail(st, "cannot create the process");
        procs_[st.p] = p;
        break;
      }
      case Op::kFork: {
        bind(st, st.q, 'p');
        Process* c = proc(st, st.p)->fork(st.q);
        check_errno(st, c ? 0 : -ENOMEM, "fork");
        if (c) procs_[st.q] = c;
        break;
      }
      case Op::kExit: proc(st, st.p)->exit(); break;
      case Op::kFile: {
        bind(st, st.name, 'f');
        FsClass fs;
        fs_class_from_name(st.fs, &fs);
        if (st.hugetlb_shift) fs = FsClass::kHugetlbfs;
        int fd = sys_->create_file(st.size, fs, st.hugetlb_shift, st.name);
        check_errno(st, fd, "file");
        if (fd >= 0) files_[st.name] = fd;
        break;
      }
      case Op::kSwap: check_errno(st, sys_->add_swap(st.size, st.str == "file" ? SwapKind::kFile : SwapKind::kBlkdev), "swap"); break;
      case Op::kMmap: exec_mmap(st); break;
      case Op::kMunmap: check_errno(st, proc(st, st.p)->munmap(addr(st, st.addr), st.size), "munmap"); break;
      case Op::kMprotect: check_errno(st, proc(st, st.p)->mprotect(addr(st, st.addr), st.size, st.prot), "mprotect"); break;
      case Op::kMadvise: {
        int r = proc(st, st.p)->madvise(addr(st, st.addr), st.size, st.advice);
        // The model's answer for a file or shmem range: collapse_file() is not modelled.
        if (st.advice == MADV_COLLAPSE && r == -ENOSYS) throw SkipTest{"file/shmem collapse not modelled"};
        check_errno(st, r, ("madvise " + st.str).c_str());
        break;
      }
      case Op::kMremap: {
        int flags = MREMAP_MAYMOVE | (st.has_to ? MREMAP_FIXED : 0);
        long r = proc(st, st.p)->mremap(addr(st, st.addr), st.size, st.size2, flags, st.has_to ? addr(st, st.addr2) : 0);
        check_errno(st, r, "mremap");
        bind(st, st.name, 'r');
        if (r >= 0) regions_[st.name] = static_cast<uint64_t>(r);
        break;
      }
      case Op::kClearSoftDirty: proc(st, st.p)->clear_soft_dirty(); break;
      case Op::kKhugepaged: check_errno(st, sys_->run_khugepaged(static_cast<unsigned>(st.n)), "khugepaged"); break;
      case Op::kAdvance: check_errno(st, sys_->advance_clock(st.n), "advance"); break;
      case Op::kThpDisable:
        check_errno(st,
                    proc(st, st.p)->prctl_set_thp_disable(st.flag, st.str.empty() ? 0 : Process::PR_THP_DISABLE_EXCEPT_ADVISED),
                    "thp-disable");
        break;
      case Op::kUffdRegister: {
        unsigned modes = ((st.n & 1) ? Process::kUffdMissing : 0) | ((st.n & 2) ? Process::kUffdWp : 0);
        check_errno(st, proc(st, st.p)->uffd_register(addr(st, st.addr), st.size, modes), "userfaultfd");
        break;
      }
      case Op::kUffdWp: check_errno(st, proc(st, st.p)->uffd_writeprotect(addr(st, st.addr), st.size, st.flag), "uffd-wp"); break;
      case Op::kCountersReset: sys_->reset_counters(); break;
      case Op::kWrite: check_access(st, proc(st, st.p)->fill(addr(st, st.addr), static_cast<uint8_t>(st.byte), st.size), "write"); break;
      case Op::kRead: exec_read(st); break;
      case Op::kGup: {
        bind(st, st.name, 'h');
        // The caller's pages array (one pointer per page, as gup_test's
        // kvcalloc) must be one the kernel could allocate: kvmalloc refuses
        // more than INT_MAX bytes, and it must fit the simulated RAM.
        // Checked before the model allocates it on the host.
        if (const uint64_t limit = std::min<uint64_t>(INT_MAX, opt_.ram_bytes); st.n * sizeof(void*) > limit)
          fail(st, fmt::format("NPAGES {}: a pages array of {} bytes is larger than a caller could allocate ({} bytes: "
                               "kvmalloc's INT_MAX limit or the simulated RAM, whichever is less)",
                               st.n, st.n * sizeof(void*), limit));
        Handle& h = handles_[st.name];
        h.ret = gup(proc(st, st.p), static_cast<GupEntry>(st.gup_entry), addr(st, st.addr), static_cast<long>(st.n),
                    st.gup_flags, &h.pages);
        break;
      }
      case Op::kHandleWrite:
      case Op::kHandleRead: exec_handle_io(st); break;
      case Op::kUnpin: handle(st, st.name).pages.release(st.flag); break;
      case Op::kDump: {
        bind(st, st.name, 'd');
        DumpResult d;
        dump_range(proc(st, st.p), addr(st, st.addr), st.size, &d.pages, &d.holes);
        dumps_[st.name] = d;
        break;
      }
      case Op::kCheck: {
        std::map<uint64_t, long> refs;  // what the handles hold is not a leak
        for (auto& [n, h] : handles_) h.pages.add_refs(&refs);
        CheckReport r = sys_->check_with_refs(refs);
        if (!r.ok())
          violation(st, fmt::format("invariant checker: {} at {}{}", r.violations.front().invariant,
                                    r.violations.front().where,
                                    r.violations.size() > 1 ? fmt::format(" (and {} more)", r.violations.size() - 1) : ""));
        break;
      }
      case Op::kExpectViolation: expect_violation(st); break;
      case Op::kSkip:
      case Op::kXfail: exec_outcome_stmt(st); break;
      default: exec_expect(st); break;
    }
  }

  void exec_mmap(const Stmt& st) {
    Process* p = proc(st, st.p);
    bind(st, st.name, 'r');
    int prot = st.prot;
    int flags = st.flag ? MAP_SHARED : MAP_PRIVATE;
    uint64_t slack = st.align > PAGE_SIZE ? st.align : 0;
    long r;
    int fd = -1;
    if (!st.file_ref.empty()) {
      auto it = files_.find(st.file_ref);
      if (it == files_.end()) fail(st, fmt::format("no file named {}", st.file_ref));
      fd = it->second;
    }
    auto do_map = [&](uint64_t len) {
      if (fd >= 0) return p->mmap_file(0, len, prot, flags, fd, st.file_off);
      int f = flags | MAP_ANONYMOUS;
      if (st.hugetlb_shift) f |= MAP_HUGETLB | (st.hugetlb_shift == 30 ? MAP_HUGE_1GB : MAP_HUGE_2MB);
      return p->mmap(0, len, prot, f);
    };
    if (!slack || fd >= 0 || st.hugetlb_shift) {
      r = do_map(st.size);
      if (r >= 0 && slack && (static_cast<uint64_t>(r) & (st.align - 1))) {
        // A file mapping cannot be over-allocated and trimmed here: place it by hand.
        p->munmap(static_cast<uint64_t>(r), st.size);
        long probe = p->mmap(0, st.size + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS);
        check_errno(st, probe, "mmap");
        uint64_t aligned = round_up(static_cast<uint64_t>(probe), st.align);
        p->munmap(static_cast<uint64_t>(probe), st.size + slack);
        r = fd >= 0 ? p->mmap_file(aligned, st.size, prot, flags | MAP_FIXED, fd, st.file_off)
                    : p->mmap(aligned, st.size, prot, flags | MAP_ANONYMOUS | MAP_FIXED);
      }
    } else {
      // As a selftest does: over-allocate, keep the aligned part, trim the rest.
      r = do_map(st.size + slack);
      if (r >= 0) {
        uint64_t start = round_up(static_cast<uint64_t>(r), st.align);
        if (start > static_cast<uint64_t>(r)) p->munmap(static_cast<uint64_t>(r), start - static_cast<uint64_t>(r));
        uint64_t tail = static_cast<uint64_t>(r) + st.size + slack - (start + st.size);
        if (tail) p->munmap(start + st.size, tail);
        r = static_cast<long>(start);
      }
    }
    check_errno(st, r, "mmap");
    if (r >= 0) regions_[st.name] = static_cast<uint64_t>(r);
  }

  void exec_read(const Stmt& st) {
    Process* p = proc(st, st.p);
    uint64_t a = addr(st, st.addr);
    if (st.byte < 0) {
      std::vector<uint8_t> buf(st.size);
      check_access(st, p->read(a, buf.data(), st.size), "read");
      return;
    }
    int64_t bad = -1;
    uint8_t found = 0;
    AccessResult r = p->read_expect(a, static_cast<uint8_t>(st.byte), st.size, &bad, &found);
    check_access(st, r, "read");
    expect_bytes(st, bad, found);
  }

  void exec_handle_io(const Stmt& st) {
    Handle& h = handle(st, st.p);
    if (st.op == Op::kHandleWrite) {
      check_errno(st, h.pages.fill(st.size2, static_cast<uint8_t>(st.byte), st.size), "write through the handle");
      return;
    }
    int64_t bad = -1;
    uint8_t found = 0;
    int r = h.pages.read_expect(st.size2, static_cast<uint8_t>(st.byte), st.size, &bad, &found);
    check_errno(st, r, "read through the handle");
    expect_handle_mismatch(st, bad, found);
  }

  void exec_expect(const Stmt& st) {
    switch (st.op) {
      case Op::kExpectHandle: expect_handle_ret(st, handle(st, st.p).ret); break;
      case Op::kExpectDump: {
        auto it = dumps_.find(st.p);
        if (it == dumps_.end()) fail(st, fmt::format("no dump named {}", st.p));
        if (it->second.pages != static_cast<long>(st.n) || it->second.holes != static_cast<long>(st.size2))
          fail(st, fmt::format("expected {} pages {} holes {}, found pages {} holes {}", st.p, st.n, st.size2, it->second.pages, it->second.holes));
        break;
      }
      case Op::kExpectRss: {
        Process* p = proc(st, st.p);
        long v = st.str == "anon" ? p->rss_anon() : st.str == "file" ? p->rss_file() : p->rss_shmem();
        expect_rss(st, static_cast<uint64_t>(v));
        break;
      }
      case Op::kExpectSysfs: {
        std::string v;
        int r = sys_->sysfs_read(st.str, &v);
        if (r) fail(st, fmt::format("sysfs {}: {}", st.str, errno_name(r)));
        char* end = nullptr;
        int64_t n = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end) fail(st, fmt::format("expected sysfs {} == {}, found {}", st.str, st.value, v));
        expect_number(st, "sysfs " + st.str, n);
        break;
      }
      case Op::kExpectVmstat:
      case Op::kExpectCounter: {
        int64_t v = st.op == Op::kExpectVmstat ? sys_->vmstat(st.str) : sys_->counter(st.str);
        if (v < 0) fail(st, fmt::format("no {} named {}", st.op == Op::kExpectVmstat ? "vmstat item" : "counter", st.str));
        expect_number(st, (st.op == Op::kExpectVmstat ? "vmstat " : "counter ") + st.str, v);
        break;
      }
      default: exec_expect_page(st); break;
    }
  }

  void exec_expect_page(const Stmt& st) {
    Process* p = proc(st, st.p);
    uint64_t a = addr(st, st.addr);
    PageInfo pi = p->page_info(a);
    switch (st.op) {
      case Op::kExpectMapped: {
        static const char* lv[] = {"none", "pte", "pmd", "pud"};
        expect_mapped(st, lv[pi.level]);
        break;
      }
      case Op::kExpectOrder: expect_order(st, pi.level, pi.order); break;
      case Op::kExpectExclusive: expect_yes_no(st, "exclusive", true, pi.level, pi.anon_exclusive); break;
      case Op::kExpectPinned: expect_yes_no(st, "pinned", false, pi.level, pi.maybe_pinned); break;
      case Op::kExpectZero: expect_yes_no(st, "zero", false, pi.level, pi.level && pi.zero); break;
      case Op::kExpectSwapped: expect_yes_no(st, "swapped", false, pi.level, pi.swap); break;
      case Op::kExpectSoftDirty: expect_yes_no(st, "soft-dirty", true, pi.level, pi.soft_dirty); break;
      case Op::kExpectUffdWp: expect_yes_no(st, "uffd-wp", true, pi.level, pi.uffd_wp); break;
      case Op::kExpectSame: {
        PageInfo other = proc(st, st.q)->page_info(addr(st, st.addr2));
        expect_same(st, pi.level && other.level && pi.pfn == other.pfn);
        break;
      }
      default: fail(st, "unknown expectation");
    }
  }

  TuneList tunes_;
  std::unique_ptr<System> sys_;
  std::map<std::string, Process*> procs_;
  std::map<std::string, Handle> handles_;
  std::map<std::string, DumpResult> dumps_;
  std::map<std::string, int> files_;
  std::map<std::string, uint64_t> prev_;  // snapshot(): the frame each address mapped last time
  size_t warnings_seen_ = 0;              // System::warnings() already reported
};

}  // namespace

std::unique_ptr<TestRun> make_model_run(const ScenarioOptions& opt, TuneList tunes) {
  return std::make_unique<ModelRun>(opt, std::move(tunes));
}

}  // namespace mmlab
