// `mmlab replay F.mmtrace`: a recorded program on the model under each CoW
// and folio policy (docs/RECORD.md). `--dump` prints the records,
// `--fidelity` holds a replay under the recorded host's settings to what
// that host's kernel reported.
//
// Exit status: 0 done (for --fidelity: every exact line holds), 1 a replay
// failed or an exact fidelity line does not hold, 2 usage or an unreadable
// trace.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cowbench/cow_bench.h"
#include "cowbench/cow_bench_metrics.h"
#include "fmt/format.h"
#include "mmlab/cost.h"
#include "report/report.h"
#include "nlohmann/json.hpp"
#include "record/fidelity.h"
#include "record/mmtrace.h"
#include "record/replay.h"
#include "record/to_mms.h"

namespace mmlab::cli {
namespace {

struct ReplayCli {
  std::string trace, json;
  std::vector<std::string> columns;
  bool dump = false, fidelity = false, ignore_thp_disable = false;
  uint64_t max_records = 0;
  std::string to_mms, geometry = "off", profile;
  bool force = false;
  uint32_t pid = 0;
  double from_s = 0, to_s = -1;
};

// The policy table's columns (cow-bench's catalogue), and "recorded": the
// recording host's settings alone.
const std::vector<std::string>& default_columns() {
  static const std::vector<std::string> v = {"recorded",   "base",           "rfc",           "fixed-16K",
                                             "fixed-64K",  "fixed-512K",     "fixed-512K-max4", "base-khugepaged"};
  return v;
}

const cowbench::Column* find_column(const std::string& name) {
  for (const cowbench::Column& c : cowbench::columns())
    if (c.name == name) return &c;
  return nullptr;
}

bool check_columns(const std::vector<std::string>& names, std::string* err) {
  for (const std::string& n : names) {
    if (n == "recorded") continue;
    const cowbench::Column* c = find_column(n);
    if (!c || c->extra == cowbench::Extra::kDontfork || c->extra == cowbench::Extra::kCollapseAfterFork) {
      std::string valid = "recorded";
      for (const cowbench::Column& k : cowbench::columns())
        if (k.extra != cowbench::Extra::kDontfork && k.extra != cowbench::Extra::kCollapseAfterFork) valid += ", " + k.name;
      *err = fmt::format("--column {}: not a replay column (valid: {})", n, valid);
      return false;
    }
  }
  return true;
}

int64_t count(const record::ReplayResult& r, const char* name) {
  auto it = r.counters.find(name);
  return it == r.counters.end() ? 0 : it->second;
}

// Bytes a CoW copied that the program never wrote: the column's copies
// beyond what 4K copies came to (record::bytes_written_after_sharing).
int64_t copied_never_written(const record::ReplayResult& r, int64_t written) {
  return std::max<int64_t>(0, count(r, "cow.bytes_copied") - written);
}

struct Totals {
  long peak_rss_anon = 0, peak_pss = 0;
};
Totals totals(const record::ReplayResult& r) {
  Totals t;
  for (const record::MmReport& m : r.mms) {
    t.peak_rss_anon += m.peak_rss_anon;
    t.peak_pss += m.peak_pss;
  }
  return t;
}

nlohmann::ordered_json column_json(const record::ReplayResult& r, int64_t written) {
  nlohmann::ordered_json j;
  j["records"] = r.records;
  j["faults"] = r.model_faults_by_tasks;
  for (const char* c : {"fault.anon", "fault.zero", "fault.wp_copy", "fault.wp_reuse", "cow.bytes_copied",
                        "cow.zero_subpages_copied", "thp_fault_alloc"})
    j[c] = count(r, c);
  j["copied_never_written"] = copied_never_written(r, written);
  j["sigsegv"] = r.sigsegv;
  j["sigbus"] = r.sigbus;
  j["unknown_addresses"] = r.unknown_addresses;
  j["exec_populated"] = r.exec_populated;
  j["call_divergences"] = r.call_divergences;
  j["first_divergences"] = r.first_divergences;
  j["violations"] = r.violations;
  j["warnings"] = r.warnings.size();
  j["seconds"] = r.seconds;
  for (const record::MmReport& m : r.mms)
    j["mms"].push_back({{"tid", m.tid}, {"comm", m.comm}, {"faults_traced", m.faults_traced},
                        {"min_flt", m.min_flt}, {"maj_flt", m.maj_flt}, {"peak_rss_anon", m.peak_rss_anon}, {"rss_anon_at_exit", m.rss_anon_at_exit},
                        {"peak_pss", m.peak_pss}, {"pss_at_exit", m.pss_at_exit},
                        {"private_dirty_at_exit", m.private_dirty_at_exit},
                        {"traced_peak_rss_anon", m.traced_peak_rss_anon}});
  return j;
}

int run_column(const record::Trace& t, const ReplayCli& v, const std::string& name, record::ReplayResult* out) {
  record::ReplayOptions o;
  o.honour_thp_disable = !v.ignore_thp_disable;
  o.max_records = v.max_records;
  o.sample_tlb = v.geometry != "off";
  const cowbench::Column* c = find_column(name);
  o.configure = [c, &v](System* s, std::string* err) {
    if (c && cowbench::apply_column(s, *c, err) < 0) return -1;
    return cowbench::set_geometry(s, v.geometry, err) < 0 ? -1 : 0;
  };
  std::string err;
  if (record::replay(t, o, out, &err)) {
    std::fprintf(stderr, "mmlab replay: %s: %s\n", name.c_str(), err.c_str());
    return 1;
  }
  return 0;
}

// The profile's price of a column's counts, in ms (the kernel's and the
// program's terms; -1 without a profile).
double modelled_ms(const host::CostProfile* p, const record::ReplayResult& r) {
  return p ? cost::predict(*p, r.counters).program_ns() / 1e6 : -1;
}

void print_table_head(const record::Trace& t) {
  const record::Header& h = t.header;
  std::string cmd;
  for (const std::string& a : h.command) cmd += (cmd.empty() ? "" : " ") + a;
  std::printf("# trace: %s (%zu records; host %s %s, zero page %s%s)\n", cmd.c_str(), t.records.size(),
              h.host.release.c_str(), h.host.arch.c_str(), h.host.zero_page ? "on" : "off",
              (h.flags & record::kKeepThp) ? "; THP left on: fidelity only" : "");
  std::printf("# the TLB model sees only the faulting accesses: a replay's TLB figures describe where faults placed "
              "entries, not the program's reach\n");
  std::printf("%-18s %10s %11s %9s %9s %11s %13s %11s %13s %11s %11s %10s %12s %8s\n", "column", "faults",
              "first-touch", "wp_copy", "wp_reuse", "copied MiB", "never-wr. MiB", "zero pages", "Σpeak anon MiB",
              "ΣPSS MiB", "modelled ms", "TLB IPIs", "L2 reach MiB", "replay s");
}

void print_row(const std::string& name, const record::ReplayResult& r, int64_t written, double ms) {
  const Totals tt = totals(r);
  constexpr double MiB = 1 << 20;
  std::printf("%-18s %10lld %11lld %9lld %9lld %11.2f %13.2f %11lld %13.2f %11.2f %11s %10lld %12.2f %8.2f\n",
              name.c_str(),
              static_cast<long long>(r.model_faults_by_tasks),
              static_cast<long long>(count(r, "fault.anon") + count(r, "fault.zero") - r.exec_populated),
              static_cast<long long>(count(r, "fault.wp_copy")), static_cast<long long>(count(r, "fault.wp_reuse")),
              count(r, "cow.bytes_copied") / MiB, copied_never_written(r, written) / MiB,
              static_cast<long long>(count(r, "cow.zero_subpages_copied")), tt.peak_rss_anon / MiB,
              tt.peak_pss / MiB, ms < 0 ? "-" : fmt::format("{:.2f}", ms).c_str(),
              static_cast<long long>(count(r, "tlb.ipi")), static_cast<double>(r.tlb_l2_reach_peak) / MiB, r.seconds);
  if (!r.violations.empty() || !r.warnings.empty())
    std::printf("%-18s   ! %zu invariant violations after the replay%s, %zu recorded warnings%s\n", "",
                r.violations.size(), r.violations.empty() ? "" : (" (first: " + r.violations[0] + ")").c_str(),
                r.warnings.size(), r.warnings.empty() ? "" : (" (first: " + r.warnings[0].substr(0, r.warnings[0].find('\n')) + ")").c_str());
  if (r.sigsegv || r.sigbus || r.call_divergences || r.unknown_addresses)
    std::printf("%-18s   ! %lld SIGSEGV, %lld SIGBUS, %lld calls answered otherwise, %lld faults outside every "
                "known mapping\n",
                "", static_cast<long long>(r.sigsegv), static_cast<long long>(r.sigbus),
                static_cast<long long>(r.call_divergences), static_cast<long long>(r.unknown_addresses));
}

int run_policy_table(const record::Trace& t, const ReplayCli& v, const host::CostProfile* profile) {
  const std::vector<std::string>& names = v.columns.empty() ? default_columns() : v.columns;
  if ((t.header.flags & record::kKeepThp) && names.size() > 1)
    std::fprintf(stderr, "mmlab replay: %s was recorded with THP on (--keep-thp): its faults under a policy with "
                         "larger folios are not what the program would take; use it with --fidelity\n",
                 v.trace.c_str());
  std::string err;
  const int64_t written = record::bytes_written_after_sharing(t, &err);
  if (written < 0) {
    std::fprintf(stderr, "mmlab replay: %s\n", err.c_str());
    return 1;
  }
  print_table_head(t);
  nlohmann::ordered_json j;
  j["bytes_written_after_sharing"] = written;
  int rc = 0;
  for (const std::string& n : names) {
    record::ReplayResult r;
    if (run_column(t, v, n, &r)) {
      rc = 1;
      continue;
    }
    const double ms = modelled_ms(profile, r);
    print_row(n, r, written, ms);
    std::fflush(stdout);
    j["columns"][n] = column_json(r, written);
    if (ms >= 0) j["columns"][n]["modelled_ms"] = ms;
    j["columns"][n]["tlb_l2_reach_peak"] = r.tlb_l2_reach_peak;
  }
  if (!v.json.empty()) {
    std::ofstream out(v.json);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "mmlab replay: --json %s: cannot write\n", v.json.c_str());
      return 1;
    }
  }
  return rc;
}

// The encoding's size per fault, with and without the optional rss_stat
// records (record --rss).
void print_sizes(const record::Trace& t) {
  record::Trace lean = t;
  std::erase_if(lean.records, [](const record::Record& r) { return r.op == record::Op::kRss; });
  const auto faults = std::count_if(t.records.begin(), t.records.end(),
                                    [](const record::Record& r) { return r.op == record::Op::kFault; });
  const double all = static_cast<double>(record::encode_mmtrace(t).size());
  const double without = static_cast<double>(record::encode_mmtrace(lean).size());
  const double n = static_cast<double>(std::max<decltype(faults)>(faults, 1));
  std::printf("# size %.0f bytes, %.2f per fault; without the rss_stat records %.0f bytes, %.2f per fault\n", all,
              all / n, without, without / n);
}

int run_dump(const record::Trace& t) {
  const record::Header& h = t.header;
  std::printf("# version %u flags %#x lost %llu minflt %lld majflt %lld duration_ns %llu\n", h.version, h.flags,
              static_cast<unsigned long long>(h.lost), static_cast<long long>(h.minflt),
              static_cast<long long>(h.majflt), static_cast<unsigned long long>(h.duration_ns));
  std::printf("# host %s %s zero_page %d fault_around_bytes %lld overcommit %d numa_balancing %d pswpin %lld "
              "pswpout %lld\n",
              h.host.release.c_str(), h.host.arch.c_str(), h.host.zero_page ? 1 : 0,
              static_cast<long long>(h.host.fault_around_bytes), h.host.overcommit_memory, h.host.numa_balancing,
              static_cast<long long>(h.host.pswpin), static_cast<long long>(h.host.pswpout));
  for (const auto& [k, val] : h.host.thp) std::printf("# thp %s %s\n", k.c_str(), val.c_str());
  print_sizes(t);
  for (size_t i = 0; i < t.files.size(); i++)
    std::printf("# file %zu %s dev=%llu ino=%llu size=%llu class=%u\n", i, t.files[i].path.c_str(),
                static_cast<unsigned long long>(t.files[i].dev), static_cast<unsigned long long>(t.files[i].ino),
                static_cast<unsigned long long>(t.files[i].size), static_cast<unsigned>(t.files[i].cls));
  for (const record::Record& r : t.records) std::printf("%s\n", record::dump_record(t, r).c_str());
  return 0;
}

int run_fidelity(const record::Trace& t, const ReplayCli& v) {
  record::ReplayResult r;
  if (run_column(t, v, "recorded", &r)) return 1;
  std::printf("# fidelity of %s: a replay under the recorded host's settings (%.2f s, %llu records)\n",
              v.trace.c_str(), r.seconds, static_cast<unsigned long long>(r.records));
  if (t.header.flags & record::kForcedLost)
    std::printf("# the capture lost %llu records and was kept with --force: every figure is short\n",
                static_cast<unsigned long long>(t.header.lost));
  bool ok = true;
  for (const record::FidelityLine& l : record::fidelity_lines(t, r)) {
    std::printf("%s\n", record::format_fidelity_line(l).c_str());
    if (l.cls == record::FidelityClass::kExact && l.compared && !l.holds) ok = false;
  }
  if (!r.violations.empty()) {
    std::printf("# the invariant checker after the replay: %zu violations (first: %s)\n", r.violations.size(),
                r.violations[0].c_str());
    ok = false;
  }
  if (r.sigsegv || r.sigbus || r.call_divergences)
    std::printf("# replay: %lld SIGSEGV, %lld SIGBUS, %lld calls answered otherwise%s\n",
                static_cast<long long>(r.sigsegv), static_cast<long long>(r.sigbus),
                static_cast<long long>(r.call_divergences),
                r.first_divergences.empty() ? "" : fmt::format("; first: {}", r.first_divergences[0]).c_str());
  return ok ? 0 : 1;
}

int run_to_mms(const record::Trace& t, const ReplayCli& v) {
  record::ExcerptSpec s;
  s.tid = v.pid;
  s.from_ns = static_cast<uint64_t>(v.from_s * 1e9);
  s.to_ns = v.to_s < 0 ? ~0ull : static_cast<uint64_t>(v.to_s * 1e9);
  std::string text, err;
  if (record::excerpt_to_mms(t, s, &text, &err)) {
    std::fprintf(stderr, "mmlab replay: --to-mms: %s\n", err.c_str());
    return 1;
  }
  std::ofstream out(v.to_mms);
  out << text;
  if (!out.flush()) {
    std::fprintf(stderr, "mmlab replay: --to-mms %s: cannot write\n", v.to_mms.c_str());
    return 1;
  }
  return 0;
}

int run_replay(const ReplayCli& v) {
  record::Trace t;
  std::string err;
  if (!cowbench::geometry_known(v.geometry)) {
    std::fprintf(stderr, "mmlab replay: --geometry %s: unknown (expected off, x86-intel, x86-amd or arm64)\n",
                 v.geometry.c_str());
    return 2;
  }
  if (!check_columns(v.columns, &err) || record::read_mmtrace(v.trace, &t, &err)) {
    std::fprintf(stderr, "mmlab replay: %s\n", err.c_str());
    return 2;
  }
  if (v.dump) return run_dump(t);
  if (!v.to_mms.empty()) return run_to_mms(t, v);
  if (v.fidelity) return run_fidelity(t, v);
  host::CostProfile profile;
  std::string file = v.profile, why;
  if (!v.profile.empty() && load_profile_option("replay", v.profile, v.force, false, &profile)) return 2;
  const bool priced = !v.profile.empty() || default_profile(&profile, &file, &why);
  if (priced) std::printf("# modelled ms: the counts priced with the cost profile %s\n", file.c_str());
  else std::printf("# no modelled time: %s\n", why.c_str());
  return run_policy_table(t, v, priced ? &profile : nullptr);
}

}  // namespace

void add_replay(CLI::App& app) {
  auto v = std::make_shared<ReplayCli>();
  auto* sub = app.add_subcommand("replay", "a recorded program (mmlab record) on the model under each policy");
  sub->add_option("trace", v->trace, "the .mmtrace file")->required();
  sub->add_option("--column", v->columns, "columns to run (comma-separated; default: the policy table)")
      ->delimiter(',');
  auto* dump = sub->add_flag("--dump", v->dump, "print one line per record and exit");
  auto* fid = sub->add_flag("--fidelity", v->fidelity,
                            "replay under the recorded settings and compare with the kernel's figures");
  auto* mms = sub->add_option("--to-mms", v->to_mms, "write an excerpt (--pid, --from, --to) as a scenario to this file");
  dump->excludes(fid);
  mms->excludes(dump);
  mms->excludes(fid);
  sub->add_option("--pid", v->pid, "--to-mms: the task (its address space from its exec)")->needs(mms);
  sub->add_option("--from", v->from_s, "--to-mms: the window's start, seconds into the trace")
      ->needs(mms)
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--to", v->to_s, "--to-mms: the window's end, seconds into the trace (default: the end)")
      ->needs(mms)
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--ignore-thp-disable", v->ignore_thp_disable,
                "replay as if the program had not set PR_SET_THP_DISABLE");
  sub->add_option("--max-records", v->max_records, "stop after this many records");
  sub->add_option("--geometry", v->geometry, "a TLB model (x86-intel, x86-amd, arm64; default off): IPIs and L2 reach");
  sub->add_option("--profile", v->profile, "a cost profile for the modelled time (default: this machine kind's)");
  sub->add_flag("--force", v->force, "use a --profile measured on another kind of machine (every modelled figure is marked FORCED)");
  sub->add_option("--json", v->json, "also write the table as JSON");
  register_action(sub, [v] { return run_replay(*v); });
}

}  // namespace mmlab::cli
