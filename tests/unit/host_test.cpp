// The host backend against the running kernel: agent processes (system
// calls with the kernel's errnos, CPU accesses that report SIGSEGV/SIGBUS and
// go on, fork), and GUP through vmsplice and io_uring fixed buffers. Every
// expectation here is what Linux does; the model's own tests check the same
// behaviour on the model. Needs root (pipe sizes beyond pipe-max-size,
// memlock for pinned buffers, pidfd_getfd). Runs under TSan as well: the
// processes are forks that only make system calls, and TSan supports the
// fault handler's siglongjmp.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/agent.h"
#include "host/host_gup.h"

namespace mmlab::host {
namespace {

constexpr uint64_t kPage = 4096;
constexpr int kRW = PROT_READ | PROT_WRITE;
constexpr int kAnon = MAP_PRIVATE | MAP_ANONYMOUS;

class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the host backend needs root";
    a = spawn("a");
    ASSERT_TRUE(a);
  }

  static std::unique_ptr<Agent> spawn(const std::string& name) {
    std::string err;
    auto p = Agent::spawn(name, &err);
    EXPECT_TRUE(p) << err;
    return p;
  }

  // An anonymous private mapping of npages in `p`, every byte `fill`.
  static uint64_t map_anon(Agent& p, uint64_t npages, int fill = -1) {
    long addr = p.mmap(0, npages * kPage, kRW, kAnon, -1, 0);
    EXPECT_GT(addr, 0);
    if (fill >= 0) {
      EXPECT_EQ(p.write(addr, npages * kPage, static_cast<uint8_t>(fill)).sig, 0);
    }
    return static_cast<uint64_t>(addr);
  }

  // The range reads as `byte` everywhere, without a signal.
  static void expect_bytes(Agent& p, uint64_t addr, uint64_t len, uint8_t byte) {
    HostAccess r = p.read(addr, len, byte);
    EXPECT_EQ(r.sig, 0) << p.name() << " at " << std::hex << r.fault_addr;
    EXPECT_EQ(r.bad, -1) << p.name() << ": found 0x" << std::hex << int(r.found);
  }

  static void expect_handle_bytes(HostGupHandle& h, uint64_t off, uint64_t len, uint8_t byte) {
    std::vector<uint8_t> buf(len);
    ASSERT_EQ(h.read(off, buf.data(), len), 0);
    for (uint64_t i = 0; i < len; i++) {
      ASSERT_EQ(buf[i], byte) << "offset " << off + i;
    }
  }

  std::unique_ptr<Agent> a;
};

// A pidfd taken while the process lives; readable once it has exited,
// whoever reaps it (init reaps orphaned grandchildren when it gets to it).
bool exits_within(int pidfd, int ms) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

int open_pidfd(int pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// ---- process lifetime ----

TEST_F(HostTest, SpawnAndExitReaps) {
  int pid = a->pid();
  EXPECT_GT(pid, 0);
  EXPECT_NE(pid, ::getpid());
  EXPECT_TRUE(a->alive());
  a->exit();
  EXPECT_FALSE(a->alive());
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);  // already reaped by exit()
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(a->munmap(0x10000, kPage), -EPIPE);  // a dead process answers nothing
  EXPECT_EQ(a->write(0x10000, 1, 0).sig, SIGKILL);
  a->exit();  // twice is harmless
}

TEST_F(HostTest, DestructorKillsAndReaps) {
  int pid = a->pid();
  a.reset();
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(HostTest, KilledProcessAnswersEpipe) {
  int pid = a->pid();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_EQ(a->mmap(0, kPage, kRW, kAnon, -1, 0), -EPIPE);
  EXPECT_FALSE(a->alive());
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);  // and it was reaped
  EXPECT_EQ(errno, ECHILD);
}

// The descriptors >= 3 a process has open.
std::vector<std::string> open_fds(int pid) {
  std::vector<std::string> fds;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return fds;
  while (dirent* e = ::readdir(d.get())) {
    std::string n = e->d_name;
    if (n != "." && n != ".." && std::stoi(n) >= 3) fds.push_back(n);
  }
  return fds;
}

TEST_F(HostTest, ProcessesHoldOnlyTheirSocket) {
  int pipefd[2];
  ASSERT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);  // one more descriptor the runner holds
  auto b = spawn("b");
  ASSERT_TRUE(b);
  long err = 0;
  auto c = b->fork("c", &err);
  ASSERT_TRUE(c) << err;
  // A command served by each: b has closed the socket it passed over for c,
  // and c has closed b's.
  ASSERT_GT(b->mmap(0, kPage, kRW, kAnon, -1, 0), 0);
  ASSERT_GT(c->mmap(0, kPage, kRW, kAnon, -1, 0), 0);
  EXPECT_EQ(open_fds(a->pid()).size(), 1u);
  EXPECT_EQ(open_fds(b->pid()).size(), 1u);
  EXPECT_EQ(open_fds(c->pid()).size(), 1u);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

TEST_F(HostTest, RunnerLeaksNoDescriptors) {
  size_t before = open_fds(::getpid()).size();
  {
    auto b = spawn("b");
    ASSERT_TRUE(b);
    uint64_t x = map_anon(*b, 2, 1);
    long err = 0;
    auto c = b->fork("c", &err);
    ASSERT_TRUE(c) << err;
    auto v = host_gup_vmsplice(*b, x, 2);
    auto u = host_gup_iouring(*c, x, 2);
    ASSERT_EQ(v->ret, 2);
    ASSERT_EQ(u->ret, 2);
    expect_handle_bytes(*v, 0, 2 * kPage, 1);
    expect_handle_bytes(*u, 0, 2 * kPage, 1);
    b->exit();
  }
  EXPECT_EQ(open_fds(::getpid()).size(), before);
}

// The CPU a process may run on, from /proc/PID/status.
std::string cpus_allowed(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string l; std::getline(status, l);)
    if (l.rfind("Cpus_allowed_list:", 0) == 0) return l.substr(l.find_first_not_of(" \t", 18));
  return "";
}

// Each VMA of /proc/PID/smaps as "perms VmFlags", by start address.
static std::map<uint64_t, std::string> smaps_flags(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::map<uint64_t, std::string> out;
  uint64_t cur = 0;
  std::string perms;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmFlags:", 0) == 0) {
      out[cur] = perms + line.substr(8);
    } else if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
               line.find(' ') > line.find('-')) {
      cur = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
      perms = line.substr(line.find(' ') + 1, 4);
    }
  }
  return out;
}

// The runner's untouched memory that a process inherits must not fault
// mTHPs into the test's machine-wide statistics: each inherited writable
// private mapping is VM_NOHUGEPAGE ("nh"); what the test maps is not.
TEST_F(HostTest, InheritedMemoryNeverFaultsLargeFolios) {
  long addr = a->mmap(0, 16 * kPage, kRW, kAnon, -1, 0);
  ASSERT_GT(addr, 0);
  auto vmas = smaps_flags(a->pid());
  ASSERT_FALSE(vmas.empty());
  int inherited = 0;
  for (auto& [start, flags] : vmas) {
    if (start == static_cast<uint64_t>(addr)) {
      EXPECT_EQ(flags.find(" nh"), std::string::npos) << "the test's own mapping: " << flags;
      continue;
    }
    if (flags.size() < 4 || flags[1] != 'w' || flags[3] != 'p') continue;
    inherited++;
    EXPECT_NE(flags.find(" nh"), std::string::npos) << std::hex << start << ": " << flags;
  }
  EXPECT_GT(inherited, 0);
}

TEST_F(HostTest, PinCpuHoldsForTheProcessAndItsForks) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &set)) cpu++;
  ASSERT_EQ(a->pin_cpu(cpu), 0);
  EXPECT_EQ(cpus_allowed(a->pid()), std::to_string(cpu));
  long err = 0;
  auto child = a->fork("c", &err);
  ASSERT_TRUE(child) << err;
  EXPECT_EQ(cpus_allowed(child->pid()), std::to_string(cpu));
  EXPECT_EQ(a->pin_cpu(CPU_SETSIZE), -EINVAL);
}

TEST_F(HostTest, TwoProcessesAreIndependent) {
  auto b = spawn("b");
  ASSERT_TRUE(b);
  uint64_t x = map_anon(*a, 1, 0x11);
  uint64_t y = map_anon(*b, 1, 0x22);
  expect_bytes(*b, y, kPage, 0x22);
  b->exit();  // a's socket is not held open by b, and a still answers
  expect_bytes(*a, x, kPage, 0x11);
}

// ---- CPU accesses ----

TEST_F(HostTest, WriteThenReadExpected) {
  uint64_t x = map_anon(*a, 3, 0x5a);
  expect_bytes(*a, x, 3 * kPage, 0x5a);
  EXPECT_EQ(a->write(x + kPage + 100, 7, 0x11).sig, 0);
  HostAccess r = a->read(x, 3 * kPage, 0x5a);
  EXPECT_EQ(r.sig, 0);
  EXPECT_EQ(r.bad, static_cast<int64_t>(kPage + 100));
  EXPECT_EQ(r.found, 0x11);
  r = a->read(x + kPage + 100, 7, -1);  // a plain load compares nothing
  EXPECT_EQ(r.sig, 0);
  EXPECT_EQ(r.bad, -1);
  expect_bytes(*a, x + kPage + 100, 7, 0x11);
}

TEST_F(HostTest, UntouchedAnonReadsZero) { expect_bytes(*a, map_anon(*a, 4), 4 * kPage, 0); }

TEST_F(HostTest, SigsegvOnProtNoneAndGoesOn) {
  long x = a->mmap(0, 2 * kPage, PROT_NONE, kAnon, -1, 0);
  ASSERT_GT(x, 0);
  HostAccess w = a->write(x, 2 * kPage, 1);
  EXPECT_EQ(w.sig, SIGSEGV);
  EXPECT_EQ(w.fault_addr, static_cast<uint64_t>(x));
  HostAccess r = a->read(x + kPage + 100, 10, -1);
  EXPECT_EQ(r.sig, SIGSEGV);
  EXPECT_EQ(r.fault_addr, static_cast<uint64_t>(x) + kPage + 100);
  // The process survived both and the handler is still installed.
  ASSERT_EQ(a->mprotect(x, 2 * kPage, PROT_READ), 0);
  expect_bytes(*a, x, 2 * kPage, 0);
  EXPECT_EQ(a->write(x, 1, 1).sig, SIGSEGV);  // read-only now
  ASSERT_EQ(a->mprotect(x, 2 * kPage, kRW), 0);
  EXPECT_EQ(a->write(x, 2 * kPage, 3).sig, 0);
  expect_bytes(*a, x, 2 * kPage, 3);
}

TEST_F(HostTest, SigsegvOnUnmappedStopsThere) {
  uint64_t x = map_anon(*a, 2);
  ASSERT_EQ(a->munmap(x + kPage, kPage), 0);
  HostAccess w = a->write(x + 10, 2 * kPage, 0x7e);
  EXPECT_EQ(w.sig, SIGSEGV);
  EXPECT_EQ(w.fault_addr, x + kPage);  // the first byte of the range in the faulting page
  expect_bytes(*a, x + 10, kPage - 10, 0x7e);  // what came before the fault was written
  HostAccess r = a->read(x, 2 * kPage, 0);
  EXPECT_EQ(r.sig, SIGSEGV);
  EXPECT_EQ(r.bad, 10);  // a mismatch found before the fault is still reported
  EXPECT_EQ(r.found, 0x7e);
  EXPECT_EQ(a->read(0, 1, -1).sig, SIGSEGV);
}

TEST_F(HostTest, SigbusBeyondEndOfFile) {
  int fd = ::memfd_create("host_test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kPage), 0);
  long x = a->mmap(0, 2 * kPage, kRW, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping holds the file; the process closed its copy
  ASSERT_GT(x, 0);
  EXPECT_EQ(a->write(x, kPage, 0x44).sig, 0);
  HostAccess w = a->write(x + kPage, 1, 0x44);
  EXPECT_EQ(w.sig, SIGBUS);
  EXPECT_EQ(w.fault_addr, static_cast<uint64_t>(x) + kPage);
  HostAccess r = a->read(x, 2 * kPage, 0x44);
  EXPECT_EQ(r.sig, SIGBUS);
  EXPECT_EQ(r.fault_addr, static_cast<uint64_t>(x) + kPage);
  EXPECT_EQ(r.bad, -1);
  expect_bytes(*a, x, kPage, 0x44);
}

TEST_F(HostTest, SharedFileMappingIsTheFile) {
  int fd = ::memfd_create("host_test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 2 * kPage), 0);
  long x = a->mmap(0, 2 * kPage, kRW, MAP_SHARED, fd, 0);
  ASSERT_GT(x, 0);
  EXPECT_EQ(a->write(x + kPage, kPage, 0x77).sig, 0);
  std::vector<uint8_t> buf(kPage);
  ASSERT_EQ(::pread(fd, buf.data(), kPage, kPage), static_cast<ssize_t>(kPage));
  EXPECT_EQ(buf, std::vector<uint8_t>(kPage, 0x77));
  std::vector<uint8_t> ours(kPage, 0x78);
  ASSERT_EQ(::pwrite(fd, ours.data(), kPage, 0), static_cast<ssize_t>(kPage));
  expect_bytes(*a, x, kPage, 0x78);
  // At a file offset: the second page of the file at the start of the mapping.
  long y = a->mmap(0, kPage, PROT_READ, MAP_SHARED, fd, kPage);
  ASSERT_GT(y, 0);
  expect_bytes(*a, y, kPage, 0x77);
  ::close(fd);
}

// ---- system calls and their errnos ----

TEST_F(HostTest, MmapErrnos) {
  EXPECT_EQ(a->mmap(0, 0, kRW, kAnon, -1, 0), -EINVAL);
  EXPECT_EQ(a->mmap(0, kPage, kRW, MAP_ANONYMOUS, -1, 0), -EINVAL);  // neither private nor shared
  EXPECT_EQ(a->mmap(0, kPage, kRW, MAP_PRIVATE, -1, 0), -EBADF);
  EXPECT_EQ(a->mmap(0, kPage, kRW, MAP_PRIVATE, 1000000, 0), -EBADF);  // a bad descriptor of ours
  uint64_t x = map_anon(*a, 4);
  // MAP_FIXED_NOREPLACE over an existing mapping.
  EXPECT_EQ(a->mmap(x + kPage, kPage, kRW, kAnon | MAP_FIXED_NOREPLACE, -1, 0), -EEXIST);
  EXPECT_EQ(a->mmap(x + kPage, kPage, kRW, kAnon | MAP_FIXED, -1, 0), static_cast<long>(x + kPage));
}

TEST_F(HostTest, MunmapMprotectMadviseErrnos) {
  uint64_t x = map_anon(*a, 4, 1);
  EXPECT_EQ(a->munmap(x + 1, kPage), -EINVAL);
  EXPECT_EQ(a->munmap(x, 0), -EINVAL);
  EXPECT_EQ(a->mprotect(x + 1, kPage, PROT_READ), -EINVAL);
  EXPECT_EQ(a->madvise(x + 1, kPage, MADV_DONTNEED), -EINVAL);
  EXPECT_EQ(a->madvise(x, kPage, 12345), -EINVAL);
  ASSERT_EQ(a->munmap(x + 2 * kPage, kPage), 0);
  EXPECT_EQ(a->mprotect(x, 4 * kPage, PROT_READ), -ENOMEM);  // a hole in the range
  EXPECT_EQ(a->madvise(x, 4 * kPage, MADV_DONTNEED), -ENOMEM);
  EXPECT_EQ(a->munmap(x + 2 * kPage, kPage), 0);  // unmapping nothing is fine
}

TEST_F(HostTest, MadviseDontneedZeroesAnon) {
  uint64_t x = map_anon(*a, 4, 0x33);
  ASSERT_EQ(a->madvise(x + kPage, 2 * kPage, MADV_DONTNEED), 0);
  expect_bytes(*a, x, kPage, 0x33);
  expect_bytes(*a, x + kPage, 2 * kPage, 0);
  expect_bytes(*a, x + 3 * kPage, kPage, 0x33);
}

TEST_F(HostTest, MremapMaymoveKeepsData) {
  // A guard page right after (replacing the mapping's own third page, never
  // someone else's), so growing in place is impossible.
  uint64_t x = map_anon(*a, 3, 0x21);
  ASSERT_EQ(a->mmap(x + 2 * kPage, kPage, PROT_NONE, kAnon | MAP_FIXED, -1, 0), static_cast<long>(x + 2 * kPage));
  EXPECT_EQ(a->mremap(x, 2 * kPage, 4 * kPage, 0, 0), -ENOMEM);
  long y = a->mremap(x, 2 * kPage, 4 * kPage, MREMAP_MAYMOVE, 0);
  ASSERT_GT(y, 0);
  EXPECT_NE(static_cast<uint64_t>(y), x);
  expect_bytes(*a, y, 2 * kPage, 0x21);
  expect_bytes(*a, y + 2 * kPage, 2 * kPage, 0);
  EXPECT_EQ(a->read(x, 1, -1).sig, SIGSEGV);  // the old range is gone
  EXPECT_EQ(a->mremap(y + 1, kPage, kPage, MREMAP_MAYMOVE, 0), -EINVAL);
  EXPECT_EQ(a->mremap(y, kPage, kPage, MREMAP_FIXED, y + 8 * kPage), -EINVAL);  // FIXED needs MAYMOVE
}

TEST_F(HostTest, MremapFixedMovesOverTarget) {
  uint64_t x = map_anon(*a, 2, 0x31);
  uint64_t t = map_anon(*a, 4, 0x32);
  long y = a->mremap(x, 2 * kPage, 2 * kPage, MREMAP_MAYMOVE | MREMAP_FIXED, t + kPage);
  ASSERT_EQ(y, static_cast<long>(t + kPage));
  expect_bytes(*a, t, kPage, 0x32);
  expect_bytes(*a, t + kPage, 2 * kPage, 0x31);
  expect_bytes(*a, t + 3 * kPage, kPage, 0x32);
  EXPECT_EQ(a->write(x, 1, 0).sig, SIGSEGV);
  // Overlapping source and target.
  EXPECT_EQ(a->mremap(t, 2 * kPage, 2 * kPage, MREMAP_MAYMOVE | MREMAP_FIXED, t + kPage), -EINVAL);
}

// ---- fork ----

TEST_F(HostTest, ForkCopiesAndCows) {
  uint64_t x = map_anon(*a, 2, 0x41);
  long err = 0;
  auto c = a->fork("c", &err);
  ASSERT_TRUE(c) << err;
  EXPECT_GT(c->pid(), 0);
  EXPECT_NE(c->pid(), a->pid());
  expect_bytes(*c, x, 2 * kPage, 0x41);
  EXPECT_EQ(c->write(x, kPage, 0x42).sig, 0);
  expect_bytes(*a, x, 2 * kPage, 0x41);
  expect_bytes(*c, x, kPage, 0x42);
  EXPECT_EQ(a->write(x + kPage, kPage, 0x43).sig, 0);
  expect_bytes(*c, x + kPage, kPage, 0x41);
  // The parent goes; the child is orphaned but keeps working.
  int cpid = c->pid();
  int pidfd = open_pidfd(cpid);
  ASSERT_GE(pidfd, 0);
  a->exit();
  expect_bytes(*c, x, kPage, 0x42);
  EXPECT_EQ(c->munmap(x, kPage), 0);
  EXPECT_EQ(c->read(x, 1, -1).sig, SIGSEGV);
  EXPECT_FALSE(exits_within(pidfd, 0));
  c->exit();
  EXPECT_FALSE(c->alive());
  EXPECT_TRUE(exits_within(pidfd, 10000));
  ::close(pidfd);
}

TEST_F(HostTest, ForkChainOfThree) {
  uint64_t x = map_anon(*a, 1, 1);
  long err = 0;
  auto b = a->fork("b", &err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(b->write(x, kPage, 2).sig, 0);
  auto c = b->fork("c", &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(c->name(), "c");
  expect_bytes(*c, x, kPage, 2);
  EXPECT_EQ(c->write(x, kPage, 3).sig, 0);
  expect_bytes(*a, x, kPage, 1);
  expect_bytes(*b, x, kPage, 2);
  expect_bytes(*c, x, kPage, 3);
  // The middle one goes first: neither end notices.
  b->exit();
  expect_bytes(*a, x, kPage, 1);
  expect_bytes(*c, x, kPage, 3);
  auto d = c->fork("d", &err);  // an orphan forks too
  ASSERT_TRUE(d) << err;
  expect_bytes(*d, x, kPage, 3);
  c->exit();
  d->exit();
}

TEST_F(HostTest, GrandchildIsKilledByDestructor) {
  long err = 0;
  auto c = a->fork("c", &err);
  ASSERT_TRUE(c) << err;
  int pidfd = open_pidfd(c->pid());
  ASSERT_GE(pidfd, 0);
  c.reset();
  EXPECT_TRUE(exits_within(pidfd, 10000));
  ::close(pidfd);
  // The parent did not notice.
  EXPECT_GT(a->mmap(0, kPage, kRW, kAnon, -1, 0), 0);
}

TEST_F(HostTest, ForkOfExitedProcessFails) {
  a->exit();
  long err = 0;
  EXPECT_FALSE(a->fork("c", &err));
  EXPECT_EQ(err, -EPIPE);
}

// ---- vmsplice: get_user_pages_fast, references held by a pipe ----

TEST_F(HostTest, VmspliceReadsPages) {
  uint64_t x = map_anon(*a, 4, 0x61);
  auto h = host_gup_vmsplice(*a, x, 4);
  ASSERT_EQ(h->ret, 4);
  expect_handle_bytes(*h, 0, 4 * kPage, 0x61);
  expect_handle_bytes(*h, kPage + 5, 10, 0x61);  // tee leaves the pipe full: read again
  std::vector<uint8_t> buf(kPage);
  EXPECT_EQ(h->read(3 * kPage + 1, buf.data(), kPage), -EFAULT);
  EXPECT_EQ(h->write(0, buf.data(), 1), -EOPNOTSUPP);
}

TEST_F(HostTest, VmspliceLargerThanDefaultPipe) {
  uint64_t x = map_anon(*a, 64, 0x62);
  auto h = host_gup_vmsplice(*a, x, 64);
  ASSERT_EQ(h->ret, 64);
  expect_handle_bytes(*h, 0, 64 * kPage, 0x62);
}

TEST_F(HostTest, VmspliceOfUnmappedFaults) {
  uint64_t x = map_anon(*a, 2);
  ASSERT_EQ(a->munmap(x, 2 * kPage), 0);
  auto h = host_gup_vmsplice(*a, x, 2);
  EXPECT_EQ(h->ret, -EFAULT);
}

TEST_F(HostTest, VmspliceSeesLaterWritesOfTheSameProcess) {
  // No fork, no CoW: the pipe references the very pages the process writes.
  uint64_t x = map_anon(*a, 2, 0x61);
  auto h = host_gup_vmsplice(*a, x, 2);
  ASSERT_EQ(h->ret, 2);
  EXPECT_EQ(a->write(x, 2 * kPage, 0x62).sig, 0);
  expect_handle_bytes(*h, 0, 2 * kPage, 0x62);
}

TEST_F(HostTest, VmspliceThenForkChildWritesCopy) {
  uint64_t x = map_anon(*a, 2, 0x61);
  auto h = host_gup_vmsplice(*a, x, 2);
  ASSERT_EQ(h->ret, 2);
  long err = 0;
  auto c = a->fork("c", &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(c->write(x, 2 * kPage, 0x63).sig, 0);  // the child breaks CoW
  expect_handle_bytes(*h, 0, 2 * kPage, 0x61);
  expect_bytes(*a, x, 2 * kPage, 0x61);
  c->exit();
}

TEST_F(HostTest, VmspliceKeepsOldPagesAfterDontneed) {
  uint64_t x = map_anon(*a, 2, 0x61);
  auto h = host_gup_vmsplice(*a, x, 2);
  ASSERT_EQ(h->ret, 2);
  ASSERT_EQ(a->madvise(x, 2 * kPage, MADV_DONTNEED), 0);
  EXPECT_EQ(a->write(x, 2 * kPage, 0x64).sig, 0);  // new pages
  expect_handle_bytes(*h, 0, 2 * kPage, 0x61);
}

TEST_F(HostTest, VmspliceOutlivesTheProcess) {
  uint64_t x = map_anon(*a, 2, 0x65);
  auto h = host_gup_vmsplice(*a, x, 2);
  ASSERT_EQ(h->ret, 2);
  a->exit();
  expect_handle_bytes(*h, 0, 2 * kPage, 0x65);
}

// ---- io_uring fixed buffers: pin_user_pages(FOLL_WRITE | FOLL_LONGTERM) ----

TEST_F(HostTest, IouringDeviceWritesAndReads) {
  uint64_t x = map_anon(*a, 4, 0x10);
  auto h = host_gup_iouring(*a, x, 4);
  ASSERT_EQ(h->ret, 4);
  std::vector<uint8_t> buf(kPage, 0x99);
  ASSERT_EQ(h->write(kPage, buf.data(), kPage), 0);  // the device writes the process's memory
  expect_bytes(*a, x, kPage, 0x10);
  expect_bytes(*a, x + kPage, kPage, 0x99);
  EXPECT_EQ(a->write(x + 2 * kPage, kPage, 0x55).sig, 0);  // the process writes, the device reads
  expect_handle_bytes(*h, 2 * kPage, kPage, 0x55);
  expect_handle_bytes(*h, 2 * kPage + 100, 7, 0x55);
  expect_handle_bytes(*h, 0, kPage, 0x10);
  EXPECT_EQ(h->read(3 * kPage + 1, buf.data(), kPage), -EFAULT);  // beyond the buffer
  EXPECT_EQ(h->write(4 * kPage, buf.data(), 1), -EFAULT);
}

TEST_F(HostTest, IouringNeedsWritableMappedMemory) {
  long ro = a->mmap(0, 2 * kPage, PROT_READ, kAnon, -1, 0);
  ASSERT_GT(ro, 0);
  EXPECT_EQ(host_gup_iouring(*a, ro, 2)->ret, -EFAULT);  // FOLL_WRITE on a read-only mapping
  ASSERT_EQ(a->munmap(ro, 2 * kPage), 0);
  EXPECT_EQ(host_gup_iouring(*a, ro, 2)->ret, -EFAULT);
}

TEST_F(HostTest, IouringPinSurvivesForkAndExit) {
  uint64_t x = map_anon(*a, 2, 0x20);
  auto h = host_gup_iouring(*a, x, 2);
  ASSERT_EQ(h->ret, 2);
  // fork copies pinned anonymous pages for the child right away, so the
  // parent keeps the pinned ones and writes them without CoW.
  long err = 0;
  auto c = a->fork("c", &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(a->write(x, kPage, 0x21).sig, 0);
  EXPECT_EQ(c->write(x + kPage, kPage, 0x22).sig, 0);
  expect_handle_bytes(*h, 0, kPage, 0x21);
  expect_handle_bytes(*h, kPage, kPage, 0x20);
  expect_bytes(*c, x, kPage, 0x20);
  c->exit();
  // The ring holds the pins past the process's exit.
  a->exit();
  expect_handle_bytes(*h, 0, kPage, 0x21);
  std::vector<uint8_t> buf(kPage, 0x23);
  EXPECT_EQ(h->write(0, buf.data(), kPage), 0);
  expect_handle_bytes(*h, 0, kPage, 0x23);
}

// VmPin of /proc/PID/status, in kB (-1 if not found).
long vm_pin_kb(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmPin:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST_F(HostTest, IouringPinsAreChargedToTheRingOwnerUntilUnregistered) {
  uint64_t x = map_anon(*a, 4, 1);
  long before = vm_pin_kb(::getpid());
  ASSERT_GE(before, 0);
  {
    auto h = host_gup_iouring(*a, x, 4);
    ASSERT_EQ(h->ret, 4);
    // The ring's accounting mm is its creator's (the runner's), not that of
    // the process whose pages are pinned.
    EXPECT_EQ(vm_pin_kb(::getpid()), before + 16);
    EXPECT_EQ(vm_pin_kb(a->pid()), 0);
  }
  EXPECT_EQ(vm_pin_kb(::getpid()), before);  // the handle unregistered the buffer
}

}  // namespace
}  // namespace mmlab::host
