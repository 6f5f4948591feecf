// `mmlab sweep GRID` and `mmlab merge DIR|FILE` (sweep/sweep.h,
// docs/BENCH.md "Sweeps").
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "fmt/format.h"
#include "sweep/sweep.h"

namespace mmlab::cli {
namespace {

namespace fs = std::filesystem;

struct SweepCli {
  std::string grid, results, shard;
  bool list = false, slurm = false;
  std::string job;  // a number, checked against the grid
};

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "mmlab";
  buf[n] = '\0';
  return buf;
}

// "I/N", 1 <= I <= N: false with *msg naming the token.
bool parse_shard(const std::string& s, size_t* i, size_t* n, std::string* msg) {
  unsigned long a = 0, b = 0;
  int used = 0;
  if (std::sscanf(s.c_str(), "%lu/%lu%n", &a, &b, &used) != 2 || static_cast<size_t>(used) != s.size() ||
      s.find_first_not_of("0123456789/") != std::string::npos || a < 1 || a > b || b > 100000) {
    *msg = fmt::format("--shard {}: expected I/N with 1 <= I <= N <= 100000 (e.g. 2/4)", s);
    return false;
  }
  *i = a;
  *n = b;
  return true;
}

bool parse_job_number(const std::string& s, size_t jobs, size_t* out, std::string* msg) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(s) >= jobs) {
    *msg = fmt::format("--job {}: expected a job number from 0 to {}", s, jobs - 1);
    return false;
  }
  *out = std::stoul(s);
  return true;
}

// --list: one command per job, for GNU parallel; with --results, the
// jobs' table in DIR/sweep.json for merge.
int list_jobs(const std::string& self, const SweepGrid& g, const std::string& results) {
  if (!results.empty()) {
    std::error_code ec;
    fs::create_directories(results, ec);
    std::ofstream table(fs::path(results) / "sweep.json");
    if (ec || !(table << sweep_table(g).dump(1) << "\n")) {
      std::fprintf(stderr, "mmlab sweep: --results %s: cannot write sweep.json there\n", results.c_str());
      return 2;
    }
  }
  for (const SweepJob& j : g.jobs) std::printf("%s\n", sweep_job_command(self, g, j.number, results).c_str());
  return 0;
}

// --shard I/N: the jobs whose number is I-1 modulo N, one after another.
int run_shard(const std::string& self, const SweepGrid& g, size_t i, size_t n, const std::string& results) {
  int worst = 0;
  for (const SweepJob& j : g.jobs)
    if (j.number % n == i - 1) worst = std::max(worst, run_sweep_job(self, g, j.number, results));
  return worst ? 1 : 0;
}

int run_sweep(const SweepCli& o) {
  const int modes = o.list + o.slurm + !o.job.empty() + !o.shard.empty();
  if (modes != 1) {
    std::fprintf(stderr, "mmlab sweep: give exactly one of --list, --job N, --shard I/N, --slurm\n");
    return 2;
  }
  if (o.slurm && o.results.empty()) {
    std::fprintf(stderr, "mmlab sweep: --slurm needs --results DIR (a folder every node can write)\n");
    return 2;
  }
  SweepGrid g;
  std::string err;
  if (read_sweep_grid(o.grid, &g, &err)) {
    std::fprintf(stderr, "mmlab sweep: %s\n", err.c_str());
    return 2;
  }
  const std::string self = self_path();
  size_t job = 0, si = 0, sn = 0;
  if ((!o.job.empty() && !parse_job_number(o.job, g.jobs.size(), &job, &err)) ||
      (!o.shard.empty() && !parse_shard(o.shard, &si, &sn, &err))) {
    std::fprintf(stderr, "mmlab sweep: %s\n", err.c_str());
    return 2;
  }
  if (o.list) return list_jobs(self, g, o.results);
  if (o.slurm) {
    std::fputs(sweep_slurm_script(self, g, o.results).c_str(), stdout);
    return 0;
  }
  if (!o.shard.empty()) return run_shard(self, g, si, sn, o.results);
  return run_sweep_job(self, g, job, o.results) ? 1 : 0;
}

int run_merge(const std::string& input, std::string out) {
  std::error_code ec;
  if (out.empty()) {
    const bool dir = fs::is_directory(input, ec);
    out = ((dir ? fs::path(input) : fs::path(input).parent_path()) / "report.json").string();
  }
  return merge_sweep(input, out);
}

}  // namespace

void add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCli>();
  auto* sub = app.add_subcommand("sweep", "a grid of bench or cow-bench runs as independent jobs (docs/BENCH.md, Sweeps)");
  sub->add_option("grid", o->grid, "the grid file: 'command', 'axis' and 'job' lines")->required();
  sub->add_flag("--list", o->list, "print one command per job (for GNU parallel); with --results, write the jobs' table there");
  sub->add_option("--job", o->job, "run job N and write its record (under --results, else on stdout)");
  sub->add_option("--shard", o->shard, "run every job whose number is I-1 modulo N, one after another");
  sub->add_flag("--slurm", o->slurm, "print an sbatch array script, one task per job");
  sub->add_option("--results", o->results, "folder of the jobs' records (job-N/job.json) and of sweep.json");
  register_action(sub, [o] { return run_sweep(*o); });

  auto in = std::make_shared<std::pair<std::string, std::string>>();
  auto* m = app.add_subcommand("merge", "a sweep's job records combined into one report, for `mmlab compare`");
  m->add_option("input", in->first, "a --results folder, or a file of records one per line")->required();
  m->add_option("--out", in->second, "the merged report.json (default: report.json in the input's folder)");
  register_action(m, [in] { return run_merge(in->first, in->second); });
}

}  // namespace mmlab::cli
