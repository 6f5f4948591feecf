// The host backend's processes: each scenario process is a real process on
// the running kernel, forked from mmlab and driven over a unix socket by a
// small command loop. Its system calls are the real ones; its loads and
// stores are real, and a SIGSEGV/SIGBUS they raise is caught and reported
// rather than killing it (as the model reports the signal and goes on).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace mmlab::host {

namespace wire {  // the command socket's messages, defined in agent.cpp
struct Request;
struct Response;
}  // namespace wire

// The offset of the first byte of [p, p+len) that is not `byte`, or -1
// (memcmp against a page of it): the verifying reads of a process's memory
// and of what a GUP handle holds.
int64_t find_not(const uint8_t* p, uint64_t len, uint8_t byte);

// How a CPU access ended: sig 0 (completed) or SIGSEGV/SIGBUS at fault_addr.
// A read with an expected byte also reports the first byte that differs.
struct HostAccess {
  int sig = 0;
  uint64_t fault_addr = 0;
  int64_t bad = -1;   // offset of the first differing byte, -1 if none
  uint8_t found = 0;  // the byte found there
};

class Agent {
 public:
  // A new process running only the command loop (a fork of this one).
  // nullptr and *err on failure.
  static std::unique_ptr<Agent> spawn(const std::string& name, std::string* err);
  ~Agent();  // a process still running is killed (SIGKILL) and reaped

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const std::string& name() const { return name_; }
  int pid() const { return pid_; }
  bool alive() const { return sock_ >= 0; }

  // System calls made by the process; each returns what the kernel returned
  // (an address or 0, or -errno). -EPIPE if the process is gone, -ETIMEDOUT
  // if it did not answer within kTimeoutMs (it is then killed).
  // mmap: fd is this (the runner's) descriptor or -1; it is passed over.
  long mmap(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off);
  long munmap(uint64_t addr, uint64_t len);
  long mprotect(uint64_t addr, uint64_t len, int prot);
  long mremap(uint64_t old_addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr);
  long madvise(uint64_t addr, uint64_t len, int advice);
  // mlock (flags 0) or mlock2, munlock, mlockall (MCL_* flags), munlockall.
  long mlock2(uint64_t addr, uint64_t len, int flags);
  long munlock(uint64_t addr, uint64_t len);
  long mlockall(int flags);
  long munlockall();
  // mseal(addr, len, 0); -ENOSYS on a kernel without it.
  long mseal(uint64_t addr, uint64_t len);
  // shmat(shmid, NULL, shmflg) (SHM_RDONLY or 0): the address or -errno;
  // shmdt(addr): 0 or -errno. The runner makes and removes the segments.
  long shmat(int shmid, int shmflg);
  long shmdt(uint64_t addr);
  // process_vm_readv(2) of `len` bytes at `remote` in process `pid` into
  // this process's `local`: the bytes copied, or -errno.
  long process_vm_readv(int pid, uint64_t local, uint64_t remote, uint64_t len);
  // sched_setaffinity to that one CPU (a fork inherits it). lru_add_drain()
  // drains only the local CPU's LRU batches: MADV_COLD, MADV_PAGEOUT and
  // MADV_FREE see a folio still in another CPU's batch as not on the LRU
  // and skip it, so a process that uses them runs on one CPU throughout.
  long pin_cpu(int cpu);
  // fork(2) in the process; the child runs the command loop too. nullptr
  // and *err = -errno on failure.
  std::unique_ptr<Agent> fork(const std::string& child_name, long* err);
  // Stores `byte` into every byte of the range / loads the range (with
  // expect >= 0, every byte is compared with it). A process that dies or
  // hangs (and is killed) during the access reports SIGKILL.
  HostAccess write(uint64_t addr, uint64_t len, uint8_t byte);
  HostAccess read(uint64_t addr, uint64_t len, int expect);
  // GUP through the process's own system calls. The descriptor (this
  // process's) is passed over for the call and closed there afterwards
  // (a ring with pidfd_getfd(): SCM_RIGHTS refuses io_uring descriptors).
  long vmsplice(int pipe_wfd, uint64_t addr, uint64_t len);                  // bytes, or -errno
  long io_uring_register_buffer(int ring_fd, uint64_t addr, uint64_t len);  // 0, or -errno
  // exit(0); returns once the process's address space is gone.
  void exit();

  // The process's CPU time (user and kernel, CLOCK_THREAD_CPUTIME_ID in the
  // process) spent serving requests so far: the cost model's measured side.
  // The socket round trip and the wait for the next request are not in it,
  // nor is what exit() frees.
  uint64_t cpu_ns() const { return cpu_ns_; }
  // The faults the kernel counted to the process (getrusage's ru_minflt and
  // ru_majflt) during its accesses and system calls so far, fork excepted:
  // what the test made it do, without its own command loop's faults.
  uint64_t min_flt() const { return min_flt_; }
  uint64_t maj_flt() const { return maj_flt_; }

  static constexpr int kTimeoutMs = 60000;

 private:
  Agent(std::string name, int pid, int sock, bool direct_child)
      : name_(std::move(name)), pid_(pid), sock_(sock), direct_child_(direct_child) {}
  void open_pidfd();
  void signal_kill();
  void finish(int timeout_ms);
  long await(wire::Response* rs, int* fd);
  long call(const wire::Request& rq, int fd, wire::Response* rs, int* got_fd);
  long simple(const wire::Request& rq, int fd);
  HostAccess access(const wire::Request& rq);
  std::string name_;
  int pid_ = -1;
  int sock_ = -1;             // our end of the command socket
  bool direct_child_ = true;  // forked by the runner (we reap it) or by another agent
  int pidfd_ = -1;            // names this process for SIGKILL even if its pid is recycled
  uint64_t cpu_ns_ = 0;
  uint64_t min_flt_ = 0, maj_flt_ = 0;
};

}  // namespace mmlab::host
