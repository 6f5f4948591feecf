// The host backend at the scenario level: statements on real processes,
// expectations read from pagemap/kpageflags, what the host cannot observe
// skipped one by one, settings put back whatever way a test ends, and
// `mmlab diff` of the model against the host. Needs root.
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "host/sysfs.h"
#include "mmlab/scenario.h"

namespace mmlab {
namespace {

class HostRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!scenario_host_available(&why)) GTEST_SKIP() << why;
    lock_ = std::make_unique<host::HostLock>();  // other host tests may run meanwhile (ctest -j)
  }
  void TearDown() override { lock_.reset(); }
  std::unique_ptr<host::HostLock> lock_;

  static std::vector<ScenarioResult> run(const std::string& text, std::string* tap = nullptr) {
    std::string err;
    auto prog = scenario_parse_text("t.mms", text, &err);
    EXPECT_TRUE(prog) << err;
    if (!prog) return {};
    ScenarioOptions opt;
    opt.backend = Backend::kHost;
    std::ostringstream out;
    auto results = scenario_run(*prog, opt, out);
    if (tap) *tap = out.str();
    return results;
  }

  static std::string setting(const std::string& rel) {
    std::string v;
    EXPECT_EQ(host::sysfs_read(rel, &v), 0) << rel;
    return v;
  }
};

TEST_F(HostRunTest, ZeroPageThenCowOnTheRealKernel) {
  std::string tap;
  auto r = run("test t\nproc P\nP mmap A 16K rw private\nP read A 16K 0\nexpect P A zero yes\n"
               "expect P A mapped pte\nexpect P rss anon 0\nP write A+4K 4K 7\nexpect P A+4K zero no\n"
               "expect P A+4K order 0\nexpect P A+4K exclusive yes\nexpect P rss anon 4K\n"
               "P fork C\nexpect C A+4K same P A+4K\nC write A+4K 1 9\nexpect C A+4K differ P A+4K\n"
               "P read A+4K 4K 7\nexpect counter fault.wp_copy 1\ncheck\n",
               &tap);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  EXPECT_EQ(r[0].skipped_expectations, 3) << tap;  // exclusive, counter, check
  EXPECT_NE(tap.find("# 3 expectation(s) skipped: exclusive"), std::string::npos) << tap;
}

TEST_F(HostRunTest, WrongExpectationsFailWithTheHostsValues) {
  auto r = run("test t\nproc P\nP mmap A 16K rw private\nP write A 4K 1\nexpect P A order 4\n"
               "test u\nproc P\nP mmap A 16K rw private\nP write A 4K 1\nP read A 4K 2\n"
               "test v\nproc P\nP mmap A 16K r private\nexpect-error SIGSEGV P write A 4K 1\nP write A 4K 1\n");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].outcome, Outcome::kFail);
  EXPECT_NE(r[0].diagnostics.at(0).find("expected P A+0x0 order 4, found 0"), std::string::npos);
  EXPECT_EQ(r[1].outcome, Outcome::kFail);
  EXPECT_NE(r[1].diagnostics.at(0).find("found 0x01 at +0x0"), std::string::npos);
  EXPECT_EQ(r[2].outcome, Outcome::kFail);
  EXPECT_NE(r[2].diagnostics.at(0).find("write ended with SIGSEGV"), std::string::npos);
}

TEST_F(HostRunTest, WhatTheHostCannotDoSkipsTheTest) {
  auto r = run("test a\ntune gup.walk batch\nproc P\n"
               "test b\nproc P\nP mmap A 16K rw private\nP gup H A 4 pin,longterm\n"
               "test c\nproc P\nP mmap A 16K rw private\nP dump D A 16K\n");
  ASSERT_EQ(r.size(), 3u);
  for (auto& x : r) EXPECT_EQ(x.outcome, Outcome::kSkip) << x.name;
  EXPECT_NE(r[0].reason.find("model variant"), std::string::npos);
  EXPECT_NE(r[1].reason.find("gup_test"), std::string::npos);
}

TEST_F(HostRunTest, MthpSizeOrderAndStatistics) {
  const std::string before = setting("transparent_hugepage/hugepages-64kB/enabled");
  auto r = run("test t\nsysfs transparent_hugepage/hugepages-64kB/enabled always\nproc P\n"
               "P mmap A 1M rw private align=1M\nP write A+20K 4K 1\nexpect P A order 4\nexpect P A+60K order 4\n"
               "expect P A+64K mapped none\nexpect P rss anon 64K\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << (r[0].diagnostics.empty() ? "" : r[0].diagnostics[0]);
  EXPECT_EQ(setting("transparent_hugepage/hugepages-64kB/enabled"), before);
}

TEST_F(HostRunTest, SettingsAreRestoredWhenATestFails) {
  const std::string enabled = setting("transparent_hugepage/enabled");
  const std::string zero = setting("transparent_hugepage/use_zero_page");
  auto r = run("test t\nsysfs transparent_hugepage/enabled never\nsysfs transparent_hugepage/use_zero_page 0\n"
               "proc P\nP mmap A 4K rw private\nP read A 4K 1\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kFail);
  EXPECT_EQ(setting("transparent_hugepage/enabled"), enabled);
  EXPECT_EQ(setting("transparent_hugepage/use_zero_page"), zero);
  EXPECT_NE(access("/var/tmp/mmlab-host.restore", F_OK), 0);  // nothing left to restore
}

TEST_F(HostRunTest, GuardJournalsUntilRestored) {
  const std::string zero = setting("transparent_hugepage/use_zero_page");
  {
    host::SysfsGuard g;
    ASSERT_EQ(g.write("transparent_hugepage/use_zero_page", zero == "1" ? "0" : "1"), 0);
    EXPECT_NE(setting("transparent_hugepage/use_zero_page"), zero);
    std::ifstream journal("/var/tmp/mmlab-host.restore");
    std::stringstream text;
    text << journal.rdbuf();
    EXPECT_NE(text.str().find("use_zero_page\t" + zero), std::string::npos) << text.str();
  }
  EXPECT_EQ(setting("transparent_hugepage/use_zero_page"), zero);
  EXPECT_NE(access("/var/tmp/mmlab-host.restore", F_OK), 0);
}

TEST_F(HostRunTest, DiffModelAgainstHost) {
  std::string err;
  auto prog = scenario_parse_text("t.mms",
                                  "test same\nproc P\nP mmap A 2M rw private align=2M\nP madvise A 2M hugepage\n"
                                  "P write A 4K 1\nexpect P A mapped pmd\nexpect P A order 9\n"
                                  "test skipped\ntune gup.walk batch\n",
                                  &err);
  ASSERT_TRUE(prog) << err;
  DiffOptions d;
  d.b.name = "host";
  d.b.backend = Backend::kHost;
  d.ram_bytes = 256ull << 20;
  std::ostringstream out;
  EXPECT_EQ(scenario_diff(*prog, d, out), 0) << out.str();
  EXPECT_NE(out.str().find("ok same"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("skip skipped: host skips"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("2 tests, 1 compared (1 agree), 1 not compared"), std::string::npos) << out.str();
}

TEST(KnownDifferencesTest, ParseErrorsNameTheLine) {
  char path[] = "/tmp/mmlab-known-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "# comment\ncow-*-hugetlb-*  kernel 6.18 reuses hugetlb by mapcount\n\n  lonely\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::vector<KnownDifference> known;
  std::string err;
  EXPECT_EQ(load_known_differences(path, &known, &err), -1);
  EXPECT_EQ(err, std::string(path) + ":4:3: expected GLOB REASON...");
  ASSERT_EQ(known.size(), 1u);
  EXPECT_EQ(known[0].glob, "cow-*-hugetlb-*");
  EXPECT_EQ(known[0].reason, "kernel 6.18 reuses hugetlb by mapcount");
  unlink(path);
}

}  // namespace
}  // namespace mmlab
