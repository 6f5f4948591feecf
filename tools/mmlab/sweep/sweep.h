// `mmlab sweep` and `mmlab merge`: a grid of runs of one report-writing
// command (bench, cow-bench) expanded into independent jobs, each run
// anywhere (here, GNU parallel, its --sshloginfile hosts, a Slurm array),
// and the jobs' results combined into one report for `mmlab compare`
// (docs/BENCH.md, "Sweeps").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace mmlab::cli {

// One job: its number, its name (the axis values that tell it from the
// others, "size-mb=4 repeats=2"; a --seed axis is left out, so that the
// seeds of one configuration merge as its samples) and the arguments of
// the mmlab command it runs, before the --out that the job adds.
struct SweepJob {
  size_t number = 0;
  std::string name;
  std::vector<std::string> args;
};

// A grid file:
//   command bench --quick --suite fault   the command and its fixed options
//   axis --size-mb 4 8 16                 an option and its values
//   job --size-mb 3                       one more job besides the product
// '#' starts a comment. The jobs are the product of the axes, the first
// axis slowest, then the `job` lines in order.
struct SweepGrid {
  std::string file;
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  std::vector<SweepJob> jobs;
};

// Reads and expands a grid: 0, or 2 with *err naming file:line:column.
int read_sweep_grid(const std::string& file, SweepGrid* grid, std::string* err);

// The jobs' table that `--list --results DIR` leaves in DIR/sweep.json,
// from which merge learns the jobs that never wrote a result.
nlohmann::json sweep_table(const SweepGrid& grid);

// Runs one job: `self` (this mmlab) with the job's arguments and --out DIR
// (a temporary folder without `results`). Its record: the job, its
// command, exit status, seconds, host, commit, and the report it wrote.
// With `results`, written to results/job-N/job.json (the output beside it
// in job-N/log); without, printed on stdout as one line. The job's exit
// status, or 127 if it could not start.
int run_sweep_job(const std::string& self, const SweepGrid& grid, size_t number, const std::string& results);

// The line GNU parallel runs for a job, and the sbatch array script.
std::string sweep_job_command(const std::string& self, const SweepGrid& grid, size_t number,
                              const std::string& results);
std::string sweep_slurm_script(const std::string& self, const SweepGrid& grid, const std::string& results);

// Every job record under DIR (job-*/job.json) or in a FILE of one record
// per line, combined: one report whose top-level keys are the jobs' names
// (a name met more than once, a seed axis, pools each number as samples),
// written to `out`. Prints what merged and every job that failed or never
// wrote a result, by number, name and command. 0 if every job of the
// sweep merged, 1 if some failed or are missing, 2 on unreadable input.
int merge_sweep(const std::string& input, const std::string& out);

}  // namespace mmlab::cli
