// `mmlab compare` (tools/mmlab/report/compare.h): the significance test
// against values computed by hand, a report's numbers as samples, and the
// marks and changes of both forms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "report/compare.h"
#include "report/statistics.h"

namespace mmlab::cli {
namespace {

TEST(ReportCompareTest, IncompleteBetaMatchesClosedForms) {
  // I_x(1, 1) = x; I_x(a, 1) = x^a.
  EXPECT_NEAR(incomplete_beta(1, 1, 0.3), 0.3, 1e-12);
  EXPECT_NEAR(incomplete_beta(3, 1, 0.5), 0.125, 1e-12);
  EXPECT_EQ(incomplete_beta(2, 3, 0), 0);
  EXPECT_EQ(incomplete_beta(2, 3, 1), 1);
}

TEST(ReportCompareTest, WelchPValue) {
  // Means 3 and 4, variances 2.5 each, n = 5: t = -1 on 8 degrees of
  // freedom, two-sided p = 0.3466.
  const std::optional<double> p = welch_p_value({1, 2, 3, 4, 5}, {2, 3, 4, 5, 6});
  ASSERT_TRUE(p);
  EXPECT_NEAR(*p, 0.3466, 1e-4);
  // Two samples a side, t = 1/sqrt(2) on 2 degrees of freedom, where the
  // t distribution's tail is closed: p = 1 - t / sqrt(2 + t^2) = 0.5528.
  const std::optional<double> q = welch_p_value({0, 2}, {-1, 1});
  ASSERT_TRUE(q);
  EXPECT_NEAR(*q, 0.5528, 1e-4);
  EXPECT_FALSE(welch_p_value({1}, {1, 2}));
  EXPECT_EQ(*welch_p_value({7, 7}, {7, 7}), 1.0);
  EXPECT_EQ(*welch_p_value({7, 7}, {8, 8}), 0.0);
  EXPECT_TRUE(significantly_different({10, 10.1, 9.9, 10, 10.05}, {12, 12.1, 11.9, 12, 12.05}));
  EXPECT_FALSE(significantly_different({1, 2, 3, 4, 5}, {2, 3, 4, 5, 6}));
}

TEST(ReportCompareTest, ANumberIsASampleAndAnIntervalIsNot) {
  CompareSide s;
  s.add_report(nlohmann::json::parse(R"({"a": {"lat_us": [1, 2, 3], "ratio_ci95": [0.9, 1.1], "n": 4, "label": "x"}})"));
  s.add_report(nlohmann::json::parse(R"({"a": {"lat_us": [4], "n": 5}})"));
  EXPECT_EQ(s.runs, 2u);
  EXPECT_EQ(s.keys, (std::vector<std::string>{"a.lat_us", "a.n"}));
  EXPECT_EQ(s.samples.at("a.lat_us"), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(s.samples.at("a.n"), (std::vector<double>{4, 5}));
}

TEST(ReportCompareTest, DirectionFromTheName) {
  EXPECT_EQ(better_of("gup.64K.us_per_2m"), Better::kLower);
  EXPECT_EQ(better_of("cow.usemem.rfc.child_kbps_mean"), Better::kHigher);
  EXPECT_EQ(better_of("cow.usemem.rfc.bytes_copied"), Better::kUnknown);
  EXPECT_EQ(better_of("fault.anon_4K.faults_per_sec"), Better::kHigher);
  EXPECT_EQ(better_of("fault.anon_4K.us_per_fault"), Better::kLower);
}

TEST(ReportCompareTest, BothFormsMarkOnlyTheSignificantChange) {
  CompareSide a, b;
  a.name = "base";
  b.name = "new";
  a.add_report(nlohmann::json::parse(R"({"t_us": [10, 10.1, 9.9, 10, 10.05], "same": [5, 5]})"));
  b.add_report(nlohmann::json::parse(R"({"t_us": [12, 12.1, 11.9, 12, 12.05], "same": [5, 5]})"));
  const std::string mm = compare_text({a, b}, {});
  // A time whose mean rose from 10.01 to 12.01 is a 19.98% loss, marked significant.
  EXPECT_NE(mm.find("Amean     t_us"), std::string::npos) << mm;
  EXPECT_NE(mm.find("*  -19.98%*"), std::string::npos) << mm;
  EXPECT_NE(mm.find("Amean     same"), std::string::npos) << mm;
  EXPECT_EQ(mm.find("-0.00%"), std::string::npos) << mm;
  CompareOptions lkp;
  lkp.form = CompareForm::kLkp;
  lkp.significant_only = true;
  const std::string lk = compare_text({a, b}, lkp);
  EXPECT_NE(lk.find("+19.98%*"), std::string::npos) << lk;
  EXPECT_EQ(lk.find("same"), std::string::npos) << lk;
}

}  // namespace
}  // namespace mmlab::cli
