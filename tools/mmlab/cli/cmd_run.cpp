// `mmlab run FILE...`: run .mms scenarios and report in kselftest TAP.
#include <fnmatch.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <tuple>

#include "cli/commands.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "mmlab/calibrate.h"
#include "mmlab/cost.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"
#include "nlohmann/json.hpp"
#include "report/report.h"

namespace mmlab::cli {
namespace {

struct RunOptions {
  std::vector<std::string> files;
  std::string json, known, states, profile;
  bool force_profile = false;
  FilterCli filter;
  std::vector<std::string> variants;
  std::vector<std::string> counters;  // --counters GLOB,...
  std::string backend = "model";
  std::vector<std::string> fake_probes;
  bool tap = false, times = false, debug_vm = false, list = false;
  ParallelCli par;
};

// --variant ITEM...: false with a message naming the option otherwise.
bool parse_run_variants(const std::vector<std::string>& items, std::vector<Variant>* out) {
  std::string msg;
  if (parse_variant_items(items, out, &msg)) return true;
  std::cerr << "mmlab run: --variant " << msg << "\n";
  return false;
}

// --json: every test's outcome, output and skips (and the host's probes).
bool write_json(const std::vector<ScenarioResult>& results, Backend backend, const std::string& path, std::ofstream& out) {
  nlohmann::ordered_json j;
  j["command"] = command_line();
  j["commit"] = build_commit();
  j["build"] = build_description();
  std::map<std::string, int> totals;
  for (const char* o : {"pass", "fail", "xfail", "xpass", "skip", "error"}) totals[o] = 0;
  for (auto& r : results) totals[outcome_name(r.outcome)]++;
  j["totals"] = totals;
  j["exit"] = scenario_exit_status(results);
  if (backend == Backend::kHost) {
    j["host_probes"] = nlohmann::ordered_json::array();
    for (auto& p : scenario_host_probes())
      j["host_probes"].push_back({{"name", p.name}, {"available", p.available}, {"forced", p.forced}, {"detail", p.detail}});
  }
  for (auto& r : results) {
    nlohmann::ordered_json skips = nlohmann::ordered_json::array();
    for (auto& k : r.skips) skips.push_back({{"key", k.key}, {"why", k.why}, {"count", k.count}});
    j["tests"].push_back({{"file", r.file}, {"name", r.name}, {"variant", r.variant}, {"outcome", outcome_name(r.outcome)},
                          {"reason", r.reason}, {"diagnostics", r.diagnostics}, {"violations", r.violations},
                          {"skipped_expectations", r.skipped_expectations}, {"skips", skips},
                          {"run", r.run_text}, {"output", r.output}, {"ms", r.seconds * 1e3}});
    if (!r.counters.empty()) j["tests"].back()["counters"] = r.counters;
  }
  out << j.dump(2) << "\n";
  if (out.flush()) return true;
  std::cerr << "mmlab run: cannot write " << path << "\n";
  return false;
}

// --states: each test's state digest after every statement.
bool write_states(const std::vector<ScenarioResult>& results, const std::string& path, std::ofstream& out) {
  for (auto& r : results) {
    out << "test " << r.file << " " << r.name << (r.variant.empty() ? "" : " " + r.variant) << " " << outcome_name(r.outcome)
        << "\n";
    for (auto& l : r.states) out << "  " << l << "\n";
  }
  if (out.flush()) return true;
  std::cerr << "mmlab run: cannot write " << path << "\n";
  return false;
}

// --profile: each test's part after its `counters reset`, as the kernel's
// time predicted from the model's counts (include/mmlab/cost.h).
void print_modelled(const std::vector<ScenarioResult>& results, const host::CostProfile& p) {
  std::cout << "# modelled (profile " << p.name << "): the part of each test after its last `counters reset`\n";
  // A --force'd profile of another kind of machine marks every line.
  const char* mark = p.forced.empty() ? "" : " FORCED";
  for (auto& r : results) {
    if (r.cost_counts.empty()) continue;
    const cost::Prediction pr = cost::predict(p, r.cost_counts);
    std::cout << fmt::format("# modelled{} {}: kernel {:.1f} us, program {:.1f} us (band {:.1f}-{:.1f} us){}\n", mark, r.name, pr.kernel_ns / 1e3, pr.user_ns / 1e3, pr.lo_ns / 1e3, pr.hi_ns / 1e3,
                             pr.missing.empty() && pr.not_exercised.empty()
                                 ? ""
                                 : fmt::format(", terms without a cost: {}{}{}", fmt::join(pr.missing, " "),
                                               pr.missing.empty() || pr.not_exercised.empty() ? "" : " ",
                                               fmt::join(pr.not_exercised, " ")));
  }
}

// --counters: one table of the counters the globs select, a column per
// variant run (in the order run) and, per test, a row per counter that some
// column has non-zero; then the same summed over every test. As `#` lines
// after the totals, so the output stays TAP.
void print_counter_table(const std::vector<ScenarioResult>& results, const std::vector<std::string>& globs) {
  auto selected = [&globs](const std::string& n) {
    return std::any_of(globs.begin(), globs.end(), [&n](const std::string& g) { return fnmatch(g.c_str(), n.c_str(), 0) == 0; });
  };
  std::vector<std::string> columns;
  std::vector<std::string> tests;  // file order, each once
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> cell;  // test -> counter -> column
  std::map<std::string, std::map<std::string, int64_t>> total;                       // counter -> column
  std::map<std::string, int> ran;                                                     // column -> tests counted
  for (const ScenarioResult& r : results) {
    const std::string col = r.variant.empty() ? "default" : r.variant;
    if (std::find(columns.begin(), columns.end(), col) == columns.end()) columns.push_back(col);
    if (r.counters.empty()) continue;  // skipped or errored: no counts
    const std::string test = r.file + " " + r.name;
    if (!cell.count(test)) tests.push_back(test);
    ran[col]++;
    for (auto& [name, v] : r.counters) {
      if (!selected(name)) continue;
      cell[test][name][col] = v;
      total[name][col] += v;
    }
  }
  std::vector<std::array<std::string, 2>> labels;  // (test, counter) per row
  std::vector<std::vector<std::string>> rows;
  auto add_rows = [&](const std::string& label, const std::map<std::string, std::map<std::string, int64_t>>& by_counter) {
    bool first = true;
    for (auto& [name, by_col] : by_counter) {
      if (std::all_of(by_col.begin(), by_col.end(), [](auto& kv) { return kv.second == 0; })) continue;
      std::vector<std::string> row;
      for (const std::string& c : columns) row.push_back(by_col.count(c) ? std::to_string(by_col.at(c)) : "-");
      labels.push_back({first ? label : "", name});
      rows.push_back(std::move(row));
      first = false;
    }
  };
  for (const std::string& t : tests) add_rows(t.substr(t.find(' ') + 1), cell[t]);
  add_rows(fmt::format("(sum, {} test{})", tests.size(), tests.size() == 1 ? "" : "s"), total);
  std::cout << fmt::format("# counters {} (a column per variant; rows where a column is not 0; -: not run)\n",
                           fmt::join(globs, ","));
  if (rows.empty()) {
    std::cout << "# no counter the globs select is non-zero in any test\n";
    return;
  }
  size_t w0 = 4, w1 = 7;
  for (auto& l : labels) w0 = std::max(w0, l[0].size()), w1 = std::max(w1, l[1].size());
  std::vector<size_t> w;
  for (size_t c = 0; c < columns.size(); c++) {
    size_t m = columns[c].size();
    for (auto& row : rows) m = std::max(m, row[c].size());
    w.push_back(m);
  }
  auto line = [&](const std::string& a, const std::string& b, auto&& col) {
    std::string s = fmt::format("# {:<{}}  {:<{}}", a, w0, b, w1);
    for (size_t c = 0; c < columns.size(); c++) s += fmt::format("  {:>{}}", col(c), w[c]);
    std::cout << s << "\n";
  };
  line("test", "counter", [&](size_t c) { return columns[c]; });
  for (size_t i = 0; i < rows.size(); i++) line(labels[i][0], labels[i][1], [&](size_t c) { return rows[i][c]; });
}

int run_run(const RunOptions& o) {
  ScenarioOptions so;
  so.filter = o.filter.tests();
  so.backend = o.backend == "host" ? Backend::kHost : Backend::kModel;
  so.times = o.times;
  const char* env = std::getenv("MMLAB_DEBUG_VM");
  so.debug_vm = o.debug_vm || (env && std::string(env) == "all");
  if (!parse_parallel_options("run", o.par, &so.jobs, &so.ram_bytes, &so.mem_budget)) return 2;
  if (!parse_run_variants(o.variants, &so.variants)) return 2;
  std::string err;
  if (!o.known.empty() && load_known_differences(o.known, &so.known, &err)) {
    std::cerr << "mmlab run: " << err << "\n";
    return 2;
  }
  if (fake_host_probes(o.fake_probes, &err)) {
    std::cerr << "mmlab run: " << err << "\n";
    return 2;
  }
  if (!o.states.empty() && so.backend != Backend::kModel) {
    std::cerr << "mmlab run: --states " << o.states << ": only the model backend shows its end state\n";
    return 2;
  }
  so.record_states = !o.states.empty();
  if (!o.counters.empty() && so.backend != Backend::kModel) {
    std::cerr << "mmlab run: --counters: only the model backend has event counters\n";
    return 2;
  }
  so.record_counters = !o.counters.empty();
  auto prog = scenario_parse(o.files, &err);
  if (!prog || !scenario_check_sizes(*prog, so, &err)) {
    std::cerr << "mmlab run: " << err << "\n";
    return 2;
  }
  if (o.list) {
    const std::vector<std::string> names = scenario_test_names(*prog, so.filter);
    for (const std::string& name : names) std::cout << name << "\n";
    if (names.empty()) std::cerr << "mmlab run: " << no_test_message(so.filter) << "\n";
    return names.empty() ? 2 : 0;
  }
  // Outputs are opened before any test runs: a bad path costs nothing.
  std::ofstream json_out, states_out;
  for (auto [path, out, opt] : {std::tuple{&o.json, &json_out, "--json"}, std::tuple{&o.states, &states_out, "--states"}}) {
    if (path->empty()) continue;
    out->open(*path);
    if (!*out) {
      std::cerr << "mmlab run: " << opt << " " << *path << ": cannot write\n";
      return 2;
    }
  }
  if (!scenario_count_tests(*prog, so.filter)) {
    std::cerr << "mmlab run: " << no_test_message(so.filter) << "\n";
    return 2;
  }
  host::CostProfile profile;
  if (!o.profile.empty()) {
    if (load_profile_option("run", o.profile, o.force_profile, true, &profile)) return 2;
    so.cost_sample = true;
  }
  std::vector<ScenarioResult> results;
  {
    TestProgressLine progress("mmlab run");
    so.progress = progress.callback();
    results = scenario_run(*prog, so, std::cout);
  }
  if (!o.profile.empty()) print_modelled(results, profile);
  if (!o.counters.empty()) print_counter_table(results, o.counters);
  if (!o.json.empty() && !write_json(results, so.backend, o.json, json_out)) return 2;
  if (!o.states.empty() && !write_states(results, o.states, states_out)) return 2;
  return scenario_exit_status(results);
}

}  // namespace

void add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("run", "run .mms scenario files (kselftest TAP output)");
  sub->add_option("files", o->files, "scenario files")->required();
  add_filter_options(sub, &o->filter, "tests");
  sub->add_flag("--list", o->list, "print the names of the tests the files hold (after --filter/--exclude) and run none");
  sub->add_option("--variant", o->variants, "KEY=V1[,V2...]: run every file once per value (e.g. gup.walk=legacy,batch; KEY=all: every "
                  "value, KEY=others: every value but the default; `mmlab variants` lists them)")
      ->allow_extra_args(false);  // one KEY=VALUES per --variant: the scenario files that follow are not variants
  sub->add_option("--backend", o->backend,
                  "model (default), or host: real processes and system calls on this machine's kernel (root; settings "
                  "are restored)")
      ->check(CLI::IsMember({"model", "host"}));
  sub->add_option("--counters", o->counters,
                  "GLOB[,GLOB...]: after the results, one table of the model's counters these globs select (e.g. 'cow.*'), "
                  "a column per --variant value and a row per counter some column has non-zero, per test and summed")
      ->delimiter(',')
      ->allow_extra_args(false);
  sub->add_option("--json", o->json, "write the results as JSON to this file (with the host probes' results)");
  sub->add_option("--states", o->states,
                  "model: write a digest of the end state after every statement to this file, so that two builds can be "
                  "compared with diff(1) (a no-functional-change check across commits)");
  add_fake_probe_option(sub, &o->fake_probes);
  sub->add_option("--known", o->known,
                  "file of tests this run expects to fail, GLOB REASON... per line (XFAIL; a listed test that passes fails)");
  sub->add_flag("--tap", o->tap, "TAP output (the default and only format)");
  sub->add_flag("--times", o->times, "a '# time: N ms total' line at the end (each test always has its '# time: N ms' line)");
  sub->add_option("--profile", o->profile,
                  "cost profile from `mmlab calibrate`: a '# modelled' line per test, the kernel's time of its part after "
                  "`counters reset` predicted from the model's counts");
  sub->add_flag("--force", o->force_profile, "use a --profile measured on another kind of machine (every modelled line is marked FORCED)");
  sub->add_flag("--debug-vm", o->debug_vm,
                "model: run the invariant checker after every statement, not only at each test's end (also MMLAB_DEBUG_VM=all)");
  add_parallel_options(sub, &o->par);
  add_trace_options(sub);
  register_action(sub, [o] { return run_run(*o); });
}

}  // namespace mmlab::cli
