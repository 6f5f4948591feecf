// The trace sink: events in memory while the trace is on, written as ftrace
// text or Chrome/Perfetto JSON when it stops.
#include "trace/trace.h"

#include <cstdio>
#include <fstream>
#include <vector>

#include "sync/cpu.h"
#include "sync/mutex.h"

namespace mmlab::trace {

std::atomic<bool> g_on{false};

namespace {

struct Event {
  uint64_t seq;  // the timestamp: a monotonic event counter (see docs/TRACING.md)
  int cpu;
  const char* name;
  std::string fields;
};

struct Sink {
  Mutex lock;
  std::vector<Event> events GUARDED_BY(lock);
  uint64_t next GUARDED_BY(lock) = 0;
  std::string path GUARDED_BY(lock);
  Format format GUARDED_BY(lock) = Format::kFtrace;
  bool open GUARDED_BY(lock) = false;
};

Sink& sink() {
  static Sink s;
  return s;
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
    o += fmt::format("{}\"{}\":\"{}\"", n++ ? "," : "", json_escape(k), json_escape(v));
  }
  return o;
}

// ftrace's text: "TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: FIELDS", the
// timestamp in seconds with microseconds (one event per microsecond here).
void write_ftrace(std::ostream& out, const std::vector<Event>& ev) {
  out << "# tracer: nop\n#\n# entries-in-buffer/entries-written: " << ev.size() << "/" << ev.size() << "\n#\n";
  out << "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n#              | |         |   |||||     |         |\n";
  for (const Event& e : ev)
    out << fmt::format("{:>16}-{:<7} [{:03}] ..... {:6}.{:06}: {}: {}\n", "mmlab", e.cpu, e.cpu, e.seq / 1000000,
                       e.seq % 1000000, e.name, e.fields);
}

void write_json(std::ostream& out, const std::vector<Event>& ev) {
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"event sequence number (1 us per event)\"},\"traceEvents\":[\n";
  bool seen[NR_CPUS] = {};
  bool first = true;
  for (const Event& e : ev) {
    if (!seen[e.cpu]) {  // one track per simulated CPU
      seen[e.cpu] = true;
      out << (first ? "" : ",\n")
          << fmt::format("{{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":1,\"tid\":{},\"args\":{{\"name\":\"cpu{}\"}}}}",
                         e.cpu, e.cpu);
      first = false;
    }
    out << (first ? "" : ",\n")
        << fmt::format("{{\"name\":\"{}\",\"cat\":\"mm\",\"ph\":\"i\",\"s\":\"t\",\"ts\":{},\"pid\":1,\"tid\":{},\"args\":{{{}}}}}",
                       json_escape(e.name), e.seq, e.cpu, json_args(e.fields));
    first = false;
  }
  out << "\n]}\n";
}

}  // namespace

void emit(const char* event, std::string fields) {
  Sink& s = sink();
  const int cpu = smp_processor_id();
  MutexGuard l(&s.lock);
  if (!s.open) return;
  s.events.push_back({s.next++, cpu, event, std::move(fields)});
}

Format format_for(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0 ? Format::kChromeJson : Format::kFtrace;
}

int start(const std::string& path, Format format, std::string* error) {
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
  s.next = 0;
  s.path = path;
  s.format = format;
  s.open = true;
  g_on.store(true, std::memory_order_relaxed);
  return 0;
}

int stop(std::string* error) {
  Sink& s = sink();
  MutexGuard l(&s.lock);
  if (!s.open) return 0;
  g_on.store(false, std::memory_order_relaxed);
  s.open = false;
  std::ofstream out(s.path);
  if (s.format == Format::kChromeJson) write_json(out, s.events);
  else write_ftrace(out, s.events);
  s.events.clear();
  if (!out) {
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
