// The `mmlab bench` report: one text (terminal and Markdown share one table
// format) and a JSON document built side by side, progress lines, the
// environment header, and the files written into --out (with the plots).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/plot.h"
#include "report/statistics.h"
#include "mmlab/calibrate.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {

struct Report {
  std::string text;
  nlohmann::ordered_json json;
  const host::CostProfile* profile = nullptr;  // --profile: add the modelled tables
  std::vector<double> spreads;  // the relative IQR of every GUP table row: how noisy the run was
  std::vector<Plot> plots;      // drawn into --out after the run
  std::string verdict;          // the noise verdict: report.md's first line after its title
  void add(const std::string& s);
};

void progress(const std::string& what);
void progress_done();

// A ratio's 95% interval in report.json: [lo, hi], or null where there is none.
inline nlohmann::ordered_json ci_json(const RatioCi& r) { return r.valid ? nlohmann::ordered_json::array({r.lo, r.hi}) : nlohmann::ordered_json(); }

// A row whose timed region took host faults on more than 1% of the pages it
// touched is marked: its time is the host's first touch, not the model's.
std::string first_touch_note(long host_faults, uint64_t pages);

// How the benchmarks prepare the frame store, for the report.
extern const char* const kFrameStorePreparation;

// The report's header lines: CPU, host kernel and THP, frame store, build.
std::string environment_text(nlohmann::ordered_json* env);
// --profile FILE of `command`: loaded (refused without cost-model terms when
// need_terms) and measured on this kind of machine (the header fields of
// host::cost_header_differences()). Another kind is refused unless force;
// then the profile's name carries FORCED, so every modelled table and
// report.json figure that names it is marked, and p->forced lists the
// differences (which profile_text prints). 0, or 2 after a message naming the file.
int load_profile_option(const char* command, const std::string& path, bool force, bool need_terms, host::CostProfile* p);
// Where the modelled tables' host costs come from.
std::string profile_text(const host::CostProfile& p, const std::string& file, nlohmann::ordered_json* j);
// The profile the tools use when no --profile is given: the first committed
// one (bench/cost/profiles/) of this machine's kind. false and *why when
// none is; a tool then prints no_profile_text(why) and no modelled table.
bool default_profile(host::CostProfile* out, std::string* file, std::string* why);
std::string no_profile_text(const std::string& why);

// The output directory, made and found writable before any run: false
// and *err (the reason) otherwise.
bool out_dir_usable(const std::string& dir, std::string* err);

// Writes report.md, report.json and the plots into `dir` and prints the
// summary line. 0, or 1 (with a message) if the files cannot be written.
int write_report(const Report& rep, const std::string& dir);

}  // namespace mmlab::cli
