// What the host backend leaves on the machine when a run is killed outright
// (SIGKILL, a ctest timeout), and putting it back: `mmlab host restore`.
// A run journals every machine-wide change it makes (sysfs settings, a swap
// device, a mount, a scratch file) in /var/tmp/mmlab-host.restore before
// making it; the next holder of the machine-wide lock replays the journal.
#pragma once

#include <string>
#include <vector>

namespace mmlab::host {

// One journal entry undone, or not: "restored /sys/kernel/mm/... to "always"
// (left by a killed run, pid 123)", "swapped off /dev/loop3; deleted ...".
struct RestoredItem {
  std::string text;
  bool ok = true;  // false: it could not be undone, and text says why
};

// Takes the machine-wide lock without waiting and replays the journal a
// killed run left; *items says what was restored (empty: nothing was
// journaled). 0; -EPERM without root; -EWOULDBLOCK while a live run holds
// the lock (*err names its pid: that run restores its own changes when it
// ends); another -errno if the lock file cannot be opened. An entry that
// cannot be undone is dropped from the journal too (its item says so):
// retrying could not do better.
int restore_host(std::vector<RestoredItem>* items, std::string* err);

// Whether an anonymous read fault maps the shared zero page on this host,
// found by experiment in the calling process (one fresh MADV_NOHUGEPAGE
// page read, then its pagemap entry and kpageflags; root, Linux 6.7+),
// never from the boot command line, and changing no setting. 1 yes, 0 no;
// -errno when it cannot tell. *detail says what the experiment showed.
int probe_zero_page_here(std::string* detail);

}  // namespace mmlab::host
