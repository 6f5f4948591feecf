// What perf_convert.cpp hands the ordering pass (perf_order.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "record/mmtrace.h"
#include "record/perf_convert.h"

namespace mmlab::record {

// Puts `recs` (in timestamp order) into replay order: a task's records
// after its kFork, and a fault after a mapping call of its mm by another
// task that comes within kReorderWindowNs and maps its address (perf's
// cross-CPU timestamps can misorder events microseconds apart); a task's own
// records keep their order. mm[i] is the address space of recs[i].
inline constexpr uint64_t kReorderWindowNs = 200000;
void order_records(std::vector<Record>* recs, std::vector<int64_t>* mm, ConvertStats* stats);

}  // namespace mmlab::record
