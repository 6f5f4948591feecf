// The recorded-trace format and its replay (tools/mmlab/record/): the
// encoding round-trips and refuses damaged input, and a replay of a small
// fork-and-write program gives the faults, copies and RSS that program
// implies.
#include <gtest/gtest.h>

#include "mmlab/system.h"
#include "record/fidelity.h"
#include "record/mmtrace.h"
#include "record/replay.h"

namespace mmlab::record {
namespace {

constexpr uint64_t kA = 0x10000000, kB = 0x20000000;
constexpr uint64_t kPagesA = 256, kPagesB = 64;
constexpr uint32_t kParent = 100, kChild = 101;

class TraceBuilder {
 public:
  Trace t;
  uint64_t now = 1000;
  Record& add(Op op, uint32_t tid) {
    now += 1500;
    Record r;
    r.t_ns = now;
    r.tid = tid;
    r.cpu = static_cast<uint16_t>(tid % 2);
    r.op = op;
    t.records.push_back(r);
    return t.records.back();
  }
  void fault(uint32_t tid, uint64_t addr, uint8_t flags) { add(Op::kFault, tid).a = addr; t.records.back().flags = flags; }
  void map(uint32_t tid, Op op, uint64_t addr, uint64_t len) {
    Record& r = add(op, tid);
    r.a = addr;
    r.b = len;
    r.c = PROT_READ | PROT_WRITE;
    r.d = MAP_PRIVATE | MAP_ANONYMOUS;
    r.ret = op == Op::kMmap ? static_cast<int64_t>(addr) : 0;
  }
  void fork(uint32_t parent, uint32_t child, uint64_t clone_flags) {
    Record& r = add(Op::kFork, child);
    r.a = parent;
    r.b = clone_flags;
  }
  void pages(uint32_t tid, uint64_t base, uint64_t first, uint64_t n, uint8_t flags) {
    for (uint64_t i = first; i < first + n; i++) fault(tid, base + i * 4096, flags);
  }
};

// tests/record/cow_child.c at a sixty-fourth of its size: A written, B read,
// a fork; the child writes 64 pages of A while the parent writes 32 others;
// the child exits; the parent writes 16 more pages of A and all of B.
Trace cow_child_trace(bool zero_page) {
  TraceBuilder b;
  b.t.header.command = {"cow_child", "16"};
  b.t.header.host.zero_page = zero_page;
  b.t.header.host.thp["enabled"] = "always madvise [never]";
  b.t.comm[kParent] = "cow_child";
  b.t.comm[kChild] = "cow_child";
  b.add(Op::kExec, kParent);
  b.map(kParent, Op::kLayout, 0x400000, 0x1000);
  b.map(kParent, Op::kMmap, kA, kPagesA * 4096);
  b.map(kParent, Op::kMmap, kB, kPagesB * 4096);
  b.pages(kParent, kA, 0, kPagesA, kFaultWrite);
  b.pages(kParent, kB, 0, kPagesB, 0);
  b.fork(kParent, kChild, 0x11);  // SIGCHLD: a plain fork
  b.pages(kChild, kA, 0, 64, kFaultWrite | kFaultPresent);
  b.pages(kParent, kA, 64, 32, kFaultWrite | kFaultPresent);
  b.add(Op::kExit, kChild);
  b.pages(kParent, kA, 96, 16, kFaultWrite | kFaultPresent);
  b.pages(kParent, kB, 0, kPagesB, kFaultWrite | kFaultPresent);
  b.add(Op::kExit, kParent);
  const int64_t faults = kPagesA + kPagesB + 64 + 32 + 16 + kPagesB;
  b.t.header.minflt = faults + 1;  // exec's argv copy
  b.t.header.majflt = 0;
  return b.t;
}

void expect_same(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.header.command, b.header.command);
  EXPECT_EQ(a.header.host.zero_page, b.header.host.zero_page);
  EXPECT_EQ(a.header.host.thp, b.header.host.thp);
  EXPECT_EQ(a.header.minflt, b.header.minflt);
  EXPECT_EQ(a.comm, b.comm);
  ASSERT_EQ(a.records.size(), b.records.size());
  for (size_t i = 0; i < a.records.size(); i++) {
    const Record &x = a.records[i], &y = b.records[i];
    EXPECT_EQ(x.t_ns / 1000 * 1000, y.t_ns) << i;
    EXPECT_EQ(x.tid, y.tid) << i;
    EXPECT_EQ(x.cpu, y.cpu) << i;
    EXPECT_EQ(x.op, y.op) << i;
    EXPECT_EQ(x.flags, y.flags) << i;
    EXPECT_EQ(x.op == Op::kFault ? x.a & ~4095ull : x.a, y.a) << i;
    EXPECT_EQ(x.b, y.b) << i;
    EXPECT_EQ(x.c, y.c) << i;
    EXPECT_EQ(x.d, y.d) << i;
    EXPECT_EQ(x.ret, y.ret) << i;
  }
}

TEST(MmtraceFormat, RoundTrips) {
  Trace t = cow_child_trace(false);
  t.files.push_back(FileEntry{"/usr/lib/libc.so.6", 2049, 1234, 2 << 20, FileClass::kExt4});
  Record& m = t.records[2];
  m.file = 0;
  m.e = 0x3000;
  t.records[10].a += 0x123;  // a fault keeps only its page
  t.records[11].t_ns += 100ull << 40;  // a long gap, and time going back after it
  Trace back;
  std::string err;
  ASSERT_EQ(decode_mmtrace(encode_mmtrace(t), &back, &err), 0) << err;
  expect_same(t, back);
  EXPECT_EQ(back.files.at(0).path, "/usr/lib/libc.so.6");
  EXPECT_EQ(back.records[2].file, 0);
  EXPECT_EQ(back.records[2].e, 0x3000u);
}

TEST(MmtraceFormat, AFaultOfASweepTakesThreeBytes) {
  TraceBuilder b;
  const size_t empty = encode_mmtrace(b.t).size();
  b.pages(7, kA, 0, 10000, kFaultWrite);
  const size_t bytes = encode_mmtrace(b.t).size() - empty;
  // The head byte, a time delta of 1 or 2 units, a page delta of 1; the
  // first fault also names its task and CPU and its page in full.
  EXPECT_LE(bytes, 3u * 10000 + 16);
  EXPECT_GE(bytes, 3u * 10000);
}

TEST(MmtraceFormat, DamagedInputIsRefusedWithTheByteOffset) {
  const std::string good = encode_mmtrace(cow_child_trace(true));
  Trace t;
  std::string err;
  for (size_t len = 0; len < good.size(); len += 7) {
    err.clear();
    EXPECT_EQ(decode_mmtrace(good.substr(0, len), &t, &err), -1) << len;
    EXPECT_NE(err.find("byte "), std::string::npos) << err;
  }
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_EQ(decode_mmtrace(bad, &t, &err), -1);
  EXPECT_NE(err.find("magic"), std::string::npos) << err;
  EXPECT_EQ(decode_mmtrace(good + "x", &t, &err), -1);
  EXPECT_NE(err.find("after the last record"), std::string::npos) << err;
  // A record count far beyond the file is refused before anything is sized
  // from it: the count sits right after the (empty) tables.
  Trace empty;
  std::string huge = encode_mmtrace(empty);
  huge.back() = '\xff';
  huge += std::string(8, '\xff') + "\x01";
  EXPECT_EQ(decode_mmtrace(huge, &t, &err), -1);
  EXPECT_NE(err.find("exceeds the file"), std::string::npos) << err;
}

// Every replay ends with the invariant checker clean.
ReplayResult replay_ok(const Trace& t) {
  ReplayResult r;
  std::string err;
  EXPECT_EQ(replay(t, ReplayOptions{}, &r, &err), 0) << err;
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  return r;
}

int64_t counter(const ReplayResult& r, const std::string& n) { return r.counters.count(n) ? r.counters.at(n) : -1; }

// Without the zero page (as this machine kind's kernels are booted): the
// writes while both live copy, the ones after the child's exit reuse.
TEST(Replay, ForkAndWriteWithoutTheZeroPage) {
  const ReplayResult r = replay_ok(cow_child_trace(false));
  EXPECT_EQ(r.traced.total, 496);
  EXPECT_EQ(r.traced.anon_first_touch, 320);
  EXPECT_EQ(r.traced.private_present_write, 176);
  EXPECT_EQ(r.model_faults_by_tasks, 496);
  EXPECT_EQ(counter(r, "fault.anon"), 320);
  EXPECT_EQ(counter(r, "fault.zero"), 0);
  EXPECT_EQ(counter(r, "fault.wp_copy"), 96);
  EXPECT_EQ(counter(r, "fault.wp_reuse"), 80);
  EXPECT_EQ(r.sigsegv + r.sigbus + r.call_divergences + r.unknown_addresses, 0);
  ASSERT_EQ(r.mms.size(), 2u);
  const MmReport& child = r.mms[1];
  EXPECT_EQ(child.tid, kChild);
  EXPECT_EQ(child.rss_anon_at_exit, 320 * 4096);
  // Its own 64 copies, and the 32 pages the parent copied away from it,
  // which only the child maps now.
  EXPECT_EQ(child.private_dirty_at_exit, 96 * 4096);
  EXPECT_EQ(r.mms[0].peak_rss_anon, 320 * 4096);
  for (const FidelityLine& l : fidelity_lines(cow_child_trace(false), r))
    if (l.cls == FidelityClass::kExact) {
      EXPECT_TRUE(l.holds || !l.compared) << format_fidelity_line(l);
    }
}

// With it, B's reads map the zero page and its writes copy it.
TEST(Replay, ForkAndWriteWithTheZeroPage) {
  const ReplayResult r = replay_ok(cow_child_trace(true));
  EXPECT_EQ(r.model_faults_by_tasks, 496);
  EXPECT_EQ(counter(r, "fault.anon"), 256);
  EXPECT_EQ(counter(r, "fault.zero"), 64);
  EXPECT_EQ(counter(r, "fault.wp_copy"), 160);
  EXPECT_EQ(counter(r, "fault.wp_reuse"), 16);
}

// A fault the model does not take counts against the exact lines.
TEST(Replay, FidelityNamesAFaultCountThatDoesNotHold) {
  Trace t = cow_child_trace(false);
  t.header.minflt += 100;
  const ReplayResult r = replay_ok(t);
  bool seen = false;
  for (const FidelityLine& l : fidelity_lines(t, r))
    if (l.what.find("minflt") != std::string::npos) {
      seen = true;
      EXPECT_FALSE(l.holds) << format_fidelity_line(l);
    }  // the others hold
  EXPECT_TRUE(seen);
}

// A thread (CLONE_VM | CLONE_THREAD) shares its parent's mm: its writes to
// the parent's pages are present-page no-ops, not new address spaces.
TEST(Replay, AThreadSharesTheAddressSpace) {
  TraceBuilder b;
  b.add(Op::kExec, kParent);
  b.map(kParent, Op::kMmap, kA, 16 * 4096);
  b.fork(kParent, kChild, kCloneVm | kCloneThread);
  b.pages(kChild, kA, 0, 16, kFaultWrite);
  b.add(Op::kExit, kChild);
  b.pages(kParent, kA, 0, 16, kFaultWrite);  // already written by the thread
  b.add(Op::kExit, kParent);
  const ReplayResult r = replay_ok(b.t);
  EXPECT_EQ(r.mms.size(), 1u);
  EXPECT_EQ(r.model_faults_by_tasks, 16);
  EXPECT_EQ(r.traced.total, 32);
}

// Two threads of one mm fault on one page back to back: the model maps it
// once, and the second fault is counted apart, not missed.
TEST(Replay, ASecondThreadsFaultOnTheSamePageIsCountedApart) {
  TraceBuilder b;
  b.add(Op::kExec, kParent);
  b.map(kParent, Op::kMmap, kA, 4 * 4096);
  b.fork(kParent, kChild, kCloneVm | kCloneThread);
  b.fault(kParent, kA, kFaultWrite);
  b.fault(kChild, kA, kFaultWrite);
  b.fault(kChild, kA + 4096, kFaultWrite);
  b.add(Op::kExit, kChild);
  b.add(Op::kExit, kParent);
  b.t.header.minflt = 2;
  b.t.header.majflt = 0;
  const ReplayResult r = replay_ok(b.t);
  EXPECT_EQ(r.traced.total, 3);
  EXPECT_EQ(r.traced.concurrent_noops, 1);
  EXPECT_EQ(r.traced.anon_first_touch, 2);
  EXPECT_EQ(r.model_faults_by_tasks, 2);
  for (const FidelityLine& l : fidelity_lines(b.t, r)) {
    if (l.cls == FidelityClass::kExact) {
      EXPECT_TRUE(l.holds || !l.compared) << format_fidelity_line(l);
    }
  }
}

// A kernel-mode fault repeating the task's previous one (page faults
// disabled) is counted apart.
TEST(Replay, RepeatedKernelModeFaultsAreCountedApart) {
  TraceBuilder b;
  b.add(Op::kExec, kParent);
  b.map(kParent, Op::kMmap, kA, 4 * 4096);
  for (int i = 0; i < 3; i++) b.fault(kParent, kA, kFaultKernel);
  b.add(Op::kExit, kParent);
  const ReplayResult r = replay_ok(b.t);
  EXPECT_EQ(r.traced.total, 3);
  EXPECT_EQ(r.traced.kernel_repeats, 2);
  EXPECT_EQ(r.model_faults_by_tasks, 1);
}

// Exec's argument page on the stack is present before any fault: a child
// forked later takes a CoW fault there, which the replay reproduces by
// writing the page at the exec.
TEST(Replay, ExecStackPagesArePopulatedAtTheExec) {
  TraceBuilder b;
  const uint64_t stack = 0x7ffff0000000;
  b.add(Op::kExec, kParent);
  b.map(kParent, Op::kLayout, stack, 8 * 4096);
  b.fork(kParent, kChild, 0x11);
  b.fault(kChild, stack + 7 * 4096, kFaultWrite | kFaultPresent);
  b.add(Op::kExit, kChild);
  b.add(Op::kExit, kParent);
  const ReplayResult r = replay_ok(b.t);
  EXPECT_EQ(r.exec_populated, 1);
  EXPECT_EQ(r.traced.private_present_write, 1);
  EXPECT_EQ(counter(r, "fault.wp_copy") + counter(r, "fault.wp_reuse"), 1);
  EXPECT_EQ(r.model_faults_by_tasks, 1);
}

// Faults below the first stack page grow it; a fault far from every known
// mapping gets a page of its own and is counted.
TEST(Replay, StackGrowsAndUnknownAddressesAreCounted) {
  TraceBuilder b;
  b.add(Op::kExec, kParent);
  const uint64_t top = 0x7ffff0000000;
  for (uint64_t i = 1; i <= 8; i++) b.fault(kParent, top - i * 4096, kFaultWrite);
  b.fault(kParent, kB, 0);
  b.add(Op::kExit, kParent);
  const ReplayResult r = replay_ok(b.t);
  EXPECT_EQ(r.stack_pages_grown, 7);
  EXPECT_EQ(r.unknown_addresses, 1);
  EXPECT_EQ(r.sigsegv, 0);
  EXPECT_EQ(r.model_faults_by_tasks, 9);
}

}  // namespace
}  // namespace mmlab::record
