// `mmlab diff --a CONFIG --b CONFIG FILE...`: compare two configurations over
// a scenario corpus (CONFIG: `model`, `model:KEY=VALUE,...` or `host`).
#include <iostream>

#include "cli/commands.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"

namespace mmlab::cli {
namespace {

struct DiffCli {
  std::string a = "model", b = "model", filter, known;
  std::vector<std::string> files, fake_probes;
  bool expect_nfc = false;
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

int run_diff(const DiffCli& o) {
  DiffOptions d;
  d.filter = o.filter;
  d.expect_nfc = o.expect_nfc;
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
  if (!scenario_count_tests(*prog, o.filter)) {
    // Nothing to run is a mistake (a glob that matches no test, files with
    // none), never a pass.
    std::cerr << "mmlab diff: " << (o.filter.empty() ? std::string("the files hold no test") : "no test matches --filter " + o.filter) << "\n";
    return 2;
  }
  return scenario_diff(*prog, d, std::cout);
}

}  // namespace

void add_diff(CLI::App& app) {
  auto o = std::make_shared<DiffCli>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("diff", "compare two configurations (model variants, or the model and the host kernel)");
  sub->add_option("--a", o->a, "CONFIG: model, model:KEY=VALUE,... or host (default model)");
  sub->add_option("--b", o->b, "CONFIG: model, model:KEY=VALUE,... or host (default model)");
  sub->add_option("--known", o->known, "file of known, documented differences: GLOB REASON... per line");
  sub->add_option("--filter", o->filter, "only tests whose name matches this glob");
  sub->add_flag("--expect-nfc", o->expect_nfc, "fail on any end-state difference (a 'no functional change' check)");
  add_fake_probe_option(sub, &o->fake_probes);
  sub->add_option("files", o->files, "scenario files")->required();
  add_parallel_options(sub, &o->par);
  register_action(sub, [o] { return run_diff(*o); });
}

}  // namespace mmlab::cli
