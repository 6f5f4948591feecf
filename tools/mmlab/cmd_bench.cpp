// `mmlab bench`: mmlab's main job. For now: the foundation's fault-in
// benchmark (1 GiB touched with 4K, 64K and 2M folios, each variant
// interleaved per repeat) and the page-table memory it costs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "fmt/format.h"
#include "mmlab/system.h"

namespace mmlab::cli {
namespace {

struct BenchOptions {
  bool quick = false;
  uint64_t size_mb = 1024;
  int repeats = 5;
};

struct FolioCase {
  const char* name;
  const char* sysfs_dir;  // hugepages-<N>kB to set to always, or nullptr for base pages
};

const FolioCase kCases[] = {{"4K", nullptr}, {"64K", "hugepages-64kB"}, {"2M", "hugepages-2048kB"}};

struct Sample {
  double seconds;
  long pgtables_bytes;
  int64_t faults;
};

// Touch every page of a fresh mapping once, as a user program would.
Sample fault_in_once(const FolioCase& c, uint64_t size, int* err) {
  SystemConfig cfg;
  cfg.ram_bytes = size + (256ull << 20);
  cfg.prefault = true;  // do not time the host's own first-touch faults of the frame store
  auto sys = System::create(cfg, err);
  if (!sys) return {};
  sys->sysfs_write("transparent_hugepage/enabled", "madvise");
  if (c.sysfs_dir) sys->sysfs_write(std::string("transparent_hugepage/") + c.sysfs_dir + "/enabled", "always");
  if (c.sysfs_dir && std::string(c.sysfs_dir) != "hugepages-2048kB")
    sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "never");
  Process* p = sys->new_process("bench");
  long raw = p->mmap(0, size + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (raw < 0) {
    *err = static_cast<int>(raw);
    return {};
  }
  uint64_t addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
  if (c.sysfs_dir) (void)p->madvise(addr, size, MADV_HUGEPAGE);
  int64_t faults0 = sys->vmstat("pgfault");
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < size; off += PAGE_SIZE) {
    uint8_t b = 1;
    if (!p->write(addr + off, &b, 1).ok()) {
      *err = -EFAULT;
      return {};
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  Sample s{std::chrono::duration<double>(t1 - t0).count(), p->pgtables_bytes(), sys->vmstat("pgfault") - faults0};
  p->exit();
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int run_bench(const BenchOptions& o) {
#if defined(MMLAB_INSTRUMENTED_BUILD)
  std::fprintf(stderr, "mmlab bench: this is a debug or sanitizer build; timings are not meaningful\n");
#endif
  uint64_t size = (o.quick ? std::min<uint64_t>(o.size_mb, 256) : o.size_mb) << 20;
  int repeats = o.quick ? std::min(o.repeats, 3) : o.repeats;
  std::vector<std::vector<Sample>> samples(std::size(kCases));
  for (int r = 0; r < repeats; r++) {
    for (size_t i = 0; i < std::size(kCases); i++) {  // variants interleaved per repeat
      int err = 0;
      Sample s = fault_in_once(kCases[i], size, &err);
      if (err) {
        std::fprintf(stderr, "mmlab bench: %s failed: %d\n", kCases[i].name, err);
        return 1;
      }
      samples[i].push_back(s);
    }
  }
  fmt::print("fault-in of {} MiB, first touch of every page, median of {} runs (per-frame metadata: {} bytes)\n",
             size >> 20, repeats, 64);
  fmt::print("{:<6} {:>12} {:>10} {:>10} {:>14} {:>14}\n", "folio", "median ms", "ns/page", "vs 4K", "faults",
             "page tables");
  double base = 0;
  for (size_t i = 0; i < std::size(kCases); i++) {
    std::vector<double> t;
    for (auto& s : samples[i]) t.push_back(s.seconds);
    double m = median(t);
    if (i == 0) base = m;
    fmt::print("{:<6} {:>12.2f} {:>10.1f} {:>9.2f}x {:>14} {:>11} KiB\n", kCases[i].name, m * 1e3,
               m * 1e9 / static_cast<double>(size / PAGE_SIZE), base / m, samples[i].back().faults,
               samples[i].back().pgtables_bytes / 1024);
  }
  return 0;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* o = new BenchOptions;
  auto* sub = app.add_subcommand("bench", "run the benchmark report (mmlab's main job)");
  sub->add_flag("--quick", o->quick, "a run under a minute");
  sub->add_option("--size-mb", o->size_mb, "region size in MiB")->check(CLI::Range(4, 65536));
  sub->add_option("--repeats", o->repeats, "repeats per variant")->check(CLI::Range(1, 1000));
  register_action(sub, [o] { return run_bench(*o); });
}

}  // namespace mmlab::cli
