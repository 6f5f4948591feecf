// `mmlab diff --a CONFIG --b CONFIG FILE...`: compare two configurations over
// a scenario corpus (CONFIG: `model`, `model:KEY=VALUE,...` or `host`).
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {
namespace {

struct DiffCli {
  std::string a = "model", b = "model", known;
  FilterCli filter;
  std::vector<std::string> files, fake_probes;
  bool expect_nfc = false, full = false;
  std::string counters = "kernel", json;
  ParallelCli par;
};

// "model", "model:gup.walk=batch,gup.fast=batch" or "host".
bool parse_config(const std::string& c, DiffConfig* cfg, std::string* err) {
  cfg->name = c;
  if (c == "host") {
    cfg->backend = Backend::kHost;
    return true;
  }
  auto* tunes = &cfg->tunes;
  if (c.rfind("model", 0) != 0 || (c.size() > 5 && c[5] != ':')) {
    *err = "CONFIG must be 'model', 'model:KEY=VALUE[,KEY=VALUE...]' or 'host', not '" + c + "'";
    return false;
  }
  std::string rest = c.size() > 6 ? c.substr(6) : "";
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string::npos) comma = rest.size();
    std::string kv = rest.substr(pos, comma - pos);
    auto eq = kv.find('=');
    if (eq == std::string::npos || !tune_value_known(kv.substr(0, eq), kv.substr(eq + 1))) {
      const std::string values = eq == std::string::npos ? "" : tune_values_text(kv.substr(0, eq));
      *err = "unknown variant '" + kv + "' (" +
             (values.empty() ? "KEY=VALUE with a tune key: " + tune_choices_text() : "values of " + kv.substr(0, eq) + ": " + values) +
             ")";
      return false;
    }
    // One value per key: a second would silently replace the first.
    for (const auto& [key, value] : *tunes)
      if (key == kv.substr(0, eq)) {
        *err = "'" + c + "' names " + key + " twice";
        return false;
      }
    tunes->push_back({kv.substr(0, eq), kv.substr(eq + 1)});
    pos = comma + 1;
  }
  return true;
}

// --json: how the diff was made, its totals and a record per test.
bool write_diff_json(const DiffOptions& d, const DiffSummary& s, int status, const std::string& path, std::ofstream& out) {
  nlohmann::ordered_json j;
  j["command"] = command_line();
  j["commit"] = build_commit();
  j["build"] = build_description();
  j["a"] = d.a.name;
  j["b"] = d.b.name;
  j["expect_nfc"] = d.expect_nfc;
  j["counters"] = d.counters_all ? "all" : "kernel";
  j["model_only_counter_prefixes"] = model_only_counter_prefixes();
  j["exit"] = status;
  j["totals"] = {{"tests", s.tests},
                 {"compared", s.compared},
                 {"agree", s.agree},
                 {"counters_only", s.counters_only},
                 {"end_state", s.state},
                 {"outcome_changes", s.outcome_changes},
                 {"known", s.known},
                 {"not_compared", s.not_compared},
                 {"end_state_statements", s.state_statements},
                 {"skipped_expectations", s.skipped_expectations},
                 {"reruns", s.reruns}};
  j["tests"] = nlohmann::ordered_json::array();
  for (auto& r : s.records)
    j["tests"].push_back({{"file", r.file}, {"name", r.name}, {"verdict", r.verdict}, {"a", r.a_outcome},
                          {"b", r.b_outcome}, {"detail", r.detail}, {"rerun", r.rerun}});
  out << j.dump(2) << "\n";
  if (out.flush()) return true;
  std::cerr << "mmlab diff: cannot write " << path << "\n";
  return false;
}

int run_diff(const DiffCli& o) {
  DiffOptions d;
  d.filter = o.filter.tests();
  d.expect_nfc = o.expect_nfc;
  d.full = o.full;
  d.counters_all = o.counters == "all";
  if (!parse_parallel_options("diff", o.par, &d.jobs, &d.ram_bytes, &d.mem_budget)) return 2;
  std::string err;
  if (!parse_config(o.a, &d.a, &err) || !parse_config(o.b, &d.b, &err) ||
      (!o.known.empty() && load_known_differences(o.known, &d.known, &err)) || fake_host_probes(o.fake_probes, &err)) {
    std::cerr << "mmlab diff: " << err << "\n";
    return 2;
  }
  auto prog = scenario_parse(o.files, &err);
  if (!prog) {
    std::cerr << "mmlab diff: " << err << "\n";
    return 2;
  }
  // Each side's sizes against its System (or the host).
  for (const DiffConfig* side : {&d.a, &d.b}) {
    ScenarioOptions so;
    so.backend = side->backend;
    so.ram_bytes = d.ram_bytes;
    if (!scenario_check_sizes(*prog, so, &err)) {
      std::cerr << "mmlab diff: " << err << "\n";
      return 2;
    }
  }
  if (!scenario_count_tests(*prog, d.filter)) {
    std::cerr << "mmlab diff: " << no_test_message(d.filter) << "\n";
    return 2;
  }
  std::ofstream json_out;  // opened before any test runs: a bad path costs nothing
  if (!o.json.empty() && !(json_out.open(o.json), json_out)) {
    std::cerr << "mmlab diff: --json " << o.json << ": cannot write\n";
    return 2;
  }
  DiffSummary sum;
  int status = 0;
  {
    TestProgressLine progress("mmlab diff");
    d.progress = progress.callback();
    status = scenario_diff(*prog, d, std::cout, &sum);
  }
  if (!o.json.empty() && !write_diff_json(d, sum, status, o.json, json_out)) return 2;
  return status;
}

}  // namespace

void add_diff(CLI::App& app) {
  auto o = std::make_shared<DiffCli>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("diff", "compare two configurations (model variants, or the model and the host kernel)");
  sub->add_option("--a", o->a, "CONFIG: model, model:KEY=VALUE,... or host (default model)");
  sub->add_option("--b", o->b, "CONFIG: model, model:KEY=VALUE,... or host (default model)");
  sub->add_option("--known", o->known, "file of known, documented differences: GLOB REASON... per line");
  add_filter_options(sub, &o->filter, "tests");
  sub->add_flag("--expect-nfc", o->expect_nfc,
                "fail on any end-state difference the kernel would show: outcomes, page state, vmstat, sysfs and /proc "
                "statistics (a 'no functional change' check); the model's own mechanism counters are shown, not judged");
  sub->add_option("--counters", o->counters,
                  "kernel (default): judge what the kernel shows; all: judge the model-only counters too (gup.*, fault.*, "
                  "bytes.*, cow.*)")
      ->check(CLI::IsMember({"kernel", "all"}));
  sub->add_flag("--full", o->full, "show every differing line (default: 4 a side, for the first 12 statements of a test)");
  sub->add_option("--json", o->json, "also write the totals and each test's verdict as JSON, with the commit and command line");
  add_fake_probe_option(sub, &o->fake_probes);
  sub->add_option("files", o->files, "scenario files")->required();
  add_parallel_options(sub, &o->par);
  register_action(sub, [o] { return run_diff(*o); });
}

}  // namespace mmlab::cli
