// The host backend at the scenario level: statements on real processes,
// expectations read from pagemap/kpageflags, what the host cannot observe
// skipped one by one, settings put back whatever way a test ends, and
// `mmlab diff` of the model against the host. Needs root.
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <memory>
#include <sstream>

#include "host/probe.h"
#include "host/host_swap.h"
#include "host/sysfs.h"
#include "mmlab/scenario.h"
#include "scenario/host_pages.h"

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

// The image or swap file HostSwap makes for this process.
std::string swap_image_path(host::HostSwapKind kind) {
  return "/var/tmp/mmlab-swap." + std::to_string(getpid()) + (kind == host::HostSwapKind::kBlkdev ? ".img" : "");
}

// A skip note of the result, by its key; nullptr if none.
const SkippedExpectations* skip_of(const ScenarioResult& r, const std::string& key) {
  for (auto& k : r.skips)
    if (k.key == key) return &k;
  return nullptr;
}

// One test that passed with `total` expectations skipped, `count` of them for `key`.
void expect_pass_skipping(const std::vector<ScenarioResult>& r, const std::string& key, int count, int total,
                          const std::string& tap) {
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  const SkippedExpectations* k = skip_of(r[0], key);
  ASSERT_NE(k, nullptr) << tap;
  EXPECT_EQ(k->count, count) << tap;
  EXPECT_EQ(r[0].skipped_expectations, total) << tap;
}

// Forces probes to "missing" for one test, whatever happens in it.
struct FakeProbes {
  explicit FakeProbes(const std::string& list) {
    std::string why;
    EXPECT_EQ(host::set_fake_probes(list, &why), 0) << why;
  }
  ~FakeProbes() {
    std::string why;
    (void)host::set_fake_probes("", &why);  // clearing cannot fail
  }
};

const char* kZeroThenCow =
    "test t\nproc P\nP mmap A 16K rw private\nP read A 16K 0\nexpect P A zero yes\n"
    "expect P A mapped pte\nexpect P rss anon 0\nP write A+4K 4K 7\nexpect P A+4K zero no\n"
    "expect P A+4K order 0\nexpect P A+4K exclusive yes\nexpect P rss anon 4K\n"
    "P fork C\nexpect C A+4K same P A+4K\nC write A+4K 1 9\nexpect C A+4K differ P A+4K\n"
    "P read A+4K 4K 7\nexpect counter fault.wp_copy 1\ncheck\n";

// Right on a host with the zero page and on one without: there the read
// maps fresh pages, so `zero yes` and both `rss` (the zero page is not
// counted) are skipped with the probe's reason; the written page is
// compared as everywhere.
// Introspection on the host: smaps and pagemap from the real process, vmstat
// deltas, and a page-table dump that says it is the model's alone.
TEST_F(HostRunTest, PrintShowsWhatTheHostCanShow) {
  std::string tap;
  auto res = run("test a\nproc P\nP mmap A 64K rw private\nP write A 8K 1\nP print smaps A 64K\nP print pagetable A 64K\n"
                 "P print folio A\ncounters print\n"
                 "test b\nproc P\nP mmap A 64K rw private\nP write A 4K 1\nexpect P A mapped pmd\n",
                 &tap);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].outcome, Outcome::kPass) << tap;
  for (const char* want : {"#   Rss:", "#   Anonymous:", "# t.mms:6: P pagetable", "#   (model-only:", "#   pagemap/kpageflags: pfn:",
                           "#   (the model's event counters do not exist on the host"})
    EXPECT_NE(tap.find(want), std::string::npos) << want << "\n" << tap;
  EXPECT_EQ(res[1].outcome, Outcome::kFail) << tap;
  std::string diag;
  for (auto& d : res[1].diagnostics) diag += d + "\n";
  EXPECT_NE(diag.find("state: P smaps 0x"), std::string::npos) << diag;
  EXPECT_NE(diag.find("  pagemap/kpageflags: pfn:"), std::string::npos) << diag;
}

TEST_F(HostRunTest, ZeroPageThenCowOnTheRealKernel) {
  std::string tap;
  auto r = run(kZeroThenCow, &tap);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  const host::HostProbes probes = host::host_probes();
  const bool zero = probes.have(host::Cap::kZeroPage);
  EXPECT_EQ(r[0].skipped_expectations, zero ? 3 : 6) << tap;  // exclusive, counter, check (+ zero, rss, rss)
  EXPECT_NE(tap.find("# host probe zero_page: "), std::string::npos) << tap;
  EXPECT_NE(tap.find("exclusive (no host interface"), std::string::npos) << tap;
  const SkippedExpectations* z = skip_of(r[0], "zero_page");
  if (zero) {
    EXPECT_EQ(z, nullptr) << tap;
  } else {
    ASSERT_NE(z, nullptr) << tap;
    EXPECT_EQ(z->count, 3) << tap;
    EXPECT_EQ(z->why, probes.reason(host::Cap::kZeroPage));
  }
}

// The skip path of a host without the zero page, on any host: the
// zero-page expectations are skipped with the probe's reason, the rest of
// the test still runs (a wrong expectation on the written page fails).
TEST_F(HostRunTest, ForcedMissingZeroPageSkipsOnlyWhatDependsOnIt) {
  FakeProbes fake("zero_page");
  std::string tap;
  auto r = run(std::string(kZeroThenCow) +
                   "test wrong\nproc P\nP mmap A 16K rw private\nP read A 16K 0\nexpect P A zero yes\n"
                   "P write A+4K 4K 7\nexpect P A+4K order 3\n",
               &tap);
  ASSERT_EQ(r.size(), 2u);
  // Forcing a probe the host fails anyway changes nothing: its own answer
  // and reason stand (a kernel booted with pvm_no_zero_page).
  const bool forced = host::host_probes()[host::Cap::kZeroPage].faked;
  EXPECT_NE(tap.find(forced ? "# host probe zero_page: no, forced (measured yes: " : "# host probe zero_page: no ("),
            std::string::npos)
      << tap;
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  EXPECT_EQ(r[0].skipped_expectations, 6) << tap;
  const SkippedExpectations* z = skip_of(r[0], "zero_page");
  ASSERT_NE(z, nullptr) << tap;
  EXPECT_EQ(z->count, 3) << tap;  // zero yes, rss anon 0, rss anon 4K
  EXPECT_EQ(z->why.rfind(forced ? "zero_page: forced missing (measured: " : "zero_page: ", 0), 0u) << z->why;
  EXPECT_NE(tap.find(z->why + " [3];"), std::string::npos) << tap;
  EXPECT_EQ(r[1].outcome, Outcome::kFail) << tap;
  ASSERT_FALSE(r[1].diagnostics.empty());
  EXPECT_NE(r[1].diagnostics[0].find("t.mms:26: expected P A+0x1000 order 3, found 0"), std::string::npos) << tap;
  EXPECT_EQ(r[1].skipped_expectations, 1) << tap;
}

// Without the huge zero folio, a read of a MADV_HUGEPAGE range maps a THP:
// `mapped pmd` still holds and is compared; `zero` and the statistics after
// it are skipped; the written page is compared.
TEST_F(HostRunTest, ForcedMissingHugeZeroPageSkipsOnlyWhatDependsOnIt) {
  FakeProbes fake("huge_zero_page");
  std::string tap;
  auto r = run("test t\nproc P\nP mmap A 2M rw private align=2M\nP madvise A 2M hugepage\nP read A 2M 0\n"
               "expect P A mapped pmd\nexpect P A zero yes\nP write A 4K 1\nexpect P A zero no\n"
               "expect P A order 9\nexpect vmstat thp_fault_alloc 1\n",
               &tap);
  expect_pass_skipping(r, "huge_zero_page", 2, 2, tap);  // zero yes, vmstat
}

// Where a read fault maps fresh pages instead of the zero page, what a
// collapse and a later write do to them differs too: MADV_COLLAPSE of
// pages upstream maps the zero page at fails (no writable PTE), and the
// mapping after it is not compared; a 64K folio the read made stays 64K
// after a write where upstream copies the zero page at order 0. The data
// is compared as everywhere.
TEST_F(HostRunTest, ForcedMissingZeroPageSkipsWhatCollapseAndWriteChange) {
  FakeProbes fake("zero_page,huge_zero_page");
  const bool forced = host::host_probes()[host::Cap::kZeroPage].faked;
  std::string tap;
  auto r = run("test t\nproc P\nP mmap A 2M rw private align=2M\nP read A 2M 0\n"
               "expect-error EINVAL P madvise A 2M collapse\nexpect P A mapped pte\nP read A 2M 0\n",
               &tap);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  // With the zero page really there, the collapse fails as upstream's and
  // only the mapping after it is skipped; without it, its error too.
  const SkippedExpectations* z = skip_of(r[0], "zero_page");
  ASSERT_NE(z, nullptr) << tap;
  EXPECT_EQ(z->count, forced ? 1 : 2) << tap;
  if (access("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled", F_OK) != 0)
    GTEST_SKIP() << "no 64K mTHP on this kernel";
  r = run("test t\nsysfs transparent_hugepage/hugepages-64kB/enabled always\nproc P\n"
          "P mmap A 128K rw private align=64K\nP read A 128K 0\nP write A+8K 4K 1\nexpect P A+8K order 0\n"
          "P read A 8K 0\nP read A+8K 4K 1\n",
          &tap);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  z = skip_of(r[0], "zero_page");
  if (forced) EXPECT_EQ(z, nullptr) << tap;  // the zero page's CoW: order 0, compared
  else EXPECT_NE(z, nullptr) << tap;
}

// Without soft-dirty tracking clear-soft-dirty write-protects nothing: the
// statement and the handle read that checks the write fault it would cause
// are skipped; the process's own data is still checked.
TEST_F(HostRunTest, ForcedMissingSoftDirtySkipsTheWriteFaultsChecks) {
  FakeProbes fake("soft_dirty");
  std::string tap;
  auto r = run("test t\nproc P\nP mmap A 16K rw private\nP write A 16K 1\nP gup H A 4 pin,fast,write,longterm\n"
               "expect H 4\nP mprotect A 16K r\nP clear-soft-dirty\nP mprotect A 16K rw\nP write A 16K 0xff\n"
               "H read 0 16K 0xff\nP read A 16K 0xff\nunpin H\n",
               &tap);
  expect_pass_skipping(r, "soft_dirty", 2, 2, tap);  // clear-soft-dirty, H read
}

// `swap SIZE blkdev` on a host that cannot make a block swap device gets a
// swap file: what its splitting of the mTHP changes (the per-size swpout,
// the order of what was swapped: read back, a block device's folio is
// still in the swap cache, whole) is skipped with the probe's reason; where
// the host can, the same test compares it.
TEST_F(HostRunTest, SwapKindTheHostCannotMakeSkipsWhatDiffers) {
  const host::HostProbes probes = host::host_probes();
  if (std::find(probes.mthp_kb.begin(), probes.mthp_kb.end(), 64u) == probes.mthp_kb.end())
    GTEST_SKIP() << "no 64K mTHP on this kernel";
  const std::string text =
      "test t\nsysfs transparent_hugepage/hugepages-64kB/enabled always\nswap 64M blkdev\nproc P\n"
      "P mmap A 64K rw private align=64K\nP write A 64K 0x5a\nexpect P A order 4\nP madvise A 64K pageout\n"
      "expect P A swapped yes\nexpect sysfs transparent_hugepage/hugepages-64kB/stats/swpout 1\n"
      "P read A 64K 0x5a\n";
  std::string tap;
  if (probes.have(host::Cap::kBlkdevSwap)) {
    auto r = run(text, &tap);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
    EXPECT_EQ(r[0].skipped_expectations, 0) << tap;
  }
  FakeProbes fake("blkdev_swap");
  auto r = run(text + "expect P A order 4\n", &tap);
  expect_pass_skipping(r, "blkdev_swap", 2, 2, tap);  // swpout, the order read back
}

// Machine-wide statistics: another process faulting 64K mTHPs while the
// test has them enabled moves anon_fault_alloc. Seen moving while the
// test is idle, a count above the expected one is skipped as background;
// one below it, or a statistic nothing moves, still fails.
TEST_F(HostRunTest, BackgroundActivitySkipsOnlyWhatItExplains) {
  if (access("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled", F_OK) != 0)
    GTEST_SKIP() << "no 64K mTHP on this kernel";
  pid_t polluter = fork();
  ASSERT_GE(polluter, 0);
  if (polluter == 0) {
    prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    for (;;) {
      void* p = mmap(nullptr, 128 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) _exit(1);
      auto* at = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + (64 << 10) - 1) & ~uintptr_t{(64 << 10) - 1});
      *at = 1;
      munmap(p, 128 << 10);
      usleep(200);
    }
  }
  usleep(20000);  // the polluter under way before the first test begins
  std::string tap;
  const std::string stat = "transparent_hugepage/hugepages-64kB/stats/anon_fault_alloc";
  auto r = run("test t\nsysfs transparent_hugepage/hugepages-64kB/enabled always\nproc P\n"
               "P mmap A 1M rw private align=1M\nP write A 4K 1\nexpect sysfs " + stat + " 1\n"
               "expect vmstat thp_zero_page_alloc_failed 0\n"
               "test below\nsysfs transparent_hugepage/hugepages-64kB/enabled always\nproc P\n"
               "P mmap A 1M rw private align=1M\nP write A 4K 1\nexpect sysfs " + stat + " 1000000000\n"
               "test quiet\nproc P\nP mmap A 2M rw private align=2M\nP madvise A 2M hugepage\nP write A 4K 1\n"
               "expect vmstat thp_fault_alloc 0\n",
               &tap);
  kill(polluter, SIGKILL);
  waitpid(polluter, nullptr, 0);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].outcome, Outcome::kFail) << tap;
  EXPECT_EQ(r[2].outcome, Outcome::kFail) << tap;
  EXPECT_EQ(r[2].skipped_expectations, 0) << tap;
  EXPECT_EQ(r[0].outcome, Outcome::kPass) << tap;
  const SkippedExpectations* bg = skip_of(r[0], "background");
  // A pass with nothing skipped means the statistic moved by the test's own
  // fault alone: the polluter got no 64K folio in that window (seen on
  // this machine kind when the host cannot allocate one), so there was no
  // background activity to explain. Activity the backend failed to explain
  // fails test t instead, and that fails here.
  if (r[0].outcome == Outcome::kPass && !bg)
    GTEST_SKIP() << "the polluter made no 64K mTHP while test t ran: no background activity to explain\n" << tap;
  ASSERT_NE(bg, nullptr) << tap;
  EXPECT_NE(bg->why.find("sysfs " + stat + " moved by"), std::string::npos) << bg->why;
  EXPECT_EQ(r[0].skipped_expectations, 1) << tap;
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

// A verifying read, of the process's memory and through a pin, names the
// first byte that differs wherever in a page it is, past the first page.
TEST_F(HostRunTest, VerifyingReadsNameTheFirstByteThatDiffers) {
  auto r = run("test p\nproc P\nP mmap A 64K rw private\nP write A 64K 1\nP write A+0x5007 1 2\nP read A 64K 1\n"
               "test h\nproc P\nP mmap A 64K rw private\nP write A 64K 1\nP gup H A 16 pin,fast,write,longterm\n"
               "expect H 16\nP write A+0x9005 1 3\nH read 0 64K 1\nunpin H\n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].outcome, Outcome::kFail);
  EXPECT_NE(r[0].diagnostics.at(0).find("found 0x02 at +0x5007"), std::string::npos) << r[0].diagnostics.at(0);
  if (r[1].outcome == Outcome::kSkip) GTEST_SKIP() << r[1].reason;  // no io_uring on this host
  EXPECT_EQ(r[1].outcome, Outcome::kFail);
  EXPECT_NE(r[1].diagnostics.at(0).find("found 0x03 at +0x9005"), std::string::npos) << r[1].diagnostics.at(0);
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

// Both kinds of swap device are journaled for a killed run while they
// exist, and leave nothing behind.
TEST_F(HostRunTest, SwapDevicesAreJournaledAndRemoved) {
  auto read_all = [](const char* path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  for (auto kind : {host::HostSwapKind::kBlkdev, host::HostSwapKind::kFile}) {
    std::string dev, why;
    {
      host::HostSwap swap;
      ASSERT_EQ(swap.add(8ull << 20, kind, &why), 0) << why;
      dev = swap.device();
      EXPECT_EQ(dev.rfind(kind == host::HostSwapKind::kBlkdev ? "/dev/loop" : "/var/tmp/mmlab-swap.", 0), 0u) << dev;
      EXPECT_NE(read_all("/proc/swaps").find(dev + " "), std::string::npos) << dev;
      EXPECT_NE(read_all("/var/tmp/mmlab-host.restore").find("swap\t" + dev + "\t/var/tmp/mmlab-swap."), std::string::npos);
    }
    EXPECT_EQ(read_all("/proc/swaps").find(dev + " "), std::string::npos) << dev;
    EXPECT_NE(access("/var/tmp/mmlab-host.restore", F_OK), 0);
    EXPECT_NE(access(swap_image_path(kind).c_str(), F_OK), 0);
  }
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
  EXPECT_NE(out.str().find("\n1..2\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nok 1 - same\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nok 2 - skipped # SKIP host skips: "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("2 tests, 1 compared (1 agree, 0 with only model-only counters differing, 0 with end-state "
                           "differences), 1 not compared"),
            std::string::npos)
      << out.str();
}

// The ranges `expect P rss` counts: each byte once, however the test
// remapped, shrank or mapped over them.
TEST(HostPagesTest, RangesCountEachPageOnce) {
  constexpr uint64_t A = 0x10000000, B = 0x20000000, K = 1024;
  auto total = [](const HostPages& p) {
    uint64_t n = 0;
    for (auto& [from, r] : p.ranges()) n += r.end - from;
    return n;
  };
  HostPages p;
  p.map(A, 16 * K, HostRangeKind::kAnonPrivate);
  p.remap(A, 16 * K, A, 8 * K);  // an in-place shrink
  EXPECT_EQ(total(p), 8 * K);
  p.remap(A, 8 * K, A, 12 * K);  // grown in place
  EXPECT_EQ(total(p), 12 * K);
  p.map(A + 4 * K, 4 * K, HostRangeKind::kOther);  // MAP_FIXED over the middle
  EXPECT_EQ(total(p), 12 * K);
  ASSERT_EQ(p.ranges().size(), 3u);
  EXPECT_EQ(p.ranges().at(A + 4 * K).kind, HostRangeKind::kOther);
  p.remap(A + 8 * K, 4 * K, B, 4 * K);  // moved away
  EXPECT_EQ(total(p), 12 * K);
  EXPECT_EQ(p.ranges().count(B), 1u);
  EXPECT_EQ(p.ranges().at(B).kind, HostRangeKind::kAnonPrivate);
  p.unmap(A, 8 * K);
  EXPECT_EQ(total(p), 4 * K);
  EXPECT_EQ(p.pieces(0, ~0ull >> 1, HostRangeKind::kAnonPrivate).size(), 1u);
}

TEST(HostPagesTest, TaintsFollowTheirPages) {
  constexpr uint64_t A = 0x10000000, B = 0x20000000, K = 1024;
  HostPages p;
  p.map(A, 64 * K, HostRangeKind::kAnonPrivate);
  p.set(A, 16 * K, kTaintZeroPte);
  p.set(A + 16 * K, 4 * K, kTaintZeroPte);
  EXPECT_EQ(p.taints().size(), 1u);  // neighbours with the same bits are one run
  p.clear(A + 4 * K, 4 * K, kTaintZero);  // a write
  EXPECT_EQ(p.at(A), kTaintZeroPte);
  EXPECT_EQ(p.at(A + 4 * K), 0);
  EXPECT_EQ(p.at(A + 4 * K + 4095), 0);
  EXPECT_EQ(p.in(A + 4 * K, 8 * K), kTaintZeroPte);
  p.add_where(A, 64 * K, kTaintZeroPte, kTaintZeroMapped);  // MADV_PAGEOUT
  EXPECT_EQ(p.at(A + 8 * K), kTaintZeroPte | kTaintZeroMapped);
  EXPECT_EQ(p.at(A + 32 * K), 0);
  p.remap(A + 8 * K, 8 * K, B, 8 * K);
  EXPECT_EQ(p.at(B), kTaintZeroPte | kTaintZeroMapped);
  EXPECT_EQ(p.at(A + 8 * K), 0);
  p.unmap(B, 8 * K);
  EXPECT_EQ(p.in(B, 8 * K), 0);
  EXPECT_EQ(p.any(), kTaintZeroPte | kTaintZeroMapped);  // A and A+16K..A+20K are left
  p.clear(A, 64 * K, 0xff);
  EXPECT_TRUE(p.taints().empty());
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
