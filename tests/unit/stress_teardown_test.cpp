// `mmlab stress`'s end-of-run leak check (tools/mmlab/stress/stress.cpp,
// tear_down). The teardown leaves the hugetlb pools' free pages in place
// (emptying them poisoned every frame of every huge page: most of a short
// fuzz input's time) and counts them as the kernel's own frames; these
// tests hold the check to catching a real leak all the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "mmlab/types.h"
#include "stress/stress.h"

namespace mmlab {
namespace {

// A short one-thread run over a mapped anonymous type and both 2 MiB
// hugetlb types, deterministic (no khugepaged thread) and small.
stress::Config small_run() {
  stress::Config cfg;
  cfg.threads = 1;
  cfg.ops = 300;
  cfg.seed = 7;
  cfg.check_every = 100;
  cfg.khugepaged_thread = false;
  cfg.ram = 256ull << 20;
  cfg.swap_blkdev_bytes = 1ull << 20;
  cfg.swap_file_bytes = 2ull << 20;
  cfg.types = {"anon-64K", "hugetlb-2M", "hugetlb-2M-shared"};
  return cfg;
}

void expect_hugetlb_ran(const stress::Result& res) {
  for (const char* t : {"hugetlb-2M", "hugetlb-2M-shared"})
    EXPECT_NE(std::find(res.types_run.begin(), res.types_run.end(), t), res.types_run.end()) << t << " did not run";
}

TEST(StressTeardownTest, CleanRunWithAFreeHugetlbPoolReportsNoLeak) {
  stress::Result res;
  std::string err;
  ASSERT_TRUE(stress::run(small_run(), &res, &err)) << err;
  expect_hugetlb_ran(res);
  EXPECT_EQ(res.frames_leaked, 0u);
  EXPECT_TRUE(res.violations.empty()) << res.violations.front();
  EXPECT_EQ(res.nr_mismatches, 0u);
  EXPECT_TRUE(res.ok());
  // The pools were not emptied: their free pages (each type's pool has
  // more pages than its one region) are what the check allowed for, beside
  // the zero page and at most the huge zero folio.
  EXPECT_GE(res.kernel_frames, 1 + 2 * HPAGE_PMD_NR);
}

TEST(StressTeardownTest, PlantedLeakIsReportedBesideAFreeHugetlbPool) {
  stress::Config cfg = small_run();
  cfg.plant_leaked_frame = true;
  stress::Result res;
  std::string err;
  ASSERT_TRUE(stress::run(cfg, &res, &err)) << err;
  expect_hugetlb_ran(res);
  EXPECT_GE(res.kernel_frames, 1 + 2 * HPAGE_PMD_NR);
  // The planted 4 KiB page and the planted 2 MiB hugetlb page, exactly:
  // neither hidden by the free pool pages nor counted twice.
  EXPECT_EQ(res.frames_leaked, 1u + HPAGE_PMD_NR);
  EXPECT_FALSE(res.ok());
}

TEST(StressTeardownTest, PlantedLeakIsReportedWithoutHugetlb) {
  stress::Config cfg = small_run();
  cfg.types = {"anon-64K", "shmem"};
  cfg.plant_leaked_frame = true;
  stress::Result res;
  std::string err;
  ASSERT_TRUE(stress::run(cfg, &res, &err)) << err;
  EXPECT_EQ(res.frames_leaked, 1u);
  EXPECT_FALSE(res.ok());
}

}  // namespace
}  // namespace mmlab
