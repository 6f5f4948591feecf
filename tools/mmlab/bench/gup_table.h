// The GUP tables of `mmlab bench`: rows of gup_test configurations, each run
// with its variants alternated per repeat, printed as one table per suite
// (median times, the speedup against a base variant, the difference with
// its confidence interval, per-page event counts, the physical floor).
#pragma once

#include <string>
#include <vector>

#include "report/report.h"
#include "bench/gup_bench.h"

namespace mmlab::cli {

// Where a published figure comes from: the posting, its date, and whether
// this project has it only from its seed material (a copy kept with the
// project) rather than from a public archive a reader can check.
struct Posting {
  const char* cite;  // the key the kernel column shows: "[v5]"
  const char* what;
  const char* date;
  bool seed_only;
};
extern const Posting kBatchSeriesV5;  // gup-batch-follow-page-mask v5
extern const Posting kBatchV5Review;  // David Hildenbrand's reply to its patch 8
extern const Posting kUnifyHugetlb;   // gup-unify-hugetlb-speed-up-thp

// A row's published figures: get time before the change (the base variant)
// and after it, per variant, as the posting gives them; or only a remark.
struct Published {
  const Posting* source = nullptr;
  double before_us = 0;
  std::vector<std::pair<std::string, double>> after_us;
  uint64_t pages = 0;      // the posting's pages per run: its ns/page
  const char* remark = "";  // what the posting says where it gives no figure
  double speedup(const std::string& variant) const;  // before/after, NaN if not published
};

struct GupRow {
  std::string label;
  GupBenchConfig cfg;
  Published kernel;                 // the posting's figures for this row (none: no source)
  const char* pin_folio = nullptr;  // a long-term pin of the whole region at this folio size: modelled with --profile
  std::string plot_label;           // the row in plots (default: label)
};

// What a row measured: each variant's get times (warm-up discarded), the
// variants in the order run (the base first).
struct RowResult {
  struct Variant {
    std::string name;
    std::vector<double> get_us;
  };
  std::vector<Variant> variants;
  size_t base = 0;
  uint64_t region_pages = 0;
};

// Runs the rows and adds the table under `title` (and rep->json[key]); the
// first variant, or the one named base_variant, is the speedup's base.
// 0, or 1 with a message if a row fails. With `out`, also what each row measured.
int run_rows(const std::string& title, std::vector<GupRow>& rows, const std::string& base_variant, Report* rep,
             const std::string& key, std::vector<RowResult>* out = nullptr);

// A ratio bar plot of the rows: per row, every variant's get-time speedup
// against the row's base (error bars: the variant's interquartile range),
// with the posting's speedups as markers.
Plot speedup_bars(const std::string& file, const std::string& title, const std::vector<GupRow>& rows,
                  const std::vector<RowResult>& results);
// The speedup of v against base (ratio of medians) with the error bar of
// v's interquartile range, at x.
PlotPoint speedup_point(double x, const std::vector<double>& base, const std::vector<double>& v);

// pin_user_pages(FOLL_LONGTERM | FOLL_WRITE) of an mb-MiB region advised
// MADV_HUGEPAGE, n pages per call (-1: the whole region), r repeats, with
// the sysfs settings that give `folio` ("4K", "64K", "2M") folios.
GupBenchConfig longterm(uint64_t mb, long n, long r, const std::string& folio);

// What the model's own data for `mb` MiB of 4K pages weighs (a 64-byte
// struct page and an 8-byte PTE per page) against this CPU's last-level
// cache: "72 MiB ..., against a 32M last-level cache". GUP times per page
// that change with the region's size or its split between threads follow
// it, not the kernel.
std::string model_footprint_text(uint64_t mb);
// The values of a tune key from its default (the v6.18 baseline) on, in
// registration order: the baseline and every proposed variant (gup.walk's
// v6.5, registered before its default, is the unify suite's alone).
std::vector<std::string> variants_from_default(const std::string& key);
// Adds one gup.walk variant per name.
void walk_variants(GupBenchConfig* c, std::vector<std::string> vs);

}  // namespace mmlab::cli
