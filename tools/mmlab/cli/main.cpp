// mmlab: the command-line program. One file per subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "mmlab/types.h"

int main(int argc, char** argv) {
  CLI::App app{"mmlab: an executable model of the Linux memory-management core"};
  app.require_subcommand(1);
  mmlab::cli::add_bench(app);
  mmlab::cli::add_gup_test(app);
  mmlab::cli::add_run(app);
  mmlab::cli::add_diff(app);
  mmlab::cli::add_calibrate(app);
  mmlab::cli::add_validate(app);
  mmlab::cli::add_replay(app);
  mmlab::cli::add_counters(app);
  mmlab::cli::add_stress(app);
  mmlab::cli::add_explore(app);
  mmlab::cli::add_variants(app);
  mmlab::cli::add_cow_bench(app);
  mmlab::cli::add_compare(app);
  mmlab::cli::add_sweep(app);
  mmlab::cli::add_host(app);
  mmlab::cli::add_record(app);
  mmlab::cli::set_command_line(argc, argv);
  // --version: what a bug report needs to name this binary.
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::printf("mmlab %s\nbuild: %s\n", mmlab::build_commit(), mmlab::build_description());
    return 0;
  }
  // A first token that is neither a subcommand nor one of mmlab's own
  // options: name it (CLI11 would report only that a subcommand is required).
  std::string names;
  bool is_subcommand = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    is_subcommand |= argc > 1 && sub->get_name() == argv[1];
  }
  if (argc > 1 && !is_subcommand && !(argv[1][0] == '-' && app.get_option_no_throw(argv[1]))) {
    std::fprintf(stderr, "mmlab: unknown %s '%s' (expected a subcommand: %s; or --help, --version)\n",
                 argv[1][0] == '-' ? "option" : "subcommand", argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A usage error names the subcommand and the bad token, points at the
    // help, and exits 2, as every mmlab command's own checks do.
    std::string who = "mmlab";
    for (CLI::App* sub : app.get_subcommands()) who = "mmlab " + sub->get_name();
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n", who.c_str(), e.what(), who.c_str());
    return 2;
  }
  return mmlab::cli::run_selected(app);
}
