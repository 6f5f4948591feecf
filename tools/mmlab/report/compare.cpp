#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_set>

#include "fmt/format.h"
#include "report/statistics.h"

namespace mmlab::cli {
namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

void add_value(CompareSide* side, const std::string& key, double v) {
  auto [it, inserted] = side->samples.try_emplace(key);
  if (inserted) side->keys.push_back(key);
  it->second.push_back(v);
}

bool is_number(const nlohmann::json& j) { return j.is_number() && !j.is_boolean(); }

void flatten(const nlohmann::json& j, const std::string& path, CompareSide* side) {
  if (ends_with(path, "ci95")) return;
  if (is_number(j)) {
    add_value(side, path, j.get<double>());
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), side);
  } else if (j.is_array()) {
    if (!j.empty() && std::all_of(j.begin(), j.end(), is_number)) {
      for (const auto& e : j) add_value(side, path, e.get<double>());
      return;
    }
    for (size_t i = 0; i < j.size(); i++) flatten(j[i], fmt::format("{}[{}]", path, i), side);
  }
}

// A word of a value's name that says which way it improves. Times (any
// unit, also "per" something: us_per_2m) fall; rates and speedups rise.
struct DirectionRule {
  std::string_view word;
  Better better;
};
constexpr DirectionRule kDirectionRules[] = {
    {"ns", Better::kLower},       {"us", Better::kLower},      {"ms", Better::kLower},
    {"s", Better::kLower},        {"seconds", Better::kLower}, {"latency", Better::kLower},
    {"cycles", Better::kLower},   {"kbps", Better::kHigher},   {"mbps", Better::kHigher},
    {"throughput", Better::kHigher}, {"speedup", Better::kHigher}, {"ops", Better::kHigher},
    {"iops", Better::kHigher},    {"bandwidth", Better::kHigher},
};

struct Summary {
  size_t n = 0;
  double min = 0, mean = 0, stddev = 0, coeffvar = 0, max = 0;
  bool harmonic = false;  // mean is the harmonic mean (a rate with every sample positive)
};

Summary summarize(const std::vector<double>& v, Better better) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  const Stat st = stat_of(v);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.mean = st.mean;
  s.stddev = st.stddev;
  s.coeffvar = st.mean != 0 ? 100 * st.stddev / std::fabs(st.mean) : 0;
  if (better == Better::kHigher && s.min > 0) {
    double inv = 0;
    for (double x : v) inv += 1 / x;
    s.mean = static_cast<double>(v.size()) / inv;
    s.harmonic = true;
  }
  return s;
}

// x against base in percent: plain (x / base - 1), or oriented so that a
// positive change is an improvement, as compare-kernels prints it.
std::optional<double> change_of(double base, double x, Better better, bool oriented) {
  if (base == 0) return x == 0 ? std::optional<double>(0) : std::nullopt;
  const double plain = 100 * (x - base) / std::fabs(base);
  return oriented && better == Better::kLower ? -plain : plain;
}

std::string number_text(double v) {
  if (v != 0 && std::fabs(v) < 0.01) return fmt::format("{:.3g}", v);
  if (std::fabs(v) >= 1e5) return fmt::format("{:.0f}", v);  // bytes and counts: the decimals say nothing
  return fmt::format("{:.2f}", v);
}

// Rounded first, so that a change too small to print is 0.00%, never -0.00%.
std::string change_text(std::optional<double> c) {
  if (!c) return "n/a";
  double r = std::round(*c * 100) / 100;
  if (r == 0) r = 0;
  return fmt::format("{:.2f}%", r);
}

const std::vector<double>* find(const CompareSide& s, const std::string& key) {
  auto it = s.samples.find(key);
  return it == s.samples.end() ? nullptr : &it->second;
}

std::vector<std::string> all_keys(const std::vector<CompareSide>& sides) {
  std::vector<std::string> keys;
  std::unordered_set<std::string> seen;
  for (const CompareSide& s : sides)
    for (const std::string& k : s.keys)
      if (seen.insert(k).second) keys.push_back(k);
  return keys;
}

bool changed_somewhere(const std::vector<CompareSide>& sides, const std::string& key) {
  const std::vector<double>* base = find(sides[0], key);
  if (base == nullptr) return false;
  for (size_t i = 1; i < sides.size(); i++) {
    const std::vector<double>* v = find(sides[i], key);
    if (v != nullptr && significantly_different(*base, *v)) return true;
  }
  return false;
}

// One statistic's line of a value in compare-kernels' layout: the base's
// figure with "(   0.00%)", each other side's with its change, wrapped in
// '*' instead of parentheses where `mark` says the difference is significant.
std::string mmtests_line(const char* stat, const std::string& key, size_t key_width, const std::vector<CompareSide>& sides,
                         double (*pick)(const Summary&), bool mark_means) {
  const Better better = better_of(key);
  std::string line = fmt::format("{:<9} {:<{}}", stat, key, key_width);
  const std::vector<double>* base = find(sides[0], key);
  std::optional<Summary> bs;
  if (base != nullptr) bs = summarize(*base, better);
  for (const CompareSide& side : sides) {
    const std::vector<double>* v = find(side, key);
    if (v == nullptr) {
      line += fmt::format(" {:>14} {:>11}", "-", "");
      continue;
    }
    const double x = pick(summarize(*v, better));
    // Stddev and CoeffVar improve as they fall, whatever the value measures.
    const bool spread = stat[0] == 'S' || stat[0] == 'C';
    const std::optional<double> c = bs ? change_of(pick(*bs), x, spread ? Better::kLower : better, true) : std::nullopt;
    if (&side == &sides[0]) {
      line += fmt::format(" {:>14} ({:>9})", number_text(x), "0.00%");
      continue;
    }
    const bool star = mark_means && base != nullptr && significantly_different(*base, *v);
    const char open = star ? '*' : '(', close = star ? '*' : ')';
    line += fmt::format(" {:>14} {}{:>9}{}", number_text(x), open, change_text(c), close);
  }
  return line + "\n";
}

std::string mmtests_text(const std::vector<CompareSide>& sides, const std::vector<std::string>& keys) {
  size_t key_width = 0;
  for (const std::string& k : keys) key_width = std::max(key_width, k.size());
  std::string out = fmt::format("{:<9} {:<{}}", "", "", key_width);
  for (const CompareSide& s : sides) out += fmt::format(" {:>26}", s.name);
  out += "\n";
  for (const std::string& k : keys) {
    std::vector<double> probe;
    if (const std::vector<double>* b = find(sides[0], k)) probe = *b;
    const bool hmean = summarize(probe, better_of(k)).harmonic;
    out += mmtests_line("Min", k, key_width, sides, [](const Summary& s) { return s.min; }, false);
    out += mmtests_line(hmean ? "Hmean" : "Amean", k, key_width, sides, [](const Summary& s) { return s.mean; }, true);
    out += mmtests_line("Stddev", k, key_width, sides, [](const Summary& s) { return s.stddev; }, false);
    out += mmtests_line("CoeffVar", k, key_width, sides, [](const Summary& s) { return s.coeffvar; }, false);
    out += mmtests_line("Max", k, key_width, sides, [](const Summary& s) { return s.max; }, false);
  }
  return out;
}

// lkp's layout: per side "mean ± %stddev", and before each side after the
// base its plain %change, followed by '*' where significant.
std::string lkp_text(const std::vector<CompareSide>& sides, const std::vector<std::string>& keys) {
  std::string out = fmt::format("{:>16}", sides[0].name);
  for (size_t i = 1; i < sides.size(); i++) out += fmt::format(" {:>27}", sides[i].name);
  out += "\n----------------";
  for (size_t i = 1; i < sides.size(); i++) out += " ---------------------------";
  out += "\n         %stddev";
  for (size_t i = 1; i < sides.size(); i++) out += "     %change         %stddev";
  out += "\n";
  for (const std::string& k : keys) {
    const std::vector<double>* base = find(sides[0], k);
    std::optional<Summary> bs;
    if (base != nullptr) bs = summarize(*base, Better::kUnknown);
    std::string line;
    for (size_t i = 0; i < sides.size(); i++) {
      const std::vector<double>* v = find(sides[i], k);
      if (i > 0) {
        std::string change = "-";
        if (bs && v != nullptr) {
          change = change_text(change_of(bs->mean, summarize(*v, Better::kUnknown).mean, Better::kUnknown, false));
          if (change != "n/a" && change[0] != '-') change = "+" + change;
          if (significantly_different(*base, *v)) change += "*";
        }
        line += fmt::format(" {:>11}", change);
      }
      if (v == nullptr) {
        line += fmt::format(" {:>17}", "-");
        continue;
      }
      const Summary s = summarize(*v, Better::kUnknown);
      line += fmt::format(" {:>12} ±{:>3.0f}%", number_text(s.mean), s.coeffvar);
    }
    out += line.substr(1) + "  " + k + "\n";
  }
  return out;
}

}  // namespace

void CompareSide::add_report(const nlohmann::json& report) {
  runs++;
  flatten(report, "", this);
}

Better better_of(std::string_view key) {
  const size_t dot = key.rfind('.');
  std::string_view leaf = dot == std::string_view::npos ? key : key.substr(dot + 1);
  // Something per unit of time is a rate, whatever is counted.
  for (std::string_view per : {"per_sec", "per_s", "per_second", "per_ms", "per_us"})
    if (leaf.size() > per.size() && leaf.substr(leaf.size() - per.size()) == per) return Better::kHigher;
  while (!leaf.empty()) {
    const size_t us = leaf.find('_');
    const std::string_view word = leaf.substr(0, us);
    for (const DirectionRule& r : kDirectionRules)
      if (word == r.word) return r.better;
    if (us == std::string_view::npos) break;
    leaf.remove_prefix(us + 1);
  }
  return Better::kUnknown;
}

std::string compare_text(const std::vector<CompareSide>& sides, const CompareOptions& o) {
  std::vector<std::string> keys;
  for (const std::string& k : all_keys(sides))
    if (!o.significant_only || changed_somewhere(sides, k)) keys.push_back(k);
  std::string out;
  for (const CompareSide& s : sides) out += fmt::format("# {}: {} run{}\n", s.name, s.runs, s.runs == 1 ? "" : "s");
  // The rule bench's tables mark by, applied to each value's pooled samples
  // as two independent sides.
  out += "# " + significance_rule() + "\n";
  if (o.form == CompareForm::kMmtests) {
    out += "# change against the first column; positive is better where the name says which way is better\n"
           "# (a time falls, a rate rises; Hmean for rates), otherwise x/base - 1; *change*: significant\n";
    return out + mmtests_text(sides, keys);
  }
  out += "# %change: mean against the first column's; '*': significant\n";
  return out + lkp_text(sides, keys);
}

}  // namespace mmlab::cli
