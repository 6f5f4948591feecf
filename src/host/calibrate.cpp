// `mmlab calibrate`: costs measured on the running kernel (see
// include/mmlab/calibrate.h). Every THP setting is changed through one
// SysfsGuard, so the machine's settings come back when calibration ends,
// fails or is interrupted; the forked CoW children are registered with it
// so an interrupt kills them too.
#include "mmlab/calibrate.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cpuid.h>
#include <cstring>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/input_file.h"
#include "host/sysfs.h"
#include "mmlab/system.h"
#include "mmlab/types.h"
#include "nlohmann/json.hpp"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names.
#include <liburing.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mmlab::host {
namespace {

constexpr uint64_t kAlign = 2ull << 20;  // regions start on a PMD boundary so every folio size fits
// The registered buffer: the 256 MiB whatever the fault region, as
// the host's cost per pinned page is not constant in the buffer size (with
// 64K folios it was 83 ns at 32 MiB and 1393 ns at 1 GiB on a 6.18 VM; for
// each new folio head io_uring's headpage_already_acct() scans the pages
// already taken, so the total grows with the square of the folio count).
constexpr uint64_t kPinBytes = 256ull << 20;
// Runs made and thrown away before each measurement. In a VM the first use
// of guest memory costs a hypervisor fault (a 2M first touch measured 3.7 ms,
// then 0.2 ms): the hypervisor's cost, not the kernel's we calibrate.
constexpr int kWarmupRuns = 1;
constexpr const char* kThp = "transparent_hugepage";

// ---- folio sizes and their sysfs switches ----

struct FolioSize {
  uint64_t bytes = 0;
  std::string dir;  // "transparent_hugepage/hugepages-64kB"; empty for the base page
};

uint64_t base_page() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

// The base page, then every anonymous THP size the host lets us switch on
// (a hugepages-<N>kB directory with an `enabled` file: on 6.18 the 8kB
// directory is shmem-only and has none), up to the PMD size.
std::vector<FolioSize> anon_folio_sizes() {
  std::vector<FolioSize> v{{base_page(), ""}};
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(std::string("/sys/kernel/mm/") + kThp, ec)) {
    std::string n = e.path().filename().string();
    unsigned long kb = 0;
    if (sscanf(n.c_str(), "hugepages-%lukB", &kb) != 1 || kb * 1024 > kAlign) continue;
    if (!std::filesystem::exists(e.path() / "enabled", ec)) continue;
    v.push_back({kb * 1024, std::string(kThp) + "/" + n});
  }
  std::sort(v.begin(), v.end(), [](const FolioSize& a, const FolioSize& b) { return a.bytes < b.bytes; });
  return v;
}

// Anonymous faults get folios of `one` size only: that size `always`, the
// others `never` (all of them for the base page). The top level is
// `madvise`, which only the PMD size's `inherit` would consult.
int enable_only(SysfsGuard* g, const std::vector<FolioSize>& all, const FolioSize& one, std::string* err) {
  std::vector<std::pair<std::string, std::string>> w = {{std::string(kThp) + "/enabled", "madvise"}};
  for (auto& s : all)
    if (!s.dir.empty()) w.push_back({s.dir + "/enabled", s.bytes == one.bytes ? "always" : "never"});
  for (auto& [rel, v] : w)
    if (int e = g->write(rel, v)) {
      *err = "cannot write " + v + " to /sys/kernel/mm/" + rel + ": " + errno_name(e);
      return e;
    }
  return 0;
}

// The mTHP fault statistics of one size (sums over every size for the base
// page: anything allocated there is a folio that should not have been).
struct FolioStat {
  uint64_t alloc = 0, fallback = 0;
};

uint64_t read_stat(const std::string& rel) {
  std::string v;
  return sysfs_read(rel, &v) == 0 ? std::strtoull(v.c_str(), nullptr, 10) : 0;
}

FolioStat folio_stat(const std::vector<FolioSize>& all, const FolioSize& one) {
  FolioStat st;
  for (auto& s : all) {
    if (s.dir.empty() || (!one.dir.empty() && s.bytes != one.bytes)) continue;
    st.alloc += read_stat(s.dir + "/stats/anon_fault_alloc");
    st.fallback += read_stat(s.dir + "/stats/anon_fault_fallback");
  }
  return st;
}

FolioStat operator-(const FolioStat& a, const FolioStat& b) { return {a.alloc - b.alloc, a.fallback - b.fallback}; }

// ---- measuring ----

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// This thread's minor faults so far. Callers call it once more just before
// the reading they keep, so that the stack page it writes is already
// written (after fork it is a CoW page too, and its fault would count).
uint64_t minflt() {
  struct rusage ru = {};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<uint64_t>(ru.ru_minflt);
}

// One store every `stride` bytes; volatile so that each store is made.
void touch(uint8_t* p, uint64_t bytes, uint64_t stride, uint8_t value) {
  volatile uint8_t* q = p;
  for (uint64_t off = 0; off < bytes; off += stride) q[off] = value;
}

std::string run_label(int i, int runs) { return i < 0 ? " (warm-up)" : fmt::format(" ({}/{})", i + 1, runs); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A private anonymous region of `bytes`, PMD-aligned, with MADV_HUGEPAGE
// (so that THP allocation may compact, as with defrag=madvise).
class Region {
 public:
  explicit Region(uint64_t bytes) : bytes_(bytes) {
    void* raw = mmap(nullptr, bytes + kAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      err_ = -errno;
      return;
    }
    raw_ = static_cast<uint8_t*>(raw);
    data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_) + kAlign - 1) & ~(kAlign - 1));
    if (madvise(data_, bytes_, MADV_HUGEPAGE)) err_ = -errno;
  }
  ~Region() {
    if (raw_) munmap(raw_, bytes_ + kAlign);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  int error() const { return err_; }
  uint8_t* data() const { return data_; }

 private:
  uint64_t bytes_;
  uint8_t* raw_ = nullptr;
  uint8_t* data_ = nullptr;
  int err_ = 0;
};

// A forked child that keeps the parent's pages shared (so that the
// parent's writes are CoW faults) until finish(): it blocks on a pipe and
// exits when the parent closes its end. Always reaped, also on error paths.
class SharingChild {
 public:
  ~SharingChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      (void)finish();
    }
  }
  int start() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC)) return -errno;
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      int e = -errno;
      close(fds[0]);
      close(fds[1]);
      pid_ = -1;
      return e;
    }
    if (pid_ == 0) wait_and_exit(fds, parent);
    register_host_pid(pid_);
    close(fds[0]);
    wfd_ = fds[1];
    return 0;
  }
  // Closes the pipe and reaps the child: 0 if it exited normally.
  int finish() {
    if (wfd_ >= 0) close(wfd_);
    wfd_ = -1;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    unregister_host_pid(pid_);
    pid_ = -1;
    return r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
  }

 private:
  // In the child: only async-signal-safe calls. The parent's interrupt
  // handler must not run here (it restores sysfs), and the child dies with
  // its parent rather than outlive a crashed calibration.
  [[noreturn]] static void wait_and_exit(int fds[2], pid_t parent) {
    for (int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    close(fds[1]);
    char c;
    while (read(fds[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  pid_t pid_ = -1;
  int wfd_ = -1;
};

struct Context {
  const CalibrateOptions& o;
  std::vector<FolioSize> sizes;
  uint64_t page = base_page();
  CostProfile* p;
  void progress(const std::string& what) const {
    if (o.progress) o.progress(what);
  }
};

// One run of first touch: a fresh region, one write per folio.
struct TouchRun {
  double ns = 0;
  uint64_t faults = 0;
  FolioStat stat;
};

int first_touch_run(const Context& c, const FolioSize& s, TouchRun* r) {
  Region reg(c.p->region_bytes);
  if (reg.error()) return reg.error();
  FolioStat st0 = folio_stat(c.sizes, s);
  (void)minflt();
  uint64_t f0 = minflt(), t0 = now_ns();
  touch(reg.data(), c.p->region_bytes, s.bytes, 1);
  uint64_t t1 = now_ns(), f1 = minflt();
  r->stat = folio_stat(c.sizes, s) - st0;
  r->ns = static_cast<double>(t1 - t0);
  r->faults = f1 - f0;
  return 0;
}

// One run of CoW: populate with folios of the size, fork, then one write
// per base page in the parent while the child still maps everything.
struct CowRun {
  double ns = 0;
  uint64_t faults = 0;
  FolioStat populate;
};

int cow_run(const Context& c, const FolioSize& s, CowRun* r) {
  Region reg(c.p->region_bytes);
  if (reg.error()) return reg.error();
  FolioStat st0 = folio_stat(c.sizes, s);
  touch(reg.data(), c.p->region_bytes, s.bytes, 1);
  r->populate = folio_stat(c.sizes, s) - st0;
  SharingChild child;
  if (int e = child.start()) return e;
  (void)minflt();
  uint64_t f0 = minflt(), t0 = now_ns();
  touch(reg.data(), c.p->region_bytes, c.page, 2);
  uint64_t t1 = now_ns(), f1 = minflt();
  r->ns = static_cast<double>(t1 - t0);
  r->faults = f1 - f0;
  return child.finish();
}

// The statistics are machine-wide: other processes faulting while a size is
// `always` add to them, so only fewer folios than ours, or any fallback,
// says that the size was not what we measured.
void note_folios(const Context& c, const FolioSize& s, const FolioStat& st, uint64_t want, const char* what) {
  if (s.dir.empty() ? st.alloc == 0 : st.alloc >= want && st.fallback == 0) return;
  c.p->notes.push_back(fmt::format("{} {}: {} large folios allocated where {} were expected, {} fallbacks (all runs)",
                                   what, folio_size_label(s.bytes), st.alloc, want, st.fallback));
}

int measure_faults(const Context& c, const FolioSize& s, FaultCost* fc) {
  const uint64_t bytes = c.p->region_bytes, want = s.dir.empty() ? 0 : bytes / s.bytes;
  fc->size = folio_size_label(s.bytes);
  fc->folio_bytes = s.bytes;
  FolioStat total;
  for (int i = -kWarmupRuns; i < c.o.runs; i++) {
    c.progress("first touch " + fc->size + run_label(i, c.o.runs));
    TouchRun r;
    if (int e = first_touch_run(c, s, &r)) return e;
    if (i < 0) continue;
    fc->faults = r.faults;
    total.alloc += r.stat.alloc;
    total.fallback += r.stat.fallback;
    fc->samples_ns_per_fault.push_back(r.faults ? r.ns / static_cast<double>(r.faults) : 0);
  }
  note_folios(c, s, total, want * static_cast<uint64_t>(c.o.runs), "first touch");
  fc->folios = total.alloc / static_cast<uint64_t>(c.o.runs);
  fc->fallback = total.fallback;
  fc->ns_per_fault = median(fc->samples_ns_per_fault);
  fc->ns_per_4k = fc->ns_per_fault * static_cast<double>(c.page) / static_cast<double>(s.bytes);
  return 0;
}

int measure_cow(const Context& c, const FolioSize& s, FaultCost* fc) {
  const uint64_t bytes = c.p->region_bytes, want = s.dir.empty() ? 0 : bytes / s.bytes;
  FolioStat populate;
  for (int i = -kWarmupRuns; i < c.o.runs; i++) {
    c.progress("CoW " + fc->size + run_label(i, c.o.runs));
    CowRun r;
    if (int e = cow_run(c, s, &r)) return e;
    if (i < 0) continue;
    fc->cow_faults = r.faults;
    populate.alloc += r.populate.alloc;
    populate.fallback += r.populate.fallback;
    fc->cow_samples_ns_per_fault.push_back(r.faults ? r.ns / static_cast<double>(r.faults) : 0);
  }
  note_folios(c, s, populate, want * static_cast<uint64_t>(c.o.runs), "CoW populate");
  fc->cow_fallback = populate.fallback;
  fc->cow_faults_per_4k = static_cast<double>(fc->cow_faults) / static_cast<double>(bytes / c.page);
  fc->cow_ns_per_fault = median(fc->cow_samples_ns_per_fault);
  fc->cow_ns_per_4k = fc->cow_ns_per_fault * fc->cow_faults_per_4k;
  return 0;
}

// An io_uring instance, torn down with its registered buffers on return.
class Ring {
 public:
  Ring() { err_ = io_uring_queue_init(4, &ring_, 0); }
  ~Ring() {
    if (err_ == 0) io_uring_queue_exit(&ring_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  int error() const { return err_; }
  io_uring* get() { return &ring_; }

 private:
  io_uring ring_ = {};
  int err_ = 0;
};

// Registration of the populated region as one fixed buffer: the kernel's
// io_sqe_buffers_register -> pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM).
int measure_pin(const Context& c, const FolioSize& s, uint64_t bytes, PinCost* pc, std::string* err) {
  pc->size = folio_size_label(s.bytes);
  pc->folio_bytes = s.bytes;
  pc->bytes = bytes;
  Region reg(bytes);
  if (reg.error()) return reg.error();
  FolioStat st0 = folio_stat(c.sizes, s);
  touch(reg.data(), bytes, s.bytes, 1);
  FolioStat st = folio_stat(c.sizes, s) - st0;
  pc->fallback = st.fallback;
  note_folios(c, s, st, s.dir.empty() ? 0 : bytes / s.bytes, "pin populate");
  Ring ring;
  if (ring.error()) {
    *err = std::string("io_uring_queue_init: ") + errno_name(ring.error());
    return ring.error();
  }
  struct iovec iov = {reg.data(), bytes};
  for (int i = -kWarmupRuns; i < c.o.runs; i++) {
    c.progress("io_uring register " + pc->size + run_label(i, c.o.runs));
    uint64_t t0 = now_ns();
    int e = io_uring_register_buffers(ring.get(), &iov, 1);
    uint64_t t1 = now_ns();
    if (e < 0) {
      *err = std::string("io_uring_register_buffers: ") + errno_name(e);
      return e;
    }
    e = io_uring_unregister_buffers(ring.get());
    uint64_t t2 = now_ns();
    if (e < 0) {
      *err = std::string("io_uring_unregister_buffers: ") + errno_name(e);
      return e;
    }
    if (i < 0) continue;
    pc->register_samples_us.push_back(static_cast<double>(t1 - t0) / 1e3);
    pc->unregister_samples_us.push_back(static_cast<double>(t2 - t1) / 1e3);
  }
  double pages = static_cast<double>(bytes / c.page);
  pc->register_us = median(pc->register_samples_us);
  pc->unregister_us = median(pc->unregister_samples_us);
  pc->register_ns_per_4k = pc->register_us * 1e3 / pages;
  pc->unregister_ns_per_4k = pc->unregister_us * 1e3 / pages;
  return 0;
}

// ---- the machine ----

std::string first_line_with(const char* file, const char* prefix) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line.substr(std::min(line.size(), line.find(':') + 1));
  return "";
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm = {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The hypervisor's CPUID vendor (leaf 0x40000000), "none" on bare metal.
std::string hypervisor_vendor() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  if (!(c & (1u << 31))) return "none";
  __cpuid(0x40000000, a, b, c, d);
  char v[13] = {};
  std::memcpy(v, &b, 4);
  std::memcpy(v + 4, &c, 4);
  std::memcpy(v + 8, &d, 4);
  std::string s = trim(v);
  if (s.find("KVM") != std::string::npos) return "KVM";
  return s.empty() ? "unknown" : s;
}

// A boot parameter's value, or "default" (the kernel's build-time default).
std::string boot_param(const std::string& key) {
  std::ifstream in("/proc/cmdline");
  for (std::string w; in >> w;)
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  return "default";
}

std::string mitigations_in_effect() {
  std::vector<std::string> on;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/sys/devices/system/cpu/vulnerabilities", ec)) {
    std::ifstream in(e.path());
    std::string v;
    std::getline(in, v);
    if (v.rfind("Mitigation", 0) == 0) on.push_back(e.path().filename().string());
  }
  std::sort(on.begin(), on.end());
  std::string s;
  for (auto& n : on) s += (s.empty() ? "" : ",") + n;
  return s.empty() ? "none" : s;
}

std::string memcg_mode() {
  std::ifstream v2("/sys/fs/cgroup/cgroup.controllers");
  std::string l;
  if (std::getline(v2, l) && l.find("memory") != std::string::npos) return "v2";
  std::ifstream v1("/proc/cgroups");
  for (std::string line; std::getline(v1, line);) {
    std::istringstream f(line);
    std::string name;
    int hier = 0, n = 0, enabled = 0;
    if (f >> name >> hier >> n >> enabled && name == "memory" && enabled) return "v1";
  }
  return "none";
}

std::string file_word(const std::string& path, const std::string& otherwise) {
  std::ifstream in(path);
  std::string w;
  return in >> w ? w : otherwise;
}

// The selected value of a sysfs choice ("always defer [madvise] never").
std::string sysfs_choice(const std::string& rel) {
  std::string v;
  if (sysfs_read(rel, &v)) return "unknown";
  auto a = v.find('['), b = v.find(']');
  return a != std::string::npos && b > a ? v.substr(a + 1, b - a - 1) : trim(v);
}

MachineInfo describe_machine(const std::vector<FolioSize>& sizes) {
  MachineInfo m;
  struct utsname un = {};
  if (uname(&un) == 0) m.arch = un.machine;
  m.hypervisor = hypervisor_vendor();
  m.init_on_alloc = boot_param("init_on_alloc");
  m.init_on_free = boot_param("init_on_free");
  m.mitigations = boot_param("mitigations") == "off" ? "off" : mitigations_in_effect();
  m.governor = file_word("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "none");
  m.thp_defrag = sysfs_choice(std::string(kThp) + "/defrag");
  m.khugepaged_defrag = file_word(std::string("/sys/kernel/mm/") + kThp + "/khugepaged/defrag", "unknown");
  m.memcg = memcg_mode();
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.hostname = host;
  m.cpu = trim(first_line_with("/proc/cpuinfo", "model name"));
  if (m.cpu.empty()) m.cpu = "unknown";
  struct utsname u = {};
  if (uname(&u) == 0) m.kernel = u.release;
  m.nproc = sysconf(_SC_NPROCESSORS_ONLN);
  m.page_size = sysconf(_SC_PAGESIZE);
  m.mem_total_kb = std::strtoull(trim(first_line_with("/proc/meminfo", "MemTotal")).c_str(), nullptr, 10);
  std::vector<std::string> rels = {std::string(kThp) + "/enabled", std::string(kThp) + "/defrag",
                                   std::string(kThp) + "/use_zero_page"};
  for (auto& s : sizes)
    if (!s.dir.empty()) rels.push_back(s.dir + "/enabled");
  for (auto& rel : rels) {
    std::string v;
    if (sysfs_read(rel, &v) == 0) m.thp_before[rel] = v;
  }
  return m;
}

double loadavg_1min() {
  double l = 0;
  std::ifstream in("/proc/loadavg");
  in >> l;
  return l;
}

long involuntary_switches() {
  struct rusage ru = {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nivcsw;
}

// Timings taken while other work competes for the CPUs are not the
// kernel's costs; say so in the profile rather than refuse.
void note_noise(CostProfile* p) {
  if (p->loadavg > 0.5 * static_cast<double>(p->machine.nproc))
    p->notes.push_back(fmt::format("the machine was busy (load average {:.2f} at the start): costs may be inflated", p->loadavg));
  if (p->involuntary_switches > 1000)
    p->notes.push_back(fmt::format("noisy run: {} involuntary context switches", p->involuntary_switches));
}

int measure_all(const Context& c, SysfsGuard* guard, std::string* err) {
  CostProfile* p = c.p;
  for (auto& s : c.sizes) {
    if (int e = enable_only(guard, c.sizes, s, err)) return e;
    FaultCost fc;
    int e = measure_faults(c, s, &fc);
    if (e == 0) e = measure_cow(c, s, &fc);
    if (e) {
      *err = fmt::format("{} faults: {}", folio_size_label(s.bytes), errno_name(e));
      return e;
    }
    p->faults.push_back(fc);
  }
  for (uint64_t want : {c.page, uint64_t{64} << 10, kAlign}) {
    auto it = std::find_if(c.sizes.begin(), c.sizes.end(), [&](const FolioSize& s) { return s.bytes == want; });
    if (it == c.sizes.end()) {
      p->notes.push_back("pin " + folio_size_label(want) + ": the host cannot enable anonymous folios of this size");
      continue;
    }
    if (int e = enable_only(guard, c.sizes, *it, err)) return e;
    PinCost pc;
    if (int e = measure_pin(c, *it, kPinBytes, &pc, err)) {
      if (e != -ENOSYS && e != -EPERM) return e;
      p->notes.push_back("pin: io_uring is not available here (" + *err + ")");  // kernel.io_uring_disabled
      err->clear();
      break;
    }
    p->pins.push_back(pc);
  }
  return 0;
}

}  // namespace

std::string folio_size_label(uint64_t bytes) {
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + "M";
  return std::to_string(bytes >> 10) + "K";
}

MachineInfo describe_this_machine() { return describe_machine(anon_folio_sizes()); }

std::vector<std::string> cost_header_differences(const MachineInfo& prof, const MachineInfo& here) {
  std::vector<std::string> d;
  auto cmp = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) d.push_back(fmt::format("{}: {} here, {} in the profile", what, b.empty() ? "?" : b, a.empty() ? "?" : a));
  };
  cmp("arch", prof.arch, here.arch);
  cmp("cpu", prof.cpu, here.cpu);
  cmp("hypervisor", prof.hypervisor, here.hypervisor);
  cmp("online cpus", std::to_string(prof.nproc), std::to_string(here.nproc));
  cmp("init_on_alloc", prof.init_on_alloc, here.init_on_alloc);
  cmp("init_on_free", prof.init_on_free, here.init_on_free);
  cmp("mitigations", prof.mitigations, here.mitigations);
  cmp("governor", prof.governor, here.governor);
  cmp("THP defrag", prof.thp_defrag, here.thp_defrag);
  cmp("khugepaged defrag", prof.khugepaged_defrag, here.khugepaged_defrag);
  cmp("memcg", prof.memcg, here.memcg);
  return d;
}

const TermCost* CostProfile::term(const std::string& id) const {
  for (auto& t : terms)
    if (t.id == id) return &t;
  return nullptr;
}

const FaultCost* CostProfile::fault_cost(uint64_t folio_bytes) const {
  for (auto& f : faults)
    if (f.folio_bytes == folio_bytes) return &f;
  return nullptr;
}

const PinCost* CostProfile::pin_cost(uint64_t folio_bytes) const {
  for (auto& pc : pins)
    if (pc.folio_bytes == folio_bytes) return &pc;
  return nullptr;
}

bool host_calibration_available(std::string* why) { return host_available(why); }

int calibrate_host(const CalibrateOptions& o, CostProfile* out, std::string* err) {
  if (o.runs < 1 || o.region_bytes == 0) {
    *err = "runs and region must be positive";
    return -EINVAL;
  }
  if (!host_available(err)) return -EPERM;
  if (o.progress) o.progress("waiting for the host lock (another host run holds it)");
  HostLock lock;  // settings and mTHP statistics are machine-wide
  uint64_t t0 = now_ns();
  CostProfile p;
  Context c{o, anon_folio_sizes(), base_page(), &p};
  p.name = o.name;
  p.date = utc_now();
  p.machine = describe_machine(c.sizes);  // before the guard changes anything
  p.build = build_description();
  p.commit = build_commit();
  p.instrumented = build_is_instrumented();
  p.region_bytes = (o.region_bytes + kAlign - 1) & ~(kAlign - 1);
  p.runs = o.runs;
  p.loadavg = loadavg_1min();
  long ivcsw0 = involuntary_switches();
  SysfsGuard guard;
  int e = measure_all(c, &guard, err);
  guard.restore();
  if (e) return e;
  p.involuntary_switches = involuntary_switches() - ivcsw0;
  p.seconds = static_cast<double>(now_ns() - t0) / 1e9;
  note_noise(&p);
  *out = std::move(p);
  return 0;
}

// ---- the report ----

std::string cost_profile_table(const CostProfile& p) {
  const auto& m = p.machine;
  std::string t = fmt::format("# cost profile {} ({})\n\n", p.name, p.date);
  t += fmt::format("CPU: {} ({} cores, {} MiB); kernel {}; page size {}\n", m.cpu, m.nproc, m.mem_total_kb >> 10,
                   m.kernel, m.page_size);
  std::string thp;
  for (auto& [rel, v] : m.thp_before) thp += fmt::format("{}{}={}", thp.empty() ? "" : ", ", rel.substr(rel.find('/') + 1), v);
  t += "THP before calibrating: " + thp + "\n";
  t += fmt::format("measured by: {} (commit {}){}\n", p.build, p.commit, p.instrumented ? " [instrumented build]" : "");
  t += fmt::format("\n## first-touch anonymous faults: one write per folio of a fresh {} MiB mapping (median of {} runs after a warm-up)\n\n",
                   p.region_bytes >> 20, p.runs);
  t += "| folio | faults | ns/fault | ns/4K page | anon_fault_alloc (machine-wide) | fallbacks |\n|---|---:|---:|---:|---:|---:|\n";
  for (auto& f : p.faults)
    t += fmt::format("| {} | {} | {:.0f} | {:.1f} | {} | {} |\n", f.size, f.faults, f.ns_per_fault, f.ns_per_4k,
                     f.folio_bytes == static_cast<uint64_t>(m.page_size) ? std::string("-") : std::to_string(f.folios), f.fallback);
  t += fmt::format("\n## CoW faults: fork, then one write per 4K page of {} MiB in the parent (median of {} runs after a warm-up)\n\n",
                   p.region_bytes >> 20, p.runs);
  t += "| folio | CoW faults | faults/4K page | ns/CoW fault | ns/4K page | populate fallbacks |\n|---|---:|---:|---:|---:|---:|\n";
  for (auto& f : p.faults)
    t += fmt::format("| {} | {} | {:.3f} | {:.0f} | {:.1f} | {} |\n", f.size, f.cow_faults, f.cow_faults_per_4k,
                     f.cow_ns_per_fault, f.cow_ns_per_4k, f.cow_fallback);
  if (!p.pins.empty()) {
    t += fmt::format("\n## long-term pin: io_uring buffer registration of {} MiB, pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM) (median of {} runs after a warm-up)\n\n",
                     p.pins.front().bytes >> 20, p.runs);
    t += "| folio | register us | ns/4K page | unregister us | ns/4K page | populate fallbacks |\n|---|---:|---:|---:|---:|---:|\n";
    for (auto& pc : p.pins)
      t += fmt::format("| {} | {:.1f} | {:.2f} | {:.1f} | {:.2f} | {} |\n", pc.size, pc.register_us, pc.register_ns_per_4k,
                       pc.unregister_us, pc.unregister_ns_per_4k, pc.fallback);
  }
  for (auto& n : p.notes) t += "\nnote: " + n;
  if (!p.notes.empty()) t += "\n";
  return t;
}

// ---- JSON ----

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FaultCost, size, folio_bytes, faults, folios, fallback, ns_per_fault, ns_per_4k,
                                   samples_ns_per_fault, cow_faults, cow_faults_per_4k, cow_ns_per_fault, cow_ns_per_4k,
                                   cow_fallback, cow_samples_ns_per_fault)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PinCost, size, folio_bytes, bytes, fallback, register_us, unregister_us,
                                   register_ns_per_4k, unregister_ns_per_4k, register_samples_us, unregister_samples_us)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MachineInfo, hostname, cpu, kernel, nproc, page_size, mem_total_kb,
                                                thp_before, arch, hypervisor, init_on_alloc, init_on_free, mitigations,
                                                governor, thp_defrag, khugepaged_defrag, memcg)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TermCost, id, ns, lo, hi, how)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CaseFit, name, host_ns, fitted_ns, host_runs_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FitSummary, cases, condition_number, residual_median, residual_max, cases_sha,
                                   reference_ns, per_case)

namespace {
constexpr const char* kFormat = "mmlab-cost-profile";
// 2: the cost model's terms and the header's cost-moving fields;
// 3: every run of each calibration case (`mmlab calibrate --refit`).
constexpr int kVersion = 3;
}  // namespace

std::string cost_profile_to_json(const CostProfile& p) {
  nlohmann::json j = {
      {"format", kFormat},
      {"version", kVersion},
      {"name", p.name},
      {"date", p.date},
      {"machine", p.machine},
      {"build", {{"description", p.build}, {"commit", p.commit}, {"instrumented", p.instrumented}}},
      {"method",
       {{"region_bytes", p.region_bytes}, {"runs", p.runs}, {"warmup_runs", kWarmupRuns}, {"statistic", "median"},
        {"loadavg", p.loadavg}, {"involuntary_switches", p.involuntary_switches}, {"seconds", p.seconds}}},
      {"faults", p.faults},
      {"pins", p.pins},
      {"notes", p.notes},
      {"terms", p.terms},
      {"fit", p.fit},
  };
  return j.dump(2) + "\n";
}

int cost_profile_from_json(const std::string& text, CostProfile* out, std::string* err) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    const int version = j.value("version", 0);
    if (j.value("format", "") != kFormat || version < 1 || version > kVersion) {
      *err = fmt::format("not a {} file of version 1 to {}", kFormat, kVersion);
      return -EINVAL;
    }
    CostProfile p;
    j.at("name").get_to(p.name);
    j.at("date").get_to(p.date);
    j.at("machine").get_to(p.machine);
    j.at("build").at("description").get_to(p.build);
    j.at("build").at("commit").get_to(p.commit);
    j.at("build").at("instrumented").get_to(p.instrumented);
    j.at("method").at("region_bytes").get_to(p.region_bytes);
    j.at("method").at("runs").get_to(p.runs);
    j.at("method").at("loadavg").get_to(p.loadavg);
    j.at("method").at("involuntary_switches").get_to(p.involuntary_switches);
    j.at("method").at("seconds").get_to(p.seconds);
    j.at("faults").get_to(p.faults);
    j.at("pins").get_to(p.pins);
    j.at("notes").get_to(p.notes);
    if (version >= 2) {
      j.at("terms").get_to(p.terms);
      j.at("fit").get_to(p.fit);
    }
    *out = std::move(p);
    return 0;
  } catch (const nlohmann::json::exception& e) {
    *err = e.what();
    return -EINVAL;
  }
}

int save_cost_profile(const std::string& path, const CostProfile& p, std::string* err) {
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream f(path);
  f << cost_profile_to_json(p);
  f.close();
  if (!f) {
    *err = "cannot write " + path;
    return -EIO;
  }
  return 0;
}

int load_cost_profile(const std::string& path, CostProfile* out, std::string* err) {
  // A profile is a few KiB of JSON: a bounded read of a regular file.
  std::string text, why;
  if (int e = read_input_file(path, 16ull << 20, &text, &why)) {
    *err = why;
    return e;
  }
  if (int e = cost_profile_from_json(text, out, err)) {
    *err = path + ": " + *err;
    return e;
  }
  return 0;
}

}  // namespace mmlab::host
