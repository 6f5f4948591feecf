// `perf script` text to a Trace (perf_convert.h; the rules are
// docs/RECORD.md's "The converter's rules").
#include "record/perf_convert.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "fmt/format.h"
#include "record/perf_convert_internal.h"
#include "record/perf_script.h"

namespace mmlab::record {
namespace {

constexpr uint64_t kUserTop = 0x800000000000ull;  // x86-64 4-level: the first non-user address
constexpr uint64_t kPrSetThpDisable = 41;

// How a system call becomes a record. kPlain copies the named fields into
// a..e (an empty name leaves the slot 0).
enum class CallKind { kPlain, kMmap, kBrk, kShmat, kShmdt, kPrctl, kIgnored };
struct CallSpec {
  std::string_view name;
  CallKind kind;
  Op op;
  std::array<std::string_view, 5> slots;
};
constexpr CallSpec kCalls[] = {
    {"mmap", CallKind::kMmap, Op::kMmap, {"addr", "len", "prot", "flags", "off"}},
    {"munmap", CallKind::kPlain, Op::kMunmap, {"addr", "len"}},
    {"mremap", CallKind::kPlain, Op::kMremap, {"addr", "old_len", "new_len", "flags", "new_addr"}},
    {"mprotect", CallKind::kPlain, Op::kMprotect, {"start", "len", "prot"}},
    {"madvise", CallKind::kPlain, Op::kMadvise, {"start", "len_in", "behavior"}},
    {"brk", CallKind::kBrk, Op::kBrk, {"brk"}},
    {"mlock", CallKind::kPlain, Op::kMlock, {"start", "len"}},
    {"mlock2", CallKind::kPlain, Op::kMlock, {"start", "len", "flags"}},
    {"munlock", CallKind::kPlain, Op::kMunlock, {"start", "len"}},
    {"mlockall", CallKind::kPlain, Op::kMlockall, {"", "", "flags"}},
    {"mseal", CallKind::kPlain, Op::kMseal, {"start", "len"}},
    {"prctl", CallKind::kPrctl, Op::kPrctlThp, {"", "", "arg2"}},
    {"shmat", CallKind::kShmat, Op::kMmap, {}},
    {"shmdt", CallKind::kShmdt, Op::kMunmap, {"shmaddr"}},
};

const CallSpec* call_spec(std::string_view name) {
  for (const CallSpec& c : kCalls)
    if (c.name == name) return &c;
  return nullptr;
}

struct FileRange {
  uint64_t end = 0;
  int32_t file = -1;
  uint64_t offset = 0;  // of the range's start
};

struct MmState {
  uint64_t brk = 0;
  bool brk_known = false;
  std::map<uint64_t, FileRange> files;  // start -> file-backed range
  std::map<uint64_t, uint64_t> shm;     // shmat address -> length
};

struct Pending {  // a sys_enter waiting for its sys_exit
  std::string name;
  std::string fields;
  bool have_mmap2 = false;
  Mmap2 m2;
};

struct TaskState {
  int64_t mm = -1;
  int64_t tgid = 0;
  bool in_exec = false;  // between sched_prepare_exec and sched_process_exec
  bool synthesized = false;  // -p: in_exec for perf's records of the existing layout (time 0)
  bool pending_valid = false;
  Pending pending;
};

class Converter {
 public:
  Converter(Trace* t, ConvertStats* s) : t_(t), s_(s) {}
  int line(std::string_view text, std::string* why);
  void finish();

 private:
  int header_line(std::string_view text, std::string* why);
  int event(const PerfLine& l, std::string* why);
  int exec_event(const PerfLine& l, bool prepare, std::string* why);
  int newtask(const PerfLine& l, std::string* why);
  int fault(const PerfLine& l, bool kernel, std::string* why);
  int mmap2(const PerfLine& l, std::string* why);
  int rss_stat(const PerfLine& l, std::string* why);
  int sys_exit(const PerfLine& l, std::string_view name, std::string* why);
  int mmap_exit(const PerfLine& l, const Pending& p, int64_t ret, Record* r, std::string* why);
  void plain_exit(const CallSpec& c, const Pending& p, Record* r, std::string* why);
  TaskState* task_with_mm(const PerfLine& l);
  int32_t file_index(const Mmap2& m);
  void note_file_range(int64_t mm, uint64_t start, uint64_t len, int32_t file, uint64_t offset);
  void note_fault(int64_t mm, uint64_t addr);
  void emit(const PerfLine& l, Record r, int64_t mm);
  int orphan(const PerfLine& l);
  int adopt(int64_t tid, std::string* why);

  Trace* t_;
  ConvertStats* s_;
  std::map<int64_t, TaskState> tasks_;
  std::vector<MmState> mms_;
  std::map<std::tuple<uint64_t, uint64_t, std::string>, int32_t> file_ids_;
  std::vector<uint64_t> file_floor_;    // per file: the furthest faulted byte
  std::vector<uint64_t> file_extent_;   // per file: the furthest mapped byte
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> sizes_;  // "# mmlab size" lines
  std::vector<std::string> tmpfs_, hugetlbfs_;
  std::vector<int64_t> rec_mm_;
  bool attach_ = false;
  // Lines of a task not known yet: perf orders by timestamps taken on
  // different CPUs, so a child's first fault may come before the parent's
  // task_newtask. Kept until that comes (then converted after it), an
  // exec makes them moot, or the end drops them.
  std::string_view cur_line_;
  std::map<int64_t, std::vector<std::string>> orphans_;
};

constexpr size_t kMaxOrphans = 100000;  // per task: a task never forked in the capture is not kept whole

int Converter::orphan(const PerfLine& l) {
  auto& v = orphans_[l.tid];
  if (v.size() < kMaxOrphans) v.emplace_back(cur_line_);
  else s_->dropped_no_mm++;
  return 0;
}

int Converter::adopt(int64_t tid, std::string* why) {
  auto it = orphans_.find(tid);
  if (it == orphans_.end()) return 0;
  std::vector<std::string> lines = std::move(it->second);
  orphans_.erase(it);
  for (const std::string& text : lines) {
    PerfLine l;
    LineKind kind;
    cur_line_ = text;
    if (parse_perf_line(text, &l, &kind, why) || event(l, why)) return -1;
  }
  return 0;
}

int Converter::line(std::string_view text, std::string* why) {
  s_->lines++;
  cur_line_ = text;
  if (text.rfind("# mmlab ", 0) == 0) return header_line(text.substr(8), why);
  PerfLine l;
  LineKind kind;
  if (parse_perf_line(text, &l, &kind, why)) return -1;
  return kind == LineKind::kSkip ? 0 : event(l, why);
}

int Converter::header_line(std::string_view text, std::string* why) {
  std::string key(text.substr(0, text.find(' ')));
  std::string val = key.size() < text.size() ? std::string(text.substr(key.size() + 1)) : "";
  std::istringstream in(val);
  HostProfile& h = t_->header.host;
  Header& hd = t_->header;
  auto num = [&](auto* v) {
    if (!(in >> *v)) *why = "# mmlab " + key + ": not a number";
    return why->empty() ? 0 : -1;
  };
  why->clear();
  if (key == "command") {
    auto j = nlohmann::json::parse(val, nullptr, false);
    if (!j.is_array()) return *why = "# mmlab command: not a JSON array of words", -1;
    for (auto& w : j)
      if (w.is_string()) hd.command.push_back(w.get<std::string>());
    return 0;
  }
  if (key == "release") return h.release = val, 0;
  if (key == "arch") return h.arch = val, 0;
  if (key == "zero_page") return h.zero_page = val == "1", 0;
  if (key == "attach") return attach_ = val == "1", 0;
  if (key == "thp") return h.thp[val.substr(0, val.find(' '))] = val.find(' ') == std::string::npos ? "" : val.substr(val.find(' ') + 1), 0;
  if (key == "fault_around_bytes") return num(&h.fault_around_bytes);
  if (key == "overcommit_memory") return num(&h.overcommit_memory);
  if (key == "numa_balancing") return num(&h.numa_balancing);
  if (key == "pswpin") return num(&h.pswpin);
  if (key == "pswpout") return num(&h.pswpout);
  if (key == "minflt") return num(&hd.minflt);
  if (key == "majflt") return num(&hd.majflt);
  if (key == "flags") return num(&hd.flags);
  if (key == "lost") return num(&hd.lost);
  if (key == "mount") {
    std::string type, path;
    in >> type >> path;
    (type == "hugetlbfs" ? hugetlbfs_ : tmpfs_).push_back(path);
    return 0;
  }
  if (key == "size") {
    uint64_t dev = 0, ino = 0, bytes = 0;
    if (!(in >> dev >> ino >> bytes)) return *why = "# mmlab size: expected DEV INO BYTES", -1;
    sizes_[{dev, ino}] = std::max(sizes_[{dev, ino}], bytes);
    return 0;
  }
  return 0;  // a key of a later version: ignored
}

int Converter::event(const PerfLine& l, std::string* why) {
  std::string_view ev = l.event;
  if (attach_ && l.t_ns) {  // the capture proper has begun: the existing layout is complete
    auto it = tasks_.find(l.tid);
    if (it != tasks_.end() && it->second.synthesized) it->second.synthesized = it->second.in_exec = false;
  }
  if (ev == "PERF_RECORD_MMAP2") return mmap2(l, why);
  if (ev == "PERF_RECORD_LOST" || ev == "PERF_RECORD_LOST_SAMPLES") {
    uint64_t n = 0;
    size_t p = l.rest.rfind("lost ");
    if (p == std::string_view::npos || !perf_number(l.rest.substr(p + 5), &n)) return *why = "a lost-records line without \"lost N\"", -1;
    t_->header.lost += n;
    return 0;
  }
  if (ev.rfind("PERF_RECORD_", 0) == 0) return 0;  // MMAP (the kernel's), COMM, FORK, EXIT, ...: not used
  if (ev == "sched:sched_prepare_exec") return exec_event(l, true, why);
  if (ev == "sched:sched_process_exec") return exec_event(l, false, why);
  if (ev == "task:task_newtask") return newtask(l, why);
  if (ev == "exceptions:page_fault_user") return fault(l, false, why);
  if (ev == "exceptions:page_fault_kernel") return fault(l, true, why);
  if (ev == "sched:sched_process_exit") {
    uint64_t pid = 0;
    if (!perf_field_number(l.rest, "pid", &pid)) return *why = "sched_process_exit without pid=", -1;
    auto it = tasks_.find(static_cast<int64_t>(pid));
    if (it == tasks_.end() || it->second.mm < 0) return s_->dropped_no_mm++, 0;
    Record r;
    r.op = Op::kExit;
    PerfLine x = l;
    x.tid = static_cast<int64_t>(pid);
    emit(x, r, it->second.mm);
    tasks_.erase(it);
    return 0;
  }
  if (ev == "kmem:rss_stat") return rss_stat(l, why);
  if (ev.rfind("syscalls:sys_enter_", 0) == 0) {
    if (!task_with_mm(l)) return orphan(l);  // with its exit, converted once the task is known
    TaskState& ts = tasks_[l.tid];
    ts.tgid = l.pid;
    ts.pending_valid = true;
    ts.pending = Pending{std::string(ev.substr(19)), std::string(l.rest), false, {}};
    return 0;
  }
  if (ev.rfind("syscalls:sys_exit_", 0) == 0) return sys_exit(l, ev.substr(18), why);
  return 0;  // sched_process_fork and other events: task_newtask says more
}

// sched_prepare_exec: the task gets a new mm, and the MMAP2 records until
// sched_process_exec are its exec-time layout.
int Converter::exec_event(const PerfLine& l, bool prepare, std::string* why) {
  uint64_t pid = 0;
  if (!perf_field_number(l.rest, "pid", &pid)) return *why = "an exec event without pid=", -1;
  if (!prepare) {
    uint64_t old = pid;
    perf_field_number(l.rest, "old_pid", &old);
    auto it = tasks_.find(static_cast<int64_t>(old));
    if (it != tasks_.end() && old != pid) {  // a thread's exec: it takes the leader's id (de_thread)
      tasks_[static_cast<int64_t>(pid)] = it->second;
      tasks_.erase(it);
    }
    tasks_[static_cast<int64_t>(pid)].in_exec = false;
    return 0;
  }
  if (auto o = orphans_.find(l.tid); o != orphans_.end()) {  // the old image's: nothing to replay them on
    s_->dropped_no_mm += o->second.size();
    orphans_.erase(o);
  }
  TaskState& ts = tasks_[l.tid];
  ts.tgid = l.pid;
  ts.mm = static_cast<int64_t>(mms_.size());
  ts.in_exec = true;
  ts.pending_valid = false;
  mms_.emplace_back();
  Record r;
  r.op = Op::kExec;
  emit(l, r, ts.mm);
  return 0;
}

// task_newtask: the child's mm from clone_flags (read by name: it became
// 64-bit in recent kernels, printed as hex without "0x").
int Converter::newtask(const PerfLine& l, std::string* why) {
  uint64_t child = 0, flags = 0;
  std::string_view f;
  if (!perf_field_number(l.rest, "pid", &child) || !perf_field(l.rest, "clone_flags", &f) || !perf_number("0x" + std::string(f), &flags))
    return *why = "task_newtask without pid= and a hex clone_flags=", -1;
  TaskState* parent = task_with_mm(l);
  if (!parent) return orphan(l);  // a parent not known yet: converted when it is
  TaskState& c = tasks_[static_cast<int64_t>(child)];
  c.tgid = flags & kCloneThread ? parent->tgid : static_cast<int64_t>(child);
  c.in_exec = false;
  if (flags & kCloneVm) {
    c.mm = parent->mm;
  } else {
    c.mm = static_cast<int64_t>(mms_.size());
    MmState copy = mms_[static_cast<size_t>(parent->mm)];
    mms_.push_back(std::move(copy));
  }
  Record r;
  r.op = Op::kFork;
  r.a = static_cast<uint64_t>(l.tid);
  r.b = flags;
  PerfLine x = l;
  x.tid = static_cast<int64_t>(child);
  emit(x, r, c.mm);
  return adopt(x.tid, why);
}

// exceptions:page_fault_user/kernel: the x86 error code's P, W and I bits.
int Converter::fault(const PerfLine& l, bool kernel, std::string* why) {
  uint64_t addr = 0, code = 0;
  if (!perf_field_number(l.rest, "address", &addr) || !perf_field_number(l.rest, "error_code", &code))
    return *why = "a page fault without a numeric address= and error_code=", -1;
  if (addr >= kUserTop) return s_->dropped_kernel_addr++, 0;
  TaskState* ts = task_with_mm(l);
  if (!ts) return orphan(l);
  Record r;
  r.op = Op::kFault;
  r.a = addr;
  r.flags = static_cast<uint8_t>((code & 2 ? kFaultWrite : 0) | (code & 1 ? kFaultPresent : 0) | (kernel ? kFaultKernel : 0) |
                                 (code & 0x10 ? kFaultExec : 0));
  note_fault(ts->mm, addr);
  emit(l, r, ts->mm);
  s_->faults++;
  return 0;
}

// PERF_RECORD_MMAP2: during an exec, the layout; during an mmap or shmat
// call, the file behind it; else (brk, mprotect, mremap) dropped. With -p,
// perf's synthesized records at time 0 are the layout the tasks had.
int Converter::mmap2(const PerfLine& line, std::string* why) {
  Mmap2 m;
  if (parse_mmap2(line.rest, &m, why)) return -1;
  // The task is the record's own "PID/TID:" (perf's synthesized records
  // carry 0/0 in the sample header).
  PerfLine l = line;
  size_t slash = l.rest.find('/'), colon = l.rest.find(':');
  uint64_t pid = 0, tid = 0;
  if (slash == std::string_view::npos || colon < slash || !perf_number(l.rest.substr(0, slash), &pid) ||
      !perf_number(l.rest.substr(slash + 1, colon - slash - 1), &tid))
    return *why = "an MMAP2 record without \"PID/TID:\"", -1;
  l.pid = static_cast<int64_t>(pid);
  l.tid = static_cast<int64_t>(tid);
  auto it = tasks_.find(l.tid);
  if (attach_ && l.t_ns == 0 && (it == tasks_.end() || it->second.mm < 0)) {
    TaskState& ts = tasks_[l.tid];
    ts.tgid = l.pid;
    ts.mm = static_cast<int64_t>(mms_.size());
    ts.in_exec = ts.synthesized = true;
    mms_.emplace_back();
    Record r;
    r.op = Op::kExec;
    emit(l, r, ts.mm);
    it = tasks_.find(l.tid);
  }
  if (it == tasks_.end() || it->second.mm < 0) return l.t_ns ? orphan(l) : (s_->dropped_no_mm++, 0);
  TaskState& ts = it->second;
  if (ts.in_exec) {
    Record r;
    r.op = Op::kLayout;
    r.a = m.start;
    r.b = m.len;
    r.c = m.prot;
    r.d = m.shared ? MAP_SHARED : MAP_PRIVATE;
    r.file = file_index(m);
    r.e = r.file >= 0 ? m.pgoff : 0;
    if (r.file >= 0) note_file_range(ts.mm, m.start, m.len, r.file, m.pgoff);
    emit(l, r, ts.mm);
    return 0;
  }
  if (ts.pending_valid && (ts.pending.name == "mmap" || ts.pending.name == "shmat") && !ts.pending.have_mmap2) {
    ts.pending.have_mmap2 = true;
    ts.pending.m2 = m;
    return 0;
  }
  s_->mmap2_dropped++;
  return 0;
}

// kmem:rss_stat (--rss): only the faulting task's own mm (curr=1) is
// attributable; the counter is per-CPU and approximate.
int Converter::rss_stat(const PerfLine& l, std::string* why) {
  static constexpr std::string_view kTypes[] = {"MM_FILEPAGES", "MM_ANONPAGES", "MM_SWAPENTS", "MM_SHMEMPAGES"};
  uint64_t curr = 0;
  std::string_view type, size;
  if (!perf_field_number(l.rest, "curr", &curr) || !perf_field(l.rest, "type", &type) || !perf_field(l.rest, "size", &size))
    return *why = "rss_stat without curr=, type= and size=", -1;
  if (!size.empty() && size.back() == 'B') size.remove_suffix(1);
  Record r;
  r.op = Op::kRss;
  if (!perf_number(size, &r.a)) return *why = "rss_stat with a malformed size=", -1;
  r.c = 4;
  for (uint64_t i = 0; i < 4; i++)
    if (type == kTypes[i]) r.c = i;
  TaskState* ts = curr == 1 && r.c < 4 ? task_with_mm(l) : nullptr;
  if (!ts) return 0;
  emit(l, r, ts->mm);
  return 0;
}

TaskState* Converter::task_with_mm(const PerfLine& l) {
  auto it = tasks_.find(l.tid);
  if (it != tasks_.end() && it->second.mm >= 0) return &it->second;
  // A thread that existed before the capture (-p): its process's mm.
  for (auto& [tid, ts] : tasks_)
    if (ts.tgid == l.pid && ts.mm >= 0 && attach_) {
      TaskState& me = tasks_[l.tid];
      me.tgid = l.pid;
      me.mm = ts.mm;
      return &me;
    }
  return nullptr;
}

int Converter::sys_exit(const PerfLine& l, std::string_view name, std::string* why) {
  const CallSpec* c = call_spec(name);
  auto it = tasks_.find(l.tid);
  bool matched = it != tasks_.end() && it->second.pending_valid && it->second.pending.name == name;
  if (!c) {
    if (matched) it->second.pending_valid = false;
    if (name != "execve") s_->unconverted_calls++;
    return 0;
  }
  if (!task_with_mm(l)) return orphan(l);
  if (!matched) return s_->unmatched_exits++, 0;
  TaskState& ts = it->second;
  ts.pending_valid = false;
  uint64_t raw = 0;
  if (!perf_number(l.rest, &raw)) return *why = "a sys_exit whose result is not a number", -1;
  const int64_t ret = static_cast<int64_t>(raw);
  const bool failed = ret < 0 && ret >= -4095;
  if (failed) s_->failed_calls++;
  if (c->kind == CallKind::kPrctl) {
    uint64_t option = 0;
    if (!perf_field_number(ts.pending.fields, "option", &option)) return *why = "sys_enter_prctl without option:", -1;
    if (option != kPrSetThpDisable) return 0;
  }
  Record r;
  r.op = c->op;
  r.ret = ret;
  MmState& mm = mms_[static_cast<size_t>(ts.mm)];
  switch (c->kind) {
    case CallKind::kMmap:
    case CallKind::kShmat:
      if (mmap_exit(l, ts.pending, ret, &r, why)) return -1;
      if (c->kind == CallKind::kShmat && !failed) mm.shm[r.a] = r.b;
      break;
    case CallKind::kBrk:
      r.a = static_cast<uint64_t>(ret);
      r.b = mm.brk_known ? mm.brk : r.a;
      mm.brk = r.a;
      mm.brk_known = true;
      break;
    case CallKind::kShmdt: {
      perf_field_number(ts.pending.fields, "shmaddr", &r.a);
      auto s = mm.shm.find(r.a);
      r.b = s == mm.shm.end() ? 0 : s->second;
      if (s != mm.shm.end() && !failed) mm.shm.erase(s);
      break;
    }
    default:
      plain_exit(*c, ts.pending, &r, why);
      if (!why->empty()) return -1;
  }
  if (!failed && (r.op == Op::kMunmap || (r.op == Op::kMremap && r.ret >= 0))) {
    auto& files = mm.files;
    for (auto f = files.lower_bound(r.a); f != files.end() && f->first < r.a + r.b;) f = files.erase(f);
  }
  emit(l, r, ts.mm);
  return 0;
}

void Converter::plain_exit(const CallSpec& c, const Pending& p, Record* r, std::string* why) {
  uint64_t* slot[5] = {&r->a, &r->b, &r->c, &r->d, &r->e};
  why->clear();
  for (int i = 0; i < 5; i++)
    if (!c.slots[i].empty() && !perf_field_number(p.fields, c.slots[i], slot[i]))
      *why = fmt::format("sys_enter_{} without a numeric {}:", c.name, c.slots[i]);
}

// The mapping's range from the call (its result and length), never from
// MMAP2 (perf reports the merged VMA); the file and its offset from MMAP2:
// pgoff plus the distance of the result from the MMAP2 record's start.
int Converter::mmap_exit(const PerfLine& l, const Pending& p, int64_t ret, Record* r, std::string* why) {
  (void)l;
  const bool failed = ret < 0 && ret >= -4095;
  if (p.name == "shmat") {
    r->a = static_cast<uint64_t>(ret);
    r->d = MAP_SHARED;
    if (p.have_mmap2 && !failed) {
      r->b = p.m2.len;
      r->c = p.m2.prot;
      r->file = file_index(p.m2);
    }
    return 0;
  }
  if (!perf_field_number(p.fields, "addr", &r->a) || !perf_field_number(p.fields, "len", &r->b) ||
      !perf_field_number(p.fields, "prot", &r->c) || !perf_field_number(p.fields, "flags", &r->d) ||
      !perf_field_number(p.fields, "off", &r->e))
    return *why = "sys_enter_mmap without numeric addr:, len:, prot:, flags:, off:", -1;
  if (failed) return 0;
  r->a = static_cast<uint64_t>(ret);
  if (!(r->d & MAP_ANONYMOUS) && p.have_mmap2) {
    r->file = file_index(p.m2);
    if (r->file >= 0) {
      r->e = p.m2.pgoff + (r->a - p.m2.start);
      note_file_range(tasks_[l.tid].mm, r->a, r->b, r->file, r->e);
    }
  }
  return 0;
}

int32_t Converter::file_index(const Mmap2& m) {
  if (m.path.empty() || m.path[0] != '/' || m.path.rfind("//", 0) == 0) return -1;  // [stack], [vdso], //anon
  if (m.path.rfind("/dev/zero", 0) == 0) return -1;                                    // a shared anonymous mapping
  auto key = m.ino ? std::make_tuple(m.dev, m.ino, std::string()) : std::make_tuple(uint64_t{0}, uint64_t{0}, m.path);
  auto [it, added] = file_ids_.try_emplace(key, static_cast<int32_t>(t_->files.size()));
  if (added) {
    FileEntry f;
    f.path = m.path;
    f.dev = m.dev;
    f.ino = m.ino;
    f.cls = file_class_of(m.path, tmpfs_, hugetlbfs_);
    t_->files.push_back(f);
    file_floor_.push_back(0);
    file_extent_.push_back(0);
  }
  return it->second;
}

void Converter::note_file_range(int64_t mm, uint64_t start, uint64_t len, int32_t file, uint64_t offset) {
  auto& files = mms_[static_cast<size_t>(mm)].files;
  for (auto f = files.lower_bound(start); f != files.end() && f->first < start + len;) f = files.erase(f);
  files[start] = FileRange{start + len, file, offset};
  file_extent_[static_cast<size_t>(file)] = std::max(file_extent_[static_cast<size_t>(file)], offset + len);
}

void Converter::note_fault(int64_t mm, uint64_t addr) {
  auto& files = mms_[static_cast<size_t>(mm)].files;
  auto it = files.upper_bound(addr);
  if (it == files.begin()) return;
  --it;
  if (addr >= it->second.end) return;
  uint64_t end = it->second.offset + (addr - it->first) / kPage * kPage + kPage;
  uint64_t& floor = file_floor_[static_cast<size_t>(it->second.file)];
  floor = std::max(floor, end);
}

void Converter::emit(const PerfLine& l, Record r, int64_t mm) {
  r.t_ns = l.t_ns;
  r.tid = static_cast<uint32_t>(l.tid);
  r.cpu = static_cast<uint16_t>(l.cpu < 0 ? 0 : l.cpu);
  t_->records.push_back(r);
  rec_mm_.push_back(mm);
  if (!l.comm.empty() && r.op != Op::kFork) t_->comm[r.tid] = std::string(l.comm);
}

// Sizes: the final stat where the recorder had one, never below the
// furthest faulted page; a file it could not stat (deleted, memfd) is sized
// by its mappings.
void Converter::finish() {
  for (const auto& [tid, lines] : orphans_) s_->dropped_no_mm += lines.size();
  for (size_t i = 0; i < t_->files.size(); i++) {
    FileEntry& f = t_->files[i];
    auto it = sizes_.find({f.dev, f.ino});
    f.size = std::max(file_floor_[i], it != sizes_.end() ? it->second : file_extent_[i]);
  }
  order_records(&t_->records, &rec_mm_, s_);
  uint64_t start = 0;
  for (const Record& r : t_->records)
    if (r.t_ns && (!start || r.t_ns < start)) start = r.t_ns;
  uint64_t end = start;
  for (Record& r : t_->records) {
    end = std::max(end, r.t_ns);
    r.t_ns = r.t_ns > start ? r.t_ns - start : 0;
  }
  t_->header.start_ns = start;
  t_->header.duration_ns = end - start;
}

bool under(const std::string& path, const std::string& mount) {
  if (mount.empty() || path.rfind(mount, 0) != 0) return false;
  return mount.back() == '/' || path.size() == mount.size() || path[mount.size()] == '/';
}

}  // namespace

std::vector<std::string> perf_script_args() {
  return {"script", "--ns", "-F", kPerfScriptFields, "--show-mmap-events", "--show-lost-events"};
}

FileClass file_class_of(const std::string& path, const std::vector<std::string>& tmpfs, const std::vector<std::string>& hugetlbfs) {
  for (const std::string& m : hugetlbfs)
    if (under(path, m)) return FileClass::kHugetlb;
  const std::string deleted = " (deleted)";
  if (path.size() >= deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    return FileClass::kShmem;
  if (path.rfind("/SYSV", 0) == 0 || path.rfind("/memfd:", 0) == 0) return FileClass::kShmem;
  for (const std::string& m : tmpfs)
    if (under(path, m)) return FileClass::kShmem;
  return FileClass::kExt4;
}

int convert_perf_script(const std::string& text, Trace* out, ConvertStats* stats, std::string* err) {
  *out = Trace{};
  ConvertStats local;
  ConvertStats* s = stats ? stats : &local;
  *s = ConvertStats{};
  Converter c(out, s);
  size_t lineno = 0;
  for (size_t p = 0; p < text.size();) {
    size_t e = text.find('\n', p);
    if (e == std::string::npos) e = text.size();
    std::string_view line(text.data() + p, e - p);
    lineno++;
    std::string why;
    if (c.line(line, &why)) {
      std::string shown(line.substr(0, 200));
      *err = fmt::format("line {}: {}: {}", lineno, why, shown);
      return -1;
    }
    p = e + 1;
  }
  c.finish();
  return 0;
}

}  // namespace mmlab::record
