#include "host/host_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

#include "host/loopfs.h"

namespace mmlab::host {
namespace {

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

long fs_magic(const std::string& fs_class) {
  if (fs_class == "ext4") return EXT4_SUPER_MAGIC;
  if (fs_class == "xfs") return XFS_SUPER_MAGIC;
  if (fs_class == "btrfs") return BTRFS_SUPER_MAGIC;
  return 0;
}

// A writable directory on a file system of that class: /var/tmp if it is
// one, else the first read-write mount of that type.
std::string dir_on(const std::string& fs_class) {
  struct statfs sf;
  if (statfs("/var/tmp", &sf) == 0 && sf.f_type == fs_magic(fs_class)) return "/var/tmp";
  std::ifstream mounts("/proc/mounts");
  for (std::string l; std::getline(mounts, l);) {
    std::istringstream ls(l);
    std::string dev, dir, type, opts;
    ls >> dev >> dir >> type >> opts;
    if (type == fs_class && (opts == "rw" || opts.rfind("rw,", 0) == 0) && access(dir.c_str(), W_OK) == 0) return dir;
  }
  return "";  // the caller may make one (loopfs.h)
}

int fill_zeros(int fd, uint64_t size) {
  std::vector<char> zeros(1 << 20, 0);
  for (uint64_t off = 0; off < size;) {
    size_t n = std::min<uint64_t>(zeros.size(), size - off);
    ssize_t w = pwrite(fd, zeros.data(), n, static_cast<off_t>(off));
    if (w < 0) return -errno;
    off += static_cast<uint64_t>(w);
  }
  return fsync(fd) ? -errno : 0;
}

int memfd(uint64_t size, unsigned hugetlb_shift, const std::string& name) {
  unsigned flags = MFD_CLOEXEC;
  if (hugetlb_shift) flags |= MFD_HUGETLB | (hugetlb_shift << MAP_HUGE_SHIFT);  // MFD_HUGE_* use the MAP_HUGE_* encoding
  int fd = memfd_create(name.c_str(), flags);
  if (fd < 0) return -errno;
  int err = ftruncate(fd, static_cast<off_t>(size)) ? -errno : 0;
  // hugetlbfs's fallocate stops at a pending signal (a probe process's
  // SIGCHLD, say) with EINTR and keeps what it allocated: go on from there.
  for (int tries = 0; !err && size; tries++) {
    if (!fallocate(fd, 0, 0, static_cast<off_t>(size))) break;
    err = errno == EINTR && tries < 100 ? 0 : -errno;
  }
  if (err) {
    close(fd);
    return err;
  }
  return fd;
}

}  // namespace

int host_create_tmpfs_file(uint64_t size, const std::string& huge, bool noswap, const std::string& name,
                           std::string* why) {
  const std::string dir = tmpfs_dir(huge, noswap, why);
  if (dir.empty()) return kNoSuchFs;
  static unsigned seq = 0;
  const std::string path = dir + "/" + name + "." + std::to_string(seq++);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  int err = ftruncate(fd, static_cast<off_t>(size)) ? -errno : 0;
  if (!err && size && fallocate(fd, 0, 0, static_cast<off_t>(size))) err = -errno;
  if (err) {
    close(fd);
    unlink(path.c_str());
    return err;
  }
  return fd;
}

int host_create_file(uint64_t size, const std::string& fs_class, unsigned hugetlb_shift, const std::string& name,
                     std::string* why, bool read_only, bool uncached) {
  if (hugetlb_shift || fs_class.empty() || fs_class == "shmem" || fs_class == "hugetlbfs")
    return memfd(size, hugetlb_shift ? hugetlb_shift : fs_class == "hugetlbfs" ? 21 : 0, name);
  std::string dir = dir_on(fs_class);
  if (dir.empty()) dir = loopfs_dir(fs_class, why);
  if (dir.empty()) return kNoSuchFs;
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);  // gone when the last reference closes
  if (fd < 0) return -errno;
  if (int err = fill_zeros(fd, size)) {
    close(fd);
    return err;
  }
  if (int e = uncached ? posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) : 0) {  // returns the error number
    close(fd);
    return -e;
  }
  if (read_only) {
    // Written and synced: open it again O_RDONLY and close the writer, so
    // nobody has the inode open for write (i_writecount 0).
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    int ro = open(self.c_str(), O_RDONLY | O_CLOEXEC);
    int err = ro < 0 ? -errno : 0;
    close(fd);
    return ro < 0 ? err : ro;
  }
  return fd;
}

}  // namespace mmlab::host
