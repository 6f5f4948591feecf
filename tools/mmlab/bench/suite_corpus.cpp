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
  std::string why;
  std::vector<ScenarioResult> host;
  if (scenario_host_available(&why)) {
    progress("corpus: host");
    so.backend = Backend::kHost;
    host = scenario_run(*prog, so, sink);
  }
  progress_done();
  rep->add(fmt::format("\n## corpus: {} tests of {} ({}) on the model and on this machine's kernel\n\n",
                       model.size(), file.substr(file.rfind('/') + 1), filter));
  // The tests both backends ran (the host skips what it has no pages or interface for).
  double model_both = 0, host_both = 0;
  int both = 0, model_ran = 0;
  for (size_t i = 0; i < model.size(); i++) {
    if (model[i].outcome == Outcome::kSkip) continue;
    model_ran++;
    if (host.empty() || host[i].outcome == Outcome::kSkip) continue;
    both++;
    model_both += model[i].seconds;
    host_both += host[i].seconds;
  }
  rep->add("| backend | tests run | total s | ms/test |\n|---|---:|---:|---:|\n");
  rep->add(fmt::format("| model | {} | {:.3f} | {:.2f} |\n", model_ran, model_total, model_total * 1e3 / std::max(1, model_ran)));
  rep->json["corpus"] = {{"file", file}, {"filter", filter}, {"model_s", model_total}, {"model_tests", model_ran},
                         {"model_host_faults", model_hf}};
  if (host.empty()) {
    rep->add(fmt::format("| host | skipped: {} | | |\n", why));
    rep->json["corpus"]["host"] = {{"skipped", why}};
    return 0;
  }
  rep->add(fmt::format("| host | {} | {:.3f} | {:.2f} |\n", both, host_both, host_both * 1e3 / std::max(1, both)));
  rep->add(fmt::format("\nOn the {} tests both ran: model {:.3f} s, host {:.3f} s: the model is {:.1f}x {} than the host kernel.\n",
                       both, model_both, host_both, model_both > 0 ? std::max(host_both / model_both, model_both / host_both) : 0.0,
                       host_both >= model_both ? "faster" : "slower"));
  rep->json["corpus"]["host"] = {{"tests", both}, {"host_s", host_both}, {"model_s_same_tests", model_both}};
  return 0;
}

extern const BenchSuite kBenchSuite_corpus = {
    .name = "corpus",
    .summary = "a fixed subset of cow.mms on the model and on the host kernel, and their ratio",
    .need = need_corpus,
    .run = suite_corpus};

}  // namespace mmlab::cli
