// The GUP suites that reproduce a patch series' tables over the gup_test
// engine, the variants interleaved per repeat:
//   gup     gup-batch-follow-page-mask v5 (patches 7 and 8): gup_test -L -m 256
//           -n 65536 -r 16 -t on 4K, 64K mTHP and 2M THP, legacy / walk / batch / batch-ro
//   unify   gup-unify-hugetlb-speed-up-thp: -m 512 -t -L -n 1024, v6.5 vs legacy
//   fast    GUP-fast (-u, -a) on 64K mTHP, gup.fast legacy vs batch
//   ro-pin  R/O long-term pins of read-only 64K mTHP: batch vs batch-ro
//   sweep   pages per call 1, 16, 64, 123, 512 and the whole region
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_gup_table.h"
#include "bench_stats.h"
#include "bench_suites.h"
#include "fmt/format.h"
#include "gup_bench.h"

namespace mmlab::cli {

int suite_gup(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  std::vector<GupRow> rows;
  // The series' figures (256 MiB, 65536 pages per call) and their ns per page.
  const std::pair<const char*, const char*> folios[] = {
      {"4K", "2753 -> 1178 us walk (2.3x), 1198 batch; 42.0 -> 18.0 ns/page"},
      {"64K", "2946 -> 1361 us walk (2.2x), 231 batch (12.8x); 45.0 -> 20.8 / 3.5 ns/page"},
      {"2M", "72 -> 70/71 us (flat); 1.10 -> 1.08 ns/page"}};
  for (auto& [f, note] : folios) {
    GupBenchConfig c = longterm(mb, -1, r, f);
    walk_variants(&c, {"legacy", "walk", "batch", "batch-ro"});
    rows.push_back({fmt::format("{} -L -m {} -n {}", f, mb, c.nr_per_call), c, note, f});
  }
  return run_rows("gup-batch-follow-page-mask v5, patches 7 and 8: pin_user_pages(FOLL_LONGTERM), whole region per call",
                  rows, "legacy", rep, "gup");
}

int suite_unify(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 512);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 10);
  GupBenchConfig thp = longterm(mb, 1024, r, "2M");
  walk_variants(&thp, {"v6.5", "legacy"});
  GupBenchConfig ht = longterm(mb, 1024, r, "2M");
  ht.hugetlb = true;
  ht.thp = 0;
  walk_variants(&ht, {"legacy", "batch"});
  return run_rows("gup-unify-hugetlb-speed-up-thp: -m " + std::to_string(mb) + " -t -L -n 1024 (THP: before/after; hugetlb through the generic walk)",
                  {{"2M THP", thp, "13992 -> 378 us (37x); 106.8 -> 2.89 ns/page"}, {"2M hugetlb", ht, "-"}}, "v6.5", rep, "unify");
}

int suite_fast(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  std::vector<GupRow> rows;
  for (auto cmd : {GupCmd::kGupFast, GupCmd::kPinFast}) {
    for (const char* f : {"4K", "64K"}) {
      GupBenchConfig c = longterm(mb, -1, r, f);
      c.cmd = cmd;
      c.variants = {{"gup.fast", "legacy"}, {"gup.fast", "batch"}};
      rows.push_back({fmt::format("{} {} -n whole", f, cmd == GupCmd::kGupFast ? "-u" : "-a"), c, "no published figures"});
    }
  }
  return run_rows("GUP-fast: one speculative reference per PTE (legacy) or per same-folio run (batch)", rows, "legacy", rep, "fast");
}

int suite_ro_pin(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 64 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 5 : 16);
  GupBenchConfig c = longterm(mb, -1, r, "64K");
  c.gup_flags = 0;  // -W: read-only
  c.protect_read = true;
  walk_variants(&c, {"legacy", "batch", "batch-ro"});
  return run_rows("R/O long-term pin of read-only 64K mTHP (mprotect(PROT_READ) after pre-faulting): batch vs batch-ro",
                  {{"64K -L -W", c, "review of patch 8: 'needs more work'", "64K"}}, "legacy", rep, "ro_pin");
}

int suite_sweep(const BenchOptions& o, Report* rep) {
  uint64_t mb = o.size_mb ? o.size_mb : (o.quick ? 32 : 256);
  long r = o.repeats ? o.repeats : (o.quick ? 3 : 8);
  std::vector<GupRow> rows;
  for (const char* f : {"4K", "64K"}) {
    for (long n : {1L, 16L, 64L, 123L, 512L, -1L}) {
      GupBenchConfig c = longterm(mb, n, r, f);
      walk_variants(&c, {"legacy", "batch"});
      rows.push_back({fmt::format("{} -L -n {}", f, n < 0 ? std::string("whole") : std::to_string(n)), c, ""});
    }
  }
  return run_rows("pages per call (real callers pin a few pages per call)", rows, "legacy", rep, "sweep");
}

}  // namespace mmlab::cli
