// Micro-benchmarks (Google Benchmark) of the hot helpers behind the GUP
// numbers: one descent, one PTE-lock round trip, folio_pte_batch over 16 and
// 512 entries, try_grab_folio; and bulk data through the CPU model (fill,
// verifying read, CoW-style copy) beside native memset/memcmp/memcpy of the
// same bytes (compare the bytes_per_second of a Model row with its Native
// row, run in the same process). Run by the mmlab_microbench target, never
// by the tests.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

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

// ---- bulk data: the CPU model against native passes over the same bytes ----

constexpr uint64_t kDataBytes = 64ull << 20;

// A pre-faulted region of 4K pages (range 0) or 2M THPs (range 1).
struct DataFixture {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t addr = 0;
  explicit DataFixture(bool thp) {
    SystemConfig cfg;
    cfg.ram_bytes = kDataBytes + (128ull << 20);
    sys = System::create(cfg);
    sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", thp ? "always" : "never");
    p = sys->new_process("bench");
    long raw = p->mmap(0, kDataBytes + PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    addr = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
    if (thp) p->madvise(addr, kDataBytes, MADV_HUGEPAGE);
    p->madvise(addr, kDataBytes, MADV_POPULATE_WRITE);
    (void)p->fill(addr, 1, kDataBytes).ok();  // touched once before timing
  }
};

std::vector<uint8_t>& native_buffer() {
  static std::vector<uint8_t> buf(kDataBytes, 1);  // touched at construction
  return buf;
}

void BM_ModelFill(benchmark::State& state) {
  DataFixture f(state.range(0));
  uint8_t b = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.p->fill(f.addr, ++b, kDataBytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kDataBytes));
}
BENCHMARK(BM_ModelFill)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_NativeMemset(benchmark::State& state) {
  auto& buf = native_buffer();
  uint8_t b = 0;
  for (auto _ : state) {
    std::memset(buf.data(), ++b, kDataBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kDataBytes));
}
BENCHMARK(BM_NativeMemset)->Unit(benchmark::kMillisecond);

void BM_ModelVerify(benchmark::State& state) {
  DataFixture f(state.range(0));
  int64_t bad = 0;
  uint8_t found = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.p->read_expect(f.addr, 1, kDataBytes, &bad, &found));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kDataBytes));
}
BENCHMARK(BM_ModelVerify)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// memcmp against a 4 KiB block of the expected byte (what the model's plain path does).
void BM_NativeMemcmp(benchmark::State& state) {
  auto& buf = native_buffer();
  std::memset(buf.data(), 1, kDataBytes);
  std::vector<uint8_t> pattern(4096, 1);
  for (auto _ : state) {
    int diff = 0;
    for (uint64_t off = 0; off < kDataBytes; off += pattern.size()) diff |= std::memcmp(buf.data() + off, pattern.data(), pattern.size());
    benchmark::DoNotOptimize(diff);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kDataBytes));
}
BENCHMARK(BM_NativeMemcmp)->Unit(benchmark::kMillisecond);

// Write from a user buffer (memcpy through the page tables) beside native memcpy.
void BM_ModelWrite(benchmark::State& state) {
  DataFixture f(state.range(0));
  auto& src = native_buffer();
  for (auto _ : state) benchmark::DoNotOptimize(f.p->write(f.addr, src.data(), kDataBytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kDataBytes));
}
BENCHMARK(BM_ModelWrite)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_NativeMemcpy(benchmark::State& state) {
  auto& src = native_buffer();
  static std::vector<uint8_t> dst(kDataBytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kDataBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kDataBytes));
}
BENCHMARK(BM_NativeMemcpy)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mmlab
