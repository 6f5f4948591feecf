// `mmlab record` (record.h): perf record around a program, the host
// profile, perf script, the converter.
#include "record/record.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/host.h"

namespace mmlab::record {
namespace {

const char* const kTracefs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
const char* const kThpDir = "/sys/kernel/mm/transparent_hugepage";

// Events without which a trace cannot be replayed; the system calls are
// recorded where the kernel has them (mseal: 6.10).
const char* const kRequired[] = {"exceptions:page_fault_user", "exceptions:page_fault_kernel", "sched:sched_prepare_exec",
                                 "sched:sched_process_exec",   "sched:sched_process_exit",     "task:task_newtask"};
const char* const kSyscalls[] = {"mmap",     "munmap",  "mremap",      "mprotect",  "madvise",   "process_madvise",
                                 "brk",      "mlock",   "mlock2",      "mlockall",  "munlock",   "munlockall",
                                 "shmget",   "shmat",   "shmdt",       "memfd_create", "ftruncate", "fallocate",
                                 "userfaultfd", "prctl", "mseal",      "execve"};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const std::string& path) {
  std::string s = read_text(path);
  return s.substr(0, s.find('\n'));
}

std::string tracefs() {
  for (const char* t : kTracefs)
    if (access((std::string(t) + "/events/exceptions").c_str(), F_OK) == 0) return t;
  return "";
}

bool event_exists(const std::string& fs, const std::string& ev) {
  const std::string dir = fs + "/events/" + ev.substr(0, ev.find(':')) + "/" + ev.substr(ev.find(':') + 1);
  return access(dir.c_str(), F_OK) == 0;
}

// The perf program: a path, or the first match on $PATH.
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  return "";
}

int64_t vmstat(const std::string& key) {
  std::istringstream in(read_text("/proc/vmstat"));
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

int64_t number_file(const std::string& path) {
  std::string s = first_line(path);
  if (s.empty()) return -1;
  try {
    return std::stoll(s);
  } catch (...) {
    return -1;
  }
}

// tmpfs and hugetlbfs mounts, as "mount TYPE PATH" header values.
std::vector<std::string> mount_lines() {
  std::vector<std::string> out;
  std::istringstream in(read_text("/proc/self/mounts"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string dev, path, type;
    w >> dev >> path >> type;
    const std::string l = type + " " + path;
    if ((type == "tmpfs" || type == "hugetlbfs") && std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  }
  return out;
}

std::vector<std::string> event_args(const std::string& fs, bool rss) {
  std::vector<std::string> a;
  const std::string user_only = "address < 0x800000000000";
  for (const char* ev : kRequired) {
    a.insert(a.end(), {"-e", ev});
    if (std::string(ev).rfind("exceptions:", 0) == 0) a.insert(a.end(), {"--filter", user_only});
  }
  for (const char* sc : kSyscalls)
    for (const char* dir : {"sys_enter_", "sys_exit_"})
      if (event_exists(fs, std::string("syscalls:") + dir + sc)) a.insert(a.end(), {"-e", std::string("syscalls:") + dir + sc});
  if (rss) a.insert(a.end(), {"-e", "kmem:rss_stat"});
  return a;
}

// A counting page-fault event of `pid` and the tasks it makes after the
// exec (PERF_COUNT_SW_PAGE_FAULTS_MIN/MAJ: where the kernel counts
// min_flt/maj_flt). -1 if it cannot be opened.
int open_fault_counter(int pid, uint64_t config) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = config;
  a.disabled = 1;
  a.enable_on_exec = 1;
  a.inherit = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

int64_t read_counter(int fd) {
  uint64_t v = 0;
  if (fd < 0 || read(fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
  return static_cast<int64_t>(v);
}

// Runs argv with stdout to `out_path` (if set) and stderr to `err_path`;
// returns the child's pid (or -1). `keep` fds stay open in the child.
pid_t spawn(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path) {
  pid_t p = fork();
  if (p != 0) return p;
  setpgid(0, 0);  // a terminal's ^C reaches the program, never perf: mmlab stops perf when the program is done
  if (!out_path.empty()) {
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(127);
  }
  int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) _exit(127);
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Reads perf's "ack" on `fd` within `ms`. false on timeout or EOF.
bool read_ack(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  char buf[16] = {};
  return read(fd, buf, sizeof(buf) - 1) > 0 && std::strncmp(buf, "ack", 3) == 0;
}

int wait_status(pid_t p) {
  int st = 0;
  while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

// The tasks the recording follows.
struct Tracee {
  pid_t pid = -1;
  int go_fd = -1;  // launch mode: a byte here lets the program exec
  int min_fd = -1, maj_fd = -1;
};

// Launch mode: the program's process, waiting on a pipe before its exec so
// that perf follows it from its first event; PR_SET_THP_DISABLE (per
// process, inherited, kept across exec) unless --keep-thp.
int start_tracee(const RecordOptions& o, Tracee* t, std::string* err) {
  int go[2];
  if (pipe2(go, O_CLOEXEC)) return *err = std::string("pipe: ") + std::strerror(errno), -1;
  pid_t p = fork();
  if (p == 0) {
    close(go[1]);
    if (!o.keep_thp && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)) _exit(126);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(126);
    std::vector<char*> args;
    for (const std::string& s : o.command) args.push_back(const_cast<char*>(s.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "mmlab record: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(go[0]);
  if (p < 0) return close(go[1]), *err = std::string("fork: ") + std::strerror(errno), -1;
  t->pid = p;
  t->go_fd = go[1];
  t->min_fd = open_fault_counter(p, PERF_COUNT_SW_PAGE_FAULTS_MIN);
  t->maj_fd = open_fault_counter(p, PERF_COUNT_SW_PAGE_FAULTS_MAJ);
  return 0;
}

}  // namespace

bool record_available(const RecordOptions& o, std::string* why) {
  utsname u{};
  uname(&u);
  if (std::string(u.machine) != "x86_64")
    return *why = fmt::format("x86-64 only: the exceptions:page_fault_* tracepoints with their error code are x86's (this is {})",
                              u.machine),
           false;
  if (geteuid() != 0) return *why = "root is needed (perf's tracepoints and -p on other users' tasks)", false;
  const std::string fs = tracefs();
  if (fs.empty())
    return *why = "no tracefs with exceptions events (mount it: mount -t tracefs nodev /sys/kernel/tracing)", false;
  for (const char* ev : kRequired)
    if (!event_exists(fs, ev)) return *why = fmt::format("the kernel has no {} tracepoint", ev), false;
  if (o.rss && !event_exists(fs, "kmem:rss_stat")) return *why = "the kernel has no kmem:rss_stat tracepoint (--rss)", false;
  if (find_program(o.perf).empty()) return *why = fmt::format("no {} program (Debian: linux-perf)", o.perf), false;
  return true;
}

HostProfile measure_host_profile() {
  HostProfile h;
  utsname u{};
  uname(&u);
  h.release = u.release;
  h.arch = u.machine;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(kThpDir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::string rel = std::filesystem::relative(it->path(), kThpDir, ec).string();
    if (rel.find("stats") != std::string::npos) it.disable_recursion_pending();  // counters, not settings
    if (rel.find("stats") != std::string::npos || !it->is_regular_file(ec)) continue;
    std::ifstream in(it->path());
    std::string v;
    if (in && std::getline(in, v)) h.thp[rel] = v;
  }
  std::string detail;
  h.zero_page = host::probe_zero_page_here(&detail) != 0;  // unknown: assume the upstream default (mapped)
  h.fault_around_bytes = number_file("/sys/kernel/debug/fault_around_bytes");
  h.overcommit_memory = static_cast<int>(number_file("/proc/sys/vm/overcommit_memory"));
  h.numa_balancing = static_cast<int>(number_file("/proc/sys/kernel/numa_balancing"));
  h.pswpin = vmstat("pswpin");
  h.pswpout = vmstat("pswpout");
  return h;
}

std::string header_lines(const Header& h, const std::vector<std::string>& mounts, bool attach) {
  std::string s = "# mmlab command " + nlohmann::json(h.command).dump() + "\n";
  const HostProfile& p = h.host;
  s += fmt::format("# mmlab release {}\n# mmlab arch {}\n# mmlab zero_page {}\n", p.release, p.arch, p.zero_page ? 1 : 0);
  for (const auto& [k, v] : p.thp) s += fmt::format("# mmlab thp {} {}\n", k, v);
  s += fmt::format("# mmlab fault_around_bytes {}\n# mmlab overcommit_memory {}\n# mmlab numa_balancing {}\n", p.fault_around_bytes,
                   p.overcommit_memory, p.numa_balancing);
  s += fmt::format("# mmlab pswpin {}\n# mmlab pswpout {}\n", p.pswpin, p.pswpout);
  s += fmt::format("# mmlab minflt {}\n# mmlab majflt {}\n# mmlab flags {}\n", h.minflt, h.majflt, h.flags);
  if (attach) s += "# mmlab attach 1\n";
  for (const std::string& m : mounts) s += "# mmlab mount " + m + "\n";
  return s;
}

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

// Starts perf record on `target` with its events disabled, enables them
// through --control and waits for perf's ack: the program may run then.
int start_perf(const RecordOptions& o, const std::string& dir, int target, pid_t* perf, std::string* err) {
  int ctl[2], ack[2];
  if (pipe(ctl) || pipe(ack)) return *err = std::string("pipe: ") + std::strerror(errno), -1;
  std::vector<std::string> argv = {find_program(o.perf), "record", "-q", "-d", "-o", dir + "/perf.data", "-p", std::to_string(target),
                                   "-D", "-1", "--control", fmt::format("fd:{},{}", ctl[0], ack[1])};
  for (const std::string& a : event_args(tracefs(), o.rss)) argv.push_back(a);
  *perf = spawn(argv, "", dir + "/perf.err");
  close(ctl[0]);
  close(ack[1]);
  bool ok = *perf > 0 && write(ctl[1], "enable\n", 7) == 7 && read_ack(ack[0], 60000);
  close(ctl[1]);
  close(ack[0]);
  if (!ok) {
    if (*perf > 0) kill(*perf, SIGKILL), wait_status(*perf);
    return *err = "perf record did not start: " + read_text(dir + "/perf.err"), -1;
  }
  return 0;
}

// Runs the program (launch) or waits for the process to end or for ^C
// (attach), then stops perf. 0, or -1 with *err.
int run_and_stop(const RecordOptions& o, Tracee* tr, pid_t perf, const std::string& dir, RecordResult* res, std::string* err) {
  struct sigaction sa{}, old_int{}, old_term{};
  sa.sa_handler = o.pid ? on_interrupt : SIG_IGN;  // launch: ^C is the program's to handle
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  if (!o.pid) {
    if (write(tr->go_fd, "x", 1) != 1) return *err = "cannot release the program", -1;
    close(tr->go_fd);
    res->child_status = wait_status(tr->pid);
  } else {
    while (!g_interrupted && kill(o.pid, 0) == 0) usleep(100000);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  kill(perf, SIGINT);
  const int st = wait_status(perf);
  res->perf_stderr = read_text(dir + "/perf.err");
  // perf record re-raises the SIGINT it stopped on, once its file is written.
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT))
    return *err = "perf record failed: " + res->perf_stderr, -1;
  return 0;
}

int run_perf_script(const RecordOptions& o, const std::string& dir, std::string* text, RecordResult* res, std::string* err) {
  std::vector<std::string> argv = {find_program(o.perf)};
  for (const std::string& a : perf_script_args()) argv.push_back(a);
  argv.insert(argv.end(), {"-i", dir + "/perf.data"});
  pid_t p = spawn(argv, dir + "/script.txt", dir + "/script.err");
  const int st = p > 0 ? wait_status(p) : -1;
  // perf script warns that the trace field does not apply to MMAP2 and
  // the other side-band lines it prints: not news.
  std::istringstream warn(read_text(dir + "/script.err"));
  for (std::string line; std::getline(warn, line);)
    if (line.rfind("'trace' not valid for", 0) != 0) res->perf_stderr += line + "\n";
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) return *err = "perf script failed: " + read_text(dir + "/script.err"), -1;
  *text = read_text(dir + "/script.txt");
  return 0;
}

// "# mmlab size DEV INO BYTES" for every mapped file the end's stat finds
// as the trace saw it (the same device and inode).
std::string size_lines(const Trace& t) {
  std::string s;
  for (const FileEntry& f : t.files) {
    struct stat st{};
    if (f.ino && stat(f.path.c_str(), &st) == 0 && st.st_dev == f.dev && st.st_ino == f.ino)
      s += fmt::format("# mmlab size {} {} {}\n", f.dev, f.ino, st.st_size);
  }
  return s;
}

}  // namespace

int record_program(const RecordOptions& o, Trace* t, RecordResult* res, std::string* err) {
  char tmpl[] = "/tmp/mmlab-record-XXXXXX";
  if (!mkdtemp(tmpl)) return *err = std::string("mkdtemp: ") + std::strerror(errno), -1;
  const std::string dir = tmpl;
  struct RemoveDir {
    std::string d;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  Header h;
  h.command = o.command;
  h.host = measure_host_profile();
  Tracee tr;
  if (!o.pid && start_tracee(o, &tr, err)) return -1;
  pid_t perf = -1;
  if (start_perf(o, dir, o.pid ? o.pid : tr.pid, &perf, err)) {
    if (!o.pid) kill(tr.pid, SIGKILL), wait_status(tr.pid);
    return -1;
  }
  if (run_and_stop(o, &tr, perf, dir, res, err)) return -1;
  h.minflt = read_counter(tr.min_fd);
  h.majflt = read_counter(tr.maj_fd);
  for (int fd : {tr.min_fd, tr.maj_fd})
    if (fd >= 0) close(fd);
  h.host.pswpin = vmstat("pswpin") - h.host.pswpin;
  h.host.pswpout = vmstat("pswpout") - h.host.pswpout;
  if (o.keep_thp) h.flags |= kKeepThp;
  if (h.host.pswpin || h.host.pswpout) h.flags |= kSwapped;
  if (h.host.numa_balancing > 0) h.flags |= kNumaBalancing;
  if (o.rss) h.flags |= kRss;
  std::string script;
  if (run_perf_script(o, dir, &script, res, err)) return -1;
  const std::vector<std::string> mounts = mount_lines();
  // Once to learn the files and the lost count, once more with the sizes
  // and the final flags in the header, so that the kept text converts alone.
  if (convert_perf_script(header_lines(h, mounts, o.pid != 0) + script, t, &res->stats, err)) return -1;
  if (t->header.lost) {
    if (!o.force) return *err = fmt::format("perf lost {} records: the trace would be incomplete (--force keeps it, marked)", t->header.lost), -1;
    h.flags |= kForcedLost;
  }
  std::string text = header_lines(h, mounts, o.pid != 0) + size_lines(*t) + script;
  if (convert_perf_script(text, t, &res->stats, err)) return -1;
  if (!o.keep_script.empty()) {
    std::ofstream out(o.keep_script, std::ios::binary);
    out << text;
    if (!out) return *err = "cannot write " + o.keep_script, -1;
  }
  return 0;
}

}  // namespace mmlab::record
