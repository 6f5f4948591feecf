// What the `mmlab bench` suites share: options, the report (terminal,
// Markdown and JSON at once), progress lines, and how timed regions are
// kept clear of the host's own first-touch faults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gup_bench.h"
#include "mmlab/calibrate.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {

struct BenchOptions {
  bool quick = false;
  uint64_t size_mb = 0;  // 0: the suite's own size
  long repeats = 0;      // 0: the suite's own count
  std::vector<std::string> suites;
  std::string out = "bench-out";
  std::string profile;  // cost profile file, or empty
  std::string corpus;   // the corpus suite's scenario file (default: the source tree's cow.mms)
};

struct Report {
  std::string text;  // terminal and Markdown share one table format
  nlohmann::json json;
  const host::CostProfile* profile = nullptr;  // --profile: add the modelled tables
  void add(const std::string& s);
};

void progress(const std::string& what);
void progress_done();

// A row whose timed region took host faults on more than 1% of the pages it
// touched is marked: its time is the host's first-touch cost, not the model's.
std::string first_touch_note(long host_faults, uint64_t pages);

// Bytes of a folio-size label: "4K", "64K", "2M".
uint64_t folio_bytes_of(const std::string& label);

// How every suite prepares the frame store, for the report.
extern const char* const kFrameStorePreparation;

// The suites (bench_model.cpp: the model's own costs).
int suite_fault(const BenchOptions& o, Report* rep);
int suite_fork(const BenchOptions& o, Report* rep);
int suite_data(const BenchOptions& o, Report* rep);
int suite_collapse(const BenchOptions& o, Report* rep);
int suite_corpus(const BenchOptions& o, Report* rep);

}  // namespace mmlab::cli
