// `mmlab host restore`: puts back what a host-backend run killed outright
// (SIGKILL, a ctest timeout) left changed on the machine, from the journal
// it kept (docs/HOST.md "After a kill -9"), and says what it put back. The
// next host run would do the same; this does it now, and only when asked.
//
// Exit status: 0 restored (or nothing to restore), 1 it could not (not
// root, a live run holds the lock, an entry could not be undone), 2 usage.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "mmlab/host.h"

namespace mmlab::cli {
namespace {

// CLI11 would name a stray token without saying which command refused it:
// both levels keep their extras and name them here.
bool no_extras(const CLI::App* sub, const char* cmd, const char* what) {
  const auto extra = sub->remaining();
  if (extra.empty()) return true;
  std::fprintf(stderr, "mmlab %s: unknown %s '%s' (see mmlab %s --help)\n", cmd,
               extra[0].rfind('-', 0) == 0 ? "option" : what, extra[0].c_str(), cmd);
  return false;
}

int run_restore() {
  std::vector<host::RestoredItem> items;
  std::string err;
  if (host::restore_host(&items, &err)) {
    std::fprintf(stderr, "mmlab host restore: %s\n", err.c_str());
    return 1;
  }
  int failed = 0;
  for (auto& item : items) {
    if (item.ok) {
      std::printf("%s\n", item.text.c_str());
    } else {
      std::fprintf(stderr, "mmlab host restore: %s\n", item.text.c_str());
      failed++;
    }
  }
  if (items.empty()) std::printf("nothing to restore\n");
  return failed ? 1 : 0;
}

}  // namespace

void add_host(CLI::App& app) {
  auto* host = app.add_subcommand(
      "host", "the machine the host backend changes: `host restore` puts back what a killed run left (docs/HOST.md)");
  host->allow_extras();
  auto* restore = host->add_subcommand(
      "restore",
      "put back what a killed host run left changed (THP and khugepaged settings, hugetlb pools, swap devices, "
      "mounts), from its journal, and say what (root; exit 1 while a live run holds the lock)");
  restore->allow_extras();
  register_action(host, [host, restore] {
    if (!no_extras(host, "host", "subcommand")) return 2;
    if (!restore->parsed()) {
      std::fprintf(stderr, "mmlab host: expected a subcommand: restore (see mmlab host --help)\n");
      return 2;
    }
    if (!no_extras(restore, "host restore", "argument")) return 2;
    return run_restore();
  });
}

}  // namespace mmlab::cli
