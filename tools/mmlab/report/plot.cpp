#include "report/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <fstream>

#include "report/statistics.h"
#include "fmt/format.h"

extern char** environ;

namespace mmlab::cli {
namespace {

// A gnuplot single-quoted string: nothing is special in it but the quote,
// which is doubled.
std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// Colours by series position: the baseline (first) is grey.
constexpr const char* kColours[] = {"#808080", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#e377c2"};

// Past the palette's end the colours repeat, grey never: it is the baseline's.
const char* colour(size_t i) { return i == 0 ? kColours[0] : kColours[1 + (i - 1) % (std::size(kColours) - 1)]; }

// The x at which bar `series` of `n` sits within category `cat`.
double bar_x(size_t cat, size_t series, size_t n, double width) {
  return static_cast<double>(cat) + (static_cast<double>(series) - (static_cast<double>(n) - 1) / 2) * width;
}

// The colour of series i: in bar plots the baseline, when the first series
// is one, grey, and every other series a colour; line plots have no
// baseline series.
const char* series_colour(const Plot& p, size_t i) {
  return colour(!p.lines && p.first_is_baseline ? i : i + 1);
}

std::string header(const Plot& p, const std::string& png) {
  std::string s = "set terminal pngcairo size 800,420 noenhanced font 'sans,9'\n";
  s += "set output " + quoted(png) + "\n";
  s += "set title " + quoted(p.title) + "\n";
  s += "set xlabel " + quoted(p.xlabel) + "\n";
  s += "set ylabel " + quoted(p.ylabel) + "\n";
  s += "set key below\nset grid ytics\nset border 3\nset tics nomirror\n";
  // The axis is set to fit every bar's upper end: autoscaling to the next
  // tic can leave the longest error bar ending on the border, where it
  // reads as clipped.
  const double top = y_top(p);
  if (p.logy) {
    // A log axis has no 0: it starts a little below the lowest point.
    double bottom = 0;
    for (auto& sr : p.series)
      for (auto& pt : sr.points)
        if (pt.y > 0 && (bottom == 0 || pt.y < bottom)) bottom = pt.y;
    // The same margins on both ends, a factor each: y_top's 8% is a sliver on a log axis.
    s += "set logscale y 10\n";
    s += bottom > 0 && top > bottom ? fmt::format("set yrange [{:.6g}:{:.6g}]\n", bottom / 1.5, top * 1.5)
                                    : std::string("set yrange [*:*]\n");
  } else {
    s += top > 0 ? fmt::format("set yrange [0:{:.6g}]\n", top) : std::string("set yrange [0:*]\n");
  }
  if (p.ratio) s += "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#404040'\n";
  return s;
}

std::string bar_script(const Plot& p, const std::string& png) {
  std::string s = header(p, png);
  const size_t n = p.series.size();
  const double width = 0.8 / static_cast<double>(n ? n : 1);
  s += fmt::format("set boxwidth {} absolute\nset style fill solid 0.85 border -1\n", width);
  s += fmt::format("set xrange [-0.6:{}]\n", static_cast<double>(p.categories.size()) - 0.4);
  std::string tics;
  for (size_t c = 0; c < p.categories.size(); c++) tics += fmt::format("{}{} {}", c ? ", " : "", quoted(p.categories[c]), c);
  s += "set xtics (" + tics + ")\n";
  std::string plot, published;
  for (size_t i = 0; i < n; i++) {
    s += fmt::format("$s{} << EOD\n", i);
    for (auto& pt : p.series[i].points) {
      const double x = bar_x(static_cast<size_t>(pt.x), i, n, width);
      s += fmt::format("{:.6g} {:.6g} {:.6g} {:.6g}\n", x, pt.y, pt.lo, pt.hi);
      if (!std::isnan(pt.published)) published += fmt::format("{:.6g} {:.6g}\n", x, pt.published);
    }
    s += "EOD\n";
    plot += fmt::format("{}$s{} using 1:2 with boxes lc rgb '{}' title {}, $s{} using 1:2:3:4 with yerrorbars lc rgb 'black' pt 0 notitle",
                        i ? ", " : "", i, series_colour(p, i), quoted(p.series[i].title), i);
  }
  if (!published.empty()) {
    s += "$published << EOD\n" + published + "EOD\n";
    plot += ", $published using 1:2 with points pt 9 ps 1.6 lc rgb '#d00000' title 'kernel (published)'";
  }
  return s + "plot " + plot + "\n";
}

std::string line_script(const Plot& p, const std::string& png) {
  std::string s = header(p, png);
  if (p.logx) s += "set logscale x 2\n";
  if (!p.xtics.empty()) {
    std::string tics;
    for (auto& [x, label] : p.xtics) tics += fmt::format("{}{} {:.6g}", tics.empty() ? "" : ", ", quoted(label), x);
    s += "set xtics (" + tics + ")\n";
  }
  s += "set offsets graph 0.03, graph 0.03, 0, 0\n";
  std::string plot, published;
  for (size_t i = 0; i < p.series.size(); i++) {
    s += fmt::format("$s{} << EOD\n", i);
    for (auto& pt : p.series[i].points) {
      s += fmt::format("{:.6g} {:.6g} {:.6g} {:.6g}\n", pt.x, pt.y, pt.lo, pt.hi);
      if (!std::isnan(pt.published)) published += fmt::format("{:.6g} {:.6g}\n", pt.x, pt.published);
    }
    s += "EOD\n";
    // Past the palette's end a colour comes back: each round of it gets its
    // own dash and point type, so that no two lines look alike.
    const size_t round = i / (std::size(kColours) - 1);
    plot += fmt::format("{}$s{} using 1:2:3:4 with yerrorlines lw 1.5 dt {} pt {} ps 0.8 lc rgb '{}' title {}",
                        i ? ", " : "", i, 1 + round, 7 + 2 * round, series_colour(p, i), quoted(p.series[i].title));
  }
  if (!published.empty()) {
    s += "$published << EOD\n" + published + "EOD\n";
    plot += ", $published using 1:2 with points pt 9 ps 1.6 lc rgb '#d00000' title 'kernel (published)'";
  }
  return s + "plot " + plot + "\n";
}

// Runs `gnuplot script` with no shell, its output to /dev/null. 0, or the
// errno of the spawn (ENOENT: no gnuplot), or -1 if gnuplot failed.
int run_gnuplot(const std::string& dir, const std::string& script) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // In the report's folder, as `gnuplot NAME.gp` run there by hand redraws it.
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::string prog = "gnuplot";
  char* argv[] = {prog.data(), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid;
  int err = posix_spawnp(&pid, "gnuplot", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) return err;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return ENOENT;  // an exec failure reported by the child
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

}  // namespace

double y_top(const Plot& p) {
  double top = 0;
  for (auto& sr : p.series)
    for (auto& pt : sr.points) {
      for (double y : {pt.y, pt.hi})
        if (std::isfinite(y)) top = std::max(top, y);
      if (std::isfinite(pt.published)) top = std::max(top, pt.published);
    }
  if (top <= 0) return 0;
  return std::max(top * 1.08, p.ratio ? 1.1 : 0.0);
}

PlotPoint sample_point(double x, const std::vector<double>& samples, double k) {
  const Quartiles q = quartiles_of(samples);
  return {x, q.median * k, q.q1 * k, q.q3 * k};
}

std::vector<Plot> split_plot(const Plot& p, const std::vector<SeriesGroup>& groups) {
  if (p.series.size() <= kMaxSeries) return {p};
  std::vector<Plot> out;
  const auto chart = [&](const std::string& suffix, const std::string& title) {
    Plot c = p;
    c.file = p.file + "-" + suffix;
    c.title = p.title + ": " + title;
    c.series = {p.series.front()};
    return c;
  };
  std::vector<bool> placed(p.series.size(), false);
  for (const SeriesGroup& g : groups) {
    Plot c = chart(g.suffix, g.title);
    for (size_t i = 1; i < p.series.size(); i++)
      if (std::find(g.names.begin(), g.names.end(), p.series[i].title) != g.names.end() && c.series.size() < kMaxSeries) {
        c.series.push_back(p.series[i]);
        placed[i] = true;
      }
    if (c.series.size() > 1) out.push_back(std::move(c));
  }
  // What no group took (or a group had no room for) still gets drawn, as
  // many to a chart as fit beside the first series.
  std::vector<size_t> rest;
  for (size_t i = 1; i < p.series.size(); i++)
    if (!placed[i]) rest.push_back(i);
  for (size_t from = 0, part = 1; from < rest.size(); from += kMaxSeries - 1, part++) {
    Plot c = chart(part == 1 ? std::string("more") : fmt::format("more{}", part), "more columns");
    for (size_t j = from; j < rest.size() && j < from + kMaxSeries - 1; j++) c.series.push_back(p.series[rest[j]]);
    out.push_back(std::move(c));
  }
  return out;
}

Plot bar_plot(const std::string& file, const std::string& title, const std::string& ylabel,
              const std::vector<std::string>& categories, const std::vector<std::string>& series) {
  Plot p;
  p.file = file;
  p.title = title;
  p.ylabel = ylabel;
  p.categories = categories;
  for (auto& s : series) p.series.push_back({s, {}});
  return p;
}

std::string gnuplot_script(const Plot& p, const std::string& png) {
  return p.lines ? line_script(p, png) : bar_script(p, png);
}

std::string write_plots(const std::vector<Plot>& plots, const std::string& dir) {
  std::string made, failed;
  for (auto& p : plots) {
    if (p.series.empty()) continue;
    const std::string gp = dir + "/" + p.file + ".gp", png = dir + "/" + p.file + ".png";
    std::ofstream f(gp);
    // The script names its PNG without a folder and holds its data: it
    // redraws from the folder it lies in, wherever that is moved.
    f << gnuplot_script(p, p.file + ".png");
    f.close();
    if (!f) {
      failed += fmt::format("; cannot write {}", gp);
      continue;
    }
    const int err = run_gnuplot(dir, p.file + ".gp");
    if (err == ENOENT) return " (gnuplot not installed: no plots; the scripts are " + dir + "/*.gp)";
    if (err) failed += fmt::format("; gnuplot failed on {}", gp);
    else made += ", " + png;
  }
  return made + (failed.empty() ? "" : " (" + failed.substr(2) + ")");
}

}  // namespace mmlab::cli
