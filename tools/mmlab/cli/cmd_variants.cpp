// `mmlab variants`: every `tune` key the build has, its values in
// registration order with their meanings, and its default: the catalogue
// src/mm/variants.h registers, as scenarios, --variant, `mmlab diff` and
// gup-test accept it.
#include <cstdio>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/tune.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {
namespace {

int run_variants(bool json) {
  const std::vector<TuneKeyInfo> all = tune_catalogue();
  if (json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (auto& k : all) {
      nlohmann::ordered_json values = nlohmann::ordered_json::array();
      for (auto& v : k.values) values.push_back({{"name", v.name}, {"meaning", v.meaning}});
      j.push_back({{"key", k.key}, {"meaning", k.meaning}, {"default", k.default_value}, {"values", values}});
    }
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  for (auto& k : all) {
    std::fputs(fmt::format("{}: {} (default {})\n", k.key, k.meaning, k.default_value).c_str(), stdout);
    if (!k.values.empty() && k.values.front().meaning.empty()) {
      std::fputs(fmt::format("  {}..{}\n", k.values.front().name, k.values.back().name).c_str(), stdout);
      continue;
    }
    for (auto& v : k.values) std::fputs(fmt::format("  {:<10} {}\n", v.name, v.meaning).c_str(), stdout);
  }
  return 0;
}

}  // namespace

void add_variants(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("variants", "list the model's variants: every tune key, its values and their meanings");
  sub->add_flag("--json", *json, "as a JSON array");
  register_action(sub, [json] { return run_variants(*json); });
}

}  // namespace mmlab::cli
