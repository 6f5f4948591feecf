// The event trace, as a program starts and stops it (`--trace FILE`):
// docs/TRACING.md. The call sites are the model's (src/trace/trace.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace mmlab::trace {

// The flag every call site of the model tests (MM_TRACE): with the trace off
// a site costs this relaxed load and a branch predicted not taken.
extern std::atomic<bool> g_on;
inline bool on() { return __builtin_expect(g_on.load(std::memory_order_relaxed), 0); }

enum class Format { kFtrace, kChromeJson };

// What a session records. `events`: fnmatch(3) globs of the event names to
// keep (empty: every event), as trace-cmd's -e. `buffer_bytes`: a ring of
// about this many bytes of events that keeps the newest and counts what it
// dropped (0: every event, held in memory until stop()).
struct Options {
  std::vector<std::string> events;
  uint64_t buffer_bytes = 0;
};
// What a session kept: events recorded (selected), and those still in the
// ring when it stopped (written to the file).
struct Totals {
  uint64_t written = 0, kept = 0;
};

// Start tracing into `path` (written by stop()). 0, or -1 with *error saying
// why (a trace already on, the file cannot be created).
int start(const std::string& path, Format format, std::string* error, const Options& options = {});
// Write the file and turn the trace off; 0, or -1 with *error. *totals (if
// given) says what was written and what the ring dropped.
int stop(std::string* error, Totals* totals = nullptr);
// The format a path implies: .json is Chrome/Perfetto JSON, anything else ftrace text.
Format format_for(const std::string& path);
// Events recorded since start().
uint64_t events();
// A value over time (RSS, a TLB counter): a counter track in Perfetto, a
// `NAME: value=N` line in ftrace text, in the calling thread's System.
void counter(const char* name, int64_t value);

// Which System an event belongs to: each System made while the trace is on
// is a process of the trace (its own pid, named by name_system, with its
// virtual clock in every event's fields), and its events are those of the
// threads that made it or adopted it. Events of other threads go to pid 1,
// "mmlab". attach_system returns the pid (0 with the trace off) and makes
// it the calling thread's; detach_system forgets the clock (the System is
// going away).
uint32_t attach_system(const std::atomic<uint64_t>* clock);
void detach_system(uint32_t pid);
// Names the calling thread's System in the trace (a test's name).
void name_system(const std::string& name);
// The calling thread's System (0: none), and making it another thread's.
uint32_t current_system();
void adopt_system(uint32_t pid);

}  // namespace mmlab::trace
