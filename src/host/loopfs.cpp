#include "host/loopfs.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "fmt/format.h"
#include "host/sysfs.h"

extern char** environ;

namespace mmlab::host {
namespace {

struct LoopFs {
  std::string image, dir;
};
std::map<std::string, LoopFs> g_made;  // by class

bool kernel_has(const std::string& fs_class) {
  std::ifstream in("/proc/filesystems");
  for (std::string l; std::getline(in, l);)
    if (l.size() >= fs_class.size() && l.compare(l.size() - fs_class.size(), fs_class.size(), fs_class) == 0 &&
        (l.size() == fs_class.size() || l[l.size() - fs_class.size() - 1] == '\t'))
      return true;
  return false;
}

int run_quietly(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int err = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) return -err;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

std::string make_loopfs(const std::string& fs_class, std::string* why) {
  if (!kernel_has(fs_class)) {
    *why = "the host kernel has no " + fs_class;
    return "";
  }
  LoopFs fs;
  fs.image = fmt::format("/var/tmp/mmlab-{}.{}.img", fs_class, getpid());
  fs.dir = fmt::format("/var/tmp/mmlab-{}.{}", fs_class, getpid());
  int fd = open(fs.image.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ftruncate(fd, 512ll << 20) == 0;  // sparse; xfs wants at least 300 MiB
  if (fd >= 0) close(fd);
  journal_extra("unlink", fs.image);
  if (!ok || run_quietly({"mkfs." + fs_class, "-q", "-f", fs.image}) != 0) {
    *why = "cannot make a " + fs_class + " file system (is mkfs." + fs_class + " installed?)";
    unlink(fs.image.c_str());
    return "";
  }
  mkdir(fs.dir.c_str(), 0700);
  journal_extra("umount", fs.dir);
  // mount(8) with -o loop sets the loop device up to clear itself on unmount.
  if (run_quietly({"mount", "-o", "loop", "-t", fs_class, fs.image, fs.dir}) != 0) {
    *why = "cannot mount a " + fs_class + " image on a loop device";
    rmdir(fs.dir.c_str());
    unlink(fs.image.c_str());
    return "";
  }
  g_made[fs_class] = fs;
  return fs.dir;
}

}  // namespace

std::string tmpfs_dir(const std::string& huge, bool noswap, std::string* why) {
  const std::string key = "tmpfs-huge=" + huge + (noswap ? ",noswap" : "");
  if (auto it = g_made.find(key); it != g_made.end()) return it->second.dir;
  LoopFs fs;  // no image: tmpfs is memory
  fs.dir = fmt::format("/var/tmp/mmlab-tmpfs-{}{}.{}", huge, noswap ? "-noswap" : "", getpid());
  if (mkdir(fs.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot make " + fs.dir + ": " + std::strerror(errno);
    return "";
  }
  journal_extra("umount", fs.dir);
  // 1G at most: the files of a test are small, and an accident stays bounded.
  const std::string opts = "huge=" + huge + (noswap ? ",noswap" : "") + ",size=1g,mode=0700";
  if (mount("tmpfs", fs.dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
    *why = "cannot mount a tmpfs with " + opts + ": " + std::strerror(errno);
    rmdir(fs.dir.c_str());
    return "";
  }
  g_made[key] = fs;
  return fs.dir;
}

std::string loopfs_dir(const std::string& fs_class, std::string* why) {
  if (auto it = g_made.find(fs_class); it != g_made.end()) return it->second.dir;
  return make_loopfs(fs_class, why);
}

void loopfs_teardown() {
  for (auto& [cls, fs] : g_made) {
    umount2(fs.dir.c_str(), MNT_DETACH);
    rmdir(fs.dir.c_str());
    if (!fs.image.empty()) unlink(fs.image.c_str());
  }
  g_made.clear();
  journal_extra_clear();
}

}  // namespace mmlab::host
