// Guard regions (MADV_GUARD_INSTALL / MADV_GUARD_REMOVE, mm/madvise.c):
// markers that fault with SIGSEGV, installed over what was mapped (zapped
// first), kept by MADV_DONTNEED, MADV_FREE, mprotect and mremap, inherited
// at fork, dropped by munmap; GUP over one fails. Every test ends with
// MmTest's invariant checker and leak check (test_util.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "test_util.h"

namespace mmlab {
namespace {

constexpr uint64_t P = PAGE_SIZE;
using test::RW;

class GuardRegionTest : public test::MmTest {
 protected:
  uint64_t map(uint64_t len, int prot = RW, int flags = 0) {
    long a = p->mmap(0, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags);
    EXPECT_GT(a, 0);
    return static_cast<uint64_t>(a);
  }
  bool faults(Process* q, uint64_t addr) {
    uint8_t b;
    return q->read(addr, &b, 1).sig == Signal::kSigsegv;
  }
  bool holds(uint64_t addr, uint8_t byte, uint64_t len) {
    int64_t bad = 0;
    uint8_t found = 0;
    return p->read_expect(addr, byte, len, &bad, &found).ok() && bad < 0;
  }
  int64_t counter(const char* name) { return sys->counter(name); }
};

TEST_F(GuardRegionTest, InstallZapsWhatIsMappedAndFaults) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0x11, 4 * P).ok());
  ASSERT_EQ(p->madvise(a + P, P, MADV_GUARD_INSTALL), 0);
  EXPECT_TRUE(faults(p, a + P));
  EXPECT_EQ(p->fill(a + P, 1, 1).sig, Signal::kSigsegv);
  EXPECT_TRUE(p->page_info(a + P).guard);
  EXPECT_TRUE(p->page_info(a + P).swap);  // a swap-format entry, as pagemap says (PM_SWAP)
  EXPECT_EQ(p->rss_anon(), static_cast<long>(3 * P));
  EXPECT_TRUE(holds(a, 0x11, P));
  EXPECT_TRUE(holds(a + 2 * P, 0x11, 2 * P));
  EXPECT_EQ(counter("madvise.guard_install"), 1);
  EXPECT_EQ(counter("madvise.guard_zap"), 1);
  // Installing again is a no-op; removing gives a fresh zero page.
  ASSERT_EQ(p->madvise(a, 2 * P, MADV_GUARD_INSTALL), 0);
  EXPECT_TRUE(faults(p, a));
  ASSERT_EQ(p->madvise(a, 4 * P, MADV_GUARD_REMOVE), 0);
  EXPECT_FALSE(p->page_info(a + P).guard);
  EXPECT_TRUE(holds(a, 0, 2 * P));
  EXPECT_TRUE(holds(a + 2 * P, 0x11, 2 * P));
}

TEST_F(GuardRegionTest, InstallOnAnEmptyRangeAllocatesTheTable) {
  uint64_t a = map(4 * P);
  const long tables = p->pgtables_bytes();
  ASSERT_EQ(p->madvise(a, 4 * P, MADV_GUARD_INSTALL), 0);
  EXPECT_GT(p->pgtables_bytes(), tables);
  EXPECT_EQ(counter("madvise.guard_zap"), 0);
  for (uint64_t i = 0; i < 4; i++) EXPECT_TRUE(faults(p, a + i * P));
  EXPECT_EQ(p->rss_anon(), 0);
}

TEST_F(GuardRegionTest, InstallInAThpSplitsThePmdAndKeepsTheRest) {
  set("transparent_hugepage/enabled", "always");
  uint64_t a = map_aligned(p, PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 0x22, PMD_SIZE).ok());
  ASSERT_EQ(p->page_info(a).level, 2);
  ASSERT_EQ(p->madvise(a + 8 * P, P, MADV_GUARD_INSTALL), 0);
  EXPECT_EQ(p->page_info(a).level, 1);
  EXPECT_TRUE(faults(p, a + 8 * P));
  EXPECT_TRUE(holds(a, 0x22, 8 * P));
  EXPECT_TRUE(holds(a + 9 * P, 0x22, PMD_SIZE - 9 * P));
}

TEST_F(GuardRegionTest, KeptByDontneedFreeAndMprotect) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0x33, 4 * P).ok());
  ASSERT_EQ(p->madvise(a, P, MADV_GUARD_INSTALL), 0);
  ASSERT_EQ(p->madvise(a, 4 * P, MADV_DONTNEED), 0);
  EXPECT_TRUE(faults(p, a));
  ASSERT_EQ(p->madvise(a, 4 * P, MADV_FREE), 0);
  EXPECT_TRUE(faults(p, a));
  ASSERT_EQ(p->mprotect(a, 4 * P, PROT_READ), 0);
  EXPECT_TRUE(faults(p, a));
  EXPECT_TRUE(holds(a + P, 0, 3 * P));
}

TEST_F(GuardRegionTest, MunmapDropsTheMarkers) {
  uint64_t a = map(4 * P);
  ASSERT_EQ(p->madvise(a, 4 * P, MADV_GUARD_INSTALL), 0);
  ASSERT_EQ(p->munmap(a + P, P), 0);
  ASSERT_EQ(p->mmap(a + P, P, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED), static_cast<long>(a + P));
  EXPECT_TRUE(faults(p, a));
  EXPECT_FALSE(faults(p, a + P));
}

TEST_F(GuardRegionTest, MremapMovesTheMarkers) {
  uint64_t a = map(4 * P);
  ASSERT_EQ(p->madvise(a + 3 * P, P, MADV_GUARD_INSTALL), 0);
  uint64_t t = map(4 * P, PROT_NONE);
  ASSERT_EQ(p->mremap(a, 4 * P, 4 * P, MREMAP_MAYMOVE | MREMAP_FIXED, t), static_cast<long>(t));
  EXPECT_TRUE(faults(p, t + 3 * P));
  EXPECT_FALSE(faults(p, t));
}

TEST_F(GuardRegionTest, ForkCopiesTheMarkersUnlessWipeonfork) {
  uint64_t a = map(4 * P);
  uint64_t w = map(4 * P, PROT_READ);  // no merge with a
  ASSERT_EQ(p->madvise(a, 2 * P, MADV_GUARD_INSTALL), 0);
  ASSERT_EQ(p->mprotect(w, 4 * P, RW), 0);
  ASSERT_EQ(p->madvise(w, 4 * P, MADV_WIPEONFORK), 0);
  ASSERT_EQ(p->madvise(w, 2 * P, MADV_GUARD_INSTALL), 0);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_TRUE(faults(c, a));
  EXPECT_TRUE(faults(c, a + P));
  EXPECT_FALSE(faults(c, a + 2 * P));
  EXPECT_FALSE(faults(c, w));
  EXPECT_EQ(c->madvise(a, 4 * P, MADV_GUARD_REMOVE), 0);
  EXPECT_FALSE(faults(c, a));
  EXPECT_TRUE(faults(p, a));
  EXPECT_TRUE(faults(p, w));
}

TEST_F(GuardRegionTest, GupAndPopulateFail) {
  uint64_t a = map(2 * P);
  ASSERT_EQ(p->madvise(a + P, P, MADV_GUARD_INSTALL), 0);
  GupPages pages;
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a + P, 1, foll::WRITE, &pages), -EFAULT);
  EXPECT_EQ(gup(p, GupEntry::kPinUserPagesFast, a + P, 1, foll::WRITE, &pages), -EFAULT);
  // A range that runs into the marker returns what came before it.
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a, 2, foll::WRITE, &pages), 1);
  pages.release();
  EXPECT_EQ(p->madvise(a, 2 * P, MADV_POPULATE_READ), -EFAULT);
  EXPECT_EQ(p->madvise(a, 2 * P, MADV_POPULATE_WRITE), -EFAULT);
}

TEST_F(GuardRegionTest, LockedHugetlbAndPfnmapRefuse) {
  uint64_t l = map(2 * P, RW, MAP_LOCKED);
  EXPECT_EQ(p->madvise(l, P, MADV_GUARD_INSTALL), -EINVAL);
  EXPECT_EQ(p->madvise(l, P, MADV_GUARD_REMOVE), 0);  // removing destroys nothing
  set("hugepages/hugepages-2048kB/nr_hugepages", "1");
  long h = p->mmap(0, PMD_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB);
  ASSERT_GT(h, 0);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(h), PMD_SIZE, MADV_GUARD_INSTALL), -EINVAL);
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(h), PMD_SIZE, MADV_GUARD_REMOVE), -EINVAL);
}

TEST_F(GuardRegionTest, SharedFileMappingsTakeMarkersToo) {
  int fd = sys->create_file(4 * P);
  ASSERT_GE(fd, 0);
  long s = p->mmap_file(0, 4 * P, RW, MAP_SHARED, fd, 0);
  ASSERT_EQ(sys->close_file(fd), 0);
  ASSERT_GT(s, 0);
  const uint64_t a = static_cast<uint64_t>(s);
  ASSERT_TRUE(p->fill(a, 0x44, 4 * P).ok());
  ASSERT_EQ(p->madvise(a, P, MADV_GUARD_INSTALL), 0);
  EXPECT_TRUE(faults(p, a));
  ASSERT_EQ(p->madvise(a, P, MADV_GUARD_REMOVE), 0);
  EXPECT_TRUE(holds(a, 0x44, 4 * P));  // the page cache kept the data
}

}  // namespace
}  // namespace mmlab
