// `mmlab bench`: mmlab's main job, the benchmark report (docs/BENCH.md).
// The suites and what each measures: `mmlab bench --list`, from the table in
// bench/suites.cpp. With --profile (a cost profile from `mmlab calibrate`),
// the fault, fork, gup and ro-pin suites add "modelled" tables (the cow
// suite a column): the model's event counts times the host's measured cost
// per event, apart from the measured figures (and under "modelled" in the
// JSON). This file is the command line; bench/bench.cpp runs the suites.
#include <cstdio>
#include <memory>
#include <string>

#include "bench/suite.h"
#include "cli/commands.h"

namespace mmlab::cli {
namespace {

// `bench --list`: one line per suite, its name and what it measures.
int list_suites() {
  for (const BenchSuite* s : bench_suites()) std::printf("%-9s %s\n", s->name, s->summary);
  return 0;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();  // owned by the action: the options bind to its members
  auto list = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("bench", "run the benchmark report (mmlab's main job)");
  sub->add_flag("--quick", o->quick, "smaller regions and fewer repeats: a run under a minute");
  sub->add_flag("--list", *list, "list the suites, each with what it measures, and exit");
  sub->add_option("--size-mb", o->size_mb, "region size in MiB for every suite")->check(CLI::Range(4, 65536));
  sub->add_option("--repeats", o->repeats, "repeats per variant")->check(CLI::Range(1, 1000));
  sub->add_option("--suite", o->suites, "suites to run: " + bench_suite_names() + " (default: all; --list says what each measures)");
  sub->add_flag("--host", o->host,
                "corpus suite: run its tests on this machine's kernel too (root; changes machine-wide THP, hugetlb and "
                "swap settings while they run, and restores them); without it only the model runs");
  sub->add_option("--corpus", o->corpus, "scenario file of the corpus suite (default: the source tree's tests/scenarios/cow.mms)")
      ->check(CLI::ExistingFile);
  sub->add_option("--form", o->form, "mmtests or lkp: every figure of the run again in that form, as `mmlab compare` prints it")
      ->check(CLI::IsMember({"mmtests", "lkp"}));
  sub->add_option("--out", o->out, "directory for report.md, report.json and the plots (made if missing)");
  sub->add_option("--profile", o->profile, "cost profile from `mmlab calibrate` for the modelled-time tables (default: a committed profile of this machine's kind, if any)")->check(CLI::ExistingFile);
  sub->add_flag("--force", o->force, "use a --profile measured on another kind of machine (every modelled figure is marked FORCED)");
  add_trace_options(sub);
  register_action(sub, [o, list] { return *list ? list_suites() : run_bench(*o); });
}

}  // namespace mmlab::cli
