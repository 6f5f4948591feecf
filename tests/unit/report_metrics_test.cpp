// Named metrics (tools/mmlab/report/metrics.h): the merge over runs by each
// value's kind, and a value declared once in a table reaching the JSON, the
// text table and the plot data with no printer changed; the tool's one
// percentile definition; cow-bench's table of values is consistent.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cowbench/cow_bench_metrics.h"
#include "report/metrics.h"
#include "report/statistics.h"

namespace mmlab::cli {
namespace {

double ratio_of_totals(const MetricSet& m) { return m.value("faults") > 0 ? m.value("bytes") / m.value("faults") : 0; }

const std::vector<MetricDef>& test_defs() {
  static const std::vector<MetricDef> defs = {
      {.key = "lat_us", .unit = Unit::kUs, .source = Source::kMeasured, .merge = Merge::kSamples, .what = "latency",
       .header = "{q} µs", .table = "t", .quantiles = {0.5, 1.0}},
      {.key = "faults", .unit = Unit::kCount, .source = Source::kCounted, .merge = Merge::kMean, .what = "faults",
       .header = "faults", .table = "t"},
      {.key = "bytes", .unit = Unit::kBytes, .source = Source::kCounted, .merge = Merge::kSum, .what = "bytes",
       .header = "MiB", .table = "t"},
      {.key = "peak", .unit = Unit::kBytes, .source = Source::kCounted, .merge = Merge::kMax, .what = "peak"},
      {.key = "per_fault", .unit = Unit::kCount, .source = Source::kCounted, .merge = Merge::kMean,
       .what = "bytes per fault", .derive = ratio_of_totals},
      {.key = "sampled", .unit = Unit::kFlag, .source = Source::kCounted, .merge = Merge::kMax, .what = "sampled"},
      {.key = "deep.rss", .unit = Unit::kBytes, .source = Source::kCounted, .merge = Merge::kMax, .what = "rss",
       .header = "RSS MiB", .table = "t", .group = "mem", .valid_if = "sampled"},
      {.key = "kbps", .unit = Unit::kKBps, .source = Source::kMeasured, .merge = Merge::kMean, .what = "KB/s",
       .header = "KB/s", .table = "t", .vs_base = true},
      {.key = "note", .unit = Unit::kText, .source = Source::kCounted, .merge = Merge::kFirst, .what = "a label"},
      // The value this test adds: a modelled time, nowhere in any printer.
      {.key = "modelled.new_ms", .unit = Unit::kMs, .source = Source::kModelled, .merge = Merge::kMean,
       .what = "a new modelled figure", .header = "new ms", .table = "t"},
  };
  return defs;
}

MetricSet one_run(double faults, double bytes, double peak, std::vector<double> lat, double new_ms) {
  MetricSet m(&test_defs());
  m.set("faults", faults);
  m.set("bytes", bytes);
  m.set("peak", peak);
  m.add_samples("lat_us", lat);
  m.set("sampled", 1);
  m.set("deep.rss", peak);
  m.set("kbps", 100 * faults);
  m.set_text("note", "run" + std::to_string(static_cast<int>(faults)));
  m.set("modelled.new_ms", new_ms);
  return m;
}

TEST(ReportMetricsTest, RunsMergeByEachValuesKind) {
  MetricSet all(&test_defs());
  all.merge(one_run(10, 1 << 20, 5, {1, 2}, 1.5));
  all.merge(one_run(20, 3 << 20, 9, {3, 4}, 2.5));
  EXPECT_EQ(all.runs(), 2u);
  EXPECT_EQ(all.value("faults"), 15);           // mean
  EXPECT_EQ(all.value("bytes"), 4 << 20);       // sum
  EXPECT_EQ(all.value("peak"), 9);              // max
  EXPECT_EQ(all.samples("lat_us").size(), 4u);  // pooled
  EXPECT_EQ(all.text("note"), "run10");         // first
  // Derived from the merged values, never merged itself: the ratio of the totals.
  EXPECT_DOUBLE_EQ(all.value("per_fault"), static_cast<double>(4 << 20) / 15);
  EXPECT_FALSE(MetricSet(&test_defs()).has("faults"));
}

TEST(ReportMetricsTest, AnAddedValueReachesJsonTableAndPlot) {
  MetricSet base(&test_defs()), other(&test_defs());
  base.merge(one_run(10, 1 << 20, 5, {1, 2, 3}, 1.25));
  other.merge(one_run(20, 2 << 20, 7, {4, 5, 6}, 3.5));
  // JSON: nested by the key's path, counts as integers.
  const nlohmann::json j = other.json();
  EXPECT_EQ(j["modelled"]["new_ms"], 3.5);
  EXPECT_EQ(j["faults"], 20);
  EXPECT_TRUE(j["faults"].is_number_integer());
  EXPECT_EQ(j["deep"]["rss"], 7);
  EXPECT_EQ(j["lat_us"]["p50"], 5);
  EXPECT_EQ(j["lat_us"]["max"], 6);
  EXPECT_EQ(j["note"], "run20");
  // The table: its column and the value, in the unit's format.
  const std::vector<MetricRow> rows = {{"base", &base, ""}, {"other", &other, ""}, {"skipped", nullptr, "why"}};
  const std::string t = metric_table(test_defs(), "t", {}, rows);
  EXPECT_NE(t.find("| new ms |"), std::string::npos) << t;
  EXPECT_NE(t.find("| other | 5.00 | 6.00 | 20 | 2.0 | 2000 | +100.0% | 3.50 |"), std::string::npos) << t;
  EXPECT_NE(t.find("| skipped | not run: why |"), std::string::npos) << t;
  EXPECT_EQ(t.find("RSS MiB"), std::string::npos) << "a grouped column shows only where its group is asked for";
  EXPECT_NE(metric_table(test_defs(), "t", {"mem"}, rows).find("RSS MiB"), std::string::npos);
  // The plot data: a bar per row for a value, a line per row over the quantiles for a distribution.
  const Plot p = metric_plot(test_defs(), "modelled.new_ms", rows, "new", "new figure");
  ASSERT_EQ(p.series.size(), 2u);
  EXPECT_EQ(p.series[1].title, "other");
  EXPECT_EQ(p.series[1].points.at(0).y, 3.5);
  const Plot q = metric_plot(test_defs(), "lat_us", rows, "lat", "latency");
  ASSERT_EQ(q.series.size(), 2u);
  EXPECT_TRUE(q.lines);
  EXPECT_EQ(q.series[0].points.at(1).y, 3);  // base's max
}

TEST(ReportMetricsTest, ValuesShowDashesWhereTheirFlagIsOffAndNullWhereNaN) {
  MetricSet m(&test_defs());
  m.set("sampled", 0);
  m.set("deep.rss", 0);
  m.set("modelled.new_ms", std::numeric_limits<double>::quiet_NaN());
  const std::string t = metric_table(test_defs(), "t", {"mem"}, {{"base", &m, ""}});
  EXPECT_NE(t.find("| base | - | - | - | - | - | - | - | n/a |"), std::string::npos) << t;
  EXPECT_TRUE(m.json()["modelled"]["new_ms"].is_null());
}

TEST(ReportMetricsTest, OnePercentileDefinitionInterpolates) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_EQ(quantile_of(v, 0.5), 2.5);
  EXPECT_EQ(median_of(v), 2.5);
  EXPECT_EQ(quantile_of(v, 1.0), 4);
  EXPECT_EQ(quantile_of(v, 0), 1);
  EXPECT_DOUBLE_EQ(quantile_of(v, 0.9), 3.7);
  EXPECT_EQ(quartiles_of(v).q1, quantile_of(v, 0.25));
  EXPECT_EQ(quantile_of({}, 0.5), 0);
  EXPECT_EQ(quantile_name(0.999), "p99.9");
  EXPECT_EQ(quantile_name(1.0), "max");
}

TEST(ReportMetricsTest, CowBenchValuesAreDeclaredOnce) {
  std::set<std::string> keys;
  for (const MetricDef& d : cowbench::cow_metrics()) EXPECT_TRUE(keys.insert(d.key).second) << d.key << " twice";
  for (const MetricDef& d : cowbench::cow_metrics()) {
    if (d.valid_if) {
      EXPECT_TRUE(keys.count(d.valid_if)) << d.key << ": valid_if " << d.valid_if;
    }
    if (d.merge == Merge::kSamples && d.json) {
      EXPECT_FALSE(d.quantiles.empty()) << d.key;
    }
    if (d.header) {
      EXPECT_TRUE(std::string(d.table) == "main" || std::string(d.table) == "memory") << d.key;
    }
  }
}

}  // namespace
}  // namespace mmlab::cli
