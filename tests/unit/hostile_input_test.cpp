// Hostile input to the scenario language: every malformed or absurd
// statement is a parse error naming file:line:column, and what parses runs
// as written (issue "Reliability III": each test here failed before its fix).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "mmlab/scenario.h"
#include "scenario/parse_internal.h"

namespace mmlab {
namespace {

std::string refused(const std::string& text) {
  std::string err;
  auto prog = scenario_parse_text("t.mms", text, &err);
  EXPECT_FALSE(prog) << "parsed: " << text;
  return err;
}

bool accepted(const std::string& text, std::string* err) { return static_cast<bool>(scenario_parse_text("t.mms", text, err)); }

std::vector<ScenarioResult> run_text(const std::string& text) {
  std::string err;
  auto prog = scenario_parse_text("t.mms", text, &err);
  EXPECT_TRUE(prog) << err;
  if (!prog) return {};
  ScenarioOptions opt;
  opt.ram_bytes = 256ull << 20;
  std::ostringstream out;
  return scenario_run(*prog, opt, out);
}

const std::string kHostilePre = "test a\nproc P\nP mmap A 2M rw private\nP gup H A 1 pin\nP dump D A 4K\n";

// Defect 4: `expect-error` before a statement that never fails was ignored.
TEST(HostileInputTest, ExpectErrorBeforeAStatementThatCannotFailIsAParseError) {
  const std::pair<const char*, const char*> kNeverFail[] = {
      {"P exit", "exit"},           {"proc Q", "proc"},   {"check", "check"},       {"counters reset", "counters"},
      {"P clear-soft-dirty", "clear-soft-dirty"}, {"unpin H", "unpin"}, {"expect H 1", "expect"},
      {"P gup G A 1 get", "gup"},    {"P dump E A 4K", "dump"}, {"P print smaps", "print"},
      {"skip why", "skip"},         {"xfail why", "xfail"}, {"counters print", "counters"}};
  for (auto [stmt, verb] : kNeverFail) {
    const std::string err = refused(kHostilePre + "expect-error EINVAL " + stmt + "\n");
    const int col = 21 + (std::string(stmt).rfind("P ", 0) == 0 ? 2 : 0);
    EXPECT_EQ(err, "t.mms:6:" + std::to_string(col) + ": expected a statement that can fail after `expect-error` (`" + verb +
                       "` never returns an error or a signal), not '" + verb + "'")
        << stmt;
    // Behind a `when`, too.
    EXPECT_NE(refused(kHostilePre + "expect-error EINVAL when cow.policy=base " + stmt + "\n").find("can fail"), std::string::npos);
  }
  std::string err;
  EXPECT_TRUE(accepted(kHostilePre + "expect-error EINVAL P munmap A+1 4K\n", &err)) << err;
  EXPECT_TRUE(accepted(kHostilePre + "expect-error SIGSEGV P read A+2M 4K\n", &err)) << err;
}

// Defect 5: a count beyond any GUP's return wrapped to a negative, an errno.
TEST(HostileInputTest, ExpectedGupCountBeyondTheAddressSpaceIsAParseError) {
  EXPECT_EQ(refused(kHostilePre + "expect H 18446744073709551602\n"),
            "t.mms:6:10: expected N (a page count up to 34359738368) or -ERRNO, not '18446744073709551602'");
  EXPECT_EQ(refused(kHostilePre + "expect vmstat thp_fault_alloc 18446744073709551615\n"),
            "t.mms:6:31: expected a number below 2^63, not '18446744073709551615'");
  EXPECT_EQ(refused(kHostilePre + "expect P A order 4294967296\n"), "t.mms:6:18: expected an ORDER (0..18), not '4294967296'");
  // The errno itself is still what a failed GUP gives.
  auto r = run_text("test a\nproc P\nP mmap A 4K rw private\nP munmap A 4K\nP gup H A 1 get\nexpect H -EFAULT\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << (r[0].diagnostics.empty() ? "" : r[0].diagnostics[0]);
}

// Defects 6 and 7: counts and durations whose cost grows without bound.
TEST(HostileInputTest, KhugepagedScansAndAdvanceAreBounded) {
  EXPECT_EQ(refused("test a\nkhugepaged 4294967296\n"), "t.mms:2:12: expected a count N of full scans (1..1000), not '4294967296'");
  EXPECT_EQ(refused("test a\nkhugepaged 18446744073709551615\n"),
            "t.mms:2:12: expected a count N of full scans (1..1000), not '18446744073709551615'");
  EXPECT_EQ(refused("test a\nkhugepaged 0\n"), "t.mms:2:12: expected a count N of full scans (1..1000), not '0'");
  EXPECT_EQ(refused("test a\nadvance 18446744073s\n"), "t.mms:2:9: expected a DURATION up to a day (86400s), not '18446744073s'");
  std::string err;
  EXPECT_TRUE(accepted("test a\nkhugepaged 1000\nadvance 86400s\n", &err)) << err;
}

// Defect 3: the runner's `size + slack` for align= wrapped and bound the
// region to an address it never mapped.
TEST(HostileInputTest, AlignedMmapBeyondTheAddressSpaceFailsAsTheKernelDoes) {
  auto r = run_text(
      "test a\nproc P\nP mmap B 4K rw private\nP write B 4K 7\n"
      "expect-error ENOMEM P mmap A 0xfffffffffffff000 rw private align=8K\n"
      "expect-error ENOMEM P mmap C 0x7ffffffff000 rw private align=2M\n"
      "P read B 4K 7\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << (r[0].diagnostics.empty() ? "" : r[0].diagnostics[0]);
}

// Defect 15: a process named after a keyword made the next statement fail
// with a misleading message. The reserved words come from the verb table.
TEST(HostileInputTest, ReservedWordsCannotNameProcessesOrHandles) {
  EXPECT_EQ(refused("test a\nproc when\n").substr(0, 72),
            "t.mms:2:6: expected a process NAME that is not a reserved word (test, sy");
  EXPECT_NE(refused("test a\nproc when\n").find(", not 'when'"), std::string::npos);
  for (const char* w : {"test", "expect", "check"})
    EXPECT_NE(refused(std::string("test a\nproc ") + w + "\n").find("reserved word"), std::string::npos) << w;
  EXPECT_NE(refused("test a\nproc P\nP fork expect-error\n").find("t.mms:3:8: expected a process NAME"), std::string::npos);
  EXPECT_NE(refused("test a\nproc P\nP mmap A 4K rw private\nP gup unpin A 1 get\n").find("t.mms:4:7: expected a GUP handle NAME"),
            std::string::npos);
  // Every keyword and prefix of the table, so that a verb added later is reserved too.
  for (const parser::StatementVerb& v : scenario_statement_verbs()) {
    const bool reserved = v.form != parser::VerbForm::kSubject;
    EXPECT_EQ(parser::is_reserved_word(std::string(v.verb)), reserved) << v.verb;
    if (reserved) {
      EXPECT_NE(refused("test a\nproc " + std::string(v.verb) + "\n").find("reserved word"), std::string::npos);
    }
  }
  std::string err;
  EXPECT_TRUE(accepted("test a\nproc mmap\nproc exit\n", &err)) << err;  // subject verbs follow a name: not reserved
}

// Defect 16: a byte-order mark and a bad first token gave columns that
// named nothing.
TEST(HostileInputTest, ByteOrderMarkAndBadFirstTokens) {
  std::string err;
  EXPECT_TRUE(accepted("\xEF\xBB\xBFtest a\nproc P\n", &err)) << err;
  EXPECT_EQ(refused("\xEF\xBB\xBFtest a\n!!!\n"),
            "t.mms:2:1: expected a statement (a verb such as proc, tune or expect, or NAME VERB), not '!!!'");
  EXPECT_EQ(refused("test a\n  9lives here\n"),
            "t.mms:2:3: expected a statement (a verb such as proc, tune or expect, or NAME VERB), not '9lives'");
  EXPECT_EQ(refused("test a\nexpect 7x\n"), "t.mms:2:8: expected an expectation (sysfs, vmstat, counter, violation, or a NAME), not '7x'");
}

}  // namespace
}  // namespace mmlab
