// Anonymous faults: folio order selection, PMD THP, the zero pages, fallbacks,
// user-access signals, and THP mappings cut by mprotect/madvise/mremap.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "test_util.h"

namespace mmlab::test {
namespace {

class FaultTest : public MmTest {};

// ---- order selection: global mode x per-size mode x madvise ----

struct OrderCase {
  const char* global;
  const char* per_size;
  bool madvised;
};

class OrderSelectionTest : public MmTest, public ::testing::WithParamInterface<OrderCase> {};

// The kernel's rule (thp_vma_allowable_orders): always -> yes; inherit ->
// the global setting (madvise mode needs MADV_HUGEPAGE); madvise -> needs
// MADV_HUGEPAGE whatever the global setting; never -> no.
bool expect_large(const OrderCase& c) {
  std::string g = c.global, s = c.per_size;
  if (s == "always") return true;
  if (s == "madvise") return c.madvised;
  if (s == "inherit") return g == "always" || (g == "madvise" && c.madvised);
  return false;
}

TEST_P(OrderSelectionTest, SixtyFourK) {
  const OrderCase& c = GetParam();
  set("transparent_hugepage/enabled", c.global);
  enable_order_kb(2048, "never");
  enable_order_kb(64, c.per_size);
  uint64_t a = map_aligned(PMD_SIZE);
  if (c.madvised) {
    ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  }
  ASSERT_TRUE(p->fill(a + 5 * PAGE_SIZE, 0x5a, 1).ok());
  bool large = expect_large(c);
  EXPECT_EQ(order_at(a + 5 * PAGE_SIZE), large ? 4 : 0);
  EXPECT_EQ(sys->mthp_stat(4, "anon_fault_alloc"), large ? 1 : 0);
  EXPECT_EQ(p->rss_anon(), large ? 64 * 1024 : 4096);
  // The whole 64K range is mapped by the one fault, each page by its own PTE.
  if (large) {
    EXPECT_EQ(order_at(a), 4);
  }
  expect_bytes(p, a + 5 * PAGE_SIZE, 1, 0x5a);
  expect_bytes(p, a, 5 * PAGE_SIZE, 0);
}

std::vector<OrderCase> all_order_cases() {
  std::vector<OrderCase> v;
  for (const char* g : {"always", "madvise", "never"})
    for (const char* s : {"always", "inherit", "madvise", "never"})
      for (bool m : {false, true}) v.push_back({g, s, m});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllModes, OrderSelectionTest, ::testing::ValuesIn(all_order_cases()),
                         [](const ::testing::TestParamInfo<OrderCase>& i) {
                           return std::string(i.param.global) + "_" + i.param.per_size + (i.param.madvised ? "_madv" : "_plain");
                         });

TEST_F(FaultTest, PmdThpIsPmdMapped) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_TRUE(p->fill(a + 12345, 7, 1).ok());
  PteDumpEntry e = entry_at(a + 12345);
  EXPECT_EQ(e.level, 2);
  EXPECT_EQ(e.folio_order, 9);
  EXPECT_EQ(sys->vmstat("thp_fault_alloc"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "anon_fault_alloc"), 1);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  expect_bytes(p, a + 12345, 1, 7);
}

TEST_F(FaultTest, HighestFittingOrderWins) {
  // 16K..1M all enabled; the VMA is 32K: 32K fits, 64K does not.
  for (unsigned kb : {16, 32, 64, 128, 256, 512, 1024}) enable_order_kb(kb);
  uint64_t a = map_aligned(32 * 1024, 64 * 1024);
  ASSERT_TRUE(p->fill(a, 1, 1).ok());
  EXPECT_EQ(order_at(a), 3);
  EXPECT_EQ(sys->mthp_stat(3, "anon_fault_alloc"), 1);
}

TEST_F(FaultTest, FallbackWhenRangePartlyPopulated) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a + 32 * 1024, 2, 1).ok());  // order 0 (mTHP off by default)
  EXPECT_EQ(order_at(a + 32 * 1024), 0);
  enable_order_kb(64);
  enable_order_kb(16);
  ASSERT_TRUE(p->fill(a, 3, 1).ok());
  // [a, a+64K) holds a page already; [a, a+16K) is empty.
  EXPECT_EQ(order_at(a), 2);
  EXPECT_EQ(sys->mthp_stat(4, "anon_fault_alloc"), 0);
  EXPECT_EQ(sys->mthp_stat(2, "anon_fault_alloc"), 1);
  expect_bytes(p, a + 32 * 1024, 1, 2);
}

TEST_F(FaultTest, ReadFaultMapsZeroPageThenWriteCopies) {
  uint64_t a = map_aligned(PAGE_SIZE * 4, PAGE_SIZE);
  expect_bytes(p, a, PAGE_SIZE, 0);
  PteDumpEntry e = entry_at(a);
  EXPECT_EQ(e.level, 1);
  EXPECT_EQ(e.folio_order, -1);  // the zero page
  EXPECT_TRUE(e.bits & _PAGE_SPECIAL);
  EXPECT_FALSE(e.bits & _PAGE_RW);
  EXPECT_EQ(p->rss_anon(), 0);
  sys->reset_counters();
  ASSERT_TRUE(p->fill(a + 10, 9, 1).ok());
  EXPECT_EQ(sys->counter("fault.wp_copy"), 1);
  EXPECT_EQ(entry_at(a).folio_order, 0);
  EXPECT_EQ(p->rss_anon(), 4096);
  expect_bytes(p, a, 10, 0);
  expect_bytes(p, a + 10, 1, 9);
}

TEST_F(FaultTest, HugeZeroFolioThenWriteAllocatesThp) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  expect_bytes(p, a, PMD_SIZE, 0);
  PteDumpEntry e = entry_at(a);
  EXPECT_EQ(e.level, 2);
  EXPECT_FALSE(e.bits & _PAGE_RW);
  EXPECT_EQ(sys->vmstat("thp_fault_alloc"), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 4, 1).ok());
  e = entry_at(a);
  EXPECT_EQ(e.level, 2);
  EXPECT_EQ(e.folio_order, 9);
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_EQ(sys->vmstat("thp_fault_alloc"), 1);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  expect_bytes(p, a, PAGE_SIZE, 0);
  expect_bytes(p, a + PAGE_SIZE, 1, 4);
}

TEST_F(FaultTest, UseZeroPageOffAllocatesOnRead) {
  set("transparent_hugepage/use_zero_page", "0");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  expect_bytes(p, a, 1, 0);
  EXPECT_EQ(entry_at(a).folio_order, 9);
  EXPECT_EQ(sys->vmstat("thp_fault_alloc"), 1);
}

TEST_F(FaultTest, SignalsForBadAccesses) {
  uint64_t a = map_aligned(PAGE_SIZE * 2, PAGE_SIZE);
  uint8_t b = 0;
  EXPECT_EQ(p->read(a - PAGE_SIZE, &b, 1).sig, Signal::kSigsegv);  // no VMA
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ), 0);
  AccessResult r = p->write(a, &b, 1);
  EXPECT_EQ(r.sig, Signal::kSigsegv);
  EXPECT_EQ(r.fault_addr, a);
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_NONE), 0);
  EXPECT_EQ(p->read(a, &b, 1).sig, Signal::kSigsegv);
  // An access spanning into an unmapped page faults at that page.
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 1, PAGE_SIZE).ok());
  r = p->fill(a + 2 * PAGE_SIZE - 8, 1, 16);
  EXPECT_EQ(r.sig, Signal::kSigsegv);
  EXPECT_EQ(r.fault_addr, a + 2 * PAGE_SIZE);
}

TEST_F(FaultTest, MprotectSplitsPmdMappingFolioStaysWhole) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  ASSERT_EQ(entry_at(a).level, 2);
  ASSERT_EQ(p->mprotect(a + 100 * PAGE_SIZE, PAGE_SIZE, PROT_READ), 0);
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 1);
  auto all = p->pagetable_dump(a, a + PMD_SIZE);
  ASSERT_EQ(all.size(), 512u);
  for (unsigned i = 0; i < 512; i++) {
    EXPECT_EQ(all[i].level, 1);
    EXPECT_EQ(all[i].folio_order, 9);
    EXPECT_EQ(all[i].pfn, all[0].pfn + i);  // still the same folio, page by page
    EXPECT_EQ(bool(all[i].bits & _PAGE_RW), i != 100) << i;
  }
  EXPECT_EQ(sys->mthp_stat(9, "split"), 0);
  expect_bytes(p, a, PMD_SIZE, 0x11);
  // Restoring the protection makes the exclusive page writable again at once.
  ASSERT_EQ(p->mprotect(a + 100 * PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  EXPECT_TRUE(entry_at(a + 100 * PAGE_SIZE).bits & _PAGE_RW);
}

TEST_F(FaultTest, DontneedPartOfThpQueuesDeferredSplit) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_TRUE(p->fill(a, 0x22, PMD_SIZE).ok());
  ASSERT_EQ(p->madvise(a + PMD_SIZE / 2, PMD_SIZE / 2, MADV_DONTNEED), 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE / 2));
  EXPECT_EQ(sys->mthp_stat(9, "split_deferred"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "nr_anon_partially_mapped"), 1);
  EXPECT_EQ(sys->vmstat("thp_deferred_split_page"), 1);
  EXPECT_EQ(entry_at(a).folio_order, 9);
  expect_bytes(p, a, PMD_SIZE / 2, 0x22);
  expect_bytes(p, a + PMD_SIZE / 2, PMD_SIZE / 2, 0);  // zero page now
  EXPECT_EQ(entry_at(a + PMD_SIZE / 2).folio_order, -1);
}

TEST_F(FaultTest, DontneedPartOfMthp) {
  enable_order_kb(64);
  uint64_t a = map_aligned(64 * 1024, 64 * 1024);
  ASSERT_TRUE(p->fill(a, 0x33, 64 * 1024).ok());
  ASSERT_EQ(p->madvise(a + PAGE_SIZE, 15 * PAGE_SIZE, MADV_DONTNEED), 0);
  EXPECT_EQ(p->rss_anon(), 4096);
  EXPECT_EQ(sys->mthp_stat(4, "split_deferred"), 1);
  expect_bytes(p, a, PAGE_SIZE, 0x33);
}

TEST_F(FaultTest, MremapHalfThpBreaksAlignment) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_TRUE(p->fill(a, 0x44, PMD_SIZE / 2).ok());
  ASSERT_TRUE(p->fill(a + PMD_SIZE / 2, 0x55, PMD_SIZE / 2).ok());
  pfn_t head = entry_at(a).pfn;
  uint64_t dst = map_aligned(2 * PMD_SIZE) + PAGE_SIZE;  // deliberately not aligned to the folio
  long r = p->mremap(a + PMD_SIZE / 2, PMD_SIZE / 2, PMD_SIZE / 2, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
  ASSERT_EQ(r, static_cast<long>(dst));
  EXPECT_EQ(sys->vmstat("thp_split_pmd"), 1);
  PteDumpEntry moved = entry_at(dst);
  EXPECT_EQ(moved.level, 1);
  EXPECT_EQ(moved.folio_order, 9);
  EXPECT_EQ(moved.pfn, head + 256);  // the same folio, now at an unaligned address
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  expect_bytes(p, a, PMD_SIZE / 2, 0x44);
  expect_bytes(p, dst, PMD_SIZE / 2, 0x55);
  uint8_t b = 0;
  EXPECT_EQ(p->read(a + PMD_SIZE / 2, &b, 1).sig, Signal::kSigsegv);  // the old upper half is gone
}

TEST_F(FaultTest, PopulateWriteFaultsEverything) {
  enable_order_kb(64);
  uint64_t a = map_aligned(256 * 1024, 64 * 1024);
  ASSERT_EQ(p->madvise(a, 256 * 1024, MADV_POPULATE_WRITE), 0);
  EXPECT_EQ(p->rss_anon(), 256 * 1024);
  EXPECT_EQ(sys->mthp_stat(4, "anon_fault_alloc"), 4);
  uint64_t b = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_EQ(p->madvise(b, 4 * PAGE_SIZE, MADV_POPULATE_READ), 0);
  EXPECT_EQ(entry_at(b).folio_order, -1);  // zero page
}

// ---- allocation failure: fallback, then OOM as a signal ----

class SmallMemoryTest : public MmTest {
 protected:
  SmallMemoryTest() { ram_bytes = 16ull << 20; }
};

TEST_F(SmallMemoryTest, ThpFallsBackWhenFragmentedAndOomIsASignal) {
  // Exhaust memory page by page: the access that cannot get a page is a signal, not a crash.
  uint64_t len = 32ull << 20;
  long a = p->mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  uint64_t touched = 0;
  AccessResult r;
  for (; touched < len; touched += PAGE_SIZE) {
    r = p->fill(a + touched, 1, 1);
    if (!r.ok()) break;
  }
  EXPECT_EQ(r.sig, Signal::kSigkill);
  ASSERT_GT(touched, 8ull << 20);
  // Free every other page: lots of free memory, no free 2 MiB block.
  for (uint64_t off = 0; off < touched; off += 2 * PAGE_SIZE) ASSERT_EQ(p->madvise(a + off, PAGE_SIZE, MADV_DONTNEED), 0);
  Process* q = sys->new_process("q");
  uint64_t t = map_aligned(q, PMD_SIZE);
  ASSERT_EQ(q->madvise(t, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_TRUE(q->fill(t, 5, 1).ok());
  EXPECT_EQ(entry_at(q, t).folio_order, 0);
  EXPECT_EQ(sys->vmstat("thp_fault_fallback"), 1);
  EXPECT_EQ(sys->mthp_stat(9, "anon_fault_fallback"), 1);
  expect_bytes(q, t, 1, 5);
}

// ---- concurrency ----

TEST_F(FaultTest, TwoThreadsFaultDisjointHalves) {
  enable_order_kb(64);
  uint64_t len = 8ull << 20;
  uint64_t a = map_aligned(len);
  auto worker = [&](uint64_t start, uint8_t v) {
    for (uint64_t off = 0; off < len / 2; off += PAGE_SIZE) ASSERT_TRUE(p->fill(start + off, v, 64).ok());
  };
  std::thread t1(worker, a, 1), t2(worker, a + len / 2, 2);
  t1.join();
  t2.join();
  for (uint64_t off = 0; off < len; off += PAGE_SIZE) expect_bytes(p, a + off, 64, off < len / 2 ? 1 : 2);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(len));
}

TEST_F(FaultTest, TwoThreadsFaultOverlappingRange) {
  // Both threads race on every page; each page ends with one of the two patterns.
  enable_order_kb(16);
  enable_order_kb(64);
  uint64_t len = 4ull << 20;
  uint64_t a = map_aligned(len);
  std::atomic<int> ready{0};
  auto worker = [&](uint8_t v, bool reverse) {
    ready++;
    while (ready.load() < 2) std::this_thread::yield();
    for (uint64_t i = 0; i < len / PAGE_SIZE; i++) {
      uint64_t page = reverse ? len / PAGE_SIZE - 1 - i : i;
      ASSERT_TRUE(p->fill(a + page * PAGE_SIZE, v, PAGE_SIZE).ok());
    }
  };
  std::thread t1(worker, 0xa1, false), t2(worker, 0xb2, true);
  t1.join();
  t2.join();
  // Concurrent stores to one page may interleave; every byte holds one of the two values.
  std::vector<uint8_t> buf(len);
  ASSERT_TRUE(p->read(a, buf.data(), len).ok());
  for (uint64_t i = 0; i < len; i++) ASSERT_TRUE(buf[i] == 0xa1 || buf[i] == 0xb2) << i;
  EXPECT_EQ(p->rss_anon(), static_cast<long>(len));
}

TEST_F(FaultTest, FaultsRaceWithMunmapAndMprotect) {
  uint64_t len = 4ull << 20;
  uint64_t a = map_aligned(len);
  std::atomic<bool> stop{false};
  std::thread faulter([&] {
    for (int round = 0; round < 200 && !stop; round++)
      for (uint64_t off = 0; off < len; off += 16 * PAGE_SIZE) (void)p->fill(a + off, 1, 8);
  });
  for (int i = 0; i < 50; i++) {
    EXPECT_EQ(p->mprotect(a + PMD_SIZE, PMD_SIZE, PROT_READ), 0);
    EXPECT_EQ(p->mprotect(a + PMD_SIZE, PMD_SIZE, PROT_READ | PROT_WRITE), 0);
    EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_DONTNEED), 0);
  }
  EXPECT_EQ(p->munmap(a + PMD_SIZE, PMD_SIZE), 0);
  stop = true;
  faulter.join();
}

}  // namespace
}  // namespace mmlab::test
