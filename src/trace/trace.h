// The event trace: what the model does, under the kernel's tracepoint names
// where the kernel has one (mm_page_alloc, mm_page_free, ...) and the
// model's own names otherwise (mm_fault, gup_call, ...). docs/TRACING.md.
//
// Off by default. A call site is one line, MM_TRACE(EVENT, FMT, ARGS...):
// with the trace off it is one load of a global flag and a branch predicted
// not taken; the fields are formatted only when it is on. The sink sits low
// (above sync only) so that every model layer can call it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "fmt/format.h"
#include "mmlab/trace.h"

namespace mmlab::trace {

// Record one event on the calling thread's simulated CPU.
void emit(const char* event, std::string fields);

// A span of work (a fault, a GUP call, a collapse, a CoW copy): its begin
// is recorded with the fields when the object is made, its end when it goes
// out of scope, so that a Perfetto trace shows a slice with what nests in
// it, and ftrace text a `NAME_end` line naming its begin. Nothing is
// recorded for a span that began with the trace off or its event not
// selected.
class Slice {
 public:
  Slice(const char* event, std::string fields);
  ~Slice();
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;

 private:
  const char* event_;
  uint64_t begin_;  // the begin's sequence number, kNone when not recorded
};

}  // namespace mmlab::trace

#define MM_TRACE(event, ...) \
  do {                                                                           \
    if (::mmlab::trace::on()) ::mmlab::trace::emit(event, ::fmt::format(__VA_ARGS__)); \
  } while (0)

// MM_TRACE for a span: to the end of the enclosing scope.
#define MM_TRACE_SLICE_NAME2(line) mm_trace_slice_##line
#define MM_TRACE_SLICE_NAME(line) MM_TRACE_SLICE_NAME2(line)
#define MM_TRACE_SLICE(event, ...)                     \
  ::mmlab::trace::Slice MM_TRACE_SLICE_NAME(__LINE__)( \
      event, ::mmlab::trace::on() ? ::fmt::format(__VA_ARGS__) : std::string())
