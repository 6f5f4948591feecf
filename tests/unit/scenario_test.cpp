// The scenario language: parse errors name file:line:column, TAP output and
// outcomes follow kselftest, expectations fail with a diagnostic.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string_view>

#include "mmlab/scenario.h"
#include "scenario/parse_internal.h"

namespace mmlab {
namespace {

std::string parse_error(const std::string& text) {
  std::string err;
  auto prog = scenario_parse_text("t.mms", text, &err);
  EXPECT_FALSE(prog) << "parsed: " << text;
  return err;
}

struct RunOut {
  std::vector<ScenarioResult> results;
  std::string tap;
};

RunOut run(const std::string& text, ScenarioOptions opt = {}) {
  std::string err;
  auto prog = scenario_parse_text("t.mms", text, &err);
  EXPECT_TRUE(prog) << err;
  RunOut r;
  if (!prog) return r;
  opt.ram_bytes = 256ull << 20;
  std::ostringstream out;
  r.results = scenario_run(*prog, opt, out);
  r.tap = out.str();
  return r;
}

// The `# time: N ms` lines are the only ones that differ between runs.
std::string without_time_lines(const std::string& tap) {
  std::istringstream in(tap);
  std::string out;
  for (std::string l; std::getline(in, l);)
    if (l.rfind("# time: ", 0) != 0) out += l + "\n";
  return out;
}

TEST(ScenarioParseTest, PrintStatements) {
  const std::string pre = "test a\nproc P\nP mmap A 64K rw private\n";
  EXPECT_EQ(parse_error(pre + "P print maps\n"), "t.mms:4:9: expected smaps, pagetable or folio");
  EXPECT_EQ(parse_error(pre + "P print folio\n"), "t.mms:4:15: expected an ADDR (R or R+SIZE)");
  EXPECT_EQ(parse_error(pre + "P print smaps A\n"), "t.mms:4:17: expected a SIZE");
  EXPECT_EQ(parse_error(pre + "P print folio A 4K\n"), "t.mms:4:17: expected the end of the statement");
  EXPECT_EQ(parse_error(pre + "counters show\n"), "t.mms:4:10: expected 'reset' or 'print'");
  EXPECT_EQ(parse_error(pre + "counters print a b\n"), "t.mms:4:18: expected the end of the statement");
  EXPECT_EQ(parse_error(pre + "Q print smaps\n").substr(0, 30), "t.mms:4:1: expected a process ");
  EXPECT_EQ(parse_error(pre + "P print pagetable B 4K\n").substr(0, 31), "t.mms:4:19: expected a region b");
  std::string err;
  EXPECT_TRUE(scenario_parse_text("t.mms", pre + "P print smaps\nP print pagetable A+4K 8K\ncounters print\ncounters print gup.*\n", &err))
      << err;
}

TEST(ScenarioRunTest, PrintStatementsShowTheState) {
  RunOut r = run(
      "test a\nproc P\nP mmap A 64K rw private\nP write A 8K 1\nP print smaps A 64K\nP print pagetable A 64K\n"
      "P print folio A+4K\nP print folio A+32K\ncounters print fault.*\ncounters print\n");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass);
  const std::string& t = r.tap;
  // Everything printed comes before the result line.
  const size_t ok = t.find("\nok 1 a\n");
  ASSERT_NE(ok, std::string::npos) << t;
  for (const char* want : {"# t.mms:5: P smaps 0x", "#   Rss:                   8 kB", "# t.mms:6: P pagetable 0x",
                           "#   address          level  pfn", "# t.mms:7: P folio 0x", "is page 0 of its folio",
                           "#   page: refcount:1 mapcount:1", "#   (nothing mapped)", "# counters fault.*:",
                           "#   counter fault.anon 2", "# counters (every non-zero one):", "#   vmstat "}) {
    const size_t at = t.find(want);
    EXPECT_NE(at, std::string::npos) << want << "\n" << t;
    EXPECT_LT(at, ok) << want;
  }
  // Two PTEs mapped (8K written), so the page table prints its header and two entries.
  const std::string pt = t.substr(t.find("# t.mms:6:"), t.find("# t.mms:7:") - t.find("# t.mms:6:"));
  size_t ptes = 0;
  for (size_t at = pt.find(" pte "); at != std::string::npos; at = pt.find(" pte ", at + 1)) ptes++;
  EXPECT_EQ(ptes, 2u) << pt;
}

// `expect P smaps|status` and `P remember` / `expect P ADDR same-frame|other-frame`.
TEST(ScenarioParseTest, ProcFieldAndFrameStatements) {
  const std::string pre = "test a\nproc P\nP mmap A 2M rw private\n";
  EXPECT_EQ(parse_error(pre + "expect P smaps A AnonHugePagez 2M\n").substr(0, 56),
            "t.mms:4:18: expected a smaps FIELD the model shows (Rss,");
  EXPECT_NE(parse_error(pre + "expect P smaps A AnonHugePagez 2M\n").find(", not 'AnonHugePagez'"), std::string::npos);
  EXPECT_EQ(parse_error(pre + "expect P status VmPTEs 4K\n").substr(0, 51), "t.mms:4:17: expected a status FIELD the model shows");
  EXPECT_EQ(parse_error(pre + "expect P smaps A Rss\n"), "t.mms:4:22: expected a SIZE");
  EXPECT_EQ(parse_error(pre + "expect P smaps Rss 4K\n").substr(0, 40), "t.mms:4:20: expected a smaps FIELD the m");
  EXPECT_EQ(parse_error(pre + "expect P status VmPTE 4K 1\n"), "t.mms:4:26: expected the end of the statement");
  EXPECT_EQ(parse_error(pre + "expect P A same-framez\n").substr(0, 29), "t.mms:4:12: expected mapped, ");
  EXPECT_EQ(parse_error(pre + "expect P A same-frame yes\n"), "t.mms:4:23: expected the end of the statement");
  EXPECT_EQ(parse_error(pre + "P remember\n"), "t.mms:4:12: expected an ADDR (R or R+SIZE)");
  EXPECT_EQ(parse_error(pre + "P remember B\n").substr(0, 32), "t.mms:4:12: expected a region bo");
  std::string err;
  EXPECT_TRUE(scenario_parse_text("t.mms", pre + "P remember A+4K\nexpect P A+4K same-frame\nexpect P A other-frame\n"
                                                 "expect P smaps A+8K LazyFree 0\nexpect P status VmPTE 4K\n", &err))
      << err;
}

TEST(ScenarioRunTest, ProcFieldAndFrameExpectationsCanFail) {
  RunOut r = run(
      "test field\nproc P\nP mmap A 64K rw private\nP write A 8K 1\nexpect P smaps A+4K Rss 8K\nexpect P smaps A Rss 4K\n"
      "test status\nproc P\nP mmap A 64K rw private\nP write A 8K 1\nexpect P status RssAnon 8K\nexpect P status RssAnon 0\n"
      "test novma\nproc P\nP mmap A 64K rw private\nexpect P smaps A+64K Rss 0\n"
      "test frame\nproc P\nP mmap A 64K rw private\nP write A 4K 1\nP remember A\nexpect P A same-frame\nexpect P A other-frame\n"
      "test unremembered\nproc P\nP mmap A 64K rw private\nP write A 4K 1\nexpect P A same-frame\n"
      "test nothing\nproc P\nP mmap A 64K rw private\nP remember A\n");
  ASSERT_EQ(r.results.size(), 6u);
  for (int i = 0; i < 6; i++) EXPECT_EQ(r.results[i].outcome, Outcome::kFail) << i << r.tap;
  auto first = [&](int i) { return r.results[i].diagnostics.empty() ? std::string() : r.results[i].diagnostics.front(); };
  EXPECT_EQ(first(0), "t.mms:6: expected P smaps A+0x0 Rss 0x1000, found 0x2000");
  EXPECT_EQ(first(1), "t.mms:12: expected P status RssAnon 0x0, found 0x2000");
  EXPECT_EQ(first(2).substr(0, 35), "t.mms:16: P smaps: no VMA contains ");
  EXPECT_EQ(first(3), "t.mms:23: expected P A+0x0 other-frame, found the same frame");
  EXPECT_EQ(first(4), "t.mms:28: no frame remembered at P A+0x0 (`P remember ADDR` first)");
  EXPECT_EQ(first(5), "t.mms:32: no frame mapped at P A+0x0 to remember");
}

TEST(ScenarioRunTest, AFailureShowsTheStateOfWhatItNamed) {
  RunOut r = run(
      "test order\nproc P\nP mmap A 64K rw private\nP write A 4K 1\nexpect P A order 9\n"
      "test counter\nproc P\nP mmap A 64K rw private\nP write A 4K 1\nexpect counter fault.anon 5\n"
      "test data\nproc P\nP mmap A 64K rw private\nP write A 4K 1\nP read A 4K 2\n");
  ASSERT_EQ(r.results.size(), 3u);
  auto text = [&](int i) {
    std::string s;
    for (auto& d : r.results[i].diagnostics) s += d + "\n";
    return s;
  };
  for (int i = 0; i < 3; i++) EXPECT_EQ(r.results[i].outcome, Outcome::kFail) << i;
  // The expectation's message first, then the state of the page it named.
  EXPECT_EQ(r.results[0].diagnostics.front(), "t.mms:5: expected P A+0x0 order 9, found 0");
  for (const char* want : {"state: P smaps 0x", "  Anonymous:             4 kB", "state: P pagetable 0x", " pte ",
                           "state: P folio 0x", "  page: refcount:1 mapcount:1"})
    EXPECT_NE(text(0).find(want), std::string::npos) << want << "\n" << text(0);
  EXPECT_EQ(text(0).find("state: counters"), std::string::npos);
  // An expectation on a counter: the counters, not a page.
  EXPECT_NE(text(1).find("state: counters (every non-zero one):\n  counter fault.anon 1\n"), std::string::npos) << text(1);
  EXPECT_EQ(text(1).find("state: P"), std::string::npos);
  // A data check that failed: the pages read.
  EXPECT_NE(text(2).find("state: P pagetable"), std::string::npos) << text(2);
  EXPECT_NE(r.tap.find("\n# state: P folio"), std::string::npos);
}

TEST(ScenarioRunTest, ReplayPrintsItsRunTextAndEveryTestItsTime) {
  RunOut r = run(
      "proc P\ntest cow-anon-basic-fork-base\n# [RUN] Basic COW after fork() ... with base page\nP mmap A 4K rw private\n"
      "test plain\n# not a RUN line\nP mmap A 4K rw private\n"
      "test late\nP mmap A 4K rw private\n# [RUN] only right after test NAME\n");
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].run_text, "[RUN] Basic COW after fork() ... with base page");
  EXPECT_EQ(r.results[1].run_text, "");
  EXPECT_EQ(r.results[2].run_text, "");
  EXPECT_NE(r.tap.find("\n# [RUN] Basic COW after fork() ... with base page\nok 1 cow-anon-basic-fork-base\n# time: "),
            std::string::npos)
      << r.tap;
  EXPECT_EQ(r.tap.find("[RUN] only"), std::string::npos);
  size_t times = 0;
  for (size_t at = r.tap.find("# time: "); at != std::string::npos; at = r.tap.find("# time: ", at + 1)) {
    times++;
    EXPECT_NE(r.tap.find(" ms\n", at), std::string::npos);
  }
  EXPECT_EQ(times, 3u);
}

TEST(ScenarioParseTest, ErrorsNameFileLineColumn) {
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 3K rw private\n"), "t.mms:3:10: expected a SIZE that is a multiple of 4K");
  EXPECT_EQ(parse_error("test a\nP mmap A 4K rwz private\n"), "t.mms:2:13: expected a PROT (none, r, w, rw, rx, rwx)");
  EXPECT_EQ(parse_error("tune gup.walk fancy\n"),
            "t.mms:1:15: expected a VALUE for gup.walk (v6.5|legacy|walk|batch|batch-ro), not 'fancy'");
  // Variants the build does not have are errors, never silently ignored.
  EXPECT_EQ(parse_error("tune cow.policy rfc2\n"), "t.mms:1:17: expected a VALUE for cow.policy (base|rfc|fixed), not 'rfc2'");
  EXPECT_EQ(parse_error("tune cow.max_order 9\n"), "t.mms:1:20: expected a VALUE for cow.max_order (0..8), not '9'");
  EXPECT_EQ(parse_error("tune cow.max_order -1\n"), "t.mms:1:20: expected a VALUE for cow.max_order (0..8), not '-1'");
  EXPECT_EQ(parse_error("tune cow.max_order 04\n"), "t.mms:1:20: expected a VALUE for cow.max_order (0..8), not '04'");
  EXPECT_EQ(parse_error("tune cow.reuse most\n"), "t.mms:1:16: expected a VALUE for cow.reuse (page|whole), not 'most'");
  EXPECT_EQ(parse_error("tune cow.reuse\n"), "t.mms:1:16: expected a VALUE for cow.reuse (page|whole)");
  EXPECT_EQ(parse_error("tune cow.order 4\n").substr(0, 58), "t.mms:1:6: expected a tune KEY and VALUE this build has (g");
  EXPECT_EQ(parse_error("sysfs transparent_hugepage/defrag\n"), "t.mms:1:35: expected a VALUE");
  // when KEY=VALUES STATEMENT and expect violation TEXT.
  EXPECT_EQ(parse_error("test a\nwhen cow.policy=rfc,fixd check\n"),
            "t.mms:2:6: expected values of cow.policy (base|rfc|fixed), not 'fixd'");
  EXPECT_EQ(parse_error("test a\nwhen cow.colour=rfc check\n").substr(0, 58),
            "t.mms:2:6: expected KEY=VALUE[,VALUE...] naming a tune key");
  EXPECT_EQ(parse_error("test a\nwhen cow.policy check\n").substr(0, 30), "t.mms:2:6: expected KEY=VALUE[");
  EXPECT_EQ(parse_error("test a\nwhen cow.policy=rfc\n"), "t.mms:2:21: expected a statement");
  EXPECT_EQ(parse_error("test a\nwhen cow.policy=rfc tune cow.policy fixed\n").substr(0, 45),
            "t.mms:2:43: expected a statement other than `");
  EXPECT_EQ(parse_error("test a\nexpect violation\n"), "t.mms:2:18: expected the TEXT a detected violation must contain");
  EXPECT_EQ(parse_error("test a\nproc P\nexpect P A soft-dirty maybe\n"), "t.mms:3:23: expected 'yes' or 'no'");
  EXPECT_EQ(parse_error("test 9abc\n"), "t.mms:1:6: expected a NAME (a letter, then letters, digits, '_' or '-')");
  EXPECT_EQ(parse_error("test a\nP gup H A 1 write\n").substr(0, 19), "t.mms:2:13: expecte");
  EXPECT_EQ(parse_error("test a\nP write A 4K 256\n"), "t.mms:2:14: expected a BYTE (0..255)");
  EXPECT_EQ(parse_error("test a\nexpect-error ENOTANERRNO P exit\n").substr(0, 19), "t.mms:2:14: expecte");
  EXPECT_EQ(parse_error("test a\nproc P extra\n"), "t.mms:2:8: expected the end of the statement");
  EXPECT_EQ(parse_error("test a\nsysfs transparent_hugepage/nope 1\n").substr(0, 19), "t.mms:2:7: expected");
  // noswap is a tmpfs mount option.
  EXPECT_EQ(parse_error("file F 16K fs=ext4 noswap\n"), "t.mms:1:27: expected noswap only for a shmem file (a file on tmpfs)");
  EXPECT_EQ(parse_error("file F 2M hugetlb=2M noswap\n"), "t.mms:1:29: expected noswap only for a shmem file (a file on tmpfs)");
  EXPECT_EQ(parse_error("file F 16K noswapp\n"),
            "t.mms:1:12: expected fs=CLASS, hugetlb=2M|1G, huge=always|within_size|advise|never, noswap, ro or uncached");
  // SysV shared memory: the options, the commands, and a segment's own kind of name.
  EXPECT_EQ(parse_error("shmget S 16K huge\n"), "t.mms:1:14: expected 'hugetlb'");
  EXPECT_EQ(parse_error("shmget S 16K\nshmctl S lok\n"), "t.mms:2:10: expected lock, unlock or rmid, not 'lok'");
  EXPECT_EQ(parse_error("test a\nshmget S 16K\nproc P\nP shmat A S rw\n"), "t.mms:4:13: expected 'ro'");
  EXPECT_EQ(parse_error("test a\nproc P\nP shmat A S\n"),
            "t.mms:3:11: expected a shared memory segment bound before this line (by shmget), not 'S'");
  EXPECT_EQ(parse_error("test a\nfile F 16K\nshmctl F lock\n"),
            "t.mms:3:8: expected a shared memory segment, not 'F' (a file)");
  EXPECT_EQ(parse_error("test a\nshmget S 16K\nshmget S 16K\n"),
            "t.mms:3:8: expected a NAME not bound yet in this test, not 'S' (a shared memory segment)");
  // ro and uncached are a disk file's (a memfd cannot be reopened by name).
  EXPECT_EQ(parse_error("file F 16K ro\n"), "t.mms:1:15: expected ro only for a file of fs=ext4, xfs or btrfs");
  EXPECT_EQ(parse_error("file F 2M hugetlb=2M uncached\n"),
            "t.mms:1:31: expected uncached only for a file of fs=ext4, xfs or btrfs");
}

// mmap placement: one of at=, fixed= and noreplace=, never with align=, and
// an ADDR that keeps the mapping below TASK_SIZE.
TEST(ScenarioParseTest, MmapPlacementErrors) {
  const std::string head = "test a\nproc P\nP mmap B 4K rw private\n";
  EXPECT_EQ(parse_error(head + "P mmap A 4K rw private at=\n"),
            "t.mms:4:24: expected at=ADDR (R or R+SIZE, the offset below TASK_SIZE 0x7ffffffff000), not 'at='");
  EXPECT_EQ(parse_error(head + "P mmap A 8K rw private fixed=B+0x7fffffffe000\n"),
            "t.mms:4:24: expected fixed=ADDR that keeps SIZE below TASK_SIZE (0x7ffffffff000), not "
            "'fixed=B+0x7fffffffe000'");
  EXPECT_EQ(parse_error(head + "P mmap A 4K rw private at=B noreplace=B\n"),
            "t.mms:4:29: expected one of at=, fixed= and noreplace=");
  EXPECT_EQ(parse_error(head + "P mmap A 4K rw private align=2M fixed=B\n"),
            "t.mms:4:41: expected align= or a placement (at=, fixed=, noreplace=), not both");
  EXPECT_EQ(parse_error(head + "P mmap A 4K rw private fixed=Q\n"),
            "t.mms:4:1: expected a region bound before this line (by mmap, mremap or shmat), not 'Q'");
}

// mlock family, mmap flags, MREMAP_DONTUNMAP and `expect P locked`.
TEST(ScenarioParseTest, MlockErrors) {
  const std::string head = "test a\nproc P\nP mmap B 8K rw private\n";
  EXPECT_EQ(parse_error(head + "P mlock B 4K always\n"), "t.mms:4:14: expected the end of the statement");
  EXPECT_EQ(parse_error(head + "P munlock B 4K onfault\n"), "t.mms:4:16: expected the end of the statement");
  EXPECT_EQ(parse_error(head + "P mlockall now\n"),
            "t.mms:4:12: expected FLAGS (current, future, onfault, each once, joined by commas)");
  EXPECT_EQ(parse_error(head + "P mlockall current,current\n"),
            "t.mms:4:12: expected FLAGS (current, future, onfault, each once, joined by commas)");
  EXPECT_EQ(parse_error(head + "P munlockall current\n"), "t.mms:4:14: expected the end of the statement");
  EXPECT_EQ(parse_error(head + "P mmap A 4K rw private locked locked\n"), "t.mms:4:31: expected locked once");
  EXPECT_EQ(parse_error(head + "P mremap B 8K 8K C dontunmap dontunmap\n"),
            "t.mms:4:30: expected to=ADDR or dontunmap (each once)");
  EXPECT_EQ(parse_error(head + "expect P locked\n"), "t.mms:4:17: expected a SIZE");
  EXPECT_EQ(parse_error(head + "P madvise B 4K dontneed-locked\n").substr(0, 26), "t.mms:4:32: expected an AD");
  EXPECT_EQ(parse_error(head + "P mseal B 4K 0\n"), "t.mms:4:14: expected the end of the statement");
  EXPECT_EQ(parse_error(head + "P mseal B\n").substr(0, 16), "t.mms:4:11: expe");
  EXPECT_EQ(parse_error("test a\nproc P\nP mlock Q 4K\n"),
            "t.mms:3:9: expected a region bound before this line (by mmap, mremap or shmat), not 'Q'");
}

TEST(ScenarioParseTest, BadInputIsAParseError) {
  std::string err;
  // Numbers that do not fit 64 bits wrap to something else: refused.
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP write A 18446744073709555712 1\n"),
            "t.mms:4:11: expected a number below 2^64, not '18446744073709555712'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 18446744073709551616 rw private\n"),
            "t.mms:3:10: expected a number below 2^64, not '18446744073709551616'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 17179869184G rw private\n"),
            "t.mms:3:10: expected a number below 2^64, not '17179869184G'");
  EXPECT_EQ(parse_error("test a\nproc P\nP read A+0x10000000000000000 4K\n"),
            "t.mms:3:8: expected a number below 2^64, not '0x10000000000000000'");
  EXPECT_EQ(parse_error("test a\nexpect H 99999999999999999999\n"),
            "t.mms:2:10: expected a number below 2^64, not '99999999999999999999'");
  EXPECT_EQ(parse_error("test a\nadvance 99999999999999999999s\n"),
            "t.mms:2:9: expected a DURATION below 2^64 ns, not '99999999999999999999s'");
  // A duration whose nanoseconds do not fit 64 bits, and one with no unit, name their token.
  EXPECT_EQ(parse_error("test a\nadvance 18446744073709551615s\n"),
            "t.mms:2:9: expected a DURATION below 2^64 ns (about 584 years), not '18446744073709551615s'");
  EXPECT_EQ(parse_error("test a\nadvance 10\n"), "t.mms:2:9: expected a DURATION (a number and ns, us, ms or s, e.g. 10ms), not '10'");
  // An address offset or range that would wrap past 2^64 or leave the user
  // address space never names a byte of its region.
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP write A+18446744073709547520 1 1\n"),
            "t.mms:4:9: expected an ADDR whose offset is below TASK_SIZE (0x7ffffffff000), not 'A+18446744073709547520'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP write A+0xffffffffffffffff 1 1\n"),
            "t.mms:4:9: expected an ADDR whose offset is below TASK_SIZE (0x7ffffffff000), not 'A+0xffffffffffffffff'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP write A+4K 0xffffffffffffffff 1\n"),
            "t.mms:4:14: expected a SIZE that keeps A+0x1000 below TASK_SIZE (0x7ffffffff000), not '0xffffffffffffffff'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP munmap A 0x800000000000\n"),
            "t.mms:4:12: expected a SIZE that keeps A+0x0 below TASK_SIZE (0x7ffffffff000), not '0x800000000000'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP gup H A+0x7fffff000000 34359738368 get\n"),
            "t.mms:4:26: expected NPAGES that keep A+0x7fffff000000 below TASK_SIZE (0x7ffffffff000), not '34359738368'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP mremap A 4K 8K B to=A+0x7fffffffe000\n"),
            "t.mms:4:20: expected to=ADDR that keeps NEW below TASK_SIZE (0x7ffffffff000), not 'to=A+0x7fffffffe000'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nexpect P A+0x800000000000 mapped none\n"),
            "t.mms:4:10: expected an ADDR whose offset is below TASK_SIZE (0x7ffffffff000), not 'A+0x800000000000'");
  // The last page below TASK_SIZE still parses.
  EXPECT_TRUE(scenario_parse_text("t.mms", "test a\nproc P\nP mmap A 4K rw private\nP read A+0x7fffffffe000 4K\n", &err)) << err;
  // The largest number still parses where 64 bits are meant; an expected
  // counter, compared as a signed value, takes up to 2^63 - 1.
  EXPECT_TRUE(scenario_parse_text("t.mms", "test a\ninject page_alloc times 0xffffffffffffffff\n", &err)) << err;
  EXPECT_TRUE(scenario_parse_text("t.mms", "test a\nexpect counter gup.grab 0x7fffffffffffffff\n", &err)) << err;
  // A sysfs value of the wrong form; one of the right form that the store
  // rejects is EINVAL at run time (collapse.mms asserts those).
  EXPECT_EQ(parse_error("test a\nsysfs transparent_hugepage/enabled sometimes\n"),
            "t.mms:2:36: expected a VALUE for transparent_hugepage/enabled (always, madvise, never), not 'sometimes'");
  EXPECT_EQ(parse_error("test a\nsysfs transparent_hugepage/hugepages-64kB/enabled on\n"),
            "t.mms:2:51: expected a VALUE for transparent_hugepage/hugepages-64kB/enabled (always, inherit, madvise, never), not 'on'");
  EXPECT_EQ(parse_error("test a\nsysfs transparent_hugepage/defrag sometimes\n"),
            "t.mms:2:35: expected a VALUE for transparent_hugepage/defrag (always, defer, defer+madvise, madvise, never), "
            "not 'sometimes'");
  EXPECT_EQ(parse_error("test a\nsysfs hugepages/hugepages-2048kB/nr_hugepages many\n"),
            "t.mms:2:47: expected a number for hugepages/hugepages-2048kB/nr_hugepages, not 'many'");
  EXPECT_EQ(parse_error("test a\nsysfs transparent_hugepage/use_zero_page yes\n"),
            "t.mms:2:42: expected a number for transparent_hugepage/use_zero_page, not 'yes'");
  EXPECT_EQ(run("test a\nexpect-error EINVAL sysfs transparent_hugepage/use_zero_page 2\n").results.at(0).outcome, Outcome::kPass);
  // Suffixes are K, M and G only.
  EXPECT_EQ(parse_error("test a\nswap 100T\n"), "t.mms:2:6: expected a SIZE (a number with an optional K, M or G suffix), not '100T'");
  // A GUP count no user range holds.
  EXPECT_EQ(parse_error("test a\nP gup H A 100000000000 get\n"),
            "t.mms:2:11: expected NPAGES up to 34359738368 (the pages of a 128 TiB user address space)");
  // skip and xfail report their reason.
  EXPECT_EQ(parse_error("test a\nxfail\n"), "t.mms:2:7: expected a REASON after 'xfail' (why the test is expected to fail)");
  EXPECT_EQ(parse_error("test a\nskip   # why\n"), "t.mms:2:6: expected a REASON after 'skip' (why the test is skipped)");
  // Test names identify results: unique in a run.
  EXPECT_EQ(parse_error("test a\nproc P\ntest  a\n"),
            "t.mms:3:7: expected a test NAME not used before in this run; 'a' is also at t.mms:1");
}

// `when` and `expect-error` nest: a few prefixes parse, a line of thousands
// is an error at the first prefix past the limit (it used to recurse once
// per prefix, copying the line each time: 200000 of them ran out of memory
// under fuzz_parse).
TEST(ScenarioParseTest, PrefixNestingIsBounded) {
  std::string ok = "test a\nproc P\nP mmap A 4K rw private\n";
  for (int i = 0; i < 8; i++) ok += "when cow.policy=base,rfc,fixed ";
  ok += "expect-error SIGSEGV P read A 4K\n";
  std::string err;
  EXPECT_TRUE(scenario_parse_text("t.mms", ok, &err)) << err;

  std::string deep = "test a\n";
  for (int i = 0; i < 200000; i++) deep += "when cow.policy=rfc ";
  deep += "check\n";
  EXPECT_EQ(parse_error(deep), "t.mms:2:321: expected a statement after at most 16 `when` and `expect-error` prefixes");
  std::string deep_errors = "test a\nproc P\n";
  for (int i = 0; i < 17; i++) deep_errors += "expect-error EFAULT ";
  deep_errors += "P exit\n";
  EXPECT_EQ(parse_error(deep_errors), "t.mms:3:321: expected a statement after at most 16 `when` and `expect-error` prefixes");
}

// The verb table: one record per verb, and each reaches its parser (a word
// the table lacks gets "expected a verb" instead: a reserved word as a
// process's, a verb after a process name as an unknown one).
TEST(ScenarioParseTest, EveryVerbOfTheTableReachesItsParser) {
  std::set<std::string_view> seen;
  size_t subject_verbs = 0;
  for (const parser::StatementVerb& v : scenario_statement_verbs()) {
    EXPECT_TRUE(seen.insert(v.verb).second) << "two records for " << v.verb;
    const bool subject = v.form == parser::VerbForm::kSubject;
    subject_verbs += subject;
    EXPECT_TRUE(v.form == parser::VerbForm::kPrefix ? v.prefix && !v.parse : v.parse && !v.prefix) << v.verb;
    const std::string line = (subject ? "P " : "") + std::string(v.verb) + " @";
    std::string err;
    scenario_parse_text("t.mms", "test a\nproc P\n" + line + "\n", &err);
    EXPECT_EQ(err.find("expected a verb"), std::string::npos) << line << ": " << err;
  }
  EXPECT_EQ(subject_verbs, 25u);
  // What may follow a process name, in the table's order.
  EXPECT_EQ(parse_error("test a\nproc P\nP\n"),
            "t.mms:3:3: expected a verb (fork, exit, mmap, munmap, mprotect, mremap, madvise, mlock, munlock, mseal, "
            "shmat, shmdt, mlockall, munlockall, clear-soft-dirty, thp-disable, userfaultfd, uffd-wp, write, read, gup, vm-read, dump, "
            "print, remember)");
  EXPECT_EQ(parse_error("test a\nproc P\nP mbind A\n"),
            "t.mms:3:9: expected a verb (fork, exit, mmap, munmap, mprotect, mremap, madvise, mlock, munlock, mseal, "
            "shmat, shmdt, mlockall, munlockall, clear-soft-dirty, thp-disable, userfaultfd, uffd-wp, write, read, gup, vm-read, dump, "
            "print, remember), not 'mbind'");
}

// vm-read names two processes and two ranges, each checked as it is read.
TEST(ScenarioParseTest, VmReadNeedsBothProcessesAndALocalAddress) {
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nP vm-read R A 4K A\n"),
            "t.mms:4:11: expected a process bound before this line (by proc or fork), not 'R'");
  EXPECT_NE(parse_error("test a\nproc P\nproc Q\nP mmap A 4K rw private\nQ vm-read P A 4K\n").find("t.mms:5:"), std::string::npos);
}

TEST(ScenarioParseTest, NamesAreResolvedAtParseTime) {
  EXPECT_EQ(parse_error("test a\nproc P\nQ mmap A 4K rw private\n"),
            "t.mms:3:1: expected a process bound before this line (by proc or fork), not 'Q'");
  EXPECT_EQ(parse_error("test a\nproc P\nP read B+4K 4K\n"),
            "t.mms:3:8: expected a region bound before this line (by mmap, mremap or shmat), not 'B'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw shared file=F+4K\n"),
            "t.mms:3:28: expected a file bound before this line (by file), not 'F'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 8K rw private\nP mremap A 4K 4K B to=C\n"),
            "t.mms:4:23: expected a region bound before this line (by mmap, mremap or shmat), not 'C'");
  EXPECT_EQ(parse_error("test a\nunpin H\n"), "t.mms:2:7: expected a GUP handle bound before this line (by gup), not 'H'");
  EXPECT_EQ(parse_error("test a\nexpect D pages 1 holes 0\n"),
            "t.mms:2:8: expected a dump bound before this line (by dump), not 'D'");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nexpect P A same Q A\n"),
            "t.mms:4:17: expected a process bound before this line (by proc or fork), not 'Q'");
  // One namespace: a name is one kind; processes and files are bound once.
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap A 4K rw private\nA write 0 4K 1\n"),
            "t.mms:4:1: expected a GUP handle, not 'A' (a region)");
  EXPECT_EQ(parse_error("test a\nproc P\nP mmap P 4K rw private\n"),
            "t.mms:3:8: expected a NAME not bound yet in this test, not 'P' (a process)");
  EXPECT_EQ(parse_error("test a\nproc P\nP fork P\n"), "t.mms:3:8: expected a NAME not bound yet in this test, not 'P' (a process)");
  // Names do not carry from one test to the next; the prelude's do.
  EXPECT_EQ(parse_error("proc P\ntest a\nP mmap A 4K rw private\ntest b\nP read A 4K\n"),
            "t.mms:5:8: expected a region bound before this line (by mmap, mremap or shmat), not 'A'");
  // A test sees the prelude's bindings: a prelude process is not bound again,
  // a prelude region may be, as a region.
  EXPECT_EQ(parse_error("proc P\ntest a\nproc P\n"), "t.mms:3:6: expected a NAME not bound yet in this test, not 'P' (a process)");
  EXPECT_EQ(parse_error("proc P\nP mmap A 4K rw private\ntest a\nP gup A A 1 get\n"),
            "t.mms:4:9: expected a NAME not bound yet in this test, not 'A' (a region)");
  std::string err;
  EXPECT_TRUE(scenario_parse_text("t.mms", "proc P\nP mmap A 4K rw private\ntest a\nP mmap A 8K rw private\ntest b\nP read A 4K\n", &err))
      << err;
  EXPECT_TRUE(scenario_parse_text("t.mms",
                                  "proc P\ntest a\nP mmap A 4K rw private\nP mmap A 8K rw private\nP gup H A 1 get\n"
                                  "unpin H\nP gup H A 1 get\n"
                                  // A statement under `when` may not run: it may bind again.
                                  "when gup.walk=batch P fork C\nwhen gup.walk=legacy P fork C\nwhen gup.walk=batch C exit\n",
                                  &err))
      << err;
}

TEST(ScenarioParseTest, FilesThatAreNotScenarios) {
  std::string err;
  EXPECT_FALSE(scenario_parse({"/"}, &err));
  EXPECT_EQ(err, "/: is a directory, not a scenario file (name the .mms files, e.g. //*.mms)");
  EXPECT_FALSE(scenario_parse({"/nonexistent/x.mms"}, &err));
  EXPECT_EQ(err, "/nonexistent/x.mms: cannot read the file (No such file or directory)");
}

TEST(ScenarioParseTest, CountTestsFollowsTheFilter) {
  std::string err;
  auto prog = scenario_parse_text("t.mms", "proc P\ntest keep-a\ntest keep-b\ntest drop\n", &err);
  ASSERT_TRUE(prog) << err;
  EXPECT_EQ(scenario_count_tests(*prog, ""), 3u);
  EXPECT_EQ(scenario_count_tests(*prog, "keep-*"), 2u);
  EXPECT_EQ(scenario_count_tests(*prog, "nothing*"), 0u);
}

TEST(ScenarioParseTest, NumbersCommentsAndPrelude) {
  RunOut r = run("# comment\nproc P   # prelude\n\ntest a\nP mmap A 0x2000 rw private\nP write A+0x1000 1K 0x7f\n"
              "P read A+4K 1K 127\ntest b\nP mmap A 64K rw private\n");
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass) << r.tap;
  EXPECT_EQ(r.results[1].outcome, Outcome::kPass) << r.tap;
}

TEST(ScenarioRunTest, TapOutcomesAndTotals) {
  RunOut r = run("test good\nproc P\nP mmap A 4K rw private\nP write A 4K 1\nP read A 4K 1\n"
              "test bad\nproc P\nP mmap A 4K rw private\nP read A 4K 1\n"
              "test known\nxfail reason here\nproc P\nP mmap A 4K rw private\nP read A 4K 1\n"
              "test lucky\nxfail reason there\nproc P\n"
              "test later\nskip no 1G pages\n");
  // Without the per-test times and the state a failure prints (tested below).
  std::istringstream in(without_time_lines(r.tap));
  std::string tap;
  for (std::string l; std::getline(in, l);)
    if (l.rfind("# state: ", 0) != 0 && l.rfind("#   ", 0) != 0) tap += l + "\n";
  EXPECT_EQ(tap,
            "TAP version 13\n1..5\nok 1 good\nnot ok 2 bad\n"
            "# t.mms:9: expected every byte of A+0x0..+0x1000 == 0x01, found 0x00 at +0x0\n"
            "ok 3 known # XFAIL reason here\n"
            "# t.mms:14: expected every byte of A+0x0..+0x1000 == 0x01, found 0x00 at +0x0\n"
            "ok 4 lucky # XPASS reason there\nok 5 later # SKIP no 1G pages\n"
            "# Totals: pass:1 fail:1 xfail:1 xpass:1 skip:1 error:0\n");
  EXPECT_EQ(scenario_exit_status(r.results), 1);
}

TEST(ScenarioRunTest, ExpectErrorAndSignals) {
  RunOut r = run("test a\nproc P\nP mmap A 4K r private\nexpect-error SIGSEGV P write A 4K 1\n"
              "expect-error EINVAL P mprotect A+1 4K r\n"
              "test b\nproc P\nP mmap A 4K rw private\nexpect-error EINVAL P munmap A 4K\n"
              "test c\nproc P\nP mmap A 4K r private\nP write A 4K 1\n");
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass) << r.tap;
  EXPECT_EQ(r.results[1].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[1].diagnostics.front(), "t.mms:9: expected munmap to fail with EINVAL, it succeeded");
  EXPECT_EQ(r.results[2].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[2].diagnostics.front().substr(0, 35), "t.mms:13: write ended with SIGSEGV ");
}

TEST(ScenarioRunTest, FilterAndVariants) {
  ScenarioOptions opt;
  opt.filter = "keep-*";
  opt.variants.push_back({"gup.walk", {"legacy", "batch"}});
  RunOut r = run("test keep-one\nproc P\ntest drop-one\nproc P\n", opt);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].variant, "gup.walk=legacy");
  EXPECT_EQ(r.results[1].variant, "gup.walk=batch");
  EXPECT_NE(r.tap.find("ok 2 keep-one [gup.walk=batch]"), std::string::npos);
}

TEST(ScenarioRunTest, GupCountBeyondAnyPagesArrayIsATestError) {
  // Checked before the pages array is allocated (it used to throw bad_alloc).
  RunOut r = run("test a\nproc P\nP mmap A 8K rw private\nP gup H A 10000000000 get\n"
                 "test b\nproc P\nP mmap A 8K rw private\nP write A 8K 1\nP gup H A 100 get\nexpect H 2\n");
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kFail) << r.tap;
  ASSERT_FALSE(r.results[0].diagnostics.empty());
  EXPECT_EQ(r.results[0].diagnostics.front(),
            "t.mms:4: NPAGES 10000000000: a pages array of 80000000000 bytes is larger than a caller could allocate "
            "(268435456 bytes: kvmalloc's INT_MAX limit or the simulated RAM, whichever is less)");
  // A count beyond the mapping but within bounds returns what the range holds.
  EXPECT_EQ(r.results[1].outcome, Outcome::kPass) << r.tap;
}

// A file (allocated whole) or a swap device beyond the System's RAM is
// refused before the run, at its SIZE token; a run that was not checked
// fails the test at the statement, allocating nothing.
TEST(ScenarioRunTest, FileAndSwapBeyondTheRamAreRefusedUpFront) {
  std::string err;
  auto prog = scenario_parse_text("t.mms", "test a\nfile F 512M\ntest b\n  swap   1G blkdev\ntest c\nfile G 256M\nswap 256M\n", &err);
  ASSERT_TRUE(prog) << err;
  ScenarioOptions opt;
  opt.ram_bytes = 256ull << 20;
  EXPECT_FALSE(scenario_check_sizes(*prog, opt, &err));
  EXPECT_EQ(err, "t.mms:2:8: expected a file SIZE up to the System's RAM (256M, --ram): a file is allocated whole, not '512M'");
  auto swap_only = scenario_parse_text("t.mms", "test b\n  swap   1G blkdev\n", &err);
  ASSERT_TRUE(swap_only) << err;
  EXPECT_FALSE(scenario_check_sizes(*swap_only, opt, &err));
  EXPECT_EQ(err, "t.mms:2:10: expected a swap SIZE up to the System's RAM (256M, --ram), not '1G'");
  opt.ram_bytes = 1ull << 30;
  EXPECT_TRUE(scenario_check_sizes(*prog, opt, &err)) << err;
  RunOut r = run("test a\nfile F 100G\ntest b\nswap 1000G\n");
  ASSERT_EQ(r.results.size(), 2u);
  ASSERT_FALSE(r.results[0].diagnostics.empty());
  EXPECT_EQ(r.results[0].diagnostics.front(),
            "t.mms:2: file F of 107374182400 bytes: larger than the System's RAM (268435456 bytes); a file is allocated whole");
  ASSERT_FALSE(r.results[1].diagnostics.empty());
  EXPECT_EQ(r.results[1].diagnostics.front(), "t.mms:4: swap of 1073741824000 bytes: larger than the System's RAM (268435456 bytes)");
}

// A read's SIZE, and a handle access's, are the scenario's: the one far
// beyond the mapping ends in its signal or -EFAULT, its buffer never that size.
TEST(ScenarioRunTest, AccessSizesBeyondTheMappingAllocateNothing) {
  RunOut r = run("test a\nproc P\nP mmap A 8K rw private\nP write A 8K 1\nexpect-error SIGSEGV P read A 0x100000000000\n"
                 "P gup H A 2 get\nexpect-error EFAULT H read 0 0x100000000000 1\nexpect-error EFAULT H write 4K 0x100000000000 1\n");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass) << r.tap;
}

TEST(ScenarioRunTest, LeakedPinIsReleasedAndCheckerRuns) {
  // The interpreter releases what handles still hold, then checks for leaks.
  RunOut r = run("test a\nproc P\nP mmap A 8K rw private\nP write A 8K 1\nP gup H A 2 pin\nexpect H 2\ncheck\n");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass) << r.tap;
  // What the teardown's checker found (fuzz_run holds every test to it).
  EXPECT_TRUE(r.results[0].leaks.empty()) << r.results[0].leaks.front();
}

// `when` runs a statement only under the listed values of a tune key; the
// default values hold when the run sets none.
TEST(ScenarioRunTest, WhenFollowsTheTuneKeys) {
  const std::string text =
      "test a\nproc P\nP mmap A 4K rw private\nP write A 4K 1\n"
      "when cow.policy=base P read A 4K 1\nwhen cow.policy=rfc,fixed P read A 4K 2\n"
      "when cow.reuse=whole P read A 4K 3\n";
  ScenarioOptions opt;
  opt.variants.push_back({"cow.policy", {"base", "rfc", "fixed"}});
  RunOut r = run(text, opt);
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass) << r.tap;
  EXPECT_EQ(r.results[1].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[1].diagnostics.front(), "t.mms:6: expected every byte of A+0x0..+0x1000 == 0x02, found 0x01 at +0x0");
  EXPECT_EQ(r.results[2].outcome, Outcome::kFail);
  // A `tune` inside the test is what `when` sees afterwards.
  RunOut t = run("test a\nproc P\nP mmap A 4K rw private\ntune cow.reuse whole\nwhen cow.reuse=page P read A 4K 9\n");
  EXPECT_EQ(t.results[0].outcome, Outcome::kPass) << t.tap;
}

// `expect violation TEXT`: violations (the checker, data checks, the leak
// check) no longer end the test; it passes only if one contains TEXT.
TEST(ScenarioRunTest, ExpectViolation) {
  const std::string bad_data = "proc P\nP mmap A 4K rw private\nP read A 4K 1\nP write A 4K 2\nP read A 4K 2\n";
  RunOut r = run("test found\nexpect violation found 0x00 at +0x0\n" + bad_data +
                 "test missing\nexpect violation mapcount\nproc P\n"
                 "test other\nexpect violation mapcount\n" + bad_data +
                 "test unexpected\n" + bad_data +
                 "test leak\nexpect violation frame leaked\nproc P\nP mmap A 4K rw private\nP gup H A 1 get\n");
  ASSERT_EQ(r.results.size(), 5u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kPass) << r.tap;
  ASSERT_EQ(r.results[0].violations.size(), 1u);
  EXPECT_EQ(r.results[0].violations[0], "t.mms:5: expected every byte of A+0x0..+0x1000 == 0x01, found 0x00 at +0x0");
  EXPECT_NE(r.tap.find("ok 1 found\n# violation detected (expected): t.mms:5: expected every byte"), std::string::npos) << r.tap;
  EXPECT_EQ(r.results[1].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[1].diagnostics.front(), "t.mms:9: expected a violation containing 'mapcount', none was detected");
  EXPECT_EQ(r.results[2].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[2].diagnostics.front().substr(0, 71),
            "t.mms:12: expected a violation containing 'mapcount'; detected only: t.");
  // Without the expectation a violation ends the test as before.
  EXPECT_EQ(r.results[3].outcome, Outcome::kFail);
  // The end-of-test leak check is one of the detectors; the interpreter
  // releases what handles hold first, so nothing leaks here and the
  // expectation fails.
  EXPECT_EQ(r.results[4].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[4].diagnostics.front(), "t.mms:25: expected a violation containing 'frame leaked', none was detected");
}

// `mmlab run --known`: a listed failure is an XFAIL with its reason; a
// listed test that passes and an entry that names no test fail the run.
TEST(ScenarioRunTest, KnownFailuresStayTrue) {
  ScenarioOptions opt;
  opt.known = {{"fails-*", "documented reason"}, {"passes", "stale"}, {"gone", "renamed"}};
  RunOut r = run("test fails-a\nproc P\nP mmap A 4K rw private\nP read A 4K 1\ntest passes\nproc P\n"
                 "test other\nproc P\n", opt);
  ASSERT_EQ(r.results.size(), 4u);
  EXPECT_EQ(r.results[0].outcome, Outcome::kXfail);
  EXPECT_EQ(r.results[0].reason, "known: documented reason");
  EXPECT_EQ(r.results[1].outcome, Outcome::kFail);
  EXPECT_EQ(r.results[1].diagnostics.back(), "listed as a known failure (stale) but it passed: update the list");
  EXPECT_EQ(r.results[2].outcome, Outcome::kPass);
  EXPECT_EQ(r.results[3].name, "known-failures:gone");
  EXPECT_EQ(r.results[3].outcome, Outcome::kFail);
  EXPECT_EQ(scenario_exit_status(r.results), 1);
}

}  // namespace
}  // namespace mmlab

namespace mmlab {
namespace {

// -j: the same TAP whatever the number of threads (tests finish out of
// order; output stays in file order), and the Systems of concurrent tests
// share nothing (the TSan build runs this too).
TEST(ScenarioRunTest, ParallelRunPrintsWhatASerialRunPrints) {
  std::string text = "proc P\n";
  for (int i = 0; i < 12; i++) {
    const std::string b = std::to_string(i + 1);
    text += "test t" + std::to_string(i) + "\nP mmap A " + std::to_string(16 * (i % 4 + 1)) +
            "K rw private\nP write A 16K " + b + "\nP fork C\nP write A 4K 0xff\nC read A 16K " + b +
            "\nP read A+4K 12K " + b + "\nexpect counter fault.wp_copy 1\n";
    if (i == 5) text += "P read A 4K 7\n";  // one failure, reported in place
  }
  ScenarioOptions serial;
  RunOut one = run(text, serial);
  ScenarioOptions par;
  par.jobs = 4;
  par.mem_budget = 64ull << 30;  // never the limit here
  RunOut four = run(text, par);
  EXPECT_EQ(without_time_lines(one.tap), without_time_lines(four.tap));
  ASSERT_EQ(four.results.size(), 12u);
  EXPECT_EQ(four.results[5].outcome, Outcome::kFail);
  EXPECT_EQ(four.results[11].outcome, Outcome::kPass);
}

}  // namespace
}  // namespace mmlab

#include "scenario/parallel.h"

namespace mmlab {
namespace {

// -j is cut to what fits the memory budget, never below one test.
TEST(ScenarioRunTest, ParallelWidthFitsTheMemoryBudget) {
  std::string why;
  EXPECT_EQ(parallel_width(4, 4ull << 30, 64ull << 30, &why), 4);
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(parallel_width(4, 4ull << 30, 9ull << 30, &why), 2);
  EXPECT_NE(why.find("2 test(s) at a time"), std::string::npos) << why;
  EXPECT_EQ(parallel_width(4, 4ull << 30, 1ull << 30, &why), 1);
  EXPECT_GE(parallel_width(0, 1, 1ull << 40, nullptr), 1);  // 0: one per CPU
}

// run_ordered: emit() in order on the calling thread, whatever order run() finishes in.
TEST(ScenarioRunTest, RunOrderedEmitsInOrder) {
  std::vector<int> ran(50, 0);
  std::vector<size_t> emitted;
  run_ordered(
      ran.size(), 3, [&](size_t i) { ran[i] = static_cast<int>(i) * 2; },
      [&](size_t i) {
        EXPECT_EQ(ran[i], static_cast<int>(i) * 2);
        emitted.push_back(i);
      });
  ASSERT_EQ(emitted.size(), ran.size());
  for (size_t i = 0; i < emitted.size(); i++) EXPECT_EQ(emitted[i], i);
  EXPECT_THROW(run_ordered(
                   8, 2, [](size_t i) { if (i == 3) throw std::runtime_error("boom"); }, [](size_t) {}),
               std::runtime_error);
}

}  // namespace
}  // namespace mmlab
