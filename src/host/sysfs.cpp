// Host sysfs settings with restore-on-interrupt. The interrupt path can only
// use async-signal-safe calls, so what it needs (paths, saved values, pids)
// lives in fixed arrays filled before any setting is changed.
#include "host/sysfs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "host/loopfs.h"
#include "host/host_swap.h"
#include "mmlab/host.h"
#include "mmlab/types.h"

namespace mmlab::host {
namespace {

constexpr const char* kSysMm = "/sys/kernel/mm/";
// A run killed outright (SIGKILL, a ctest timeout) cannot restore anything
// itself; what it changed is journaled here, and the next run to take the
// HostLock puts it back before it starts.
constexpr const char* kJournal = "/var/tmp/mmlab-host.restore";

// What the interrupt handler restores and kills.
struct PendingRestore {
  char path[160];
  char value[64];
};
constexpr int kMaxPending = 128, kMaxPids = 256;
PendingRestore g_pending[kMaxPending];
std::atomic<int> g_npending{0};
std::atomic<int> g_pids[kMaxPids];
// The test's swap device: what to swapoff ("" before it exists) and the
// file to delete (the swap file itself, or a loop device's image).
char g_swap_dev[160], g_swap_image[160];
std::atomic<bool> g_swap_set{false};
struct Extra {
  char kind[8];  // "umount" (then rmdir), "unlink" or "shmrm" (a SysV segment's id: IPC_RMID)
  char path[160];
};
constexpr int kMaxExtras = 8;
Extra g_extras[kMaxExtras];
std::atomic<int> g_nextras{0};

void undo_extra(const char* kind, const char* path) {
  if (strcmp(kind, "umount") == 0) {
    umount2(path, MNT_DETACH);
    rmdir(path);
  } else if (strcmp(kind, "unlink") == 0) {
    unlink(path);
  } else if (strcmp(kind, "shmrm") == 0) {
    shmctl(atoi(path), IPC_RMID, nullptr);
  }
}
bool g_handlers_installed = false;

void restore_from_handler(int sig) {
  for (auto& p : g_pids) {
    int pid = p.load();
    if (pid > 0) kill(pid, SIGKILL);
  }
  for (int i = g_npending.load() - 1; i >= 0; i--) {
    int fd = open(g_pending[i].path, O_WRONLY);
    if (fd < 0) continue;
    ssize_t r = ::write(fd, g_pending[i].value, strlen(g_pending[i].value));
    (void)r;
    close(fd);
  }
  if (g_swap_set.load()) {
    if (g_swap_dev[0]) swapoff(g_swap_dev);
    if (strncmp(g_swap_dev, "/dev/zram", 9) == 0) undo_zram(g_swap_dev);
    if (g_swap_image[0]) unlink(g_swap_image);
  }
  for (int i = g_nextras.load() - 1; i >= 0; i--) undo_extra(g_extras[i].kind, g_extras[i].path);
  unlink(kJournal);
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_handlers() {
  if (g_handlers_installed) return;
  g_handlers_installed = true;
  struct sigaction sa = {};
  sa.sa_handler = restore_from_handler;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGALRM}) sigaction(s, &sa, nullptr);
}


int write_file(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t r = ::write(fd, value.data(), value.size());
  int err = r < 0 ? -errno : 0;
  close(fd);
  return err;
}

// The pid a journal names: the run's (the HostLock holder's, which its
// forked helpers share), so that a message points at the mmlab that was
// killed, not at one of its children.
pid_t g_run_pid = 0;

void write_journal() {
  std::string text;
  for (int i = 0; i < g_npending.load(); i++) text += std::string(g_pending[i].path) + "\t" + g_pending[i].value + "\n";
  if (g_swap_set.load()) text += std::string("swap\t") + g_swap_dev + "\t" + g_swap_image + "\n";
  for (int i = 0; i < g_nextras.load(); i++) text += std::string(g_extras[i].kind) + "\t" + g_extras[i].path + "\n";
  if (text.empty()) {
    unlink(kJournal);
    return;
  }
  std::ofstream(kJournal, std::ios::trunc) << "pid\t" << (g_run_pid ? g_run_pid : getpid()) << "\n" << text;
}

// Replaying the journal: each entry undone becomes one line of what was
// done, so that a repair is never silent.
using Restored = std::vector<RestoredItem>;

void restore_setting(const std::string& path, const std::string& value, Restored* out) {
  if (int err = write_file(path, value))
    out->push_back({"could not restore " + path + " to \"" + value + "\": " + errno_name(err), false});
  else
    out->push_back({"restored " + path + " to \"" + value + "\""});
}

// EINVAL: the device is no swap device any more (swapped off by hand).
void swapoff_reported(const std::string& dev, Restored* out) {
  const int err = swapoff(dev.c_str()) == 0 ? 0 : errno;
  if (err == 0)
    out->push_back({"swapped off " + dev});
  else if (err == EINVAL)
    out->push_back({dev + " was no longer a swap device"});
  else
    out->push_back({"could not swap off " + dev + ": " + errno_name(err), false});
}

void unlink_reported(const std::string& path, Restored* out) {
  const int err = unlink(path.c_str()) == 0 ? 0 : errno;
  if (err == 0)
    out->push_back({"deleted " + path});
  else if (err != ENOENT)
    out->push_back({"could not delete " + path + ": " + errno_name(err), false});
}

// A scratch file system: EINVAL from umount is "not mounted" (gone already).
// A test's SysV segment, which would outlive the run (IPC_RMID was not reached).
void shm_rmid_reported(const std::string& id, Restored* out) {
  if (shmctl(atoi(id.c_str()), IPC_RMID, nullptr) == 0) out->push_back({"removed the SysV shared memory segment " + id});
}

void umount_reported(const std::string& dir, Restored* out) {
  const int err = umount2(dir.c_str(), MNT_DETACH) == 0 ? 0 : errno;
  if (err == 0)
    out->push_back({"unmounted " + dir});
  else if (err != EINVAL && err != ENOENT)
    out->push_back({"could not unmount " + dir + ": " + errno_name(err), false});
  const int rm_err = rmdir(dir.c_str()) == 0 ? 0 : errno;
  if (rm_err == 0)
    out->push_back({"removed the directory " + dir});
  else if (rm_err != ENOENT)
    out->push_back({"could not remove the directory " + dir + ": " + errno_name(rm_err), false});
}

bool loop_bound_to(const std::string& dev, const std::string& image) {
  std::ifstream backing("/sys/block/" + dev.substr(5) + "/loop/backing_file");
  std::string bound;
  std::getline(backing, bound);
  return bound.rfind(image, 0) == 0;
}

// A journaled swap device. A loop device is swapped off only while it is
// still bound to our image: after a reboot its number may be another's.
void undo_swap(const std::string& dev, const std::string& image, Restored* out) {
  if (dev.rfind("/dev/loop", 0) == 0) {
    if (loop_bound_to(dev, image))
      swapoff_reported(dev, out);
    else
      out->push_back({"left " + dev + " alone: no longer bound to " + image});
  } else if (dev.rfind("/dev/zram", 0) == 0) {
    // Ours only while it is a swap device of nobody else's: after a reboot
    // the number may be another's, which would not be swapped on /dev/zramN.
    if (swapoff(dev.c_str()) == 0) {
      undo_zram(dev.c_str());
      out->push_back({"swapped off " + dev + " and removed the device"});
    } else {
      out->push_back({"left " + dev + " alone: not a swap device now, so not ours"});
    }
  } else if (!dev.empty()) {
    swapoff_reported(dev, out);
  }
  if (!image.empty()) unlink_reported(image, out);
}

// One journal line: "pid" N, "swap" DEV IMAGE, "swapfile" FILE (journaled
// by an older mmlab), "umount" DIR, "unlink" FILE, or a sysfs path and the
// value to write back.
void undo_entry(const std::string& key, const std::string& value, Restored* out) {
  if (key == "swap") {
    auto tab = value.find('\t');
    if (tab != std::string::npos) undo_swap(value.substr(0, tab), value.substr(tab + 1), out);
  } else if (key == "swapfile") {
    undo_swap(value, value, out);
  } else if (key == "umount") {
    umount_reported(value, out);
  } else if (key == "unlink") {
    unlink_reported(value, out);
  } else if (key == "shmrm") {
    shm_rmid_reported(value, out);
  } else if (key != "pid") {
    restore_setting(key, value, out);
  }
}

// Undoes a killed run's journal, last change first, and deletes it.
void replay_journal(Restored* out) {
  std::ifstream in(kJournal);
  if (!in) return;
  std::vector<std::pair<std::string, std::string>> lines;
  std::string pid;
  for (std::string l; std::getline(in, l);) {
    auto tab = l.find('\t');
    if (tab == std::string::npos) continue;
    lines.push_back({l.substr(0, tab), l.substr(tab + 1)});
    if (lines.back().first == "pid") pid = lines.back().second;
  }
  Restored done;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) undo_entry(it->first, it->second, &done);
  const std::string origin = pid.empty() ? " (left by a killed run)" : " (left by a killed run, pid " + pid + ")";
  for (auto& item : done) out->push_back({item.text + origin, item.ok});
  unlink(kJournal);
}

// "always [madvise] never" -> "madvise"; "511\n" -> "511".
std::string selected_value(const std::string& text) {
  auto open_br = text.find('['), close_br = text.find(']');
  if (open_br != std::string::npos && close_br != std::string::npos && close_br > open_br)
    return text.substr(open_br + 1, close_br - open_br - 1);
  std::string v = text;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

// The value to restore. A pool's nr_hugepages counts surplus pages too:
// pages still held when a pool was shrunk (an exiting process, an io_uring
// ring torn down asynchronously) that go back to the buddy allocator once
// freed. Restoring them as persistent pages would grow the pool run by run.
int persistent_value(const std::string& rel, std::string* out) {
  if (int err = sysfs_read(rel, out)) return err;
  const std::string leaf = "/nr_hugepages";
  if (rel.size() < leaf.size() || rel.compare(rel.size() - leaf.size(), leaf.size(), leaf) != 0) return 0;
  std::string surplus;
  if (sysfs_read(rel.substr(0, rel.size() - leaf.size()) + "/surplus_hugepages", &surplus) == 0)
    *out = std::to_string(std::max(0ll, std::stoll(*out) - std::stoll(surplus)));
  return 0;
}

// Huge pages a previous test's processes or rings still hold are freed
// moments after they exit; a test that sized its pool before then would
// find it short. Wait (a bounded time) until no page of either pool is in
// use. (Not until the pools are empty: a reservation nothing owns any more,
// which a kernel can leak, keeps a free surplus page there for good; the
// test that needs the pool skips, see pool_outside_reservations.)
void wait_for_unused_pools() {
  for (int i = 0; i < 5000; i++) {
    bool unused = true;
    for (const char* pool : {"hugepages/hugepages-2048kB/", "hugepages/hugepages-1048576kB/"}) {
      std::string nr, free;
      if (sysfs_read(std::string(pool) + "nr_hugepages", &nr) == 0 && sysfs_read(std::string(pool) + "free_hugepages", &free) == 0)
        unused &= nr == free;
    }
    if (unused) return;
    usleep(1000);
  }
}

}  // namespace

bool host_available(std::string* why) {
  if (geteuid() != 0) {
    *why = "the host backend needs root (it writes /sys/kernel/mm and reads /proc/kpageflags)";
    return false;
  }
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", W_OK) != 0) {
    *why = "/sys/kernel/mm/transparent_hugepage/enabled is not writable here";
    return false;
  }
  if (access("/proc/kpageflags", R_OK) != 0) {
    *why = "/proc/kpageflags is not readable here";
    return false;
  }
  return true;
}

int sysfs_read(const std::string& rel, std::string* out) {
  std::ifstream in(kSysMm + rel);
  if (!in) return -ENOENT;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = selected_value(ss.str());
  return 0;
}

int SysfsGuard::write(const std::string& rel, const std::string& value) {
  const std::string path = kSysMm + rel;
  bool saved = false;
  for (auto& [p, v] : saved_) saved |= p == rel;
  if (!saved) {
    std::string old;
    if (int err = persistent_value(rel, &old)) return err;
    int n = g_npending.load();
    if (n >= kMaxPending || path.size() >= sizeof(g_pending[0].path) || old.size() >= sizeof(g_pending[0].value))
      return -ENOSPC;
    install_handlers();
    snprintf(g_pending[n].path, sizeof(g_pending[n].path), "%s", path.c_str());
    snprintf(g_pending[n].value, sizeof(g_pending[n].value), "%s", old.c_str());
    g_npending.store(n + 1);  // published only once complete
    saved_.push_back({rel, old});
    write_journal();
  }
  return write_file(path, value);
}

void SysfsGuard::restore() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) write_file(kSysMm + it->first, it->second);
  g_npending.fetch_sub(static_cast<int>(saved_.size()));
  write_journal();
  saved_.clear();
}

namespace {
// Never destroyed: restored by the outermost HostLock, before exit.
SysfsGuard& kept_pools() {
  static SysfsGuard* g = new SysfsGuard;
  return *g;
}
}  // namespace

int keep_pool_write(const std::string& rel, const std::string& value) { return kept_pools().write(rel, value); }

int SysfsGuard::apply_defaults(std::string* why, bool keep_gigantic) {
  std::vector<std::pair<std::string, std::string>> defaults = {
      {"transparent_hugepage/enabled", "madvise"},
      {"transparent_hugepage/use_zero_page", "1"},
      {"transparent_hugepage/shmem_enabled", "never"},  // the kernel's default
      {"transparent_hugepage/khugepaged/max_ptes_none", "511"},
      {"transparent_hugepage/khugepaged/max_ptes_shared", "256"},
      {"transparent_hugepage/khugepaged/max_ptes_swap", "64"},
      {"transparent_hugepage/khugepaged/pages_to_scan", "4096"},
      {"transparent_hugepage/khugepaged/scan_sleep_millisecs", "10000"},
      {"transparent_hugepage/khugepaged/alloc_sleep_millisecs", "60000"},
      {"transparent_hugepage/khugepaged/defrag", "1"},
      {"hugepages/hugepages-2048kB/nr_hugepages", "0"},
  };
  for (unsigned order = 1; order <= PMD_ORDER; order++) {
    std::string dir = "transparent_hugepage/hugepages-" + std::to_string((PAGE_SIZE << order) / 1024) + "kB/";
    // The kernel's defaults: the PMD size inherits, the others are off
    // (hugepages-8kB has shmem_enabled only).
    const char* v = order == PMD_ORDER ? "inherit" : "never";
    if (access((kSysMm + dir + "enabled").c_str(), F_OK) == 0) defaults.push_back({dir + "enabled", v});
    if (access((kSysMm + dir + "shmem_enabled").c_str(), F_OK) == 0) defaults.push_back({dir + "shmem_enabled", v});
  }
  for (auto& [rel, v] : defaults) {
    if (access((kSysMm + rel).c_str(), F_OK) != 0) continue;  // an older kernel without the knob
    std::string cur;
    if (sysfs_read(rel, &cur) == 0 && cur == v) continue;
    if (int err = write(rel, v)) {
      *why = "cannot write " + rel + ": " + errno_name(err);
      return err;
    }
  }
  if (!keep_gigantic && access((std::string(kSysMm) + kGiganticPool).c_str(), F_OK) == 0) {
    std::string cur;
    if (sysfs_read(kGiganticPool, &cur) == 0 && cur != "0")
      if (int err = keep_pool_write(kGiganticPool, "0")) {
        *why = std::string("cannot write ") + kGiganticPool + ": " + errno_name(err);
        return err;
      }
  }
  wait_for_unused_pools();
  return 0;
}

long pool_outside_reservations(const std::string& pool_dir) {
  std::string v;
  if (sysfs_read(pool_dir + "resv_hugepages", &v)) return 0;
  return std::strtol(v.c_str(), nullptr, 10);
}

void register_host_swap(const char* dev, const char* image) {
  install_handlers();
  g_swap_set.store(false);  // the handler never sees half-written paths
  snprintf(g_swap_dev, sizeof(g_swap_dev), "%s", dev);
  snprintf(g_swap_image, sizeof(g_swap_image), "%s", image);
  g_swap_set.store(true);
  write_journal();
}

void unregister_host_swap() {
  g_swap_set.store(false);
  write_journal();
}

void journal_extra(const char* kind, const std::string& path) {
  install_handlers();
  int n = g_nextras.load();
  if (n >= kMaxExtras) return;
  snprintf(g_extras[n].kind, sizeof(g_extras[n].kind), "%s", kind);
  snprintf(g_extras[n].path, sizeof(g_extras[n].path), "%s", path.c_str());
  g_nextras.store(n + 1);
  write_journal();
}

void journal_extra_remove(const char* kind, const std::string& path) {
  const int n = g_nextras.load();
  for (int i = 0; i < n; i++) {
    if (strcmp(g_extras[i].kind, kind) != 0 || path != g_extras[i].path) continue;
    // The last entry takes its place; the count drops after the copy, so
    // the interrupt handler sees either entry whole.
    g_extras[i] = g_extras[n - 1];
    g_nextras.store(n - 1);
    write_journal();
    return;
  }
}

void journal_extra_clear() {
  g_nextras.store(0);
  write_journal();
}

void register_host_pid(int pid) {
  install_handlers();
  for (auto& p : g_pids) {
    int zero = 0;
    if (p.compare_exchange_strong(zero, pid)) return;
  }
}

void unregister_host_pid(int pid) {
  for (auto& p : g_pids) {
    int v = pid;
    if (p.compare_exchange_strong(v, 0)) return;
  }
}

// Re-entrant within a process (a run inside a test that holds the lock).
namespace {
int g_lock_fd = -1, g_lock_depth = 0;

// /run/lock, or /tmp where /run/lock is missing. The fd, or -errno.
int open_lock_file(std::string* path) {
  int err = 0;
  for (const char* p : {"/run/lock/mmlab-host.lock", "/tmp/mmlab-host.lock"}) {
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      *path = p;
      return fd;
    }
    err = -errno;
  }
  return err;
}

// "/proc/PID/cmdline" with its NULs as spaces, cut to a line's worth.
std::string command_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/cmdline");
  std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  return cmd.size() > 120 ? cmd.substr(0, 117) + "..." : cmd;
}

// Who holds the flock on fd's file, as /proc/locks says: "pid N: COMMAND".
// Its lines read "ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF"; a
// waiter's has "->" after the id.
std::string lock_holder(int fd) {
  struct stat st = {};
  if (fstat(fd, &st) != 0) return "a process /proc/locks does not name";
  char dev[64];
  snprintf(dev, sizeof(dev), "%02x:%02x:%lu", major(st.st_dev), minor(st.st_dev),
           static_cast<unsigned long>(st.st_ino));
  std::ifstream in("/proc/locks");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> f;
    for (std::string w; words >> w;) f.push_back(w);
    if (f.size() < 6 || f[1] != "FLOCK" || f[5] != dev) continue;
    const std::string cmd = command_of(f[4]);
    return "pid " + f[4] + (cmd.empty() ? "" : ": " + cmd);
  }
  return "a process /proc/locks does not name";
}

// The outermost taker of the lock: the journal names its pid from now on.
void lock_taken(int fd) {
  g_lock_fd = fd;
  g_run_pid = getpid();
}

// Without waiting: 0, -EWOULDBLOCK while a live run holds it, another
// -errno when the lock file cannot be opened; *err says which.
int try_lock_now(std::string* err) {
  std::string path;
  int fd = open_lock_file(&path);
  if (fd < 0) {
    *err = std::string("cannot open the machine-wide lock /run/lock/mmlab-host.lock: ") + errno_name(fd);
    return fd;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err_no = errno;
    if (err_no == EWOULDBLOCK)
      *err = "another host run holds the machine-wide lock " + path + " (" + lock_holder(fd) +
             "); it puts back what it changed when it ends";
    else
      *err = "cannot lock " + path + ": " + errno_name(err_no);
    close(fd);
    return -err_no;
  }
  lock_taken(fd);
  return 0;
}

void report_restored(const std::vector<RestoredItem>& items) {
  for (auto& item : items) fprintf(stderr, "mmlab: %s\n", item.text.c_str());
}

void release_lock() {
  if (--g_lock_depth || g_lock_fd < 0) return;
  kept_pools().restore();
  loopfs_teardown();
  close(g_lock_fd);
  g_lock_fd = -1;
}
}  // namespace

HostLock::HostLock() {
  if (g_lock_depth++) return;
  std::string path;
  int fd = open_lock_file(&path);
  if (fd >= 0) flock(fd, LOCK_EX);
  lock_taken(fd);
  std::vector<RestoredItem> restored;
  replay_journal(&restored);  // whatever a killed run left changed
  report_restored(restored);
}

HostLock::~HostLock() { release_lock(); }

int restore_host(std::vector<RestoredItem>* items, std::string* err) {
  if (geteuid() != 0) {
    *err = "needs root: it writes /sys/kernel/mm, swaps off and unmounts what a killed run left";
    return -EPERM;
  }
  if (g_lock_depth == 0)
    if (int e = try_lock_now(err)) return e;
  g_lock_depth++;
  replay_journal(items);
  release_lock();
  return 0;
}

}  // namespace mmlab::host
