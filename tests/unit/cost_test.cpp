// Unit tests of the cost model (include/mmlab/cost.h): the term table
// against the counters the model keeps, the prediction, the fit's numerics
// and the fit itself on synthetic cases whose costs are known. (Measuring
// needs the host: ctest cost.validate_quick.)
#include "mmlab/cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "mmlab/scenario.h"
#include "mmlab/system.h"

namespace mmlab::cost {
namespace {

// Every term's counter is one the model keeps: an event or per-order
// counter, or a /proc/vmstat item. A misspelt counter would count nothing
// and its term would silently cost nothing.
TEST(CostTerms, EveryCounterExists) {
  SystemConfig cfg;
  cfg.ram_bytes = 16ull << 20;
  auto sys = System::create(cfg);
  ASSERT_TRUE(sys);
  std::set<std::string> ids;
  for (const TermDef& t : cost_terms()) {
    EXPECT_TRUE(ids.insert(t.id).second) << "duplicate term " << t.id;
    // harness.case is no model counter: run_cases adds it, one per case.
    const bool known = sys->counter(t.counter) >= 0 || sys->vmstat(t.counter) >= 0 || t.id == std::string("harness_case");
    EXPECT_TRUE(known) << t.id << ": no counter " << t.counter;
    // Every counter a tool prices one operation by has a tally slot.
    if (t.id != std::string("harness_case")) {
      EXPECT_GE(EventTally::slot(t.counter), 0) << t.id;
    }
    EXPECT_NE(std::string(t.meaning), "");
  }
  EXPECT_EQ(find_term("syscall")->counter, std::string("mm.syscall"));
  EXPECT_EQ(find_term("no-such-term"), nullptr);
}

host::CostProfile profile_of(std::initializer_list<std::pair<const char*, double>> costs) {
  host::CostProfile p;
  for (auto& [id, ns] : costs) p.terms.push_back({id, ns, ns, ns, "fit"});
  return p;
}

TEST(CostPredict, CountsTimesCostsPerSide) {
  host::CostProfile p = profile_of({{"syscall", 1000}, {"fault_anon", 500}, {"user_write", 0.5}});
  std::map<std::string, int64_t> counts = {
      {"mm.syscall", 3}, {"fault.anon", 10}, {"user.bytes_written", 4096}, {"pgtable.alloc", 2}, {"unrelated", 7}};
  Prediction r = predict(p, counts);
  EXPECT_DOUBLE_EQ(r.kernel_ns, 3 * 1000 + 10 * 500);
  EXPECT_DOUBLE_EQ(r.user_ns, 4096 * 0.5);
  EXPECT_DOUBLE_EQ(r.total_ns(), 8000 + 2048);
  // pgtable_alloc is counted but the profile has no cost for it: said, not guessed.
  ASSERT_EQ(r.missing.size(), 1u);
  EXPECT_EQ(r.missing[0], "pgtable_alloc");
  ASSERT_EQ(r.by_term.size(), 3u);
  EXPECT_EQ(r.by_term[0].first, "syscall");
}

// A counted term the calibration never exercised costs 0 and is named.
TEST(CostPredict, NamesTermsNoCaseExercised) {
  host::CostProfile p = profile_of({{"syscall", 1000}});
  p.terms.push_back({"gup_walk", 0, 0, 0, "not exercised"});
  Prediction r = predict(p, {{"mm.syscall", 1}, {"gup.descents", 64}});
  EXPECT_DOUBLE_EQ(r.kernel_ns, 1000);
  ASSERT_EQ(r.not_exercised.size(), 1u);
  EXPECT_EQ(r.not_exercised[0], "gup_walk");
  EXPECT_TRUE(r.missing.empty());
}

TEST(CostPredict, OverrideSetsOneTermAndRefusesBadItems) {
  host::CostProfile p = profile_of({{"copy_o0", 0.2}});
  std::string err;
  ASSERT_EQ(override_terms({"copy_o0=0.1", "syscall=500"}, &p, &err), 0) << err;
  EXPECT_DOUBLE_EQ(p.term("copy_o0")->ns, 0.1);
  EXPECT_EQ(p.term("copy_o0")->how, "override");
  EXPECT_DOUBLE_EQ(p.term("syscall")->ns, 500);
  for (const char* bad : {"copy_o0", "nosuch=1", "copy_o0=", "copy_o0=-1", "copy_o0=1x", "copy_o0=nan"}) {
    err.clear();
    EXPECT_EQ(override_terms({bad}, &p, &err), -EINVAL) << bad;
    EXPECT_NE(err.find(bad), std::string::npos) << err;
  }
}

TEST(CostFit, NnlsSolvesAnExactSystem) {
  // Three columns, five rows, x = (2, 0.5, 3).
  const std::vector<double> a = {1, 0, 2, 0, 1, 1, 3, 1, 0, 1, 4, 1, 2, 2, 2};
  std::vector<double> b(5);
  for (size_t i = 0; i < 5; i++) b[i] = a[i * 3] * 2 + a[i * 3 + 1] * 0.5 + a[i * 3 + 2] * 3;
  std::vector<double> x = nnls(a, 5, 3, b);
  EXPECT_NEAR(x[0], 2, 1e-9);
  EXPECT_NEAR(x[1], 0.5, 1e-9);
  EXPECT_NEAR(x[2], 3, 1e-9);
}

TEST(CostFit, NnlsKeepsCostsNonNegative) {
  // The unconstrained least-squares answer is x = (3, -1): NNLS must clamp
  // the second at 0 and refit the first alone: min |(1,1,1) x0 - (2,3,1)|
  // -> x0 = 2.
  const std::vector<double> a = {1, 1, 1, 2, 1, 0};
  const std::vector<double> b = {2, 1, 3};
  std::vector<double> x = nnls(a, 3, 2, b);
  EXPECT_GE(x[1], 0.0);
  EXPECT_NEAR(x[1], 0.0, 1e-12);
  EXPECT_NEAR(x[0], 2.0, 1e-9);
}

TEST(CostFit, ConditionNumber) {
  const std::vector<double> eye = {1, 0, 0, 1, 0, 0};  // 3 x 2, orthogonal columns
  EXPECT_NEAR(condition_number(eye, 3, 2), 1.0, 1e-9);
  const std::vector<double> dep = {1, 2, 2, 4, 3, 6};  // the second column is twice the first
  EXPECT_EQ(condition_number(dep, 3, 2), std::numeric_limits<double>::infinity());
  // Units do not matter: a column in bytes and one in calls, scaled apart.
  const std::vector<double> scaled = {4096, 0, 0, 1, 0, 0};
  EXPECT_NEAR(condition_number(scaled, 3, 2), 1.0, 1e-9);
}

// Synthetic cases with known costs: the fit recovers them, merges the term
// whose count always equals another's, and leaves a term no case counts
// "not exercised".
TEST(CostFit, RecoversKnownCostsAndReportsMerges) {
  const std::map<std::string, double> truth = {{"mm.syscall", 1000}, {"fault.anon", 800}, {"pgtable.pte_set", 30},
                                               {"user.bytes_written", 0.05}};
  std::vector<CaseRun> cases;
  auto add = [&](const char* name, std::map<std::string, int64_t> counts) {
    CaseRun c;
    c.name = name;
    counts["lru.add"] = counts["fault.anon"];  // always equal: cannot be told apart
    c.counts = counts;
    double y = 0;
    for (auto& [k, v] : counts)
      if (truth.count(k)) y += truth.at(k) * static_cast<double>(v);
    c.host_ns = {y * 0.99, y, y * 1.01};
    cases.push_back(c);
  };
  add("a", {{"mm.syscall", 1}, {"fault.anon", 100}, {"pgtable.pte_set", 100}, {"user.bytes_written", 409600}});
  add("b", {{"mm.syscall", 1}, {"fault.anon", 25}, {"pgtable.pte_set", 400}, {"user.bytes_written", 1638400}});
  add("c", {{"mm.syscall", 200}});
  add("d", {{"mm.syscall", 1}, {"user.bytes_written", 1638400}});
  add("e", {{"mm.syscall", 5}, {"fault.anon", 400}, {"pgtable.pte_set", 400}, {"user.bytes_written", 1638400}});
  host::CostProfile p;
  fit_terms(cases, &p);
  EXPECT_NEAR(p.term("syscall")->ns, 1000, 1);
  EXPECT_NEAR(p.term("fault_anon")->ns + p.term("lru_add")->ns, 800, 1);
  EXPECT_NEAR(p.term("pte_set")->ns, 30, 0.1);
  EXPECT_NEAR(p.term("user_write")->ns, 0.05, 1e-4);
  const std::string merged = p.term("fault_anon")->how == "fit" ? p.term("lru_add")->how : p.term("fault_anon")->how;
  EXPECT_EQ(merged.rfind("merged into ", 0), 0u) << merged;
  EXPECT_EQ(p.term("fault_unshare")->how, "not exercised");
  EXPECT_EQ(p.fit.cases, 5);
  EXPECT_LT(p.fit.residual_max, 1e-6);
  ASSERT_EQ(p.fit.per_case.size(), 5u);
  EXPECT_EQ(p.fit.per_case[2].name, "c");
}

TEST(CostValidate, ErrorsBandsAndFamilies) {
  host::CostProfile p = profile_of({{"syscall", 1000}});
  p.fit.reference_ns = 100;
  std::vector<CaseRun> cases(3);
  cases[0] = {"fault-one", {1000, 1010, 990, 1000, 1005}, {{"mm.syscall", 1}}, ""};   // exact
  cases[1] = {"mp-two", {800, 800, 800, 800, 800}, {{"mm.syscall", 1}}, ""};          // +25%: a miss
  cases[2] = {"fault-skipped", {}, {{"mm.syscall", 1}}, "host: no such size"};
  // This run's speed reference took 80 ns where the calibration's took 100:
  // the machine is faster now, and its times read slower at the
  // calibration's speed.
  ValidationReport r = validate(p, cases, 80, "cases", "profile");
  EXPECT_DOUBLE_EQ(r.speed_ratio, 0.8);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].family, "fault");
  EXPECT_FALSE(r.rows[0].multi_process);
  EXPECT_NEAR(r.rows[0].error, 0.0, 1e-12);
  EXPECT_TRUE(r.rows[0].met);
  EXPECT_TRUE(r.rows[1].multi_process);
  EXPECT_NEAR(r.rows[1].error, 0.25, 1e-12);
  EXPECT_FALSE(r.rows[1].met);
  EXPECT_EQ(r.rows[2].skipped, "host: no such size");
  const std::string t = validation_table(r);
  EXPECT_NE(t.find("1 of 1 met (100%)"), std::string::npos) << t;
  EXPECT_NE(t.find("0 of 1 met (0%)"), std::string::npos) << t;
  // At the calibration's speed the host's 800 ns reads 800 / 0.8 = 1000: met;
  // the first case's 1000 ns reads 1250, and the prediction is 20% short.
  EXPECT_NEAR(r.rows[1].error_at_speed, 0.0, 1e-12);
  EXPECT_TRUE(r.rows[1].met_at_speed);
  EXPECT_NEAR(r.rows[0].error_at_speed, -0.2, 1e-12);
  EXPECT_FALSE(r.rows[0].met_at_speed);
  EXPECT_NE(t.find("at the calibration's speed (the host's times / the speed ratio): 1 of 1 met"), std::string::npos) << t;
  EXPECT_EQ(text_digest("cases"), text_digest("cases"));
  EXPECT_NE(text_digest("cases"), text_digest("cases "));
}

// The model side of a case: the counts are what ran after `counters reset`,
// vmstat items included, and identical in two runs.
TEST(CostCases, ModelCountsAreTheGrowthAfterTheReset) {
  std::string err;
  auto prog = scenario_parse_text("c.mms",
                                  "sysfs transparent_hugepage/enabled never\n"
                                  "sysfs transparent_hugepage/hugepages-2048kB/enabled never\n"
                                  "proc P\n"
                                  "test t\n"
                                  "P mmap A 1M rw private align=2M\n"
                                  "P write A 64K 1\n"
                                  "counters reset\n"
                                  "P write A+64K 64K 2\n",
                                  &err);
  ASSERT_TRUE(prog) << err;
  ScenarioOptions so;
  so.cost_sample = true;
  std::ostream none(nullptr);
  auto r1 = scenario_run(*prog, so, none), r2 = scenario_run(*prog, so, none);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].outcome, Outcome::kPass);
  const auto& c = r1[0].cost_counts;
  EXPECT_EQ(c.at("fault.anon"), 16);
  EXPECT_EQ(c.at("pgfault"), 16);  // a vmstat item, counted from the reset
  EXPECT_EQ(c.at("user.bytes_written"), 64 << 10);
  EXPECT_EQ(c.at("user.accesses"), 1);
  EXPECT_EQ(c.at("data.zeroed.order0"), 64 << 10);
  EXPECT_EQ(c.at("mm.syscall"), 0);
  EXPECT_EQ(r1[0].cpu_ns, -1);  // the host's side only
  EXPECT_EQ(r1[0].cost_counts, r2[0].cost_counts);
}

// A 16 MiB System whose anonymous faults are all order 0.
std::unique_ptr<System> order0_system() {
  SystemConfig cfg;
  cfg.ram_bytes = 16ull << 20;
  auto sys = System::create(cfg);
  if (sys && sys->sysfs_write("transparent_hugepage/enabled", "never") != 0) sys.reset();
  return sys;
}

// A tally counts the events of its own thread only: another thread's
// faults in the same System move the System's counters, not the tally.
TEST(EventTally, CountsOnlyItsOwnThread) {
  auto sys = order0_system();
  ASSERT_TRUE(sys);
  Process* p = sys->new_process("p");
  const long a = p->mmap(0, 128 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  const auto addr = static_cast<uint64_t>(a);
  const int anon = EventTally::slot("fault.anon"), pgfault = EventTally::slot("pgfault");
  ASSERT_GE(anon, 0);
  ASSERT_GE(pgfault, 0);
  EXPECT_EQ(EventTally::slot("no.such.counter"), -1);
  const int64_t before = sys->counter("fault.anon");
  EventTally t;
  std::thread other([&] { EXPECT_TRUE(p->fill(addr, 1, 64 << 10).ok()); });
  other.join();
  EXPECT_EQ(t.at(anon), 0);
  ASSERT_TRUE(p->fill(addr + (64 << 10), 2, 64 << 10).ok());
  EXPECT_EQ(t.at(anon), 16);
  EXPECT_EQ(t.at(pgfault), 16);
  EXPECT_EQ(sys->counter("fault.anon") - before, 32);
  p->exit();
}

// Pricing a tally gives what predict() gives for the same counter growth,
// less the harness's terms (a tool's modelled time has none).
TEST(EventTally, PricerAgreesWithPredict) {
  auto sys = order0_system();
  ASSERT_TRUE(sys);
  Process* p = sys->new_process("p");
  const long a = p->mmap(0, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  host::CostProfile prof = profile_of({{"fault", 900}, {"fault_anon", 500}, {"alloc_pcp", 120}, {"pte_set", 30},
                                       {"zero_o0", 0.05}, {"user_write", 0.25}, {"user_access", 7000}});
  const TallyPricer pricer(prof);
  const auto c0 = sys->all_counters();
  EventTally t;
  const double ns0 = pricer.ns(t);
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(a), 3, 64 << 10).ok());
  const double priced = pricer.ns(t) - ns0;
  auto growth = sys->all_counters();
  for (auto& [n, v] : growth) v -= c0.at(n);
  const Prediction want = predict(prof, growth);
  EXPECT_GT(want.harness_ns, 0);  // user.accesses moved, and stays out of the price
  EXPECT_NEAR(priced, want.program_ns(), 1e-9 * want.program_ns());
  // 16 anonymous faults, 16 pgfault (the first attaches the anon_vma under
  // a tried mmap_lock, without a retry); 16 pages and 3 page-table pages
  // from the per-CPU lists, all zeroed; 16 PTEs set; 64K stored by the
  // program.
  EXPECT_DOUBLE_EQ(want.program_ns(), 16 * 900 + 16 * 500 + 19 * 120 + 16 * 30 + (16 + 3) * 4096 * 0.05 + (64 << 10) * 0.25);
  p->exit();
}

}  // namespace
}  // namespace mmlab::cost
