// `mmlab validate`: the committed validation cases, measured on the host and
// predicted from the model's counts and a profile.
#include <algorithm>
#include <cmath>
#include <random>

#include "fmt/format.h"
#include "mmlab/cost.h"

namespace mmlab::cost {
namespace {

// The median's 95% interval, percentile bootstrap (fixed seed: the same runs
// give the same interval).
std::pair<double, double> median_interval(const std::vector<double>& v) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
  std::vector<double> meds;
  for (int b = 0; b < 1000; b++) {
    std::vector<double> s;
    for (size_t k = 0; k < v.size(); k++) s.push_back(v[pick(rng)]);
    meds.push_back(case_median(s));
  }
  std::sort(meds.begin(), meds.end());
  return {meds[25], meds[974]};
}

double cov(const std::vector<double>& v) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) / m : 0;
}

}  // namespace

std::string text_digest(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

ValidationReport validate(const host::CostProfile& p, const std::vector<CaseRun>& cases, double reference_ns,
                          const std::string& cases_text, const std::string& profile_text) {
  ValidationReport rep;
  if (p.fit.reference_ns > 0) rep.speed_ratio = reference_ns / p.fit.reference_ns;
  rep.cases_sha = text_digest(cases_text);
  rep.profile_sha = text_digest(profile_text);
  for (const CaseRun& c : cases) {
    ValidationRow r;
    r.name = c.name;
    // Names are FAMILY-VARIANT; the family "mp" holds the multi-process cases.
    r.family = c.name.substr(0, c.name.find('-'));
    r.multi_process = r.family == "mp";
    r.skipped = c.skipped;
    if (r.skipped.empty() && c.host_ns.empty()) r.skipped = "no host run";
    if (!r.skipped.empty()) {
      rep.rows.push_back(r);
      continue;
    }
    r.host_median_ns = case_median(c.host_ns);
    std::tie(r.host_lo_ns, r.host_hi_ns) = median_interval(c.host_ns);
    r.host_cov = cov(c.host_ns);
    const Prediction pr = predict(p, c.counts);
    r.predicted_ns = pr.total_ns();
    r.error = (r.predicted_ns - r.host_median_ns) / r.host_median_ns;
    const double half = (r.host_hi_ns - r.host_lo_ns) / 2 / r.host_median_ns;
    r.met = std::abs(r.error) <= std::max(0.10, half);
    const double speed = rep.speed_ratio > 0 ? rep.speed_ratio : 1.0;
    r.error_at_speed = r.predicted_ns * speed / r.host_median_ns - 1;
    r.met_at_speed = std::abs(r.error_at_speed) <= std::max(0.10, half);
    r.extrapolated = pr.not_exercised;
    r.extrapolated.insert(r.extrapolated.end(), pr.missing.begin(), pr.missing.end());
    rep.rows.push_back(r);
  }
  return rep;
}

std::string validation_table(const ValidationReport& r) {
  std::string t = fmt::format("cases {} · profile {}\n\n", r.cases_sha, r.profile_sha);
  if (r.speed_ratio > 0)
    t += fmt::format("Speed reference: this run's over the calibration's {:.3f} (1.000: the machine as fast as when "
                     "calibrated; predictions are not scaled by it).\n\n",
                     r.speed_ratio);
  for (bool multi : {false, true}) {
    std::vector<double> errs, errs_at_speed;
    int met = 0, met_at_speed = 0, n = 0;
    t += multi ? "\n### multi-process cases (CPU time summed over the processes)\n\n" : "### single-task cases\n\n";
    t += "| case | host median us | host 95% | host CoV | predicted us | error | met | not calibrated |\n"
         "|---|---:|---:|---:|---:|---:|:-:|---|\n";
    for (const ValidationRow& row : r.rows) {
      if (row.multi_process != multi) continue;
      if (!row.skipped.empty()) {
        t += fmt::format("| {} | skipped: {} ||||||\n", row.name, row.skipped);
        continue;
      }
      std::string extra;
      for (auto& e : row.extrapolated) extra += (extra.empty() ? "" : ", ") + e;
      t += fmt::format("| {} | {:.1f} | {:.1f}-{:.1f} | {:.1f}% | {:.1f} | {:+.1f}% | {} | {} |\n", row.name,
                       row.host_median_ns / 1e3, row.host_lo_ns / 1e3, row.host_hi_ns / 1e3, row.host_cov * 100,
                       row.predicted_ns / 1e3, row.error * 100, row.met ? "yes" : "no", extra);
      errs.push_back(std::abs(row.error));
      errs_at_speed.push_back(std::abs(row.error_at_speed));
      met += row.met;
      met_at_speed += row.met_at_speed;
      n++;
    }
    if (n)
      t += fmt::format("\n{} of {} met ({:.0f}%), median |error| {:.1f}%\n", met, n, 100.0 * met / n,
                       100 * case_median(errs));
    if (n && r.speed_ratio > 0)
      t += fmt::format("at the calibration's speed (the host's times / the speed ratio): {} of {} met ({:.0f}%), median "
                       "|error| {:.1f}%\n",
                       met_at_speed, n, 100.0 * met_at_speed / n, 100 * case_median(errs_at_speed));
  }
  return t;
}

}  // namespace mmlab::cost
