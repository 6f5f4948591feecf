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

}  // namespace mmlab::trace
