// The GUP tables of `mmlab bench`: rows of gup_test configurations, each run
// with its variants alternated per repeat, printed as one table per suite
// (median times, the speedup against a base variant, the difference with
// its confidence interval, per-page event counts, the physical floor).
#pragma once

#include <string>
#include <vector>

#include "bench_report.h"
#include "gup_bench.h"

namespace mmlab::cli {

struct GupRow {
  std::string label;
  GupBenchConfig cfg;
  const char* kernel_note = "";  // the series' published figure for this row
  const char* pin_folio = nullptr;  // a long-term pin of the whole region at this folio size: modelled with --profile
};

// Runs the rows and adds the table under `title` (and rep->json[key]); the
// first variant, or the one named base_variant, is the speedup's base.
// 0, or 1 with a message if a row fails.
int run_rows(const std::string& title, std::vector<GupRow> rows, const std::string& base_variant, Report* rep,
             const std::string& key);

// pin_user_pages(FOLL_LONGTERM | FOLL_WRITE) of an mb-MiB region advised
// MADV_HUGEPAGE, n pages per call (-1: the whole region), r repeats, with
// the sysfs settings that give `folio` ("4K", "64K", "2M") folios.
GupBenchConfig longterm(uint64_t mb, long n, long r, const std::string& folio);
// Adds one gup.walk variant per name.
void walk_variants(GupBenchConfig* c, std::vector<std::string> vs);

}  // namespace mmlab::cli
