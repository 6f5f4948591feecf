#include "host/host_swap.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/swap.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fmt/format.h"
#include "mmlab/types.h"

namespace mmlab::host {
namespace {

// Ours before any swap device the host has: the highest priority there is.
constexpr int kSwapFlags = SWAP_FLAG_PREFER | SWAP_FLAG_PRIO_MASK;

// The version-1 swap header swapon reads from the first page: the version
// and the last usable page at byte 1024, the magic in the page's last bytes.
void write_swap_header(uint8_t* page, uint64_t npages) {
  uint32_t version = 1, last_page = static_cast<uint32_t>(npages - 1);
  memcpy(page + 1024, &version, 4);
  memcpy(page + 1028, &last_page, 4);
  memcpy(page + PAGE_SIZE - 10, "SWAPSPACE2", 10);
}

// The header, and with `whole` every byte of the rest written: swapon
// refuses a swap file with holes, a block device does not care.
int write_swap_area(int fd, uint64_t size, bool whole) {
  std::vector<uint8_t> buf(whole ? 1 << 20 : PAGE_SIZE, 0);
  write_swap_header(buf.data(), size >> PAGE_SHIFT);
  for (uint64_t off = 0; off < (whole ? size : PAGE_SIZE);) {
    size_t n = std::min<uint64_t>(buf.size(), size - off);
    ssize_t w = pwrite(fd, buf.data(), n, static_cast<off_t>(off));
    if (w < 0) return -errno;
    if (off == 0) memset(buf.data(), 0, PAGE_SIZE);
    off += static_cast<uint64_t>(w);
  }
  return fsync(fd) ? -errno : 0;
}

// A free loop device bound to `image_fd`, clearing itself when its last
// opener closes it. Returns the device's descriptor (keep it open until
// swapon holds the device) and *dev, or -errno.
int attach_loop(int image_fd, const std::string& image, std::string* dev) {
  int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0) return -errno;
  int err = -EBUSY;
  for (int attempt = 0; attempt < 8 && err == -EBUSY; attempt++) {  // another process may take the free one first
    int n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0) {
      err = -errno;
      break;
    }
    *dev = fmt::format("/dev/loop{}", n);
    int fd = open(dev->c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      err = -errno;
      break;
    }
    loop_config cfg = {};
    cfg.fd = static_cast<uint32_t>(image_fd);
    cfg.block_size = PAGE_SIZE;
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;  // direct I/O: swap is not cached twice
    snprintf(reinterpret_cast<char*>(cfg.info.lo_file_name), LO_NAME_SIZE, "%s", image.c_str());
    int r = ioctl(fd, LOOP_CONFIGURE, &cfg);
    if (r < 0 && errno == EINVAL) {  // a backing file system without direct I/O
      cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
      r = ioctl(fd, LOOP_CONFIGURE, &cfg);
    }
    if (r == 0) {
      close(ctl);
      return fd;
    }
    err = -errno;
    close(fd);
  }
  close(ctl);
  return err;
}

}  // namespace

int HostSwap::add(uint64_t size, HostSwapKind kind, std::string* why) {
  if (on_) {
    *why = "a second swap device is not supported by the host backend";
    return -EBUSY;
  }
  if (size < 2 * PAGE_SIZE) {
    *why = "a swap device needs a header page and at least one slot";
    return -EINVAL;
  }
  int err = kind == HostSwapKind::kBlkdev ? add_blkdev(size, why)
            : kind == HostSwapKind::kFile ? add_file(size, why)
                                           : add_zram(size, why);
  if (err) remove();
  return err;
}

int HostSwap::add_file(uint64_t size, std::string* why) {
  dev_ = image_ = fmt::format("/var/tmp/mmlab-swap.{}", getpid());
  int fd = open(dev_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = -errno;
    *why = "cannot create " + dev_;
    dev_.clear();
    image_.clear();
    return err;
  }
  register_host_swap(dev_.c_str(), image_.c_str());
  int err = write_swap_area(fd, size, /*whole=*/true);
  close(fd);
  if (!err && swapon(dev_.c_str(), kSwapFlags) != 0) err = -errno;
  if (err) {
    *why = fmt::format("swapon {}: {}", dev_, errno_name(err));
    return err;
  }
  on_ = true;
  return 0;
}

int HostSwap::add_blkdev(uint64_t size, std::string* why) {
  image_ = fmt::format("/var/tmp/mmlab-swap.{}.img", getpid());
  int fd = open(image_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = -errno;
    *why = "cannot create " + image_;
    image_.clear();
    return err;
  }
  // Journaled before the device exists: a run killed from here on leaves
  // an image to delete, and the loop device clears itself as our
  // descriptor closes.
  register_host_swap("", image_.c_str());
  int err = ftruncate(fd, static_cast<off_t>(size)) ? -errno : write_swap_area(fd, size, /*whole=*/false);
  if (err) {
    close(fd);
    *why = fmt::format("cannot write the swap image {}: {}", image_, errno_name(err));
    return err;
  }
  int loop_fd = attach_loop(fd, image_, &dev_);
  close(fd);
  if (loop_fd < 0) {
    *why = fmt::format("cannot set up a loop device over {}: {}", image_, errno_name(loop_fd));
    dev_.clear();
    return loop_fd;
  }
  register_host_swap(dev_.c_str(), image_.c_str());
  if (swapon(dev_.c_str(), kSwapFlags) != 0) err = -errno;
  close(loop_fd);  // swapon holds the device now; without it, this clears the device
  if (err) {
    *why = fmt::format("swapon {}: {}", dev_, errno_name(err));
    return err;
  }
  on_ = true;
  return 0;
}

namespace {

constexpr const char* kZramControl = "/sys/class/zram-control";

// write(2) of a short text to a sysfs file, async-signal-safe; 0 or -errno.
int write_text(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t w = write(fd, text, strlen(text));
  int err = w < 0 ? -errno : 0;
  close(fd);
  return err;
}

}  // namespace

bool zram_available() { return access((std::string(kZramControl) + "/hot_add").c_str(), R_OK) == 0; }

void undo_zram(const char* dev) {
  // /dev/zramN: the device number follows the prefix.
  const char* num = dev + strlen("/dev/zram");
  char path[96];
  snprintf(path, sizeof(path), "/sys/block/zram%s/reset", num);
  (void)write_text(path, "1");
  snprintf(path, sizeof(path), "%s/hot_remove", kZramControl);
  (void)write_text(path, num);
}

// A zram device of its own: hot_add gives its number; a disk size, the swap
// header, swapon. zram0 and the others the host has stay untouched.
int HostSwap::add_zram(uint64_t size, std::string* why) {
  int fd = open((std::string(kZramControl) + "/hot_add").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = -errno;
    *why = "the kernel cannot hot-add zram devices (/sys/class/zram-control)";
    return err;
  }
  char buf[32] = {};
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  int err = n <= 0 ? -EIO : 0;
  close(fd);
  if (err) {
    *why = "zram hot_add gave no device number";
    return err;
  }
  const int num = atoi(buf);
  dev_ = fmt::format("/dev/zram{}", num);
  register_host_swap(dev_.c_str(), "");
  err = write_text(fmt::format("/sys/block/zram{}/disksize", num).c_str(), std::to_string(size).c_str());
  if (!err) {
    int dfd = open(dev_.c_str(), O_RDWR | O_CLOEXEC);
    err = dfd < 0 ? -errno : write_swap_area(dfd, size, /*whole=*/false);
    if (dfd >= 0) close(dfd);
  }
  if (!err && swapon(dev_.c_str(), kSwapFlags) != 0) err = -errno;
  if (err) {
    *why = fmt::format("zram swap on {}: {}", dev_, errno_name(err));
    return err;
  }
  on_ = true;
  return 0;
}

void HostSwap::remove() {
  if (dev_.empty() && image_.empty()) return;
  if (on_) swapoff(dev_.c_str());
  if (dev_.rfind("/dev/zram", 0) == 0) undo_zram(dev_.c_str());
  if (!image_.empty()) unlink(image_.c_str());
  unregister_host_swap();
  on_ = false;
  dev_.clear();
  image_.clear();
}

}  // namespace mmlab::host
