// The `mmlab bench` suites (suite_*.cpp, registered in suites.cpp), their
// options, and what they share about folio sizes; bench.cpp runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/report.h"

namespace mmlab::cli {

struct BenchOptions {
  bool quick = false;
  uint64_t size_mb = 0;  // 0: the suite's own size
  long repeats = 0;      // 0: the suite's own count
  std::vector<std::string> suites;
  std::string out = "bench-out";
  std::string profile;  // cost profile file, or empty
  bool force = false;   // --force: a --profile of another kind of machine, its figures marked FORCED
  std::string corpus;   // the corpus suite's scenario file (default: the source tree's cow.mms)
  // --host: the corpus suite also runs its tests on this machine's kernel,
  // which changes machine-wide THP, hugetlb and swap settings while it runs
  // (restored after). Never by default.
  bool host = false;
  // --form mmtests|lkp: every figure of the run again, in that form (as
  // `mmlab compare` prints a report; "" for none).
  std::string form;
};

// Bytes of a folio-size label: "4K", "64K", "2M".
uint64_t folio_bytes_of(const std::string& label);

// The host memory a suite takes at its largest moment with these options
// (its Systems' frames, memmap and tables, and its native buffers), and the
// region that sets it (MiB): run_bench refuses, before any suite runs, what
// the host cannot hold. bytes 0: nothing to check (corpus: fixed tests).
struct HostNeed {
  uint64_t bytes = 0;
  uint64_t region_mb = 0;
  bool sized_by_option = true;  // false: --size-mb does not change it (scaling's fixed sizes)
};

// One `mmlab bench` suite: a record in its own file (suite_<name>.cpp),
// listed once in suites.cpp's table, from which the run order, `--suite`'s
// check and help, and `bench --list` come.
struct BenchSuite {
  const char* name;     // --suite NAME
  const char* summary;  // one line: what it measures
  HostNeed (*need)(const BenchOptions& o);
  int (*run)(const BenchOptions& o, Report* rep);  // 0, or the command's exit status
};

// Every suite, in the order `bench` runs them.
const std::vector<const BenchSuite*>& bench_suites();
// The suite of that name, or nullptr.
const BenchSuite* find_bench_suite(const std::string& name);
// "fault, fork, ...": the names, for messages and help.
std::string bench_suite_names();

// Runs the suites o.suites names (all without any) into a report in o.out:
// every argument is checked before any suite runs (2, with a message).
int run_bench(const BenchOptions& o);

}  // namespace mmlab::cli
