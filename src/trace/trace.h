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

}  // namespace mmlab::trace

#define MM_TRACE(event, ...) \
  do {                                                                           \
    if (::mmlab::trace::on()) ::mmlab::trace::emit(event, ::fmt::format(__VA_ARGS__)); \
  } while (0)
