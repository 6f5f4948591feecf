// Options of the subcommands that run scenarios on the host backend.
#include <cstdlib>

#include "cli/commands.h"
#include "mmlab/scenario.h"

namespace mmlab::cli {

void add_fake_probe_option(CLI::App* sub, std::vector<std::string>* out) {
  sub->add_option("--fake-probe", *out,
                  "host backend: take this probe's answer as 'missing' (e.g. zero_page, soft_dirty, blkdev_swap, or all), "
                  "to run the skip paths of a host without it; also MMLAB_HOST_FAKE_PROBES=NAME,...")
      ->delimiter(',')
      ->allow_extra_args(false);  // one value per --fake-probe: the scenario files that follow are not probe names
}

int fake_host_probes(const std::vector<std::string>& names, std::string* err) {
  std::string list;
  if (const char* env = std::getenv("MMLAB_HOST_FAKE_PROBES")) list = env;  // checked here too: a typo is an error
  for (auto& n : names) list += "," + n;
  if (scenario_host_fake_probes(list, err) == 0) return 0;
  *err = "--fake-probe / MMLAB_HOST_FAKE_PROBES: " + *err;
  return -1;
}

}  // namespace mmlab::cli
