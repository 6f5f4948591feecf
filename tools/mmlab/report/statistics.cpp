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

RatioCi median_ratio_ci(const std::vector<double>& base, const std::vector<double>& v, Pairing pairing, int resamples) {
  RatioCi r;
  r.n = static_cast<long>(std::min(base.size(), v.size()));
  const double mv = median_of(v);
  if (mv <= 0) return r;
  r.ratio = median_of(base) / mv;
  if (r.n < kMinCiSamples) return r;
  std::mt19937_64 rng(0x6d6d6c6162);  // fixed: the interval is a function of the samples
  const bool paired = pairing == Pairing::kAlternated && base.size() == v.size();
  std::uniform_int_distribution<size_t> pick_b(0, base.size() - 1), pick_v(0, v.size() - 1);
  std::vector<double> ratios, rb(base.size()), rv(v.size());
  ratios.reserve(static_cast<size_t>(resamples));
  for (int k = 0; k < resamples; k++) {
    for (size_t i = 0; i < rb.size(); i++) {
      const size_t j = pick_b(rng);
      rb[i] = base[j];
      if (paired) rv[i] = v[j];
    }
    if (!paired)
      for (auto& x : rv) x = v[pick_v(rng)];
    const double m = median_of(rv);
    if (m > 0) ratios.push_back(median_of(rb) / m);
  }
  if (ratios.empty()) return r;
  std::sort(ratios.begin(), ratios.end());
  r.lo = quantile_sorted(ratios, 0.025);
  r.hi = quantile_sorted(ratios, 0.975);
  r.valid = true;
  return r;
}

namespace {
std::string no_interval(const RatioCi& r) {
  return r.n < kMinCiSamples ? fmt::format("n/a (n<{})", kMinCiSamples) : std::string("n/a");
}
}  // namespace

std::string ci_text(const RatioCi& r) {
  if (!r.valid) return no_interval(r);
  return fmt::format("[{:.2f}x, {:.2f}x]", r.lo, r.hi);
}

std::string ratio_ci_text(const RatioCi& r) { return fmt::format("{:.2f}x {}", r.ratio, ci_text(r)); }

std::string percent_ci_text(const RatioCi& r) {
  if (!r.valid) return fmt::format("{:.0f}% {}", 100 * r.ratio, ci_text(r));
  return fmt::format("{:.0f}% [{:.0f}%, {:.0f}%]", 100 * r.ratio, 100 * r.lo, 100 * r.hi);
}

std::string diff_ci_text(const RatioCi& r) {
  if (!r.valid || r.ratio <= 0 || r.lo <= 0) return no_interval(r);
  return fmt::format("{:+.1f}% [{:+.1f}%, {:+.1f}%]", 100 * (1 / r.ratio - 1), 100 * (1 / r.hi - 1), 100 * (1 / r.lo - 1));
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

LinearFit linear_fit(const std::vector<double>& xs, const std::vector<double>& ys) {
  double n = static_cast<double>(xs.size()), sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < xs.size(); i++) {
    sx += xs[i];
    sy += ys[i];
    sxx += xs[i] * xs[i];
    sxy += xs[i] * ys[i];
    syy += ys[i] * ys[i];
  }
  LinearFit f;
  f.b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  f.a = (sy - f.b * sx) / n;
  f.r2 = (n * sxy - sx * sy) * (n * sxy - sx * sy) / ((n * sxx - sx * sx) * (n * syy - sy * sy));
  return f;
}

namespace {

// The continued fraction of I_x(a, b), evaluated by the modified Lentz
// method; it converges fast for x < (a + 1) / (a + b + 2), which the caller
// arranges with the symmetry I_x(a, b) = 1 - I_{1-x}(b, a).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  auto nonzero = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  double c = 1, d = 1.0 / nonzero(1 - (a + b) * x / (a + 1));
  double f = d;
  for (int m = 1; m <= 500; m++) {
    const double dm = m;
    // The even step's coefficient, then the odd step's.
    const double even = dm * (b - dm) * x / ((a + 2 * dm - 1) * (a + 2 * dm));
    d = 1.0 / nonzero(1 + even * d);
    c = nonzero(1 + even / c);
    f *= c * d;
    const double odd = -(a + dm) * (a + b + dm) * x / ((a + 2 * dm) * (a + 2 * dm + 1));
    d = 1.0 / nonzero(1 + odd * d);
    c = nonzero(1 + odd / c);
    const double step = c * d;
    f *= step;
    if (std::fabs(step - 1) < kEps) break;
  }
  return f;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

std::optional<double> welch_p_value(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) return std::nullopt;
  const Stat sa = stat_of(a), sb = stat_of(b);
  const double va = sa.stddev * sa.stddev / static_cast<double>(sa.n);
  const double vb = sb.stddev * sb.stddev / static_cast<double>(sb.n);
  if (va + vb == 0) return sa.mean == sb.mean ? 1.0 : 0.0;
  const double t = (sa.mean - sb.mean) / std::sqrt(va + vb);
  const double df = (va + vb) * (va + vb) /
                    (va * va / static_cast<double>(sa.n - 1) + vb * vb / static_cast<double>(sb.n - 1));
  return incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

bool significantly_different(const std::vector<double>& a, const std::vector<double>& b) {
  const std::optional<double> p = welch_p_value(a, b);
  return p && *p < kSignificanceLevel;
}

}  // namespace mmlab::cli
