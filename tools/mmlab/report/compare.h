// `mmlab compare`: report.json files side by side, in the two forms linux-mm
// reads: mmtests' compare-kernels table (Min, Amean or Hmean, Stddev,
// CoeffVar, Max, each with its change against the base) and the 0-day/lkp
// form (value ±%stddev, %change). A side is one report or several runs of
// the same configuration; every number of a report is a value, an array
// of numbers its samples.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nlohmann/json.hpp"

namespace mmlab::cli {

// One column of the comparison: a name and every value's samples, pooled
// over the side's runs, in the order the reports hold them.
struct CompareSide {
  std::string name;
  size_t runs = 0;
  std::vector<std::string> keys;  // first appearance order
  std::unordered_map<std::string, std::vector<double>> samples;
  // Adds one report: a number is one sample of its '.'-joined path, an
  // array of numbers that many; strings, booleans and nulls are labels, and
  // an interval (a key ending in "ci95") is not a sample.
  void add_report(const nlohmann::json& report);
};

// Which way a value improves, from its name (a time falls, a rate rises);
// kUnknown for counts and everything else, whose change is only shown.
enum class Better { kLower, kHigher, kUnknown };
Better better_of(std::string_view key);

enum class CompareForm { kMmtests, kLkp };
struct CompareOptions {
  CompareForm form = CompareForm::kMmtests;
  bool significant_only = false;  // only the values some side changes significantly
};

// The comparison of sides[1..] against sides[0], as text. The first lines
// say how many runs each side has and how significance is decided.
std::string compare_text(const std::vector<CompareSide>& sides, const CompareOptions& o);

}  // namespace mmlab::cli
