#include "bench_stats.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

namespace mmlab::cli {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

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

std::string diff_ci(const Stat& a, const Stat& b) {
  if (a.n < 2 || b.n < 2 || a.mean == 0) return "-";
  double d = b.mean - a.mean;
  double hw = 1.96 * std::sqrt(a.stddev * a.stddev / static_cast<double>(a.n) + b.stddev * b.stddev / static_cast<double>(b.n));
  return fmt::format("{:+.1f}% ± {:.1f}%", 100 * d / a.mean, 100 * hw / a.mean);
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

}  // namespace mmlab::cli
