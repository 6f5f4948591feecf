// read_input_file(): regular files only, read up to a bound (include/mmlab/input_file.h).
#include "mmlab/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"

namespace mmlab {
namespace {

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a fifo";
  if (S_ISSOCK(m)) return "a socket";
  return "not a file";
}

std::string bytes_text(uint64_t n) { return n % (1u << 20) == 0 ? fmt::format("{} MiB", n >> 20) : fmt::format("{} bytes", n); }

}  // namespace

int read_input_file(const std::string& path, uint64_t max_bytes, std::string* out, std::string* err) {
  // O_NONBLOCK: opening a fifo must not wait for a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    *err = fmt::format("cannot read the file ({})", std::strerror(e));
    return -e;
  }
  struct stat st {};
  int ret = 0;
  if (::fstat(fd, &st) < 0) {
    ret = -errno;
    *err = fmt::format("cannot read the file ({})", std::strerror(-ret));
  } else if (!S_ISREG(st.st_mode)) {
    ret = -EINVAL;
    *err = fmt::format("not a regular file ({})", file_kind(st.st_mode));
  }
  out->clear();
  char buf[1 << 16];
  // The size can change while it is read: the bound is on what is read.
  while (ret == 0) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ret = -errno;
      *err = fmt::format("cannot read the file ({})", std::strerror(-ret));
    } else if (n == 0) {
      break;
    } else if (out->size() + static_cast<uint64_t>(n) > max_bytes) {
      ret = -EFBIG;
      *err = "larger than " + bytes_text(max_bytes);
    } else {
      out->append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (ret) out->clear();
  return ret;
}

}  // namespace mmlab
