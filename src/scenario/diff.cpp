// `mmlab diff`: one scenario corpus under two configurations, stepped in
// lockstep so that the first statement where they part is known.
#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>

#include "mmlab/input_file.h"
#include "fmt/format.h"
#include "host/probe.h"
#include "host/sysfs.h"
#include "mmlab/scenario.h"
#include "phys/frame_store.h"
#include "scenario/parallel.h"
#include "scenario/test_run.h"

namespace mmlab {
namespace {

std::unique_ptr<TestRun> make_run(const ScenarioOptions& so, const DiffConfig& c) {
  return c.backend == Backend::kHost ? make_host_run(so) : make_model_run(so, c.tunes);
}

const KnownDifference* find_known(const std::vector<KnownDifference>& known, const std::string& name) {
  for (auto& k : known)
    if (fnmatch(k.glob.c_str(), name.c_str(), FNM_EXTMATCH) == 0) return &k;
  return nullptr;
}

struct Counts {
  int tests = 0, compared = 0, not_compared = 0, outcome_changes = 0, known = 0, state_diffs = 0, skipped_expectations = 0;
  int reruns = 0, counters_only = 0, state_tests = 0;
  std::map<std::string, int> skips_by_key;
  Counts& operator+=(const Counts& o) {
    tests += o.tests;
    compared += o.compared;
    not_compared += o.not_compared;
    outcome_changes += o.outcome_changes;
    known += o.known;
    state_diffs += o.state_diffs;
    skipped_expectations += o.skipped_expectations;
    reruns += o.reruns;
    counters_only += o.counters_only;
    state_tests += o.state_tests;
    for (auto& [k, v] : o.skips_by_key) skips_by_key[k] += v;
    return *this;
  }
};

// What one test's statements showed, beside its outcomes.
struct TestDiff {
  std::vector<std::string> report;  // detail lines
  int statements = 0;               // statements with a difference
  bool state = false, counters = false;
};

// The end state and counters that differ after one statement, as report lines.
void diff_state(const DiffOptions& opt, const Stmt& st, TestRun& a, TestRun& b, std::map<std::string, int64_t>& ca,
                std::map<std::string, int64_t>& cb, TestDiff* t, Counts* n) {
  // Lines are formatted only where the facts differ: equal facts give equal
  // lines, which have no difference.
  std::unique_ptr<TestRun::StateFacts> fa = a.state_facts(), fb = b.state_facts();
  std::vector<std::string> only_a, only_b;
  if (!fa->equals(*fb)) {
    std::vector<std::string> sa = fa->lines(), sb = fb->lines();
    std::set_difference(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(only_a));
    std::set_difference(sb.begin(), sb.end(), sa.begin(), sa.end(), std::back_inserter(only_b));
  }
  std::string deltas;
  auto na = a.counters(), nb = b.counters();
  for (auto& [k, v] : na) {
    int64_t da = v - ca[k], db = nb[k] - cb[k];
    if (da != db) deltas += fmt::format(" {} {}/{}", k, da, db);
  }
  const bool state = !only_a.empty() || !only_b.empty();
  if (!state && deltas.empty()) return;
  if (state || opt.counters_all) n->state_diffs++;
  t->state |= state;
  t->counters |= !deltas.empty();
  if (!opt.full && t->statements++ >= opt.max_lines_per_test) return;
  const std::string& an = opt.a.name;
  const std::string& bn = opt.b.name;
  t->report.push_back(fmt::format("  after {}:{}: {}", st.file, st.line, st.text.substr(st.text.find_first_not_of(' '))));
  const size_t show = opt.full ? SIZE_MAX : 4;  // lines shown per side; the rest are counted
  for (size_t i = 0; i < only_a.size() && i < show; i++) t->report.push_back(fmt::format("    - {}: {}", an, only_a[i]));
  if (only_a.size() > show) t->report.push_back(fmt::format("    - {}: ... {} more lines (--full shows them)", an, only_a.size() - show));
  for (size_t i = 0; i < only_b.size() && i < show; i++) t->report.push_back(fmt::format("    + {}: {}", bn, only_b[i]));
  if (only_b.size() > show) t->report.push_back(fmt::format("    + {}: ... {} more lines (--full shows them)", bn, only_b.size() - show));
  if (!deltas.empty()) t->report.push_back(fmt::format("    model-only counters ({}/{}):{}", an, bn, deltas));
}

// One TAP line: "ok N - NAME" or "not ok N - NAME", with a directive or a
// note after '#', then the details as diagnostics.
void tap_line(std::ostream& out, size_t number, bool ok, const std::string& name, const std::string& note,
              const std::vector<std::string>& details) {
  out << (ok ? "ok " : "not ok ") << number << " - " << name << (note.empty() ? "" : " # " + note) << "\n";
  for (auto& l : details) out << "#" << l << "\n";
}

void diff_test(const DiffOptions& opt, const ScenarioOptions& so, const ScenarioFileAst& f, const TestCase& tc,
               size_t number, std::ostream& out, Counts* n, DiffTestRecord* rec) {
  n->tests++;
  rec->file = f.path;
  rec->name = tc.name;
  // Only two models show their end state: the host's is compared through the expectations.
  const bool host = opt.a.backend == Backend::kHost || opt.b.backend == Backend::kHost;
  std::unique_ptr<TestRun> a = make_run(so, opt.a), b = make_run(so, opt.b);
  TestDiff t;
  bool began_a = a->begin(f, tc);  // both sides begin, even if one fails
  bool began_b = b->begin(f, tc);
  std::vector<const Stmt*> stmts;
  for (auto& st : f.prelude) stmts.push_back(&st);
  for (auto& st : tc.stmts) stmts.push_back(&st);
  std::string first_divergence;
  for (const Stmt* st : began_a && began_b ? stmts : std::vector<const Stmt*>{}) {
    if (a->ended() && b->ended()) break;
    auto ca = a->counters(), cb = b->counters();
    bool ra = a->step(*st), rb = b->step(*st);
    if (ra != rb && first_divergence.empty())
      first_divergence = fmt::format("{}:{}: {} {}, {} {}", st->file, st->line, opt.a.name,
                                     ra ? "continues" : (a->failure() ? a->failure()->msg : "ends"), opt.b.name,
                                     rb ? "continues" : (b->failure() ? b->failure()->msg : "ends"));
    if (ra && rb && !host) diff_state(opt, *st, *a, *b, ca, cb, &t, n);
  }
  ScenarioResult rA = a->finish(), rB = b->finish();
  rec->a_outcome = outcome_name(rA.outcome);
  rec->b_outcome = outcome_name(rB.outcome);
  if (rA.outcome == Outcome::kSkip || rB.outcome == Outcome::kSkip) {
    n->not_compared++;
    const ScenarioResult& s = rA.outcome == Outcome::kSkip ? rA : rB;
    rec->verdict = "skip";
    rec->detail = (&s == &rA ? opt.a.name : opt.b.name) + " skips: " + s.reason;
    tap_line(out, number, true, tc.name, "SKIP " + rec->detail, {});
    return;
  }
  n->compared++;
  // What a side did not compare in a test compared, under the test's line and in the totals.
  std::vector<std::string> details;
  if (!first_divergence.empty()) details.push_back("  first divergence: " + first_divergence);
  details.insert(details.end(), t.report.begin(), t.report.end());
  for (auto [r, name] : {std::pair{&rA, &opt.a.name}, std::pair{&rB, &opt.b.name}}) {
    if (!r->skipped_expectations) continue;
    n->skipped_expectations += r->skipped_expectations;
    for (auto& k : r->skips) n->skips_by_key[k.key] += k.count;
    details.push_back(fmt::format("  {}: {}", *name, skipped_line(*r)));
  }
  const bool outcome_changed = rA.outcome != rB.outcome;
  const KnownDifference* known = outcome_changed ? find_known(opt.known, tc.name) : nullptr;
  const std::string outcomes = fmt::format("{} {}, {} {}", opt.a.name, rec->a_outcome, opt.b.name, rec->b_outcome);
  if (known) {
    n->known++;
    rec->verdict = "known";
    rec->detail = known->reason;
    tap_line(out, number, true, tc.name, "TODO known difference: " + known->reason + " (" + outcomes + ")", details);
  } else if (outcome_changed) {
    n->outcome_changes++;
    rec->verdict = "outcome";
    rec->detail = outcomes;
    tap_line(out, number, false, tc.name, "outcome changed: " + outcomes, details);
  } else if (t.state || (t.counters && opt.counters_all)) {
    n->state_tests++;
    rec->verdict = "state";
    rec->detail = fmt::format("{} statements", t.statements);
    tap_line(out, number, !opt.expect_nfc, tc.name,
             fmt::format("end state differs after {} statement{}{}", t.statements, t.statements == 1 ? "" : "s",
                         t.state ? "" : " (model-only counters, --counters all)"),
             details);
  } else if (t.counters) {
    n->counters_only++;
    rec->verdict = "counters";
    tap_line(out, number, true, tc.name, "only model-only counters differ", details);
  } else {
    rec->verdict = "agree";
    tap_line(out, number, true, tc.name, "", details);
  }
}

}  // namespace

int load_known_differences(const std::string& path, std::vector<KnownDifference>* out, std::string* err) {
  // A list a person keeps: a bounded read of a regular file (a directory
  // read as an empty list would make every known test a failure).
  std::string text, why;
  if (read_input_file(path, 16ull << 20, &text, &why)) {
    *err = path + ": " + why;
    return -1;
  }
  std::istringstream in(std::move(text));
  int line = 0;
  for (std::string l; std::getline(in, l);) {
    line++;
    auto b = l.find_first_not_of(" \t");
    if (b == std::string::npos || l[b] == '#') continue;
    auto e = l.find_first_of(" \t", b);
    auto r = e == std::string::npos ? std::string::npos : l.find_first_not_of(" \t", e);
    if (r == std::string::npos) {
      *err = fmt::format("{}:{}:{}: expected GLOB REASON...", path, line, b + 1);
      return -1;
    }
    out->push_back({l.substr(b, e - b), l.substr(r)});
  }
  return 0;
}

const std::vector<std::string>& model_only_counter_prefixes() {
  static const std::vector<std::string> v = {"gup.", "fault.", "bytes.", "cow."};
  return v;
}

int scenario_diff(const ScenarioProgram& prog, const DiffOptions& opt, std::ostream& out, DiffSummary* summary) {
  ScenarioOptions so;
  so.ram_bytes = opt.ram_bytes;
  const bool host = opt.a.backend == Backend::kHost || opt.b.backend == Backend::kHost;
  std::string why;
  out << "TAP version 13\n";
  if (host && !scenario_host_available(&why)) {
    out << "1..0 # SKIP host backend unavailable: " << why << " (nothing compared)\n";
    return 0;
  }
  std::vector<std::pair<const ScenarioFileAst*, const TestCase*>> tests;
  for (auto& f : prog.files)
    for (auto& tc : f.tests)
      if (opt.filter.matches(tc.name)) tests.push_back({&f, &tc});
  out << "1.." << tests.size() << "\n";
  std::optional<host::HostLock> lock;
  if (host) {
    lock.emplace();
    for (auto& l : host::host_probe_lines(host::host_probes())) out << l << "\n";
  }
  Counts n;
  std::vector<DiffTestRecord> records(tests.size());
  if (!host) {
    // Model against model: independent tests, each on Systems of its own,
    // several at a time (two Systems per test), reported in order.
    std::string narrowed;
    const int width = parallel_width(opt.jobs, 2 * frame_store_footprint(opt.ram_bytes), opt.mem_budget, &narrowed);
    if (!narrowed.empty()) std::cerr << "mmlab: " << narrowed << "\n";
    std::vector<std::string> text(tests.size());
    std::vector<Counts> counts(tests.size());
    run_ordered(
        tests.size(), width,
        [&](size_t i) {
          std::ostringstream o;
          diff_test(opt, so, *tests[i].first, *tests[i].second, i + 1, o, &counts[i], &records[i]);
          text[i] = o.str();
        },
        [&](size_t i) {
          out << text[i];
          out.flush();
          n += counts[i];
          if (opt.progress) opt.progress(i + 1, tests.size(), records[i].verdict == "outcome");
        },
        2);
  }
  for (size_t i = 0; host && i < tests.size(); i++) {
    const ScenarioFileAst& f = *tests[i].first;
    const TestCase& tc = *tests[i].second;
    std::ostringstream first;
    Counts before = n;
    diff_test(opt, so, f, tc, i + 1, first, &n, &records[i]);
    // The host's statistics and pools are machine-wide: another process
    // can fault a THP or take a huge page meanwhile. A changed outcome is
    // run once more, and both runs are shown.
    if (n.outcome_changes > before.outcome_changes) {
      std::ostringstream again;
      Counts retry = before;
      DiffTestRecord rec;
      diff_test(opt, so, f, tc, i + 1, again, &retry, &rec);
      if (retry.outcome_changes == before.outcome_changes) {
        n = retry;
        n.reruns++;
        records[i] = rec;
        records[i].rerun = true;
        out << again.str() << "# rerun: the first run diverged, a second agreed; the first run:\n";
        std::istringstream lines(first.str());
        for (std::string l; std::getline(lines, l);) out << "#   | " << l << "\n";
        if (opt.progress) opt.progress(i + 1, tests.size(), false);
        continue;
      }
    }
    out << first.str();
    out.flush();
    if (opt.progress) opt.progress(i + 1, tests.size(), records[i].verdict == "outcome");
  }
  const int agree = n.compared - n.outcome_changes - n.known - n.state_tests - n.counters_only;
  out << fmt::format(
      "# diff: {} tests, {} compared ({} agree, {} with only model-only counters differing, {} with end-state "
      "differences), {} not compared (skipped by a side), {} outcome changes, {} known differences, {} statements with "
      "end-state differences{}{}\n",
      n.tests, n.compared, agree, n.counters_only, n.state_tests, n.not_compared, n.outcome_changes, n.known,
      n.state_diffs, opt.counters_all ? " (counters judged: --counters all)" : "", opt.expect_nfc ? " (--expect-nfc)" : "");
  if (host)
    out << fmt::format("# diff: {} expectations skipped on the host in the tests compared{}; {} tests agreed only when re-run\n",
                       n.skipped_expectations, skip_totals(n.skips_by_key), n.reruns);
  if (summary) {
    *summary = {n.tests, n.compared, agree, n.counters_only, n.state_tests, n.outcome_changes, n.known, n.not_compared,
                n.state_diffs, n.skipped_expectations, n.reruns, std::move(records)};
  }
  if (n.outcome_changes) return 1;
  return opt.expect_nfc && n.state_diffs ? 1 : 0;
}

}  // namespace mmlab
