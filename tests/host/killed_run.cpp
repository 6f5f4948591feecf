// A host run to be killed outright, for ctest host.restore
// (check_host_restore.py): it takes the machine-wide lock as a run does,
// writes one /sys/kernel/mm setting through the journal, prints "ready"
// and waits for its SIGKILL, so that what it changed outlives it exactly as
// a killed `mmlab run --backend host` leaves it. With --next-run it is the
// run after that instead: it takes the lock (which replays the journal and
// says what it restored, on stderr) and ends.
//
//   mmlab_killed_run REL VALUE   (REL under /sys/kernel/mm/)
//   mmlab_killed_run --next-run
#include <unistd.h>

#include <cstdio>
#include <string>

#include "host/sysfs.h"
#include "mmlab/types.h"

int main(int argc, char** argv) {
  const bool next_run = argc == 2 && std::string(argv[1]) == "--next-run";
  if (argc != 3 && !next_run) {
    std::fprintf(stderr, "usage: mmlab_killed_run REL VALUE | --next-run\n");
    return 2;
  }
  std::string why;
  if (!mmlab::host::host_available(&why)) {
    std::printf("host backend unavailable: %s\n", why.c_str());
    return 0;
  }
  if (next_run) {
    mmlab::host::HostLock lock;
    return 0;
  }
  mmlab::host::HostLock lock;
  mmlab::host::SysfsGuard guard;
  if (int err = guard.write(argv[1], argv[2])) {
    std::printf("cannot write %s: %s\n", argv[1], mmlab::errno_name(err));
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();  // the guard never restores: the kill is the point
}
