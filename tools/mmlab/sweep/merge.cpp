// `mmlab merge`: the records of a sweep's jobs combined into one report
// (sweep.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/input_file.h"
#include "sweep/sweep.h"

namespace mmlab::cli {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxRecordBytes = 256ull << 20;
constexpr uint64_t kMaxLinesFileBytes = 4ull << 30;

struct Records {
  std::vector<nlohmann::json> jobs;  // the records found
  nlohmann::json table;              // sweep.json's job table, if the sweep left one
};

bool parse_object(const std::string& text, const std::string& where, nlohmann::json* out, std::string* err) {
  *out = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_object()) return true;
  *err = fmt::format("{}: not a job record (not a JSON object)", where);
  return false;
}

bool read_dir(const fs::path& dir, Records* r, std::string* err) {
  std::string text;
  std::error_code ec;
  if (fs::exists(dir / "sweep.json", ec)) {
    if (read_input_file((dir / "sweep.json").string(), kMaxRecordBytes, &text, err) ||
        !parse_object(text, (dir / "sweep.json").string(), &r->table, err))
      return false;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path f = it->path() / "job.json";
    if (it->path().filename().string().rfind("job-", 0) != 0 || !fs::exists(f, ec)) continue;
    nlohmann::json j;
    if (read_input_file(f.string(), kMaxRecordBytes, &text, err) || !parse_object(text, f.string(), &j, err)) {
      *err = fmt::format("{}: {}", f.string(), *err);
      return false;
    }
    r->jobs.push_back(std::move(j));
  }
  return true;
}

// One record per line, as the jobs print them without --results.
bool read_lines(const std::string& file, Records* r, std::string* err) {
  std::string text;
  if (read_input_file(file, kMaxLinesFileBytes, &text, err)) {
    *err = fmt::format("{}: {}", file, *err);
    return false;
  }
  std::istringstream in(text);
  std::string line;
  for (size_t n = 1; std::getline(in, line); n++) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    if (!parse_object(line, fmt::format("{}:{}", file, n), &j, err)) return false;
    r->jobs.push_back(std::move(j));
  }
  return true;
}

// Pools src into dst: numbers become samples of the same path, objects
// merge key by key, labels keep the first value.
void pool(nlohmann::json& dst, const nlohmann::json& src) {
  if (dst.is_null()) {
    dst = src;
    return;
  }
  if (dst.is_object() && src.is_object()) {
    for (auto it = src.begin(); it != src.end(); ++it) {
      if (dst.contains(it.key()))
        pool(dst[it.key()], it.value());
      else
        dst[it.key()] = it.value();
    }
    return;
  }
  const auto numbers = [](const nlohmann::json& j) {
    return j.is_number() || (j.is_array() && std::all_of(j.begin(), j.end(), [](const auto& x) { return x.is_number(); }));
  };
  if (!numbers(dst) || !numbers(src)) return;
  nlohmann::json samples = dst.is_array() ? dst : nlohmann::json::array({dst});
  if (src.is_array()) {
    for (const auto& x : src) samples.push_back(x);
  } else {
    samples.push_back(src);
  }
  dst = std::move(samples);
}

bool record_ok(const nlohmann::json& j) {
  return j.value("exit", -1) == 0 && j.contains("report") && j["report"].is_object();
}

std::string describe(const nlohmann::json& j) {
  return fmt::format("job {} ({})", j.value("job", static_cast<size_t>(-1)), j.value("name", std::string("?")));
}

// The jobs a sweep has: its table's, else the most any record says.
size_t jobs_expected(const Records& r) {
  if (r.table.contains("jobs") && r.table["jobs"].is_array()) return r.table["jobs"].size();
  size_t n = 0;
  for (const auto& j : r.jobs) n = std::max(n, j.value("jobs", static_cast<size_t>(0)));
  return n;
}

// A job that never wrote a record: by its name and command when the table has them.
std::string missing_text(const Records& r, size_t number) {
  if (r.table.contains("jobs") && number < r.table["jobs"].size()) {
    const nlohmann::json& t = r.table["jobs"][number];
    std::string cmd = "mmlab";
    for (const auto& a : t["args"]) cmd += " " + a.get<std::string>();
    return fmt::format("job {} ({}): no result (never ran, or killed before it wrote job.json): {}", number,
                       t.value("name", std::string("?")), cmd);
  }
  return fmt::format("job {}: no result (never ran, or killed before it wrote its record)", number);
}

}  // namespace

int merge_sweep(const std::string& input, const std::string& out) {
  Records r;
  std::string err;
  std::error_code ec;
  const bool dir = fs::is_directory(input, ec);
  if (!(dir ? read_dir(input, &r, &err) : read_lines(input, &r, &err))) {
    std::fprintf(stderr, "mmlab merge: %s\n", err.c_str());
    return 2;
  }
  if (r.jobs.empty() && jobs_expected(r) == 0) {
    std::fprintf(stderr, "mmlab merge: %s: no job records (job-N/job.json, or one record per line)\n", input.c_str());
    return 2;
  }
  std::sort(r.jobs.begin(), r.jobs.end(),
            [](const auto& a, const auto& b) { return a.value("job", 0ul) < b.value("job", 0ul); });
  nlohmann::json merged = nlohmann::json::object();
  std::vector<std::string> problems;
  std::map<size_t, bool> seen;
  size_t ok = 0;
  for (const nlohmann::json& j : r.jobs) {
    seen[j.value("job", static_cast<size_t>(-1))] = true;
    if (!record_ok(j)) {
      problems.push_back(fmt::format("{} failed: exit {}{}: {}", describe(j), j.value("exit", -1),
                                     j.contains("error") ? ", " + j.value("error", std::string()) : "",
                                     j.value("command", std::string("?"))));
      continue;
    }
    nlohmann::json report = j["report"];
    report.erase("environment");  // the host and build: in the job's record, not a value
    pool(merged[j.value("name", std::string("job"))], report);
    ok++;
  }
  const size_t expected = jobs_expected(r);
  for (size_t n = 0; n < expected; n++)
    if (!seen.count(n)) problems.push_back(missing_text(r, n));
  std::ofstream(out) << merged.dump(1) << "\n";
  std::printf("merged %zu of %zu jobs into %s (%zu configurations)\n", ok, std::max(expected, r.jobs.size()),
              out.c_str(), merged.size());
  for (const std::string& p : problems) std::printf("%s\n", p.c_str());
  return problems.empty() ? 0 : 1;
}

}  // namespace mmlab::cli
