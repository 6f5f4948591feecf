// The trace sink: events in memory while the trace is on, written as ftrace
// text or Chrome/Perfetto JSON when it stops.
#include "trace/trace.h"

#include <fnmatch.h>

#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "sync/cpu.h"
#include "sync/mutex.h"

namespace mmlab::trace {

std::atomic<bool> g_on{false};

namespace {

constexpr uint64_t kNone = ~0ull;

struct Event {
  uint64_t seq;  // the timestamp: a monotonic event counter (see docs/TRACING.md)
  int cpu;
  uint32_t pid;        // 1: no System; else the System's, from 2
  uint64_t vclock_ns;  // its System's virtual clock (0 without one)
  const char* name;
  std::string fields;
  char phase = 'i';         // 'i' an instant, 'B' a slice's begin, 'E' its end, 'C' a counter's value
  uint64_t begin = kNone;   // 'E': its begin's seq
};

// A System of the trace.
struct TracedSystem {
  std::string name;
  const std::atomic<uint64_t>* clock;  // null once the System went away
};

constexpr uint32_t kNoSystemPid = 1;

// The calling thread's System: its pid, valid while the sink knows it (pids
// are never reused, so a thread that outlives its System, or the trace
// session that gave it, has none).
thread_local uint32_t tl_pid = 0;

// What one event holds in the ring, for --trace-buffer's bound.
size_t event_bytes(const Event& e) { return sizeof(Event) + e.fields.size(); }

struct Sink {
  Mutex lock;
  std::deque<Event> events GUARDED_BY(lock);
  uint64_t next GUARDED_BY(lock) = 0;   // events recorded: the next one's timestamp
  uint64_t bytes GUARDED_BY(lock) = 0;  // what `events` holds, by event_bytes()
  Options options GUARDED_BY(lock);
  // Each event name's verdict under options.events (the names are literals:
  // one entry per call site's name).
  std::map<const char*, bool> selected GUARDED_BY(lock);
  uint32_t last_pid GUARDED_BY(lock) = kNoSystemPid;
  std::map<uint32_t, TracedSystem> systems GUARDED_BY(lock);
  std::string path GUARDED_BY(lock);
  Format format GUARDED_BY(lock) = Format::kFtrace;
  bool open GUARDED_BY(lock) = false;
};

Sink& sink() {
  static Sink s;
  return s;
}

// The calling thread's pid in the current session, or kNoSystemPid.
uint32_t thread_pid(const Sink& s) REQUIRES(s.lock) { return s.systems.count(tl_pid) ? tl_pid : kNoSystemPid; }

bool selected(Sink& s, const char* event) REQUIRES(s.lock) {
  if (s.options.events.empty()) return true;
  auto [it, fresh] = s.selected.try_emplace(event, false);
  if (fresh)
    for (const std::string& g : s.options.events) it->second = it->second || fnmatch(g.c_str(), event, 0) == 0;
  return it->second;
}

// A decimal integer is a JSON number (Perfetto plots and sums it); anything
// else (hex addresses, flags, names) stays a string.
bool json_integer(const std::string& v) {
  size_t i = v.size() > 1 && v[0] == '-' ? 1 : 0;
  if (i == v.size() || v.size() - i > 18) return false;
  if (v[i] == '0' && v.size() - i > 1) return false;
  for (; i < v.size(); i++)
    if (v[i] < '0' || v[i] > '9') return false;
  return true;
}

std::string system_name(const std::map<uint32_t, TracedSystem>& systems, uint32_t pid) {
  auto it = systems.find(pid);
  return it == systems.end() ? "mmlab" : it->second.name;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    else o += c;
  }
  return o;
}

// "key=value key=value" as JSON members; a token without '=' is kept under its position.
std::string json_args(const std::string& fields) {
  std::string o;
  size_t i = 0, n = 0;
  while (i < fields.size()) {
    size_t j = fields.find(' ', i);
    if (j == std::string::npos) j = fields.size();
    const std::string tok = fields.substr(i, j - i);
    i = j + 1;
    if (tok.empty()) continue;
    const size_t eq = tok.find('=');
    const std::string k = eq == std::string::npos ? fmt::format("arg{}", n) : tok.substr(0, eq);
    const std::string v = eq == std::string::npos ? tok : tok.substr(eq + 1);
    if (json_integer(v)) o += fmt::format("{}\"{}\":{}", n++ ? "," : "", json_escape(k), v);
    else o += fmt::format("{}\"{}\":\"{}\"", n++ ? "," : "", json_escape(k), json_escape(v));
  }
  return o;
}

// ftrace's text: "TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS", the
// timestamp in seconds with microseconds (one event per microsecond here).
// TASK is the System's name cut to 15 characters as a comm is, PID its pid.
void write_ftrace(std::ostream& out, const std::deque<Event>& ev, uint64_t written, const std::map<uint32_t, TracedSystem>& systems) {
  out << "# tracer: nop\n#\n# entries-in-buffer/entries-written: " << ev.size() << "/" << written << "\n#\n";
  out << "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n#              | |         |   |||||     |         |\n";
  for (const Event& e : ev) {
    std::string task = system_name(systems, e.pid).substr(0, 15);
    for (char& c : task)
      if (c == ' ') c = '_';
    if (e.phase == 'E')
      out << fmt::format("{:>16}-{:<7} [{:03}] ..... {:6}.{:06}: {}_end: begin={}.{:06}\n", task, e.pid, e.cpu,
                         e.seq / 1000000, e.seq % 1000000, e.name, e.begin / 1000000, e.begin % 1000000);
    else
      out << fmt::format("{:>16}-{:<7} [{:03}] ..... {:6}.{:06}: {}: {}\n", task, e.pid, e.cpu, e.seq / 1000000,
                         e.seq % 1000000, e.name, e.fields);
  }
}

// One process per System (named by a process_name metadata event), one
// track per simulated CPU in it (thread_name "cpuN").
void write_json(std::ostream& out, const std::deque<Event>& ev, uint64_t written, const std::map<uint32_t, TracedSystem>& systems) {
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"event sequence number (1 us per event); "
         "vclock_ns in args: the System's virtual clock\",\"events_written\":"
      << written << ",\"events_dropped\":" << written - ev.size() << "},\"traceEvents\":[\n";
  std::set<uint32_t> named;
  std::set<std::pair<uint32_t, int>> seen;
  bool first = true;
  auto sep = [&] {
    const char* s = first ? "" : ",\n";
    first = false;
    return s;
  };
  // An end whose begin the ring dropped would close a slice that is not there.
  const uint64_t first_kept = ev.empty() ? 0 : ev.front().seq;
  for (const Event& e : ev) {
    if (e.phase == 'E' && e.begin < first_kept) continue;
    if (named.insert(e.pid).second) {
      out << sep()
          << fmt::format("{{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":{},\"tid\":0,\"args\":{{\"name\":\"{}\"}}}}",
                         e.pid, json_escape(system_name(systems, e.pid)));
    }
    if (seen.insert({e.pid, e.cpu}).second) {
      out << sep()
          << fmt::format("{{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"cpu{}\"}}}}",
                         e.pid, e.cpu, e.cpu);
    }
    std::string args = json_args(e.fields);
    // A counter's args are its series: the virtual clock would be a second one.
    if (e.pid != kNoSystemPid && e.phase != 'C')
      args += fmt::format("{}\"vclock_ns\":{}", args.empty() ? "" : ",", e.vclock_ns);
    out << sep()
        << fmt::format("{{\"name\":\"{}\",\"cat\":\"mm\",\"ph\":\"{}\",{}\"ts\":{},\"pid\":{},\"tid\":{},\"args\":{{{}}}}}",
                       json_escape(e.name), e.phase, e.phase == 'i' ? "\"s\":\"t\"," : "", e.seq, e.pid, e.cpu, args);
  }
  out << "\n]}\n";
}

}  // namespace

namespace {
// Records one event; its seq, or kNone when the trace is off or the event not selected.
uint64_t record(const char* event, std::string fields, char phase, uint64_t begin) {
  Sink& s = sink();
  const int cpu = smp_processor_id();
  MutexGuard l(&s.lock);
  if (!s.open || !selected(s, event)) return kNone;
  const uint32_t pid = thread_pid(s);
  const std::atomic<uint64_t>* clock = pid == kNoSystemPid ? nullptr : s.systems[pid].clock;
  const uint64_t seq = s.next++;
  s.events.push_back({seq, cpu, pid, clock ? clock->load(std::memory_order_relaxed) : 0, event, std::move(fields), phase, begin});
  s.bytes += event_bytes(s.events.back());
  // The ring keeps the newest: the oldest go until the rest fit (the newest always stays).
  while (s.options.buffer_bytes && s.bytes > s.options.buffer_bytes && s.events.size() > 1) {
    s.bytes -= event_bytes(s.events.front());
    s.events.pop_front();
  }
  return seq;
}
}  // namespace

void emit(const char* event, std::string fields) { (void)record(event, std::move(fields), 'i', kNone); }

void counter(const char* name, int64_t value) {
  if (on()) (void)record(name, fmt::format("value={}", value), 'C', kNone);
}

Slice::Slice(const char* event, std::string fields) : event_(event), begin_(kNone) {
  if (on()) begin_ = record(event, std::move(fields), 'B', kNone);
}

// A trace stopped meanwhile records nothing (record() checks the session).
Slice::~Slice() {
  if (begin_ != kNone) (void)record(event_, std::string(), 'E', begin_);
}

uint32_t attach_system(const std::atomic<uint64_t>* clock) {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  if (!s.open) return 0;
  const uint32_t pid = ++s.last_pid;
  s.systems[pid] = {fmt::format("system{}", pid - 1), clock};
  tl_pid = pid;
  return pid;
}

void detach_system(uint32_t pid) {
  if (!pid) return;
  Sink& s = sink();
  MutexGuard l(&s.lock);
  if (tl_pid == pid) tl_pid = 0;
  if (auto it = s.systems.find(pid); it != s.systems.end()) it->second.clock = nullptr;
}

void name_system(const std::string& name) {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  if (!s.open) return;
  if (const uint32_t pid = thread_pid(s); pid != kNoSystemPid) s.systems[pid].name = name;
}

uint32_t current_system() {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  const uint32_t pid = thread_pid(s);
  return pid == kNoSystemPid ? 0 : pid;
}

void adopt_system(uint32_t pid) { tl_pid = pid; }

Format format_for(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0 ? Format::kChromeJson : Format::kFtrace;
}

int start(const std::string& path, Format format, std::string* error, const Options& options) {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  if (s.open) {
    *error = "a trace is already being recorded";
    return -1;
  }
  std::ofstream probe(path);  // fail before any work runs
  if (!probe) {
    *error = "cannot create the trace file " + path;
    return -1;
  }
  s.events.clear();
  s.systems.clear();
  s.selected.clear();
  s.next = 0;
  s.bytes = 0;
  s.options = options;
  s.path = path;
  s.format = format;
  s.open = true;
  g_on.store(true, std::memory_order_relaxed);
  return 0;
}

int stop(std::string* error, Totals* totals) {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  if (!s.open) return 0;
  g_on.store(false, std::memory_order_relaxed);
  s.open = false;
  std::ofstream out(s.path);
  if (s.format == Format::kChromeJson) write_json(out, s.events, s.next, s.systems);
  else write_ftrace(out, s.events, s.next, s.systems);
  if (totals) *totals = {s.next, s.events.size()};
  s.events.clear();
  s.bytes = 0;
  s.systems.clear();
  // The buffered tail is written by flush() and close(): a full disk (or
  // /dev/full) shows only then, and a trace cut short must not pass.
  out.flush();
  out.close();
  if (out.fail()) {
    *error = "cannot write the trace file " + s.path;
    return -1;
  }
  return 0;
}

uint64_t events() {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  return s.next;
}

}  // namespace mmlab::trace
