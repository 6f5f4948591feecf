// The "modelled" tables of `mmlab bench --profile`: the model's event counts
// times the profile's cost per event (include/mmlab/cost.h; a profile from
// `mmlab calibrate`). They stay apart from the measured tables, and under
// "modelled" in the JSON. Counts are the same in every run, so these
// figures are too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/report.h"

namespace mmlab::cli {

// Fault-in of `size` per folio case (model_common.h's kCases): the counts
// of each case's fault-in loop.
void modelled_fault_in(uint64_t size, const std::vector<std::map<std::string, int64_t>>& counts, Report* rep);
// fork of a populated `size` and the CoW writes after it, per folio case.
void modelled_fork(uint64_t size, const std::vector<std::map<std::string, int64_t>>& fork_counts,
                   const std::vector<std::map<std::string, int64_t>>& cow_counts, Report* rep);

// A long-term pin row: its pages x the host's per-page cost of io_uring
// buffer registration (and unregistration, for the put) at the row's folio
// size. The host pins with FOLL_WRITE whatever the row asks.
struct PinRow {
  std::string label, folio;
  uint64_t pages;
};
void modelled_pins(const std::vector<PinRow>& rows, const std::string& key, Report* rep);

// A GUP table's rows as modelled time: each variant's counts over one
// gup_test round (get and put; the same in every round) times the
// profile's costs, its ratio against the row's base, and the posting's.
struct ModelledGup {
  std::string row, variant;
  std::map<std::string, int64_t> counts;
  bool is_base = false;
  double published_speedup = 0;  // NaN where the posting gives none
};
void modelled_gup(const std::vector<ModelledGup>& rows, const std::string& key, Report* rep);

}  // namespace mmlab::cli
