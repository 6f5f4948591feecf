// The converter of `mmlab record` (tools/mmlab/record/perf_convert.h) on a
// checked-in capture and on hand-written lines: exact counts, the rules of
// docs/RECORD.md, and malformed input refused with the line named.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "record/perf_convert.h"

namespace mmlab::record {
namespace {

constexpr uint64_t kPage = 4096, kMapAnonymous = 0x20;

std::string capture(const char* name) {
  std::ifstream in(std::string(MMLAB_SOURCE_DIR) + "/tests/record/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Trace convert_ok(const std::string& text, ConvertStats* s = nullptr) {
  Trace t;
  std::string err;
  EXPECT_EQ(convert_perf_script(text, &t, s, &err), 0) << err;
  return t;
}

std::string refused(const std::string& text) {
  Trace t;
  std::string err;
  EXPECT_NE(convert_perf_script(text, &t, nullptr, &err), 0) << text;
  return err;
}

// Issue 31's acceptance program (tests/record/cow_child.c) at 1/div: region
// A of 16384/div pages written, B of 1024/div read; after the fork the
// child writes 4096/div pages of A and the parent 2048/div others; after
// waitpid the parent writes 1024/div more of A and all of B. The trace must
// hold exactly those faults in A and B (the loader and libc add others).
void check_cow_child(const std::string& text, uint64_t div) {
  ASSERT_FALSE(text.empty());
  Trace t = convert_ok(text);
  const uint64_t a_pages = 16384 / div, b_pages = 1024 / div;
  uint64_t a = 0, b = 0;
  for (const Record& r : t.records)
    if (r.op == Op::kMmap && r.ret >= 0 && (r.d & kMapAnonymous)) {
      if (r.b == a_pages * kPage) a = r.a;
      if (r.b == b_pages * kPage) b = r.a;
    }
  ASSERT_TRUE(a && b);
  // (region, the task's first-seen rank, write, present) -> faults
  std::map<uint32_t, int> rank;
  std::map<std::tuple<char, int, bool, bool>, uint64_t> n;
  for (const Record& r : t.records) {
    if (!rank.count(r.tid)) rank[r.tid] = static_cast<int>(rank.size());
    if (r.op != Op::kFault) continue;
    const char region = r.a >= a && r.a < a + a_pages * kPage ? 'A' : r.a >= b && r.a < b + b_pages * kPage ? 'B' : '-';
    if (region != '-') n[{region, rank[r.tid], (r.flags & kFaultWrite) != 0, (r.flags & kFaultPresent) != 0}]++;
  }
  using K = std::tuple<char, int, bool, bool>;
  // The last B line: B's pages hold the zero page after the reads where
  // the recording host maps it; else the read allocated writable pages.
  std::map<K, uint64_t> want = {{K{'A', 0, true, false}, a_pages},
                                {K{'A', 0, true, true}, (2048 + 1024) / div},
                                {K{'A', 1, true, true}, 4096 / div},
                                {K{'B', 0, false, false}, b_pages}};
  if (t.header.host.zero_page) want[K{'B', 0, true, true}] = b_pages;
  EXPECT_EQ(n, want);
  int forks = 0, execs = 0;
  uint64_t faults = 0;
  for (const Record& r : t.records) {
    forks += r.op == Op::kFork;
    execs += r.op == Op::kExec;
    faults += r.op == Op::kFault;
  }
  EXPECT_EQ(forks, 1);
  EXPECT_EQ(execs, 1);
  EXPECT_EQ(t.header.lost, 0u);
  // The counting event (from the exec on) saw what the trace holds.
  EXPECT_NEAR(static_cast<double>(t.header.minflt + t.header.majflt), static_cast<double>(faults), 1.0);
  EXPECT_EQ(t.header.host.arch, "x86_64");
  EXPECT_FALSE(t.header.command.empty());
}

// tests/record/cow_child_128.perf.txt: `mmlab record --keep-script F --
// cow_child 128`, the program linked statically (fewer loader faults, a
// smaller file), on a host that maps the zero page.
TEST(RecordConvertTest, CowChildCaptureHoldsExactlyTheFaultsOfItsRegions) {
  const std::string text = capture("cow_child_128.perf.txt");
  check_cow_child(text, 128);
  Trace t = convert_ok(text);
  ASSERT_EQ(t.files.size(), 1u);  // the static binary
  EXPECT_EQ(t.files[0].cls, FileClass::kExt4);
  EXPECT_GT(t.files[0].size, 0u);
}

// A capture made now (ctest record.cow_child_live, root only): the path in
// MMLAB_RECORD_CAPTURE, the divisor in MMLAB_RECORD_DIVISOR.
TEST(RecordConvertTest, LiveCowChildCapture) {
  const char* path = std::getenv("MMLAB_RECORD_CAPTURE");
  const char* div = std::getenv("MMLAB_RECORD_DIVISOR");
  if (!path || !div) GTEST_SKIP() << "no MMLAB_RECORD_CAPTURE (ctest record.cow_child_live sets it)";
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  check_cow_child(ss.str(), std::strtoull(div, nullptr, 10));
}

TEST(RecordConvertTest, RecordsAreInTimeOrderAndRelativeToTheFirst) {
  Trace t = convert_ok(capture("cow_child_128.perf.txt"));
  ASSERT_FALSE(t.records.empty());
  EXPECT_EQ(t.records.front().op, Op::kExec);
  EXPECT_EQ(t.records.front().t_ns, 0u);
  for (size_t i = 1; i < t.records.size(); i++) ASSERT_LE(t.records[i - 1].t_ns, t.records[i].t_ns) << i;
}

// A small hand-made recording: exec of task 10, its layout, an mmap whose
// MMAP2 reports a merged VMA, a fork whose child's fault carries an earlier
// timestamp than the parent's task_newtask.
const char* const kLines = R"(c 10/10 [000] 100.000000000: sched:sched_prepare_exec: interp=/bin/x filename=/bin/x pid=10 comm=sh
c 10/10 [-01] 100.000000100: PERF_RECORD_MMAP2 10/10: [0x400000(0x2000) @ 0 fe:00 77 0]: r-xp /bin/x
c 10/10 [-01] 100.000000200: PERF_RECORD_MMAP2 10/10: [0x7ffff000(0x1000) @ 0x7ffff000 00:00 0 0]: rw-p [stack]
c 10/10 [000] 100.000000300: sched:sched_process_exec: filename=/bin/x pid=10 old_pid=10
c 10/10 [000] 100.000001000: syscalls:sys_enter_mmap: addr: 0x00000000, len: 0x00002000, prot: 0x00000001, flags: 0x00000002, fd: 0x00000003, off: 0x00003000
c 10/10 [-01] 100.000001100: PERF_RECORD_MMAP2 10/10: [0x10000000(0x5000) @ 0x1000 00:05 9 0]: r--p /memfd:buf (deleted)
c 10/10 [000] 100.000001200: syscalls:sys_exit_mmap: 0x10002000
c 11/11 [001] 100.000001900: exceptions:page_fault_user: address=0x10002010 ip=0x400010 error_code=0x4
c 10/10 [000] 100.000002000: task:task_newtask: pid=11 comm=c clone_flags=1200011 oom_score_adj=0
c 10/10 [000] 100.000003000: exceptions:page_fault_user: address=0xffff888000000000 ip=0x400010 error_code=0x6
c 11/11 [001] 100.000004000: sched:sched_process_exit: comm=c pid=11 prio=120 group_dead=true
)";

TEST(RecordConvertTest, ConverterRules) {
  ConvertStats s;
  Trace t = convert_ok(kLines, &s);
  std::vector<Op> ops;
  for (const Record& r : t.records) ops.push_back(r.op);
  // The child's fault moves after its fork; the kernel-address fault is dropped.
  EXPECT_EQ(ops, (std::vector<Op>{Op::kExec, Op::kLayout, Op::kLayout, Op::kMmap, Op::kFork, Op::kFault, Op::kExit}));
  EXPECT_EQ(s.reordered, 1u);
  EXPECT_EQ(s.dropped_kernel_addr, 1u);
  const Record& layout = t.records[1];
  EXPECT_EQ(layout.a, 0x400000u);
  EXPECT_EQ(layout.c, 5u);  // r-x
  const Record& m = t.records[3];
  // The range from the call, the offset from MMAP2: 0x1000 + (0x10002000 - 0x10000000).
  EXPECT_EQ(m.a, 0x10002000u);
  EXPECT_EQ(m.b, 0x2000u);
  EXPECT_EQ(m.e, 0x3000u);
  ASSERT_GE(m.file, 0);
  EXPECT_EQ(t.files[static_cast<size_t>(m.file)].cls, FileClass::kShmem);
  EXPECT_EQ(t.files[static_cast<size_t>(m.file)].size, 0x3000u + 0x2000u);  // no stat: the mapping's extent
  EXPECT_EQ(t.records[2].file, -1);  // [stack]
  const Record& fork = t.records[4];
  EXPECT_EQ(fork.tid, 11u);
  EXPECT_EQ(fork.a, 10u);
  EXPECT_EQ(fork.b, 0x1200011u);
  EXPECT_GE(t.records[5].t_ns, fork.t_ns);
}

// A thread's mmap and its fault, both timestamped before the parent's
// task_newtask: held, then converted after the fork, the call still paired.
TEST(RecordConvertTest, LinesBeforeTheTaskIsKnownAreConvertedAfterItsFork) {
  const std::string lines = std::string(kLines).substr(0, std::string(kLines).find("c 10/10 [000] 100.000001000")) +
                            R"(c 12/12 [001] 100.000000400: syscalls:sys_enter_mmap: addr: 0x00000000, len: 0x00001000, prot: 0x00000003, flags: 0x00000022, fd: 0xffffffff, off: 0x00000000
c 12/12 [001] 100.000000500: syscalls:sys_exit_mmap: 0x20000000
c 12/12 [001] 100.000000600: exceptions:page_fault_user: address=0x20000008 ip=0x400010 error_code=0x6
c 10/10 [000] 100.000000900: task:task_newtask: pid=12 comm=c clone_flags=3d0f00 oom_score_adj=0
)";
  ConvertStats s;
  Trace t = convert_ok(lines, &s);
  std::vector<Op> ops;
  for (const Record& r : t.records) ops.push_back(r.op);
  EXPECT_EQ(ops, (std::vector<Op>{Op::kExec, Op::kLayout, Op::kLayout, Op::kFork, Op::kMmap, Op::kFault}));
  EXPECT_EQ(t.records[3].b, 0x3d0f00u);  // a thread: CLONE_VM | CLONE_THREAD | ...
  EXPECT_EQ(t.records[4].a, 0x20000000u);
  EXPECT_EQ(s.unmatched_exits, 0u);
  EXPECT_EQ(s.dropped_no_mm, 0u);
  for (size_t i = 1; i < t.records.size(); i++) EXPECT_LE(t.records[i - 1].t_ns, t.records[i].t_ns);
}

TEST(RecordConvertTest, FileClasses) {
  const std::vector<std::string> tmpfs = {"/dev/shm"}, huge = {"/mnt/huge"};
  EXPECT_EQ(file_class_of("/dev/shm/x", tmpfs, huge), FileClass::kShmem);
  EXPECT_EQ(file_class_of("/dev/shmx", tmpfs, huge), FileClass::kExt4);
  EXPECT_EQ(file_class_of("/SYSV00000000 (deleted)", tmpfs, huge), FileClass::kShmem);
  EXPECT_EQ(file_class_of("/memfd:a", tmpfs, huge), FileClass::kShmem);
  EXPECT_EQ(file_class_of("/var/lib/db (deleted)", tmpfs, huge), FileClass::kShmem);
  EXPECT_EQ(file_class_of("/mnt/huge/f", tmpfs, huge), FileClass::kHugetlb);
  EXPECT_EQ(file_class_of("/usr/lib/libc.so.6", tmpfs, huge), FileClass::kExt4);
}

TEST(RecordConvertTest, MalformedLinesAreRefusedNamingTheLine) {
  EXPECT_NE(refused("garbage without a header\n").find("line 1:"), std::string::npos);
  EXPECT_NE(refused(std::string(kLines) + "c 10/10 [000] 1.5: x: y\n").find("line 12:"), std::string::npos);
  EXPECT_NE(refused("c 10/10 [000] 100.000000000: sched:sched_prepare_exec: interp=/x\n").find("pid="), std::string::npos);
  EXPECT_NE(refused(std::string(kLines) + "c 10/10 [000] 101.000000000: exceptions:page_fault_user: address=zz error_code=0x4\n")
                .find("line 12: a page fault"),
            std::string::npos);
  EXPECT_NE(refused("c 10/10 [-01] 1.000000000: PERF_RECORD_MMAP2 10/10: [0x400000 @ 0]: r-xp /x\n").find("MMAP2"), std::string::npos);
  EXPECT_NE(refused("# mmlab command not-json\n").find("line 1: # mmlab command"), std::string::npos);
  EXPECT_NE(refused("c 10/10 [000] 1.000000000: task:task_newtask: pid=3 clone_flags=xyz\n").find("clone_flags"), std::string::npos);
}

// Every prefix of every line of the capture, and every line with one byte
// changed, converts or is refused: never a crash.
TEST(RecordConvertTest, DamagedCapturesNeverCrash) {
  const std::string text = capture("cow_child_128.perf.txt");
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line) && n < 400; n++) {
    for (size_t cut = 0; cut <= line.size(); cut += 7) {
      Trace t;
      std::string err;
      (void)convert_perf_script(std::string(kLines) + line.substr(0, cut) + "\n", &t, nullptr, &err);
      std::string bent = line;
      if (cut < bent.size()) bent[cut] = static_cast<char>(bent[cut] ^ 0x15);
      (void)convert_perf_script(std::string(kLines) + bent + "\n", &t, nullptr, &err);
    }
  }
  EXPECT_GT(n, 100);
}

}  // namespace
}  // namespace mmlab::record
