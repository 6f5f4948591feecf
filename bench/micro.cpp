// Micro-benchmarks (Google Benchmark) of the hot helpers behind the GUP
// numbers: one descent, one PTE-lock round trip, folio_pte_batch over 16 and
// 512 entries, try_grab_folio. Run by the mmlab_microbench target, never by
// the tests.
#include <benchmark/benchmark.h>

#include "gup/gup.h"
#include "mm/kernel.h"
#include "mmlab/system.h"
#include "pgtable/pgtable.h"

namespace mmlab {
namespace {

struct Fixture {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t addr = 0;
  Fixture(const char* mthp_kb) {
    SystemConfig cfg;
    cfg.ram_bytes = 256ull << 20;
    sys = System::create(cfg);
    if (mthp_kb) sys->sysfs_write(std::string("transparent_hugepage/hugepages-") + mthp_kb + "kB/enabled", "always");
    p = sys->new_process("bench");
    long raw = p->mmap(0, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
    p->madvise(addr, PMD_SIZE, MADV_POPULATE_WRITE);
  }
  pte_t* pte() NO_THREAD_SAFETY_ANALYSIS {
    pmd_t* pmd = mm_find_pmd(p->mm(), addr);
    return pte_offset(p->mm()->phys, pmdp_get(pmd), addr);
  }
};

// One full descent from the PGD to the PTE (what legacy pays per page).
void BM_Descent(benchmark::State& state) {
  Fixture f(nullptr);
  Mm* mm = f.p->mm();
  for (auto _ : state) {
    pmd_t* pmd = mm_find_pmd(mm, f.addr);
    benchmark::DoNotOptimize(ptep_get(pte_offset(mm->phys, pmdp_get(pmd), f.addr)));
  }
}
BENCHMARK(BM_Descent);

void BM_PteLockRoundTrip(benchmark::State& state) NO_THREAD_SAFETY_ANALYSIS {
  Fixture f(nullptr);
  Mm* mm = f.p->mm();
  pmd_t* pmd = mm_find_pmd(mm, f.addr);
  for (auto _ : state) {
    SpinLock* ptl;
    pte_t* pte = pte_offset_map_lock(mm, pmd, f.addr, &ptl);
    benchmark::DoNotOptimize(pte);
    ptl->unlock();
  }
}
BENCHMARK(BM_PteLockRoundTrip);

void BM_FolioPteBatch(benchmark::State& state) {
  Fixture f(state.range(0) == 16 ? "64" : "2048");
  if (state.range(0) == 512) f.p->mprotect(f.addr + PAGE_SIZE, PAGE_SIZE, PROT_READ), f.p->mprotect(f.addr + PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE);
  pte_t* pte = f.pte();
  Folio* folio = page_folio(f.p->mm()->phys->pfn_to_page(pte_pfn(ptep_get(pte))));
  for (auto _ : state) benchmark::DoNotOptimize(folio_pte_batch(folio, pte, ptep_get(pte), static_cast<unsigned>(state.range(0))));
}
BENCHMARK(BM_FolioPteBatch)->Arg(16)->Arg(512);

void BM_TryGrabFolio(benchmark::State& state) {
  Fixture f(nullptr);
  Folio* folio = page_folio(f.p->mm()->phys->pfn_to_page(pte_pfn(ptep_get(f.pte()))));
  for (auto _ : state) {
    benchmark::DoNotOptimize(try_grab_folio(folio, 1, FOLL_PIN));
    gup_put_folio(folio, 1, FOLL_PIN);
  }
}
BENCHMARK(BM_TryGrabFolio);

}  // namespace
}  // namespace mmlab
