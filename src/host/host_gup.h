// GUP on the host, through the system calls that do it in the kernel:
// vmsplice() into a pipe is get_user_pages_fast (`get,fast`), io_uring
// fixed-buffer registration is pin_user_pages_fast(FOLL_WRITE |
// FOLL_LONGTERM) (`pin,fast,write,longterm`). The pipe and the ring belong
// to the runner, so what a handle holds outlives the process that took it,
// as a model GupPages does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "host/agent.h"

namespace mmlab::host {

class HostGupHandle {
 public:
  virtual ~HostGupHandle() = default;  // releases what it holds (closes the pipe / unregisters)
  long ret = 0;                        // pages taken, or -errno
  // Through the pages held, as a device would; offsets count from the first
  // page. 0 or -errno (-EOPNOTSUPP: a vmsplice handle cannot be written).
  virtual int read(uint64_t off, void* buf, uint64_t len) = 0;
  virtual int write(uint64_t off, const void* buf, uint64_t len) = 0;
  // `H read OFF SIZE BYTE`: 0 or -errno, and in *bad the offset of the first
  // byte read that is not `byte` (that byte in *found), or -1. Both move the
  // range a piece at a time through a small buffer: a 1 GiB buffer (and
  // memfd) of fresh host memory cost more than the device access itself.
  virtual int read_expect(uint64_t off, uint64_t len, uint8_t byte, int64_t* bad, uint8_t* found);
  int fill(uint64_t off, uint64_t len, uint8_t byte);  // `H write OFF SIZE BYTE`
};

// vmsplice(addr, npages pages) into a new pipe, enlarged with F_SETPIPE_SZ
// when more than 16 pages are asked for. read() copies with tee() so the
// pipe keeps its pages (a handle can be read more than once).
std::unique_ptr<HostGupHandle> host_gup_vmsplice(Agent& a, uint64_t addr, long npages);
// A ring of our own with the range registered as fixed buffer 0 by the
// process; read()/write() are IORING_OP_WRITE_FIXED/READ_FIXED against a
// memfd of ours.
std::unique_ptr<HostGupHandle> host_gup_iouring(Agent& a, uint64_t addr, long npages);
// Whether this kernel lets us make a ring (io_uring may be compiled out or
// disabled by kernel.io_uring_disabled); otherwise false and why.
bool host_io_uring_available(std::string* why);

}  // namespace mmlab::host
