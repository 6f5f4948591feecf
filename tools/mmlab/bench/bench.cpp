// `mmlab bench`, the engine: checks every argument against the suites'
// needs, runs the chosen suites in table order, and writes the report.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/suite.h"
#include "fmt/format.h"
#include "mmlab/explore.h"
#include "mmlab/calibrate.h"
#include "mmlab/system.h"
#include "report/compare.h"
#include "report/report.h"
#include "report/statistics.h"

namespace mmlab::cli {
namespace {

// A noisy run, told from the run itself: the GUP rows' spread (the median
// row's interquartile range above kNoisySpread of its median), or, for
// suites without such rows, the preemptions per second of the run.
constexpr double kNoisySpread = 0.10;
constexpr double kNoisyPreemptionsPerSecond = 50;

void note_noise(const std::vector<double>& spreads, long ivcsw, double seconds, Report* rep) {
  const double spread = median_of(spreads);
  const double rate = seconds > 0 ? static_cast<double>(ivcsw) / seconds : 0;
  rep->json["environment"]["median_row_relative_iqr"] = spreads.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(spread);
  const bool noisy = spreads.empty() ? rate > kNoisyPreemptionsPerSecond : spread > kNoisySpread;
  rep->json["environment"]["noisy"] = noisy;
  const std::string why =
      spreads.empty()
          ? fmt::format("{} involuntary context switches in {:.1f} s ({:.0f}/s; noisy above {:.0f}/s)", ivcsw, seconds,
                        rate, kNoisyPreemptionsPerSecond)
          : fmt::format("the median GUP row's interquartile range is {:.0f}% of its median get time (noisy above "
                        "{:.0f}%); {} involuntary context switches in {:.1f} s",
                        100 * spread, 100 * kNoisySpread, ivcsw, seconds);
  // report.md opens with the verdict (write_report); the terminal, which
  // has scrolled past the top, gets it last.
  rep->verdict = noisy ? "warning: noisy run: " + why : "quiet run: " + why;
  std::printf("\n%s\n", rep->verdict.c_str());
}

// How the report was made, beside what it measured: the options as given,
// the suites run and the load on the host when it started.
nlohmann::ordered_json run_json(const BenchOptions& o, const std::vector<const BenchSuite*>& suites) {
  nlohmann::ordered_json j;
  j["command"] = "bench";
  std::vector<std::string> names;
  for (const BenchSuite* s : suites) names.push_back(s->name);
  j["suites"] = names;
  j["quick"] = o.quick;
  j["size_mb"] = o.size_mb ? nlohmann::ordered_json(o.size_mb) : nlohmann::ordered_json("per suite");
  j["repeats"] = o.repeats ? nlohmann::ordered_json(o.repeats) : nlohmann::ordered_json("per suite");
  j["profile"] = o.profile;
  j["host"] = o.host;
  j["out"] = o.out;
  double load[3];
  if (getloadavg(load, 3) == 3) j["loadavg_1_5_15_min"] = {load[0], load[1], load[2]};
  return j;
}

// The suites --suite names, in the order given (each once; every suite, in
// table order, without any); false (with a message) on a name no suite has.
bool chosen_suites(const BenchOptions& o, std::vector<const BenchSuite*>* out) {
  if (o.suites.empty()) {
    *out = bench_suites();
    return true;
  }
  for (const std::string& name : o.suites) {
    const BenchSuite* s = find_bench_suite(name);
    if (!s) {
      std::fprintf(stderr, "mmlab bench: --suite %s: no such suite (suites: %s)\n", name.c_str(), bench_suite_names().c_str());
      return false;
    }
    if (std::find(out->begin(), out->end(), s) == out->end()) out->push_back(s);
  }
  return true;
}

// What each suite will touch, against what the host has now: a size the
// host cannot hold is refused here, not killed or failed half-way.
bool host_can_hold(const BenchOptions& o, const std::vector<const BenchSuite*>& suites) {
  const uint64_t avail = host_memory_available();
  if (!avail) return true;
  const auto mib = [](uint64_t b) { return static_cast<unsigned long long>(b >> 20); };
  for (const BenchSuite* s : suites) {
    const HostNeed need = s->need(o);
    if (need.bytes <= avail) continue;
    if (o.size_mb && need.sized_by_option)
      std::fprintf(stderr, "mmlab bench: --size-mb %llu: the %s suite needs %llu MiB of host memory, the host has %llu MiB available\n",
                   static_cast<unsigned long long>(o.size_mb), s->name, mib(need.bytes), mib(avail));
    else
      std::fprintf(stderr, "mmlab bench: --suite %s: needs %llu MiB of host memory (its %llu MiB region%s), the host has %llu MiB "
                   "available (%s)\n",
                   s->name, mib(need.bytes), static_cast<unsigned long long>(need.region_mb),
                   need.sized_by_option ? "" : ", whatever --size-mb", mib(avail),
                   need.sized_by_option ? "--size-mb or --quick makes it smaller" : "--quick makes it smaller");
    return false;
  }
  return true;
}

// Every argument checked before any suite runs: a typo in the last
// --suite, or an --out that cannot be written, never costs a run.
bool check_arguments(const BenchOptions& o, std::vector<const BenchSuite*>* suites, host::CostProfile* profile) {
  // Every suite maps 2M folios (and the fault suite's native pass writes
  // whole ones): a region of an odd number of MiB would end in half of one.
  if (o.size_mb % 2) {
    std::fprintf(stderr, "mmlab bench: --size-mb %llu: not a multiple of 2 (the suites map 2M folios)\n",
                 static_cast<unsigned long long>(o.size_mb));
    return false;
  }
  if (!chosen_suites(o, suites) || !host_can_hold(o, *suites)) return false;
  std::string err;
  if (o.out.empty() || !out_dir_usable(o.out, &err)) {
    std::fprintf(stderr, "mmlab bench: --out '%s': cannot write reports there: %s\n", o.out.c_str(),
                 o.out.empty() ? "empty path" : err.c_str());
    return false;
  }
  if (!o.profile.empty() && load_profile_option("bench", o.profile, o.force, false, profile)) return false;
  if (build_is_instrumented()) {
    std::fprintf(stderr, "mmlab bench: refusing to report timings from a debug or sanitizer build; build the release preset\n");
    return false;
  }
  return true;
}

// Runs the suites, then records how long that took and how often the
// scheduler preempted the run: the report's noise verdict.
int run_suites(const BenchOptions& o, const std::vector<const BenchSuite*>& suites, Report* rep) {
  struct rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  const auto t0 = std::chrono::steady_clock::now();
  for (const BenchSuite* s : suites)
    if (int e = s->run(o, rep)) return e;
  struct rusage ru1;
  getrusage(RUSAGE_SELF, &ru1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const long ivcsw = ru1.ru_nivcsw - ru0.ru_nivcsw;
  rep->json["environment"]["involuntary_context_switches"] = ivcsw;
  rep->json["environment"]["run_seconds"] = seconds;
  note_noise(rep->spreads, ivcsw, seconds, rep);
  return 0;
}

}  // namespace

// --form: the run's figures (not its environment) as compare prints one
// side, with the samples' statistics in that form.
std::string in_form(const std::string& form, const nlohmann::ordered_json& report) {
  nlohmann::json figures = nlohmann::json::parse(report.dump());
  figures.erase("environment");
  figures.erase("run");
  CompareSide side;
  side.name = "this run";
  side.add_report(figures);
  CompareOptions co;
  co.form = form == "lkp" ? CompareForm::kLkp : CompareForm::kMmtests;
  return fmt::format("\n## Every figure in {} form\n\n```\n{}```\n", form == "lkp" ? "the 0-day/lkp" : "mmtests' compare-kernels",
                     compare_text({side}, co));
}

int run_bench(const BenchOptions& o) {
  std::vector<const BenchSuite*> suites;
  host::CostProfile profile;
  if (!check_arguments(o, &suites, &profile)) return 2;
  Report rep;
  std::string profile_file = o.profile, no_profile;
  if (!o.profile.empty() || default_profile(&profile, &profile_file, &no_profile)) rep.profile = &profile;
  rep.add("# mmlab bench\n\n");
  rep.add(environment_text(&rep.json["environment"]));
  rep.json["environment"]["sched_points"] = explore::available();
  if (explore::available())
    rep.add("note: this build has the race explorer's schedule points, which slow the per-page GUP and fault loops by "
            "3-13%; the bench preset (scripts/bench.sh) builds without them\n");
  // Stated once for every table below, whose intervals carry the mark.
  rep.add(significance_rule() + "\n");
  rep.json["run"] = run_json(o, suites);
  if (rep.profile) rep.add(profile_text(profile, profile_file, &rep.json["modelled"]["profile"]));
  else rep.add(no_profile_text(no_profile));
  if (int e = run_suites(o, suites, &rep)) return e;
  if (!o.form.empty()) rep.add(in_form(o.form, rep.json));
  return write_report(rep, o.out);
}

}  // namespace mmlab::cli
