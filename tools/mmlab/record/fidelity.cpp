#include "record/fidelity.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

namespace mmlab::record {
namespace {

constexpr double kExactShare = 0.001;
constexpr double kApproxShare = 0.05;

int64_t counter(const ReplayResult& r, const char* name) {
  auto it = r.counters.find(name);
  return it == r.counters.end() ? 0 : it->second;
}

FidelityLine line(FidelityClass cls, std::string what, int64_t model, int64_t traced, int64_t slack = 0,
                  std::string note = {}) {
  FidelityLine l{cls, std::move(what), model, traced, slack, true, false, std::move(note)};
  const double share = cls == FidelityClass::kExact ? kExactShare : kApproxShare;
  const double allowed = share * static_cast<double>(std::max<int64_t>(std::llabs(traced), 1)) + static_cast<double>(slack);
  l.holds = std::fabs(static_cast<double>(model - traced)) <= allowed;
  return l;
}

FidelityLine not_compared(FidelityClass cls, std::string what, std::string why) {
  FidelityLine l{cls, std::move(what), 0, 0, 0, false, true, std::move(why)};
  return l;
}

int64_t execs(const Trace& t) {
  return std::count_if(t.records.begin(), t.records.end(), [](const Record& r) { return r.op == Op::kExec; });
}

// The worst relative gap between an address space's peak anonymous RSS on
// the model and rss_stat's, over those rss_stat reported.
void rss_line(const ReplayResult& r, std::vector<FidelityLine>* out) {
  const MmReport* worst = nullptr;
  double worst_gap = -1;
  for (const MmReport& m : r.mms) {
    if (m.traced_peak_rss_anon < 0) continue;
    const double gap = std::fabs(static_cast<double>(m.peak_rss_anon - m.traced_peak_rss_anon)) /
                       static_cast<double>(std::max<long>(m.traced_peak_rss_anon, 4096));
    if (gap > worst_gap) worst_gap = gap, worst = &m;
  }
  const char* what = "peak RssAnon of the worst address space vs kmem:rss_stat, bytes";
  if (!worst) {
    out->push_back(not_compared(FidelityClass::kApprox, what, "the trace holds no rss_stat records (record --rss)"));
    return;
  }
  out->push_back(line(FidelityClass::kApprox, fmt::format("{} ({} tid {})", what, worst->comm, worst->tid),
                      worst->peak_rss_anon, worst->traced_peak_rss_anon, 0,
                      "rss_stat reads per-CPU counters the kernel folds in batches"));
}

// The same for file and shmem pages (rss_stat's MM_FILEPAGES + MM_SHMEMPAGES).
void rss_file_line(const ReplayResult& r, std::vector<FidelityLine>* out) {
  long model = 0, traced = -1;
  for (const MmReport& m : r.mms) {
    if (m.traced_peak_rss_file < 0) continue;
    model += m.peak_rss_file;
    traced = std::max<long>(traced, 0) + m.traced_peak_rss_file;
  }
  const char* what = "peak file and shmem RSS, summed over the address spaces, vs kmem:rss_stat, bytes";
  if (traced < 0) {
    out->push_back(not_compared(FidelityClass::kApprox, what, "the trace holds no rss_stat records (record --rss)"));
    return;
  }
  out->push_back(line(FidelityClass::kApprox, what, model, traced, 0,
                      "the page cache's folio sizes and fault-around decide what a file fault maps"));
}

}  // namespace

std::vector<FidelityLine> fidelity_lines(const Trace& t, const ReplayResult& r) {
  std::vector<FidelityLine> v;
  const int64_t first_touch = counter(r, "fault.anon") + counter(r, "fault.zero") - r.exec_populated;
  const int64_t cow = counter(r, "fault.wp_copy") + counter(r, "fault.wp_reuse");
  const TracedFaults& tr = r.traced;
  std::string why;
  if (tr.kernel_repeats)
    why = fmt::format("{} repeated kernel-mode faults left out: faults with page faults disabled, which the kernel "
                      "does not handle",
                      tr.kernel_repeats);
  if (tr.concurrent_noops)
    why += fmt::format("{}{} faults by a second thread on a page its mm had just faulted in left out",
                       why.empty() ? "" : "; ", tr.concurrent_noops);
  v.push_back(line(FidelityClass::kExact, "faults the model took vs faults traced", r.model_faults_by_tasks,
                   tr.total - tr.kernel_repeats - tr.concurrent_noops, 0, why));
  v.push_back(line(FidelityClass::kExact, "first touches of private anonymous memory", first_touch,
                   r.traced.anon_first_touch));
  v.push_back(line(FidelityClass::kExact, "CoW faults (present writes in private mappings)", cow,
                   r.traced.private_present_write));
  if (t.header.minflt >= 0) {
    v.push_back(line(FidelityClass::kExact, "faults the model took vs the tasks' own minflt+majflt (rusage)",
                     r.model_faults_by_tasks, t.header.minflt + std::max<int64_t>(t.header.majflt, 0), execs(t),
                     "one fault per exec is allowed: the kernel copies argv into the new image through GUP"));
  } else {
    v.push_back(not_compared(FidelityClass::kExact, "faults vs the tasks' own minflt+majflt",
                             "the recording has no rusage counts"));
  }
  v.push_back(not_compared(FidelityClass::kApprox, "CoW copies vs reuses",
                           fmt::format("the model copied {} and reused {}; the trace cannot tell them apart, and "
                                       "they depend on the order in which siblings exit",
                                       counter(r, "fault.wp_copy"), counter(r, "fault.wp_reuse"))));
  rss_line(r, &v);
  rss_file_line(r, &v);
  v.push_back(line(FidelityClass::kApprox, "faults on file and shared mappings",
                   r.model_faults_by_tasks - first_touch - cow, tr.other - tr.kernel_repeats, 0,
                   "the page cache's folio sizes and fault-around decide them"));
  v.push_back(not_compared(FidelityClass::kNever, "major faults, swap-ins, wall time",
                           "the model has no disk and no clock of the program's"));
  return v;
}

std::string format_fidelity_line(const FidelityLine& l) {
  const char* cls = l.cls == FidelityClass::kExact ? "exact " : l.cls == FidelityClass::kApprox ? "approx" : "never ";
  if (!l.compared) return fmt::format("{}  {}: not compared ({})", cls, l.what, l.note);
  std::string s = fmt::format("{}  {}: model {}, traced {}: {}", cls, l.what, l.model, l.traced,
                              l.holds ? "holds" : "DOES NOT HOLD");
  if (!l.note.empty()) s += fmt::format(" ({})", l.note);
  return s;
}

}  // namespace mmlab::record
