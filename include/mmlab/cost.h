// The cost model: the kernel's CPU time predicted from the model's exact
// event counts and per-event costs measured on a real kernel.
//
//   cost_terms()          the terms, one table (src/cost/cost_terms.h)
//   predict()             counts x a profile's costs, per term
//   calibrate_terms()     the host side of `mmlab calibrate`: the calibration
//                         cases on the host (CPU time) and in the model
//                         (counts), fitted by non-negative least squares
//   validate_profile()    `mmlab validate`: the committed validation cases,
//                         predicted and measured
// Profiles are the calibration profile of include/mmlab/calibrate.h
// (format version 2 adds the terms).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "mmlab/calibrate.h"

namespace mmlab {
class EventTally;  // mmlab/system.h
}

namespace mmlab::cost {

enum class Side { kKernel, kUser, kHarness };
enum class Calibration { kFit, kMeasured };

struct TermDef {
  const char* id;
  const char* counter;
  const char* unit;
  Side side;
  Calibration how;
  const char* arch;
  const char* meaning;
};
std::span<const TermDef> cost_terms();
const TermDef* find_term(const std::string& id);

// The count of every term (cost_terms() order) in a run's counter growth
// (ScenarioResult::cost_counts).
std::vector<double> term_counts(const std::map<std::string, int64_t>& counts);

// counts x costs. A term the profile lacks contributes nothing and is listed
// in `missing` when its count is not zero.
struct Prediction {
  double kernel_ns = 0, user_ns = 0;
  double harness_ns = 0;  // the host agent's per-request cost: in total_ns() (a case's measured time), not in a tool's
  double lo_ns = 0, hi_ns = 0;  // program_ns() with every term at the low / high end of its 95% interval
  double total_ns() const { return kernel_ns + user_ns + harness_ns; }
  double program_ns() const { return kernel_ns + user_ns; }
  std::vector<std::pair<std::string, double>> by_term;  // ns per term, non-zero only, in table order
  std::vector<std::string> missing;
  // Terms counted here that no calibration case exercised: they cost 0 in
  // the prediction, which is short by whatever they really cost.
  std::vector<std::string> not_exercised;
};
Prediction predict(const host::CostProfile& p, const std::map<std::string, int64_t>& counts);

// A profile's kernel and program costs bound to EventTally slots once, to
// price many single operations (each write's modelled latency) without
// looking counters up by name. The harness's terms are left out, as in a
// tool's modelled time; a term the profile lacks costs nothing.
class TallyPricer {
 public:
  explicit TallyPricer(const host::CostProfile& p);
  // The modelled ns of everything the tally has counted so far: an
  // operation's cost is the difference between two readings.
  double ns(const EventTally& t) const;

 private:
  std::vector<std::pair<int, double>> slots_;  // (slot, ns per count)
};

// The profile's terms as a Markdown table: each term's counter, unit,
// calibration, cost and interval, then the fit's condition number and
// residuals. Empty for a format 1 profile.
std::string terms_table(const host::CostProfile& p);

// "TERM=NS" pairs set by hand ("what if copies were twice as fast"): the
// term's cost becomes NS and its calibration "override". 0, or -EINVAL with
// *err naming the bad item.
int override_terms(const std::vector<std::string>& sets, host::CostProfile* p, std::string* err);

// The first format 2 profile in `dir` (*.json, in name order) whose header
// matches this machine (host::cost_header_differences() empty): the
// tools' default when no --profile is given. false, with *why saying what
// it found, when none matches.
bool find_matching_profile(const std::string& dir, host::CostProfile* out, std::string* path, std::string* why);

// ---- the fit ----

// Non-negative least squares, min |Ax - b| over x >= 0 (Lawson and Hanson's
// active-set method). A is rows x cols, row-major. Returns x.
std::vector<double> nnls(const std::vector<double>& a, size_t rows, size_t cols, const std::vector<double>& b);
// The 2-norm condition number of A's columns, each scaled to unit length
// (so a term's unit does not matter): sqrt(largest / smallest eigenvalue of
// AᵀA). Infinite for dependent columns.
double condition_number(const std::vector<double>& a, size_t rows, size_t cols);

// ---- calibrating and validating on the host ----

struct CaseRun {
  std::string name;
  std::vector<double> host_ns;  // CPU time of each measured run
  std::map<std::string, int64_t> counts;
  std::string skipped;  // why the case did not run ("" if it ran)
};

// The statistic of a case's host runs: their median (0 for none).
double case_median(std::vector<double> runs);

struct RunCasesOptions {
  std::string file;  // a scenario file of cases (every test has a `counters reset`)
  std::string filter;
  int runs = 5;
  std::function<void(const std::string&)> progress;
};
// Runs each case once on the model (counts) and warm-up + `runs` times on the
// host (CPU time). Needs the host backend (root). 0, or -errno with *err.
// *reference_ns: the median of the speed reference timed after each host run.
int run_cases(const RunCasesOptions& o, std::vector<CaseRun>* out, double* reference_ns, std::string* err);
// The model's side alone: each case's counts (no host run, no root).
int model_case_counts(const RunCasesOptions& o, std::vector<CaseRun>* out, std::string* err);

// The speed reference: CPU time of a fixed piece of kernel and user work in
// this process (fault in, write and unmap 16 MiB of 4K pages, 2000 empty
// madvise calls). A shared VM's speed drifts by tens of percent over
// minutes; the reference measured beside the calibration and beside a
// validation says by how much.
double speed_reference_ns();

// Fits the profile's terms from the cases (and times the measured terms on
// this machine). Fills p->terms and p->fit.
void fit_terms(const std::vector<CaseRun>& cases, host::CostProfile* p);

// Fits p's terms again from the host runs it stored at calibration (format
// 3) and the model's counts of the cases in `o.file` now: after the model
// learns to count something new, the profile follows without the machine.
// The measured terms and the header are kept. A case without stored runs is
// left out and named in *notes. 0, or -errno with *err (-ENODATA: the
// profile stores no runs).
int refit_terms(const RunCasesOptions& o, host::CostProfile* p, std::vector<std::string>* notes, std::string* err);

// User-space timing of the measured terms: ns per byte zeroed and copied
// per order, on a buffer larger than the last-level cache.
void measure_data_terms(host::CostProfile* p);

struct ValidationRow {
  std::string name, family;
  bool multi_process = false;
  double host_median_ns = 0, host_lo_ns = 0, host_hi_ns = 0, host_cov = 0;
  double predicted_ns = 0, error = 0;  // (predicted - median) / median
  bool met = false;
  // The same at the calibration's speed: the host's median divided by the
  // speed ratio (predicted x ratio / median - 1); = error without a ratio.
  double error_at_speed = 0;
  bool met_at_speed = false;
  std::vector<std::string> extrapolated;  // terms the case counts that no calibration case exercised, or the profile lacks
  std::string skipped;
};
struct ValidationReport {
  std::string cases_sha, profile_sha;
  // This run's speed reference over the profile's (1: the machine as fast
  // as when it was calibrated); 0 when the profile has none.
  double speed_ratio = 0;
  std::vector<ValidationRow> rows;
};
ValidationReport validate(const host::CostProfile& p, const std::vector<CaseRun>& cases, double reference_ns,
                          const std::string& cases_text, const std::string& profile_text);
std::string validation_table(const ValidationReport& r);
// FNV-1a of a file's text, in hex: names the cases and the profile a
// report was made from.
std::string text_digest(const std::string& text);

}  // namespace mmlab::cost
