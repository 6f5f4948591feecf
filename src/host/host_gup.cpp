// GUP on the host: the handles hold, in the runner, what the process's
// system call took. A vmsplice pipe holds page references (GUP, not a pin);
// an io_uring ring holds the FOLL_LONGTERM pins of its fixed buffer. Both
// outlive the process, so a scenario can exit or fork it and still look
// through the handle at the pages it got.
#include "host/host_gup.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace mmlab::host {
namespace {

constexpr uint64_t kPage = 4096;
constexpr long kDefaultPipePages = 16;  // a new pipe's capacity, in pages
constexpr uint64_t kPiece = 1ull << 20;  // what read_expect and fill move at a time

class VmspliceHandle final : public HostGupHandle {
 public:
  VmspliceHandle(Agent& a, uint64_t addr, long npages) {
    if (npages < 0) {
      ret = -EINVAL;
      return;
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0) {
      ret = -errno;
      return;
    }
    rfd_ = fds[0];
    wfd_ = fds[1];
    // One vmsplice call as the selftests make it: the pipe must have a slot
    // per page or the transfer stops short. Root may exceed pipe-max-size.
    if (npages > kDefaultPipePages && ::fcntl(wfd_, F_SETPIPE_SZ, static_cast<int>(npages * kPage)) < 0) {
      ret = -errno;
      return;
    }
    long r = a.vmsplice(wfd_, addr, static_cast<uint64_t>(npages) * kPage);
    ret = r < 0 ? r : r / static_cast<long>(kPage);
  }

  ~VmspliceHandle() override {
    if (rfd_ >= 0) ::close(rfd_);
    if (wfd_ >= 0) ::close(wfd_);
  }

  // tee() into a scratch pipe duplicates the buffers without consuming them;
  // reading the scratch pipe copies the pages' current contents.
  int read(uint64_t off, void* buf, uint64_t len) override {
    std::vector<uint8_t> data;
    if (int err = contents(&data)) return err;
    if (off > data.size() || len > data.size() - off) return -EFAULT;  // beyond what was taken
    std::memcpy(buf, data.data() + off, len);
    return 0;
  }

  // One copy of the pipe: each read() copies all of it.
  int read_expect(uint64_t off, uint64_t len, uint8_t byte, int64_t* bad, uint8_t* found) override {
    std::vector<uint8_t> data;
    if (int err = contents(&data)) return err;
    if (off > data.size() || len > data.size() - off) return -EFAULT;
    *bad = find_not(data.data() + off, len, byte);
    if (*bad >= 0) *found = data[off + static_cast<uint64_t>(*bad)];
    return 0;
  }

  int write(uint64_t, const void*, uint64_t) override { return -EOPNOTSUPP; }

 private:
  // Everything in our pipe.
  int contents(std::vector<uint8_t>* data) {
    if (rfd_ < 0) return -EBADF;
    int size = ::fcntl(rfd_, F_GETPIPE_SZ);
    if (size < 0) return -errno;
    int t[2];
    if (::pipe2(t, O_CLOEXEC) < 0) return -errno;
    int err = copy_out(t, size, data);
    ::close(t[0]);
    ::close(t[1]);
    return err < 0 ? err : 0;
  }

  // Everything in our pipe, through the scratch pipe t (of the same size).
  int copy_out(const int t[2], int size, std::vector<uint8_t>* data) {
    if (size > kDefaultPipePages * static_cast<int>(kPage) && ::fcntl(t[1], F_SETPIPE_SZ, size) < 0) return -errno;
    // Nonblocking: an empty pipe (nothing was taken) is 0 bytes, not a wait
    // for a writer. One call only: a second tee would start over.
    ssize_t n = ::tee(rfd_, t[1], static_cast<size_t>(size), SPLICE_F_NONBLOCK);
    if (n < 0 && errno != EAGAIN) return -errno;
    data->resize(n < 0 ? 0 : static_cast<size_t>(n));
    for (size_t got = 0; got < data->size();) {
      ssize_t r = ::read(t[0], data->data() + got, data->size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return r < 0 ? -errno : -EIO;
      got += static_cast<size_t>(r);
    }
    return 0;
  }

  int rfd_ = -1;
  int wfd_ = -1;
};

class IouringHandle final : public HostGupHandle {
 public:
  IouringHandle(Agent& a, uint64_t addr, long npages) : addr_(addr) {
    if (npages < 0) {
      ret = -EINVAL;
      return;
    }
    int r = io_uring_queue_init(8, &ring_, 0);
    if (r < 0) {
      ret = r;
      return;
    }
    have_ring_ = true;
    memfd_ = ::memfd_create("mmlab-iouring", MFD_CLOEXEC);
    if (memfd_ < 0) {
      ret = -errno;
      return;
    }
    // The process registers the range on our ring: the pins are taken in its
    // mm (current->mm) and then held by the ring, which is ours.
    long rr = a.io_uring_register_buffer(ring_.ring_fd, addr, static_cast<uint64_t>(npages) * kPage);
    registered_ = rr == 0;
    ret = rr < 0 ? rr : npages;
  }

  ~IouringHandle() override {
    if (registered_) io_uring_unregister_buffers(&ring_);  // unpins; errors change nothing here
    if (have_ring_) io_uring_queue_exit(&ring_);
    if (memfd_ >= 0) ::close(memfd_);
  }

  // The device writes memory: our bytes go into the memfd, and READ_FIXED
  // reads them from there into the pinned pages.
  int write(uint64_t off, const void* buf, uint64_t len) override {
    if (len > UINT_MAX) return -EINVAL;
    if (!have_ring_ || memfd_ < 0) return -EBADF;
    int r = pwrite_all(buf, len);
    if (r < 0) return r;
    return fixed_io(IORING_OP_READ_FIXED, off, static_cast<unsigned>(len));
  }

  // The device reads memory: WRITE_FIXED from the pinned pages into the
  // memfd, then we read the memfd.
  int read(uint64_t off, void* buf, uint64_t len) override {
    if (len > UINT_MAX) return -EINVAL;
    if (!have_ring_ || memfd_ < 0) return -EBADF;
    int r = fixed_io(IORING_OP_WRITE_FIXED, off, static_cast<unsigned>(len));
    if (r < 0) return r;
    ssize_t n = ::pread(memfd_, buf, len, 0);
    if (n < 0) return -errno;
    return static_cast<uint64_t>(n) == len ? 0 : -EIO;
  }

 private:
  int pwrite_all(const void* buf, uint64_t len) {
    const auto* p = static_cast<const uint8_t*>(buf);
    for (uint64_t done = 0; done < len;) {
      ssize_t n = ::pwrite(memfd_, p + done, len - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? -errno : -EIO;
      done += static_cast<uint64_t>(n);
    }
    return 0;
  }

  // One fixed-buffer request between buffer 0 at [addr_ + off, +len) and the
  // memfd at offset 0. The buffer is addressed by the process's virtual
  // addresses but resolved to the pinned pages, never through an mm.
  int fixed_io(int opcode, uint64_t off, unsigned len) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) return -EBUSY;
    auto* at = reinterpret_cast<void*>(addr_ + off);
    if (opcode == IORING_OP_READ_FIXED) io_uring_prep_read_fixed(sqe, memfd_, at, len, 0, 0);
    else io_uring_prep_write_fixed(sqe, memfd_, at, len, 0, 0);
    int r = io_uring_submit(&ring_);
    if (r < 0) return r;
    io_uring_cqe* cqe = nullptr;
    do {
      r = io_uring_wait_cqe(&ring_, &cqe);
    } while (r == -EINTR);
    if (r < 0) return r;
    int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (res < 0) return res;
    return static_cast<unsigned>(res) == len ? 0 : -EIO;
  }

  io_uring ring_{};
  bool have_ring_ = false;
  bool registered_ = false;
  int memfd_ = -1;
  uint64_t addr_;
};

}  // namespace

int HostGupHandle::read_expect(uint64_t off, uint64_t len, uint8_t byte, int64_t* bad, uint8_t* found) {
  std::vector<uint8_t> piece(std::min(len, kPiece));
  *bad = -1;
  for (uint64_t done = 0; done < len;) {
    const uint64_t n = std::min(len - done, kPiece);
    if (int err = read(off + done, piece.data(), n)) return err;
    const int64_t at = *bad < 0 ? find_not(piece.data(), n, byte) : -1;
    if (at >= 0) {
      *bad = static_cast<int64_t>(done) + at;
      *found = piece[static_cast<uint64_t>(at)];
    }
    done += n;
  }
  return 0;
}

int HostGupHandle::fill(uint64_t off, uint64_t len, uint8_t byte) {
  const std::vector<uint8_t> piece(std::min(len, kPiece), byte);
  for (uint64_t done = 0; done < len;) {
    const uint64_t n = std::min(len - done, kPiece);
    if (int err = write(off + done, piece.data(), n)) return err;
    done += n;
  }
  return 0;
}

std::unique_ptr<HostGupHandle> host_gup_vmsplice(Agent& a, uint64_t addr, long npages) {
  return std::make_unique<VmspliceHandle>(a, addr, npages);
}

std::unique_ptr<HostGupHandle> host_gup_iouring(Agent& a, uint64_t addr, long npages) {
  return std::make_unique<IouringHandle>(a, addr, npages);
}

bool host_io_uring_available(std::string* why) {
  io_uring ring;
  int r = io_uring_queue_init(1, &ring, 0);
  if (r < 0) {
    *why = std::string("io_uring is not available on this kernel: ") + strerror(-r);
    return false;
  }
  io_uring_queue_exit(&ring);
  return true;
}

}  // namespace mmlab::host
