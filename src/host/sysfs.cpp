// Host sysfs settings with restore-on-interrupt. The interrupt path can only
// use async-signal-safe calls, so what it needs (paths, saved values, pids)
// lives in fixed arrays filled before any setting is changed.
#include "host/sysfs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/swap.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "host/loopfs.h"
#include "host/host_swap.h"
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
  char kind[8];  // "umount" (then rmdir) or "unlink"
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


// A journaled swap device. A loop device is swapped off only while it is
// still bound to our image: after a reboot its number may be another's.
void undo_swap(const std::string& dev, const std::string& image) {
  if (dev.rfind("/dev/loop", 0) == 0) {
    std::ifstream backing("/sys/block/" + dev.substr(5) + "/loop/backing_file");
    std::string bound;
    std::getline(backing, bound);
    if (bound.rfind(image, 0) == 0) swapoff(dev.c_str());
  } else if (dev.rfind("/dev/zram", 0) == 0) {
    // Ours only while it is a swap device of nobody else's: after a reboot
    // the number may be another's, which would not be swapped on /dev/zramN.
    if (swapoff(dev.c_str()) == 0) undo_zram(dev.c_str());
  } else if (!dev.empty()) {
    swapoff(dev.c_str());
  }
  if (!image.empty()) unlink(image.c_str());
}

void write_journal() {
  std::string text;
  for (int i = 0; i < g_npending.load(); i++) text += std::string(g_pending[i].path) + "\t" + g_pending[i].value + "\n";
  if (g_swap_set.load()) text += std::string("swap\t") + g_swap_dev + "\t" + g_swap_image + "\n";
  for (int i = 0; i < g_nextras.load(); i++) text += std::string(g_extras[i].kind) + "\t" + g_extras[i].path + "\n";
  if (text.empty()) {
    unlink(kJournal);
    return;
  }
  std::ofstream(kJournal, std::ios::trunc) << text;
}

void replay_journal() {
  std::ifstream in(kJournal);
  if (!in) return;
  std::vector<std::pair<std::string, std::string>> lines;
  for (std::string l; std::getline(in, l);) {
    auto tab = l.find('\t');
    if (tab != std::string::npos) lines.push_back({l.substr(0, tab), l.substr(tab + 1)});
  }
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->first == "swap") {
      auto tab = it->second.find('\t');
      if (tab != std::string::npos) undo_swap(it->second.substr(0, tab), it->second.substr(tab + 1));
      continue;
    }
    if (it->first == "swapfile") {  // journaled by an older mmlab
      undo_swap(it->second, it->second);
      continue;
    }
    if (it->first == "umount" || it->first == "unlink") {
      undo_extra(it->first.c_str(), it->second.c_str());
      continue;
    }
    int fd = open(it->first.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t r = ::write(fd, it->second.data(), it->second.size());
    (void)r;
    close(fd);
  }
  unlink(kJournal);
}

int write_file(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t r = ::write(fd, value.data(), value.size());
  int err = r < 0 ? -errno : 0;
  close(fd);
  return err;
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
      {"transparent_hugepage/shmem_enabled", "never"},  // the model has no shmem THP
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
    if (access((kSysMm + dir + "enabled").c_str(), F_OK) != 0) continue;
    defaults.push_back({dir + "enabled", order == PMD_ORDER ? "inherit" : "never"});
    if (access((kSysMm + dir + "shmem_enabled").c_str(), F_OK) == 0) defaults.push_back({dir + "shmem_enabled", "never"});
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
}  // namespace

HostLock::HostLock() {
  if (g_lock_depth++) return;
  g_lock_fd = open("/run/lock/mmlab-host.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (g_lock_fd < 0) g_lock_fd = open("/tmp/mmlab-host.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (g_lock_fd >= 0) flock(g_lock_fd, LOCK_EX);
  replay_journal();  // whatever a killed run left changed
}

HostLock::~HostLock() {
  if (--g_lock_depth || g_lock_fd < 0) return;
  kept_pools().restore();
  loopfs_teardown();
  close(g_lock_fd);
  g_lock_fd = -1;
}

}  // namespace mmlab::host
