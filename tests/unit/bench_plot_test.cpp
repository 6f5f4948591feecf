// The plots of `mmlab bench` (tools/mmlab/bench_plot.h, the GUP tables'
// speedup bars): which series is the grey baseline, and a y-axis that holds
// every bar's upper end. The gnuplot scripts are checked as text; nothing
// is drawn.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/gup_table.h"
#include "report/plot.h"
#include "fmt/format.h"

namespace mmlab::cli {
namespace {

constexpr const char* kGrey = "#808080";

// The colour the script gives the boxes of series i.
std::string box_colour(const std::string& script, size_t i) {
  const std::string key = "$s" + std::to_string(i) + " using 1:2 with boxes lc rgb '";
  const size_t at = script.find(key);
  if (at == std::string::npos) return "";
  return script.substr(at + key.size(), 7);
}

TEST(BenchPlotTest, TheAxisHoldsTheLongestErrorBar) {
  // unify's case: a 35x bar whose interquartile range reaches 62x.
  Plot p = bar_plot("unify", "t", "speedup", {"2M THP", "2M hugetlb"}, {"base", "legacy"});
  p.ratio = true;
  p.series[0].points = {{0, 1, 0.9, 1.1}, {1, 1, 0.95, 1.05}};
  p.series[1].points = {{0, 35.4, 20, 62}};
  EXPECT_GT(y_top(p), 62);
  EXPECT_LT(y_top(p), 70);
  const std::string s = gnuplot_script(p, "/tmp/x.png");
  EXPECT_NE(s.find(fmt::format("set yrange [0:{:.6g}]", y_top(p))), std::string::npos) << s;
  // A published marker above every bar is inside too.
  p.series[1].points[0].published = 80;
  EXPECT_GT(y_top(p), 80);
  // A ratio plot of small ratios still shows its line at 1.
  Plot small = bar_plot("r", "t", "ratio", {"a"}, {"x"});
  small.ratio = true;
  small.series[0].points = {{0, 0.3, 0.2, 0.4}};
  EXPECT_GE(y_top(small), 1.1);
}

TEST(BenchPlotTest, TheBaselineIsGreyAndOnlyIt) {
  Plot p = bar_plot("fault", "t", "ns", {"4K"}, {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
  for (auto& sr : p.series) sr.points = {{0, 1, 1, 1}};
  const std::string s = gnuplot_script(p, "/tmp/x.png");
  EXPECT_EQ(box_colour(s, 0), kGrey);
  for (size_t i = 1; i < p.series.size(); i++) EXPECT_NE(box_colour(s, i), kGrey) << "series " << i;
  // A plot whose baseline is the line at 1 has no grey series.
  p.first_is_baseline = false;
  const std::string d = gnuplot_script(p, "/tmp/x.png");
  for (size_t i = 0; i < p.series.size(); i++) EXPECT_NE(box_colour(d, i), kGrey) << "series " << i;
}

RowResult gup_row_result(const std::string& base, const std::string& other, double speedup) {
  RowResult r;
  r.variants = {{base, {100, 110, 90, 105, 95}}, {other, {}}};
  for (double x : r.variants[0].get_us) r.variants[1].get_us.push_back(x / speedup);
  r.base = 0;
  r.region_pages = 1000;
  return r;
}

// A line plot with more series than colours (cow-bench's 14 columns): a
// colour that comes back comes with another dash and point type.
TEST(BenchPlotTest, LinesPastThePaletteDifferInDashAndPoint) {
  Plot p;
  p.lines = true;
  for (int i = 0; i < 14; i++) p.series.push_back({fmt::format("c{}", i), {{1, 1, 1, 1}}});
  const std::string s = gnuplot_script(p, "/tmp/x.png");
  auto style = [&](size_t i) {
    const std::string key = "$s" + std::to_string(i) + " using 1:2:3:4 with yerrorlines lw 1.5 ";
    const size_t at = s.find(key);
    return at == std::string::npos ? std::string() : s.substr(at + key.size(), s.find(" title", at) - at - key.size());
  };
  ASSERT_FALSE(style(0).empty());
  for (size_t i = 0; i < 14; i++)
    for (size_t j = i + 1; j < 14; j++) EXPECT_NE(style(i), style(j)) << i << " and " << j << ": " << style(i);
}

// cow-bench's 14 columns: a chart per group, each beginning with the
// reference series; what no group names goes to charts of its own.
TEST(BenchPlotTest, AWidePlotSplitsIntoChartsThatKeepTheReference) {
  Plot p;
  p.file = "cow-x-latency";
  p.title = "t";
  p.lines = true;
  for (int i = 0; i < 14; i++) p.series.push_back({fmt::format("c{}", i), {{1, 1, 1, 1}}});
  const std::vector<Plot> charts = split_plot(p, {{"a", "group a", {"c1", "c2", "c3"}}, {"b", "group b", {"c4", "c99"}}});
  // a: c0 + 3; b: c0 + 1; the 9 left over, 5 a chart beside c0: 2 more.
  ASSERT_EQ(charts.size(), 4u);
  EXPECT_EQ(charts[0].file, "cow-x-latency-a");
  EXPECT_EQ(charts[0].title, "t: group a");
  EXPECT_EQ(charts[1].series.size(), 2u);
  EXPECT_EQ(charts[2].file, "cow-x-latency-more");
  EXPECT_EQ(charts[3].file, "cow-x-latency-more2");
  size_t drawn = 0;
  for (const Plot& c : charts) {
    EXPECT_EQ(c.series.front().title, "c0") << c.file;
    EXPECT_LE(c.series.size(), kMaxSeries) << c.file;
    drawn += c.series.size() - 1;
  }
  EXPECT_EQ(drawn, 13u);  // every series but the reference, once
  // A plot that fits one chart stays as it is, under its own name.
  p.series.resize(kMaxSeries);
  const std::vector<Plot> one = split_plot(p, {{"a", "group a", {"c1"}}});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].file, "cow-x-latency");
}

TEST(BenchPlotTest, ALogAxisStartsBelowTheLowestPoint) {
  Plot p;
  p.lines = true;
  p.logy = true;
  p.series = {{"a", {{0, 0.2, 0.2, 0.2}, {1, 3000, 3000, 3000}}}};
  const std::string s = gnuplot_script(p, "/tmp/x.png");
  EXPECT_NE(s.find("set logscale y 10"), std::string::npos) << s;
  EXPECT_NE(s.find(fmt::format("set yrange [{:.6g}:{:.6g}]", 0.2 / 1.5, y_top(p) * 1.5)), std::string::npos) << s;
}

TEST(BenchPlotTest, RowsWithDifferentBasesShareOneGreyBaseSeries) {
  // unify: v6.5 is the THP row's base, legacy the hugetlb row's (and the
  // THP row's variant).
  std::vector<GupRow> rows(2);
  rows[0].label = "2M THP";
  rows[1].label = "2M hugetlb";
  const std::vector<RowResult> res = {gup_row_result("v6.5", "legacy", 35), gup_row_result("legacy", "batch", 1.2)};
  const Plot p = speedup_bars("unify", "t", rows, res);
  ASSERT_EQ(p.series.size(), 3u);
  EXPECT_EQ(p.series[0].title, "the row's base: v6.5, legacy");
  ASSERT_EQ(p.series[0].points.size(), 2u);
  for (auto& pt : p.series[0].points) EXPECT_DOUBLE_EQ(pt.y, 1.0);
  EXPECT_EQ(p.series[1].title, "legacy");
  ASSERT_EQ(p.series[1].points.size(), 1u);
  EXPECT_DOUBLE_EQ(p.series[1].points[0].x, 0);
  EXPECT_NEAR(p.series[1].points[0].y, 35, 1e-9);
  EXPECT_EQ(p.series[2].title, "batch");
  EXPECT_DOUBLE_EQ(p.series[2].points[0].x, 1);
  const std::string s = gnuplot_script(p, "/tmp/x.png");
  EXPECT_EQ(box_colour(s, 0), kGrey);
  EXPECT_NE(box_colour(s, 1), kGrey);
}

TEST(BenchPlotTest, RowsWithOneBaseKeepItsName) {
  std::vector<GupRow> rows(2);
  rows[0].label = "4K";
  rows[1].label = "64K";
  const std::vector<RowResult> res = {gup_row_result("legacy", "walk", 2), gup_row_result("legacy", "walk", 2.5)};
  const Plot p = speedup_bars("gup", "t", rows, res);
  ASSERT_EQ(p.series.size(), 2u);
  EXPECT_EQ(p.series[0].title, "legacy");
  EXPECT_EQ(p.series[0].points.size(), 2u);
  EXPECT_EQ(p.series[1].title, "walk");
  EXPECT_EQ(p.series[1].points.size(), 2u);
}

}  // namespace
}  // namespace mmlab::cli
