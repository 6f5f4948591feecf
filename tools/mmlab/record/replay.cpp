// The replay of a recorded trace on the model (replay.h). One host thread
// runs the records in the trace's order; the trace's tasks become the
// model's processes (a task that shares its parent's mm shares the Process).
#include "record/replay.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <unordered_map>

#include "fmt/format.h"
#include "mmlab/check.h"
#include "record/replay_ranges.h"

namespace mmlab::record {
namespace {

constexpr uint64_t kStackLimit = 8ull << 20;  // RLIMIT_STACK's usual soft limit
constexpr uint64_t kStackSlackAbove = 1ull << 20;
constexpr size_t kDivergencesKept = 10;
constexpr uint8_t kWriteByte = 0x5a;
constexpr uint64_t kTlbEvery = 1024;  // records between readings of the TLBs' reach
constexpr uint64_t kMaxRam = 32ull << 30;  // simulated RAM is touched lazily; its memmap is not free

bool syscall_failed(int64_t ret) { return ret < 0 && ret > -4096; }

// One address space of the recording.
struct ReplayMm {
  Process* proc = nullptr;
  size_t report = 0;  // index into ReplayResult::mms
  int users = 0;      // tasks on it
  RangeMap ranges;
  uint64_t brk_start = 0, brk = 0;
  uint64_t stack_lo = 0, stack_hi = 0;  // the stack the faults have shown so far
  bool thp_disabled = false;
  uint64_t last_page = ~0ull;  // the page of the mm's last traced fault, and its task
  uint32_t last_tid = 0;
  long traced_file = 0, traced_shmem = 0;  // rss_stat's latest file and shmem readings
};

long private_dirty_bytes(const Process* p) {
  std::istringstream in(p->smaps());
  long kb = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Private_Dirty:", 0) == 0) kb += std::strtol(line.c_str() + 14, nullptr, 10);
  return kb * 1024;
}

class Replayer {
 public:
  Replayer(const Trace& t, const ReplayOptions& o, System* sys, ReplayResult* r)
      : t_(t), o_(o), sys_(sys), r_(r), fds_(t.files.size(), -1), exec_pages_(exec_stack_pages(t)) {}

  void run();

 private:
  void step(const Record& rec);
  ReplayMm& mm_of(uint32_t tid);
  ReplayMm& new_mm(uint32_t tid, Process* p);
  void detach(uint32_t tid);
  void finish(ReplayMm& m);
  void on_fork(const Record& rec);
  void on_exec(const Record& rec);
  void populate_exec_stack(ReplayMm& m);
  void on_map(const Record& rec);
  void on_brk(const Record& rec);
  void on_mremap(const Record& rec);
  void on_range_call(const Record& rec);
  void on_fault(const Record& rec);
  void on_rss(const Record& rec);
  bool place_unknown(ReplayMm& m, uint64_t page);
  void sample(ReplayMm& m, bool pss);
  void sample_tlb() { r_->tlb_l2_reach_peak = std::max(r_->tlb_l2_reach_peak, sys_->tlb_occupancy().l2_bytes); }
  int file_fd(int32_t file);
  void diverged(const Record& rec, long got);
  std::string comm(uint32_t tid) const;

  const Trace& t_;
  const ReplayOptions& o_;
  System* sys_;
  ReplayResult* r_;
  std::vector<int> fds_;
  std::unordered_map<uint32_t, ReplayMm*> tasks_;
  std::vector<std::unique_ptr<ReplayMm>> mms_;
  uint16_t cpu_ = 0xffff;  // the simulated CPU the replay runs on
  std::unordered_map<size_t, std::vector<uint64_t>> exec_pages_;
  size_t index_ = 0;  // the record being replayed
  KernelRepeats repeats_;
  // An exec whose stack pages wait for its layout (the records after it).
  ReplayMm* pending_exec_ = nullptr;
  size_t pending_index_ = 0;
};

std::string Replayer::comm(uint32_t tid) const {
  auto it = t_.comm.find(tid);
  return it != t_.comm.end() ? it->second : fmt::format("task{}", tid);
}

ReplayMm& Replayer::new_mm(uint32_t tid, Process* p) {
  auto m = std::make_unique<ReplayMm>();
  m->proc = p;
  m->users = 1;
  m->report = r_->mms.size();
  r_->mms.push_back(MmReport{.tid = tid, .comm = comm(tid)});
  mms_.push_back(std::move(m));
  tasks_[tid] = mms_.back().get();
  return *mms_.back();
}

// A task the trace never showed being made (attached with -p, or the
// launcher's first task before its exec) gets an empty address space.
ReplayMm& Replayer::mm_of(uint32_t tid) {
  auto it = tasks_.find(tid);
  if (it != tasks_.end()) return *it->second;
  return new_mm(tid, sys_->new_process(comm(tid)));
}

void Replayer::finish(ReplayMm& m) {
  sample(m, true);
  MmReport& rep = r_->mms[m.report];
  rep.rss_anon_at_exit = m.proc->rss_anon();
  rep.pss_at_exit = m.proc->pss();
  rep.private_dirty_at_exit = private_dirty_bytes(m.proc);
  rep.min_flt = m.proc->min_flt();
  rep.maj_flt = m.proc->maj_flt();
  r_->model_faults_by_tasks += rep.min_flt + rep.maj_flt;
  m.proc->exit();
  m.proc = nullptr;
}

void Replayer::detach(uint32_t tid) {
  auto it = tasks_.find(tid);
  if (it == tasks_.end()) return;
  ReplayMm& m = *it->second;
  tasks_.erase(it);
  if (--m.users == 0) finish(m);
}

void Replayer::on_fork(const Record& rec) {
  ReplayMm& parent = mm_of(static_cast<uint32_t>(rec.a));
  detach(rec.tid);  // a recycled tid
  if (rec.b & kCloneVm) {  // a thread, or a vfork child until it execs
    parent.users++;
    tasks_[rec.tid] = &parent;
    return;
  }
  int err = 0;
  Process* child = parent.proc->fork(comm(rec.tid), &err);
  if (!child) {
    diverged(rec, err);
    return;
  }
  ReplayMm& m = new_mm(rec.tid, child);
  m.ranges = parent.ranges;
  m.brk_start = parent.brk_start;
  m.brk = parent.brk;
  m.stack_lo = parent.stack_lo;
  m.stack_hi = parent.stack_hi;
  m.thp_disabled = parent.thp_disabled;
}

// The new image's mm inherits the THP-disable flag (MMF_INIT_MASK).
void Replayer::on_exec(const Record& rec) {
  bool thp_disabled = false;
  if (auto it = tasks_.find(rec.tid); it != tasks_.end()) thp_disabled = it->second->thp_disabled;
  detach(rec.tid);
  ReplayMm& m = new_mm(rec.tid, sys_->new_process(comm(rec.tid)));
  m.thp_disabled = thp_disabled;
  if (thp_disabled && o_.honour_thp_disable) (void)m.proc->prctl_set_thp_disable(true);
  pending_exec_ = &m;
  pending_index_ = index_;
}

// The pages exec wrote without a fault the trace saw (exec_stack_pages):
// written here, and their faults kept out of the comparisons.
void Replayer::populate_exec_stack(ReplayMm& m) {
  auto it = exec_pages_.find(pending_index_);
  if (it == exec_pages_.end()) return;
  for (uint64_t page : it->second) {
    if (!m.ranges.find(page) && !place_unknown(m, page)) continue;
    uint8_t b = kWriteByte;
    if (m.proc->write(page, &b, 1).ok()) r_->exec_populated++;
  }
}

int Replayer::file_fd(int32_t file) {
  int& fd = fds_[static_cast<size_t>(file)];
  if (fd >= 0) return fd;
  const FileEntry& f = t_.files[static_cast<size_t>(file)];
  const FsClass cls = f.cls == FileClass::kShmem ? FsClass::kShmem : FsClass::kExt4;
  fd = sys_->create_file(page_up(std::max<uint64_t>(f.size, kPage)), cls);
  return fd;
}

void Replayer::diverged(const Record& rec, long got) {
  r_->call_divergences++;
  if (r_->first_divergences.size() < kDivergencesKept)
    r_->first_divergences.push_back(fmt::format("{} -> model {}", dump_record(t_, rec), got));
}

// mmap and the exec-time layout: MAP_FIXED at the recorded address, which
// replaces what the kernel's own placement replaced.
void Replayer::on_map(const Record& rec) {
  if (rec.op == Op::kMmap && syscall_failed(rec.ret)) return;
  ReplayMm& m = mm_of(rec.tid);
  const uint64_t addr = rec.a, len = page_up(rec.b);
  int flags = (static_cast<int>(rec.d) & ~MAP_FIXED_NOREPLACE) | MAP_FIXED;
  long got;
  if (rec.file >= 0) {
    const int fd = file_fd(rec.file);
    got = fd < 0 ? fd
                 : m.proc->mmap_file(addr, len, static_cast<int>(rec.c), flags & ~MAP_ANONYMOUS, fd, rec.e);
  } else {
    got = m.proc->mmap(addr, len, static_cast<int>(rec.c), flags | MAP_ANONYMOUS);
  }
  if (got != static_cast<long>(addr)) return diverged(rec, got);
  const RangeKind kind = (flags & MAP_TYPE) != MAP_PRIVATE ? RangeKind::kShared
                         : rec.file < 0                    ? RangeKind::kAnonPrivate
                                                           : RangeKind::kFilePrivate;
  m.ranges.set(addr, addr + len, kind);
}

// brk: the heap grows and shrinks as an anonymous private mapping at the
// old break's page.
void Replayer::on_brk(const Record& rec) {
  ReplayMm& m = mm_of(rec.tid);
  const uint64_t now = page_up(rec.a);
  if (!m.brk_start) m.brk_start = m.brk = now;
  if (now > m.brk) {
    const long got = m.proc->mmap(m.brk, now - m.brk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED);
    if (got != static_cast<long>(m.brk)) return diverged(rec, got);
    m.ranges.set(m.brk, now, RangeKind::kAnonPrivate);
  } else if (now < m.brk && now >= m.brk_start) {
    if (int e = m.proc->munmap(now, m.brk - now)) return diverged(rec, e);
    m.ranges.clear(now, m.brk);
  }
  m.brk = std::max(now, m.brk_start);
}

void Replayer::on_mremap(const Record& rec) {
  if (syscall_failed(rec.ret)) return;
  ReplayMm& m = mm_of(rec.tid);
  const uint64_t to = static_cast<uint64_t>(rec.ret);
  const int flags = to == rec.a ? 0 : MREMAP_MAYMOVE | MREMAP_FIXED | (static_cast<int>(rec.d) & MREMAP_DONTUNMAP);
  const long got = m.proc->mremap(rec.a, rec.b, rec.c, flags, to);
  if (got != static_cast<long>(to)) return diverged(rec, got);
  m.ranges.move(rec.a, page_up(rec.b), to, page_up(rec.c), (flags & MREMAP_DONTUNMAP) != 0);
}

// The calls on a range that succeeded when recorded.
void Replayer::on_range_call(const Record& rec) {
  if (rec.ret < 0) return;
  ReplayMm& m = mm_of(rec.tid);
  Process* p = m.proc;
  long got = 0;
  switch (rec.op) {
    case Op::kMunmap:
      got = p->munmap(rec.a, rec.b);
      if (!got) m.ranges.clear(rec.a, rec.a + page_up(rec.b));
      break;
    case Op::kMprotect: got = p->mprotect(rec.a, rec.b, static_cast<int>(rec.c)); break;
    case Op::kMadvise: got = p->madvise(rec.a, rec.b, static_cast<int>(rec.c)); break;
    case Op::kMlock: got = p->mlock2(rec.a, rec.b, static_cast<int>(rec.c)); break;
    case Op::kMunlock: got = p->munlock(rec.a, rec.b); break;
    case Op::kMlockall: got = p->mlockall(static_cast<int>(rec.c)); break;
    case Op::kMseal: got = p->mseal(rec.a, rec.b); break;
    case Op::kPrctlThp:
      m.thp_disabled = rec.c != 0;
      if (o_.honour_thp_disable) got = p->prctl_set_thp_disable(rec.c != 0);
      break;
    default: return;
  }
  if (got < 0) diverged(rec, got);
}

// A fault outside every mapping the trace showed: the stack (which the
// kernel grows on a fault below it, and whose first pages exec made), or
// something the recording could not see. Either way the page gets an
// anonymous mapping so that the access can be replayed.
bool Replayer::place_unknown(ReplayMm& m, uint64_t page) {
  const bool near_stack = m.stack_hi && page + kStackLimit >= m.stack_lo && page < m.stack_hi + kStackSlackAbove;
  uint64_t lo = page, hi = page + kPage;
  if (near_stack) {
    lo = std::min(page, m.stack_lo);
    hi = std::max(page + kPage, m.stack_hi);
  } else if (!m.stack_hi) {
    m.stack_lo = page, m.stack_hi = page + kPage;
  } else {
    r_->unknown_addresses++;
  }
  // Only the part no mapping covers yet.
  for (uint64_t a = lo; a < hi; a += kPage) {
    if (m.ranges.find(a)) continue;
    uint64_t e = a + kPage;
    while (e < hi && !m.ranges.find(e)) e += kPage;
    if (m.proc->mmap(a, e - a, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED) != static_cast<long>(a))
      return false;
    m.ranges.set(a, e, RangeKind::kAnonPrivate);
    if (near_stack) r_->stack_pages_grown += static_cast<int64_t>((e - a) / kPage);
    a = e - kPage;
  }
  if (near_stack) m.stack_lo = lo, m.stack_hi = hi;
  return true;
}

void Replayer::sample(ReplayMm& m, bool pss) {
  MmReport& rep = r_->mms[m.report];
  rep.peak_rss_anon = std::max(rep.peak_rss_anon, m.proc->rss_anon());
  rep.peak_rss_file = std::max(rep.peak_rss_file, m.proc->rss_file() + m.proc->rss_shmem());
  if (pss) rep.peak_pss = std::max(rep.peak_pss, m.proc->pss());
}

void Replayer::on_fault(const Record& rec) {
  ReplayMm& m = mm_of(rec.tid);
  const uint64_t page = page_down(rec.a);
  TracedFaults& tr = r_->traced;
  tr.total++;
  r_->mms[m.report].faults_traced++;
  if (rec.flags & kFaultKernel) tr.kernel++;
  if (repeats_.repeat(rec)) tr.kernel_repeats++;
  const Range* rg = m.ranges.find(page);
  if (!rg && !place_unknown(m, page)) {
    r_->sigsegv++;
    return;
  }
  rg = m.ranges.find(page);
  const bool present = rec.flags & kFaultPresent, write = rec.flags & kFaultWrite;
  int64_t* cls = rg->kind == RangeKind::kAnonPrivate && !present              ? &tr.anon_first_touch
                 : rg->kind != RangeKind::kShared && present && write ? &tr.private_present_write
                                                                      : &tr.other;
  ++*cls;
  uint8_t b = kWriteByte;
  const uint64_t before = m.proc->min_flt() + m.proc->maj_flt();
  const AccessResult ar = (rec.flags & kFaultWrite) ? m.proc->write(page, &b, 1) : m.proc->read(page, &b, 1);
  if (ar.sig == Signal::kSigbus) r_->sigbus++;
  else if (!ar.ok()) r_->sigsegv++;
  const bool took = m.proc->min_flt() + m.proc->maj_flt() != before;
  if (!took && m.last_page == page && m.last_tid != rec.tid) {
    --*cls;  // counted apart, in no class
    tr.concurrent_noops++;
  }
  m.last_page = page;
  m.last_tid = rec.tid;
  sample(m, false);
}

// rss_stat's members (0 file, 1 anon, 2 swap, 3 shmem), in bytes: the
// anonymous peak, and the file and shmem pages' peak as one sum.
void Replayer::on_rss(const Record& rec) {
  ReplayMm& m = mm_of(rec.tid);
  MmReport& rep = r_->mms[m.report];
  if (rec.c == 1) rep.traced_peak_rss_anon = std::max(rep.traced_peak_rss_anon, static_cast<long>(rec.a));
  if (rec.c == 0) m.traced_file = static_cast<long>(rec.a);
  if (rec.c == 3) m.traced_shmem = static_cast<long>(rec.a);
  if (rec.c == 0 || rec.c == 3) rep.traced_peak_rss_file = std::max(rep.traced_peak_rss_file, m.traced_file + m.traced_shmem);
}

void Replayer::step(const Record& rec) {
  if (pending_exec_ && rec.op != Op::kLayout) {
    if (pending_exec_->proc) populate_exec_stack(*pending_exec_);
    pending_exec_ = nullptr;
  }
  switch (rec.op) {
    case Op::kFault: return on_fault(rec);
    case Op::kFork: return on_fork(rec);
    case Op::kExec: return on_exec(rec);
    case Op::kExit: return detach(rec.tid);
    case Op::kMmap:
    case Op::kLayout: return on_map(rec);
    case Op::kBrk: return on_brk(rec);
    case Op::kMremap: return on_mremap(rec);
    case Op::kRss: return on_rss(rec);
    default: return on_range_call(rec);
  }
}

void Replayer::run() {
  uint64_t last_t = t_.records.empty() ? 0 : t_.records.front().t_ns;
  const uint64_t n = o_.max_records ? std::min<uint64_t>(o_.max_records, t_.records.size()) : t_.records.size();
  for (uint64_t i = 0; i < n; i++) {
    const Record& rec = t_.records[i];
    // The recorded gaps move the virtual clock, so that khugepaged wakes as
    // often as it did; records a misordered timestamp put earlier do not
    // move it back.
    if (rec.t_ns > last_t) {
      (void)sys_->advance_clock(rec.t_ns - last_t);
      last_t = rec.t_ns;
    }
    index_ = i;
    if (rec.cpu != cpu_) cpu_ = static_cast<uint16_t>(System::migrate_this_thread(rec.cpu));
    step(rec);
    if (o_.pss_every && (i + 1) % o_.pss_every == 0)
      for (auto& m : mms_)
        if (m->proc) sample(*m, true);
    if (o_.sample_tlb && (i + 1) % kTlbEvery == 0) sample_tlb();
  }
  r_->records = n;
  if (o_.sample_tlb) sample_tlb();
  for (auto& m : mms_)
    if (m->proc) {
      m->users = 0;
      finish(*m);
    }
  r_->model_faults_by_tasks -= r_->exec_populated;
}

int apply_recorded_settings(System* s, const HostProfile& h, std::string* err) {
  if (int e = s->tune("mm.zero_page", h.zero_page ? "on" : "off"); e < 0) {
    *err = fmt::format("tune mm.zero_page: error {}", e);
    return -1;
  }
  // Only the files the model has; the rest (khugepaged's counters, files
  // of later kernels) are the host's alone.
  for (const auto& [path, value] : h.thp) {
    std::string v = value;
    const size_t open = v.find('['), close = v.find(']');
    if (open != std::string::npos && close != std::string::npos && close > open) v = v.substr(open + 1, close - open - 1);
    (void)s->sysfs_write("transparent_hugepage/" + path, v);
  }
  return 0;
}

}  // namespace

namespace {

// The most bytes the live address spaces map at once: a child made by fork
// may write (and so copy) all its parent maps.
uint64_t peak_live_mapped(const Trace& t) {
  constexpr uint64_t kCap = 1ull << 40;  // a reservation of address space counts no more than this
  std::unordered_map<uint32_t, size_t> mm_of;
  std::vector<uint64_t> mapped;
  std::vector<int> users;
  uint64_t live = 0, peak = 0;
  auto mm = [&](uint32_t tid) -> size_t {
    auto it = mm_of.find(tid);
    if (it != mm_of.end()) return it->second;
    mapped.push_back(0), users.push_back(1);
    return mm_of[tid] = mapped.size() - 1;
  };
  auto drop = [&](uint32_t tid) {
    auto it = mm_of.find(tid);
    if (it == mm_of.end()) return;
    if (--users[it->second] == 0) live -= mapped[it->second];
    mm_of.erase(it);
  };
  auto grow = [&](uint32_t tid, uint64_t by) {
    by = std::min(by, kCap);
    mapped[mm(tid)] += by;
    live += by;
    peak = std::max(peak, live);
  };
  for (const Record& r : t.records) {
    if (r.op == Op::kFork) {
      const size_t parent = mm(static_cast<uint32_t>(r.a));
      drop(r.tid);
      if (r.b & kCloneVm) {
        users[parent]++;
        mm_of[r.tid] = parent;
      } else {
        mm(r.tid);
        grow(r.tid, mapped[parent]);
      }
    } else if (r.op == Op::kExec) {
      drop(r.tid);
      mm(r.tid);
    } else if (r.op == Op::kExit) {
      drop(r.tid);
    } else if (r.op == Op::kMmap || r.op == Op::kLayout) {
      grow(r.tid, r.b);
    } else if (r.op == Op::kMremap && r.c > r.b) {
      grow(r.tid, r.c - r.b);
    } else if (r.op == Op::kBrk && r.a > r.b) {
      grow(r.tid, r.a - r.b);
    }
  }
  return peak;
}

}  // namespace

uint64_t replay_ram_bytes(const Trace& t) {
  uint64_t faults = 0, files = 0;
  for (const Record& r : t.records) faults += r.op == Op::kFault;
  for (const FileEntry& f : t.files) files += std::min<uint64_t>(f.size, 1ull << 40);
  // A fault allocates one folio of at most 2M; no more than is mapped.
  const uint64_t anon = std::min<uint64_t>(peak_live_mapped(t), faults * (2ull << 20));
  const uint64_t need = std::min<uint64_t>(anon + anon / 8 + files + (256ull << 20), kMaxRam);
  return (need + (4ull << 20) - 1) & ~((4ull << 20) - 1);
}

int64_t bytes_written_after_sharing(const Trace& t, std::string* err) {
  ReplayOptions o;
  o.pss_every = 0;
  o.configure = [](System* s, std::string*) {
    (void)s->sysfs_write("transparent_hugepage/enabled", "never");
    for (unsigned kb = 16; kb <= 2048; kb *= 2)
      (void)s->sysfs_write(fmt::format("transparent_hugepage/hugepages-{}kB/enabled", kb), "never");
    return 0;
  };
  ReplayResult r;
  if (replay(t, o, &r, err)) return -1;
  auto it = r.counters.find("cow.bytes_copied");
  return it == r.counters.end() ? 0 : it->second;
}

int replay(const Trace& t, const ReplayOptions& o, ReplayResult* out, std::string* err) {
  *out = ReplayResult{};
  SystemConfig cfg;
  cfg.ram_bytes = replay_ram_bytes(t);
  int e = 0;
  std::unique_ptr<System> sys = System::create(cfg, &e);
  if (!sys) {
    *err = fmt::format("System::create({} MiB): error {}", cfg.ram_bytes >> 20, e);
    return -1;
  }
  if (o.recorded_settings && apply_recorded_settings(sys.get(), t.header.host, err)) return -1;
  if (o.configure && o.configure(sys.get(), err)) return -1;
  const auto start = std::chrono::steady_clock::now();
  Replayer(t, o, sys.get(), out).run();
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out->counters = sys->all_counters();
  for (const Violation& v : sys->check().violations) out->violations.push_back(v.invariant);
  out->warnings = sys->warnings();
  return 0;
}

}  // namespace mmlab::record
