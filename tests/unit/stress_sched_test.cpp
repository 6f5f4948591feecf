// `mmlab stress --sched` (docs/STRESS.md "Under the scheduler"): the
// workers run under the deterministic scheduler, one explorer run per round
// of check_every operations each, so that the seed alone reproduces a run
// step for step, and the rounds' choices replay it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "repeats.h"
#include "stress/stress.h"

namespace mmlab {
namespace {

// Small and quick, but with several threads, rounds and memory types (a
// file, a THP), every operation kind at its default weight.
stress::Config sched_run(stress::Sched how, uint64_t seed) {
  stress::Config cfg;
  cfg.threads = 3;
  // Three rounds either way: 150 operations per worker (60 under a
  // sanitizer, repeats.h), a third of them a round.
  cfg.ops = test::kSanitized ? 180 : 450;
  cfg.seed = seed;
  cfg.check_every = cfg.ops / 9;
  cfg.ram = 256ull << 20;
  cfg.swap_blkdev_bytes = 1ull << 20;
  cfg.swap_file_bytes = 2ull << 20;
  // Shared anonymous memory and both hugetlb types too: the first walked
  // its file's i_mmap in host-address order and the second's fault mutex
  // was chosen by a hash of the file's address, so whether two runs agreed
  // depended on where the heap put things (docs/NOTES.md "Stress under the
  // scheduler").
  cfg.types = {"anon-64K", "thp", "anon-shared", "shmem", "hugetlb-2M", "hugetlb-2M-shared"};
  cfg.sched = how;
  return cfg;
}

// Everything a run reports but its wall-clock time, as text.
std::string report_of(const stress::Result& r) {
  std::ostringstream o;
  o << "run hash " << r.run_hash << ", " << r.rounds.size() << " rounds, " << r.sched_steps << " steps\n";
  for (size_t i = 0; i < r.rounds.size(); i++) o << "round " << i << " hash " << r.rounds[i].hash << "\n";
  for (const auto& [k, v] : r.ops) o << "ops " << k << " " << v << "\n";
  for (const auto& [k, v] : r.errors) o << "error " << k << " " << v << "\n";
  for (const auto& [k, v] : r.stats) o << "stat " << k << " " << v << "\n";
  for (const auto& [k, v] : r.not_run) o << "not run " << k << " " << v << "\n";
  for (const auto& v : r.violations) o << "violation " << v << "\n";
  for (const auto& m : r.mismatches) o << "mismatch " << m << "\n";
  o << "khugepaged " << r.khugepaged_full_scans << " full scans, " << r.khugepaged_collapsed << " collapsed\n";
  o << "checks " << r.checks << ", mismatches " << r.nr_mismatches << ", leaked " << r.frames_leaked << ", ok " << r.ok()
    << "\n";
  return o.str();
}

// A run in a new process (this test binary again, running only
// StressSchedChild.DISABLED_Run): its rounds (format_rounds) on the first
// line, then its report. A run repeats step for step from the same heap
// (a new process; stress::run makes the allocator's addresses follow the
// steps); a second run in one process starts from a heap the first one
// changed, and something in the model still follows host addresses
// (docs/NOTES.md "Stress under the scheduler").
std::string in_new_process(const stress::Config& cfg) {
  char dir[] = "/tmp/mmlab-stress-sched-XXXXXX";
  if (!mkdtemp(dir)) return "mkdtemp failed";
  const std::string replay = std::string(dir) + "/replay", out = std::string(dir) + "/out";
  std::ofstream(replay) << cfg.replay;
  const std::string spec = fmt::format("{} {} {} {} {}", stress::sched_name(cfg.sched), cfg.seed, cfg.plant_corruption ? 1 : 0,
                                       cfg.replay.empty() ? "-" : replay, out);
  const std::string cmd = fmt::format(
      "MMLAB_STRESS_SCHED_CHILD='{}' /proc/{}/exe --gtest_also_run_disabled_tests "
      "--gtest_filter=StressSchedChild.DISABLED_Run >/dev/null 2>&1",
      spec, getpid());
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  std::filesystem::remove_all(dir);
  return ss.str();
}

// The child's side: the run MMLAB_STRESS_SCHED_CHILD describes ("SCHED
// SEED PLANT REPLAY-FILE|- OUT-FILE"), its output written to OUT-FILE.
TEST(StressSchedChild, DISABLED_Run) {
  const char* spec = std::getenv("MMLAB_STRESS_SCHED_CHILD");
  ASSERT_NE(spec, nullptr);
  std::istringstream in(spec);
  std::string how, replay_file, out_file;
  uint64_t seed = 0;
  int plant = 0;
  in >> how >> seed >> plant >> replay_file >> out_file;
  stress::Config cfg = sched_run(how == "random" ? stress::Sched::kRandom : stress::Sched::kPct, seed);
  cfg.plant_corruption = plant != 0;
  if (replay_file != "-") {
    std::ifstream f(replay_file);
    std::getline(f, cfg.replay);
  }
  stress::Result r;
  std::string err;
  ASSERT_TRUE(stress::run(cfg, &r, &err)) << err;
  std::ofstream(out_file) << stress::format_rounds(r.rounds) << "\n" << report_of(r);
}

std::string rounds_of(const std::string& child) { return child.substr(0, child.find('\n')); }
std::string report_in(const std::string& child) { return child.substr(child.find('\n') + 1); }

TEST(StressSchedTest, PctTheSameSeedMakesTheSameRunStepForStep) {
  const std::string a = in_new_process(sched_run(stress::Sched::kPct, 5));
  const std::string b = in_new_process(sched_run(stress::Sched::kPct, 5));
  ASSERT_NE(a.find("ok 1"), std::string::npos) << a;
  EXPECT_NE(a.find("3 rounds"), std::string::npos) << a;
  EXPECT_NE(a.find("checks 4,"), std::string::npos) << a;  // one per round and the end's
  // khugepaged is one of the scheduled threads: a full scan a round.
  EXPECT_EQ(a.find("not run khugepaged"), std::string::npos) << a;
  EXPECT_EQ(a.find("khugepaged 0 full scans"), std::string::npos) << a;
  EXPECT_EQ(rounds_of(a), rounds_of(b));
  EXPECT_EQ(report_in(a), report_in(b));
  // Another seed is another interleaving (the test could not fail if the
  // seed chose nothing).
  EXPECT_NE(rounds_of(a), rounds_of(in_new_process(sched_run(stress::Sched::kPct, 6))));
}

// Two runs of one seed in one process: the second starts from a heap (and
// a recycled frame store, and simulated CPUs) the first one used, so
// nothing the model does may follow a host address or a process-wide
// leftover of the first run.
TEST(StressSchedTest, TheSameSeedTwiceInOneProcessMakesTheSameReport) {
  for (const auto& [how, seed] : {std::pair{stress::Sched::kPct, uint64_t{5}}, std::pair{stress::Sched::kPct, uint64_t{6}},
                                  std::pair{stress::Sched::kRandom, uint64_t{9}}}) {
    std::string first;
    for (int run = 0; run < 2; run++) {
      const stress::Config cfg = sched_run(how, seed);
      stress::Result r;
      std::string err;
      ASSERT_TRUE(stress::run(cfg, &r, &err)) << err;
      const std::string rep = stress::format_rounds(r.rounds) + "\n" + report_of(r);
      ASSERT_NE(rep.find("ok 1"), std::string::npos) << rep;
      if (run == 0) first = rep;
      else EXPECT_EQ(first, rep) << stress::sched_name(how) << " seed " << seed;
    }
  }
}

TEST(StressSchedTest, RandomTheSameSeedMakesTheSameRunStepForStep) {
  const std::string a = in_new_process(sched_run(stress::Sched::kRandom, 9));
  const std::string b = in_new_process(sched_run(stress::Sched::kRandom, 9));
  ASSERT_NE(a.find("ok 1"), std::string::npos) << a;
  EXPECT_EQ(rounds_of(a), rounds_of(b));
  EXPECT_EQ(report_in(a), report_in(b));
  // A random thread at every step switches far more often than PCT.
  EXPECT_GT(rounds_of(a).size(), 4 * rounds_of(in_new_process(sched_run(stress::Sched::kPct, 9))).size());
}

TEST(StressSchedTest, TheRoundsReplayARunWithAPlantedCorruptionToTheSameReport) {
  stress::Config cfg = sched_run(stress::Sched::kPct, 3);
  cfg.plant_corruption = true;
  const std::string found = in_new_process(cfg);
  ASSERT_NE(found.find("ok 0"), std::string::npos) << found;
  ASSERT_NE(found.find("mismatch thread 0: final sweep"), std::string::npos) << found;

  stress::Config again = cfg;
  again.replay = rounds_of(found);
  EXPECT_EQ(report_in(found), report_in(in_new_process(again)));
  // The replay takes the rounds' choices, not the seed's: under another
  // strategy it is still the same run.
  again.sched = stress::Sched::kRandom;
  EXPECT_EQ(report_in(found), report_in(in_new_process(again)));
}

TEST(StressSchedTest, AReplayThatNoLongerFitsSaysWhereItDiverged) {
  const stress::Config cfg = sched_run(stress::Sched::kPct, 4);
  const std::string run = in_new_process(cfg);
  ASSERT_NE(run.find("ok 1"), std::string::npos) << run;
  std::vector<stress::Round> r;
  std::string err;
  ASSERT_TRUE(stress::parse_rounds(rounds_of(run), &r, &err)) << err;
  ASSERT_GE(r.size(), 2u);

  // Round 1's hash changed: the steps are the same, the hash is not.
  std::vector<stress::Round> rounds = r;
  rounds[1].hash ^= 1;
  stress::Config bad = cfg;
  bad.replay = stress::format_rounds(rounds);
  std::string d = in_new_process(bad);
  EXPECT_NE(d.find("violation scheduler: round 1 ended diverged"), std::string::npos) << d;
  EXPECT_NE(d.find("the steps' hash is"), std::string::npos) << d;
  EXPECT_EQ(d.find("round 2 hash"), std::string::npos) << d;  // the run stops there

  // Another run's choices for round 0: they ask for steps the run does not
  // take (or end too soon, or too late).
  std::vector<stress::Round> other;
  ASSERT_TRUE(stress::parse_rounds(rounds_of(in_new_process(sched_run(stress::Sched::kRandom, 4))), &other, &err)) << err;
  rounds = r;
  rounds[0].choices = other[0].choices;
  bad.replay = stress::format_rounds(rounds);
  d = in_new_process(bad);
  EXPECT_NE(d.find("violation scheduler: round 0 ended diverged"), std::string::npos) << d;

  // One round fewer than the run takes.
  rounds = r;
  rounds.pop_back();
  bad.replay = stress::format_rounds(rounds);
  d = in_new_process(bad);
  EXPECT_NE(d.find("goes on after the schedule's"), std::string::npos) << d;
  EXPECT_NE(d.find("ok 0"), std::string::npos) << d;
}

TEST(StressSchedTest, NoWallClockAndNoBytesUnderTheScheduler) {
  stress::Result r;
  std::string err;
  stress::Config cfg = sched_run(stress::Sched::kPct, 1);
  cfg.seconds = 1;
  EXPECT_FALSE(stress::run(cfg, &r, &err));
  EXPECT_NE(err.find("no wall clock"), std::string::npos) << err;
  cfg.seconds = 0;
  cfg.ops = 0;
  EXPECT_FALSE(stress::run(cfg, &r, &err));
  EXPECT_NE(err.find("--ops"), std::string::npos) << err;
  cfg.ops = 10;
  cfg.replay = "12:0*3/x";
  EXPECT_FALSE(stress::run(cfg, &r, &err));
  EXPECT_NE(err.find("round 1: 'x'"), std::string::npos) << err;
}

TEST(StressSchedTest, RoundsFormatAndParseBothWays) {
  const std::vector<stress::Round> rounds = {{0xabc, "0*3,1*2"}, {0, "2*1"}};
  std::vector<stress::Round> back;
  std::string err;
  ASSERT_TRUE(stress::parse_rounds(stress::format_rounds(rounds), &back, &err)) << err;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].hash, 0xabcu);
  EXPECT_EQ(back[1].choices, "2*1");
  for (const char* bad : {"", "abc", "abc:", "g:0*1", "1:0*1/", "1:0*x"})
    EXPECT_FALSE(stress::parse_rounds(bad, &back, &err)) << bad;
}

}  // namespace
}  // namespace mmlab
