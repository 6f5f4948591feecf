// The plots of `mmlab bench`: each suite with a size or time axis records
// its figures as a Plot while it prints its table, in the order it ran them
// (the baseline first, variants in their registration order, sweep points in
// numeric order), and write_plots() draws them with gnuplot, spawned without
// a shell on a script file written beside the PNG.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace mmlab::cli {

// One figure: y with its error bar [lo, hi] (the samples' interquartile
// range), at x (line plots) or at a category index (bar plots), and the
// kernel's published figure for the same point when there is one (NaN: none).
struct PlotPoint {
  double x = 0, y = 0, lo = 0, hi = 0;
  double published = std::numeric_limits<double>::quiet_NaN();
};

struct PlotSeries {
  std::string title;
  std::vector<PlotPoint> points;
};

struct Plot {
  std::string file;  // <out>/<file>.png
  std::string title, xlabel, ylabel;
  bool lines = false;                   // a line plot over a numeric x; otherwise clustered bars
  bool logx = false;                    // line plots: a log x-axis
  bool ratio = false;                   // a y of ratios: linear from 0, with a dashed line at 1
  bool logy = false;                    // a log y-axis, for figures that span decades (latency
                                        // percentiles); every other plot's y is linear from 0
  bool first_is_baseline = true;       // bars: the first series is the baseline, grey (a ratio plot
                                        // whose baseline is the dashed line at 1 has none)
  std::vector<std::string> categories;  // bars: the x labels; points' x is the index
  std::vector<std::pair<double, std::string>> xtics;  // line plots: labelled x positions
  std::vector<PlotSeries> series;
};

// A bar (or line point) at x from samples scaled by k: the median, and the
// quartiles as the error bar.
PlotPoint sample_point(double x, const std::vector<double>& samples, double k = 1);

// A bar plot over `categories` with one series per title (points added by the caller).
Plot bar_plot(const std::string& file, const std::string& title, const std::string& ylabel,
              const std::vector<std::string>& categories, const std::vector<std::string>& series);

// The most series a chart holds: past it a reader cannot tell the lines
// apart, and the palette's colours would repeat.
inline constexpr size_t kMaxSeries = 6;

// A chart's share of a plot's series: those titled in `names`, after the
// plot's first series (the reference every chart keeps, so that each
// compares with it).
struct SeriesGroup {
  std::string suffix;  // the chart's file: <plot file>-<suffix>
  std::string title;   // added to the plot's title
  std::vector<std::string> names;
};

// `p` as it is when it has at most kMaxSeries series; otherwise one chart
// per group that holds any of its series, and for the series no group
// names, charts of as many as fit, in the plot's order ("-more", "-more2",
// ...). Every chart begins with p's first series.
std::vector<Plot> split_plot(const Plot& p, const std::vector<SeriesGroup>& groups);

// The top of the y-axis: the highest bar, error bar end or published
// marker, with a margin (1.1 at least on a ratio plot, so that its line at
// 1 shows); 0 if there are no points (gnuplot's autoscale then).
double y_top(const Plot& p);

// The gnuplot script that draws `p` into `png` (the data inline, every
// string quoted for gnuplot, so any character in a path or label is safe).
std::string gnuplot_script(const Plot& p, const std::string& png);

// Draws every plot into dir/<file>.png (scripts beside them as
// dir/<file>.gp). Returns ", <png>..." for the report's summary line, or
// the reason there are none.
std::string write_plots(const std::vector<Plot>& plots, const std::string& dir);

}  // namespace mmlab::cli
