// Running parsed scenarios: every test on a fresh backend (the model or the
// host kernel), TAP output as kselftest prints it.
#include <fnmatch.h>

#include <memory>
#include <optional>

#include "fmt/format.h"
#include "host/sysfs.h"
#include "mmlab/scenario.h"
#include "scenario/test_run.h"

namespace mmlab {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "fail";
    case Outcome::kXfail: return "xfail";
    case Outcome::kXpass: return "xpass";
    case Outcome::kSkip: return "skip";
    case Outcome::kError: return "error";
  }
  return "?";
}

namespace {

// `mmlab run --known`: a listed failure is an XFAIL with the list's reason;
// a listed test that passes fails, so that the list stays true.
void apply_known(const std::vector<KnownDifference>& known, std::vector<bool>* used, ScenarioResult* r) {
  for (size_t i = 0; i < known.size(); i++) {
    if (fnmatch(known[i].glob.c_str(), r->name.c_str(), FNM_EXTMATCH) != 0) continue;
    (*used)[i] = true;
    if (r->outcome == Outcome::kFail || r->outcome == Outcome::kError) {
      r->outcome = Outcome::kXfail;
      r->reason = "known: " + known[i].reason;
    } else if (r->outcome == Outcome::kPass) {
      r->outcome = Outcome::kFail;
      r->diagnostics.push_back("listed as a known failure (" + known[i].reason + ") but it passed: update the list");
    }
    return;
  }
}

}  // namespace

std::vector<ScenarioResult> scenario_run(const ScenarioProgram& prog, const ScenarioOptions& opt, std::ostream& tap) {
  struct Job {
    const ScenarioFileAst* file;
    const TestCase* tc;
    std::string key, value;
  };
  std::vector<Job> jobs;
  std::vector<std::pair<std::string, std::string>> variants;
  for (auto& [k, vals] : opt.variants)
    for (auto& v : vals) variants.push_back({k, v});
  if (variants.empty()) variants.push_back({"", ""});
  for (auto& f : prog.files)
    for (auto& [k, v] : variants)
      for (auto& tc : f.tests)
        if (opt.filter.empty() || fnmatch(opt.filter.c_str(), tc.name.c_str(), 0) == 0) jobs.push_back({&f, &tc, k, v});
  tap << "TAP version 13\n1.." << jobs.size() << "\n";
  std::string host_why;
  const bool host = opt.backend == Backend::kHost;
  const bool host_ok = host && scenario_host_available(&host_why);
  std::optional<host::HostLock> lock;  // settings and vmstat deltas are machine-wide
  if (host_ok) lock.emplace();
  std::vector<ScenarioResult> results;
  std::vector<bool> known_used(opt.known.size(), false);
  int n = 0, skipped_expectations = 0;
  for (auto& j : jobs) {
    ScenarioResult r;
    if (host && (!host_ok || !j.key.empty())) {
      r.file = j.file->path;
      r.name = j.tc->name;
      r.outcome = Outcome::kSkip;
      r.reason = !host_ok ? "host backend unavailable: " + host_why
                          : fmt::format("{}={} is a model variant the host kernel does not have", j.key, j.value);
    } else {
      TuneList tunes;
      if (!j.key.empty()) tunes.push_back({j.key, j.value});
      std::unique_ptr<TestRun> run = host ? make_host_run(opt) : make_model_run(opt, tunes);
      r = run->run(*j.file, *j.tc);
    }
    if (!j.key.empty()) r.variant = j.key + "=" + j.value;
    apply_known(opt.known, &known_used, &r);
    std::string name = r.variant.empty() ? r.name : r.name + " [" + r.variant + "]";
    n++;
    switch (r.outcome) {
      case Outcome::kPass: tap << "ok " << n << " " << name << "\n"; break;
      case Outcome::kSkip: tap << "ok " << n << " " << name << " # SKIP " << r.reason << "\n"; break;
      case Outcome::kXfail: tap << "ok " << n << " " << name << " # XFAIL " << r.reason << "\n"; break;
      case Outcome::kXpass: tap << "ok " << n << " " << name << " # XPASS " << r.reason << "\n"; break;
      case Outcome::kFail:
      case Outcome::kError: tap << "not ok " << n << " " << name << "\n"; break;
    }
    if (r.outcome != Outcome::kPass)
      for (auto& d : r.diagnostics) tap << "# " << d << "\n";
    for (auto& v : r.violations) tap << "# violation detected (expected): " << v.substr(0, v.find('\n')) << "\n";
    if (r.skipped_expectations) {
      tap << "# " << r.skipped_expectations << " expectation(s) skipped:";
      for (auto& why : r.skip_notes) tap << " " << why << ";";
      tap << "\n";
    }
    skipped_expectations += r.skipped_expectations;
    tap.flush();
    results.push_back(std::move(r));
  }
  for (size_t i = 0; i < opt.known.size(); i++) {
    if (known_used[i] || !opt.filter.empty()) continue;
    ScenarioResult r;
    r.name = "known-failures:" + opt.known[i].glob;
    r.outcome = Outcome::kFail;
    r.diagnostics.push_back("this known-failure entry names no test of the run: remove or correct it");
    tap << "not ok " << ++n << " " << r.name << "\n# " << r.diagnostics.front() << "\n";
    results.push_back(std::move(r));
  }
  int cnt[6] = {};
  for (auto& r : results) cnt[static_cast<int>(r.outcome)]++;
  tap << fmt::format("# Totals: pass:{} fail:{} xfail:{} xpass:{} skip:{} error:{}\n", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4], cnt[5]);
  if (host) tap << fmt::format("# host: {} expectations skipped (not observable on a real kernel)\n", skipped_expectations);
  return results;
}

bool scenario_host_available(std::string* why) { return host::host_available(why); }

int scenario_exit_status(const std::vector<ScenarioResult>& results) {
  for (auto& r : results)
    if (r.outcome == Outcome::kFail || r.outcome == Outcome::kError) return 1;
  return 0;
}

}  // namespace mmlab
