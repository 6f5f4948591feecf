// The grid of a sweep, its jobs and how each runs (sweep.h).
#include "sweep/sweep.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/input_file.h"
#include "mmlab/types.h"

extern char** environ;

namespace mmlab::cli {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxGridBytes = 1ull << 20;
// A grid is for runs a person can wait for: a bound keeps a typo in an
// axis from expanding into millions of jobs before anything runs.
constexpr size_t kMaxJobs = 100000;
constexpr uint64_t kMaxReportBytes = 256ull << 20;

// The commands whose reports a sweep can merge: each writes report.json
// into the folder its --out names.
constexpr const char* kSweepCommands[] = {"bench", "cow-bench"};

struct Word {
  std::string text;
  size_t column;  // 1-based
};

std::vector<Word> words_of(const std::string& line) {
  std::vector<Word> out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '#') break;
    if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
      i++;
      continue;
    }
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') i++;
    out.push_back({line.substr(start, i - start), start + 1});
  }
  return out;
}

std::string where(const std::string& file, size_t line, size_t col) { return fmt::format("{}:{}:{}", file, line, col); }

bool is_option(const std::string& s) { return s.size() > 2 && s[0] == '-' && s[1] == '-'; }

// An option the sweep owns, or one naming the job's output, cannot be set by a grid.
bool sweep_owns(const std::string& s) { return s == "--out" || s.rfind("--out=", 0) == 0; }

bool check_args(const std::vector<Word>& w, size_t from, const std::string& file, size_t line, std::string* err) {
  for (size_t i = from; i < w.size(); i++) {
    if (sweep_owns(w[i].text)) {
      *err = fmt::format("{}: {}: the sweep sets each job's --out itself", where(file, line, w[i].column), w[i].text);
      return false;
    }
  }
  return true;
}

bool parse_command(const std::vector<Word>& w, SweepGrid* g, size_t line, std::string* err) {
  if (!g->command.empty()) {
    *err = fmt::format("{}: a second 'command' line (a grid runs one command)", where(g->file, line, w[0].column));
    return false;
  }
  if (w.size() < 2) {
    *err = fmt::format("{}: 'command' needs the mmlab command to run (bench or cow-bench)", where(g->file, line, w[0].column));
    return false;
  }
  bool known = false;
  for (const char* c : kSweepCommands) known |= w[1].text == c;
  if (!known) {
    *err = fmt::format("{}: '{}': a sweep runs bench or cow-bench (the commands that write report.json)",
                       where(g->file, line, w[1].column), w[1].text);
    return false;
  }
  if (!check_args(w, 2, g->file, line, err)) return false;
  for (size_t i = 1; i < w.size(); i++) g->command.push_back(w[i].text);
  return true;
}

bool parse_axis(const std::vector<Word>& w, SweepGrid* g, size_t line, std::string* err) {
  if (w.size() < 3 || !is_option(w[1].text)) {
    *err = fmt::format("{}: expected 'axis --OPTION VALUE...'", where(g->file, line, w[0].column));
    return false;
  }
  if (!check_args(w, 1, g->file, line, err)) return false;
  for (const auto& a : g->axes)
    if (a.first == w[1].text) {
      *err = fmt::format("{}: {}: a second axis of the same option", where(g->file, line, w[1].column), w[1].text);
      return false;
    }
  std::vector<std::string> values;
  for (size_t i = 2; i < w.size(); i++) values.push_back(w[i].text);
  g->axes.emplace_back(w[1].text, std::move(values));
  return true;
}

// "--size-mb" -> "size-mb=4"; a --seed axis names no configuration.
void add_to_name(std::string* name, const std::string& opt, const std::string& value) {
  if (opt == "--seed") return;
  if (!name->empty()) *name += ' ';
  *name += opt.substr(2) + "=" + value;
}

// The product of the axes, the first slowest.
bool expand(SweepGrid* g, std::string* err) {
  size_t total = 1;
  for (const auto& a : g->axes) {
    total *= a.second.size();
    if (total > kMaxJobs) {
      *err = fmt::format("{}: the axes make more than {} jobs", g->file, kMaxJobs);
      return false;
    }
  }
  std::vector<SweepJob> product;
  for (size_t j = 0; j < total; j++) {
    SweepJob job;
    job.args = g->command;
    size_t rest = j;
    std::vector<size_t> index(g->axes.size());
    for (size_t a = g->axes.size(); a-- > 0;) {
      index[a] = rest % g->axes[a].second.size();
      rest /= g->axes[a].second.size();
    }
    for (size_t a = 0; a < g->axes.size(); a++) {
      const std::string& v = g->axes[a].second[index[a]];
      job.args.push_back(g->axes[a].first);
      job.args.push_back(v);
      add_to_name(&job.name, g->axes[a].first, v);
    }
    product.push_back(std::move(job));
  }
  product.insert(product.end(), g->jobs.begin(), g->jobs.end());
  if (product.size() > kMaxJobs) {
    *err = fmt::format("{}: more than {} jobs", g->file, kMaxJobs);
    return false;
  }
  for (size_t i = 0; i < product.size(); i++) product[i].number = i;
  g->jobs = std::move(product);
  return true;
}

bool parse_job(const std::vector<Word>& w, SweepGrid* g, size_t line, std::string* err) {
  if (!check_args(w, 1, g->file, line, err)) return false;
  SweepJob job;
  for (size_t i = 1; i < w.size(); i++) {
    const bool value_follows = is_option(w[i].text) && i + 1 < w.size() && !is_option(w[i + 1].text);
    job.args.push_back(w[i].text);
    if (value_follows) {
      job.args.push_back(w[i + 1].text);
      add_to_name(&job.name, w[i].text, w[i + 1].text);
      i++;
    } else if (is_option(w[i].text)) {
      add_to_name(&job.name, w[i].text, "on");
    }
  }
  if (job.name.empty()) job.name = "job";
  g->jobs.push_back(std::move(job));  // its command is prefixed once the command line is known
  return true;
}

std::string shell_quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,:+@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

std::string host_name() {
  struct utsname u;
  if (uname(&u)) return "unknown";
  return fmt::format("{} ({} {}, {})", u.nodename, u.sysname, u.release, u.machine);
}

// Runs argv with stdout and stderr into `log`: the exit status, 127 if it
// could not start, 128+N if signal N ended it.
int spawn_logged(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> av;
  for (const std::string& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid;
  const int e = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The last lines of a failed job's output, for the record that outlives its folder.
std::string tail_of(const fs::path& log, size_t lines) {
  std::string text, why;
  if (read_input_file(log.string(), 1ull << 20, &text, &why)) return why;
  size_t pos = text.size(), seen = 0;
  while (pos > 0 && seen <= lines)
    if (text[--pos] == '\n') seen++;
  return seen > lines ? text.substr(pos + 1) : text;
}

nlohmann::json read_report(const std::string& file, std::string* why) {
  std::string text;
  if (read_input_file(file, kMaxReportBytes, &text, why)) return nullptr;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) *why = "not a JSON object";
  return j.is_object() ? j : nlohmann::json();
}

}  // namespace

int read_sweep_grid(const std::string& file, SweepGrid* g, std::string* err) {
  g->file = file;
  std::string text;
  if (read_input_file(file, kMaxGridBytes, &text, err)) {
    *err = fmt::format("{}: {}", file, *err);
    return 2;
  }
  std::istringstream in(text);
  std::string l;
  size_t line = 0;
  while (std::getline(in, l)) {
    line++;
    const std::vector<Word> w = words_of(l);
    if (w.empty()) continue;
    bool ok;
    if (w[0].text == "command") {
      ok = parse_command(w, g, line, err);
    } else if (w[0].text == "axis") {
      ok = parse_axis(w, g, line, err);
    } else if (w[0].text == "job") {
      ok = parse_job(w, g, line, err);
    } else {
      *err = fmt::format("{}: '{}': expected command, axis or job", where(file, line, w[0].column), w[0].text);
      ok = false;
    }
    if (!ok) return 2;
  }
  if (g->command.empty()) {
    *err = fmt::format("{}:1:1: no 'command' line", file);
    return 2;
  }
  for (SweepJob& j : g->jobs) j.args.insert(j.args.begin(), g->command.begin(), g->command.end());
  return expand(g, err) ? 0 : 2;
}

nlohmann::json sweep_table(const SweepGrid& g) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const SweepJob& j : g.jobs) jobs.push_back({{"job", j.number}, {"name", j.name}, {"args", j.args}});
  return {{"grid", absolute(g.file)}, {"jobs", jobs}};
}

std::string sweep_job_command(const std::string& self, const SweepGrid& g, size_t number, const std::string& results) {
  std::string c = fmt::format("{} sweep {} --job {}", shell_quoted(self), shell_quoted(absolute(g.file)), number);
  if (!results.empty()) c += " --results " + shell_quoted(absolute(results));
  return c;
}

std::string sweep_slurm_script(const std::string& self, const SweepGrid& g, const std::string& results) {
  const std::string dir = absolute(results);
  return fmt::format(
      "#!/bin/sh\n"
      "# {} jobs of {}. A task that fails ends FAILED in sacct and leaves job-N/job.json\n"
      "# with its exit status; one killed before it wrote leaves none, and\n"
      "# `mmlab merge {}` names both by job number, name and command.\n"
      "#SBATCH --job-name=mmlab-sweep\n"
      "#SBATCH --array=0-{}\n"
      "#SBATCH --output={}/slurm-%a.out\n"
      "exec {} sweep {} --job \"$SLURM_ARRAY_TASK_ID\" --results {}\n",
      g.jobs.size(), absolute(g.file), shell_quoted(dir), g.jobs.size() - 1, dir, shell_quoted(self),
      shell_quoted(absolute(g.file)), shell_quoted(dir));
}

int run_sweep_job(const std::string& self, const SweepGrid& g, size_t number, const std::string& results) {
  const SweepJob& job = g.jobs.at(number);
  std::error_code ec;
  fs::path dir;
  if (!results.empty()) {
    dir = fs::path(results) / fmt::format("job-{}", number);
  } else {
    char tmpl[] = "/tmp/mmlab-sweep-XXXXXX";
    if (!mkdtemp(tmpl)) return 127;
    dir = tmpl;
  }
  fs::create_directories(dir / "out", ec);
  std::vector<std::string> argv{self};
  argv.insert(argv.end(), job.args.begin(), job.args.end());
  argv.push_back("--out");
  argv.push_back((dir / "out").string());
  std::string command = "mmlab";
  for (size_t i = 1; i < argv.size(); i++) command += " " + shell_quoted(argv[i]);
  const auto t0 = std::chrono::steady_clock::now();
  const int status = ec ? 127 : spawn_logged(argv, (dir / "log").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json rec = {{"job", number},        {"jobs", g.jobs.size()}, {"name", job.name},
                        {"command", command},   {"exit", status},        {"seconds", seconds},
                        {"host", host_name()},  {"commit", build_commit()}, {"grid", absolute(g.file)}};
  rec["args"] = job.args;
  if (status != 0) rec["log_tail"] = tail_of(dir / "log", 20);
  if (status == 0) {
    std::string why;
    rec["report"] = read_report((dir / "out" / "report.json").string(), &why);
    if (rec["report"].is_null()) rec["error"] = "report.json: " + why;
  }
  if (results.empty()) {
    std::fputs((rec.dump() + "\n").c_str(), stdout);
    fs::remove_all(dir, ec);
  } else {
    std::ofstream(dir / "job.json") << rec.dump(1) << "\n";
  }
  return status;
}

}  // namespace mmlab::cli
