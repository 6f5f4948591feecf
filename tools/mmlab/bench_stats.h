// The statistics of `mmlab bench`: medians, mean and spread, a ratio of
// medians with its bootstrap confidence interval, outliers, and a
// least-squares line.
#pragma once

#include <string>
#include <vector>

namespace mmlab::cli {

double median_of(std::vector<double> v);

struct Stat {
  long n = 0;
  double median = 0, mean = 0, stddev = 0;
};
Stat stat_of(const std::vector<double>& v);

// The ratio of medians median(base) / median(v) (a speedup: above 1, v is
// faster) and its 95% bootstrap percentile interval. With as many samples on
// each side, taken alternately (repeat r of every variant runs before repeat
// r+1 of any), the resampling is paired: repeat indices are drawn, so a
// disturbance that slowed one round slows both sides of it. Deterministic
// (a fixed seed): the same samples give the same interval.
struct RatioCi {
  double ratio = 0, lo = 0, hi = 0;
  bool valid = false;  // fewer than two samples on a side: no interval
};
RatioCi median_ratio_ci(const std::vector<double>& base, const std::vector<double>& v, int resamples = 2000);

// The quartiles of the samples (linearly interpolated; all 0 if there are none).
struct Quartiles {
  double q1 = 0, median = 0, q3 = 0;
};
Quartiles quartiles_of(const std::vector<double>& v);

// Tukey's far-out fences: samples below Q1 - 3 IQR or above Q3 + 3 IQR.
long count_outliers(const std::vector<double>& v);
// The interquartile range relative to the median (0 with fewer than 4
// samples: callers judging noise skip those).
double relative_iqr(const std::vector<double>& v);

// y = a + b * x by least squares, and its coefficient of determination.
struct LinearFit {
  double a = 0, b = 0, r2 = 0;
};
LinearFit linear_fit(const std::vector<double>& xs, const std::vector<double>& ys);

}  // namespace mmlab::cli
