// `mmlab replay --fidelity`: a replay under the recorded host's settings
// held to what that host's kernel reported for the same run (docs/RECORD.md,
// "Fidelity"). Each line is in one class: exact (within 0.1%),
// approximate (within 5%, the reason given) or never compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "record/mmtrace.h"
#include "record/replay.h"

namespace mmlab::record {

enum class FidelityClass : uint8_t { kExact, kApprox, kNever };

struct FidelityLine {
  FidelityClass cls = FidelityClass::kExact;
  std::string what;
  int64_t model = 0, traced = 0;
  int64_t slack = 0;    // an absolute allowance besides the relative one (one fault per exec)
  bool compared = true; // false: nothing to compare (the trace holds no such figure)
  bool holds = false;
  std::string note;     // why an approximate line is approximate, or why a line was not compared
};

std::vector<FidelityLine> fidelity_lines(const Trace& t, const ReplayResult& r);
std::string format_fidelity_line(const FidelityLine& l);

}  // namespace mmlab::record
