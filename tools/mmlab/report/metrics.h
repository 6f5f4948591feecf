// Named metrics: what a benchmark run produces, as a set of named values
// that the merge over seeds and repeats, report.json, the text tables and
// the plots all loop over. A tool declares its values once, in a table of
// MetricDef records (its unit, whether it is counted, measured or
// modelled, how it merges); a figure added there appears in every output
// without touching the printers.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "report/plot.h"

namespace mmlab::cli {

// How a value prints. Bytes print as MiB in tables and as bytes in JSON.
enum class Unit : uint8_t { kCount, kBytes, kUs, kMs, kSeconds, kKBps, kMiBSeconds, kPerThousand, kFlag, kText };

// Where a value comes from: an event the model counted (the same in every
// run with the same inputs), the host's clock, or the model's counts times
// a cost profile's per-event costs.
enum class Source : uint8_t { kCounted, kMeasured, kModelled };

// How the runs (seeds, repeats) of one configuration merge:
//   kSum      the total over the runs
//   kMean     the total divided by the number of runs (per run)
//   kMax      the largest of the runs
//   kFirst    the first run's (a label or a setting)
//   kSamples  a distribution: every run's samples pooled; reported at its
//             quantiles (quantile_of: one definition for the whole tool)
enum class Merge : uint8_t { kSum, kMean, kMax, kFirst, kSamples };

class MetricSet;

struct MetricDef {
  const char* key;  // the JSON path, '.' between levels ("khugepaged.cpu_ms")
  Unit unit;
  Source source;
  Merge merge;
  const char* what;              // one line: what the value is
  const char* header = nullptr;  // its table column (nullptr: JSON only); kSamples: "{q}" stands for p50, max, ...
  const char* table = "";        // which of the tool's tables shows it
  const char* group = "";        // a column only tables that ask for its group show ("" : always)
  int decimals = -1;             // digits after the point in tables (-1: the unit's)
  std::vector<double> quantiles = {};  // kSamples: the quantiles reported (1.0 prints as "max")
  const char* valid_if = nullptr;      // a flag value: the column shows "-" where that flag is 0
  bool vs_base = false;                // the table adds "vs base": the change against the base row
  bool json = true;                    // false: tables and plots only
  double (*derive)(const MetricSet& m) = nullptr;  // computed from other values on every read, never merged
};

// The values of one configuration: one run's, or several merged.
class MetricSet {
 public:
  explicit MetricSet(const std::vector<MetricDef>* defs) : defs_(defs), values_(defs->size()) {}

  // One run's value (replacing any); NaN stands for "none" (JSON null, "n/a").
  void set(std::string_view key, double v);
  void set_text(std::string_view key, std::string v);
  void add_samples(std::string_view key, const std::vector<double>& v);
  // Adds one more run's values, each by its def's Merge.
  void merge(const MetricSet& run);

  bool has(std::string_view key) const;
  // As reported: kMean divided by the runs, kSamples its sample count.
  double value(std::string_view key) const;
  const std::string& text(std::string_view key) const;
  const std::vector<double>& samples(std::string_view key) const;
  unsigned runs() const { return runs_; }
  const std::vector<MetricDef>& defs() const { return *defs_; }

  // Every value set, nested by the keys' '.'-separated paths.
  nlohmann::ordered_json json() const;

 private:
  struct Value {
    bool set = false;
    double v = 0;
    std::string text;
    std::vector<double> samples;
  };
  size_t index(std::string_view key) const;  // aborts on a key the table does not declare
  const std::vector<MetricDef>* defs_;
  std::vector<Value> values_;
  unsigned runs_ = 0;
};

// "p50", "p99.9", "max": a quantile's name.
std::string quantile_name(double q);

// One row of a table: a configuration's values, or why it did not run.
struct MetricRow {
  std::string name;
  const MetricSet* m = nullptr;  // nullptr: not run
  std::string not_run;
};

// A Markdown table of the defs of `table` whose group is "" or in `groups`:
// a row per configuration, a column per value (per quantile for kSamples),
// in the defs' order; "vs base" after a vs_base value, against the row
// named `base`.
std::string metric_table(const std::vector<MetricDef>& defs, const std::string& table, const std::set<std::string>& groups,
                         const std::vector<MetricRow>& rows, const std::string& base = "base");

// The plot of one value over the rows: a kSamples value as a line per row
// over its quantiles, any other as a bar per row.
Plot metric_plot(const std::vector<MetricDef>& defs, std::string_view key, const std::vector<MetricRow>& rows,
                 const std::string& file, const std::string& title);

}  // namespace mmlab::cli
