// The event trace, as a program starts and stops it (`--trace FILE`):
// docs/TRACING.md. The call sites are the model's (src/trace/trace.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mmlab::trace {

// The flag every call site of the model tests (MM_TRACE): with the trace off
// a site costs this relaxed load and a branch predicted not taken.
extern std::atomic<bool> g_on;
inline bool on() { return __builtin_expect(g_on.load(std::memory_order_relaxed), 0); }

enum class Format { kFtrace, kChromeJson };

// Start tracing into `path` (written by stop()). 0, or -1 with *error saying
// why (a trace already on, the file cannot be created).
int start(const std::string& path, Format format, std::string* error);
// Write the file and turn the trace off; 0, or -1 with *error.
int stop(std::string* error);
// The format a path implies: .json is Chrome/Perfetto JSON, anything else ftrace text.
Format format_for(const std::string& path);
// Events recorded since start().
uint64_t events();

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
