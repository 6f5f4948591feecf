// One test of a scenario file, run on a backend: the model (a fresh System)
// or the host kernel (real processes). The statement-independent parts live
// here: name binding, errno/signal checks, skip/xfail, the outcome.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mmlab/explore.h"
#include "mmlab/scenario.h"
#include "scenario/ast.h"

namespace mmlab {

// Ends the test, unless it is a violation (the invariant checker, a data
// check, a violation the model recorded instead of aborting, the leak check)
// and the test declared `expect violation`: then it is collected and the
// test goes on.
struct Failure {
  std::string msg;
  bool violation = false;
};
struct SkipTest {
  std::string reason;
};
struct StartError {  // the backend could not even start: outcome "error"
  std::string msg;
};

using TuneList = std::vector<std::pair<std::string, std::string>>;

// Two independent 64-bit mixes over a sequence of words and strings: the
// digest of a statement's state facts. Each word goes through a full
// avalanche (splitmix64's finaliser) into both lanes, with different keys.
class FactHash {
 public:
  void add(uint64_t v) {
    a_ = mix(a_ ^ mix(v + 0x9e3779b97f4a7c15ull));
    b_ = mix(b_ + mix(v ^ 0xd6e8feb86659fd93ull)) ^ (b_ >> 17);
  }
  void add(const std::string& s) {
    add(s.size());
    uint64_t w = 0;
    size_t i = 0;
    for (unsigned char c : s) {
      w |= static_cast<uint64_t>(c) << (8 * (i % 8));
      if (++i % 8 == 0) add(w), w = 0;
    }
    if (i % 8) add(w);
  }
  std::pair<uint64_t, uint64_t> value() const { return {a_, b_}; }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t a_ = 0x243f6a8885a308d3ull, b_ = 0x13198a2e03707344ull;
};

class TestRun {
 public:
  explicit TestRun(const ScenarioOptions& opt) : opt_(opt) {}
  virtual ~TestRun() = default;
  TestRun(const TestRun&) = delete;
  TestRun& operator=(const TestRun&) = delete;

  // One test: begin(), step() per statement until it returns false, finish().
  ScenarioResult run(const ScenarioFileAst& file, const TestCase& tc);
  bool begin(const ScenarioFileAst& file, const TestCase& tc);
  bool step(const Stmt& st);  // false once the test has ended (failure or skip)
  ScenarioResult finish();

  bool ended() const { return ended_; }
  bool skipped() const { return skipped_; }
  const std::optional<Failure>& failure() const { return failure_; }

  // The end state after a statement, one canonical line per fact, and the
  // event counters (model against model only: empty where not observable).
  virtual std::vector<std::string> snapshot() { return {}; }
  // The same end state as facts that compare cheaply: equal facts format to
  // equal lines. `mmlab diff` compares two sides' facts after every
  // statement and formats lines only where they differ (formatting every
  // entry's line, and comparing the lines, was most of a diff's snapshot).
  // Taking one counts as taking snapshot() (frames are named relative to the
  // last one taken).
  class StateFacts {
   public:
    virtual ~StateFacts() = default;
    virtual bool equals(const StateFacts& o) const = 0;
    virtual std::vector<std::string> lines() const = 0;
    // 128 bits over exactly what equals() compares: equal facts give equal
    // digests. `mmlab diff` runs a test's two sides one after the other and
    // keeps only each statement's digest, not the facts (see diff.cpp).
    virtual std::pair<uint64_t, uint64_t> digest() const;
  };
  virtual std::unique_ptr<StateFacts> state_facts();
  virtual std::map<std::string, int64_t> counters() { return {}; }
  // ScenarioResult::cost_counts / cpu_ns of what ran since `counters reset`
  // (ScenarioOptions::cost_sample), read before the teardown.
  virtual void sample_cost(ScenarioResult*) {}
  virtual void sample_counters(ScenarioResult*) {}

 protected:
  // A fresh system for the test whose statements (prelude first) are
  // `stmts`; may throw Failure, SkipTest, StartError.
  virtual void start(const std::vector<const Stmt*>& stmts) = 0;
  virtual void exec(const Stmt& st) = 0;
  virtual std::vector<std::string> teardown() = 0;  // what leaked or outlived the test
  // Introspection, as `#` lines: `P print smaps|pagetable|folio` over
  // [start, end) (end 0: the whole address space; folio: the page at start),
  // and `counters print GLOB` (empty: every non-zero one). A backend that
  // cannot show something says so in a line.
  virtual std::vector<std::string> state_lines(const Stmt& st, const std::string& proc, stmt::PrintWhat what, uint64_t start,
                                               uint64_t end) = 0;
  virtual std::vector<std::string> counter_lines(const std::string& glob) = 0;
  // Violations the backend detected during the statement just run (the
  // model's recorded findings); each is reported as a violation.
  virtual std::vector<std::string> new_violations() { return {}; }
  // The value of a tune key for `when`: the build's default unless the
  // backend runs a variant (the host kernel is the default, v6.18).
  virtual std::string tune_value(const std::string& key);

  [[noreturn]] void fail(const Stmt& st, const std::string& msg);
  // Processes, regions, handles, dumps and files share one namespace per
  // test; a region, handle or dump name may be bound again to a new value.
  void bind(const Stmt& st, const std::string& name, char kind);
  uint64_t addr(const Stmt& st, const AddrExpr& a);
  // Statements that return an errno: expect-error turns success into a failure.
  void check_errno(const Stmt& st, long ret, const char* what);
  // process_vm_readv's return: bytes (all SIZE of them, or the test fails
  // naming the count) or -errno (checked as check_errno does).
  void check_vm_read(const Stmt& st, const stmt::VmRead& v, long ret);
  // CPU accesses: sig is "" when the access completed, else "SIGSEGV"/"SIGBUS".
  void check_signal(const Stmt& st, const std::string& sig, uint64_t fault_addr, const char* what);
  // Expectations on observed values: one diagnostic text for both backends.
  void expect_bytes(const Stmt& st, const stmt::Read& r, int64_t bad, uint8_t found);  // P read ADDR SIZE BYTE
  void expect_handle_mismatch(const Stmt& st, const stmt::HandleRead& r, int64_t bad, uint8_t found);  // H read OFFSET SIZE BYTE
  void expect_handle_ret(const Stmt& st, const stmt::ExpectHandle& e, long ret);
  void expect_number(const Stmt& st, const std::string& what, int64_t expected, int64_t found);  // sysfs, vmstat, counter
  void expect_rss(const Stmt& st, const stmt::ExpectRss& e, uint64_t found);
  void expect_locked(const Stmt& st, const stmt::ExpectLocked& e, uint64_t found);
  void expect_faults(const Stmt& st, const stmt::ExpectFaults& e, uint64_t found);
  void expect_mapped(const Stmt& st, const stmt::ExpectMapped& e, const char* found);  // none, pte, pmd, pud
  void expect_order(const Stmt& st, const stmt::ExpectOrder& e, bool mapped, int order);
  // exclusive/pinned/zero/swapped/soft-dirty/uffd-wp: `found` is the bit of
  // what is mapped there. For a bit of the entry or of an anonymous page
  // (exclusive, soft-dirty, uffd-wp), nothing mapped fails.
  void expect_yes_no(const Stmt& st, const stmt::ExpectPageBit& e, bool mapped, bool found);
  void expect_same(const Stmt& st, const stmt::ExpectSame& e, bool same);
  // `expect P smaps|status ...`: `found` is the field's bytes.
  void expect_proc_field(const Stmt& st, const stmt::ExpectProcField& e, uint64_t found);
  // `P remember ADDR` and `expect P ADDR same-frame|other-frame`: `mapped`
  // is whether a frame is mapped there (not a swap entry nor a marker),
  // `pfn` the frame of ADDR's own page.
  void remember_frame(const Stmt& st, const stmt::Remember& r, bool mapped, uint64_t pfn);
  // A backend that cannot read the frame there (the host, where its page
  // differs from upstream's): a later same-frame/other-frame is skipped.
  void remember_unknown_frame(const Stmt& st, const stmt::Remember& r);
  void expect_frame(const Stmt& st, const stmt::ExpectFrame& e, bool mapped, uint64_t pfn);
  // `P print ...` and `counters print`: their lines into the output.
  void exec_print(const Stmt& st, const stmt::Print& p);
  void exec_counters_print(const stmt::CountersPrint& c);
  // skip: ends the test as skipped; xfail: the test is expected to fail.
  [[noreturn]] void exec_skip(const stmt::Skip& s);
  void exec_xfail(const stmt::Xfail& x);
  // `expect violation TEXT`: the test passes only if a violation containing
  // TEXT is detected; violations no longer end it.
  void expect_violation(const Stmt& st, const stmt::ExpectViolation& e);
  // A detected violation: collected under `expect violation`, else it fails the test.
  [[noreturn]] void violation(const Stmt& st, const std::string& msg);
  // An expectation this backend cannot observe: counted, the test goes on.
  // `why` begins with its key ("zero_page: ...", "exclusive (...)").
  void skip_expectation(const std::string& why);

  const ScenarioOptions& opt_;
  std::map<std::string, uint64_t> regions_;
  ScenarioResult res_;

 private:
  // Runs a backend call; a Failure or SkipTest ends the test.
  template <class F>
  void guarded(F&& f);

  bool when_holds(const Stmt& st);
  // After a statement failed: the state of what it named (the smaps and the
  // page table of its range, the folio at its address, the counters an
  // expectation on a statistic read), into the diagnostics.
  void add_failure_state(const Stmt& st);
  void record_state(const Stmt& st);
  // Violations found so far and the texts expected among them.
  void collect_violations(const Stmt& st, const std::vector<std::string>& msgs);
  std::optional<Failure> check_expected_violations();

  std::map<std::string, char> kinds_;
  // (process, page address) -> pfn; nullopt: not known (remember_unknown_frame)
  std::map<std::pair<std::string, uint64_t>, std::optional<uint64_t>> remembered_;
  std::vector<std::pair<std::string, std::string>> expected_violations_;  // (TEXT, where declared)
  std::vector<std::string> found_violations_;
  std::optional<Failure> failure_;
  int line_ = 0;
  bool ended_ = false, skipped_ = false, errored_ = false;
  bool xfail_ = false;
  std::string xfail_reason_;
};

// The lines of a text; the VMA blocks of a /proc/PID/smaps text that
// overlap [start, end) (end 0: all), both backends' `print smaps`.
std::vector<std::string> split_lines(const std::string& text);
std::vector<std::string> smaps_of_range(const std::string& smaps, uint64_t start, uint64_t end);
// The bytes of the size field FIELD ("FIELD:   N kB") of a /proc/PID/status
// text, or (vma_addr set) of the smaps block of the VMA containing
// *vma_addr. false if there is no such VMA or line (*why says which).
bool proc_field_bytes(const std::string& text, const std::optional<uint64_t>& vma_addr, const std::string& field,
                      uint64_t* bytes, std::string* why);

// "N expectation(s) skipped: WHY [COUNT]; ...", as TAP and diff print it.
std::string skipped_line(const ScenarioResult& r);
// " (KEY N, KEY N)" for a run's totals, or "".
std::string skip_totals(const std::map<std::string, int>& by_key);

// The model backend, with `tunes` applied before the test's first statement.
std::unique_ptr<TestRun> make_model_run(const ScenarioOptions& opt, TuneList tunes);

// The race block of a test (and its index among the test's statements), or null.
const stmt::RaceBlock* race_block_of(const TestCase& tc, size_t* at = nullptr);

// A test with a race block as the explorer's hooks (model_run.cpp): each
// run is the whole test on a fresh System (prelude and the statements
// before the block on the calling thread, each `thread` on an explorer
// thread, the statements after `end` and the teardown's checker as the
// run's check). Under `expect violation` a run is a finding when the
// expected violation shows; without it, when the test fails.
class RaceRig final : public ScenarioRace {
 public:
  RaceRig(const ScenarioOptions& opt, TuneList tunes, const ScenarioFileAst& file, const TestCase& tc);
  explore::RaceHooks hooks() override;  // valid while the rig lives
  const stmt::RaceBlock* block() const { return block_; }
  bool expect_violation() const override { return expect_violation_; }
  bool unexpected() const override { return unexpected_; }  // a finding that is not the expected violation
  RaceSettings settings() const override;
  const ScenarioResult& last() const { return last_; }  // the last checked run's result

 private:
  ScenarioOptions opt_;
  TuneList tunes_;
  const ScenarioFileAst& file_;
  const TestCase& tc_;
  const stmt::RaceBlock* block_ = nullptr;
  size_t at_ = 0;
  bool expect_violation_ = false, unexpected_ = false;
  std::unique_ptr<TestRun> cur_;
  ScenarioResult last_;
};

// `mmlab run` of a test with a race block on the model backend: explores
// it as its block says; a finding prints its schedule line.
ScenarioResult run_race_test(const ScenarioOptions& opt, TuneList tunes, const ScenarioFileAst& file, const TestCase& tc);
// The host backend (src/host/): the caller has checked host_available().
std::unique_ptr<TestRun> make_host_run(const ScenarioOptions& opt);

}  // namespace mmlab
