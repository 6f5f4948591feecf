#include "bench/model_common.h"
#include "bench/gup_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "report/statistics.h"
#include "fmt/format.h"
#include "mmlab/system.h"
#include "mmlab/tune.h"

namespace mmlab::cli {
namespace {

GupTestCmd to_ioctl(GupCmd c) {
  switch (c) {
    case GupCmd::kGupFast: return GupTestCmd::GUP_FAST_BENCHMARK;
    case GupCmd::kPinFast: return GupTestCmd::PIN_FAST_BENCHMARK;
    case GupCmd::kPinLongterm: return GupTestCmd::PIN_LONGTERM_BENCHMARK;
    case GupCmd::kGupBasic: return GupTestCmd::GUP_BASIC_TEST;
    case GupCmd::kPinBasic: return GupTestCmd::PIN_BASIC_TEST;
    case GupCmd::kDump: return GupTestCmd::DUMP_USER_PAGES_TEST;
  }
  return GupTestCmd::GUP_FAST_BENCHMARK;
}

bool is_benchmark(GupCmd c) { return c == GupCmd::kGupFast || c == GupCmd::kPinFast || c == GupCmd::kPinLongterm; }

const char* const kCounters[] = {"gup.descents", "gup.pte_lock", "gup.pmd_lock", "gup.grab", "gup.mark_accessed",
                                 "gup.cache_flush", "gup.fast_speculative", "gup.fast_fallback"};

}  // namespace

long host_faults_now() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt + ru.ru_majflt;
}

const char* gup_cmd_name(GupCmd c) { return gup_test_cmd_name(to_ioctl(c)); }

uint64_t gup_bench_host_need(const GupBenchConfig& cfg) { return model_host_need(cfg.size); }

namespace {

// Fails the run with a message; a usage error names a bad option value.
int fail(GupBenchResult* res, int e, std::string msg, bool usage = false) {
  res->error = std::move(msg);
  res->usage_error = usage;
  return e;
}

// The System of the run, with the --sysfs, --tune and variant settings
// checked (each refused one is a usage error).
std::unique_ptr<System> gup_system(const GupBenchConfig& cfg, GupBenchResult* res, int* err) {
  SystemConfig sc;
  sc.ram_bytes = round_up(cfg.size * 2 + (512ull << 20), 4ull << 20);
  // The pre-faulting below touches every frame and table the timed calls
  // use (the store is recycled from earlier rows where the process ran
  // any); each round counts the host faults it took all the same.
  sc.host_thp = HostThp::kHugepage;  // back the frame store with host THP: fewer host TLB misses in large runs
  auto sys = System::create(sc, err);
  if (!sys) {
    *err = fail(res, *err, fmt::format("cannot create the model system: {}", errno_name(*err)));
    return nullptr;
  }
  for (auto& [k, v] : cfg.sysfs) {
    const int e = sys->sysfs_write(k, v);
    if (!e) continue;
    // The file's own text lists what it takes, as the kernel's does ("always [madvise] never").
    std::string now;
    const std::string choices = sys->sysfs_read(k, &now) == 0 && now.find('[') != std::string::npos
                                    ? fmt::format("; it takes one of: {}", now.substr(0, now.find_last_not_of('\n') + 1))
                                    : "";
    *err = fail(res, e, fmt::format("--sysfs {}={}: the model's sysfs refuses it ({}){}", k, v, errno_name(e), choices), true);
    return nullptr;
  }
  for (auto& [k, v] : cfg.tune)
    if (int e = sys->tune(k, v)) {
      *err = fail(res, e, fmt::format("--tune {}={}: no such tune or value ({})", k, v, errno_name(e)), true);
      return nullptr;
    }
  for (auto& [k, v] : cfg.variants)
    if (int e = sys->tune(k, v)) {
      *err = fail(res, e, fmt::format("variant {}={}: no such variant ({})", k, v, errno_name(e)), true);
      return nullptr;
    }
  return sys;
}

// The region as gup_test maps it: hugetlb, a file (-f CLASS:NAME) or
// anonymous memory. Its address, or -errno with res->error set.
long map_region(System* sys, Process* p, const GupBenchConfig& cfg, GupBenchResult* res) {
  long addr;
  if (cfg.hugetlb) {
    sys->sysfs_write("hugepages/hugepages-2048kB/nr_hugepages", std::to_string(cfg.size / (2ull << 20) + 1));
    addr = p->mmap(0, cfg.size, PROT_READ | PROT_WRITE, (cfg.shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_HUGETLB);
  } else if (!cfg.file.empty()) {
    FsClass fs = FsClass::kShmem;
    auto colon = cfg.file.find(':');
    if (colon != std::string::npos && !fs_class_from_name(cfg.file.substr(0, colon), &fs))
      return fail(res, -EINVAL, fmt::format("-f {}: unknown file-system class", cfg.file), true);
    int fd = sys->create_file(cfg.size, fs, 0, cfg.file);
    if (fd < 0) return fail(res, fd, fmt::format("-f {}: {}", cfg.file, errno_name(fd)));
    addr = p->mmap_file(0, cfg.size, PROT_READ | PROT_WRITE, cfg.shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  } else {
    addr = p->mmap(0, cfg.size, PROT_READ | PROT_WRITE, (cfg.shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS);
  }
  if (addr < 0) return fail(res, static_cast<int>(addr), fmt::format("mmap: {}", errno_name(static_cast<int>(addr))));
  return addr;
}

// Pre-faulted from "user space", one byte per base page, as gup_test does;
// the folio sizes that gave are recorded.
int prefault_region(System* sys, Process* p, uint64_t addr, const GupBenchConfig& cfg, GupBenchResult* res) {
  if (cfg.thp > 0) (void)p->madvise(addr, cfg.size, MADV_HUGEPAGE);
  if (cfg.thp < 0) (void)p->madvise(addr, cfg.size, MADV_NOHUGEPAGE);
  for (uint64_t off = 0; off < cfg.size; off += PAGE_SIZE) {
    uint8_t b = 1;
    if (!p->write(addr + off, &b, 1).ok()) return fail(res, -EFAULT, "pre-faulting the region failed");
  }
  // Model option: read-only PTEs over exclusive pages, so R/O pins meet read-only runs.
  if (cfg.protect_read && p->mprotect(addr, cfg.size, PROT_READ)) return fail(res, -EINVAL, "mprotect(PROT_READ) failed");
  res->region_pages = cfg.size / PAGE_SIZE;
  for (unsigned o = 2; o <= 9; o++)
    if (int64_t n = sys->mthp_stat(o, "anon_fault_alloc"); n > 0) res->folios_by_size[fmt::format("{}kB", 4u << o)] = n;
  return 0;
}

// The kernel tool's lines for one thread's call, and the model's own `#`
// lines: why a round stopped short, and which folio sizes it got (first
// repeat only).
void iteration_lines(const GupBenchConfig& cfg, const GupTestArgs& a, uint64_t slice, long repeat,
                     const std::function<void(const std::string&)>& line) {
  const GupTestCmd cmd = to_ioctl(cfg.cmd);
  if (is_benchmark(cfg.cmd)) {
    std::string s = fmt::format("{}: Time: get:{} put:{} us", gup_test_cmd_name(cmd),
                                static_cast<uint64_t>(std::llround(a.get_delta_usec)),
                                static_cast<uint64_t>(std::llround(a.put_delta_usec)));
    if (a.size != slice) s += fmt::format(", truncated (size: {})", a.size);
    line(s + "\n");
  } else {
    if (!a.dump_log.empty()) line(a.dump_log);
    line(fmt::format("{}: done\n", gup_test_cmd_name(cmd)));
    if (a.size != slice) line(fmt::format("Truncated (size: {})\n", a.size));
  }
  if (a.check_failures) line(fmt::format("# {} pinned pages failed the maybe-DMA-pinned check\n", a.check_failures));
  if (a.size != slice)
    line(fmt::format("# the GUP call at {:#x} returned {}\n", a.addr + a.size,
                     a.stop_ret < 0 ? "-" + std::string(errno_name(static_cast<int>(a.stop_ret))) : "0 pages"));
  if (repeat == 0 && !a.folios_by_size.empty()) line("# folios obtained: " + format_folio_sizes(a.folios_by_size) + "\n");
}

// One ioctl round of every thread for variant vi, repeat r: timed as a
// whole (wall, host faults, the physical floor) and per thread.
int run_round(System* sys, Process* p, uint64_t addr, const GupBenchConfig& cfg, size_t vi, long r, GupBenchResult* res,
              const std::function<void(const std::string&)>& line) {
  const size_t nt = static_cast<size_t>(cfg.threads);
  std::vector<GupTestArgs> args(nt);
  std::vector<int> rets(nt);
  const uint64_t slice = cfg.split_threads ? round_down(cfg.size / nt, PAGE_SIZE) : cfg.size;
  auto one = [&](size_t t) {
    GupTestArgs& a = args[t];
    a.addr = addr + (cfg.split_threads ? t * slice : 0);
    a.size = slice;
    a.nr_pages_per_call = static_cast<unsigned>(cfg.nr_per_call);
    a.gup_flags = cfg.gup_flags;
    a.test_flags = cfg.dump_use_pin ? GUP_TEST_FLAG_DUMP_PAGES_USE_PIN : 0;
    for (size_t w = 0; w < cfg.which_pages.size() && w < 8; w++) a.which_pages[w] = static_cast<unsigned>(cfg.which_pages[w] + 1);
    rets[t] = gup_test_ioctl(p, to_ioctl(cfg.cmd), &a);
  };
  const std::map<std::string, int64_t> c0 = sys->all_counters();
  const long hf0 = host_faults_now();
  const auto w0 = std::chrono::steady_clock::now();
  if (nt == 1) {
    one(0);
  } else {
    std::vector<std::thread> ts;
    for (size_t t = 0; t < nt; t++) ts.emplace_back(one, t);
    for (auto& t : ts) t.join();
  }
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w0).count();
  const long host_faults = host_faults_now() - hf0;
  std::map<std::string, int64_t> grown;
  for (auto& [n, v] : sys->all_counters()) grown[n] = (v - c0.at(n)) / cfg.threads;
  const double floor_us = cfg.floor ? gup_physical_floor_us(p, addr, static_cast<long>(cfg.size / PAGE_SIZE)) : -1;
  for (size_t t = 0; t < nt; t++) {
    const GupTestArgs& a = args[t];
    if (rets[t]) return fail(res, rets[t], fmt::format("ioctl: {}", errno_name(rets[t])));
    GupIteration it;
    it.variant = res->variants[vi];
    it.repeat = r;
    it.thread = static_cast<long>(t);
    it.get_us = a.get_delta_usec;
    it.put_us = a.put_delta_usec;
    it.size_done = a.size;
    it.check_failures = a.check_failures;
    it.wall_us = wall_us;
    it.floor_us = floor_us;
    it.host_faults = host_faults;
    it.stop_ret = a.stop_ret;
    it.folios_by_size = a.folios_by_size;
    for (const char* c : kCounters) it.counters[c] = sys->counter(c) / cfg.threads;
    it.cost_counts = grown;
    if (!cfg.quiet) iteration_lines(cfg, a, slice, r, line);
    res->iters.push_back(it);
  }
  return 0;
}

}  // namespace

int run_gup_bench(const GupBenchConfig& cfg, GupBenchResult* res, const std::function<void(const std::string&)>& line) {
  // Pre-faulting touches a frame per page of the region, plus its memmap and
  // tables: refuse up front what the host cannot hold.
  const uint64_t need = gup_bench_host_need(cfg);
  if (const uint64_t avail = host_memory_available(); avail && need > avail)
    return fail(res, -ENOMEM,
                fmt::format("-m {}: the pre-faulted region needs {} MiB of host memory, the host has {} MiB available",
                            cfg.size >> 20, need >> 20, avail >> 20),
                true);
  int err = 0;
  auto sys = gup_system(cfg, res, &err);
  if (!sys) return err;
  Process* p = sys->new_process("gup_test");
  const long addr = map_region(sys.get(), p, cfg, res);
  if (addr < 0) return static_cast<int>(addr);
  if (int e = prefault_region(sys.get(), p, static_cast<uint64_t>(addr), cfg, res)) return e;
  std::vector<std::pair<std::string, std::string>> variants = cfg.variants;
  if (variants.empty()) variants.push_back({"", ""});
  for (auto& [k, v] : variants) res->variants.push_back(k.empty() ? "" : k + "=" + v);
  const long repeats = is_benchmark(cfg.cmd) ? cfg.repeats : 1;
  for (long r = 0; r < repeats; r++) {
    for (size_t vi = 0; vi < variants.size(); vi++) {  // variants interleaved per repeat
      auto& [k, v] = variants[vi];
      if (!k.empty()) sys->tune(k, v);
      if (variants.size() > 1 && !cfg.quiet) line(fmt::format("# variant {}\n", res->variants[vi]));
      sys->reset_counters();
      if (int e = run_round(sys.get(), p, static_cast<uint64_t>(addr), cfg, vi, r, res, line)) return e;
    }
  }
  p->exit();
  CheckReport rep = sys->check();
  if (!rep.ok()) return fail(res, -EIO, "invariant checker: " + rep.to_string());
  return 0;
}

std::string format_folio_sizes(const std::map<uint64_t, uint64_t>& by_size) {
  std::string s;
  for (auto it = by_size.rbegin(); it != by_size.rend(); ++it) {
    if (!s.empty()) s += ", ";
    s += it->first ? fmt::format("{}kB x {}", it->first >> 10, it->second) : fmt::format("zero page x {}", it->second);
  }
  return s;
}

std::string format_gup_summary(const GupBenchResult& res) {
  // The first repeat of each variant is a warm-up, discarded as bench's
  // suites discard it (with one repeat, nothing is).
  long repeats = 0;
  for (auto& it : res.iters) repeats = std::max(repeats, it.repeat + 1);
  const long warmup = repeats > 1 ? 1 : 0;
  auto samples = [&](const std::string& v, bool put) {
    std::vector<double> s;
    for (auto& it : res.iters)
      if (it.variant == v && it.repeat >= warmup) s.push_back(put ? it.put_us : it.get_us);
    return s;
  };
  // The base: the variant that is its key's default (the v6.18 baseline),
  // or the first.
  size_t base = 0;
  for (size_t i = 0; i < res.variants.size(); i++) {
    const std::string& v = res.variants[i];
    const auto eq = v.find('=');
    if (eq != std::string::npos && v.substr(eq + 1) == tune_default(v.substr(0, eq))) {
      base = i;
      break;
    }
  }
  const std::vector<double> base_g = samples(res.variants[base], false);
  std::string s = fmt::format("# {:<20} {:>5} {:>12} {:>12} {:>8} {:>18} {:>10}\n", "variant", "n", "median get", "median put",
                              "get x", "get x 95% CI", "ns/page");
  for (size_t i = 0; i < res.variants.size(); i++) {
    const std::vector<double> g = samples(res.variants[i], false);
    const RatioCi x = median_ratio_ci(base_g, g);
    const double mg = median_of(g);
    s += fmt::format("# {:<20} {:>5} {:>10.1f}us {:>10.1f}us {:>7.2f}x {:>18} {:>10.2f}\n", res.variants[i], g.size(), mg,
                     median_of(samples(res.variants[i], true)), x.ratio, i == base ? std::string("(base)") : ci_text(x),
                     res.region_pages ? mg * 1000.0 / static_cast<double>(res.region_pages) : 0.0);
  }
  s += fmt::format("# n: samples (one per repeat and thread){}; get x: the median get time of {} over the variant's, "
                   "with its 95% bootstrap interval (paired over the alternated repeats; none below {} samples)\n# {}\n",
                   warmup ? " after the first repeat, a warm-up, discarded" : ", none discarded with one repeat",
                   res.variants[base], kMinCiSamples, significance_rule());
  return s;
}

namespace {
nlohmann::ordered_json folio_sizes_json(const std::map<uint64_t, uint64_t>& by_size) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (auto& [bytes, n] : by_size) j[bytes ? fmt::format("{}kB", bytes >> 10) : "zero_page"] = n;
  return j;
}
}  // namespace

nlohmann::ordered_json gup_result_json(const GupBenchConfig& cfg, const GupBenchResult& res) {
  nlohmann::ordered_json j;
  j["command"] = gup_cmd_name(cfg.cmd);
  j["size"] = cfg.size;
  j["nr_pages_per_call"] = cfg.nr_per_call;
  j["gup_flags"] = cfg.gup_flags;
  j["threads"] = cfg.threads;
  j["folios_by_size"] = res.folios_by_size;
  j["variants"] = res.variants;
  for (auto& it : res.iters) {
    j["iterations"].push_back({{"variant", it.variant}, {"repeat", it.repeat}, {"thread", it.thread},
                               {"get_us", it.get_us}, {"put_us", it.put_us}, {"size", it.size_done},
                               {"check_failures", it.check_failures}, {"counters", it.counters},
                               {"stop_errno", it.stop_ret < 0 ? errno_name(static_cast<int>(it.stop_ret)) : ""},
                               {"folios_by_size", folio_sizes_json(it.folios_by_size)}});
  }
  return j;
}

}  // namespace mmlab::cli
