// cow-bench's `trace:F.mmtrace` workload: a recorded program (mmlab
// record) replayed under each column instead of a synthetic loop. Its
// figures are the replay's counts; it has no per-write latency (the trace
// holds faults, not the program's writes between them).
#include <map>
#include <memory>

#include "cowbench/cow_bench.h"
#include "cowbench/cow_bench_metrics.h"
#include "fmt/format.h"
#include "record/mmtrace.h"
#include "record/replay.h"

namespace mmlab::cli::cowbench {
namespace {

struct Loaded {
  record::Trace trace;
  int64_t written = 0;  // record::bytes_written_after_sharing
};

// Each trace is read (and its 4K copies measured) once however many
// columns and seeds replay it; the grid runs its cells one after another,
// on one thread.
const Loaded* load_trace(const std::string& path, std::string* err) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[path];
  if (!slot) {
    auto l = std::make_unique<Loaded>();
    if (record::read_mmtrace(path, &l->trace, err)) return nullptr;
    l->written = record::bytes_written_after_sharing(l->trace, err);
    if (l->written < 0) return nullptr;
    slot = std::move(l);
  }
  return slot.get();
}

int64_t counter(const record::ReplayResult& r, const std::string& name) {
  auto it = r.counters.find(name);
  return it == r.counters.end() ? 0 : it->second;
}

void fill(const record::ReplayResult& r, int64_t written, Result* out) {
  MetricSet& m = out->m;
  m.set("writes", static_cast<double>(r.traced.total));
  m.set("wp_copy", static_cast<double>(counter(r, "fault.wp_copy")));
  m.set("wp_reuse", static_cast<double>(counter(r, "fault.wp_reuse")));
  m.set("anon_faults", static_cast<double>(counter(r, "fault.anon")));
  m.set("zero_faults", static_cast<double>(counter(r, "fault.zero")));
  m.set("bytes_copied", static_cast<double>(counter(r, "cow.bytes_copied")));
  // What 4K copies came to: the pages written after a fork shared them.
  m.set("bytes_written", static_cast<double>(written));
  m.set("zero_subpages_copied",
        static_cast<double>(counter(r, "cow.zero_subpages_copied") + counter(r, "collapse.zero_subpages_copied")));
  m.set("collapses", static_cast<double>(counter(r, "collapse.success")));
  long rss = 0;
  for (const record::MmReport& mm : r.mms) rss += mm.peak_rss_anon;
  m.set("rss_peak", static_cast<double>(rss));
  m.set("elapsed_s", r.seconds);
  // The TLB model saw only the faulting accesses: where faults put entries
  // and which flushes and IPIs they caused, not the program's reach.
  const std::pair<const char*, const char*> tlb[] = {
      {"metrics.tlb.flushes", "tlb.flush"},           {"metrics.tlb.flush_full", "tlb.flush_full"},
      {"metrics.tlb.flush_range", "tlb.flush_range"}, {"metrics.tlb.flush_single", "tlb.flush_single"},
      {"metrics.tlb.ipis", "tlb.ipi"}};
  for (const auto& [key, name] : tlb) m.set(key, static_cast<double>(counter(r, name)));
  m.set("metrics.tlb.l2_reach_peak_bytes", static_cast<double>(r.tlb_l2_reach_peak));
  out->counts = r.counters;
}

}  // namespace

bool is_trace_workload(const Workload& w) { return w.name.rfind(kTracePrefix, 0) == 0; }

int run_trace(const Workload& w, const Column& c, const Params& p, Result* out, std::string* err) {
  const std::string path = w.name.substr(std::string(kTracePrefix).size());
  const Loaded* l = load_trace(path, err);
  if (!l) return -EINVAL;
  record::ReplayOptions o;
  o.sample_tlb = !p.geometry.empty() && p.geometry != "off";
  o.configure = [&c, &p](System* s, std::string* e) {
    if (apply_column(s, c, e) < 0 || set_geometry(s, p.geometry, e) < 0) return -1;
    return 0;
  };
  record::ReplayResult r;
  if (record::replay(l->trace, o, &r, err)) return -EIO;
  fill(r, l->written, out);
  out->m.set("warnings", static_cast<double>(r.warnings.size()));
  out->m.set("violations", static_cast<double>(r.violations.size()));
  // cow.policy rfc is the posting as sent: what it breaks is a result.
  if (!r.violations.empty() && std::string(c.policy) != "rfc") {
    *err = fmt::format("the invariant checker failed after {} under {}: {}", w.name, c.name, r.violations.front());
    return -EIO;
  }
  if (r.sigsegv || r.sigbus) {
    *err = fmt::format("{} under {}: {} SIGSEGV and {} SIGBUS in the replay", w.name, c.name, r.sigsegv, r.sigbus);
    return -EFAULT;
  }
  out->ran = true;
  return 0;
}

}  // namespace mmlab::cli::cowbench
