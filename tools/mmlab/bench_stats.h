// The statistics of `mmlab bench`: medians, mean and spread, the difference
// of two means with its confidence interval, and a least-squares line.
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

// ministat-style: the difference of means of b against a and its 95%
// confidence half-width (Welch, normal approximation), in percent of a's
// mean; "-" with fewer than two samples on a side.
std::string diff_ci(const Stat& a, const Stat& b);

// y = a + b * x by least squares, and its coefficient of determination.
struct LinearFit {
  double a = 0, b = 0, r2 = 0;
};
LinearFit linear_fit(const std::vector<double>& xs, const std::vector<double>& ys);

}  // namespace mmlab::cli
