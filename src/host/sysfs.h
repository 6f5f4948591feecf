// The host's /sys/kernel/mm settings for the host backend: written for a
// test and put back when it ends, also when the run is interrupted.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mmlab::host {

// Whether the host backend can run here: root, /sys/kernel/mm writable,
// /proc/kpageflags readable. Otherwise false with the reason.
bool host_available(std::string* why);

// /sys/kernel/mm/<rel>: the selected word of a "[bracketed]" choice file,
// otherwise the text without its newline. 0 or -errno.
[[nodiscard]] int sysfs_read(const std::string& rel, std::string* out);

// Settings written for one test. The first write to a file saves what was
// there; restore() (or the destructor) writes the saved values back in
// reverse order. Until then the saved values are also registered with a
// SIGINT/SIGTERM/SIGHUP/SIGALRM handler that restores them (and kills the
// host processes, see register_host_pid) before the signal takes its
// course, and journaled in /var/tmp for a run killed outright: the next
// HostLock holder (or `mmlab host restore`, include/mmlab/host.h) restores
// them and says so.
class SysfsGuard {
 public:
  SysfsGuard() = default;
  ~SysfsGuard() { restore(); }
  SysfsGuard(const SysfsGuard&) = delete;
  SysfsGuard& operator=(const SysfsGuard&) = delete;

  int write(const std::string& rel, const std::string& value);  // 0 or -errno
  void restore();
  // The model's state of a fresh system for every setting a scenario can
  // change or the model assumes (THP sizes, zero page, khugepaged knobs,
  // shmem THP off, empty hugetlb pools), once no huge page is in use any
  // more. 0 or -errno with *why.
  // keep_gigantic: leave the 1G pool as the run's previous test sized it
  // (the test sizes it itself, or never looks at 1G pages; see
  // keep_pool_write).
  int apply_defaults(std::string* why, bool keep_gigantic = false);

 private:
  std::vector<std::pair<std::string, std::string>> saved_;  // rel, original value
};

// The gigantic pool's size (kGigantic) is set through one guard for the
// whole run, not per test: allocating 1 GiB pages takes contiguous memory and
// seconds of compaction, so a run keeps the size a test gave the pool for the
// next test that asks the same. The outermost HostLock restores it when the
// run ends (the interrupt handler and the journal too, as for every write).
inline constexpr const char* kGiganticPool = "hugepages/hugepages-1048576kB/nr_hugepages";
[[nodiscard]] int keep_pool_write(const std::string& rel, const std::string& value);  // 0 or -errno

// Reservations of the pool in "hugepages/hugepages-<N>kB/" (resv_hugepages).
// Right after apply_defaults, with no process of the test alive, they are
// someone else's: a pool sized for a test has that many pages fewer to give.
[[nodiscard]] long pool_outside_reservations(const std::string& pool_dir);

// Something else a run made that must not outlive it, undone by the
// interrupt handler and the journal: "umount" DIR (then rmdir), "unlink"
// FILE or "shmrm" ID (a SysV segment, IPC_RMID). journal_extra_clear() once
// the run has undone them itself; journal_extra_remove() for one of them.
void journal_extra(const char* kind, const std::string& path);
void journal_extra_remove(const char* kind, const std::string& path);
void journal_extra_clear();

// Host processes the interrupt handler kills (SIGKILL) before restoring.
void register_host_pid(int pid);
void unregister_host_pid(int pid);

// One host-backend run per machine at a time: settings and vmstat deltas
// are machine-wide. Blocks on flock(/run/lock/mmlab-host.lock), then
// restores what a killed run left changed, one line on stderr for each
// entry of its journal ("mmlab: restored PATH to "V" (left by a killed
// run, pid N)"). Re-entrant within a process.
class HostLock {
 public:
  HostLock();
  ~HostLock();
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;
};

}  // namespace mmlab::host
