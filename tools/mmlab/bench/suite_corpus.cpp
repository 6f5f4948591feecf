// The corpus suite: a fixed subset of the selftest replays on the model and
// on this machine's kernel (root), and their ratio.
#include <sstream>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/model_common.h"
#include "bench/modelled.h"
#include "report/report.h"
#include "report/statistics.h"
#include "bench/suite.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"
#include "mmlab/system.h"
#include "mmlab/scenario.h"

#ifndef MMLAB_SOURCE_DIR
#define MMLAB_SOURCE_DIR "."
#endif

namespace mmlab::cli {

// A fixed set of small tests: nothing --size-mb could make too large.
static HostNeed need_corpus(const BenchOptions&) { return {0, 0, false}; }

static int suite_corpus(const BenchOptions& o, Report* rep) {
  const std::string file = o.corpus.empty() ? std::string(MMLAB_SOURCE_DIR) + "/tests/scenarios/cow.mms" : o.corpus;
  const std::string filter = "cow-anon-basic-*";
  std::string err;
  auto prog = scenario_parse({file}, &err);
  if (!prog) {
    std::fprintf(stderr, "mmlab bench: corpus: %s\n", err.c_str());
    return 1;
  }
  ScenarioOptions so;
  so.filter = filter;
  std::ostringstream sink;
  progress("corpus: model (warm-up)");
  scenario_run(*prog, so, sink);  // the frame store, recycled for the timed run
  progress("corpus: model");
  const long hf0 = host_faults_now();
  const auto t0 = Clock::now();
  std::vector<ScenarioResult> model = scenario_run(*prog, so, sink);
  const double model_total = seconds_since(t0);
  const long model_hf = host_faults_now() - hf0;
  std::string why = "not asked (bench --host runs the tests on this machine's kernel too, changing its THP, hugetlb and "
                    "swap settings while they run)";
  std::vector<ScenarioResult> host;
  if (o.host && scenario_host_available(&why)) {
    progress("corpus: host");
    so.backend = Backend::kHost;
    host = scenario_run(*prog, so, sink);
  }
  progress_done();
  rep->add(fmt::format("\n## corpus: {} tests of {} ({}) on the model and on this machine's kernel\n\n",
                       model.size(), file.substr(file.rfind('/') + 1), filter));
  // The tests both backends ran (the host skips what it has no pages or
  // interface for), and those only the model ran: a model-only test can
  // be most of the model's total (cow.mms's 1 GiB hugetlb tests, which a
  // host without three free 1G pages skips, take over 90% of it), so the
  // table prints the model's time over every test and over the common
  // ones apart, and names what lies between them.
  double model_both = 0, host_both = 0, model_only_s = 0;
  int both = 0, model_ran = 0;
  std::string model_only;
  nlohmann::ordered_json model_only_json = nlohmann::ordered_json::array();
  for (size_t i = 0; i < model.size(); i++) {
    if (model[i].outcome == Outcome::kSkip) continue;
    model_ran++;
    if (host.empty()) continue;
    if (host[i].outcome == Outcome::kSkip) {
      model_only_s += model[i].seconds;
      model_only += fmt::format("\n- {}: {:.3f} s on the model; the host skipped it: {}", model[i].name, model[i].seconds,
                                host[i].reason);
      model_only_json.push_back({{"test", model[i].name}, {"model_s", model[i].seconds}, {"host_skipped", host[i].reason}});
      continue;
    }
    both++;
    model_both += model[i].seconds;
    host_both += host[i].seconds;
  }
  rep->add("| backend | tests | s | ms/test | what the time is |\n|---|---:|---:|---:|---|\n");
  rep->add(fmt::format("| model | {} | {:.3f} | {:.2f} | every test the model ran, one at a time: the run's wall time |\n",
                       model_ran, model_total, model_total * 1e3 / std::max(1, model_ran)));
  rep->json["corpus"] = {{"file", file}, {"filter", filter}, {"model_s", model_total}, {"model_tests", model_ran},
                         {"model_host_faults", model_hf}};
  if (host.empty()) {
    rep->add(fmt::format("| host | skipped: {} | | | |\n", why));
    rep->json["corpus"]["host"] = {{"skipped", why}};
    return 0;
  }
  const auto common = [&](const char* backend, double sec) {
    return fmt::format("| {} | {} | {:.3f} | {:.2f} | the tests both ran: each test's wall time, summed |\n", backend, both, sec,
                       sec * 1e3 / std::max(1, both));
  };
  rep->add(common("model", model_both));
  rep->add(common("host", host_both));
  if (!model_only.empty())
    rep->add(fmt::format("\nThe model's two times differ by the {} test(s) only the model ran, {:.3f} s of its {:.3f} s "
                         "(the rest, {:.3f} s, is the runner's own, between the tests):{}\n",
                         model_ran - both, model_only_s, model_total, model_total - model_only_s - model_both, model_only));
  rep->add(fmt::format("\nOn the {} tests both ran: model {:.3f} s, host {:.3f} s: the model is {:.1f}x {} than the host kernel.\n",
                       both, model_both, host_both, model_both > 0 ? std::max(host_both / model_both, model_both / host_both) : 0.0,
                       host_both >= model_both ? "faster" : "slower"));
  rep->json["corpus"]["host"] = {{"tests", both}, {"host_s", host_both}, {"model_s_same_tests", model_both},
                                 {"model_only", model_only_json}};
  return 0;
}

extern const BenchSuite kBenchSuite_corpus = {
    .name = "corpus",
    .summary = "a fixed subset of cow.mms on the model and on the host kernel, and their ratio",
    .need = need_corpus,
    .run = suite_corpus};

}  // namespace mmlab::cli
