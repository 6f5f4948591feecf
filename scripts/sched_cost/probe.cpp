// The cost of the schedule points without an explorer (issue 34, acceptance
// 1; docs/RACES.md "Cost without an explorer"): the GUP and fault paths of
// the model, timed in-process, one median per case over `reps` rounds
// after a warm-up. ab.sh builds it against two libmmlab_core.a and runs
// the two binaries alternately (ab.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mmlab/gup.h"
#include "mmlab/system.h"

using namespace mmlab;
using Clock = std::chrono::steady_clock;

static double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 15;
  SystemConfig cfg;
  cfg.ram_bytes = 256ull << 20;
  auto sys = System::create(cfg);
  (void)sys->sysfs_write("transparent_hugepage/enabled", "never");
  Process* p = sys->new_process("P");
  const uint64_t len = 4ull << 20;
  const uint64_t a = static_cast<uint64_t>(p->mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  std::vector<double> fault, pin1, pin512, get512, dontneed, forkcow;
  for (int r = 0; r < reps + 1; r++) {
    // fault path: 1,024 anonymous 4K faults through the CPU model
    auto t0 = Clock::now();
    (void)p->fill(a, 1, len);
    const double tf = ns_since(t0);
    // GUP-fast: 1,024 single-page pins (and unpins)
    t0 = Clock::now();
    for (int i = 0; i < 1024; i++) {
      GupPages g;
      (void)gup(p, GupEntry::kPinUserPagesFast, a + static_cast<uint64_t>(i) * 4096, 1, foll::WRITE, &g);
    }
    const double tp1 = ns_since(t0);
    // GUP-fast: 512 pages in one call, 16 times
    t0 = Clock::now();
    for (int i = 0; i < 16; i++) {
      GupPages g;
      (void)gup(p, GupEntry::kPinUserPagesFast, a, 512, foll::WRITE, &g);
    }
    const double tp512 = ns_since(t0);
    // slow GUP (get_user_pages): 512 pages, 16 times
    t0 = Clock::now();
    for (int i = 0; i < 16; i++) {
      GupPages g;
      (void)gup(p, GupEntry::kGetUserPages, a, 512, foll::WRITE, &g);
    }
    const double tg512 = ns_since(t0);
    // fork, CoW write of every page, child exit
    t0 = Clock::now();
    Process* c = p->fork("C");
    (void)p->fill(a, 2, len);
    c->exit();
    sys->release_exited();
    const double tfc = ns_since(t0);
    // zap: MADV_DONTNEED of the whole region
    t0 = Clock::now();
    (void)p->madvise(a, len, MADV_DONTNEED);
    const double tz = ns_since(t0);
    if (r == 0) continue;  // warm-up
    fault.push_back(tf);
    pin1.push_back(tp1);
    pin512.push_back(tp512);
    get512.push_back(tg512);
    forkcow.push_back(tfc);
    dontneed.push_back(tz);
  }
  std::printf("fault4M %.0f\npin_fast_1x1024 %.0f\npin_fast_512x16 %.0f\ngup_512x16 %.0f\nfork_cow_4M %.0f\ndontneed_4M %.0f\n",
              median(fault), median(pin1), median(pin512), median(get512), median(forkcow), median(dontneed));
  p->exit();
  return sys->check().ok() ? 0 : 1;
}
