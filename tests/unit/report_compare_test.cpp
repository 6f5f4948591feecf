// `mmlab compare` (tools/mmlab/report/compare.h): the significance rule, a
// report's numbers as samples, the marks and changes of both forms, and
// that bench's tables, gup-test and compare mark the same samples alike.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/gup_bench.h"
#include "nlohmann/json.hpp"
#include "report/compare.h"
#include "report/statistics.h"

namespace mmlab::cli {
namespace {

TEST(ReportCompareTest, SignificanceIsTheBootstrapIntervalOfTheMedians) {
  EXPECT_TRUE(significantly_different({10, 10.1, 9.9, 10, 10.05}, {12, 12.1, 11.9, 12, 12.05}));
  EXPECT_FALSE(significantly_different({1, 2, 3, 4, 5}, {2, 3, 4, 5, 6}));
  // One far-out sample moves a mean and its variance, not a median: the
  // medians 10 and 11 differ although the means' t-test (p = 0.37) would
  // call them the same.
  EXPECT_TRUE(significantly_different({10, 10, 10.1, 9.9, 10, 10, 10.05, 200}, {11, 11.1, 10.9, 11, 11, 11.05, 10.95, 11}));
  // Three runs a side: undecided, whichever way the values lie.
  EXPECT_FALSE(significantly_different({1, 2, 3}, {40, 50, 60}));
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

// Whether the line of `key` in compare's text carries a mark: the Amean
// (or Hmean) line in the mmtests form, the %change in the lkp form.
bool compare_marks(const std::vector<double>& base, const std::vector<double>& v, CompareForm form) {
  CompareSide a, b;
  a.name = "base";
  b.name = "new";
  a.add_report(nlohmann::json{{"t_us", base}});
  b.add_report(nlohmann::json{{"t_us", v}});
  CompareOptions o;
  o.form = form;
  const std::string text = compare_text({a, b}, o);
  size_t at = form == CompareForm::kMmtests ? text.find("mean     t_us") : text.find("  t_us\n");
  EXPECT_NE(at, std::string::npos) << text;
  if (at == std::string::npos) return false;
  const size_t begin = form == CompareForm::kMmtests ? at : text.rfind('\n', at) + 1;
  const size_t end = form == CompareForm::kMmtests ? text.find('\n', at) : at;
  return text.substr(begin, end - begin).find('*') != std::string::npos;
}

// gup-test's summary of a run whose variants' samples are `legacy` and
// `walk` (after a warm-up repeat it discards): whether walk's interval
// carries a mark.
bool gup_test_marks(const std::vector<double>& legacy, const std::vector<double>& walk) {
  GupBenchResult res;
  res.variants = {"gup.walk=legacy", "gup.walk=walk"};
  res.region_pages = 1;
  for (size_t r = 0; r <= legacy.size(); r++)
    for (const std::string& v : res.variants) {
      GupIteration it;
      it.variant = v;
      it.repeat = static_cast<long>(r);
      const std::vector<double>& s = v == "gup.walk=legacy" ? legacy : walk;
      it.get_us = r == 0 ? 1e6 : s[r - 1];
      res.iters.push_back(it);
    }
  const std::string text = format_gup_summary(res);
  const size_t at = text.find("# gup.walk=walk");
  EXPECT_NE(at, std::string::npos) << text;
  return at != std::string::npos && text.substr(at, text.find('\n', at) - at).find('*') != std::string::npos;
}

TEST(ReportCompareTest, EverySiteMarksTheSameSamplesAlike) {
  // Each case with the verdict it must get. The skewed one is where a
  // t-test on the means and the medians' interval disagree: a site that
  // decided by a test of its own would part from the others there.
  struct Case {
    const char* what;
    std::vector<double> base, v;
    bool significant;
  };
  const Case cases[] = {
      {"clear", {10, 10.1, 9.9, 10, 10.05, 10.02}, {12, 12.1, 11.9, 12, 12.05, 11.98}, true},
      {"overlapping", {1, 2, 3, 4, 5, 6}, {2, 3, 4, 5, 6, 7}, false},
      {"skewed", {10, 10, 10.1, 9.9, 10, 10, 10.05, 200}, {11, 11.1, 10.9, 11, 11, 11.05, 10.95, 11}, true},
      {"counts", {4096, 4096, 4096}, {256, 256, 256}, true},
      {"three runs", {1, 2, 3}, {40, 50, 60}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    // The independent sides of compare, and of bench's cow and threads tables.
    const RatioCi r = median_ratio_ci(c.base, c.v, Pairing::kIndependent);
    EXPECT_EQ(r.verdict == Verdict::kDifferent, c.significant);
    EXPECT_EQ(significantly_different(c.base, c.v), c.significant);
    for (const std::string& cell : {ci_text(r), ratio_ci_text(r), percent_ci_text(r), diff_ci_text(r)})
      EXPECT_EQ(cell.back() == '*', c.significant) << cell;
    EXPECT_EQ(compare_marks(c.base, c.v, CompareForm::kMmtests), c.significant);
    EXPECT_EQ(compare_marks(c.base, c.v, CompareForm::kLkp), c.significant);
    // The alternated repeats of the GUP tables and gup-test, where the
    // sides are as long: the same routine, resampling in pairs.
    if (c.base.size() == c.v.size()) {
      const RatioCi paired = median_ratio_ci(c.base, c.v, Pairing::kAlternated);
      EXPECT_EQ(diff_ci_text(paired).back() == '*', paired.verdict == Verdict::kDifferent);
      EXPECT_EQ(gup_test_marks(c.base, c.v), paired.verdict == Verdict::kDifferent);
    }
  }
}

}  // namespace
}  // namespace mmlab::cli
