// The "modelled" tables of `mmlab bench --profile`: the model's event counts
// times the host's measured cost per event (a cost profile from `mmlab
// calibrate`). They stay apart from the measured tables, and under
// "modelled" in the JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/report.h"

namespace mmlab::cli {

// Fault-in of `size` per folio case (bench_model_common.h's kCases): model faults x host ns/fault.
void modelled_fault_in(uint64_t size, const std::vector<int64_t>& faults, Report* rep);
// CoW faults per folio case: model CoW copies x host ns/CoW fault.
void modelled_cow(const std::vector<int64_t>& copies, Report* rep);

// A long-term pin row: its pages x the host's per-page cost of io_uring
// buffer registration (and unregistration, for the put) at the row's folio
// size. The host pins with FOLL_WRITE whatever the row asks.
struct PinRow {
  std::string label, folio;
  uint64_t pages;
};
void modelled_pins(const std::vector<PinRow>& rows, const std::string& key, Report* rep);

}  // namespace mmlab::cli
