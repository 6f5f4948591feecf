// The host backend's process: a fork of mmlab that runs nothing but a
// command loop on one end of a unix socket. The runner sends a fixed-size
// Request (with a descriptor as SCM_RIGHTS when the call needs one; an
// io_uring ring is fetched with pidfd_getfd instead) and reads
// a fixed-size Response. The process never returns into the runner's code:
// every way out of the loop is _exit().
#include "host/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/io_uring.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mmlab::host {

namespace wire {
enum class Op : uint32_t {
  kMmap, kMunmap, kMprotect, kMremap, kMadvise, kFork, kWrite, kRead, kVmsplice, kIoUringRegister, kPinCpu, kExit,
  kMlock, kMunlock, kMlockall, kMunlockall, kVmRead, kMseal, kShmat, kShmdt
};

struct Request {  // no padding: no stray bytes go over the socket
  Op op = Op::kExit;
  int32_t arg = 0;  // prot, advice, mlock2/mlockall flags, the byte to write, the expected byte, or a CPU
  int32_t flags = 0;
  int32_t peer_pid = 0, peer_fd = -1;  // a descriptor to take with pidfd_getfd (see register_buffer)
  int32_t unused = 0;
  uint64_t addr = 0, len = 0, new_len = 0, new_addr = 0, off = 0;
};
static_assert(sizeof(Request) == 6 * 4 + 5 * 8);

struct Response {  // also sent once, as it is here, when the process is ready
  int64_t ret = 0;
  int32_t sig = 0;
  uint32_t found = 0;
  uint64_t fault_addr = 0;
  int64_t bad = -1;
  uint64_t cpu_ns = 0;  // the process's CPU time (user and kernel) spent on the request
  uint64_t min_flt = 0, maj_flt = 0;  // the faults the kernel counted to it meanwhile (getrusage)
};
}  // namespace wire

// The page of `byte` is kept for the next call with the same byte: the
// agent calls once per page of a read.
int64_t find_not(const uint8_t* p, uint64_t len, uint8_t byte) {
  struct Pattern {
    alignas(64) uint8_t bytes[4096];
    int byte = -1;
  };
  thread_local Pattern pat;
  if (pat.byte != byte) {
    std::memset(pat.bytes, byte, sizeof pat.bytes);
    pat.byte = byte;
  }
  for (uint64_t off = 0; off < len; off += sizeof pat.bytes) {
    const uint64_t n = std::min<uint64_t>(sizeof pat.bytes, len - off);
    if (std::memcmp(p + off, pat.bytes, n) == 0) continue;
    for (uint64_t i = 0; i < n; i++)
      if (p[off + i] != byte) return static_cast<int64_t>(off + i);
  }
  return -1;
}

// mseal(2)'s number on x86-64 and the other 64-bit architectures' common
// table (462); older C libraries have no SYS_mseal.
#ifdef SYS_mseal
constexpr long kSysMseal = SYS_mseal;
#else
constexpr long kSysMseal = 462;
#endif

namespace {

using wire::Op;
using wire::Request;
using wire::Response;

constexpr uint64_t kPage = 4096;

// ---- framing, used by both ends ----

// Sends all of `len` bytes; `fd` (if >= 0) rides on the first byte as
// SCM_RIGHTS. 0 or -errno.
int send_all(int sock, const void* buf, size_t len, int fd) {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    iovec iov{const_cast<char*>(p), len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
      msg.msg_control = ctl;
      msg.msg_controllen = sizeof(ctl);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    // MSG_NOSIGNAL: a peer that is gone is -EPIPE here, not a SIGPIPE.
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += n;
    len -= static_cast<size_t>(n);
    fd = -1;  // sent with the first byte that went
  }
  return 0;
}

// Receives exactly `len` bytes. *fd gets a descriptor that came with them, or
// -1. 1 when complete, 0 on EOF, -errno on error.
int recv_all(int sock, void* buf, size_t len, int* fd) {
  auto* p = static_cast<char*>(buf);
  *fd = -1;
  size_t got = 0;
  while (got < len) {
    iovec iov{p + got, len - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof(ctl);
    ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);  // the runner may exec
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && *fd < 0) std::memcpy(fd, CMSG_DATA(c), sizeof(int));
    }
    got += static_cast<size_t>(n);
  }
  return 1;
}

long sys_result(long r) { return r == -1 ? -errno : r; }

// ---- the process side ----

// Fault recovery for the access loops: the handler jumps back to the
// sigsetjmp in run_access with the signal and the address it hit. The
// globals are written only by this single-threaded process.
sigjmp_buf g_env;
volatile sig_atomic_t g_armed = 0;
volatile int g_sig = 0;
volatile uint64_t g_fault_addr = 0;
volatile int64_t g_bad = -1;  // volatile so a mismatch found before a fault is not lost
volatile uint8_t g_found = 0;
volatile uint64_t g_min_flt = 0, g_maj_flt = 0;  // the counts when the access began
alignas(16) char g_altstack[64 * 1024];

void on_fault(int sig, siginfo_t* si, void*) {
  if (!g_armed) {
    // A fault in the agent's own code: die of it (the access repeats with
    // the default action).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
    return;
  }
  g_armed = 0;
  g_sig = sig;
  g_fault_addr = reinterpret_cast<uint64_t>(si->si_addr);
  siglongjmp(g_env, 1);
}

// Page-bounded chunks, each begun by a single-byte access, so that a fault is
// reported at the first byte of the range in the page that faulted (where
// the model reports it too).
void touch_write(uint64_t addr, uint64_t len, uint8_t byte) {
  for (uint64_t done = 0; done < len;) {
    uint64_t cur = addr + done;
    uint64_t chunk = std::min(len - done, kPage - (cur & (kPage - 1)));
    *reinterpret_cast<volatile uint8_t*>(cur) = byte;
    std::memset(reinterpret_cast<void*>(cur + 1), byte, chunk - 1);
    done += chunk;
  }
}

// Each page is entered by a single volatile load of its first byte of the
// range, the access that faults; once it is done the page is mapped (nothing
// else runs in this process), so the rest of the chunk is checked by
// find_not rather than a byte at a time (a 1 GiB verifying read took a
// second that way). A read without an expected byte loads only that first
// byte: the rest of the page changes no kernel state.
void touch_read(uint64_t addr, uint64_t len, int expect) {
  for (uint64_t done = 0; done < len;) {
    uint64_t cur = addr + done;
    uint64_t chunk = std::min(len - done, kPage - (cur & (kPage - 1)));
    (void)*reinterpret_cast<const volatile uint8_t*>(cur);
    if (expect >= 0 && g_bad < 0) {
      const auto* p = reinterpret_cast<const uint8_t*>(cur);
      const int64_t at = find_not(p, chunk, static_cast<uint8_t>(expect));
      if (at >= 0) {
        g_bad = static_cast<int64_t>(done) + at;
        g_found = p[at];
      }
    }
    done += chunk;
  }
}

// This thread's fault counts (ru_minflt, ru_majflt).
void thread_faults(uint64_t* min_flt, uint64_t* maj_flt) {
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  *min_flt = static_cast<uint64_t>(ru.ru_minflt);
  *maj_flt = static_cast<uint64_t>(ru.ru_majflt);
}

// No locals live across the sigsetjmp: everything the jump must not lose is
// in the volatile globals. The fault counts cover the access alone: the
// globals (g_env by sigsetjmp) and the byte pattern are written before the
// counts are first read, so that this process's own copy-on-write faults on
// them (it is a fork of the runner) stay out.
Response run_access(const Request& rq) {
  g_sig = 0;
  g_fault_addr = 0;
  g_bad = -1;
  g_found = 0;
  g_min_flt = 0;
  g_maj_flt = 0;
  if (rq.op == Op::kRead && rq.arg >= 0) (void)find_not(nullptr, 0, static_cast<uint8_t>(rq.arg));
  if (sigsetjmp(g_env, 1) == 0) {  // 1: the jump restores the signal mask
    g_armed = 1;
    uint64_t min0 = 0, maj0 = 0;  // after sigsetjmp has written g_env
    thread_faults(&min0, &maj0);
    g_min_flt = min0;
    g_maj_flt = maj0;
    if (rq.op == Op::kWrite) touch_write(rq.addr, rq.len, static_cast<uint8_t>(rq.arg));
    else touch_read(rq.addr, rq.len, rq.arg);
    g_armed = 0;
  }
  Response rs;
  thread_faults(&rs.min_flt, &rs.maj_flt);
  rs.min_flt -= g_min_flt;
  rs.maj_flt -= g_maj_flt;
  rs.sig = g_sig;
  rs.fault_addr = g_fault_addr;
  rs.bad = g_bad;
  rs.found = g_found;
  return rs;
}

// io_uring descriptors cannot travel in SCM_RIGHTS (the kernel refuses them
// with -EINVAL since v6.7, against unix-socket GC cycles), so the process takes the runner's ring with
// pidfd_getfd(). The runner is blocked waiting for our answer, so its pid
// cannot be recycled meanwhile.
long register_buffer(const Request& rq) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, rq.peer_pid, 0));
  if (pidfd < 0) return -errno;
  int ring = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, rq.peer_fd, 0));
  int err = errno;
  ::close(pidfd);
  if (ring < 0) return -err;
  iovec iov{reinterpret_cast<void*>(rq.addr), rq.len};
  long r = sys_result(::syscall(SYS_io_uring_register, ring, IORING_REGISTER_BUFFERS, &iov, 1));
  ::close(ring);
  return r;
}

// One system call on behalf of the runner; `fd` is the descriptor passed
// with the request (or -1).
long run_syscall(const Request& rq, int fd) {
  auto* addr = reinterpret_cast<void*>(rq.addr);
  switch (rq.op) {
    case Op::kMmap: {
      void* p = ::mmap(addr, rq.len, rq.arg, rq.flags, fd, static_cast<off_t>(rq.off));
      return p == MAP_FAILED ? -errno : static_cast<long>(reinterpret_cast<uintptr_t>(p));
    }
    case Op::kMunmap: return sys_result(::munmap(addr, rq.len));
    case Op::kVmRead: {
      iovec local{addr, rq.len}, remote{reinterpret_cast<void*>(rq.new_addr), rq.len};
      return sys_result(::process_vm_readv(rq.peer_pid, &local, 1, &remote, 1, 0));
    }
    case Op::kMprotect: return sys_result(::mprotect(addr, rq.len, rq.arg));
    case Op::kMremap:  // the raw call: new_addr is always passed (MREMAP_FIXED needs it)
      return sys_result(::syscall(SYS_mremap, rq.addr, rq.len, rq.new_len, rq.flags, rq.new_addr));
    case Op::kMadvise: return sys_result(::madvise(addr, rq.len, rq.arg));
    // The raw calls: mlock(2) for flags 0, mlock2(2) otherwise, as a test would call them.
    case Op::kMlock:
      return sys_result(rq.arg ? ::syscall(SYS_mlock2, rq.addr, rq.len, rq.arg) : ::syscall(SYS_mlock, rq.addr, rq.len));
    case Op::kMunlock: return sys_result(::syscall(SYS_munlock, rq.addr, rq.len));
    case Op::kMlockall: return sys_result(::syscall(SYS_mlockall, rq.arg));
    case Op::kMunlockall: return sys_result(::syscall(SYS_munlockall));
    case Op::kMseal: return sys_result(::syscall(kSysMseal, rq.addr, rq.len, 0));
    case Op::kShmat: {
      void* p = ::shmat(rq.arg, nullptr, rq.flags);
      return p == reinterpret_cast<void*>(-1) ? -errno : static_cast<long>(reinterpret_cast<uintptr_t>(p));
    }
    case Op::kShmdt: return sys_result(::shmdt(addr));
    case Op::kVmsplice: {
      iovec iov{addr, rq.len};
      return sys_result(::vmsplice(fd, &iov, 1, 0));
    }
    case Op::kIoUringRegister: return register_buffer(rq);
    case Op::kPinCpu: {
      if (rq.arg < 0 || rq.arg >= CPU_SETSIZE) return -EINVAL;
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(rq.arg, &set);
      return sys_result(::sched_setaffinity(0, sizeof(set), &set));
    }
    default: return -ENOSYS;
  }
}

// fork(2) for the runner. The child gets a socket pair of its own: it keeps
// one end and serves it (*serve), the other goes back to the runner (*pass).
// Returns the child's pid (in the parent), 0 (in the child), or -errno.
long agent_fork(int* sock, int* pass) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -errno;
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return -e;
  }
  if (pid == 0) {
    // Keep nothing of the parent's conversation: the runner must see EOF on
    // the parent's socket when the parent alone exits.
    ::close(*sock);
    ::close(sv[0]);
    *sock = sv[1];
    return 0;
  }
  ::close(sv[1]);
  *pass = sv[0];
  return pid;
}

uint64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] void serve(int sock) {
  for (;;) {
    Request rq;
    int fd = -1;
    if (recv_all(sock, &rq, sizeof(rq), &fd) <= 0) _exit(0);  // the runner is gone
    if (rq.op == Op::kExit) _exit(0);
    const uint64_t cpu0 = thread_cpu_ns();
    Response rs;
    int pass = -1;
    if (rq.op == Op::kFork) {
      if (fd >= 0) ::close(fd);
      fd = -1;
      rs.ret = agent_fork(&sock, &pass);
      if (rs.ret == 0) continue;  // the child: serve the new socket, answer nothing on the old
    } else if (rq.op == Op::kWrite || rq.op == Op::kRead) {
      rs = run_access(rq);
    } else {
      uint64_t min0 = 0, maj0 = 0;
      thread_faults(&min0, &maj0);
      rs.ret = run_syscall(rq, fd);
      thread_faults(&rs.min_flt, &rs.maj_flt);
      rs.min_flt -= min0;
      rs.maj_flt -= maj0;
    }
    if (fd >= 0) ::close(fd);
    rs.cpu_ns = thread_cpu_ns() - cpu0;
    if (send_all(sock, &rs, sizeof(rs), pass) < 0) _exit(0);
    if (pass >= 0) ::close(pass);
  }
}

// The runner's own writable private memory, inherited: its .bss, heap and
// stacks still hold 64K-aligned ranges the runner never touched (this file's
// globals are first written here), and with mTHP `always` their first touch
// would fault a large folio that counts in the test's machine-wide
// statistics. MADV_NOHUGEPAGE on every such mapping keeps them at order 0;
// the mappings the test creates afterwards are new VMAs and unaffected.
// Called while THP is still disabled for this process; parses
// /proc/self/maps with no allocation.
void exclude_inherited_memory_from_thp() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char buf[1 << 16];
  size_t have = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + have, sizeof(buf) - have);
    if (n <= 0 && have == 0) break;
    have += n > 0 ? static_cast<size_t>(n) : 0;
    char* line = buf;
    char* end = buf + have;
    for (char* nl; (nl = static_cast<char*>(std::memchr(line, '\n', end - line)));) {
      *nl = 0;
      char* p = line;
      uint64_t lo = std::strtoull(p, &p, 16), hi = *p == '-' ? std::strtoull(p + 1, &p, 16) : 0;
      // "lo-hi rw-p ...": writable and private ([vsyscall] is not).
      if (hi > lo && p[0] == ' ' && p[1] == 'r' && p[2] == 'w' && p[4] == 'p' && !std::strstr(p, "[vsyscall]"))
        ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_NOHUGEPAGE);
      line = nl + 1;
    }
    have = static_cast<size_t>(end - line);
    std::memmove(buf, line, have);
    if (n <= 0 || have == sizeof(buf)) break;
  }
  ::close(fd);
}

// The freshly forked process: shed the runner's descriptors, signal state
// and children, then serve.
[[noreturn]] void agent_main(int sock) {
  if (sock != 3) {
    if (::dup2(sock, 3) < 0) _exit(1);
    if (sock < 3) ::close(sock);
    sock = 3;
  }
  if (::close_range(4, ~0U, 0) < 0) _exit(1);

  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  stack_t ss{};
  ss.ss_sp = g_altstack;
  ss.ss_size = sizeof(g_altstack);
  if (sigaltstack(&ss, nullptr) < 0) _exit(1);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) < 0 || sigaction(SIGBUS, &sa, nullptr) < 0) _exit(1);
  // Children forked for the runner are reaped by the kernel when they exit.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGCHLD, &ign, nullptr);
  // The runner's restore-on-interrupt handlers (host/sysfs.cpp) are its own.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
  // The runner keeps THP off for its own allocations; a scenario process
  // must see the system's settings as any process would, in its own mappings.
  exclude_inherited_memory_from_thp();
  prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);

  Response ready;
  if (send_all(sock, &ready, sizeof(ready), -1) < 0) _exit(0);
  serve(sock);
}

}  // namespace

// ---- the runner side ----

std::unique_ptr<Agent> Agent::spawn(const std::string& name, std::string* err) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    if (err) *err = std::string("socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    if (err) *err = std::string("fork: ") + std::strerror(errno);
    ::close(sv[0]);
    ::close(sv[1]);
    return nullptr;
  }
  if (pid == 0) {
    ::close(sv[0]);
    agent_main(sv[1]);
  }
  ::close(sv[1]);
  std::unique_ptr<Agent> a(new Agent(name, pid, sv[0], /*direct_child=*/true));
  a->open_pidfd();
  Response ready;
  long r = a->await(&ready, nullptr);
  if (r < 0) {
    if (err) *err = "process " + name + " did not start: " + std::strerror(static_cast<int>(-r));
    return nullptr;
  }
  return a;
}

Agent::~Agent() {
  if (sock_ >= 0) {
    signal_kill();
    finish(kTimeoutMs);
  }
  if (pidfd_ >= 0) ::close(pidfd_);
}

// A pidfd names this process and no later one with a recycled pid: the
// runner may SIGKILL a grandchild that died and was reaped by someone else.
// Taken while the process cannot exit on its own (it waits for a command).
void Agent::open_pidfd() { pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)); }

void Agent::signal_kill() {
  if (pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  else ::kill(pid_, SIGKILL);  // no pidfd (kernel < 5.3): a child's pid is ours until we reap it
}

// Waits up to timeout_ms for EOF (the process's files are closed, so its mm
// is gone: exit_mm runs before exit_files), then closes our end and reaps a
// child of ours.
void Agent::finish(int timeout_ms) {
  for (;;) {
    pollfd p{sock_, POLLIN, 0};
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // no EOF in time: make sure it dies, then wait for it
      signal_kill();
      timeout_ms = -1;
      continue;
    }
    char buf[256];
    ssize_t r = ::read(sock_, buf, sizeof(buf));  // drain anything unread
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  ::close(sock_);
  sock_ = -1;
  if (direct_child_) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

// Reads one response. 0, -EPIPE (the process is gone) or -ETIMEDOUT (it did
// not answer and was killed).
long Agent::await(Response* rs, int* fd) {
  for (;;) {
    pollfd p{sock_, POLLIN, 0};
    int n = ::poll(&p, 1, kTimeoutMs);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      signal_kill();
      finish(-1);
      return -ETIMEDOUT;
    }
    break;
  }
  int got_fd = -1;
  if (recv_all(sock_, rs, sizeof(*rs), &got_fd) <= 0) {
    if (got_fd >= 0) ::close(got_fd);
    signal_kill();
    finish(-1);
    return -EPIPE;
  }
  if (fd) *fd = got_fd;
  else if (got_fd >= 0) ::close(got_fd);
  return 0;
}

// Sends a request and reads the answer into *rs. 0 or -errno.
long Agent::call(const Request& rq, int fd, Response* rs, int* got_fd) {
  if (sock_ < 0) return -EPIPE;
  int r = send_all(sock_, &rq, sizeof(rq), fd);
  if (r == -EBADF) return r;  // the descriptor to pass was bad (ours is open): nothing went
  if (r < 0) {
    signal_kill();
    finish(-1);
    return -EPIPE;
  }
  long r2 = await(rs, got_fd);
  if (r2 == 0) {
    cpu_ns_ += rs->cpu_ns;
    min_flt_ += rs->min_flt;
    maj_flt_ += rs->maj_flt;
  }
  return r2;
}

long Agent::simple(const Request& rq, int fd) {
  Response rs;
  long r = call(rq, fd, &rs, nullptr);
  return r < 0 ? r : rs.ret;
}

namespace {
Request make(Op op, uint64_t addr = 0, uint64_t len = 0, int32_t arg = 0, int32_t flags = 0) {
  Request rq;
  rq.op = op;
  rq.addr = addr;
  rq.len = len;
  rq.arg = arg;
  rq.flags = flags;
  return rq;
}
}  // namespace

long Agent::mmap(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off) {
  Request rq = make(Op::kMmap, addr, len, prot, flags);
  rq.off = off;
  return simple(rq, fd);
}

long Agent::munmap(uint64_t addr, uint64_t len) { return simple(make(Op::kMunmap, addr, len), -1); }

long Agent::mprotect(uint64_t addr, uint64_t len, int prot) { return simple(make(Op::kMprotect, addr, len, prot), -1); }

long Agent::mremap(uint64_t old_addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr) {
  Request rq = make(Op::kMremap, old_addr, old_len, 0, flags);
  rq.new_len = new_len;
  rq.new_addr = new_addr;
  return simple(rq, -1);
}

long Agent::madvise(uint64_t addr, uint64_t len, int advice) { return simple(make(Op::kMadvise, addr, len, advice), -1); }

long Agent::mlock2(uint64_t addr, uint64_t len, int flags) { return simple(make(Op::kMlock, addr, len, flags), -1); }

long Agent::munlock(uint64_t addr, uint64_t len) { return simple(make(Op::kMunlock, addr, len), -1); }

long Agent::mlockall(int flags) { return simple(make(Op::kMlockall, 0, 0, flags), -1); }

long Agent::munlockall() { return simple(make(Op::kMunlockall), -1); }
long Agent::mseal(uint64_t addr, uint64_t len) { return simple(make(Op::kMseal, addr, len), -1); }
long Agent::shmat(int shmid, int shmflg) { return simple(make(Op::kShmat, 0, 0, shmid, shmflg), -1); }
long Agent::shmdt(uint64_t addr) { return simple(make(Op::kShmdt, addr), -1); }

long Agent::process_vm_readv(int pid, uint64_t local, uint64_t remote, uint64_t len) {
  Request rq = make(Op::kVmRead, local, len);
  rq.peer_pid = pid;
  rq.new_addr = remote;
  return simple(rq, -1);
}

long Agent::pin_cpu(int cpu) { return simple(make(Op::kPinCpu, 0, 0, cpu), -1); }

long Agent::vmsplice(int pipe_wfd, uint64_t addr, uint64_t len) { return simple(make(Op::kVmsplice, addr, len), pipe_wfd); }

long Agent::io_uring_register_buffer(int ring_fd, uint64_t addr, uint64_t len) {
  Request rq = make(Op::kIoUringRegister, addr, len);
  rq.peer_pid = ::getpid();
  rq.peer_fd = ring_fd;
  return simple(rq, -1);
}

std::unique_ptr<Agent> Agent::fork(const std::string& child_name, long* err) {
  Response rs;
  int sock = -1;
  long r = call(make(Op::kFork), -1, &rs, &sock);
  if (r == 0) r = rs.ret < 0 ? rs.ret : (sock < 0 ? -EPROTO : 0);  // a child comes with its socket
  if (r < 0) {
    if (sock >= 0) ::close(sock);
    if (err) *err = r;
    return nullptr;
  }
  std::unique_ptr<Agent> c(new Agent(child_name, static_cast<int>(rs.ret), sock, /*direct_child=*/false));
  c->open_pidfd();
  return c;
}

HostAccess Agent::access(const Request& rq) {
  Response rs;
  HostAccess a;
  if (call(rq, -1, &rs, nullptr) < 0) {
    a.sig = SIGKILL;  // the process died, or hung and was killed, during the access
    a.fault_addr = rq.addr;
    return a;
  }
  a.sig = rs.sig;
  a.fault_addr = rs.fault_addr;
  a.bad = rs.bad;
  a.found = static_cast<uint8_t>(rs.found);
  return a;
}

HostAccess Agent::write(uint64_t addr, uint64_t len, uint8_t byte) { return access(make(Op::kWrite, addr, len, byte)); }

HostAccess Agent::read(uint64_t addr, uint64_t len, int expect) { return access(make(Op::kRead, addr, len, expect)); }

void Agent::exit() {
  if (sock_ < 0) return;
  Request rq = make(Op::kExit);
  send_all(sock_, &rq, sizeof(rq), -1);  // if it is already gone, EOF is all we wait for
  finish(kTimeoutMs);
}

}  // namespace mmlab::host
