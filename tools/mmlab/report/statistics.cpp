#include "report/statistics.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "fmt/format.h"


namespace mmlab::cli {

double median_of(std::vector<double> v) { return quantile_of(std::move(v), 0.5); }

Stat stat_of(const std::vector<double>& v) {
  Stat s;
  s.n = static_cast<long>(v.size());
  if (v.empty()) return s;
  s.median = median_of(v);
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

namespace {

// The q-quantile of sorted samples: the linear interpolation between the
// order statistics at q * (n - 1) (Hyndman and Fan's type 7).
double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  return i + 1 < s.size() ? s[i] + frac * (s[i + 1] - s[i]) : s[i];
}

}  // namespace

double quantile_of(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, q);
}

namespace {

// Neither side has any spread, each with two samples or more: the values
// are what they are (the model's counts), and differ or not exactly.
std::optional<Verdict> exact_verdict(const std::vector<double>& base, const std::vector<double>& v) {
  const auto flat = [](const std::vector<double>& x) {
    return x.size() >= 2 && std::all_of(x.begin(), x.end(), [&](double e) { return e == x.front(); });
  };
  if (!flat(base) || !flat(v)) return std::nullopt;
  return base.front() == v.front() ? Verdict::kSame : Verdict::kDifferent;
}

}  // namespace

RatioCi median_ratio_ci(const std::vector<double>& base, const std::vector<double>& v, Pairing pairing, int resamples) {
  RatioCi r;
  r.n = static_cast<long>(std::min(base.size(), v.size()));
  if (base.empty() || v.empty()) return r;
  const double mv = median_of(v);
  if (mv > 0) r.ratio = median_of(base) / mv;
  if (r.n < kMinCiSamples) {
    r.verdict = exact_verdict(base, v).value_or(Verdict::kUndecided);
    return r;
  }
  std::mt19937_64 rng(0x6d6d6c6162);  // fixed: the interval is a function of the samples
  const bool paired = pairing == Pairing::kAlternated && base.size() == v.size();
  std::uniform_int_distribution<size_t> pick_b(0, base.size() - 1), pick_v(0, v.size() - 1);
  std::vector<double> ratios, rb(base.size()), rv(v.size());
  ratios.reserve(static_cast<size_t>(resamples));
  // Resamples in which v's median is not below base's, and not above it;
  // a tie counts in both, so that a tie never makes a difference.
  long v_not_below = 0, v_not_above = 0;
  bool all_positive = true;
  for (int k = 0; k < resamples; k++) {
    for (size_t i = 0; i < rb.size(); i++) {
      const size_t j = pick_b(rng);
      rb[i] = base[j];
      if (paired) rv[i] = v[j];
    }
    if (!paired)
      for (auto& x : rv) x = v[pick_v(rng)];
    const double mb = median_of(rb), m = median_of(rv);
    v_not_below += m >= mb;
    v_not_above += m <= mb;
    if (m > 0)
      ratios.push_back(mb / m);
    else
      all_positive = false;
  }
  // The interval's ends are the order statistics with `tail` resamples
  // beyond each (2.5% of them), and v differs when at most `tail`
  // resamples put it level with or on the other side of base: for positive
  // medians (ratio <= 1 exactly when median(rb) <= median(rv)) that is the
  // interval leaving out 1, so a mark never contradicts the printed interval.
  const long tail = resamples / 40;
  r.verdict = v_not_below <= tail || v_not_above <= tail ? Verdict::kDifferent : Verdict::kSame;
  if (mv <= 0 || !all_positive) return r;
  std::sort(ratios.begin(), ratios.end());
  r.lo = ratios[static_cast<size_t>(tail)];
  r.hi = ratios[ratios.size() - 1 - static_cast<size_t>(tail)];
  r.valid = true;
  return r;
}

bool significantly_different(const std::vector<double>& base, const std::vector<double>& v, Pairing pairing) {
  return median_ratio_ci(base, v, pairing).verdict == Verdict::kDifferent;
}

std::string significance_rule() {
  return fmt::format(
      "significance: the 95% bootstrap interval of the ratio of medians leaves out 1 (2000 resamples; "
      "under {} samples a side undecided, unless neither side varies); '*' marks a significant change",
      kMinCiSamples);
}

namespace {
std::string no_interval(const RatioCi& r) {
  return r.n < kMinCiSamples ? fmt::format("n/a (n<{})", kMinCiSamples) : std::string("n/a");
}
const char* mark(const RatioCi& r) { return r.verdict == Verdict::kDifferent ? "*" : ""; }
}  // namespace

std::string ci_text(const RatioCi& r) {
  if (!r.valid) return no_interval(r) + mark(r);
  return fmt::format("[{:.2f}x, {:.2f}x]{}", r.lo, r.hi, mark(r));
}

std::string ratio_ci_text(const RatioCi& r) { return fmt::format("{:.2f}x {}", r.ratio, ci_text(r)); }

std::string percent_ci_text(const RatioCi& r) {
  if (!r.valid) return fmt::format("{:.0f}% {}", 100 * r.ratio, ci_text(r));
  return fmt::format("{:.0f}% [{:.0f}%, {:.0f}%]{}", 100 * r.ratio, 100 * r.lo, 100 * r.hi, mark(r));
}

std::string diff_ci_text(const RatioCi& r) {
  if (!r.valid || r.ratio <= 0 || r.lo <= 0) return no_interval(r) + mark(r);
  return fmt::format("{:+.1f}% [{:+.1f}%, {:+.1f}%]{}", 100 * (1 / r.ratio - 1), 100 * (1 / r.hi - 1), 100 * (1 / r.lo - 1),
                     mark(r));
}

std::optional<double> remainder_of(double total, double part) {
  if (part > total) return std::nullopt;
  return total - part;
}

Quartiles quartiles_of(const std::vector<double>& v) {
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  return {quantile_sorted(s, 0.25), quantile_sorted(s, 0.5), quantile_sorted(s, 0.75)};
}

long count_outliers(const std::vector<double>& v) {
  if (v.size() < 4) return 0;
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  const double q1 = quantile_sorted(s, 0.25), q3 = quantile_sorted(s, 0.75), iqr = q3 - q1;
  return std::count_if(s.begin(), s.end(), [&](double x) { return x < q1 - 3 * iqr || x > q3 + 3 * iqr; });
}

double relative_iqr(const std::vector<double>& v) {
  if (v.size() < 4) return 0;
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  const double m = quantile_sorted(s, 0.5);
  return m > 0 ? (quantile_sorted(s, 0.75) - quantile_sorted(s, 0.25)) / m : 0;
}

}  // namespace mmlab::cli
