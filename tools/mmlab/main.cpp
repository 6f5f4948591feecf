// mmlab: the command-line program. One file per subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"mmlab: an executable model of the Linux memory-management core"};
  app.require_subcommand(1);
  mmlab::cli::add_bench(app);
  mmlab::cli::add_gup_test(app);
  mmlab::cli::add_run(app);
  mmlab::cli::add_diff(app);
  mmlab::cli::add_calibrate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors print the usage and exit 2, as every mmlab command does.
    app.exit(e);
    CLI::App* failing = &app;
    for (CLI::App* sub : app.get_subcommands()) failing = sub;
    std::fputs(failing->help().c_str(), stderr);
    return 2;
  }
  return mmlab::cli::run_selected(app);
}
