// `mmlab validate --profile P`: the committed validation cases
// (bench/cost/validate.mms) measured on this host and predicted from the
// model's counts and the profile's costs; the per-case table and the
// summary for single-task and multi-process cases apart.
//
// Exit status: 0 the table was made, 1 a run failed, 2 usage (a profile
// for another machine without --force, a bad --set), 4 the host cannot be
// measured here (ctest's skip).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/calibrate.h"
#include "mmlab/cost.h"
#include "mmlab/input_file.h"
#include "nlohmann/json.hpp"
#include "report/report.h"

namespace mmlab::cli {
namespace {


struct ValidateCli {
  std::string profile, cases, filter, json;
  std::vector<std::string> sets;
  int runs = 5;
  bool force = false;
};

nlohmann::ordered_json report_json(const cost::ValidationReport& r, const host::CostProfile& p, bool forced) {
  nlohmann::ordered_json j;
  j["cases_sha"] = r.cases_sha;
  j["profile_sha"] = r.profile_sha;
  j["profile"] = p.name;
  j["forced"] = forced;
  j["speed_ratio"] = r.speed_ratio;
  for (const auto& row : r.rows) {
    auto& c = j["cases"][row.name];
    c["family"] = row.family;
    c["multi_process"] = row.multi_process;
    if (!row.skipped.empty()) {
      c["skipped"] = row.skipped;
      continue;
    }
    c["host_median_ns"] = row.host_median_ns;
    c["host_ci95_ns"] = {row.host_lo_ns, row.host_hi_ns};
    c["host_cov"] = row.host_cov;
    c["predicted_ns"] = row.predicted_ns;
    c["error"] = row.error;
    c["met"] = row.met;
    c["error_at_speed"] = row.error_at_speed;
    c["met_at_speed"] = row.met_at_speed;
    c["not_calibrated"] = row.extrapolated;
  }
  return j;
}

int run_validate(const ValidateCli& v) {
  std::string why, profile_text, cases_text;
  host::CostProfile p;
  if (load_profile_option("validate", v.profile, v.force, true, &p)) return 2;
  // The report records the digest of the profile's text.
  if (read_input_file(v.profile, 16ull << 20, &profile_text, &why)) {
    std::fprintf(stderr, "mmlab validate: --profile %s: %s\n", v.profile.c_str(), why.c_str());
    return 2;
  }
  if (cost::override_terms(v.sets, &p, &why)) {
    std::fprintf(stderr, "mmlab validate: %s\n", why.c_str());
    return 2;
  }
  cost::RunCasesOptions ro;
  ro.file = v.cases.empty() ? std::string(MMLAB_SOURCE_DIR) + "/bench/cost/validate.mms" : v.cases;
  ro.filter = v.filter;
  ro.runs = v.runs;
  if (read_input_file(ro.file, 4ull << 20, &cases_text, &why)) {
    std::fprintf(stderr, "mmlab validate: --cases %s: %s\n", ro.file.c_str(), why.c_str());
    return 2;
  }
  if (!host::host_calibration_available(&why)) {
    std::fprintf(stderr, "mmlab validate: cannot measure this host: %s\n", why.c_str());
    return kExitUnavailable;
  }
  const bool tty = isatty(STDERR_FILENO);
  ro.progress = [tty](const std::string& w) {
    if (tty) std::fprintf(stderr, "\r\033[K  validate: %s ...", w.c_str());
  };
  std::vector<cost::CaseRun> cases;
  double reference_ns = 0;
  int e = cost::run_cases(ro, &cases, &reference_ns, &why);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (e) {
    std::fprintf(stderr, "mmlab validate: %s\n", why.c_str());
    return e == -EINVAL ? 2 : 1;
  }
  const cost::ValidationReport r = cost::validate(p, cases, reference_ns, cases_text, profile_text);
  std::printf("# mmlab validate: profile %s on %s\n\n", p.name.c_str(), p.machine.kernel.c_str());
  if (!p.forced.empty()) {
    std::printf("**FORCED**: the profile was measured on another kind of machine; every figure below is marked by it:\n");
    for (auto& d : p.forced) std::printf("- %s\n", d.c_str());
    std::printf("\n");
  }
  std::printf("Host: CPU time its processes spent on the measured statements (user and kernel), median of %d runs "
              "after a warm-up; predicted: the model's counts x the profile's costs. A case is met when |error| <= "
              "max(10%%, the host's 95%% half-width).\n\n%s",
              v.runs, cost::validation_table(r).c_str());
  if (!v.json.empty()) {
    std::ofstream f(v.json);
    f << report_json(r, p, !p.forced.empty()).dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "mmlab validate: --json %s: cannot write\n", v.json.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

void add_validate(CLI::App& app) {
  auto v = std::make_shared<ValidateCli>();
  auto* sub = app.add_subcommand("validate",
                                 "measure the cost model's validation cases on this host and compare them with the "
                                 "profile's predictions (root; exit 4 where the host cannot be measured)");
  sub->add_option("--profile", v->profile, "cost profile from `mmlab calibrate` (format 2)")->required();
  sub->add_option("--cases", v->cases, "validation cases (default: bench/cost/validate.mms)");
  sub->add_option("--filter", v->filter, "only the cases whose name matches this glob");
  sub->add_option("--runs", v->runs, "host runs per case after a warm-up (default 5)")->check(CLI::Range(2, 100));
  sub->add_option("--set", v->sets, "TERM=NS: a term's cost set by hand (repeatable)");
  sub->add_option("--json", v->json, "also write the table as JSON");
  sub->add_flag("--force", v->force, "use a profile measured on another kind of machine (every figure is marked)");
  register_action(sub, [v] { return run_validate(*v); });
}

}  // namespace mmlab::cli
