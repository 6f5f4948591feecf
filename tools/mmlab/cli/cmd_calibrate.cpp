// `mmlab calibrate`: measures on the running kernel what the model cannot
// incur itself (first-touch and CoW fault costs per folio size, io_uring
// long-term pin costs) and the cost model's terms (include/mmlab/cost.h:
// the calibration cases on the host and the model, fitted), and writes them
// as a named cost profile, which `mmlab bench --profile` and `mmlab
// validate` turn into modelled time.
//
// Exit status: 0 written, 1 a measurement or the write failed, 2 usage,
// 4 the host cannot be calibrated here (not root, /sys/kernel/mm read-only):
// ctest treats 4 as a skip.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/calibrate.h"
#include "mmlab/cost.h"
#include "mmlab/input_file.h"
#include "mmlab/types.h"

namespace mmlab::cli {
namespace {


struct CalibrateCli {
  std::string name, out;
  bool quick = false;
  uint64_t size_mb = 0;  // 0: 256, or 64 with --quick
  int runs = 0;          // 0: 5, or 3 with --quick
  bool out_given = false;  // --out on the command line (an empty value is refused, not the default)
  std::string cases;       // the calibration cases; default bench/cost/calibrate.mms of the source tree
  int term_runs = 0;       // host runs per case: 0, 5 (3 with --quick)
  bool no_terms = false;
  std::string refit;  // a profile whose stored runs are fitted again
};

std::string cases_file(const CalibrateCli& c) {
  return c.cases.empty() ? std::string(MMLAB_SOURCE_DIR) + "/bench/cost/calibrate.mms" : c.cases;
}

// The cost model's terms: the measured ones, then the cases and the fit.
int calibrate_terms(const CalibrateCli& c, const std::function<void(const std::string&)>& progress, host::CostProfile* p) {
  cost::RunCasesOptions ro;
  ro.file = cases_file(c);
  ro.runs = c.term_runs ? c.term_runs : (c.quick ? 3 : 15);
  ro.progress = [&](const std::string& w) { progress("terms: " + w); };
  std::string text, why;
  if (read_input_file(ro.file, 4ull << 20, &text, &why)) {
    std::fprintf(stderr, "mmlab calibrate: --cases %s: %s\n", ro.file.c_str(), why.c_str());
    return 2;
  }
  progress("terms: zeroing and copying per order");
  cost::measure_data_terms(p);
  std::vector<cost::CaseRun> cases;
  if (int e = cost::run_cases(ro, &cases, &p->fit.reference_ns, &why)) {
    std::fprintf(stderr, "mmlab calibrate: %s\n", why.c_str());
    return e == -EINVAL ? 2 : 1;
  }
  for (auto& cr : cases)
    if (!cr.skipped.empty()) p->notes.push_back(fmt::format("calibration case {} not used: {}", cr.name, cr.skipped));
  cost::fit_terms(cases, p);
  p->fit.cases_sha = cost::text_digest(text);
  return 0;
}

std::string default_name() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) return "host";
  return host;
}

// The name becomes a file name: keep it to one path component.
std::string file_safe(std::string s) {
  for (char& ch : s)
    if (ch == '/' || ch == ' ') ch = '_';
  return s;
}

// Whether the profile can be written at `path`, checked before the
// measuring: its directory is made and the file opened for writing without
// truncating one that exists (a failed run leaves an older profile whole).
// *created: the file did not exist, and the caller removes it if no profile
// is written after all.
bool out_usable(const std::string& path, bool* created, std::string* why) {
  std::error_code ec;
  if (path.empty()) {
    *why = "empty path";
    return false;
  }
  if (std::filesystem::is_directory(path, ec)) {
    *why = "is a directory";
    return false;
  }
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      *why = "cannot make its directory: " + ec.message();
      return false;
    }
  }
  *created = !std::filesystem::exists(path, ec);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  close(fd);
  return true;
}

// --refit: the profile's stored runs against the model's counts now.
int refit_profile(const CalibrateCli& c, host::CostProfile* p) {
  std::string why, text;
  if (host::load_cost_profile(c.refit, p, &why)) {
    std::fprintf(stderr, "mmlab calibrate: --refit %s: %s\n", c.refit.c_str(), why.c_str());
    return 2;
  }
  cost::RunCasesOptions ro;
  ro.file = cases_file(c);
  if (read_input_file(ro.file, 4ull << 20, &text, &why)) {
    std::fprintf(stderr, "mmlab calibrate: --cases %s: %s\n", ro.file.c_str(), why.c_str());
    return 2;
  }
  std::vector<std::string> notes;
  if (int e = cost::refit_terms(ro, p, &notes, &why)) {
    std::fprintf(stderr, "mmlab calibrate: --refit %s: %s\n", c.refit.c_str(), why.c_str());
    return e == -ENODATA || e == -EINVAL ? 2 : 1;
  }
  std::erase_if(p->notes, [](const std::string& n) { return n.rfind("calibration case ", 0) == 0; });
  p->notes.insert(p->notes.end(), notes.begin(), notes.end());
  p->notes.push_back(fmt::format("terms refitted from the stored runs by mmlab {} ({})", mmlab::build_commit(), ro.file));
  p->fit.cases_sha = cost::text_digest(text);
  if (!c.name.empty()) p->name = c.name;
  return 0;
}

int run_calibrate(const CalibrateCli& c) {
  std::string why;
  host::CalibrateOptions o;
  o.name = c.name.empty() ? default_name() : c.name;
  // The output is checked first: a path that cannot be written costs nothing.
  const std::string path = c.out.empty() && !c.out_given ? "calibrate-out/" + file_safe(o.name) + ".json" : c.out;
  bool created = false;
  if (!out_usable(path, &created, &why)) {
    std::fprintf(stderr, "mmlab calibrate: --out %s: cannot write the profile there: %s\n", path.empty() ? "''" : path.c_str(),
                 why.c_str());
    return 2;
  }
  // A profile that is not written after all leaves no empty file behind.
  struct RemoveUnlessKept {
    const std::string& path;
    bool remove;
    ~RemoveUnlessKept() {
      if (remove) std::remove(path.c_str());
    }
  } cleanup{path, created};
  if (!c.refit.empty()) {
    host::CostProfile p;
    if (int e = refit_profile(c, &p)) return e;
    std::printf("## the cost model's terms, refitted\n\n%s", cost::terms_table(p).c_str());
    if (host::save_cost_profile(path, p, &why)) {
      std::fprintf(stderr, "mmlab calibrate: %s\n", why.c_str());
      return 1;
    }
    cleanup.remove = false;
    std::printf("\nprofile %s: %s\n", p.name.c_str(), path.c_str());
    return 0;
  }
  if (!host::host_calibration_available(&why)) {
    std::fprintf(stderr, "mmlab calibrate: cannot measure this host: %s\n", why.c_str());
    return kExitUnavailable;
  }
  o.region_bytes = (c.size_mb ? c.size_mb : (c.quick ? 64 : 256)) << 20;
  o.runs = c.runs ? c.runs : (c.quick ? 3 : 5);
  const bool tty = isatty(STDERR_FILENO);
  o.progress = [tty](const std::string& what) {
    if (tty) std::fprintf(stderr, "\r\033[K  calibrate: %s ...", what.c_str());
  };
  auto t0 = std::chrono::steady_clock::now();
  host::CostProfile p;
  int e = host::calibrate_host(o, &p, &why);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (e) {
    std::fprintf(stderr, "mmlab calibrate: %s\n", why.c_str());
    return 1;
  }
  if (!c.no_terms) {
    e = calibrate_terms(c, o.progress, &p);
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (e) return e;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fputs(host::cost_profile_table(p).c_str(), stdout);
  if (!p.terms.empty()) std::printf("\n## the cost model's terms\n\n%s", cost::terms_table(p).c_str());
  if (host::save_cost_profile(path, p, &why)) {
    std::fprintf(stderr, "mmlab calibrate: %s\n", why.c_str());
    return 1;
  }
  cleanup.remove = false;
  std::printf("\nprofile %s: %s (%.1f s measuring, %.1f s in all)\n", p.name.c_str(), path.c_str(), p.seconds, secs);
  return 0;
}

}  // namespace

void add_calibrate(CLI::App& app) {
  auto c = std::make_shared<CalibrateCli>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("calibrate",
                                 "measure fault, CoW and long-term pin costs on the running kernel into a cost profile "
                                 "(root; exit 4 where the host cannot be measured)");
  sub->add_option("--name", c->name, "profile name (default: the host name)");
  sub->add_option("--out", c->out, "profile file (default: calibrate-out/<name>.json)");
  sub->add_flag("--quick", c->quick, "64 MiB fault and CoW regions and 3 runs instead of 256 MiB and 5");
  sub->add_option("--size-mb", c->size_mb, "fault and CoW region in MiB (the pinned buffer is always 256 MiB)")->check(CLI::Range(4, 4096));
  sub->add_option("--runs", c->runs, "runs per measurement (the median is kept)")->check(CLI::Range(1, 100));
  sub->add_option("--cases", c->cases, "the cost model's calibration cases (default: bench/cost/calibrate.mms)");
  sub->add_option("--term-runs", c->term_runs, "host runs per calibration case (default 15, 3 with --quick)")->check(CLI::Range(2, 100));
  sub->add_flag("--no-terms", c->no_terms, "measure the fault, CoW and pin costs only, not the cost model's terms");
  sub->add_option("--refit", c->refit,
                  "fit the terms of this profile again from the runs it stored and the model's counts now "
                  "(no host measurement, no root; writes --out)")
      ->excludes("--quick")
      ->excludes("--size-mb")
      ->excludes("--runs")
      ->excludes("--term-runs")
      ->excludes("--no-terms");
  register_action(sub, [c, sub] {
    c->out_given = sub->count("--out") > 0;
    return run_calibrate(*c);
  });
}

}  // namespace mmlab::cli
