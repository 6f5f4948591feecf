#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace mmlab::cli {

// Each subcommand registers itself and the action run after parsing.
void add_bench(CLI::App& app);
void add_gup_test(CLI::App& app);
void add_run(CLI::App& app);
void add_diff(CLI::App& app);
void add_calibrate(CLI::App& app);

// Registry of actions, keyed by subcommand.
void register_action(CLI::App* sub, std::function<int()> action);
int run_selected(CLI::App& app);

}  // namespace mmlab::cli
