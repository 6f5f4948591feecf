// The text form of a recorded trace: one line per record, for diffs and bug
// reports (`mmlab replay --dump`).
#include "record/mmtrace.h"

#include "fmt/format.h"

namespace mmlab::record {

namespace {
constexpr const char* kOpNames[kOpCount] = {"fault", "fork",  "exec",    "exit",    "mmap",     "munmap",
                                            "mremap", "mprotect", "madvise", "brk", "mlock", "munlock",
                                            "mlockall", "prctl_thp", "layout", "rss", "mseal"};

std::string fault_bits(uint8_t f) {
  std::string s = (f & kFaultWrite) ? "write" : "read";
  if (f & kFaultPresent) s += ",present";
  if (f & kFaultKernel) s += ",kernel";
  if (f & kFaultExec) s += ",exec";
  return s;
}

std::string file_of(const Trace& t, int32_t file) {
  if (file < 0 || static_cast<size_t>(file) >= t.files.size()) return "anon";
  return fmt::format("file={}", t.files[static_cast<size_t>(file)].path);
}
}  // namespace

const char* op_name(Op op) {
  const auto i = static_cast<size_t>(op);
  return i < static_cast<size_t>(kOpCount) ? kOpNames[i] : "?";
}

std::string dump_record(const Trace& t, const Record& r) {
  std::string s = fmt::format("{}.{:06} tid={} cpu={} {}", r.t_ns / 1000000000, r.t_ns / 1000 % 1000000, r.tid, r.cpu,
                              op_name(r.op));
  switch (r.op) {
    case Op::kFault:
      return s + fmt::format(" {:#x} {}", r.a, fault_bits(r.flags));
    case Op::kFork:
      return s + fmt::format(" parent={} clone_flags={:#x}", r.a, r.b);
    case Op::kExec:
    case Op::kExit:
      return s;
    case Op::kMmap:
    case Op::kLayout:
      return s + fmt::format(" {:#x} len={:#x} prot={:#x} flags={:#x} {} off={:#x} ret={}", r.a, r.b, r.c, r.d,
                             file_of(t, r.file), r.e, r.ret);
    case Op::kMremap:
      return s + fmt::format(" {:#x} old_len={:#x} new_len={:#x} flags={:#x} new={:#x} ret={:#x}", r.a, r.b, r.c,
                             r.d, r.e, static_cast<uint64_t>(r.ret));
    case Op::kBrk:
      return s + fmt::format(" {:#x} old={:#x}", r.a, r.b);
    case Op::kRss:
      return s + fmt::format(" member={} bytes={}", r.c, r.a);
    case Op::kMlockall:
    case Op::kPrctlThp:
      return s + fmt::format(" arg={:#x} ret={}", r.c, r.ret);
    default:
      return s + fmt::format(" {:#x} len={:#x} arg={:#x} ret={}", r.a, r.b, r.c, r.ret);
  }
}

}  // namespace mmlab::record
