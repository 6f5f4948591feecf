// `mmlab gup-test`: a command-line twin of tools/testing/selftests/mm/gup_test
// (v6.18) driving the model's mm/gup_test.c equivalent, plus model options to
// compare variants side by side in one process.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "fmt/format.h"
#include "bench/gup_bench.h"
#include "mmlab/gup.h"
#include "mmlab/tune.h"
#include "nlohmann/json.hpp"

namespace mmlab::cli {
namespace {

struct GupTestOptions {
  bool u = false, a = false, L = false, U = false, b = false, c = false, p = false;
  bool t = false, T = false, w = false, W = false, S = false, H = false, z = false;
  long m = 128;
  long n = 1;
  bool n_set = false;
  long r = 1;
  long j = 1;
  std::string F;
  std::string f;
  std::vector<std::string> which;
  std::vector<std::string> sysfs, tune;
  std::string walk, fast, json;
  bool protect_read = false;
  std::set<std::string> given;  // the string options given on the command line (even as '')
};

int parse_kv(const std::string& s, std::string* k, std::string* v) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return -EINVAL;
  *k = s.substr(0, eq);
  *v = s.substr(eq + 1);
  return 0;
}

// A non-negative number, decimal or 0x hex (strtoull's base 0), that fits 64 bits.
bool parse_unsigned(const std::string& s, uint64_t* out) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;  // strtoull takes "-1" and " 1"
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (*end || errno == ERANGE) return false;
  *out = v;
  return true;
}

// The gup_test options as an engine configuration; false (with a message
// naming the option) on a bad value.
bool gup_config(const GupTestOptions& o, GupBenchConfig* cfg) {
  if (o.z) {
    std::fprintf(stderr, "mmlab gup-test: -z is not handled by mainline gup_test (v6.18); it was removed with FOLL_TOUCH faulting\n");
    return false;
  }
  cfg->size = static_cast<uint64_t>(o.m) << 20;
  cfg->cmd = o.a ? GupCmd::kPinFast : o.L ? GupCmd::kPinLongterm : o.U ? GupCmd::kGupBasic : o.b ? GupCmd::kPinBasic
          : o.c ? GupCmd::kDump : GupCmd::kGupFast;
  cfg->nr_per_call = o.n < 0 ? static_cast<long>(cfg->size / 4096) : o.n;
  cfg->repeats = o.r;
  cfg->threads = o.j;
  cfg->thp = o.t ? 1 : o.T ? -1 : 0;
  cfg->shared = o.S;
  cfg->hugetlb = o.H;
  cfg->file = o.f;
  cfg->dump_use_pin = o.p;
  cfg->protect_read = o.protect_read;
  // A string option given with an empty value ('') is a mistake, never the default.
  for (auto& [opt, value] : {std::pair{"-F", &o.F}, std::pair{"-f", &o.f}, std::pair{"--walk", &o.walk},
                             std::pair{"--fast", &o.fast}, std::pair{"--json", &o.json}})
    if (o.given.count(opt) && value->empty()) {
      std::fprintf(stderr, "mmlab gup-test: %s '': expected a value\n", opt);
      return false;
    }
  if (o.n == 0) {
    std::fprintf(stderr, "mmlab gup-test: -n 0: expected pages per call (1 or more), or a negative number for the whole region\n");
    return false;
  }
  unsigned flags = 0;
  if (!o.F.empty()) {
    // gup_test's gup_flags is a __u32: a value beyond it is not a flag set.
    uint64_t v = 0;
    if (!parse_unsigned(o.F, &v) || v > UINT32_MAX) {
      std::fprintf(stderr, "mmlab gup-test: -F %s: expected a number from 0 to 0xffffffff (gup_flags is 32 bits)\n", o.F.c_str());
      return false;
    }
    flags = static_cast<unsigned>(v);
  }
  if (!o.W) flags |= foll::WRITE;  // -w is the default
  cfg->gup_flags = flags;
  // DUMP_USER_PAGES_TEST takes at most GUP_TEST_MAX_PAGES_TO_DUMP indices,
  // each a __u32 page index inside the region.
  constexpr size_t kMaxPagesToDump = 8;
  if (o.which.size() > kMaxPagesToDump) {
    std::fprintf(stderr, "mmlab gup-test: %zu page indices: at most %zu (GUP_TEST_MAX_PAGES_TO_DUMP)\n", o.which.size(), kMaxPagesToDump);
    return false;
  }
  const uint64_t region_pages = cfg->size / 4096;
  for (auto& s : o.which) {
    uint64_t v = 0;
    if (!parse_unsigned(s, &v) || v >= region_pages) {
      std::fprintf(stderr, "mmlab gup-test: page index %s: expected a number from 0 to %llu (the region's pages)\n", s.c_str(),
                   static_cast<unsigned long long>(region_pages - 1));
      return false;
    }
    cfg->which_pages.push_back(static_cast<long>(v));
  }
  for (auto& kv : o.sysfs) {
    std::string k, v;
    if (parse_kv(kv, &k, &v)) {
      std::fprintf(stderr, "mmlab gup-test: --sysfs %s: expected PATH=VALUE\n", kv.c_str());
      return false;
    }
    cfg->sysfs.push_back({k, v});
  }
  for (auto& kv : o.tune) {
    std::string k, v;
    if (parse_kv(kv, &k, &v)) {
      std::fprintf(stderr, "mmlab gup-test: --tune %s: expected KEY=VALUE\n", kv.c_str());
      return false;
    }
    cfg->tune.push_back({k, v});
  }
  std::vector<std::pair<std::string, std::string>> variants;
  for (auto& v : split_list(o.walk)) variants.push_back({"gup.walk", v});
  for (auto& v : split_list(o.fast)) variants.push_back({"gup.fast", v});
  if (!o.walk.empty() && !o.fast.empty()) {
    std::fprintf(stderr, "mmlab gup-test: give --walk or --fast, not both\n");
    return false;
  }
  for (const std::string* list : {&o.walk, &o.fast})
    if (!list->empty() && split_list(*list).empty()) {
      std::fprintf(stderr, "mmlab gup-test: --%s %s: names no variant\n", list == &o.walk ? "walk" : "fast", list->c_str());
      return false;
    }
  cfg->variants = variants;
  return true;
}

int run_gup_test(const GupTestOptions& o) {
  GupBenchConfig cfg;
  if (!gup_config(o, &cfg)) return 2;
  // The output file is opened before the work, so that a bad path costs nothing.
  std::ofstream json_out;
  if (!o.json.empty()) {
    json_out.open(o.json);
    if (!json_out) {
      std::fprintf(stderr, "mmlab gup-test: --json %s: cannot open for writing: %s\n", o.json.c_str(), std::strerror(errno));
      return 2;
    }
  }
  GupBenchResult res;
  int err = run_gup_bench(cfg, &res, [](const std::string& line) { std::fputs(line.c_str(), stdout); });
  if (err) {
    std::fprintf(stderr, "mmlab gup-test: %s\n", res.error.c_str());
    return res.usage_error ? 2 : 1;
  }
  if (res.variants.size() > 1) std::fputs(format_gup_summary(res).c_str(), stdout);
  if (json_out.is_open()) {
    json_out << gup_result_json(cfg, res).dump(2) << "\n";
    json_out.close();
    if (!json_out) {
      std::fprintf(stderr, "mmlab gup-test: cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

void add_gup_test(CLI::App& app) {
  auto o = std::make_shared<GupTestOptions>();  // owned by the action: the options bind to its members
  auto* sub = app.add_subcommand("gup-test", "twin of the kernel's gup_test (tools/testing/selftests/mm/gup_test.c)");
  sub->add_flag("-u", o->u, "GUP_FAST_BENCHMARK: get_user_pages_fast (the default)");
  sub->add_flag("-a", o->a, "PIN_FAST_BENCHMARK: pin_user_pages_fast");
  sub->add_flag("-L", o->L, "PIN_LONGTERM_BENCHMARK: pin_user_pages(FOLL_LONGTERM) under mmap_lock");
  sub->add_flag("-U", o->U, "GUP_BASIC_TEST: get_user_pages");
  sub->add_flag("-b", o->b, "PIN_BASIC_TEST: pin_user_pages");
  sub->add_flag("-c", o->c, "DUMP_USER_PAGES_TEST (trailing page indices, default 0)");
  sub->add_flag("-p", o->p, "with -c: pin_user_pages instead of get_user_pages");
  sub->add_option("-m", o->m, "region size in MiB (default 128)")->check(CLI::Range(1L, 1L << 20));
  sub->add_option("-n", o->n, "pages per call; negative: the whole region in one call (default 1)");
  sub->add_option("-r", o->r, "repetitions (benchmark commands)")->check(CLI::Range(1L, 100000L));
  sub->add_option("-j", o->j, "threads")->check(CLI::Range(1L, 64L));
  sub->add_option("-F", o->F, "raw gup_flags (FOLL_* values of v6.18, base 0)");
  sub->add_option("-f", o->f, "file to map: a model file of that name (shmem; 'ext4:NAME' etc. pick the class)");
  sub->add_flag("-t", o->t, "MADV_HUGEPAGE");
  sub->add_flag("-T", o->T, "MADV_NOHUGEPAGE");
  sub->add_flag("-w", o->w, "FOLL_WRITE (default)");
  sub->add_flag("-W", o->W, "read-only GUP");
  sub->add_flag("-S", o->S, "MAP_SHARED");
  sub->add_flag("-H", o->H, "MAP_HUGETLB (2 MiB pages; the pool is sized to fit)");
  sub->add_flag("-z", o->z, "(refused: mainline no longer handles it)");
  sub->add_option("pages", o->which, "with -c: page indices to dump");
  sub->add_option("--sysfs", o->sysfs, "PATH=VALUE under /sys/kernel/mm (repeatable)");
  sub->add_option("--tune", o->tune, "KEY=VALUE model variant (repeatable)");
  sub->add_option("--walk", o->walk, "gup.walk variants to alternate per repeat: " + tune_values_text("gup.walk") + " (`mmlab variants`)");
  sub->add_option("--fast", o->fast, "gup.fast variants to alternate per repeat: " + tune_values_text("gup.fast") + " (`mmlab variants`)");
  sub->add_option("--json", o->json, "write every figure to this JSON file");
  sub->add_flag("--protect-read", o->protect_read, "model: mprotect(PROT_READ) the region after pre-faulting");
  add_trace_options(sub);
  register_action(sub, [o, sub] {
    for (const char* opt : {"-F", "-f", "--walk", "--fast", "--json"})
      if (sub->count(opt)) o->given.insert(opt);
    return run_gup_test(*o);
  });
}

}  // namespace mmlab::cli
