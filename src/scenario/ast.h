// The parsed form of a .mms file: tests made of statements. A statement is
// one struct per kind (namespace stmt) with named fields, held in a
// std::variant. Its consumers (the parser's name resolution, the model and
// the host backend) std::visit it into a member function overloaded once
// per struct, with no catch-all: a statement kind one of them does not
// handle is a compile error, not a run-time "unknown statement".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "mmlab/gup.h"
#include "mmlab/system.h"

namespace mmlab {

// ADDR: a region name plus an offset.
struct AddrExpr {
  std::string region;
  uint64_t offset = 0;
};

namespace stmt {

// ---- setup ----
struct Sysfs {  // sysfs PATH VALUE
  std::string path, value;
};
struct Tune {  // tune KEY VALUE
  std::string key, value;
};
struct Proc {  // proc P
  std::string proc;
};
struct Fork {  // P fork Q
  std::string parent, child;
};
struct Exit {  // P exit
  std::string proc;
};
struct File {  // file F SIZE [fs=CLASS] [hugetlb=2M|1G] [huge=always|within_size|advise|never] [noswap] [ro] [uncached]
  std::string name;
  uint64_t size = 0;
  int size_col = 0;  // the SIZE token's column, for scenario_check_sizes()
  std::string fs = "shmem";
  unsigned hugetlb_shift = 0;  // 21 or 30 (then fs is hugetlbfs)
  std::string huge;            // a file on a tmpfs mounted with huge=VALUE; "" for a memfd
  bool noswap = false;         // that tmpfs is mounted noswap (huge is then at least "never")
  bool read_only = false;      // ro: written, closed, opened again O_RDONLY (ext4-class files)
  bool uncached = false;       // uncached: its page cache dropped (POSIX_FADV_DONTNEED) after the write
};
struct Swap {  // swap SIZE [blkdev|file|zram]
  uint64_t size = 0;
  int size_col = 0;  // the SIZE token's column, for scenario_check_sizes()
  std::string kind = "blkdev";
};
struct Truncate {  // truncate F SIZE: ftruncate(2)
  std::string file;
  uint64_t size = 0;  // any byte count below 2^63 (off_t)
};
struct PunchHole {  // punch-hole F OFFSET SIZE: fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
  std::string file;
  uint64_t offset = 0, len = 0;  // byte counts below 2^63
};
// System V shared memory: shmget, shmctl (the segment's name is bound like a file's, as its own kind).
struct Shmget {  // shmget S SIZE [hugetlb]
  std::string seg;
  uint64_t size = 0;
  int size_col = 0;  // the SIZE token's column, for scenario_check_sizes()
  bool hugetlb = false;  // SHM_HUGETLB (the default huge page size, 2M)
};
struct Shmctl {  // shmctl S lock|unlock|rmid
  std::string seg;
  int cmd = 0;  // IPC_RMID 0, SHM_LOCK 11, SHM_UNLOCK 12
  std::string cmd_name;
};
struct Writeback {};   // writeback: wait for the swap writes in flight
struct ShrinkSlab {};  // shrink-slab: run every shrinker once (2 into /proc/sys/vm/drop_caches)
struct Khugepaged {  // khugepaged [N]
  uint64_t scans = 1;
};
struct Advance {  // advance DURATION
  uint64_t ns = 0;
};
// inject SITE [order N] (times N|every N|probability P) [after N]; inject SITE off
struct Inject {
  std::string site;
  InjectSpec spec;  // mode kOff for `inject SITE off`
};
struct CountersReset {};  // counters reset
struct CountersPrint {     // counters print [GLOB]: event counters and vmstat items as `#` lines
  std::string glob;        // empty: every non-zero one
};

// ---- address-space operations of a process ----
struct Mmap {  // P mmap R SIZE PROT private|shared [file=F[+OFF]] [hugetlb=2M|1G] [align=SIZE|at=ADDR|fixed=ADDR|noreplace=ADDR]
               //   [populate] [locked] [noreserve]
  // Where: the kernel's choice (kAny), a hint it may ignore (at=), MAP_FIXED
  // (fixed=: replaces what is there) or MAP_FIXED_NOREPLACE (noreplace=).
  enum class Place : uint8_t { kAny, kHint, kFixed, kNoReplace };
  std::string proc, region;
  Place place = Place::kAny;
  AddrExpr place_addr;
  uint64_t size = 0;
  int prot = 0;
  bool shared = false;
  std::string file;  // empty: anonymous
  uint64_t file_off = 0;
  unsigned hugetlb_shift = 0;  // 21 or 30
  uint64_t align = 0;
  int map_flags = 0;  // MAP_POPULATE, MAP_LOCKED, MAP_NORESERVE
};
struct Shmat {  // P shmat R S [ro]
  std::string proc, region, seg;
  bool read_only = false;  // SHM_RDONLY
};
struct Shmdt {  // P shmdt ADDR
  std::string proc;
  AddrExpr addr;
};
struct Munmap {  // P munmap ADDR SIZE
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
};
struct Mprotect {  // P mprotect ADDR SIZE PROT
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  int prot = 0;
};
struct Madvise {  // P madvise ADDR SIZE ADVICE
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  int advice = 0;
  std::string advice_name;
};
struct Mremap {  // P mremap ADDR OLD NEW R [to=ADDR]
  std::string proc;
  AddrExpr addr;
  uint64_t old_size = 0, new_size = 0;
  std::string region;
  std::optional<AddrExpr> to;  // MREMAP_FIXED
  bool dontunmap = false;      // MREMAP_DONTUNMAP
};
struct Mlock {  // P mlock ADDR SIZE [onfault] | P munlock ADDR SIZE
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  bool unlock = false;
  bool onfault = false;  // mlock2(MLOCK_ONFAULT)
};
struct Mseal {  // P mseal ADDR SIZE
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
};
struct Mlockall {  // P mlockall current|future|onfault,... | P munlockall
  std::string proc;
  int flags = 0;  // MCL_*; 0: munlockall
};
struct ClearSoftDirty {  // P clear-soft-dirty
  std::string proc;
};
struct ThpDisable {  // P thp-disable yes|no [except-advised]
  std::string proc;
  bool disable = false;
  bool except_advised = false;
};
struct UffdRegister {  // P userfaultfd ADDR SIZE missing|wp|missing,wp
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  bool missing = false, wp = false;
};
struct UffdWp {  // P uffd-wp ADDR SIZE on|off
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  bool on = false;
};

// ---- CPU accesses ----
struct Write {  // P write ADDR SIZE BYTE
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  uint8_t byte = 0;
};
struct Read {  // P read ADDR SIZE [BYTE]
  std::string proc;
  AddrExpr addr;
  uint64_t size = 0;
  std::optional<uint8_t> byte;  // every byte read must be this one
};

// ---- GUP and its handles ----
struct VmRead {  // P vm-read Q ADDR SIZE LOCAL: process_vm_readv of Q's range into P's LOCAL
  std::string proc, target;
  AddrExpr remote;
  uint64_t size = 0;
  AddrExpr local;
};
struct Gup {  // P gup H ADDR NPAGES FLAGS
  std::string proc, handle;
  AddrExpr addr;
  uint64_t nr_pages = 0;
  GupEntry entry = GupEntry::kGetUserPages;
  unsigned gup_flags = 0;  // foll::*
};
struct HandleWrite {  // H write OFFSET SIZE BYTE
  std::string handle;
  uint64_t offset = 0, size = 0;
  uint8_t byte = 0;
};
struct HandleRead {  // H read OFFSET SIZE BYTE
  std::string handle;
  uint64_t offset = 0, size = 0;
  uint8_t byte = 0;
};
struct Unpin {  // unpin H [dirty]
  std::string handle;
  bool dirty = false;
};
struct Dump {  // P dump D ADDR SIZE
  std::string proc, dump;
  AddrExpr addr;
  uint64_t size = 0;
};

// ---- introspection: state printed into the TAP output as `#` lines ----
enum class PrintWhat { kSmaps, kPagetable, kFolio };
const char* print_what_name(PrintWhat w);
struct Print {  // P print smaps|pagetable [ADDR SIZE], P print folio ADDR
  std::string proc;
  PrintWhat what = PrintWhat::kSmaps;
  std::optional<AddrExpr> addr;  // none: the whole address space
  uint64_t size = 0;             // with addr (folio: one page)
};

// ---- outcome ----
struct Check {};
struct Skip {  // skip REASON
  std::string reason;
};
struct Xfail {  // xfail REASON
  std::string reason;
};

// ---- expectations ----
struct ExpectHandle {  // expect H N|-ERRNO
  std::string handle;
  int64_t ret = 0;
};
struct ExpectDump {  // expect D pages N holes M
  std::string dump;
  uint64_t pages = 0, holes = 0;
};
struct ExpectLocked {  // expect P locked SIZE: the bytes of the VM_LOCKED VMAs (VmLck)
  std::string proc;
  uint64_t size = 0;
};
struct ExpectFaults {  // expect P minflt|majflt N: the faults counted to P (getrusage)
  std::string proc;
  bool major = false;
  uint64_t count = 0;
};
struct ExpectRss {  // expect P rss anon|file|shmem SIZE
  std::string proc, kind;
  uint64_t size = 0;
};
struct ExpectSysfs {  // expect sysfs PATH N
  std::string path;
  int64_t value = 0;
};
struct ExpectVmstat {  // expect vmstat NAME N
  std::string item;
  int64_t value = 0;
};
struct ExpectCounter {  // expect counter NAME N
  std::string counter;
  int64_t value = 0;
};
struct ExpectMapped {  // expect P ADDR mapped pte|pmd|pud|none
  std::string proc;
  AddrExpr addr;
  std::string level;
};
struct ExpectOrder {  // expect P ADDR order N
  std::string proc;
  AddrExpr addr;
  int64_t order = 0;
};
// expect P ADDR exclusive|pinned|zero|swapped|soft-dirty|uffd-wp yes|no
enum class PageBit { kExclusive, kPinned, kZero, kSwapped, kSoftDirty, kUffdWp, kGuard };
const char* page_bit_name(PageBit b);
struct ExpectPageBit {
  std::string proc;
  AddrExpr addr;
  PageBit bit = PageBit::kExclusive;
  bool yes = false;
};
struct ExpectSame {  // expect P ADDR same|differ Q ADDR
  std::string proc;
  AddrExpr addr;
  std::string other_proc;
  AddrExpr other_addr;
  bool same = false;
};
// expect P smaps ADDR FIELD SIZE: a size field of the smaps block of the
// VMA containing ADDR; expect P status FIELD SIZE: one of /proc/PID/status.
struct ExpectProcField {
  std::string proc;
  bool smaps = false;  // else status
  AddrExpr addr;       // smaps only
  std::string field;
  uint64_t size = 0;
};
struct Remember {  // P remember ADDR: the frame mapped there, for ExpectFrame
  std::string proc;
  AddrExpr addr;
};
// expect P ADDR same-frame|other-frame: the frame mapped at ADDR is (not)
// the one `P remember ADDR` found there.
struct ExpectFrame {
  std::string proc;
  AddrExpr addr;
  bool same = false;
};
struct ExpectViolation {  // expect violation TEXT
  std::string text;
};

// `race [pct=D|dfs=C|schedule="..."] [runs=N] [seed=S] [filter=off]`, then
// `thread NAME` and its statements, for each thread, then `end`: the
// statements of each thread run on a thread of the explorer
// (include/mmlab/explore.h), interleaved as the strategy chooses, each run
// of the whole test on a fresh System. The block is one statement of its
// test (held by pointer: it holds statements).
struct RaceBlock;
struct Race {
  std::shared_ptr<RaceBlock> block;
};

}  // namespace stmt

using StmtBody =
    std::variant<stmt::Sysfs, stmt::Tune, stmt::Proc, stmt::Fork, stmt::Exit, stmt::File, stmt::Truncate, stmt::PunchHole, stmt::Shmget, stmt::Shmctl, stmt::Swap, stmt::Writeback, stmt::ShrinkSlab, stmt::Khugepaged,
                 stmt::Advance, stmt::Inject, stmt::CountersReset, stmt::CountersPrint, stmt::Mmap, stmt::Shmat, stmt::Shmdt, stmt::Munmap, stmt::Mprotect, stmt::Madvise, stmt::Mremap, stmt::Mlock, stmt::Mlockall, stmt::Mseal,
                 stmt::ClearSoftDirty, stmt::ThpDisable, stmt::UffdRegister, stmt::UffdWp, stmt::Write, stmt::Read,
                 stmt::Gup, stmt::VmRead, stmt::HandleWrite, stmt::HandleRead, stmt::Unpin, stmt::Dump, stmt::Print, stmt::Check, stmt::Skip,
                 stmt::Xfail, stmt::ExpectHandle, stmt::ExpectDump, stmt::ExpectRss, stmt::ExpectLocked, stmt::ExpectFaults, stmt::ExpectSysfs,
                 stmt::ExpectVmstat, stmt::ExpectCounter, stmt::ExpectMapped, stmt::ExpectOrder, stmt::ExpectPageBit,
                 stmt::ExpectSame, stmt::ExpectViolation, stmt::ExpectProcField, stmt::Remember, stmt::ExpectFrame, stmt::Race>;

// `when KEY=V1[,V2...]`: the statement runs only while the tune key has one
// of the values.
struct WhenCond {
  std::string key;
  std::vector<std::string> values;
};

// A statement and what every kind shares: where it is, its `when`
// conditions and its `expect-error` prefix.
struct Stmt {
  StmtBody body;
  std::string file;
  int line = 0;
  std::string text;            // the source line, for diagnostics
  std::vector<WhenCond> when;  // all must hold
  // expect-error: the errno (negative) or signal name, and the statement.
  bool expect_error = false;
  int expect_errno = 0;
  std::string expect_signal;

  template <class T>
  const T* as() const {
    return std::get_if<T>(&body);
  }
};

namespace stmt {
struct RaceThread {
  std::string name;
  int line = 0;
  std::vector<Stmt> stmts;
};
struct RaceBlock {
  enum class Mode : uint8_t { kPct, kDfs, kSchedule };
  Mode mode = Mode::kPct;
  int depth = 0;  // pct=D; 0: cycle 2..3
  int bound = 2;  // dfs=C
  std::string schedule;  // schedule="...": a schedule line, or a directed schedule (T@label U T)
  int runs = 0;  // runs=N; 0: 1000 for PCT, no limit for DFS
  uint64_t seed = 1;
  bool filter = true;
  int line = 0;  // of `race`
  int schedule_col = 1;  // of its schedule= option
  std::vector<RaceThread> threads;
};
}  // namespace stmt

struct TestCase {
  std::string name;
  std::string file;
  int line = 0, col = 0;  // of NAME in `test NAME`
  // The selftest's own text of a generated replay: a `# [RUN] ...` comment
  // line right after `test NAME`, printed before the result so that a real
  // selftest log can be diffed against mmlab's.
  std::string run_text;
  std::vector<Stmt> stmts;
};

struct ScenarioFileAst {
  std::string path;
  std::vector<Stmt> prelude;
  std::vector<TestCase> tests;
};

struct ScenarioProgram {
  std::vector<ScenarioFileAst> files;
};

}  // namespace mmlab
