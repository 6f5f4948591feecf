// `mmlab compare`: two or more report.json files (or folders of runs) side by
// side, in mmtests' compare-kernels form or the 0-day/lkp form (docs/BENCH.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "mmlab/input_file.h"
#include "cli/commands.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "report/compare.h"

namespace mmlab::cli {
namespace {

namespace fs = std::filesystem;

// A report is a few MiB at most; a bound keeps a wrong path (a device, a
// huge file) from being read whole.
constexpr uint64_t kMaxReportBytes = 256ull << 20;

struct CompareCli {
  std::vector<std::string> sides;
  std::string form = "mmtests";
  bool significant = false;
};

// "line L, column C" of a byte offset into the text.
std::string position_of(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); i++) {
    if (text[i] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  return fmt::format("{}:{}", line, col);
}

bool read_report(const fs::path& file, CompareSide* side, std::string* err) {
  std::string text;
  if (read_input_file(file.string(), kMaxReportBytes, &text, err)) {
    *err = fmt::format("{}: {}", file.string(), *err);
    return false;
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object()) {
      *err = fmt::format("{}: not a report (the top level is not a JSON object)", file.string());
      return false;
    }
    side->add_report(j);
  } catch (const nlohmann::json::parse_error& e) {
    *err = fmt::format("{}:{}: not JSON: {}", file.string(), position_of(text, e.byte > 0 ? e.byte - 1 : 0), e.what());
    return false;
  }
  return true;
}

// NAME=PATH or PATH; a folder is every report.json under it, one run each.
bool read_side(const std::string& arg, CompareSide* side, std::string* err) {
  const size_t eq = arg.find('=');
  const fs::path path = eq == std::string::npos ? arg : arg.substr(eq + 1);
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().filename() == "report.json") files.push_back(it->path());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      *err = fmt::format("{}: no report.json under this folder", path.string());
      return false;
    }
  } else {
    files.push_back(path);
  }
  if (eq != std::string::npos) {
    side->name = arg.substr(0, eq);
  } else {
    // A report is named by its folder: out/base/report.json is "base".
    const fs::path named = path.filename() == "report.json" ? path.parent_path() : path;
    side->name = named.stem().string().empty() ? path.string() : named.stem().string();
  }
  for (const fs::path& f : files)
    if (!read_report(f, side, err)) return false;
  return true;
}

int run_compare(const CompareCli& o) {
  if (o.form != "mmtests" && o.form != "lkp") {
    std::fprintf(stderr, "mmlab compare: --form %s: expected mmtests or lkp\n", o.form.c_str());
    return 2;
  }
  std::vector<CompareSide> sides(o.sides.size());
  for (size_t i = 0; i < o.sides.size(); i++) {
    std::string err;
    if (!read_side(o.sides[i], &sides[i], &err)) {
      std::fprintf(stderr, "mmlab compare: %s\n", err.c_str());
      return 2;
    }
  }
  CompareOptions co;
  co.form = o.form == "lkp" ? CompareForm::kLkp : CompareForm::kMmtests;
  co.significant_only = o.significant;
  std::fputs(compare_text(sides, co).c_str(), stdout);
  return 0;
}

}  // namespace

void add_compare(CLI::App& app) {
  auto o = std::make_shared<CompareCli>();
  auto* sub = app.add_subcommand("compare", "report.json files (or folders of runs) side by side, the first as the base");
  sub->add_option("reports", o->sides,
                  "BASE OTHER...: each a report.json, a folder (every report.json under it, one run each), or NAME=PATH")
      ->required()
      ->expected(2, 64);
  sub->add_option("--form", o->form, "mmtests (compare-kernels: Min, Amean/Hmean, Stddev, CoeffVar, Max) or lkp (±%stddev, %change)");
  sub->add_flag("--significant", o->significant, "only the values some side changes significantly");
  register_action(sub, [o] { return run_compare(*o); });
}

}  // namespace mmlab::cli
