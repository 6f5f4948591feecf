// A recorded program's memory-management behaviour (docs/RECORD.md): the
// tasks and the address spaces they share, the mapping calls with their
// results, the exec-time layouts, and every page fault, in the order the
// replay runs them. `mmlab record` makes one from a perf capture
// (perf_convert.cpp), `.mmtrace` files hold one (mmtrace_io.cpp), `mmlab
// replay` runs one on the model (replay.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace mmlab::record {

inline constexpr uint32_t kMmtraceVersion = 1;

// What the converter, the replay and the excerpt share: the page size of
// the recording host (x86-64) and task_newtask's CLONE_VM and CLONE_THREAD.
inline constexpr uint64_t kPage = 4096;
inline constexpr uint64_t kCloneVm = 0x100, kCloneThread = 0x10000;
inline constexpr uint64_t page_down(uint64_t a) { return a & ~(kPage - 1); }
inline constexpr uint64_t page_up(uint64_t a) { return (a + kPage - 1) & ~(kPage - 1); }

// What the recording host was: the replay sets the model up the same way,
// and the fidelity check reads what makes a figure incomparable.
struct HostProfile {
  std::string release;  // uname -r
  std::string arch;     // uname -m
  bool zero_page = true;  // a read fault of anonymous memory mapped the zero page (probed)
  // /sys/kernel/mm/transparent_hugepage/ files, relative path -> value
  // ("enabled", "defrag", "hugepages-64kB/enabled", "khugepaged/pages_to_scan", ...).
  std::map<std::string, std::string> thp;
  int64_t fault_around_bytes = -1;  // -1: not readable
  int overcommit_memory = -1;
  int numa_balancing = -1;
  int64_t pswpin = 0, pswpout = 0;  // /proc/vmstat deltas over the run
};

// Set in Header::flags.
enum HeaderFlag : uint32_t {
  kKeepThp = 1u << 0,        // THP left on: fidelity only, never a policy table
  kForcedLost = 1u << 1,     // records were lost and --force kept the capture
  kSwapped = 1u << 2,        // pswpin/pswpout moved during the run
  kNumaBalancing = 1u << 3,  // hinting faults look like first touches
  kRss = 1u << 4,            // kmem:rss_stat records were captured
};

struct Header {
  uint32_t version = kMmtraceVersion;
  uint32_t flags = 0;  // HeaderFlag
  std::vector<std::string> command;
  HostProfile host;
  uint64_t lost = 0;             // records perf reported lost
  int64_t minflt = -1, majflt = -1;  // the counting event over every traced task (-1: not counted)
  uint64_t start_ns = 0;         // the first record's perf timestamp (CLOCK_MONOTONIC, ns)
  uint64_t duration_ns = 0;
};

enum class FileClass : uint8_t {
  kExt4 = 0,  // any regular file of a disk file system
  kShmem = 1, // tmpfs, "(deleted)", "/SYSV...", "/memfd:..."
  kHugetlb = 2,
};

struct FileEntry {
  std::string path;
  uint64_t dev = 0, ino = 0;
  uint64_t size = 0;  // the largest size seen (the end's stat, ftruncate/fallocate, the furthest fault)
  FileClass cls = FileClass::kExt4;
};

// Record kinds. The numbers are the file format's: never renumber.
enum class Op : uint8_t {
  kFault = 0,     // a: address; flags: FaultBits
  kFork = 1,      // tid: the new task; a: parent tid; b: clone flags (CLONE_VM, CLONE_THREAD, CLONE_VFORK, ...)
  kExec = 2,      // tid gets a new mm; the kLayout records that follow are its exec-time layout
  kExit = 3,      // tid exits (the mm goes with its last task)
  kMmap = 4,      // a: result address; b: length; c: prot; d: flags; file: FileEntry index or -1; e: file offset
  kMunmap = 5,    // a: address; b: length; ret
  kMremap = 6,    // a: old address; b: old length; c: new length; d: flags; e: new address (result in ret)
  kMprotect = 7,  // a, b: range; c: prot; ret
  kMadvise = 8,   // a, b: range; c: advice; ret
  kBrk = 9,       // a: the new break (the result); b: the old break
  kMlock = 10,    // a, b: range; c: flags (MLOCK_ONFAULT); ret
  kMunlock = 11,  // a, b: range; ret
  kMlockall = 12, // c: flags; ret
  kPrctlThp = 13, // c: PR_SET_THP_DISABLE's argument; ret
  kLayout = 14,   // exec-time mapping: a: start; b: length; c: prot; d: flags; file; e: offset
  kRss = 15,      // rss_stat: c: member (0 file, 1 anon, 2 swap, 3 shmem); a: bytes
  kMseal = 16,    // a, b: range; ret
};
inline constexpr int kOpCount = 17;

enum FaultBits : uint8_t {
  kFaultWrite = 1u << 0,    // x86 error code W
  kFaultPresent = 1u << 1,  // error code P: a protection fault on a present PTE
  kFaultKernel = 1u << 2,   // page_fault_kernel (the kernel touching user memory)
  kFaultExec = 1u << 3,     // error code I (instruction fetch)
};

struct Record {
  uint64_t t_ns = 0;  // since Header::start_ns
  uint32_t tid = 0;
  uint16_t cpu = 0;
  Op op = Op::kFault;
  uint8_t flags = 0;  // FaultBits for kFault
  int32_t file = -1;  // FileEntry index for kMmap/kLayout
  uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
  int64_t ret = 0;  // the system call's result (negative errno)
};

// Everything a replay needs. `records` are in replay order: the converter
// sorts by timestamp and then moves a task's faults after the fork, exec
// and mapping calls of its mm that must precede them.
struct Trace {
  Header header;
  std::vector<FileEntry> files;
  std::map<uint32_t, std::string> comm;  // tid -> command name, for reports
  std::vector<Record> records;
};

// A kernel-mode fault on the page of the same task's previous fault, with
// the same bits: the kernel touching user memory with page faults
// disabled (an atomic copy) raises the exception again and again without
// handling it, then faults the page in another way. The trace shows each
// attempt; the kernel's fault count none of the repeats. Fed the faults in
// order, says which are repeats.
class KernelRepeats {
 public:
  bool repeat(const Record& fault) {
    Last& l = last_[fault.tid];
    const uint64_t page = page_down(fault.a);
    const bool r = (fault.flags & kFaultKernel) && l.page == page && l.flags == fault.flags;
    l = Last{page, fault.flags};
    return r;
  }

 private:
  struct Last {
    uint64_t page = ~0ull;
    uint8_t flags = 0;
  };
  std::unordered_map<uint32_t, Last> last_;
};

// .mmtrace reading and writing (mmtrace_io.cpp). 0 on success; else -1 and
// *err says what is wrong (a truncated file names the byte offset).
int write_mmtrace(const std::string& path, const Trace& t, std::string* err);
int read_mmtrace(const std::string& path, Trace* t, std::string* err);
// The encoding in memory, for tests and size figures.
std::string encode_mmtrace(const Trace& t);
int decode_mmtrace(const std::string& bytes, Trace* t, std::string* err);

// One line per record (`mmlab replay --dump`).
std::string dump_record(const Trace& t, const Record& r);
const char* op_name(Op op);

}  // namespace mmlab::record
