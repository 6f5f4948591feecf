// Running parsed scenarios: every test on a fresh backend (the model or the
// host kernel), TAP output as kselftest prints it.
#include <fnmatch.h>

#include <algorithm>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>

#include "fmt/format.h"
#include "host/probe.h"
#include "host/sysfs.h"
#include "mmlab/scenario.h"
#include "phys/frame_store.h"
#include "scenario/parallel.h"
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

void print_tap(std::ostream& tap, int n, const ScenarioResult& r) {
  if (!r.run_text.empty()) tap << "# " << r.run_text << "\n";
  for (auto& l : r.output) tap << "# " << l << "\n";
  std::string name = r.variant.empty() ? r.name : r.name + " [" + r.variant + "]";
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
  if (r.skipped_expectations) tap << "# " << skipped_line(r) << "\n";
}

}  // namespace

void TestFilter::add(const std::string& glob) {
  if (glob.empty()) return;
  if (glob[0] == '!')
    exclude.push_back(glob.substr(1));
  else
    include.push_back(glob);
}

bool TestFilter::matches(const std::string& name) const {
  auto any = [&name](const std::vector<std::string>& globs) {
    return std::any_of(globs.begin(), globs.end(), [&name](const std::string& g) { return fnmatch(g.c_str(), name.c_str(), 0) == 0; });
  };
  return (include.empty() || any(include)) && !any(exclude);
}

std::string TestFilter::text() const {
  std::string s;
  for (auto& g : include) s += (s.empty() ? "" : ", ") + g;
  for (auto& g : exclude) s += (s.empty() ? "!" : ", !") + g;
  return s;
}

size_t scenario_count_tests(const ScenarioProgram& prog, const TestFilter& filter) {
  return scenario_test_names(prog, filter).size();
}

std::vector<std::string> scenario_test_names(const ScenarioProgram& prog, const TestFilter& filter) {
  std::vector<std::string> v;
  for (auto& f : prog.files)
    for (auto& tc : f.tests)
      if (filter.matches(tc.name)) v.push_back(tc.name);
  return v;
}

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
        if (opt.filter.matches(tc.name)) jobs.push_back({&f, &tc, k, v});
  tap << "TAP version 13\n1.." << jobs.size() << "\n";
  std::string host_why;
  const bool host = opt.backend == Backend::kHost;
  FrameStorePool::instance().set_runner_hugepages(!host);
  const bool host_ok = host && scenario_host_available(&host_why);
  std::optional<host::HostLock> lock;  // settings and vmstat deltas are machine-wide
  if (host_ok) {
    lock.emplace();
    for (auto& l : host::host_probe_lines(host::host_probes())) tap << l << "\n";
  }
  std::string narrowed;
  const int width = host ? 1 : parallel_width(opt.jobs, frame_store_footprint(opt.ram_bytes), opt.mem_budget, &narrowed);
  if (!narrowed.empty()) std::cerr << "mmlab: " << narrowed << "\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ScenarioResult> results(jobs.size());
  std::vector<bool> known_used(opt.known.size(), false);
  auto run_one = [&](size_t i) {
    const Job& j = jobs[i];
    const auto start = std::chrono::steady_clock::now();
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
      if (!host && race_block_of(*j.tc)) {
        r = run_race_test(opt, tunes, *j.file, *j.tc);
      } else {
        std::unique_ptr<TestRun> run = host ? make_host_run(opt) : make_model_run(opt, tunes);
        r = run->run(*j.file, *j.tc);
      }
    }
    if (!j.key.empty()) r.variant = j.key + "=" + j.value;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    results[i] = std::move(r);
  };
  int skipped_expectations = 0;
  std::map<std::string, int> skips_by_key;
  auto emit = [&](size_t i) {
    ScenarioResult& r = results[i];
    apply_known(opt.known, &known_used, &r);  // here: emit runs on one thread, in order
    print_tap(tap, static_cast<int>(i + 1), r);
    // The only line that differs between runs (and between -j 1 and -j N).
    tap << fmt::format("# time: {:.3f} ms\n", r.seconds * 1e3);
    skipped_expectations += r.skipped_expectations;
    for (auto& k : r.skips) skips_by_key[k.key] += k.count;
    tap.flush();
    if (opt.progress)
      opt.progress(i + 1, jobs.size(), r.outcome == Outcome::kFail || r.outcome == Outcome::kError || r.outcome == Outcome::kXpass);
  };
  // Large tests one at a time (the others run beside them): each would
  // otherwise fill a large store of its own, and a first touch of host
  // memory costs more than the test's own work here (parallel.h).
  run_ordered(jobs.size(), width, run_one, emit, 1,
              [&](size_t i) { return test_touch_estimate(*jobs[i].file, *jobs[i].tc) >= kLargeTestBytes ? 1 : 0; }, 1);
  for (size_t i = 0; i < opt.known.size(); i++) {
    if (known_used[i] || !opt.filter.empty()) continue;
    ScenarioResult r;
    r.name = "known-failures:" + opt.known[i].glob;
    r.outcome = Outcome::kFail;
    r.diagnostics.push_back("this known-failure entry names no test of the run: remove or correct it");
    tap << "not ok " << results.size() + 1 << " " << r.name << "\n# " << r.diagnostics.front() << "\n";
    results.push_back(std::move(r));
  }
  int cnt[6] = {};
  for (auto& r : results) cnt[static_cast<int>(r.outcome)]++;
  tap << fmt::format("# Totals: pass:{} fail:{} xfail:{} xpass:{} skip:{} error:{}\n", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4], cnt[5]);
  if (host)
    tap << fmt::format("# host: {} expectations skipped{}\n", skipped_expectations, skip_totals(skips_by_key));
  if (opt.times)
    tap << fmt::format("# time: {:.3f} ms total, {} test(s) at a time\n",
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3, width);
  return results;
}

std::string skipped_line(const ScenarioResult& r) {
  std::string s = fmt::format("{} expectation(s) skipped:", r.skipped_expectations);
  for (auto& k : r.skips) s += fmt::format(" {} [{}];", k.why, k.count);
  return s;
}

std::string skip_totals(const std::map<std::string, int>& by_key) {
  std::string s;
  for (auto& [k, n] : by_key) s += fmt::format("{}{} {}", s.empty() ? " (" : ", ", k, n);
  return s.empty() ? s : s + ")";
}

bool scenario_host_available(std::string* why) { return host::host_available(why); }

std::vector<HostProbeReport> scenario_host_probes() {
  std::string why;
  if (!host::host_available(&why)) return {};
  host::HostLock lock;
  host::HostProbes p = host::host_probes();
  std::vector<HostProbeReport> out;
  for (int i = 0; i < host::kNumCaps; i++) {
    auto c = static_cast<host::Cap>(i);
    out.push_back({host::cap_name(c), p.have(c), p[c].faked, p[c].detail});
  }
  return out;
}

int scenario_host_fake_probes(const std::string& list, std::string* error) {
  return host::set_fake_probes(list, error) ? -1 : 0;
}

int scenario_exit_status(const std::vector<ScenarioResult>& results) {
  for (auto& r : results)
    if (r.outcome == Outcome::kFail || r.outcome == Outcome::kError) return 1;
  return 0;
}

}  // namespace mmlab
