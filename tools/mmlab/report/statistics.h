// The statistics of `mmlab bench` and `mmlab compare`: medians, mean and
// spread, a ratio of medians with its bootstrap confidence interval and the
// one significance verdict, outliers, and a least-squares line.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mmlab::cli {

// The q-quantile (0..1) of the samples, 0 if there are none: the linear
// interpolation between order statistics (type 7, R's and numpy's default),
// the one definition every percentile, median and quartile of the tool uses.
double quantile_of(std::vector<double> v, double q);
double median_of(std::vector<double> v);

struct Stat {
  long n = 0;
  double median = 0, mean = 0, stddev = 0;
};
Stat stat_of(const std::vector<double>& v);

// The fewest samples on each side for which an interval is printed. Below
// it the bootstrap interval is degenerate rather than wide: a resampled
// median can only be one of the samples (or the mean of two), so the
// percentile interval never leaves the samples' range, and that range
// covers a median with probability 1 - 2^(1-n) (75% for n = 3, 87.5% for
// n = 4): a "95%" interval that is not one. A Student t interval would be
// a different statistic (a mean, under normality, which skewed timings are
// not). So below this there is no interval: "n/a (n<5)".
inline constexpr long kMinCiSamples = 5;

// How the two sides' samples were taken. kAlternated: as many on each side,
// repeat r of every variant run before repeat r+1 of any, so sample i of
// one side and sample i of the other share a round (and its disturbances).
// kIndependent: no such correspondence (the sides ran apart, or their
// samples are not rounds).
enum class Pairing { kAlternated, kIndependent };

// Whether v differs from base: every table of `mmlab bench` and `mmlab
// gup-test`, and `mmlab compare`, mark a change as significant from this
// and nothing else (docs/BENCH.md, "Significance"). kUndecided: too few
// samples to say.
enum class Verdict { kUndecided, kSame, kDifferent };

// The ratio of medians median(base) / median(v) (a speedup: above 1, v is
// faster), its 95% bootstrap percentile interval, and the verdict. The
// interval's ends are order statistics of the resampled ratios (the 50th
// lowest and highest of 2000), with no interpolation between them, so
// that the verdict, which counts the resamples in which median(v) is on
// the other side of (or level with) median(base), says kDifferent exactly
// when the printed interval leaves out 1; the count needs no ratio, so
// values of any sign get a verdict. Alternated samples are resampled in
// pairs (repeat indices are drawn, so a disturbance that slowed one round
// slows both sides of it); independent ones (or sides of unequal size)
// each on their own. Below kMinCiSamples on a side there is neither
// interval nor verdict, unless neither side has any spread (counts the
// model makes identical in every run): then the values differ or they do
// not, with no sampling to doubt. Deterministic (a fixed seed): the same
// samples give the same interval and verdict. Every ratio the report
// prints with an interval, and every significance mark, comes from here.
struct RatioCi {
  double ratio = 0, lo = 0, hi = 0;
  bool valid = false;  // no interval: fewer than kMinCiSamples on a side, or a resampled median(v) not positive
  long n = 0;          // the smaller side's sample count
  Verdict verdict = Verdict::kUndecided;
};
RatioCi median_ratio_ci(const std::vector<double>& base, const std::vector<double>& v,
                        Pairing pairing = Pairing::kAlternated, int resamples = 2000);

// median_ratio_ci(...).verdict is kDifferent: the one test of significance.
// Independent by default: `mmlab compare`'s sides are runs taken apart.
bool significantly_different(const std::vector<double>& base, const std::vector<double>& v,
                             Pairing pairing = Pairing::kIndependent);
// The test in one line, as the report and compare's header state it.
std::string significance_rule();

// The printed forms below end in "*" where the verdict is kDifferent.
// The interval as printed: "[1.10x, 1.40x]*", or why there is none
// ("n/a (n<5)").
std::string ci_text(const RatioCi& r);
// The ratio and its interval: "1.23x [1.10x, 1.40x]*".
std::string ratio_ci_text(const RatioCi& r);
// The ratio as a percentage: "12% [10%, 14%]*".
std::string percent_ci_text(const RatioCi& r);
// v against base as a change of v's median (1/ratio - 1, the interval's
// ends swapped): "-81.5% [-84.0%, -78.2%]*", or why there is no interval.
std::string diff_ci_text(const RatioCi& r);

// What is left of a total once a part timed in another run is taken off
// (bookkeeping = fault-in time - zeroing time): nullopt when the part
// exceeds the total, which only the noise between the two runs can do. The
// report flags such a rest ("zeroing exceeds total: noise"); it never
// prints it negative, nor clamps it to a 0 that would read as measured.
std::optional<double> remainder_of(double total, double part);

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

}  // namespace mmlab::cli
