#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace mmlab::cli {

// Each subcommand registers itself and the action run after parsing.
void add_bench(CLI::App& app);
void add_gup_test(CLI::App& app);
void add_run(CLI::App& app);
void add_diff(CLI::App& app);
void add_calibrate(CLI::App& app);

// --fake-probe NAME[,NAME...] of `run` and `diff` (docs/HOST.md), and
// applying it with MMLAB_HOST_FAKE_PROBES: 0, or -1 with *err.
void add_fake_probe_option(CLI::App* sub, std::vector<std::string>* out);
int fake_host_probes(const std::vector<std::string>& names, std::string* err);

// Registry of actions, keyed by subcommand.
void register_action(CLI::App* sub, std::function<int()> action);
int run_selected(CLI::App& app);

}  // namespace mmlab::cli
