#include "report/report.h"

#include "mmlab/cost.h"

#ifndef MMLAB_SOURCE_DIR
#define MMLAB_SOURCE_DIR "."
#endif

#include <memory>
#include <mutex>

#include "report/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fmt/format.h"
#include "mmlab/system.h"

namespace mmlab::cli {
const char* const kFrameStorePreparation =
    "recycled: every case runs once untimed first, so its timed rounds reuse that round's frame store (the same "
    "frames: allocation is deterministic); MADV_HUGEPAGE on the store; host faults counted per timed region";

void Report::add(const std::string& s) {
  text += s;
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

namespace {

// The step bench is at, shown by the one progress line (progress.h).
struct BenchProgress {
  std::mutex mu;
  std::string step;
  std::unique_ptr<ProgressLine> line;
};
BenchProgress& bench_progress() {
  static BenchProgress p;
  return p;
}

}  // namespace

void progress(const std::string& what) {
  BenchProgress& p = bench_progress();
  {
    std::lock_guard<std::mutex> g(p.mu);
    p.step = what;
    if (p.line) return;
  }
  p.line = std::make_unique<ProgressLine>("mmlab bench", [&p] {
    std::lock_guard<std::mutex> g(p.mu);
    return "running " + p.step + " ...";
  });
}

void progress_done() { bench_progress().line.reset(); }

std::string first_touch_note(long host_faults, uint64_t pages) {
  if (pages == 0 || static_cast<uint64_t>(host_faults) * 100 <= pages) return "";
  return " (host first touch: not the model's time)";
}

std::string environment_text(nlohmann::ordered_json* env) {
  std::string cpu = "unknown";
  std::ifstream ci("/proc/cpuinfo");
  for (std::string line; std::getline(ci, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  std::string kernel;
  std::ifstream kv("/proc/sys/kernel/osrelease");
  std::getline(kv, kernel);
  std::string thp;
  std::ifstream th("/sys/kernel/mm/transparent_hugepage/enabled");
  std::getline(th, thp);
  (*env)["cpu"] = cpu;
  (*env)["host_kernel"] = kernel;
  (*env)["host_thp"] = thp;
  (*env)["nproc"] = sysconf(_SC_NPROCESSORS_ONLN);
  (*env)["build"] = build_description();
  (*env)["commit"] = build_commit();
  (*env)["profile"] = "baseline v6.18 defaults; gup.walk/gup.fast variants as listed per row; classic LRU";
  (*env)["frame_store"] = kFrameStorePreparation;
  return fmt::format("CPU: {} ({} cores); host kernel {}; host THP {}\nframe store: {}\nbuild: {} (commit {})\n", cpu,
                     sysconf(_SC_NPROCESSORS_ONLN), kernel, thp, kFrameStorePreparation, build_description(), build_commit());
}

namespace {
constexpr const char* kForcedMark = " FORCED";
}

int load_profile_option(const char* command, const std::string& path, bool force, bool need_terms, host::CostProfile* p) {
  std::string err;
  if (host::load_cost_profile(path, p, &err)) {
    std::fprintf(stderr, "mmlab %s: --profile %s: %s\n", command, path.c_str(), err.c_str());
    return 2;
  }
  if (need_terms && p->terms.empty()) {
    std::fprintf(stderr, "mmlab %s: --profile %s: no cost-model terms (a format 1 profile: run mmlab calibrate again)\n",
                 command, path.c_str());
    return 2;
  }
  const std::vector<std::string> diff = host::cost_header_differences(p->machine, host::describe_this_machine());
  if (diff.empty()) return 0;
  if (!force) {
    std::fprintf(stderr, "mmlab %s: --profile %s was measured on another kind of machine (--force to use it anyway):\n",
                 command, path.c_str());
    for (auto& d : diff) std::fprintf(stderr, "  %s\n", d.c_str());
    return 2;
  }
  p->name += kForcedMark;
  p->forced = diff;
  return 0;
}

std::string profile_text(const host::CostProfile& p, const std::string& file, nlohmann::ordered_json* j) {
  *j = {{"name", p.name}, {"file", file}, {"date", p.date}, {"cpu", p.machine.cpu}, {"kernel", p.machine.kernel},
        {"commit", p.commit}};
  std::string text = fmt::format("modelled tables: profile {} ({}; {}, kernel {}; {}): the model's counts x the host's cost "
                                 "per event, not measured here\n", p.name, file, p.machine.cpu, p.machine.kernel, p.date);
  if (p.forced.empty()) return text;
  (*j)["forced"] = p.forced;
  text += "**FORCED** (--force): the profile was measured on another kind of machine, and every modelled figure is that "
          "machine's cost:\n";
  for (auto& d : p.forced) text += "- " + d + "\n";
  return text;
}

bool default_profile(host::CostProfile* out, std::string* file, std::string* why) {
  if (!cost::find_matching_profile(std::string(MMLAB_SOURCE_DIR) + "/bench/cost/profiles", out, file, why)) return false;
  *file += " (committed; of this machine's kind, taken without --profile)";
  return true;
}

std::string no_profile_text(const std::string& why) {
  return fmt::format("modelled tables: none ({}; `mmlab calibrate` as root makes a profile, `--profile FILE` uses it)\n", why);
}

int write_report(const Report& rep, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream md(dir + "/report.md");
  const size_t title_end = rep.text.find('\n');
  if (rep.verdict.empty() || title_end == std::string::npos)
    md << rep.text;
  else
    md << rep.text.substr(0, title_end + 1) << "\n" << rep.verdict << "\n" << rep.text.substr(title_end + 1);
  std::ofstream js(dir + "/report.json");
  js << rep.json.dump(2) << "\n";
  if (!md || !js) {
    std::fprintf(stderr, "mmlab bench: cannot write into %s\n", dir.c_str());
    return 1;
  }
  std::string plots = write_plots(rep.plots, dir);
  std::printf("\nreport: %s/report.md, %s/report.json%s\n", dir.c_str(), dir.c_str(), plots.c_str());
  return 0;
}

bool out_dir_usable(const std::string& dir, std::string* err) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *err = ec.message();
    return false;
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    *err = "not a directory";
    return false;
  }
  if (access(dir.c_str(), W_OK) != 0) {
    *err = std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace mmlab::cli
