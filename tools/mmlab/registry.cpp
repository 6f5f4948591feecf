#include <map>

#include "commands.h"

namespace mmlab::cli {
namespace {
std::map<CLI::App*, std::function<int()>>& actions() {
  static std::map<CLI::App*, std::function<int()>> a;
  return a;
}
}  // namespace

void register_action(CLI::App* sub, std::function<int()> action) { actions()[sub] = std::move(action); }

int run_selected(CLI::App& app) {
  for (auto* sub : app.get_subcommands())
    if (auto it = actions().find(sub); it != actions().end()) return it->second();
  return 2;
}

}  // namespace mmlab::cli
