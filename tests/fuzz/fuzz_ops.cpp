// libFuzzer target over the model's operations: the input bytes choose every
// step of a `mmlab stress` run (tools/mmlab/stress.cpp) with one thread: the
// operation (read, write, pins through every GUP entry point, fork with a
// child's writes and exit, mprotect, MADV_DONTNEED/PAGEOUT/FREE/COLD/
// COLLAPSE, munmap and re-mmap, mremap, variant switches), its region of
// every memory type, its range, flags and bytes. The parent and the
// children it forks are the processes. The properties: the invariant
// checker passes every kCheckEvery operations and after the last, the data
// tracker sees every page as expected, and at the end no frame or
// page-table page is left in use. Any failure aborts, so libFuzzer keeps
// the input.
//
// Speed is coverage: the checker after every operation, and swap devices
// whose every slot it walks, took most of each run (docs/NOTES.md, issue 32);
// the checker, and the loops that only scan frame words, are also left out
// of the coverage instrumentation (coverage-ignore.txt). Every input runs on
// one System (stress::Machine), made at the first: a run leaves it as it
// found it, and one that does not aborts here anyway.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "stress/stress.h"

namespace {

// Each operation reads a few choices of two bytes: inputs beyond this make
// runs long without reaching new states faster.
constexpr size_t kMaxInput = 4096;
// An input of kMaxInput bytes makes a few hundred operations: a few checks
// in the middle still place a broken invariant near the operation that
// broke it, and the last check follows the last operation.
constexpr uint64_t kCheckEvery = 32;

// Measuring a cut side by side without a rebuild: MMLAB_FUZZ_OPS_RAM_MB
// and MMLAB_FUZZ_OPS_CHECK_EVERY override the defaults (unset in CI).
uint64_t env_or(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

mmlab::stress::Config fuzz_config() {
  mmlab::stress::Config cfg;
  cfg.threads = 1;
  cfg.check_every = env_or("MMLAB_FUZZ_OPS_CHECK_EVERY", kCheckEvery);
  cfg.khugepaged_thread = false;
  cfg.watchdog = false;     // libFuzzer's -timeout reports a hang
  cfg.statistics = false;   // nothing here reads them
  cfg.ram = env_or("MMLAB_FUZZ_OPS_RAM_MB", 256) << 20;
  // Small devices: a checker pass is short, and swap fills up within an input.
  cfg.swap_blkdev_bytes = 1ull << 20;
  cfg.swap_file_bytes = 2ull << 20;
  for (const std::string& t : mmlab::stress::type_names())
    if (t != "hugetlb-1G") cfg.types.push_back(t);  // 1 GiB pages do not fit a small System
  return cfg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > kMaxInput) return -1;  // not added to the corpus
  static mmlab::stress::Config cfg = fuzz_config();
  std::string err;
  static std::unique_ptr<mmlab::stress::Machine> machine = mmlab::stress::make_machine(cfg, &err);
  if (!machine) {
    std::fprintf(stderr, "fuzz_ops: set-up failed: %s\n", err.c_str());
    std::abort();
  }
  cfg.choices = std::string_view(reinterpret_cast<const char*>(data), size);
  mmlab::stress::Result res;
  if (!mmlab::stress::run(machine.get(), cfg, &res, &err)) {
    std::fprintf(stderr, "fuzz_ops: set-up failed: %s\n", err.c_str());
    std::abort();
  }
  if (res.ok()) return 0;
  for (const std::string& v : res.violations) std::fprintf(stderr, "violation: %s\n", v.c_str());
  for (const std::string& m : res.mismatches) std::fprintf(stderr, "data mismatch: %s\n", m.c_str());
  if (res.frames_leaked) std::fprintf(stderr, "frames leaked: %llu\n", static_cast<unsigned long long>(res.frames_leaked));
  std::abort();
}
