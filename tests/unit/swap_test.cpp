// Swap (MADV_PAGEOUT, swap-in, swap entries in zap and fork), soft-dirty
// clearing (clear_refs 4), and folio splitting by the deferred-split
// shrinker. The memory types follow cow.c's:
// BASE-SWAP, THP-PMD-SWAP, THP-PTE-SWAP, THP-SINGLE-SWAP.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "fault/fault.h"
#include "mm/huge_mm.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "sync/sched.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

constexpr uint64_t kSwapBytes = 64ull << 20;
constexpr int MAP_LOCKED_UAPI = 0x2000;  // MAP_LOCKED (not in the public header)

// A directed run's own fixture: empty, the test's System is the state.
struct SwapExitRun {};

class SwapFixture : public MmTest {
 protected:
  Kernel* k() { return sys->kernel(); }
  PhysMem* phys() { return k()->phys.get(); }
  long swapents(Process* q) { return q->mm()->get_mm_counter(MM_SWAPENTS); }
  long anon_pages(Process* q) { return q->mm()->get_mm_counter(MM_ANONPAGES); }
  // The page a present PTE/PMD maps at addr (the exact subpage), or nullptr.
  Page* page_at(Process* q, uint64_t addr) {
    PteDumpEntry e = entry_at(q, addr);
    if (e.level == 0 || e.swap || e.folio_order < 0) return nullptr;
    pfn_t pfn = e.pfn + (e.level == 2 ? ((addr & ~PMD_MASK) >> PAGE_SHIFT) : 0);
    return phys()->pfn_to_page(pfn);
  }
  Folio* folio_at(Process* q, uint64_t addr) {
    Page* pg = page_at(q, addr);
    return pg ? page_folio(pg) : nullptr;
  }
  swp_entry_t swap_entry_at(Process* q, uint64_t addr) { return pte_to_swp_entry(pte_t{entry_at(q, addr).bits}); }
  // Every PTE of [a, a+len) is a swap entry; how many carry the exclusive marker.
  long count_swap_ptes(Process* q, uint64_t a, uint64_t len, long* exclusive = nullptr) {
    long n = 0, x = 0;
    for (auto& e : q->pagetable_dump(a, a + len)) {
      if (!e.swap) continue;
      n++;
      if (e.bits & _PAGE_SWP_EXCLUSIVE) x++;
    }
    if (exclusive) *exclusive = x;
    return n;
  }
  // A private anonymous mapping with one base page, filled with byte (BASE).
  uint64_t map_base_page(uint8_t byte) {
    long a = p->mmap(0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    EXPECT_GT(a, 0);
    EXPECT_EQ(p->madvise(static_cast<uint64_t>(a), PAGE_SIZE, MADV_NOHUGEPAGE), 0);
    EXPECT_TRUE(p->fill(static_cast<uint64_t>(a), byte, PAGE_SIZE).ok());
    return static_cast<uint64_t>(a);
  }
  // A PMD-mapped THP filled with a byte per page (THP-PMD).
  uint64_t map_pmd_thp() {
    uint64_t a = map_aligned(PMD_SIZE);
    EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
    fill_pattern(a, HPAGE_PMD_NR);
    EXPECT_EQ(entry_at(a).level, 2);
    return a;
  }
  // A 64K mTHP (PTE-mapped order 4) filled with a byte per page.
  uint64_t map_mthp_64k() {
    enable_order_kb(64);
    uint64_t a = map_aligned(k64K, k64K);
    fill_pattern(a, 16);
    EXPECT_EQ(order_at(a), 4);
    return a;
  }
  // A base page of byte swapped out, shared with a fork child, swapped in
  // by the parent, which maps it from the swap cache; the child then exits
  // while another thread holds the folio lock, so its zap could not take
  // the folio out of the swap cache: the slot is the cache's alone, the
  // folio mapped by the parent only (legitimate). nullptr on failure.
  Folio* swap_cache_folio_an_exit_could_not_lock(uint8_t byte, uint64_t* addr) {
    EXPECT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
    const uint64_t a = map_base_page(byte);
    EXPECT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
    Process* child = p->fork("child");
    if (!child) return nullptr;
    expect_bytes(p, a, PAGE_SIZE, byte);
    Folio* folio = folio_at(p, a);
    if (!folio || !folio_test_swapcache(folio)) return nullptr;
    const swp_entry_t entry = folio_swap_entry(folio);
    // Another thread (H) holds the folio lock across the exit (its own lock
    // context: the exit takes the mmap_lock, which ranks above it): a
    // directed schedule parks H at a label after its folio_lock, runs the
    // exit (E) to its end, then lets H unlock.
    explore::Race<SwapExitRun> race;
    race.thread("H", [folio](SwapExitRun&) {
      folio_lock(folio);
      sched::point("test.folio_locked", sched::Op::kLabel, {folio, sched::ObjKind::kLabel, 0});
      folio_unlock(folio);
    });
    race.thread("E", [child](SwapExitRun&) { child->exit(); });
    explore::RunResult r = race.replay_directed("H@test.folio_locked E H");
    EXPECT_EQ(r.outcome, explore::Outcome::kClean) << r.summary() << "\n" << race.explain(r);
    if (!folio_test_swapcache(folio)) return nullptr;
    EXPECT_EQ(swap_map_of(k(), entry), static_cast<unsigned>(SWAP_HAS_CACHE));
    CheckReport rep = sys->check();
    EXPECT_TRUE(rep.ok()) << rep.to_string();  // mapped: fine
    *addr = a;
    return folio;
  }
  static uint8_t pattern(unsigned i) { return static_cast<uint8_t>(0x40 + (i % 0x80)); }
  void fill_pattern(uint64_t a, unsigned pages) {
    for (unsigned i = 0; i < pages; i++) ASSERT_TRUE(p->fill(a + i * PAGE_SIZE, pattern(i), PAGE_SIZE).ok());
  }
  void expect_pattern(Process* q, uint64_t a, unsigned first, unsigned pages) {
    for (unsigned i = first; i < first + pages; i++) expect_bytes(q, a + i * PAGE_SIZE, PAGE_SIZE, pattern(i));
  }
};

class SwapTest : public SwapFixture {};
class SoftDirtyTest : public SwapFixture {};
class SplitTest : public SwapFixture {};
class ColdTest : public SwapFixture {};

// MADV_FREE: lazy-free folios and their reclaim.
class LazyFreeTest : public SwapFixture {
 protected:
  static bool lazyfree(const Folio* f) { return folio_test_anon(f) && !folio_test_swapbacked(f); }
  // `pages` base pages (no THP), each filled with its pattern byte.
  uint64_t map_base_pages(unsigned pages) {
    long a = p->mmap(0, pages * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    EXPECT_GT(a, 0);
    EXPECT_EQ(p->madvise(static_cast<uint64_t>(a), pages * PAGE_SIZE, MADV_NOHUGEPAGE), 0);
    fill_pattern(static_cast<uint64_t>(a), pages);
    return static_cast<uint64_t>(a);
  }
  // The sum of a field of /proc/PID/smaps over every VMA, in kB.
  long smaps_kb(const std::string& field) {
    const std::string text = p->smaps(), key = field + ":";
    long sum = 0;
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1))
      sum += std::stol(text.substr(at + key.size()));
    return sum;
  }
};

// ============================================================================
// SwapTest
// ============================================================================

TEST_F(SwapTest, AddSwapNeedsAHeaderAndASlot) {
  EXPECT_EQ(sys->add_swap(0), -EINVAL);
  EXPECT_EQ(sys->add_swap(PAGE_SIZE), -EINVAL);
  EXPECT_EQ(sys->add_swap(2 * PAGE_SIZE), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
}

// Without swap a small folio cannot be reclaimed: folio_alloc_swap fails
// and shrink_folio_list activates it.
TEST_F(SwapTest, PageoutWithoutSwapActivatesSmallFolio) {
  uint64_t a = map_base_page(0x5a);
  ASSERT_FALSE(p->page_info(a).active);
  EXPECT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  PteDumpEntry e = entry_at(a);
  EXPECT_EQ(e.level, 1);
  EXPECT_FALSE(e.swap);
  PageInfo pi = p->page_info(a);
  EXPECT_TRUE(pi.active);
  EXPECT_TRUE(pi.lru);
  EXPECT_EQ(p->rss_anon(), 4096);
  EXPECT_EQ(sys->vmstat("pswpout"), 0);
  expect_bytes(p, a, PAGE_SIZE, 0x5a);
}

// Without swap a PMD THP still goes through reclaim: folio_alloc_swap fails,
// the folio is split (its PMD first), the fallback is counted, and the pages
// stay mapped by PTEs, activated.
TEST_F(SwapTest, PageoutWithoutSwapSplitsPmdThp) {
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  EXPECT_EQ(order_at(a), 0);
  EXPECT_EQ(order_at(a + PMD_SIZE - PAGE_SIZE), 0);
  EXPECT_EQ(sys->vmstat("thp_swpout_fallback"), 1);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 1);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "swpout_fallback"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(sys->vmstat("pswpout"), 0);
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE), 0);
  EXPECT_TRUE(p->page_info(a).active);
  EXPECT_TRUE(p->page_info(a + PMD_SIZE - PAGE_SIZE).active);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
}

// The same for an mTHP: its size's swpout_fallback and split; the
// thp_swpout_fallback event is for PMD-sized folios only.
TEST_F(SwapTest, PageoutWithoutSwapSplitsMthp) {
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a, k64K, MADV_PAGEOUT), 0);
  EXPECT_EQ(order_at(a), 0);
  EXPECT_EQ(order_at(a + k64K - PAGE_SIZE), 0);
  EXPECT_EQ(sys->mthp_stat(4, "swpout_fallback"), 1);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 1);
  EXPECT_EQ(sys->vmstat("thp_swpout_fallback"), 0);
  expect_pattern(p, a, 0, 16);
}

// A folio already partially mapped (on the deferred list) is split before
// swap space is looked for, here by the walk (the range maps only part of
// it): that split is no swap-out fallback.
TEST_F(SwapTest, PageoutOfPartiallyMappedFolioCountsNoFallback) {
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a + k64K / 2, k64K / 2, MADV_DONTNEED), 0);
  ASSERT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 1);
  ASSERT_EQ(p->madvise(a, k64K / 2, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 1);
  EXPECT_EQ(sys->mthp_stat(4, "swpout_fallback"), 0);
  EXPECT_EQ(order_at(a), 0);
  EXPECT_EQ(entry_at(a + k64K / 2).level, 0);
  expect_pattern(p, a, 0, 8);
}

// A swap file never gives a large folio its slots whole
// (cluster_alloc_swap_entry needs SWP_BLKDEV for order > 0): the THP is
// split and its pages go out one by one.
TEST_F(SwapTest, SwapFileSplitsPmdThpBeforeSwapOut) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kFile), 0);
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE), 512);
  EXPECT_EQ(sys->vmstat("thp_swpout"), 0);
  EXPECT_EQ(sys->vmstat("thp_swpout_fallback"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "swpout"), 0);
  EXPECT_EQ(sys->mthp_stat(9, "swpout_fallback"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(sys->vmstat("pswpout"), 512);
  EXPECT_EQ(p->rss_anon(), 0);
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
}

TEST_F(SwapTest, SwapFileSplitsMthpBeforeSwapOut) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kFile), 0);
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a, k64K, MADV_PAGEOUT), 0);
  EXPECT_EQ(count_swap_ptes(p, a, k64K), 16);
  EXPECT_EQ(sys->mthp_stat(4, "swpout"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "swpout_fallback"), 1);
  EXPECT_EQ(sys->vmstat("pswpout"), 16);
  expect_pattern(p, a, 0, 16);
}

// The devices are tried in order: a swap file refuses the large folio, the
// block device after it takes it whole.
TEST_F(SwapTest, BlockDeviceAfterSwapFileTakesLargeFolioWhole) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kFile), 0);
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kBlkdev), 0);
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->vmstat("thp_swpout"), 1);
  EXPECT_EQ(sys->vmstat("thp_swpout_fallback"), 0);
  EXPECT_EQ(swp_type(swap_entry_at(p, a)), 1u);
  // A small folio still goes to the first device.
  uint64_t b = map_base_page(0x33);
  ASSERT_EQ(p->madvise(b, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(swp_type(swap_entry_at(p, b)), 0u);
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
  expect_bytes(p, b, PAGE_SIZE, 0x33);
}

// BASE-SWAP: a swap PTE with the exclusive marker; the read brings the data
// back as an exclusive, writable page (swap-in of an exclusive entry).
TEST_F(SwapTest, BasePageOutAndIn) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_base_page(0x5a);
  uint64_t free_before = sys->nr_free_pages();
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  PteDumpEntry e = entry_at(a);
  ASSERT_EQ(e.level, 1);
  ASSERT_TRUE(e.swap);
  EXPECT_TRUE(e.bits & _PAGE_SWP_EXCLUSIVE);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(swapents(p), 1);
  EXPECT_EQ(sys->vmstat("pswpout"), 1);
  EXPECT_EQ(swap_inuse_pages(k()), 1u);
  EXPECT_EQ(swap_map_of(k(), swap_entry_at(p, a)), 1u);  // the PTE's reference; no swap cache left
  EXPECT_EQ(sys->nr_free_pages(), free_before + 1);      // the folio itself was freed

  expect_bytes(p, a, PAGE_SIZE, 0x5a);
  EXPECT_EQ(sys->vmstat("pswpin"), 1);
  EXPECT_EQ(sys->vmstat("pgmajfault"), 1);
  e = entry_at(a);
  EXPECT_FALSE(e.swap);
  EXPECT_TRUE(e.bits & _PAGE_RW);  // exclusive: mapped writable even on a read fault
  Page* pg = page_at(p, a);
  ASSERT_TRUE(pg);
  EXPECT_TRUE(PageAnonExclusive(pg));
  EXPECT_FALSE(folio_test_swapcache(page_folio(pg)));
  EXPECT_EQ(p->rss_anon(), 4096);
  EXPECT_EQ(swapents(p), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  // Writing needs no further fault.
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a, 0x6b, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_reuse") + sys->counter("fault.wp_copy"), 0);
  expect_bytes(p, a, PAGE_SIZE, 0x6b);
}

TEST_F(SwapTest, WriteFaultOnExclusiveSwapEntryMapsWritableDirty) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_base_page(0x21);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  sys->reset_counters();
  uint8_t b = 0x77;
  ASSERT_TRUE(p->write(a + 100, &b, 1).ok());
  PteDumpEntry e = entry_at(a);
  EXPECT_TRUE((e.bits & (_PAGE_RW | _PAGE_DIRTY)) == (_PAGE_RW | _PAGE_DIRTY));
  EXPECT_EQ(sys->counter("fault.wp_reuse") + sys->counter("fault.wp_copy"), 0);
  expect_bytes(p, a, 100, 0x21);
  expect_bytes(p, a + 100, 1, 0x77);
  expect_bytes(p, a + 101, PAGE_SIZE - 101, 0x21);
}

TEST_F(SwapTest, ZapOfSwapEntriesFreesTheSlots) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  long r = p->mmap(0, 8 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(r, 0);
  auto a = static_cast<uint64_t>(r);
  ASSERT_EQ(p->madvise(a, 8 * PAGE_SIZE, MADV_NOHUGEPAGE), 0);
  fill_pattern(a, 8);
  ASSERT_EQ(p->madvise(a, 8 * PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(count_swap_ptes(p, a, 8 * PAGE_SIZE), 8);
  EXPECT_EQ(swap_inuse_pages(k()), 8u);
  ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_DONTNEED), 0);
  EXPECT_EQ(swapents(p), 4);
  EXPECT_EQ(swap_inuse_pages(k()), 4u);
  expect_bytes(p, a, 4 * PAGE_SIZE, 0);  // zero pages now
  expect_pattern(p, a, 4, 4);
  ASSERT_EQ(p->munmap(a, 8 * PAGE_SIZE), 0);
  EXPECT_EQ(swapents(p), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
}

// THP-PMD-SWAP: with room for 512 contiguous slots the THP is swapped out
// whole (its PMD split into 512 swap PTEs), then read back page by page.
TEST_F(SwapTest, PmdThpSwappedOutWhole) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_pmd_thp();
  uint64_t free_before = sys->nr_free_pages();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  long excl = 0;
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE, &excl), 512);
  EXPECT_EQ(excl, 512);  // the head was exclusive, so every subpage was
  EXPECT_EQ(sys->vmstat("thp_swpout"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "swpout"), 1);
  EXPECT_EQ(sys->vmstat("thp_swpout_fallback"), 0);
  EXPECT_EQ(sys->vmstat("pswpout"), 512);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(swapents(p), 512);
  EXPECT_EQ(sys->mthp_stat(9, "nr_anon"), 0);
  EXPECT_EQ(sys->vmstat("nr_anon_transparent_hugepages"), 0);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 512);
  // Consecutive, naturally aligned slots.
  uint64_t off0 = swp_offset(swap_entry_at(p, a));
  EXPECT_EQ(off0 % 512, 0u);
  EXPECT_EQ(swp_offset(swap_entry_at(p, a + 511 * PAGE_SIZE)), off0 + 511);

  expect_pattern(p, a, 0, HPAGE_PMD_NR);
  EXPECT_EQ(sys->vmstat("pswpin"), 512);
  EXPECT_EQ(order_at(a), 0);  // swap-in is order 0
  EXPECT_EQ(swapents(p), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
}

// Without 512 contiguous free slots, reclaim splits the THP and swaps the
// pages one by one (thp_swpout_fallback); what does not fit stays mapped.
TEST_F(SwapTest, PmdThpFallsBackToPagesWithoutContiguousRoom) {
  ASSERT_EQ(sys->add_swap(256 * PAGE_SIZE, SwapKind::kZram), 0);  // 255 usable slots
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->vmstat("thp_swpout_fallback"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "swpout_fallback"), 1);
  EXPECT_EQ(sys->vmstat("thp_swpout"), 0);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE), 255);
  EXPECT_EQ(sys->vmstat("pswpout"), 255);
  EXPECT_EQ(swapents(p), 255);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(257 * PAGE_SIZE));
  EXPECT_EQ(order_at(a + 511 * PAGE_SIZE), 0);
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
}

// MADV_PAGEOUT of half a PMD THP splits the folio (split_folio on the PMD
// path) and reclaims only the advised half.
TEST_F(SwapTest, PageoutOfHalfAPmdThpSplitsIt) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE / 2, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(sys->vmstat("thp_swpout"), 0);
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE), 256);
  EXPECT_EQ(swapents(p), 256);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE / 2));
  EXPECT_EQ(order_at(a + PMD_SIZE / 2), 0);
  EXPECT_TRUE(entry_at(a + PMD_SIZE / 2).bits & _PAGE_RW);
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
}

// A swap entry in a VMA made read-only: the swap-in maps it read-only but
// exclusive, so mprotect(RW) can make it writable again without a fault.
TEST_F(SwapTest, SwapInUnderProtRead) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_base_page(0x24);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ), 0);
  EXPECT_TRUE(entry_at(a).swap);  // mprotect leaves swap entries alone
  expect_bytes(p, a, PAGE_SIZE, 0x24);
  EXPECT_FALSE(entry_at(a).bits & _PAGE_RW);
  EXPECT_TRUE(PageAnonExclusive(page_at(p, a)));
  uint8_t b = 1;
  EXPECT_EQ(p->write(a, &b, 1).sig, Signal::kSigsegv);
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_RW);
}

// THP-PTE-SWAP with the PMD size: the PMD mapping split by mprotect, the
// folio (still order 9, PTE-mapped) is swapped out whole.
TEST_F(SwapTest, PteMappedPmdThpSwappedOutWhole) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->mprotect(a + PAGE_SIZE, PAGE_SIZE, PROT_READ), 0);
  ASSERT_EQ(p->mprotect(a + PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(entry_at(a).level, 1);
  ASSERT_EQ(order_at(a), 9);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  long excl = 0;
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE, &excl), 512);
  EXPECT_EQ(excl, 512);
  EXPECT_EQ(sys->vmstat("thp_swpout"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split_deferred"), 0);  // unmapped in one go, never partially
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
}

// THP-PTE-SWAP with a 64K mTHP on zram: freed at swap-out, and swapped in
// whole (alloc_swap_folio(): SWP_SYNCHRONOUS_IO, count 1, offset aligned).
TEST_F(SwapTest, MthpSwapOutAndIn) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a, k64K, MADV_PAGEOUT), 0);
  long excl = 0;
  EXPECT_EQ(count_swap_ptes(p, a, k64K, &excl), 16);
  EXPECT_EQ(excl, 16);
  EXPECT_EQ(sys->mthp_stat(4, "swpout"), 1);
  EXPECT_EQ(sys->mthp_stat(4, "swpout_fallback"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split_deferred"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "nr_anon"), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(swapents(p), 16);
  EXPECT_EQ(swp_offset(swap_entry_at(p, a)) % 16, 0u);
  expect_pattern(p, a, 0, 16);
  EXPECT_EQ(sys->vmstat("pswpin"), 16);
  EXPECT_EQ(sys->mthp_stat(4, "swpin"), 1);
  EXPECT_EQ(order_at(a + 3 * PAGE_SIZE), 4);
  EXPECT_EQ(entry_at(a + 15 * PAGE_SIZE).level, 1);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(k64K));
  EXPECT_EQ(swapents(p), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
}

// THP-SINGLE-SWAP: one PTE left of a 64K mTHP; MADV_PAGEOUT of that page
// splits the folio first, then swaps the page.
TEST_F(SwapTest, SinglePteOfMthpSwapped) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a + PAGE_SIZE, k64K - PAGE_SIZE, MADV_DONTNEED), 0);
  ASSERT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 1);
  uint64_t free_before = sys->nr_free_pages();
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 1);
  EXPECT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 0);
  EXPECT_EQ(count_swap_ptes(p, a, k64K), 1);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_SWP_EXCLUSIVE);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 16);
  EXPECT_EQ(p->rss_anon(), 0);
  expect_pattern(p, a, 0, 1);
}

// THP-SINGLE-SWAP with the PMD size.
TEST_F(SwapTest, SinglePteOfPmdThpSwapped) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a + PAGE_SIZE, PMD_SIZE - PAGE_SIZE, MADV_DONTNEED), 0);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(count_swap_ptes(p, a, PMD_SIZE), 1);
  EXPECT_EQ(swapents(p), 1);
  expect_pattern(p, a, 0, 1);
}

// fork after pageout: both processes share the slot, the parent's exclusive
// marker is gone; the parent's swap-in maps the page shared (read-only, in
// the swap cache), its write copies; the child still reads the old data.
TEST_F(SwapTest, ForkSharesSwapEntry) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_base_page(0x31);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  swp_entry_t entry = swap_entry_at(p, a);
  EXPECT_FALSE(entry_at(p, a).bits & _PAGE_SWP_EXCLUSIVE);
  EXPECT_TRUE(entry_at(child, a).swap);
  EXPECT_FALSE(entry_at(child, a).bits & _PAGE_SWP_EXCLUSIVE);
  EXPECT_EQ(swap_entry_at(child, a).val, entry.val);
  EXPECT_EQ(swap_map_of(k(), entry), 2u);
  EXPECT_EQ(swapents(p), 1);
  EXPECT_EQ(swapents(child), 1);

  // Parent reads: the page comes back shared and stays in the swap cache.
  expect_bytes(p, a, PAGE_SIZE, 0x31);
  Page* pg = page_at(p, a);
  ASSERT_TRUE(pg);
  EXPECT_FALSE(entry_at(p, a).bits & _PAGE_RW);
  EXPECT_FALSE(PageAnonExclusive(pg));
  EXPECT_TRUE(folio_test_swapcache(page_folio(pg)));
  EXPECT_EQ(swap_map_of(k(), entry), 1u | SWAP_HAS_CACHE);
  ASSERT_TRUE(sys->check().ok()) << sys->check().to_string();

  // Parent writes: the swap cache still serves the child, so it copies.
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a, 0x32, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_copy"), 1);
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 0);
  expect_bytes(p, a, PAGE_SIZE, 0x32);

  // Child reads the old data: it finds the folio in the swap cache, which
  // is its alone now, so it maps it exclusive.
  uint64_t majfault = static_cast<uint64_t>(sys->vmstat("pgmajfault"));
  expect_bytes(child, a, PAGE_SIZE, 0x31);
  EXPECT_EQ(static_cast<uint64_t>(sys->vmstat("pgmajfault")), majfault);  // no device read
  Page* cpg = page_at(child, a);
  ASSERT_TRUE(cpg);
  EXPECT_TRUE(PageAnonExclusive(cpg));
  EXPECT_FALSE(folio_test_swapcache(page_folio(cpg)));
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  EXPECT_EQ(swapents(child), 0);
  // A shared folio is not paged out (mapcount != nr_pages).
  Process* child2 = child->fork("grandchild");
  ASSERT_TRUE(child2);
  ASSERT_EQ(child->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_FALSE(entry_at(child, a).swap);
  EXPECT_FALSE(entry_at(child2, a).swap);
}

// Zapping the last swap PTE of a slot whose folio is still in the swap cache
// (mapped by the other process) frees the swap cache.
TEST_F(SwapTest, ChildExitReleasesSharedSwapCache) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_base_page(0x41);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  expect_bytes(p, a, PAGE_SIZE, 0x41);
  ASSERT_TRUE(folio_test_swapcache(folio_at(p, a)));
  child->exit();
  EXPECT_FALSE(folio_test_swapcache(folio_at(p, a)));
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  // The parent's page was not exclusive, but with nobody else holding the
  // folio the write reuses it.
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a, 0x42, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 1);
  EXPECT_EQ(sys->counter("fault.wp_copy"), 0);
}

// The child's exit drops the last swap PTE of the slot while another thread
// holds the folio lock (a GUP release, a reclaim or collapse scan), so its
// free_swap_and_cache() trylock fails and the folio stays in the swap cache,
// mapped by the parent alone, the slot used by the cache only: legitimate in
// the kernel too. When the parent then unmaps it, the kernel's mmu_gather
// release (free_pages_and_swap_cache -> free_swap_cache) drops it from the
// swap cache; the model's zap used to put the reference only, leaving an
// unmapped swap-cache folio nobody would ever free (the checker's "orphaned
// swap-cache folio", once in a 4-thread mmlab stress run).
TEST_F(SwapTest, ZapFreesTheSwapCacheAnExitCouldNotLock) {
  uint64_t a = 0;
  Folio* folio = swap_cache_folio_an_exit_could_not_lock(0x43, &a);
  ASSERT_TRUE(folio);
  folio_get(folio);  // to look at it after the unmap
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_DONTNEED), 0);
  EXPECT_FALSE(folio_test_swapcache(folio));
  EXPECT_EQ(folio_ref_count(folio), 1);
  folio_put(folio);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  CheckReport rep = sys->check();
  EXPECT_TRUE(rep.ok()) << rep.to_string();
}

// The same folio, but the parent writes it while it is pinned: the write
// copies (the pin forbids reuse), and the copy was its last mapping. The
// kernel's wp_page_copy lets it out of the swap cache (free_swap_cache);
// the model's used to keep it there, unmapped and unswapped, after the unpin.
TEST_F(SwapTest, CowOfAPinnedPageFreesTheSwapCacheAnExitCouldNotLock) {
  uint64_t a = 0;
  Folio* folio = swap_cache_folio_an_exit_could_not_lock(0x44, &a);
  ASSERT_TRUE(folio);
  p->mm()->set_flag(MMF_HAS_PINNED);
  folio_ref_add(folio, GUP_PIN_COUNTING_BIAS);  // what pin_user_pages() adds to a small folio
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a, 0x45, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_copy"), 1);
  EXPECT_FALSE(folio_test_swapcache(folio));
  EXPECT_EQ(folio_ref_count(folio), GUP_PIN_COUNTING_BIAS);
  folio_put_refs(folio, GUP_PIN_COUNTING_BIAS);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  expect_bytes(p, a, PAGE_SIZE, 0x45);
  CheckReport rep = sys->check();
  EXPECT_TRUE(rep.ok()) << rep.to_string();
}

// A maybe-pinned folio is not swapped out (shrink_folio_list keeps it).
TEST_F(SwapTest, PinnedPageIsNotSwappedOut) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_base_page(0x51);
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(f);
  p->mm()->set_flag(MMF_HAS_PINNED);
  folio_ref_add(f, GUP_PIN_COUNTING_BIAS);  // what pin_user_pages() adds to a small folio
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  PteDumpEntry e = entry_at(a);
  EXPECT_FALSE(e.swap);
  EXPECT_EQ(e.level, 1);
  EXPECT_TRUE(PageAnonExclusive(page_at(p, a)));
  EXPECT_EQ(sys->vmstat("pswpout"), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  EXPECT_TRUE(folio_test_lru(f));  // put back
  folio_put_refs(f, GUP_PIN_COUNTING_BIAS);
  expect_bytes(p, a, PAGE_SIZE, 0x51);
}

// Soft-dirty goes into the swap PTE and back; clear_refs clears it in swap
// PTEs too; with soft-dirty tracking on, a clean swap-in is mapped read-only.
TEST_F(SwapTest, SoftDirtyCarriedThroughSwap) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_base_page(0x61);
  ASSERT_TRUE(entry_at(a).bits & _PAGE_SOFT_DIRTY);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_SWP_SOFT_DIRTY);
  p->clear_soft_dirty();
  EXPECT_FALSE(entry_at(a).bits & _PAGE_SWP_SOFT_DIRTY);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_SWP_EXCLUSIVE);
  // Read: exclusive, but soft-dirty tracking wants the next write to fault.
  expect_bytes(p, a, PAGE_SIZE, 0x61);
  PteDumpEntry e = entry_at(a);
  EXPECT_FALSE(e.bits & _PAGE_RW);
  EXPECT_FALSE(e.bits & _PAGE_SOFT_DIRTY);
  EXPECT_TRUE(PageAnonExclusive(page_at(p, a)));
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a, 0x62, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 1);
  e = entry_at(a);
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_TRUE(e.bits & _PAGE_SOFT_DIRTY);
  // And out again: the soft-dirty bit goes with it.
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_SWP_SOFT_DIRTY);
  expect_bytes(p, a, PAGE_SIZE, 0x62);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_SOFT_DIRTY);
}

// Races: a writer that checks its own data, MADV_PAGEOUT of the same range,
// the shrinker splitting folios another thread keeps cutting in half, and
// fork() + a child reading page-consistent snapshots, all at once. Every
// page the writer wrote must read back; every child page must be uniform.
TEST_F(SwapTest, ConcurrentPageoutFaultsForkAndShrinker) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  enable_order_kb(16);
  enable_order_kb(64);
  constexpr unsigned kPages = 64;
  const uint64_t data = map_aligned(kPages * PAGE_SIZE, k64K);
  const uint64_t churn = map_aligned(16 * k64K, k64K);
  fill_pattern(data, kPages);
  std::latch start(4);
  std::atomic<bool> stop{false};
  std::atomic<long> errors{0};
  std::atomic<unsigned> last_iter{0};
  std::thread writer([&] {
    start.arrive_and_wait();
    // At least 60 rounds, and on until pages went out and came back in
    // meanwhile (however fast the writer is), within a bound.
    for (unsigned iter = 0;; iter++) {
      for (unsigned i = 0; i < kPages; i++) {
        uint8_t v = static_cast<uint8_t>(iter * 7 + i);
        if (!p->fill(data + i * PAGE_SIZE, v, PAGE_SIZE).ok()) errors++;
        int64_t bad = -2;
        uint8_t found = 0;
        if (!p->read_expect(data + i * PAGE_SIZE, v, PAGE_SIZE, &bad, &found).ok() || bad != -1) errors++;
      }
      last_iter = iter;
      const bool swapped = sys->vmstat("pswpout") > 0 && sys->vmstat("pswpin") > 0;
      if (iter + 1 >= 60 && (swapped || iter + 1 >= 100000)) break;
    }
    stop = true;
  });
  std::thread pager([&] {
    start.arrive_and_wait();
    while (!stop) {
      if (p->madvise(data, kPages * PAGE_SIZE, MADV_PAGEOUT)) errors++;
      if (p->madvise(churn, 16 * k64K, MADV_PAGEOUT)) errors++;
      std::this_thread::yield();
    }
  });
  std::thread churner([&] {
    start.arrive_and_wait();
    for (unsigned n = 0; !stop; n++) {
      uint64_t f = churn + (n % 16) * k64K;
      if (p->madvise(f, k64K, MADV_DONTNEED)) errors++;  // room for a fresh 64K folio
      if (!p->fill(f, static_cast<uint8_t>(n), k64K).ok()) errors++;
      if (p->madvise(f + k64K / 2, k64K / 2, MADV_DONTNEED)) errors++;
      sys->run_shrinkers();
    }
  });
  std::thread forker([&] {
    start.arrive_and_wait();
    while (!stop) {
      Process* c = p->fork();
      if (!c) break;
      for (unsigned i = 0; i < kPages; i += 5) {
        uint8_t buf[PAGE_SIZE];
        if (!c->read(data + i * PAGE_SIZE, buf, PAGE_SIZE).ok()) {
          errors++;
          continue;
        }
        for (unsigned j = 1; j < PAGE_SIZE; j++)
          if (buf[j] != buf[0]) {
            errors++;
            break;
          }
      }
      c->exit();
    }
  });
  writer.join();
  pager.join();
  churner.join();
  forker.join();
  EXPECT_EQ(errors.load(), 0);
  for (unsigned i = 0; i < kPages; i++)
    expect_bytes(p, data + i * PAGE_SIZE, PAGE_SIZE, static_cast<uint8_t>(last_iter.load() * 7 + i));
  // Fault every swap entry back in, so that no folio is left in the swap
  // cache only (reclaim lost a race with a transient reference): such a
  // folio is legitimate, but the checker may not know the swap cache yet.
  for (uint64_t a = churn; a < churn + 16 * k64K; a += PAGE_SIZE) {
    uint8_t b;
    ASSERT_TRUE(p->read(a, &b, 1).ok());
  }
  EXPECT_GT(sys->vmstat("pswpout"), 0);
  EXPECT_GT(sys->vmstat("pswpin"), 0);
}

// ============================================================================
// SoftDirtyTest
// ============================================================================

// clear_refs 4: PTEs become read-only and clean of soft-dirty, the VMA loses
// VM_SOFTDIRTY, so mprotect(RW) keeps them read-only and the next write
// faults (reusing the exclusive page) and sets soft-dirty again.
TEST_F(SoftDirtyTest, ClearWriteProtectsUntilTheNextWrite) {
  long r = p->mmap(0, 4 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(r, 0);
  auto a = static_cast<uint64_t>(r);
  ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_NOHUGEPAGE), 0);
  ASSERT_TRUE(p->fill(a, 0x11, 4 * PAGE_SIZE).ok());
  for (auto& e : p->pagetable_dump(a, a + 4 * PAGE_SIZE)) {
    EXPECT_TRUE(e.bits & _PAGE_RW);
    EXPECT_TRUE(e.bits & _PAGE_SOFT_DIRTY);
  }
  p->clear_soft_dirty();
  {
    Mm* mm = p->mm();
    ReadGuard g(&mm->mmap_lock);
    Vma* vma = vma_lookup(mm, a);
    ASSERT_TRUE(vma);
    EXPECT_FALSE(vma->vm_flags & VM_SOFTDIRTY);
  }
  for (auto& e : p->pagetable_dump(a, a + 4 * PAGE_SIZE)) {
    EXPECT_FALSE(e.bits & _PAGE_RW);
    EXPECT_FALSE(e.bits & _PAGE_SOFT_DIRTY);
    EXPECT_TRUE(e.bits & _PAGE_DIRTY);  // the hardware dirty bit stays
  }
  ASSERT_EQ(p->mprotect(a, 4 * PAGE_SIZE, PROT_READ), 0);
  ASSERT_EQ(p->mprotect(a, 4 * PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  for (auto& e : p->pagetable_dump(a, a + 4 * PAGE_SIZE)) EXPECT_FALSE(e.bits & _PAGE_RW);
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 0x12, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 1);
  EXPECT_EQ(sys->counter("fault.wp_copy"), 0);
  auto v = p->pagetable_dump(a, a + 4 * PAGE_SIZE);
  ASSERT_EQ(v.size(), 4u);
  for (unsigned i = 0; i < 4; i++) {
    EXPECT_EQ(bool(v[i].bits & _PAGE_RW), i == 1) << i;
    EXPECT_EQ(bool(v[i].bits & _PAGE_SOFT_DIRTY), i == 1) << i;
  }
  expect_bytes(p, a, PAGE_SIZE, 0x11);
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 0x12);
}

// A new mapping is soft-dirty (VM_SOFTDIRTY): mprotect may restore write
// access at once.
TEST_F(SoftDirtyTest, WithoutClearMprotectRestoresWrite) {
  long r = p->mmap(0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(r, 0);
  auto a = static_cast<uint64_t>(r);
  ASSERT_TRUE(p->fill(a, 0x13, PAGE_SIZE).ok());
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ), 0);
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_RW);
}

// A PMD-mapped THP: the PMD is write-protected and cleaned; the write reuses
// the whole THP and sets soft-dirty on the PMD.
TEST_F(SoftDirtyTest, ClearOnPmdThp) {
  uint64_t a = map_pmd_thp();
  PteDumpEntry e = entry_at(a);
  ASSERT_EQ(e.level, 2);
  ASSERT_TRUE(e.bits & _PAGE_SOFT_DIRTY);
  p->clear_soft_dirty();
  e = entry_at(a);
  EXPECT_EQ(e.level, 2);
  EXPECT_FALSE(e.bits & _PAGE_RW);
  EXPECT_FALSE(e.bits & _PAGE_SOFT_DIRTY);
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a + 7 * PAGE_SIZE, 0x99, 8).ok());
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 1);
  e = entry_at(a);
  EXPECT_EQ(e.level, 2);
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_TRUE(e.bits & _PAGE_SOFT_DIRTY);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 0);
}

// A writable PTE of a maybe-pinned page is left alone (pte_is_pinned).
TEST_F(SoftDirtyTest, PinnedPageKeepsItsState) {
  uint64_t a = map_base_page(0x14);
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(f);
  p->mm()->set_flag(MMF_HAS_PINNED);
  folio_ref_add(f, GUP_PIN_COUNTING_BIAS);
  p->clear_soft_dirty();
  PteDumpEntry e = entry_at(a);
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_TRUE(e.bits & _PAGE_SOFT_DIRTY);
  folio_put_refs(f, GUP_PIN_COUNTING_BIAS);
}

// ============================================================================
// SplitTest
// ============================================================================

// A 64K mTHP with half of it zapped is split by the shrinker: the mapped
// half becomes eight order-0 folios with their data and exclusivity, the
// other half goes back to the allocator.
TEST_F(SplitTest, ShrinkerSplitsPartiallyMappedMthp) {
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a + k64K / 2, k64K / 2, MADV_DONTNEED), 0);
  ASSERT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 1);
  ASSERT_EQ(sys->mthp_stat(4, "nr_anon"), 1);
  uint64_t free_before = sys->nr_free_pages();
  EXPECT_EQ(sys->run_shrinkers(), 1);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 8);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 1);
  EXPECT_EQ(sys->mthp_stat(4, "split_failed"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "nr_anon"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 0);
  {
    MutexGuard g(&k()->split_queue_lock);
    EXPECT_TRUE(k()->split_queue.empty());
  }
  for (unsigned i = 0; i < 8; i++) {
    PteDumpEntry e = entry_at(a + i * PAGE_SIZE);
    EXPECT_EQ(e.folio_order, 0) << i;
    EXPECT_TRUE(e.bits & _PAGE_RW) << i;
    Page* pg = page_at(p, a + i * PAGE_SIZE);
    ASSERT_TRUE(pg);
    EXPECT_TRUE(PageAnonExclusive(pg)) << i;
    EXPECT_EQ(folio_ref_count(page_folio(pg)), 1) << i;
    EXPECT_EQ(folio_mapcount(page_folio(pg)), 1) << i;
  }
  EXPECT_EQ(p->rss_anon(), static_cast<long>(k64K / 2));
  expect_pattern(p, a, 0, 8);
  // Nothing left to split.
  EXPECT_EQ(sys->run_shrinkers(), 0);
}

// A PMD THP with half of it zapped (the PMD was split by the zap) is split.
TEST_F(SplitTest, ShrinkerSplitsPartiallyMappedPmdThp) {
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a + PMD_SIZE / 2, PMD_SIZE / 2, MADV_DONTNEED), 0);
  uint64_t free_before = sys->nr_free_pages();
  EXPECT_EQ(sys->run_shrinkers(), 1);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "nr_anon"), 0);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 256);
  EXPECT_EQ(order_at(a), 0);
  EXPECT_EQ(order_at(a + 255 * PAGE_SIZE), 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE / 2));
  expect_pattern(p, a, 0, 256);
}

// An extra reference (a FOLL_GET holder) makes the freeze fail: the folio
// stays whole, mapped as before, and queued.
TEST_F(SplitTest, ExtraReferenceBlocksSplit) {
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a + k64K / 2, k64K / 2, MADV_DONTNEED), 0);
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(f);
  folio_get(f);
  EXPECT_EQ(sys->run_shrinkers(), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split_failed"), 1);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 0);
  EXPECT_EQ(order_at(a), 4);
  EXPECT_TRUE(folio_on_deferred_list(f));
  EXPECT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 1);
  folio_put(f);
  EXPECT_EQ(sys->run_shrinkers(), 1);
  EXPECT_EQ(order_at(a), 0);
  expect_pattern(p, a, 0, 8);
}

// split_folio() itself on a PMD-mapped THP: an unexpected reference makes it
// fail (the mapping stays as it was); without one it splits the PMD mapping
// and then the folio.
TEST_F(SplitTest, FailedSplitRestoresMappings) {
  uint64_t a = map_pmd_thp();
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(f);
  folio_get(f);  // the caller's reference
  folio_get(f);  // an unexpected one
  folio_lock(f);
  EXPECT_EQ(split_folio(f), -EAGAIN);
  folio_unlock(f);
  folio_put(f);
  EXPECT_EQ(sys->mthp_stat(9, "split_failed"), 1);
  EXPECT_EQ(sys->vmstat("thp_split_page_failed"), 1);
  EXPECT_EQ(order_at(a), 9);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 0);  // refused before unmapping anything
  // Without the extra reference the same call splits the PMD-mapped THP.
  folio_lock(f);
  EXPECT_EQ(split_folio(f), 0);
  folio_unlock(f);
  folio_put(f);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 1);
  for (unsigned i : {0u, 1u, 300u, 511u}) {
    PteDumpEntry e = entry_at(a + i * PAGE_SIZE);
    EXPECT_EQ(e.level, 1) << i;
    EXPECT_EQ(e.folio_order, 0) << i;
    EXPECT_TRUE(e.bits & _PAGE_RW) << i;
    EXPECT_TRUE(PageAnonExclusive(page_at(p, a + i * PAGE_SIZE))) << i;
  }
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
}

// Zero-filled pages of a split anonymous folio are remapped to the shared
// zero page (RMP_USE_SHARED_ZEROPAGE) and freed.
TEST_F(SplitTest, ZeroFilledPagesMapTheZeroPage) {
  enable_order_kb(64);
  uint64_t a = map_aligned(k64K, k64K);
  ASSERT_TRUE(p->fill(a, 0x71, PAGE_SIZE).ok());  // page 0 only; the rest stays zero
  ASSERT_EQ(order_at(a), 4);
  ASSERT_EQ(p->madvise(a + 15 * PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED), 0);
  uint64_t free_before = sys->nr_free_pages();
  EXPECT_EQ(sys->run_shrinkers(), 1);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 15);
  EXPECT_EQ(order_at(a), 0);
  for (unsigned i = 1; i < 15; i++) {
    PteDumpEntry e = entry_at(a + i * PAGE_SIZE);
    EXPECT_EQ(e.level, 1) << i;
    EXPECT_EQ(e.folio_order, -1) << i;  // the zero page
    EXPECT_TRUE(e.bits & _PAGE_SPECIAL) << i;
    EXPECT_FALSE(e.bits & _PAGE_RW) << i;
  }
  EXPECT_EQ(p->rss_anon(), 4096);
  expect_bytes(p, a, PAGE_SIZE, 0x71);
  expect_bytes(p, a + PAGE_SIZE, 14 * PAGE_SIZE, 0);
  // Writing to such a page allocates a new one.
  ASSERT_TRUE(p->fill(a + 3 * PAGE_SIZE, 0x72, PAGE_SIZE).ok());
  expect_bytes(p, a + 3 * PAGE_SIZE, PAGE_SIZE, 0x72);
}

// A fully mapped PMD THP is queued for the underused shrinker only: with the
// default max_ptes_none (511) it is never underused, so the shrinker drops it
// from the queue without splitting it.
TEST_F(SplitTest, FullyMappedPmdThpLeavesTheQueueUnsplit) {
  uint64_t a = map_pmd_thp();
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(folio_on_deferred_list(f));
  EXPECT_EQ(sys->run_shrinkers(), 0);
  EXPECT_FALSE(folio_on_deferred_list(f));
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 0);
  EXPECT_EQ(sys->mthp_stat(9, "split_failed"), 0);
}

// With a lower max_ptes_none, a THP that is mostly zero is underused and split;
// its zero pages are remapped to the zero page.
TEST_F(SplitTest, UnderusedPmdThpIsSplit) {
  set("transparent_hugepage/khugepaged/max_ptes_none", "256");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  fill_pattern(a, 100);
  ASSERT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(sys->run_shrinkers(), 1);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(100 * PAGE_SIZE));
  EXPECT_EQ(entry_at(a + 200 * PAGE_SIZE).folio_order, -1);
  expect_pattern(p, a, 0, 100);
}

// A folio mapped by two processes (fork shares an mTHP): the split keeps
// both mappings, each page shared read-only by both.
TEST_F(SplitTest, SplitOfFolioSharedWithChild) {
  uint64_t a = map_mthp_64k();
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  ASSERT_EQ(p->madvise(a + k64K / 2, k64K / 2, MADV_DONTNEED), 0);
  ASSERT_EQ(child->madvise(a + k64K / 2, k64K / 2, MADV_DONTNEED), 0);
  EXPECT_EQ(sys->run_shrinkers(), 1);
  for (unsigned i = 0; i < 8; i++) {
    EXPECT_EQ(entry_at(p, a + i * PAGE_SIZE).pfn, entry_at(child, a + i * PAGE_SIZE).pfn) << i;
    Folio* f = folio_at(p, a + i * PAGE_SIZE);
    ASSERT_TRUE(f);
    EXPECT_EQ(folio_order(f), 0u);
    EXPECT_EQ(folio_mapcount(f), 2) << i;
    EXPECT_EQ(folio_ref_count(f), 2) << i;
    EXPECT_FALSE(PageAnonExclusive(&f->page)) << i;
    EXPECT_FALSE(entry_at(p, a + i * PAGE_SIZE).bits & _PAGE_RW) << i;
  }
  expect_pattern(p, a, 0, 8);
  expect_pattern(child, a, 0, 8);
  // The parent's write now copies a single small page.
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a, 0x01, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.wp_copy"), 1);
  expect_pattern(child, a, 0, 1);
}

// ============================================================================
// ColdTest (MADV_COLD)
// ============================================================================

// The reproducer: MADV_COLD on half a 64K mTHP splits it (nobody
// else maps it), then deactivates the advised pages: their PTEs become old;
// the other half keeps its young bits.
TEST_F(ColdTest, SplitsPartlyCoveredMthp) {
  uint64_t a = map_mthp_64k();
  ASSERT_TRUE(p->page_info(a).young);
  ASSERT_EQ(p->madvise(a, k64K / 2, MADV_COLD), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 1);
  for (unsigned i = 0; i < 16; i++) {
    PageInfo pi = p->page_info(a + i * PAGE_SIZE);
    EXPECT_EQ(pi.level, 1) << i;
    EXPECT_EQ(pi.order, 0) << i;
    EXPECT_EQ(pi.young, i >= 8) << i;
  }
  expect_pattern(p, a, 0, 16);
}

// An active folio loses PG_active and PG_referenced (pgdeactivate); an
// inactive one only its referenced bit and young PTEs.
TEST_F(ColdTest, DeactivatesWhatTheRangeCovers) {
  uint64_t a = map_base_page(0x11);
  uint64_t b = map_base_page(0x12);
  Folio* fa = folio_at(p, a);
  Folio* fb = folio_at(p, b);
  folio_mark_accessed(fa);
  folio_mark_accessed(fa);  // referenced, then activated
  folio_mark_accessed(fb);  // referenced only
  ASSERT_TRUE(folio_test_active(fa));
  ASSERT_TRUE(folio_test_referenced(fb));
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_COLD), 0);
  ASSERT_EQ(p->madvise(b, PAGE_SIZE, MADV_COLD), 0);
  EXPECT_FALSE(folio_test_active(fa));
  EXPECT_FALSE(folio_test_referenced(fa));
  EXPECT_TRUE(folio_test_workingset(fa));
  EXPECT_TRUE(folio_test_lru(fa));
  EXPECT_FALSE(folio_test_referenced(fb));
  EXPECT_FALSE(folio_test_active(fb));
  EXPECT_EQ(sys->vmstat("pgdeactivate"), 1);
  EXPECT_FALSE(p->page_info(a).young);
  EXPECT_FALSE(p->page_info(b).young);
  expect_bytes(p, a, PAGE_SIZE, 0x11);
}

// A PMD THP advised whole stays PMD-mapped; its PMD becomes old and the
// folio is deactivated (512 pages).
TEST_F(ColdTest, WholePmdThpIsDeactivatedNotSplit) {
  uint64_t a = map_pmd_thp();
  Folio* f = folio_at(p, a);
  folio_mark_accessed(f);
  folio_mark_accessed(f);
  ASSERT_TRUE(folio_test_active(f));
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLD), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_FALSE(p->page_info(a).young);
  EXPECT_FALSE(folio_test_active(f));
  EXPECT_EQ(sys->vmstat("pgdeactivate"), 512);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 0);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 0);
  // Half of it: split, then the advised half is made old.
  ASSERT_EQ(p->madvise(a, PMD_SIZE / 2, MADV_COLD), 0);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(order_at(a), 0);
  expect_pattern(p, a, 0, HPAGE_PMD_NR);
}

// Folios another process maps are left alone: a shared small folio keeps
// its state, a shared large one is not split.
TEST_F(ColdTest, LeavesFoliosOfOtherProcessesAlone) {
  uint64_t a = map_mthp_64k();
  uint64_t b = map_base_page(0x21);
  Folio* fb = folio_at(p, b);
  folio_mark_accessed(fb);
  folio_mark_accessed(fb);
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  ASSERT_EQ(p->madvise(a, k64K / 2, MADV_COLD), 0);
  ASSERT_EQ(p->madvise(b, PAGE_SIZE, MADV_COLD), 0);
  EXPECT_EQ(order_at(a), 4);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 0);
  EXPECT_TRUE(folio_test_active(fb));
  EXPECT_EQ(sys->vmstat("pgdeactivate"), 0);
  expect_pattern(child, a, 0, 16);
}

// can_madv_lru_vma: mlocked, PFN-map and hugetlb VMAs are refused.
TEST_F(ColdTest, LockedVmaIsEinval) {
  long a = p->mmap(0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED_UAPI);
  ASSERT_GT(a, 0);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(a), PAGE_SIZE, MADV_COLD), -EINVAL);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(a), PAGE_SIZE, MADV_PAGEOUT), -EINVAL);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(a), PAGE_SIZE, MADV_FREE), -EINVAL);
}

// ============================================================================
// LazyFreeTest (MADV_FREE and reclaim of lazy-free folios)
// ============================================================================

// The reproducer: write 16K, MADV_FREE, MADV_PAGEOUT: the clean
// lazy-free folios are discarded without swap (none configured, none
// needed): the range reads back as zeros from fresh pages.
TEST_F(LazyFreeTest, FreeThenPageoutDiscards) {
  uint64_t a = map_base_pages(4);
  uint64_t free_before = sys->nr_free_pages();
  ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_FREE), 0);
  for (unsigned i = 0; i < 4; i++) {
    Folio* f = folio_at(p, a + i * PAGE_SIZE);
    ASSERT_TRUE(f);
    EXPECT_TRUE(lazyfree(f)) << i;
    EXPECT_FALSE(folio_test_active(f)) << i;
    PageInfo pi = p->page_info(a + i * PAGE_SIZE);
    EXPECT_FALSE(pi.dirty) << i;
    EXPECT_FALSE(pi.young) << i;
  }
  EXPECT_EQ(sys->vmstat("pglazyfree"), 4);
  EXPECT_EQ(smaps_kb("LazyFree"), 16);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * PAGE_SIZE));  // still mapped, still anonymous
  ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_PAGEOUT), 0);
  for (unsigned i = 0; i < 4; i++) EXPECT_EQ(entry_at(a + i * PAGE_SIZE).level, 0) << i;
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 4);
  EXPECT_EQ(sys->vmstat("pswpout"), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(smaps_kb("LazyFree"), 0);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 4);
  expect_bytes(p, a, 4 * PAGE_SIZE, 0);
}

// A write after MADV_FREE dirties the PTE: reclaim sees it, puts the PTE
// back and makes the folio swap-backed again; the other pages go.
TEST_F(LazyFreeTest, WriteAfterFreeKeepsTheData) {
  uint64_t a = map_base_pages(4);
  ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_FREE), 0);
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 0x66, PAGE_SIZE).ok());
  ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(entry_at(a + PAGE_SIZE).level, 1);
  EXPECT_EQ(entry_at(a + 2 * PAGE_SIZE).level, 0);
  Folio* f = folio_at(p, a + PAGE_SIZE);
  ASSERT_TRUE(f);
  EXPECT_FALSE(lazyfree(f));
  EXPECT_TRUE(folio_test_dirty(f));
  EXPECT_TRUE(folio_test_active(f));  // activate_locked
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 3);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PAGE_SIZE));
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 0x66);
  expect_bytes(p, a, PAGE_SIZE, 0);
}

// With swap present a lazy-free folio still needs no slot: it is discarded.
TEST_F(LazyFreeTest, LazyFreeFolioNeedsNoSwap) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_base_pages(2);
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_FREE), 0);
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->vmstat("pswpout"), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  EXPECT_EQ(count_swap_ptes(p, a, 2 * PAGE_SIZE), 0);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 2);
}

// A GUP reference makes reclaim keep the folio (ref_count != 1 + mapcount):
// mapped and still lazy-free; once the reference is gone it is discarded.
TEST_F(LazyFreeTest, GupReferenceKeepsTheFolio) {
  uint64_t a = map_base_pages(1);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_FREE), 0);
  GupPages h;
  ASSERT_EQ(gup(p, GupEntry::kGetUserPagesFast, a, 1, 0, &h), 1);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(f);
  EXPECT_TRUE(lazyfree(f));
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 0);
  uint8_t byte = 0;
  ASSERT_EQ(h.read(0, &byte, 1), 0);
  EXPECT_EQ(byte, pattern(0));
  h.release();
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 1);
}

// A device write through a GUP reference, released dirty, redirties the
// folio: reclaim then keeps the data and makes the folio swap-backed.
TEST_F(LazyFreeTest, DirtyGupReleaseKeepsTheData) {
  uint64_t a = map_base_pages(1);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_FREE), 0);
  GupPages h;
  ASSERT_EQ(gup(p, GupEntry::kGetUserPagesFast, a, 1, foll::WRITE, &h), 1);
  const uint8_t v = 0x77;
  ASSERT_EQ(h.write(0, &v, 1), 0);
  h.release(Dirty::kYes);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  EXPECT_FALSE(lazyfree(folio_at(p, a)));
  uint8_t got = 0;
  ASSERT_TRUE(p->read(a, &got, 1).ok());
  EXPECT_EQ(got, 0x77);
}

// The PMD reproducer: a THP freed whole stays PMD-mapped and
// lazy-free; reclaim discards it at the PMD level, without splitting
// (v6.18: "mm/vmscan: avoid split lazyfree THP during shrink_folio_list()").
TEST_F(LazyFreeTest, WholePmdThpDiscardedWithoutSplit) {
  uint64_t a = map_pmd_thp();
  uint64_t free_before = sys->nr_free_pages();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_FREE), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_TRUE(lazyfree(folio_at(p, a)));
  EXPECT_FALSE(p->page_info(a).dirty);
  EXPECT_EQ(sys->vmstat("pglazyfree"), 512);
  EXPECT_EQ(smaps_kb("LazyFree"), 2048);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 0);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 0);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 512);
  EXPECT_EQ(sys->vmstat("nr_anon_transparent_hugepages"), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(sys->nr_free_pages(), free_before + 512 + 1);  // the folio and its deposited table
  expect_bytes(p, a, PAGE_SIZE, 0);
}

// A write after freeing a PMD THP: the PMD is dirty, so reclaim makes the
// folio swap-backed again and leaves the PMD as it is.
TEST_F(LazyFreeTest, RedirtiedPmdThpStaysMapped) {
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_FREE), 0);
  ASSERT_TRUE(p->fill(a + 5, 0x99, 1).ok());
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_FALSE(lazyfree(folio_at(p, a)));
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 0);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 0);
  expect_bytes(p, a + 5, 1, 0x99);
  expect_pattern(p, a, 1, HPAGE_PMD_NR - 1);
}

// MADV_FREE of half a PMD THP splits it; only the advised half becomes
// lazy-free, and only it is discarded.
TEST_F(LazyFreeTest, HalfPmdThpIsSplit) {
  uint64_t a = map_pmd_thp();
  ASSERT_EQ(p->madvise(a, PMD_SIZE / 2, MADV_FREE), 0);
  EXPECT_EQ(sys->vmstat("thp_split_page"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "split"), 1);
  EXPECT_EQ(sys->vmstat("pglazyfree"), 256);
  EXPECT_TRUE(lazyfree(folio_at(p, a)));
  EXPECT_FALSE(lazyfree(folio_at(p, a + PMD_SIZE / 2)));
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(entry_at(a + PMD_SIZE / 2).level, 1);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 256);
  expect_pattern(p, a, 256, 256);
}

// A large folio mapped whole inside the range is marked lazy-free whole and
// discarded in one batch of PTEs; one covered in part is split first.
TEST_F(LazyFreeTest, MthpWholeOrSplit) {
  uint64_t a = map_mthp_64k();
  ASSERT_EQ(p->madvise(a, k64K, MADV_FREE), 0);
  EXPECT_EQ(order_at(a), 4);
  EXPECT_TRUE(lazyfree(folio_at(p, a)));
  ASSERT_EQ(p->madvise(a, k64K, MADV_PAGEOUT), 0);
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(entry_at(a + k64K - PAGE_SIZE).level, 0);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 16);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split_deferred"), 0);  // never partially mapped on the way

  uint64_t b = map_aligned(k64K, k64K);
  fill_pattern(b, 16);
  ASSERT_EQ(order_at(b), 4);
  ASSERT_EQ(p->madvise(b, k64K / 2, MADV_FREE), 0);
  EXPECT_EQ(order_at(b), 0);
  EXPECT_EQ(sys->mthp_stat(4, "split"), 1);
  EXPECT_TRUE(lazyfree(folio_at(p, b)));
  EXPECT_FALSE(lazyfree(folio_at(p, b + k64K / 2)));
}

// A lazy-free folio reclaim cannot discard (redirtied) gets its PTEs back
// from the batch it cleared; the batch must agree on the write bit. After a
// fork whose child exited, every PTE is read-only and no page exclusive; a
// write reuses page 0 alone (writable, exclusive). Restoring all 16 PTEs
// from page 0's value would make 15 shared pages writable (stress found
// this, seed 61; the kernel fixed it after v6.18 with FPB_RESPECT_WRITE).
TEST_F(LazyFreeTest, RedirtiedMthpRestoresEachPtesWriteBit) {
  uint64_t a = map_mthp_64k();
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  child->exit();
  ASSERT_EQ(p->madvise(a, k64K, MADV_FREE), 0);
  ASSERT_TRUE(lazyfree(folio_at(p, a)));
  ASSERT_TRUE(p->fill(a, 0x5a, 1).ok());  // wp_page_reuse of page 0 only
  ASSERT_EQ(order_at(a), 4);
  EXPECT_TRUE(p->page_info(a).writable);
  EXPECT_FALSE(p->page_info(a + PAGE_SIZE).writable);
  ASSERT_EQ(p->madvise(a, k64K, MADV_PAGEOUT), 0);
  EXPECT_EQ(sys->vmstat("pglazyfreed"), 0);  // redirtied: kept, whole
  for (unsigned i = 0; i < 16; i++) {
    const PageInfo pi = p->page_info(a + i * PAGE_SIZE);
    EXPECT_EQ(pi.writable, i == 0) << i;
    EXPECT_EQ(pi.anon_exclusive, i == 0) << i;
  }
  CheckReport rep = sys->check();
  EXPECT_TRUE(rep.ok()) << rep.to_string();
}

// A large folio another process maps is not split, and not marked.
TEST_F(LazyFreeTest, SharedMthpIsLeftAlone) {
  uint64_t a = map_mthp_64k();
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  ASSERT_EQ(p->madvise(a, k64K / 2, MADV_FREE), 0);
  EXPECT_EQ(order_at(a), 4);
  EXPECT_FALSE(lazyfree(folio_at(p, a)));
  EXPECT_EQ(sys->vmstat("pglazyfree"), 0);
  expect_pattern(child, a, 0, 16);
}

// Swap entries in the range are dropped (a zeroed page is cheaper than a
// swap-in), with their slots.
TEST_F(LazyFreeTest, SwapEntriesAreDropped) {
  ASSERT_EQ(sys->add_swap(kSwapBytes, SwapKind::kZram), 0);
  uint64_t a = map_base_pages(2);
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_PAGEOUT), 0);
  ASSERT_EQ(count_swap_ptes(p, a, 2 * PAGE_SIZE), 2);
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_FREE), 0);
  EXPECT_EQ(count_swap_ptes(p, a, 2 * PAGE_SIZE), 0);
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(swapents(p), 0);
  EXPECT_EQ(swap_inuse_pages(k()), 0u);
  expect_bytes(p, a, 2 * PAGE_SIZE, 0);
}

// A swap-cache folio is made lazy-free only when this mm maps all of it
// and its swap space can be freed: not while a fork child's swap PTE still
// uses the slot; once the child is gone, it is.
TEST_F(LazyFreeTest, SwapCacheFolioNeedsItsSlotFree) {
  ASSERT_EQ(sys->add_swap(kSwapBytes), 0);
  uint64_t a = map_base_pages(1);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  expect_pattern(p, a, 0, 1);  // swap-in: the folio stays in the swap cache for the child's entry
  Folio* f = folio_at(p, a);
  ASSERT_TRUE(f);
  ASSERT_TRUE(folio_test_swapcache(f));
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_FREE), 0);
  EXPECT_FALSE(lazyfree(f));
  EXPECT_TRUE(folio_test_swapcache(f));
  child->exit();
  sys->run_shrinkers();
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_FREE), 0);
  f = folio_at(p, a);
  EXPECT_FALSE(folio_test_swapcache(f));
  EXPECT_TRUE(lazyfree(f));
  EXPECT_FALSE(folio_test_dirty(f));
}

// MADV_FREE is for anonymous private memory: a shared anonymous or a file
// mapping is -EINVAL.
TEST_F(LazyFreeTest, NonAnonymousVmaIsEinval) {
  long a = p->mmap(0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(a), PAGE_SIZE, MADV_FREE), -EINVAL);
  int fd = sys->create_file(PAGE_SIZE);
  ASSERT_GE(fd, 0);
  long b = p->mmap_file(0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd);
  ASSERT_GT(b, 0);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(b), PAGE_SIZE, MADV_FREE), -EINVAL);
  EXPECT_EQ(sys->close_file(fd), 0);
}

}  // namespace
}  // namespace mmlab::test
