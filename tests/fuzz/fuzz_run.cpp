// libFuzzer target that parses a scenario and runs what parses, on a small
// System (scenario_parse_text, then scenario_run on the model). It reaches
// what the parser alone cannot: the runner and the model behind every
// statement with the values an input gives them (an aligned mmap near the
// top of the address space, an errno an expectation compares, khugepaged
// scans, the clock). The properties: nothing crashes, hangs or trips a
// sanitizer; a rejected input gets "FILE:LINE:COLUMN: expected ..."; and a
// test that breaks no rule on purpose (no `tune cow.policy rfc`, no
// `expect violation`) ends with every frame and page-table page returned.
//
// A per-input budget keeps each run short: inputs whose statements would
// cost more (long advances, many scans, large accesses, many statements)
// are not run (-1: not added to the corpus). The budget is the fuzzer's,
// not the language's, whose own bounds the parser checks.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include "mmlab/scenario.h"
#include "scenario/ast.h"

namespace mmlab {
namespace {

constexpr const char kName[] = "fuzz.mms";
constexpr size_t kMaxInput = 8192;
constexpr uint64_t kRam = 64ull << 20;
constexpr uint64_t kMaxTouch = 16ull << 20;     // bytes one access, populate, dump or collapse may touch
constexpr uint64_t kMaxGupPages = 4096;
constexpr uint64_t kMaxScans = 2;
constexpr uint64_t kMaxAdvanceNs = 30ull * 1000000000;  // three khugepaged wakes at the default sleep
constexpr uint64_t kMaxMapWithScans = 16ull << 30;     // a mapping khugepaged may walk
constexpr size_t kMaxStatements = 256;
constexpr size_t kMaxTests = 8;

// "fuzz.mms:LINE:COLUMN: expected ...", LINE and COLUMN positive decimals.
bool names_file_line_column(const std::string& e) {
  const std::string prefix = std::string(kName) + ":";
  if (e.compare(0, prefix.size(), prefix) != 0) return false;
  size_t i = prefix.size();
  for (int field = 0; field < 2; field++) {
    const size_t start = i;
    while (i < e.size() && std::isdigit(static_cast<unsigned char>(e[i]))) i++;
    if (i == start || e[start] == '0' || i >= e.size() || e[i] != ':') return false;
    i++;
  }
  return e.compare(i, 10, " expected ") == 0 && e.size() > i + 10;
}

// What one statement may cost under the budget. `scans`: the test runs
// khugepaged (scans or the clock), which walks every mapping.
bool within_budget(const Stmt& st, bool scans) {
  return std::visit(
      [scans](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, stmt::Khugepaged>) return s.scans <= kMaxScans;
        else if constexpr (std::is_same_v<S, stmt::Advance>) return s.ns <= kMaxAdvanceNs;
        else if constexpr (std::is_same_v<S, stmt::Write> || std::is_same_v<S, stmt::Read> || std::is_same_v<S, stmt::Dump>)
          return s.size <= kMaxTouch;
        else if constexpr (std::is_same_v<S, stmt::HandleWrite> || std::is_same_v<S, stmt::HandleRead>)
          return s.size <= kMaxTouch;
        else if constexpr (std::is_same_v<S, stmt::Madvise>) return s.size <= kMaxTouch || !(s.advice_name.rfind("populate", 0) == 0 || s.advice_name == "collapse");
        else if constexpr (std::is_same_v<S, stmt::Gup>) return s.nr_pages <= kMaxGupPages;
        else if constexpr (std::is_same_v<S, stmt::Mmap>) return !scans || s.size <= kMaxMapWithScans;
        else if constexpr (std::is_same_v<S, stmt::Mremap>) return !scans || s.new_size <= kMaxMapWithScans;
        else if constexpr (std::is_same_v<S, stmt::Sysfs>) return s.path.find("nr_hugepages") == std::string::npos || s.value.size() <= 2;
        else return true;
      },
      st.body);
}

// The whole program under the budget, and whether each test breaks a rule
// on purpose (then its end state is not held to the leak check).
struct Screen {
  bool runnable = true;
  bool breaks_rules = false;
};

Screen screen(const ScenarioProgram& prog) {
  Screen out;
  size_t tests = 0;
  for (const ScenarioFileAst& f : prog.files) {
    for (const TestCase& tc : f.tests) {
      tests++;
      if (f.prelude.size() + tc.stmts.size() > kMaxStatements) out.runnable = false;
      bool scans = false;
      for (const auto* list : {&f.prelude, &tc.stmts})
        for (const Stmt& st : *list) scans |= st.as<stmt::Khugepaged>() || st.as<stmt::Advance>();
      for (const auto* list : {&f.prelude, &tc.stmts})
        for (const Stmt& st : *list) {
          out.runnable &= within_budget(st, scans);
          const auto* t = st.as<stmt::Tune>();
          out.breaks_rules |= (t && t->key == "cow.policy" && t->value == "rfc") || st.as<stmt::ExpectViolation>();
          for (const WhenCond& w : st.when) out.breaks_rules |= w.key == "cow.policy";
        }
    }
  }
  out.runnable &= tests <= kMaxTests;
  return out;
}

}  // namespace
}  // namespace mmlab

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mmlab;
  if (size > kMaxInput) return -1;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  auto prog = scenario_parse_text(kName, text, &error);
  if (!prog) {
    if (names_file_line_column(error)) return 0;
    std::fprintf(stderr, "rejected input without file:line:column: expected ...: '%s'\n", error.c_str());
    std::abort();
  }
  const Screen s = screen(*prog);
  if (!s.runnable) return -1;
  ScenarioOptions opt;
  opt.ram_bytes = kRam;
  opt.jobs = 1;
  // As `mmlab run` does: a file or swap device larger than the System is
  // refused before the run, with the statement's position.
  if (!scenario_check_sizes(*prog, opt, &error)) {
    if (names_file_line_column(error)) return 0;
    std::fprintf(stderr, "refused sizes without file:line:column: expected ...: '%s'\n", error.c_str());
    std::abort();
  }
  std::ostringstream tap;
  const std::vector<ScenarioResult> results = scenario_run(*prog, opt, tap);
  if (s.breaks_rules) return 0;
  for (const ScenarioResult& r : results)
    if (!r.leaks.empty()) {
      std::fprintf(stderr, "test %s left the model unsound after its teardown: %s\n%s", r.name.c_str(), r.leaks.front().c_str(),
                   tap.str().c_str());
      std::abort();
    }
  return 0;
}
