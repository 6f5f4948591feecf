// The statistics `mmlab bench` and `mmlab gup-test` print (tools/mmlab/
// report/statistics.h): the ratio of medians, its bootstrap interval and
// verdict, and the gup-test summary built on them. Fixed samples, no timing.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "report/statistics.h"
#include "bench/gup_bench.h"

namespace mmlab::cli {
namespace {

// Eight rounds in which both sides slow down together (a disturbance per
// round), v always twice as fast as base in its own round.
std::vector<double> rounds() { return {100, 180, 95, 260, 120, 101, 150, 99}; }
std::vector<double> halved(std::vector<double> v) {
  for (double& x : v) x /= 2;
  return v;
}

TEST(BenchStatsTest, RatioOfMediansWithItsInterval) {
  const RatioCi r = median_ratio_ci(rounds(), halved(rounds()));
  ASSERT_TRUE(r.valid);
  EXPECT_DOUBLE_EQ(r.ratio, 2.0);
  EXPECT_EQ(r.n, 8);
  // Paired over the rounds, every resample's ratio is exactly 2.
  EXPECT_DOUBLE_EQ(r.lo, 2.0);
  EXPECT_DOUBLE_EQ(r.hi, 2.0);
  // An interval that leaves out 1 is marked significant.
  EXPECT_EQ(r.verdict, Verdict::kDifferent);
  EXPECT_EQ(ci_text(r), "[2.00x, 2.00x]*");
  EXPECT_EQ(ratio_ci_text(r), "2.00x [2.00x, 2.00x]*");
  EXPECT_EQ(diff_ci_text(r), "-50.0% [-50.0%, -50.0%]*");
}

TEST(BenchStatsTest, IndependentSidesResampleApart) {
  // The same samples without the rounds' correspondence: the interval
  // takes in the spread across rounds.
  const RatioCi r = median_ratio_ci(rounds(), halved(rounds()), Pairing::kIndependent);
  ASSERT_TRUE(r.valid);
  EXPECT_DOUBLE_EQ(r.ratio, 2.0);
  EXPECT_LT(r.lo, 2.0);
  EXPECT_GT(r.hi, 2.0);
}

TEST(BenchStatsTest, IntervalIsAFunctionOfTheSamples) {
  const std::vector<double> a = {10, 12, 11, 15, 9, 10.5}, b = {5, 7, 6, 5.5, 6.2, 8};
  const RatioCi x = median_ratio_ci(a, b), y = median_ratio_ci(a, b);
  ASSERT_TRUE(x.valid);
  EXPECT_EQ(x.lo, y.lo);
  EXPECT_EQ(x.hi, y.hi);
  EXPECT_LE(x.lo, x.ratio);
  EXPECT_GE(x.hi, x.ratio);
}

TEST(BenchStatsTest, NoIntervalBelowFiveSamples) {
  // Four rounds: the ratio, but no interval (it could not be a 95% one).
  const std::vector<double> a = {10, 12, 11, 15}, b = {5, 7, 6, 5.5};
  const RatioCi four = median_ratio_ci(a, b);
  EXPECT_FALSE(four.valid);
  EXPECT_EQ(four.n, 4);
  EXPECT_DOUBLE_EQ(four.ratio, 11.5 / 5.75);
  EXPECT_EQ(ci_text(four), "n/a (n<5)");
  EXPECT_EQ(ratio_ci_text(four), "2.00x n/a (n<5)");
  EXPECT_EQ(diff_ci_text(four), "n/a (n<5)");
  EXPECT_EQ(percent_ci_text(four), "200% n/a (n<5)");
  // The smaller side decides.
  EXPECT_FALSE(median_ratio_ci({1, 2, 3, 4, 5, 6}, {1, 2, 3, 4}, Pairing::kIndependent).valid);
  // Five on each side: an interval.
  const RatioCi five = median_ratio_ci({10, 12, 11, 15, 9}, {5, 7, 6, 5.5, 6.2});
  EXPECT_TRUE(five.valid);
  EXPECT_EQ(five.n, 5);
}

TEST(BenchStatsTest, NoRatioWithoutAPositiveMedian) {
  const RatioCi r = median_ratio_ci({1, 2, 3, 4, 5}, {0, 0, 0, 0, 0});
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.ratio, 0);
}

TEST(BenchStatsTest, TheMarkIsTheIntervalLeavingOutOne) {
  // Pairs of sample sets around the boundary (v's median from 0.8 to 1.2
  // times base's, spread 5-20%, 5 to 12 samples): the verdict is
  // kDifferent exactly when the printed interval leaves out 1, whatever
  // the pairing. A verdict reached another way (a test of its own, a 90%
  // interval's ends) parts from the interval on some of these pairs.
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> unit(0, 1);
  long different = 0, same = 0;
  for (int k = 0; k < 200; k++) {
    const size_t n = 5 + static_cast<size_t>(k % 8);
    const double shift = 0.8 + 0.4 * unit(rng), spread = 0.05 + 0.15 * unit(rng);
    std::vector<double> base(n), v(n);
    for (size_t i = 0; i < n; i++) {
      base[i] = 100 * (1 + spread * unit(rng));
      v[i] = 100 * shift * (1 + spread * unit(rng));
    }
    for (Pairing p : {Pairing::kAlternated, Pairing::kIndependent}) {
      const RatioCi r = median_ratio_ci(base, v, p);
      ASSERT_TRUE(r.valid);
      const bool leaves_out_one = r.lo > 1 || r.hi < 1;
      EXPECT_EQ(r.verdict == Verdict::kDifferent, leaves_out_one) << "pair " << k << ": [" << r.lo << ", " << r.hi << "]";
      EXPECT_NE(r.verdict, Verdict::kUndecided);
      (leaves_out_one ? different : same)++;
    }
  }
  // Both answers occur, or the pairs never reached the boundary.
  EXPECT_GT(different, 20);
  EXPECT_GT(same, 20);
}

TEST(BenchStatsTest, AVerdictWithoutARatio) {
  // Negative values (a fit's intercept) have no ratio, but a verdict.
  const RatioCi r = median_ratio_ci({-5, -5.1, -4.9, -5.2, -4.8}, {-1, -1.1, -0.9, -1.2, -0.8}, Pairing::kIndependent);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.verdict, Verdict::kDifferent);
  EXPECT_EQ(ci_text(r), "n/a*");
}

TEST(BenchStatsTest, BelowFiveSamplesOnlyValuesWithoutSpreadAreDecided) {
  EXPECT_EQ(median_ratio_ci({1, 2, 3}, {40, 50, 60}, Pairing::kIndependent).verdict, Verdict::kUndecided);
  // The model's counts, identical in every run: they differ, or they do not.
  EXPECT_EQ(median_ratio_ci({7, 7}, {8, 8}, Pairing::kIndependent).verdict, Verdict::kDifferent);
  EXPECT_EQ(median_ratio_ci({7, 7, 7}, {7, 7}, Pairing::kIndependent).verdict, Verdict::kSame);
  // One sample cannot show that a side has no spread.
  EXPECT_EQ(median_ratio_ci({7}, {8, 8}, Pairing::kIndependent).verdict, Verdict::kUndecided);
  EXPECT_EQ(ratio_ci_text(median_ratio_ci({7, 7}, {8, 8}, Pairing::kIndependent)), "0.88x n/a (n<5)*");
}

TEST(BenchStatsTest, APartAboveItsTotalIsNoRemainder) {
  EXPECT_EQ(remainder_of(1000, 300), 700);
  EXPECT_EQ(remainder_of(1000, 1000), 0);
  // Zeroing timed at 4050 ns more than the fault-in it is part of: noise
  // between the two runs, no negative bookkeeping.
  EXPECT_FALSE(remainder_of(100000, 104050).has_value());
}

// A gup-test result: `repeats` rounds of two variants alternated, the first
// round much slower (a cold start).
GupBenchResult gup_result(long repeats) {
  GupBenchResult res;
  res.variants = {"gup.walk=walk", "gup.walk=legacy"};  // the default second: it is still the base
  res.region_pages = 1000;
  for (long r = 0; r < repeats; r++)
    for (auto& v : res.variants) {
      GupIteration it;
      it.variant = v;
      it.repeat = r;
      const double legacy = r == 0 ? 5000 : 1000 + 10 * static_cast<double>(r % 3);
      it.get_us = v == "gup.walk=legacy" ? legacy : legacy / 4;
      it.put_us = 100;
      res.iters.push_back(it);
    }
  return res;
}

TEST(BenchStatsTest, GupTestSummaryDiscardsTheWarmUpAndPrintsAnInterval) {
  const std::string s = format_gup_summary(gup_result(7));
  // Six samples per variant, not seven: the cold first repeat is gone (its
  // 5000 us would not move a median of seven, but it is not counted).
  EXPECT_NE(s.find("gup.walk=legacy          6 "), std::string::npos) << s;
  EXPECT_NE(s.find("gup.walk=walk            6 "), std::string::npos) << s;
  // The base is the key's default wherever it runs, and walk's speedup
  // against it carries its interval.
  EXPECT_NE(s.find("4.00x    [4.00x, 4.00x]*"), std::string::npos) << s;
  EXPECT_NE(s.find("1.00x             (base)"), std::string::npos) << s;
  EXPECT_NE(s.find("after the first repeat, a warm-up, discarded"), std::string::npos) << s;
  EXPECT_NE(s.find("median get time of gup.walk=legacy"), std::string::npos) << s;
}

TEST(BenchStatsTest, GupTestSummaryKeepsASingleRepeat) {
  const std::string s = format_gup_summary(gup_result(1));
  EXPECT_NE(s.find("gup.walk=legacy          1 "), std::string::npos) << s;
  EXPECT_NE(s.find("none discarded with one repeat"), std::string::npos) << s;
  EXPECT_NE(s.find("n/a (n<5)"), std::string::npos) << s;
}

}  // namespace
}  // namespace mmlab::cli
