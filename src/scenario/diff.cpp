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

void report_statement(const DiffOptions& opt, const Stmt& st, const std::vector<std::string>& only_a,
                      const std::vector<std::string>& only_b, const std::string& deltas, TestDiff* t, Counts* n);

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
  report_statement(opt, st, only_a, only_b, deltas, t, n);
}

void report_statement(const DiffOptions& opt, const Stmt& st, const std::vector<std::string>& only_a,
                      const std::vector<std::string>& only_b, const std::string& deltas, TestDiff* t, Counts* n) {
  const bool state = !only_a.empty() || !only_b.empty();
  if (!state && deltas.empty()) return;
  if (state || opt.counters_all) n->state_diffs++;
  t->state |= state;
  t->counters |= !deltas.empty();
  // Counted with and without --full: the TAP line gives the number either way.
  if (t->statements++ >= opt.max_lines_per_test && !opt.full) return;
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

// What stepping a test's two sides gave: the outcomes, where the sides
// parted, what differed after each statement.
struct SidesRun {
  ScenarioResult a, b;
  std::string first_divergence;
  TestDiff t;
  Counts n;  // state_diffs
};

// The divergence line: what each side did at the statement where one went on and the other did not.
std::string divergence(const DiffOptions& opt, const Stmt& st, bool ra, const std::string& why_a, bool rb,
                       const std::string& why_b) {
  return fmt::format("{}:{}: {} {}, {} {}", st.file, st.line, opt.a.name, ra ? "continues" : why_a, opt.b.name,
                     rb ? "continues" : why_b);
}

std::string end_reason(const TestRun& r) { return r.failure() ? r.failure()->msg : "ends"; }

// Both sides at once, statement by statement (the host's side cannot be
// replayed, and a model side whose state differs needs its facts' lines).
SidesRun run_lockstep(const DiffOptions& opt, const ScenarioOptions& so, const ScenarioFileAst& f, const TestCase& tc,
                      const std::vector<const Stmt*>& stmts, bool host) {
  SidesRun s;
  std::unique_ptr<TestRun> a = make_run(so, opt.a), b = make_run(so, opt.b);
  bool began_a = a->begin(f, tc);  // both sides begin, even if one fails
  bool began_b = b->begin(f, tc);
  for (const Stmt* st : began_a && began_b ? stmts : std::vector<const Stmt*>{}) {
    if (a->ended() && b->ended()) break;
    auto ca = a->counters(), cb = b->counters();
    bool ra = a->step(*st), rb = b->step(*st);
    if (ra != rb && s.first_divergence.empty()) s.first_divergence = divergence(opt, *st, ra, end_reason(*a), rb, end_reason(*b));
    if (ra && rb && !host) diff_state(opt, *st, *a, *b, ca, cb, &s.t, &s.n);
  }
  s.a = a->finish();
  s.b = b->finish();
  return s;
}

// One model side of a test run alone: per statement, whether it went on,
// the digest of the state facts after it and the counters it moved.
struct SideSteps {
  struct Step {
    bool ok = false;
    std::pair<uint64_t, uint64_t> digest;
    std::map<std::string, int64_t> moved;  // counters with a non-zero delta
  };
  bool began = false;
  std::vector<Step> steps;  // until the side ended
  std::string end_why;      // its failure, or "ends"
  ScenarioResult result;
};

SideSteps run_side(const ScenarioOptions& so, const DiffConfig& c, const ScenarioFileAst& f, const TestCase& tc,
                   const std::vector<const Stmt*>& stmts) {
  SideSteps s;
  std::unique_ptr<TestRun> r = make_run(so, c);
  s.began = r->begin(f, tc);
  // Counters after a statement are those before the next: nothing runs
  // between them (reading them by name was a tenth of a side's time).
  std::map<std::string, int64_t> before = s.began ? r->counters() : std::map<std::string, int64_t>{};
  for (const Stmt* st : s.began ? stmts : std::vector<const Stmt*>{}) {
    if (r->ended()) break;
    SideSteps::Step& x = s.steps.emplace_back();
    x.ok = r->step(*st);
    if (!x.ok) continue;
    x.digest = r->state_facts()->digest();  // before the counters, as diff_state reads them
    std::map<std::string, int64_t> after = r->counters();
    for (auto& [k, v] : after)
      if (v != before[k]) x.moved[k] = v - before[k];
    before = std::move(after);
  }
  s.end_why = end_reason(*r);
  s.result = r->finish();
  return s;
}

// The model sides one after the other, so that one System per test is live
// at a time (the second takes the first's frame store, warm, from the pool):
// a 1 GiB hugetlb test's two Systems held 4 GiB at once. Only digests of
// each statement's facts are kept; a test whose states differ anywhere is
// run again in lockstep for the lines (nullopt), as are sides that did not
// both begin. Counter differences need no lines and are reported from here.
std::optional<SidesRun> run_sides_apart(const DiffOptions& opt, const ScenarioOptions& so, const ScenarioFileAst& f,
                                        const TestCase& tc, const std::vector<const Stmt*>& stmts) {
  SideSteps A = run_side(so, opt.a, f, tc, stmts);
  SideSteps B = run_side(so, opt.b, f, tc, stmts);
  if (!A.began || !B.began) return std::nullopt;
  SidesRun s;
  for (size_t i = 0; i < stmts.size(); i++) {
    const bool a_over = i >= A.steps.size(), b_over = i >= B.steps.size();  // ended before this statement
    if (a_over && b_over) break;
    const bool ra = !a_over && A.steps[i].ok, rb = !b_over && B.steps[i].ok;
    if (ra != rb && s.first_divergence.empty()) s.first_divergence = divergence(opt, *stmts[i], ra, A.end_why, rb, B.end_why);
    if (!ra || !rb) continue;
    const SideSteps::Step &x = A.steps[i], &y = B.steps[i];
    if (x.digest != y.digest) return std::nullopt;
    // diff_state's order: every counter by name, those whose deltas differ.
    std::string deltas;
    auto ix = x.moved.begin(), iy = y.moved.begin();
    while (ix != x.moved.end() || iy != y.moved.end()) {
      const bool take_x = iy == y.moved.end() || (ix != x.moved.end() && ix->first <= iy->first);
      const bool take_y = ix == x.moved.end() || (iy != y.moved.end() && iy->first <= ix->first);
      const std::string& k = take_x ? ix->first : iy->first;
      const int64_t da = take_x ? ix->second : 0, db = take_y ? iy->second : 0;
      if (da != db) deltas += fmt::format(" {} {}/{}", k, da, db);
      if (take_x) ++ix;
      if (take_y) ++iy;
    }
    report_statement(opt, *stmts[i], {}, {}, deltas, &s.t, &s.n);
  }
  s.a = std::move(A.result);
  s.b = std::move(B.result);
  return s;
}

void diff_test(const DiffOptions& opt, const ScenarioOptions& so, const ScenarioFileAst& f, const TestCase& tc,
               size_t number, std::ostream& out, Counts* n, DiffTestRecord* rec) {
  n->tests++;
  rec->file = f.path;
  rec->name = tc.name;
  // Only two models show their end state: the host's is compared through the expectations.
  const bool host = opt.a.backend == Backend::kHost || opt.b.backend == Backend::kHost;
  std::vector<const Stmt*> stmts;
  for (auto& st : f.prelude) stmts.push_back(&st);
  for (auto& st : tc.stmts) stmts.push_back(&st);
  std::optional<SidesRun> sides;
  if (!host) sides = run_sides_apart(opt, so, f, tc, stmts);
  if (!sides) sides = run_lockstep(opt, so, f, tc, stmts, host);
  n->state_diffs += sides->n.state_diffs;
  const TestDiff& t = sides->t;
  const std::string& first_divergence = sides->first_divergence;
  ScenarioResult &rA = sides->a, &rB = sides->b;
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
  FrameStorePool::instance().set_runner_hugepages(!host);
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
    // Model against model: independent tests, each on Systems of its own
    // (one live at a time, run_sides_apart), several at a time, the large
    // ones one at a time, reported in order.
    std::string narrowed;
    const int width = parallel_width(opt.jobs, frame_store_footprint(opt.ram_bytes), opt.mem_budget, &narrowed);
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
        1, [&](size_t i) { return test_touch_estimate(*tests[i].first, *tests[i].second) >= kLargeTestBytes ? 1 : 0; }, 1);
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
