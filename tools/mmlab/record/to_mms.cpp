// `mmlab replay --to-mms`: an excerpt of a recording as a scenario
// (docs/scenario-language.md), for a bug report or a test. One task's
// address space from its exec: every mapping call up to the end of the
// window, and the faults inside the window as one-byte accesses. The
// scenario language names addresses by region, so each cluster of the
// recorded addresses gets an anchor: a 2M-aligned range mapped and
// unmapped again, and every mapping goes `fixed=` at its recorded offset
// from it (the offset within 2M, which decides THP, is kept).
#include "record/to_mms.h"

#include <algorithm>
#include <map>
#include <set>

#include "fmt/format.h"
#include "mmlab/scenario.h"
#include "mmlab/types.h"

namespace mmlab::record {
namespace {

constexpr uint64_t kAnchorAlign = 2ull << 20;
constexpr uint64_t kClusterGap = 1ull << 30;  // a larger gap starts another anchor
constexpr uint64_t kTaskSize = 0x7ffffffff000ull;

bool failed(int64_t ret) { return ret < 0 && ret > -4096; }

const char* prot_word(uint64_t prot) {
  // The language has no execute-only or write-execute word: the nearest
  // that keeps what the CPU may do on x86 (which reads whatever it may execute).
  switch (prot & 7) {
    case 0: return "none";
    case PROT_READ: return "r";
    case PROT_WRITE: return "w";
    case PROT_READ | PROT_WRITE: return "rw";
    case PROT_EXEC:
    case PROT_READ | PROT_EXEC: return "rx";
    default: return "rwx";
  }
}

struct Anchor {
  std::string name;
  uint64_t base = 0, end = 0;
};

class Excerpt {
 public:
  Excerpt(const Trace& t, const ExcerptSpec& s) : t_(t), s_(s) {}
  int make(std::string* out, std::string* err);

 private:
  bool wanted(const Record& r);
  void collect_ranges(std::vector<std::pair<uint64_t, uint64_t>>* v);
  void make_anchors();
  std::string at(uint64_t addr) const;
  bool known(uint64_t addr) const;
  void emit(const Record& r);
  void emit_map(const std::string& who, const Record& r);
  std::string proc_of(uint32_t tid);

  const Trace& t_;
  const ExcerptSpec& s_;
  std::map<uint32_t, std::string> procs_;  // tid -> the process statement name of its mm
  std::vector<Anchor> anchors_;
  std::set<int32_t> files_;
  std::map<uint64_t, uint64_t> mapped_;  // what the excerpt mapped: start -> end
  std::string body_;
  int regions_ = 0;
  int64_t left_out_ = 0;
};

// The records of the chosen task's address space, and of the processes it
// forks inside the window, up to the window's end.
bool Excerpt::wanted(const Record& r) {
  if (r.t_ns > s_.to_ns) return false;
  if (r.op == Op::kFork && procs_.count(static_cast<uint32_t>(r.a))) {
    if (r.b & kCloneVm) {
      procs_[r.tid] = procs_[static_cast<uint32_t>(r.a)];
      return false;
    }
    return r.t_ns >= s_.from_ns;
  }
  if (!procs_.count(r.tid)) {
    if (r.tid != s_.tid || r.op != Op::kExec) return false;
    procs_[r.tid] = "P";
    return false;
  }
  if (r.op == Op::kFault) return r.t_ns >= s_.from_ns;
  return r.op != Op::kRss;
}

void Excerpt::collect_ranges(std::vector<std::pair<uint64_t, uint64_t>>* v) {
  std::map<uint32_t, std::string> saved = procs_;
  for (const Record& r : t_.records) {
    if (!wanted(r)) continue;
    if ((r.op == Op::kMmap && !failed(r.ret)) || r.op == Op::kLayout) v->push_back({r.a, r.a + page_up(r.b)});
    if (r.op == Op::kMremap && !failed(r.ret))
      v->push_back({static_cast<uint64_t>(r.ret), static_cast<uint64_t>(r.ret) + page_up(r.c)});
    if (r.op == Op::kBrk && r.a > r.b && r.b) v->push_back({r.b, page_up(r.a)});
  }
  procs_ = std::move(saved);
}

void Excerpt::make_anchors() {
  std::vector<std::pair<uint64_t, uint64_t>> v;
  collect_ranges(&v);
  std::sort(v.begin(), v.end());
  for (const auto& [lo, hi] : v) {
    if (anchors_.empty() || lo > anchors_.back().end + kClusterGap) {
      anchors_.push_back(Anchor{fmt::format("K{}", anchors_.size()), lo & ~(kAnchorAlign - 1), hi});
    }
    anchors_.back().end = std::max(anchors_.back().end, hi);
  }
}

std::string Excerpt::at(uint64_t addr) const {
  for (const Anchor& a : anchors_)
    if (addr >= a.base && addr < a.end) return fmt::format("{}+{:#x}", a.name, addr - a.base);
  return {};
}

bool Excerpt::known(uint64_t addr) const {
  auto it = mapped_.upper_bound(addr);
  if (it == mapped_.begin()) return false;
  --it;
  return addr < it->second;
}

std::string Excerpt::proc_of(uint32_t tid) { return procs_.count(tid) ? procs_[tid] : "P"; }

void Excerpt::emit_map(const std::string& who, const Record& r) {
  const std::string where = at(r.a);
  const uint64_t len = page_up(r.b);
  if (where.empty() || !len) return;
  std::string line = fmt::format("{} mmap M{} {:#x} {} {}", who, regions_++, len, prot_word(r.c),
                                 (r.d & MAP_TYPE) == MAP_PRIVATE ? "private" : "shared");
  if (r.file >= 0) {
    files_.insert(r.file);
    line += fmt::format(" file=F{}+{:#x}", r.file, r.e);
  }
  if (r.d & MAP_POPULATE) line += " populate";
  if (r.d & MAP_LOCKED) line += " locked";
  if (r.d & MAP_NORESERVE) line += " noreserve";
  body_ += line + " fixed=" + where + "\n";
  mapped_[r.a] = r.a + len;
}

void Excerpt::emit(const Record& r) {
  const std::string who = proc_of(r.tid);
  switch (r.op) {
    case Op::kLayout:
    case Op::kMmap:
      if (r.op == Op::kMmap && failed(r.ret)) return;
      return emit_map(who, r);
    case Op::kFault:
      if (!known(r.a & ~(kPage - 1)) || at(r.a).empty()) {
        left_out_++;
        return;
      }
      body_ += (r.flags & kFaultWrite) ? fmt::format("{} write {} 1 0x5a\n", who, at(r.a & ~(kPage - 1)))
                                       : fmt::format("{} read {} 1\n", who, at(r.a & ~(kPage - 1)));
      return;
    case Op::kFork: {
      const std::string child = fmt::format("C{}", r.tid);
      body_ += fmt::format("{} fork {}\n", proc_of(static_cast<uint32_t>(r.a)), child);
      procs_[r.tid] = child;
      return;
    }
    case Op::kExit:
      if (who != "P") body_ += fmt::format("{} exit\n", who);
      procs_.erase(r.tid);
      return;
    case Op::kMunmap:
      if (r.ret == 0 && !at(r.a).empty()) body_ += fmt::format("{} munmap {} {:#x}\n", who, at(r.a), page_up(r.b));
      return;
    case Op::kMprotect:
      if (r.ret == 0 && !at(r.a).empty())
        body_ += fmt::format("{} mprotect {} {:#x} {}\n", who, at(r.a), page_up(r.b), prot_word(r.c));
      return;
    case Op::kMadvise: {
      const char* word = scenario_advice_word(static_cast<int>(r.c));
      if (r.ret == 0 && word && !at(r.a).empty())
        body_ += fmt::format("{} madvise {} {:#x} {}\n", who, at(r.a), page_up(r.b), word);
      return;
    }
    case Op::kBrk: {
      // The heap grows by whole pages past the old break's page.
      const uint64_t from = page_up(r.b), to = page_up(r.a);
      if (r.b && to > from && !at(from).empty()) {
        body_ += fmt::format("{} mmap M{} {:#x} rw private fixed={}\n", who, regions_++, to - from, at(from));
        mapped_[from] = to;
      }
      return;
    }
    default:
      body_ += fmt::format("# {} not exported: {}\n", who, dump_record(t_, r));
      return;
  }
}

int Excerpt::make(std::string* out, std::string* err) {
  make_anchors();
  if (anchors_.empty()) {
    *err = fmt::format("task {} execs no image whose mappings the trace holds before {} ns", s_.tid, s_.to_ns);
    return -1;
  }
  for (const Record& r : t_.records)
    if (wanted(r)) emit(r);
  std::string head = fmt::format("# An excerpt of a recording (mmlab replay --to-mms): task {} from {} ns to {} ns.\n",
                                 s_.tid, s_.from_ns, s_.to_ns);
  if (left_out_) head += fmt::format("# {} faults outside the recorded mappings (the stack) are left out.\n", left_out_);
  head += fmt::format("test {}\n", s_.test_name);
  head += fmt::format("tune mm.zero_page {}\n", t_.header.host.zero_page ? "on" : "off");
  for (int32_t f : files_) {
    const FileEntry& e = t_.files[static_cast<size_t>(f)];
    head += fmt::format("file F{} {:#x} fs={}  # {}\n", f, page_up(std::max<uint64_t>(e.size, kPage)),
                        e.cls == FileClass::kShmem ? "shmem" : "ext4", e.path);
  }
  head += "proc P\n";
  // Every anchor mapped before any is unmapped, so that no two overlap.
  std::string unmaps;
  for (const Anchor& a : anchors_) {
    const uint64_t span = std::min(page_up(a.end) - a.base, kTaskSize - a.base);
    head += fmt::format("P mmap {} {:#x} none private align=2M\n", a.name, span);
    unmaps += fmt::format("P munmap {} {:#x}\n", a.name, span);
  }
  head += unmaps;
  *out = head + body_;
  return 0;
}

}  // namespace

int excerpt_to_mms(const Trace& t, const ExcerptSpec& s, std::string* out, std::string* err) {
  return Excerpt(t, s).make(out, err);
}

}  // namespace mmlab::record
