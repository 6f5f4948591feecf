// `mmlab counters`: every counter and statistic the model keeps, with where a
// scenario or the API reads it and what it counts.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/system.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {
namespace {

struct CountersOptions {
  std::string kind;
  bool json = false;
};

const char* kind_heading(const std::string& kind) {
  if (kind == "event") return "Event counters (System::counter, `expect counter NAME N`)";
  if (kind == "vmstat") return "/proc/vmstat items (System::vmstat_text, `expect vmstat NAME N`)";
  if (kind == "mthp") return "Per-size mTHP statistics (sysfs, `expect sysfs PATH N`; <size> in kB, 8..2048)";
  return "Per-order CoW statistics (System::counter; <N> 0..9)";
}

int run_counters(const CountersOptions& o) {
  std::vector<CounterInfo> all = counter_catalog();
  if (!o.kind.empty() && o.kind != "event" && o.kind != "vmstat" && o.kind != "mthp" && o.kind != "per-order") {
    std::fprintf(stderr, "counters: --kind %s: expected event, vmstat, mthp or per-order\n", o.kind.c_str());
    return 2;
  }
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (auto& c : all)
      if (o.kind.empty() || c.kind == o.kind) j.push_back({{"name", c.name}, {"kind", c.kind}, {"meaning", c.meaning}});
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  std::string last;
  for (auto& c : all) {
    if (!o.kind.empty() && c.kind != o.kind) continue;
    if (c.kind != last) {
      std::fputs(fmt::format("{}{}\n", last.empty() ? "" : "\n", kind_heading(c.kind)).c_str(), stdout);
      last = c.kind;
    }
    std::fputs(fmt::format("  {:<56} {}\n", c.name, c.meaning).c_str(), stdout);
  }
  return 0;
}

}  // namespace

void add_counters(CLI::App& app) {
  auto o = std::make_shared<CountersOptions>();
  auto* sub = app.add_subcommand("counters", "list every counter and statistic, with what it counts");
  sub->add_option("--kind", o->kind, "only this kind: event, vmstat, mthp or per-order");
  sub->add_flag("--json", o->json, "as a JSON array of {name, kind, meaning}");
  register_action(sub, [o] { return run_counters(*o); });
}

}  // namespace mmlab::cli
