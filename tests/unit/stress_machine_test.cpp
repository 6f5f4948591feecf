// stress::Machine: one System kept for many runs (fuzz_ops makes thousands).
// A run must leave it as it found it, so that a run on a kept machine is
// the run a fresh machine would make, and a run that did not leave it clean
// retires it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "mmlab/system.h"
#include "mmlab/tune.h"
#include "stress/stress.h"

namespace mmlab {
namespace {

stress::Config kept_run(uint64_t seed) {
  stress::Config cfg;
  cfg.threads = 1;
  cfg.ops = 400;
  cfg.seed = seed;
  cfg.check_every = 100;
  cfg.khugepaged_thread = false;
  cfg.ram = 256ull << 20;
  cfg.swap_blkdev_bytes = 1ull << 20;
  cfg.swap_file_bytes = 2ull << 20;
  cfg.types = {"anon-64K", "thp", "shmem", "hugetlb-2M"};
  return cfg;
}

// What a run did that depends on the System it ran on: every operation's
// count and each errno it met, the statistics, the end's checks.
void expect_same_run(const stress::Result& a, const stress::Result& b) {
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.errors, b.errors);
  EXPECT_EQ(a.stats, b.stats);
  EXPECT_EQ(a.types_run, b.types_run);
  EXPECT_EQ(a.checks, b.checks);
  EXPECT_EQ(a.kernel_frames, b.kernel_frames);
}

TEST(StressMachineTest, ARunOnAKeptMachineIsTheRunOfAFreshOne) {
  std::string err;
  stress::Result fresh;
  ASSERT_TRUE(stress::run(kept_run(3), &fresh, &err)) << err;
  ASSERT_TRUE(fresh.ok());

  std::unique_ptr<stress::Machine> m = stress::make_machine(kept_run(3), &err);
  ASSERT_NE(m, nullptr) << err;
  for (uint64_t seed : {11, 12, 13}) {  // other runs first, each leaving it clean
    stress::Result r;
    ASSERT_TRUE(stress::run(m.get(), kept_run(seed), &r, &err)) << err;
    ASSERT_TRUE(r.ok()) << "seed " << seed;
    EXPECT_EQ(r.frames_leaked, 0u);
  }
  stress::Result kept;
  ASSERT_TRUE(stress::run(m.get(), kept_run(3), &kept, &err)) << err;
  EXPECT_TRUE(kept.ok());
  expect_same_run(fresh, kept);
}

TEST(StressMachineTest, SwitchedTuneKeysAreRestored) {
  std::string err;
  stress::Config cfg = kept_run(5);
  cfg.variants = {{"cow.policy", {"fixed"}}};
  cfg.mix = {{"variant", 50}};  // the others at their default weights
  std::unique_ptr<stress::Machine> m = stress::make_machine(cfg, &err);
  ASSERT_NE(m, nullptr) << err;
  stress::Result r;
  ASSERT_TRUE(stress::run(m.get(), cfg, &r, &err)) << err;
  ASSERT_GT(r.ops["variant"], 0u);
  std::string policy;
  ASSERT_EQ(m->system().tune_read("cow.policy", &policy), 0);
  EXPECT_EQ(policy, tune_default("cow.policy"));
}

TEST(StressMachineTest, AFailedRunRetiresTheMachine) {
  std::string err;
  stress::Config cfg = kept_run(9);
  cfg.plant_corruption = true;  // a data mismatch the run must report
  std::unique_ptr<stress::Machine> m = stress::make_machine(cfg, &err);
  ASSERT_NE(m, nullptr) << err;
  stress::Result r;
  ASSERT_TRUE(stress::run(m.get(), cfg, &r, &err)) << err;
  ASSERT_FALSE(r.ok());
  stress::Result next;
  EXPECT_FALSE(stress::run(m.get(), kept_run(9), &next, &err));
  EXPECT_NE(err.find("retired"), std::string::npos) << err;
}

TEST(StressMachineTest, AConfigForAnotherMachineIsRefused) {
  std::string err;
  std::unique_ptr<stress::Machine> m = stress::make_machine(kept_run(1), &err);
  ASSERT_NE(m, nullptr) << err;
  stress::Config other = kept_run(1);
  other.ram = 512ull << 20;
  stress::Result r;
  EXPECT_FALSE(stress::run(m.get(), other, &r, &err));
  EXPECT_NE(err.find("another"), std::string::npos) << err;
}

}  // namespace
}  // namespace mmlab
