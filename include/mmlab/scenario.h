// The .mms scenario language, version 1 (docs/scenario-language.md in
// shared/): parse files whole, then run each test on a fresh System and
// report in kselftest TAP.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mmlab {

struct ScenarioProgram;  // parsed files (opaque)

// Parse every file whole. nullptr on error, with *error =
// "file:line:column: expected ..." (or "file: cannot read").
std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse(const std::vector<std::string>& paths,
                                                                             std::string* error);
// Parse from a string (tests); `name` stands in for the file name.
std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse_text(const std::string& name,
                                                                                  const std::string& text,
                                                                                  std::string* error);

enum class Outcome { kPass, kFail, kXfail, kXpass, kSkip, kError };
const char* outcome_name(Outcome o);

struct ScenarioResult {
  std::string file, name;
  std::string variant;  // "gup.walk=batch" when run under --variant
  Outcome outcome = Outcome::kPass;
  std::string reason;                    // skip/xfail reason
  std::vector<std::string> diagnostics;  // "file:line: expected ..., found ..."
};

struct ScenarioOptions {
  std::string filter;  // glob over test names; empty: all
  // --variant KEY=V1,V2: each file runs once per value (in order).
  std::vector<std::pair<std::string, std::vector<std::string>>> variants;
  uint64_t ram_bytes = 4ull << 30;
};

// Runs the tests, printing TAP to `tap` as they finish (plan line first).
// Returns the results; the exit status is scenario_exit_status(results).
std::vector<ScenarioResult> scenario_run(const ScenarioProgram& prog, const ScenarioOptions& opt, std::ostream& tap);
int scenario_exit_status(const std::vector<ScenarioResult>& results);

// `mmlab diff`: run every test under two model configurations in lockstep
// and report, per test, a changed outcome (with the first diverging
// statement) and, after every statement, the end state that differs and the
// counter deltas. Returns the exit status: 1 if an outcome changed, or with
// expect_nfc if any end state differs; else 0.
struct DiffOptions {
  std::string filter;
  std::vector<std::pair<std::string, std::string>> a, b;  // tune settings of each side
  std::string a_name = "A", b_name = "B";
  bool expect_nfc = false;
  uint64_t ram_bytes = 4ull << 30;
  int max_lines_per_test = 12;
};
int scenario_diff(const ScenarioProgram& prog, const DiffOptions& opt, std::ostream& out);

}  // namespace mmlab
