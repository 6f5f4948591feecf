// `mmlab replay --to-mms`: a window of one task's recording as a scenario
// (to_mms.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "record/mmtrace.h"

namespace mmlab::record {

struct ExcerptSpec {
  uint32_t tid = 0;         // the task whose address space (from its exec) is exported
  uint64_t from_ns = 0, to_ns = ~0ull;  // the window of faults, in the records' time
  std::string test_name = "excerpt";
};

// 0 with the scenario in *out, or -1 with *err (the task has no exec in
// the trace before the window ends).
int excerpt_to_mms(const Trace& t, const ExcerptSpec& s, std::string* out, std::string* err);

}  // namespace mmlab::record
