#include "host/swapfile.h"

#include <fcntl.h>
#include <sys/swap.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fmt/format.h"
#include "mmlab/types.h"

namespace mmlab::host {
namespace {

// The version-1 swap header swapon reads from the first page: the version
// and the last usable page at byte 1024, the magic in the page's last bytes.
void write_swap_header(uint8_t* page, uint64_t npages) {
  uint32_t version = 1, last_page = static_cast<uint32_t>(npages - 1);
  memcpy(page + 1024, &version, 4);
  memcpy(page + 1028, &last_page, 4);
  memcpy(page + PAGE_SIZE - 10, "SWAPSPACE2", 10);
}

int write_swap_file(int fd, uint64_t size) {
  std::vector<uint8_t> buf(1 << 20, 0);
  write_swap_header(buf.data(), size >> PAGE_SHIFT);
  for (uint64_t off = 0; off < size;) {
    size_t n = std::min<uint64_t>(buf.size(), size - off);
    ssize_t w = pwrite(fd, buf.data(), n, static_cast<off_t>(off));
    if (w < 0) return -errno;
    if (off == 0) memset(buf.data(), 0, PAGE_SIZE);
    off += static_cast<uint64_t>(w);
  }
  return fsync(fd) ? -errno : 0;
}

}  // namespace

int HostSwap::add(uint64_t size, std::string* why) {
  if (on_) {
    *why = "a second swap device is not supported by the host backend";
    return -EBUSY;
  }
  path_ = fmt::format("/var/tmp/mmlab-swap.{}", getpid());
  int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "cannot create " + path_;
    return -errno;
  }
  int err = write_swap_file(fd, size);
  close(fd);
  register_host_swapfile(path_.c_str());
  if (!err && swapon(path_.c_str(), 0) != 0) err = -errno;
  if (err) {
    *why = fmt::format("swapon {}: {}", path_, errno_name(err));
    remove();
    return err;
  }
  on_ = true;
  return 0;
}

void HostSwap::remove() {
  if (path_.empty()) return;
  if (on_) swapoff(path_.c_str());
  unlink(path_.c_str());
  unregister_host_swapfile();
  on_ = false;
  path_.clear();
}

}  // namespace mmlab::host
