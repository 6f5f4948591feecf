// shmem THP made by collapse (mm/khugepaged.c's collapse_file and
// collapse_pte_mapped_thp) and the shmem THP controls (shmem_enabled and
// hugepages-<N>kB/shmem_enabled): the page-cache side the scenarios cannot
// see (the folio in the cache, its references, its split at a hole's edge).
// tests/scenarios/shmem_thp.mms shows what a process sees.
#include <cstring>
#include <string>
#include <vector>

#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/settings.h"
#include "file_fixture.h"

namespace mmlab::test {
namespace {

class ShmemThpTest : public FileFixture {
 protected:
  // A shared mapping of fd whose start is PMD-aligned: 4M mapped, the
  // aligned 2M inside it returned (the file offset is addr - base).
  uint64_t map_pmd(int fd, uint64_t* off) {
    const uint64_t base = map(p, fd, 4 * PMD_SIZE / 2, MAP_SHARED);
    const uint64_t a = round_up(base, PMD_SIZE);
    *off = a - base;
    return a;
  }
  // A 4M memfd-like file whose PMD-aligned 2M is written and collapsed by
  // MADV_COLLAPSE: its address (0 if the collapse failed), fd and offset.
  struct Collapsed {
    int fd;
    uint64_t off, addr;
  };
  Collapsed collapsed_thp() {
    Collapsed c{create(2 * PMD_SIZE), 0, 0};
    const uint64_t a = map_pmd(c.fd, &c.off);
    fill(a, PMD_SIZE);
    if (p->madvise(a, PMD_SIZE, MADV_COLLAPSE) == 0) c.addr = a;
    return c;
  }
  // collapsed_thp() on a system with a swap device of `kind`, then
  // MADV_PAGEOUT of the THP; first is the THP's first file index.
  struct PagedOut {
    int fd;
    uint64_t off, addr, first;
  };
  PagedOut paged_out_thp(SwapKind kind) {
    EXPECT_EQ(sys->add_swap(16ull << 20, kind), 0);
    const Collapsed c = collapsed_thp();
    EXPECT_NE(c.addr, 0u) << "MADV_COLLAPSE failed";
    if (c.addr) {
      EXPECT_EQ(p->madvise(c.addr, PMD_SIZE, MADV_PAGEOUT), 0);
    }
    return {c.fd, c.off, c.addr, c.off >> PAGE_SHIFT};
  }
  void fill(uint64_t addr, uint64_t len) {
    for (uint64_t o = 0; o < len; o += PAGE_SIZE) poke(p, addr + o, static_cast<uint8_t>(1 + (o >> PAGE_SHIFT) % 200));
  }
  bool filled(uint64_t addr, uint64_t len) {
    for (uint64_t o = 0; o < len; o += PAGE_SIZE)
      if (peek(p, addr + o) != static_cast<uint8_t>(1 + (o >> PAGE_SHIFT) % 200)) return false;
    return true;
  }
  std::string read(const std::string& path) {
    std::string v;
    EXPECT_EQ(sys->sysfs_read(path, &v), 0) << path;
    return v;
  }
};

// MADV_COLLAPSE of a shared mapping of a memfd: the range's page-cache
// pages become one PMD-order folio, mapped by a PMD, its data the pages'.
// The cache holds 512 references and the PMD one.
TEST_F(ShmemThpTest, MadviseCollapseMakesOnePmdFolio) {
  const auto [fd, off, a] = collapsed_thp();
  ASSERT_NE(a, 0u) << "MADV_COLLAPSE failed";
  PageInfo pi = p->page_info(a + 5 * PAGE_SIZE);
  EXPECT_EQ(pi.level, 2);
  EXPECT_EQ(pi.order, static_cast<int>(PMD_ORDER));
  Folio* folio = cache_folio(fd, off >> PAGE_SHIFT);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), PMD_ORDER);
  EXPECT_EQ(folio->page.index, off >> PAGE_SHIFT);
  EXPECT_EQ(folio_ref_count(folio), static_cast<int>(HPAGE_PMD_NR) + 1);
  EXPECT_EQ(cache_folio(fd, (off >> PAGE_SHIFT) + 511), folio);
  EXPECT_TRUE(filled(a, PMD_SIZE));
  // A second MADV_COLLAPSE finds it PMD-mapped: nothing to do, success.
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
}

// A hole punched inside the THP splits it (every mapping goes first, the
// pages are refaulted): the punched page reads zeros, the others keep their
// data, and the folios left are order 0.
TEST_F(ShmemThpTest, HoleInsideTheThpSplitsIt) {
  const auto [fd, off, a] = collapsed_thp();
  ASSERT_NE(a, 0u) << "MADV_COLLAPSE failed";
  ASSERT_EQ(sys->file_punch_hole(fd, static_cast<int64_t>(off + 7 * PAGE_SIZE), PAGE_SIZE), 0);
  EXPECT_EQ(p->page_info(a).level, 0);  // unmapped by the split, not yet refaulted
  EXPECT_EQ(cache_folio(fd, (off >> PAGE_SHIFT) + 7), nullptr);
  Folio* left = cache_folio(fd, (off >> PAGE_SHIFT) + 6);
  ASSERT_TRUE(left);
  EXPECT_EQ(folio_order(left), 0u);
  EXPECT_EQ(peek(p, a + 7 * PAGE_SIZE), 0);
  for (uint64_t o = 0; o < PMD_SIZE; o += PAGE_SIZE) {
    if (o == 7 * PAGE_SIZE) continue;
    ASSERT_EQ(peek(p, a + o), static_cast<uint8_t>(1 + (o >> PAGE_SHIFT) % 200)) << o;
  }
}

// Truncating the file into the THP splits it too; the part below the new
// size stays.
TEST_F(ShmemThpTest, TruncateIntoTheThpSplitsIt) {
  const auto [fd, off, a] = collapsed_thp();
  ASSERT_NE(a, 0u) << "MADV_COLLAPSE failed";
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(off + 3 * PAGE_SIZE)), 0);
  EXPECT_EQ(cache_folio(fd, (off >> PAGE_SHIFT) + 3), nullptr);
  Folio* kept = cache_folio(fd, (off >> PAGE_SHIFT) + 2);
  ASSERT_TRUE(kept);
  EXPECT_EQ(folio_order(kept), 0u);
  EXPECT_EQ(peek(p, a + 2 * PAGE_SIZE), 3);
}

// The file's swap entries for [first, first + nr) and the large entry
// recorded at first, if any (its order, else -1).
struct SwappedRange {
  size_t entries;
  int order;
};
SwappedRange swapped_range(File* f, uint64_t first, uint64_t nr) {
  MutexGuard g(&f->lock);
  SwappedRange r{0, -1};
  for (uint64_t i = first; i < first + nr; i++) r.entries += f->swapped.count(i);
  auto it = f->swapped_order.find(first);
  if (it != f->swapped_order.end()) r.order = static_cast<int>(it->second);
  return r;
}

// shmem_writeout() of a THP on a block device: written whole (one large
// swap entry of order 9 in place of the folio), and touched while its
// write waits in the swap cache, it comes back whole.
TEST_F(ShmemThpTest, PageoutSwapsTheThpWholeOnABlockDevice) {
  const auto [fd, off, a, first] = paged_out_thp(SwapKind::kBlkdev);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(cache_folio(fd, first), nullptr);
  const SwappedRange r = swapped_range(file(fd), first, HPAGE_PMD_NR);
  EXPECT_EQ(r.entries, HPAGE_PMD_NR);
  EXPECT_EQ(r.order, static_cast<int>(PMD_ORDER));
  EXPECT_EQ(p->page_info(a).level, 0);
  EXPECT_EQ(peek(p, a + 9 * PAGE_SIZE), 10);
  Folio* folio = cache_folio(fd, first + 9);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), PMD_ORDER);
  EXPECT_EQ(folio->page.index, first);
  EXPECT_EQ(swapped_range(file(fd), first, HPAGE_PMD_NR).entries, 0u);
  EXPECT_TRUE(filled(a, PMD_SIZE));
}

// zram frees the folio in the same pass; the read fault reads the large
// entry into one new folio of its order (shmem_swap_alloc_folio).
TEST_F(ShmemThpTest, PageoutOnZramReadsTheThpBackWhole) {
  const auto [fd, off, a, first] = paged_out_thp(SwapKind::kZram);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(swapped_range(file(fd), first, HPAGE_PMD_NR).order, static_cast<int>(PMD_ORDER));
  EXPECT_EQ(peek(p, a + 300 * PAGE_SIZE), static_cast<uint8_t>(1 + 300 % 200));
  Folio* folio = cache_folio(fd, first);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), PMD_ORDER);
  EXPECT_TRUE(filled(a, PMD_SIZE));
}

// A swap file gives no large folio its slots: the THP is split and its
// pages go one by one (order-0 entries, no large one recorded).
TEST_F(ShmemThpTest, PageoutSplitsTheThpOnASwapFile) {
  const auto [fd, off, a, first] = paged_out_thp(SwapKind::kFile);
  ASSERT_NE(a, 0u);
  const SwappedRange r = swapped_range(file(fd), first, HPAGE_PMD_NR);
  EXPECT_EQ(r.entries, HPAGE_PMD_NR);
  EXPECT_EQ(r.order, -1);
  EXPECT_EQ(peek(p, a + 5 * PAGE_SIZE), 6);
  Folio* folio = cache_folio(fd, first + 5);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), 0u);
  EXPECT_TRUE(filled(a, PMD_SIZE));
}

// A truncation into a large swap entry frees the pages past the new end
// and leaves the rest order 0: on zram they are read back one by one, not
// as the whole entry.
TEST_F(ShmemThpTest, TruncationIntoALargeSwapEntryLeavesOrderZero) {
  const auto [fd, off, a, first] = paged_out_thp(SwapKind::kZram);
  ASSERT_NE(a, 0u);
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(off + 3 * PAGE_SIZE)), 0);
  const SwappedRange r = swapped_range(file(fd), first, HPAGE_PMD_NR);
  EXPECT_EQ(r.entries, 3u);
  EXPECT_EQ(r.order, -1);
  EXPECT_EQ(peek(p, a + 2 * PAGE_SIZE), 3);
  Folio* folio = cache_folio(fd, first + 2);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), 0u);
  EXPECT_EQ(peek(p, a), 1);
}

// The same on a block device while the THP waits in the swap cache: the
// pages left come back one by one, copied out of the large folio, which
// leaves the swap cache once no entry needs it.
TEST_F(ShmemThpTest, TruncationIntoALargeSwapCacheFolioCopiesThePagesLeft) {
  const auto [fd, off, a, first] = paged_out_thp(SwapKind::kBlkdev);
  ASSERT_NE(a, 0u);
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(off + 2 * PAGE_SIZE)), 0);
  EXPECT_EQ(peek(p, a + PAGE_SIZE), 2);
  EXPECT_EQ(peek(p, a), 1);
  Folio* folio = cache_folio(fd, first);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), 0u);
  EXPECT_EQ(swapped_range(file(fd), first, HPAGE_PMD_NR).entries, 0u);
}

// shmem_enabled and the per-size shmem_enabled: the kernel's words, its
// defaults (never; the PMD size inherits), and its two refusals: force
// while a size other than the PMD's inherits, and inherit of such a size
// while shmem_enabled is force.
TEST_F(ShmemThpTest, Controls) {
  EXPECT_EQ(read("transparent_hugepage/shmem_enabled"), "always within_size advise [never] deny force");
  EXPECT_EQ(read("transparent_hugepage/hugepages-2048kB/shmem_enabled"), "always [inherit] within_size advise never");
  EXPECT_EQ(read("transparent_hugepage/hugepages-8kB/shmem_enabled"), "always inherit within_size advise [never]");
  set("transparent_hugepage/shmem_enabled", "within_size");
  EXPECT_EQ(read("transparent_hugepage/shmem_enabled"), "always [within_size] advise never deny force");
  set("transparent_hugepage/hugepages-64kB/shmem_enabled", "inherit");
  EXPECT_EQ(sys->sysfs_write("transparent_hugepage/shmem_enabled", "force"), -EINVAL);
  set("transparent_hugepage/hugepages-64kB/shmem_enabled", "never");
  set("transparent_hugepage/shmem_enabled", "force");
  EXPECT_EQ(sys->sysfs_write("transparent_hugepage/hugepages-64kB/shmem_enabled", "inherit"), -EINVAL);
  set("transparent_hugepage/hugepages-2048kB/shmem_enabled", "inherit");
  EXPECT_EQ(sys->sysfs_write("transparent_hugepage/shmem_enabled", "sometimes"), -EINVAL);
  EXPECT_EQ(sys->sysfs_write("transparent_hugepage/hugepages-8kB/enabled", "always"), -ENOENT);
}

// Which shmem VMAs the collapse paths may make PMD THPs of: a memfd follows
// shmem_enabled (the internal mount's huge=), shared anonymous memory the
// per-size controls; deny refuses even MADV_COLLAPSE.
TEST_F(ShmemThpTest, AllowableOrders) {
  const int fd = create(PMD_SIZE);
  File* f = file(fd);
  Settings& s = sys->kernel()->settings;
  EXPECT_EQ(shmem_allowable_huge_orders(f, nullptr, 0, false), 0u);           // never
  EXPECT_EQ(shmem_allowable_huge_orders(f, nullptr, 0, true), BIT(PMD_ORDER));  // MADV_COLLAPSE
  set("transparent_hugepage/shmem_enabled", "within_size");
  EXPECT_EQ(shmem_allowable_huge_orders(f, nullptr, 0, false) & BIT(PMD_ORDER), BIT(PMD_ORDER));  // 2M fits
  EXPECT_EQ(shmem_allowable_huge_orders(f, nullptr, 512, false), 0u);                           // past EOF
  set("transparent_hugepage/shmem_enabled", "deny");
  EXPECT_EQ(shmem_allowable_huge_orders(f, nullptr, 0, true), 0u);
  EXPECT_EQ(s.shm_mnt_huge.load(), ShmemHuge::kWithinSize);  // deny leaves the mount's huge= as it was
}

// A shmem fault on a hole allocates a PMD-order folio where shmem_enabled
// ("advise" and MADV_HUGEPAGE here) allows it: the page cache holds one
// folio for the range, zeroed but where written, mapped by a PMD.
TEST_F(ShmemThpTest, FaultAllocatesAPmdFolio) {
  set("transparent_hugepage/shmem_enabled", "advise");
  const int fd = create(2 * PMD_SIZE);
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);  // holes, as after memfd_create
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(2 * PMD_SIZE)), 0);
  uint64_t off;
  const uint64_t a = map_pmd(fd, &off);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  poke(p, a + 9 * PAGE_SIZE, 0x5a);
  Folio* folio = cache_folio(fd, off >> PAGE_SHIFT);
  ASSERT_TRUE(folio);
  EXPECT_EQ(folio_order(folio), PMD_ORDER);
  EXPECT_EQ(p->page_info(a).level, 2);
  EXPECT_EQ(peek(p, a + 9 * PAGE_SIZE), 0x5a);
  EXPECT_EQ(peek(p, a + 10 * PAGE_SIZE), 0);
  // Outside the MADV_HUGEPAGE range (the other half of the mapping) the
  // same file gets small folios.
  const uint64_t other = off ? a - PAGE_SIZE : a + PMD_SIZE;
  poke(p, other, 0x5b);
  EXPECT_EQ(p->page_info(other).order, 0);
}

// The per-size controls govern a memfd: with 64K "always" its faults make
// 64K folios; MADV_COLLAPSE copies them into one PMD-order folio, and a
// hole punched into one of them splits it.
TEST_F(ShmemThpTest, MthpFaultsCollapseAndSplit) {
  set("transparent_hugepage/hugepages-64kB/shmem_enabled", "always");
  const int fd = create(2 * PMD_SIZE);
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(2 * PMD_SIZE)), 0);
  uint64_t off;
  const uint64_t a = map_pmd(fd, &off);
  fill(a, PMD_SIZE);
  Folio* m = cache_folio(fd, (off >> PAGE_SHIFT) + 20);
  ASSERT_TRUE(m);
  EXPECT_EQ(folio_order(m), 4u);
  EXPECT_EQ(m->page.index, (off >> PAGE_SHIFT) + 16);
  ASSERT_EQ(sys->file_punch_hole(fd, static_cast<int64_t>(off + 20 * PAGE_SIZE), PAGE_SIZE), 0);
  EXPECT_EQ(cache_folio(fd, (off >> PAGE_SHIFT) + 20), nullptr);
  Folio* left = cache_folio(fd, (off >> PAGE_SHIFT) + 21);
  ASSERT_TRUE(left);
  EXPECT_EQ(folio_order(left), 0u);
  poke(p, a + 20 * PAGE_SIZE, static_cast<uint8_t>(1 + 20 % 200));  // refill the hole
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  Folio* thp = cache_folio(fd, off >> PAGE_SHIFT);
  ASSERT_TRUE(thp);
  EXPECT_EQ(folio_order(thp), PMD_ORDER);
  EXPECT_TRUE(filled(a, PMD_SIZE));
}

}  // namespace
}  // namespace mmlab::test
