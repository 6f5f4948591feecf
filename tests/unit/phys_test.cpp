// Unit tests of the phys layer: the buddy allocator and per-CPU lists, zones,
// gigantic allocation, folio metadata, the zero pages, PhysMem::of() and the
// folio lock.
#include "phys/phys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace mmlab {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

std::unique_ptr<PhysMem> make_phys(Stats* stats, uint64_t ram, uint64_t movable = 0) {
  PhysConfig cfg;
  cfg.ram_bytes = ram;
  cfg.movable_bytes = movable;
  int err = 1;
  auto pm = PhysMem::create(cfg, stats, &err);
  EXPECT_NE(pm, nullptr);
  EXPECT_EQ(err, 0);
  return pm;
}

// alloc_pages() hands out refcount 1; free_pages() expects the count dropped.
void put_pages(PhysMem& pm, Page* p, unsigned order) {
  ASSERT_TRUE(folio_ref_sub_and_test(reinterpret_cast<Folio*>(p), 1));
  pm.free_pages(p, order);
}

uint64_t count_free_by_pfn(const PhysMem& pm) {
  uint64_t n = 0;
  for (pfn_t pfn = 0; pfn < pm.nr_frames(); pfn++) n += pm.page_is_free(pfn);
  return n;
}

// Takes every order-`order` block the allocator will give.
std::vector<Page*> alloc_all(PhysMem& pm, unsigned order, gfp_t gfp = GFP_KERNEL) {
  std::vector<Page*> v;
  while (Page* p = pm.alloc_pages(gfp, order)) v.push_back(p);
  return v;
}

TEST(Phys, PageIsStructPageSized) {
  EXPECT_EQ(sizeof(Page), 64u);
  EXPECT_EQ(sizeof(Folio), 64u);
}

TEST(Phys, CreateRejectsBadConfigs) {
  Stats stats;
  struct Case {
    uint64_t ram, movable;
  } cases[] = {{0, 0}, {3 * MiB, 0}, {64 * MiB + PAGE_SIZE, 0}, {64 * MiB, 2 * MiB}, {64 * MiB, 64 * MiB},
               {64 * MiB, 128 * MiB}};
  for (const Case& c : cases) {
    PhysConfig cfg;
    cfg.ram_bytes = c.ram;
    cfg.movable_bytes = c.movable;
    int err = 0;
    EXPECT_EQ(PhysMem::create(cfg, &stats, &err), nullptr) << c.ram << " " << c.movable;
    EXPECT_EQ(err, -EINVAL);
  }
}

TEST(Phys, CreateWithHostOptions) {
  Stats stats;
  for (HostThp thp : {HostThp::kDefault, HostThp::kHugepage, HostThp::kNohugepage}) {
    PhysConfig cfg;
    cfg.ram_bytes = 16 * MiB;
    cfg.prefault = true;
    cfg.host_thp = thp;
    int err = 1;
    auto pm = PhysMem::create(cfg, &stats, &err);
    ASSERT_NE(pm, nullptr) << host_thp_name(thp);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(pm->nr_free_pages(), pm->nr_frames() - 1);
  }
  EXPECT_STREQ(host_thp_name(HostThp::kHugepage), "hugepage");
  EXPECT_STREQ(zone_name(ZONE_NORMAL), "Normal");
  EXPECT_STREQ(zone_name(ZONE_MOVABLE), "Movable");
}

TEST(Phys, InitialState) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB);
  EXPECT_EQ(pm->nr_frames(), 64 * MiB / PAGE_SIZE);
  EXPECT_EQ(pm->zone_pages(ZONE_NORMAL), pm->nr_frames());
  EXPECT_EQ(pm->zone_pages(ZONE_MOVABLE), 0u);
  EXPECT_EQ(pm->nr_free_pages(), pm->nr_frames() - pm->nr_reserved_pages());

  Page* zp = pm->zero_page();
  ASSERT_NE(zp, nullptr);
  EXPECT_TRUE(PageReserved(zp));
  EXPECT_EQ(folio_ref_count(page_folio(zp)), 1);
  EXPECT_EQ(pm->page_to_pfn(zp), pm->zero_pfn());
  EXPECT_TRUE(pm->is_zero_pfn(pm->zero_pfn()));
  EXPECT_FALSE(pm->page_is_free(pm->zero_pfn()));
  const auto* bytes = static_cast<const uint8_t*>(pm->page_address(zp));
  EXPECT_TRUE(std::all_of(bytes, bytes + PAGE_SIZE, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(count_free_by_pfn(*pm), pm->nr_free_pages());
  EXPECT_EQ(stats.read(VmStat::pgalloc_normal), 0);  // building the machine is not counted
}

TEST(Phys, RoundTripEveryOrder) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB);
  for (unsigned order = 0; order <= MAX_PAGE_ORDER; order++) {
    SCOPED_TRACE(order);
    const uint64_t before = pm->nr_free_pages();
    Page* p = pm->alloc_pages(GFP_KERNEL, order);
    ASSERT_NE(p, nullptr);
    const pfn_t pfn = pm->page_to_pfn(p);
    EXPECT_EQ(pfn % (1ull << order), 0u);  // naturally aligned
    EXPECT_EQ(pm->nr_free_pages(), before - (1ull << order));
    EXPECT_EQ(folio_ref_count(reinterpret_cast<Folio*>(p)), 1);
    EXPECT_FALSE(test_bit(PG_head, p));  // not a folio
    for (uint64_t i = 0; i < (1ull << order); i++) EXPECT_FALSE(pm->page_is_free(pfn + i));
    put_pages(*pm, p, order);
    EXPECT_EQ(pm->nr_free_pages(), before);
    EXPECT_TRUE(pm->page_is_free(pfn));

    Folio* f = pm->folio_alloc(GFP_HIGHUSER_MOVABLE, order);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(folio_order(f), order);
    EXPECT_EQ(pm->nr_free_pages(), before - (1ull << order));
    folio_put(f);
    EXPECT_EQ(pm->nr_free_pages(), before);
  }
  EXPECT_EQ(count_free_by_pfn(*pm), pm->nr_free_pages());
  EXPECT_EQ(stats.read(VmStat::pgfree), stats.read(VmStat::pgalloc_normal));
}

TEST(Phys, BuddyMergesBackToMaxOrder) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB);
  const uint64_t total = pm->nr_frames();
  // Scatter: everything as order-0 pages, then free every other page first.
  std::vector<Page*> pages = alloc_all(*pm, 0);
  EXPECT_EQ(pages.size(), total - 1);
  EXPECT_EQ(pm->nr_free_pages(), 0u);
  for (size_t i = 0; i < pages.size(); i += 2) put_pages(*pm, pages[i], 0);
  for (size_t i = 1; i < pages.size(); i += 2) put_pages(*pm, pages[i], 0);
  EXPECT_EQ(pm->nr_free_pages(), total - 1);
  pm->drain_all_pages();
  EXPECT_EQ(pm->nr_free_pages(), total - 1);
  EXPECT_EQ(count_free_by_pfn(*pm), total - 1);
  // All merged: every max-order block but the one holding the zero page.
  std::vector<Page*> blocks = alloc_all(*pm, MAX_PAGE_ORDER);
  EXPECT_EQ(blocks.size(), (total >> MAX_PAGE_ORDER) - 1);
  EXPECT_EQ(pm->nr_free_pages(), (1ull << MAX_PAGE_ORDER) - 1);
  for (Page* b : blocks) put_pages(*pm, b, MAX_PAGE_ORDER);
  EXPECT_EQ(pm->nr_free_pages(), total - 1);
}

TEST(Phys, PcpPathAndDrain) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB);
  const uint64_t total_free = pm->nr_free_pages();
  stats.reset_events();

  // The first order-0 allocation refills a batch under one zone->lock; the
  // next ones come from this CPU's list without it.
  std::vector<Page*> v;
  for (int i = 0; i < 10; i++) v.push_back(pm->alloc_pages(GFP_KERNEL, 0));
  EXPECT_EQ(stats.read(Event::alloc_zone_lock), 1u);
  EXPECT_EQ(stats.read(Event::alloc_pcp), 10u);
  EXPECT_EQ(pm->nr_free_pages(), total_free - 10);
  // Pages waiting on the pcp list still count as free.
  uint64_t pcp_free = 0;
  for (pfn_t pfn = 0; pfn < pm->nr_frames(); pfn++) {
    Page* p = pm->pfn_to_page(pfn);
    if (test_bit(PG_pcp, p)) pcp_free++;
  }
  EXPECT_GT(pcp_free, 0u);
  EXPECT_EQ(count_free_by_pfn(*pm), total_free - 10);

  // Frees go to the pcp list: no zone lock.
  for (Page* p : v) put_pages(*pm, p, 0);
  EXPECT_EQ(stats.read(Event::alloc_zone_lock), 1u);
  EXPECT_EQ(pm->nr_free_pages(), total_free);

  // Orders 4..8 and 10 bypass the lists.
  Page* p4 = pm->alloc_pages(GFP_KERNEL, 4);
  EXPECT_EQ(stats.read(Event::alloc_zone_lock), 2u);
  EXPECT_EQ(stats.read(Event::alloc_pcp), 10u);
  put_pages(*pm, p4, 4);
  EXPECT_EQ(stats.read(Event::alloc_zone_lock), 3u);

  // THP order: a batch of two blocks; the second is served from the list.
  Folio* t1 = pm->folio_alloc(GFP_TRANSHUGE, pageblock_order);
  Folio* t2 = pm->folio_alloc(GFP_TRANSHUGE, pageblock_order);
  ASSERT_NE(t1, nullptr);
  ASSERT_NE(t2, nullptr);
  EXPECT_EQ(stats.read(Event::alloc_zone_lock), 4u);
  EXPECT_EQ(stats.read(Event::alloc_pcp), 12u);
  folio_put(t1);
  folio_put(t2);

  // Draining returns everything to the buddy lists: no PG_pcp page is left.
  pm->drain_all_pages();
  EXPECT_EQ(pm->nr_free_pages(), total_free);
  for (pfn_t pfn = 0; pfn < pm->nr_frames(); pfn++) ASSERT_FALSE(test_bit(PG_pcp, pm->pfn_to_page(pfn))) << pfn;
  EXPECT_EQ(count_free_by_pfn(*pm), total_free);
}

TEST(Phys, PcpListGivesBackPastHighMark) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB);
  const uint64_t total_free = pm->nr_free_pages();
  std::vector<Page*> v;
  for (int i = 0; i < 2000; i++) v.push_back(pm->alloc_pages(GFP_KERNEL, 0));
  stats.reset_events();
  for (Page* p : v) put_pages(*pm, p, 0);
  EXPECT_GT(stats.read(Event::alloc_zone_lock), 0u);  // batches went back to the buddy
  EXPECT_EQ(pm->nr_free_pages(), total_free);
  uint64_t on_pcp = 0;
  for (pfn_t pfn = 0; pfn < pm->nr_frames(); pfn++) on_pcp += test_bit(PG_pcp, pm->pfn_to_page(pfn));
  EXPECT_LE(on_pcp, 6u * 63u);
}

TEST(Phys, MovableZoneRouting) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB, 32 * MiB);
  EXPECT_EQ(pm->zone_pages(ZONE_MOVABLE), 32 * MiB / PAGE_SIZE);
  EXPECT_EQ(pm->zone_pages(ZONE_NORMAL), 32 * MiB / PAGE_SIZE);
  EXPECT_EQ(pm->page_zonenum(pm->zero_page()), ZONE_NORMAL);

  for (unsigned order : {0u, 4u, 9u, 10u}) {
    SCOPED_TRACE(order);
    Page* m = pm->alloc_pages(GFP_HIGHUSER_MOVABLE, order);
    Page* pin = pm->alloc_pages(GFP_HIGHUSER_MOVABLE | __GFP_PINNABLE, order);
    Page* k = pm->alloc_pages(GFP_KERNEL, order);
    ASSERT_TRUE(m && pin && k);
    EXPECT_EQ(pm->page_zonenum(m), ZONE_MOVABLE);
    EXPECT_EQ(pm->page_zonenum(pin), ZONE_NORMAL);
    EXPECT_EQ(pm->page_zonenum(k), ZONE_NORMAL);
    put_pages(*pm, m, order);
    put_pages(*pm, pin, order);
    put_pages(*pm, k, order);
  }
  EXPECT_GT(stats.read(VmStat::pgalloc_movable), 0);

  // Movable allocations fall back to ZONE_NORMAL when ZONE_MOVABLE is full.
  std::vector<Page*> movable = alloc_all(*pm, MAX_PAGE_ORDER, GFP_HIGHUSER_MOVABLE);
  ASSERT_FALSE(movable.empty());
  size_t in_normal = std::count_if(movable.begin(), movable.end(),
                                   [&](Page* p) { return pm->page_zonenum(p) == ZONE_NORMAL; });
  EXPECT_EQ(movable.size() - in_normal, pm->zone_pages(ZONE_MOVABLE) >> MAX_PAGE_ORDER);
  EXPECT_EQ(in_normal, (pm->zone_pages(ZONE_NORMAL) >> MAX_PAGE_ORDER) - 1);
  for (Page* p : movable) put_pages(*pm, p, MAX_PAGE_ORDER);
  EXPECT_EQ(pm->nr_free_pages(ZONE_MOVABLE), pm->zone_pages(ZONE_MOVABLE));
  EXPECT_EQ(pm->nr_free_pages(ZONE_NORMAL), pm->zone_pages(ZONE_NORMAL) - 1);
}

TEST(Phys, GiganticAllocation) {
  Stats stats;
  auto pm = make_phys(&stats, 2 * GiB);
  const uint64_t total_free = pm->nr_free_pages();
  Folio* f = pm->folio_alloc(GFP_KERNEL, MAX_FOLIO_ORDER);
  ASSERT_NE(f, nullptr);
  const pfn_t pfn = folio_pfn(f);
  EXPECT_EQ(pfn % (1ull << MAX_FOLIO_ORDER), 0u);
  EXPECT_NE(pfn, 0u);  // the first GiB holds the zero page
  EXPECT_EQ(folio_order(f), MAX_FOLIO_ORDER);
  EXPECT_EQ(folio_nr_pages(f), long{HPAGE_PUD_NR});
  Page* last = folio_page(f, HPAGE_PUD_NR - 1);
  EXPECT_EQ(page_folio(last), f);
  EXPECT_EQ(pm->nr_free_pages(), total_free - HPAGE_PUD_NR);
  EXPECT_FALSE(pm->page_is_free(pfn + 12345));
  // Only one 1 GiB range is wholly free.
  EXPECT_EQ(pm->folio_alloc(GFP_KERNEL, MAX_FOLIO_ORDER), nullptr);
  folio_put(f);
  EXPECT_EQ(pm->nr_free_pages(), total_free);
  EXPECT_TRUE(pm->page_is_free(pfn + 12345));

  // Orders above the folio limit are refused.
  EXPECT_EQ(pm->alloc_pages(GFP_KERNEL, MAX_FOLIO_ORDER + 1), nullptr);
}

TEST(Phys, GiganticFailsWhenFragmented) {
  Stats stats;
  auto pm = make_phys(&stats, 2 * GiB);
  const uint64_t total_free = pm->nr_free_pages();
  // Hold one max-order block in each 1 GiB range, free the rest.
  std::vector<Page*> blocks = alloc_all(*pm, MAX_PAGE_ORDER);
  std::vector<Page*> held;
  for (Page* b : blocks) {
    const pfn_t gib = pm->page_to_pfn(b) >> MAX_FOLIO_ORDER;
    if (std::none_of(held.begin(), held.end(),
                     [&](Page* h) { return (pm->page_to_pfn(h) >> MAX_FOLIO_ORDER) == gib; }))
      held.push_back(b);
    else
      put_pages(*pm, b, MAX_PAGE_ORDER);
  }
  ASSERT_EQ(held.size(), 2u);
  // Plenty of free memory, but no free naturally aligned 1 GiB range.
  Page* p0 = pm->alloc_pages(GFP_KERNEL, 0);  // leaves a batch on this CPU's list
  ASSERT_NE(p0, nullptr);
  EXPECT_EQ(pm->folio_alloc(GFP_KERNEL, MAX_FOLIO_ORDER), nullptr);
  EXPECT_EQ(pm->nr_free_pages(), total_free - 2 * (1ull << MAX_PAGE_ORDER) - 1);
  put_pages(*pm, p0, 0);
  // Releasing the hole in the second GiB makes it possible again: the pcp
  // batch taken from the first GiB's split block must not matter.
  Page* second = *std::max_element(held.begin(), held.end(),
                                   [&](Page* a, Page* b) { return pm->page_to_pfn(a) < pm->page_to_pfn(b); });
  put_pages(*pm, second, MAX_PAGE_ORDER);
  Folio* f = pm->folio_alloc(GFP_KERNEL, MAX_FOLIO_ORDER);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(folio_pfn(f), 1ull << MAX_FOLIO_ORDER);
  folio_put(f);
  for (Page* h : held)
    if (h != second) put_pages(*pm, h, MAX_PAGE_ORDER);
  EXPECT_EQ(pm->nr_free_pages(), total_free);
}

TEST(Phys, ExhaustionReturnsNull) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  const uint64_t total_free = pm->nr_free_pages();
  std::vector<Page*> pages = alloc_all(*pm, 0);
  EXPECT_EQ(pages.size(), total_free);
  EXPECT_EQ(pm->nr_free_pages(), 0u);
  for (unsigned order : {0u, 1u, 3u, 4u, 9u, 10u, 11u, 18u}) {
    EXPECT_EQ(pm->alloc_pages(GFP_KERNEL, order), nullptr) << order;
    EXPECT_EQ(pm->folio_alloc(GFP_HIGHUSER_MOVABLE, order), nullptr) << order;
  }
  EXPECT_EQ(pm->mm_get_huge_zero_folio(), nullptr);
  EXPECT_EQ(stats.read(VmStat::thp_zero_page_alloc_failed), 1);
  EXPECT_EQ(stats.read(VmStat::thp_zero_page_alloc), 0);
  for (Page* p : pages) put_pages(*pm, p, 0);
  EXPECT_EQ(pm->nr_free_pages(), total_free);
  // The memory is usable again in large blocks (drained from the pcp lists on demand).
  std::vector<Page*> big = alloc_all(*pm, MAX_PAGE_ORDER);
  EXPECT_EQ(big.size(), (pm->nr_frames() >> MAX_PAGE_ORDER) - 1);
  for (Page* p : big) put_pages(*pm, p, MAX_PAGE_ORDER);
  EXPECT_EQ(pm->nr_free_pages(), total_free);
}

TEST(Phys, FolioMetadata) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB);
  for (unsigned order : {1u, 2u, 4u, 9u, 10u}) {
    SCOPED_TRACE(order);
    Folio* f = pm->folio_alloc(GFP_HIGHUSER_MOVABLE, order);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(folio_test_large(f));
    EXPECT_EQ(folio_order(f), order);
    EXPECT_EQ(folio_nr_pages(f), 1l << order);
    EXPECT_EQ(folio_ref_count(f), 1);
    EXPECT_EQ(folio_mapcount(f), 0);
    EXPECT_EQ(folio_entire_mapcount(f), 0);
    EXPECT_EQ(folio_pincount(f), 0);
    EXPECT_FALSE(folio_maybe_dma_pinned(f));
    EXPECT_FALSE(folio_test_locked(f));
    EXPECT_FALSE(PageTail(&f->page));
    EXPECT_EQ(page_folio(&f->page), f);
    Page* p1 = folio_page(f, 1);
    EXPECT_EQ(p1->f1.nr_pages_mapped, 0);
    EXPECT_EQ(p1->mm_id[0], 0);
    EXPECT_EQ(p1->mm_id[1], 0);
    EXPECT_EQ(p1->mm_id_mapcount[0], 0);
    EXPECT_EQ(p1->mm_id_mapcount[1], 0);
    for (long i = 1; i < folio_nr_pages(f); i++) {
      Page* t = folio_page(f, i);
      ASSERT_EQ(t->compound_head, reinterpret_cast<uint64_t>(f) | 1);
      ASSERT_TRUE(PageTail(t));
      ASSERT_EQ(page_folio(t), f);
      ASSERT_EQ(t->refcount, 0);
      ASSERT_EQ(t->mapcount, 0);
      ASSERT_TRUE(folio_contains_page(f, t));
    }
    EXPECT_FALSE(folio_contains_page(f, folio_page(f, folio_nr_pages(f))));
    // Dirty the metadata the way upper layers do; freeing resets it.
    folio_set_anon(f);
    folio_set_dirty(f);
    SetPageAnonExclusive(folio_page(f, 1));
    f->page.mapping = 0xdead0;
    f->page.index = 42;
    folio_put(f);
    Page* last = pm->pfn_to_page(folio_pfn(f) + (1ull << order) - 1);
    EXPECT_EQ(last->compound_head, 0u);
    EXPECT_FALSE(PageAnonExclusive(folio_page(f, 1)));
    EXPECT_EQ(f->page.mapping, 0u);
  }
  // An order-0 folio is just a page.
  Folio* f0 = pm->folio_alloc(GFP_KERNEL, 0);
  ASSERT_NE(f0, nullptr);
  EXPECT_FALSE(folio_test_large(f0));
  EXPECT_EQ(folio_order(f0), 0u);
  EXPECT_EQ(f0->page.compound_head, 0u);
  EXPECT_EQ(f0->page.flags, 0u);
  folio_put(f0);
}

TEST(Phys, GfpZeroClearsFrames) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  // Dirty every frame, then ask for zeroed ones.
  std::vector<Page*> pages = alloc_all(*pm, 0);
  for (Page* p : pages) std::memset(pm->page_address(p), 0xa5, PAGE_SIZE);
  for (Page* p : pages) put_pages(*pm, p, 0);
  stats.reset_events();
  Folio* f = pm->folio_alloc(GFP_HIGHUSER_MOVABLE | __GFP_ZERO, 4);
  ASSERT_NE(f, nullptr);
  const auto* b = static_cast<const uint8_t*>(folio_address(f));
  EXPECT_TRUE(std::all_of(b, b + (PAGE_SIZE << 4), [](uint8_t x) { return x == 0; }));
  EXPECT_EQ(stats.read(Event::zero_bytes), PAGE_SIZE << 4);
  folio_put(f);
}

TEST(Phys, ZeroPageIsNeverFreed) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  Folio* zf = page_folio(pm->zero_page());
  const uint64_t before = pm->nr_free_pages();
  folio_get(zf);
  folio_put(zf);
  EXPECT_EQ(folio_ref_count(zf), 1);
  EXPECT_TRUE(folio_test_reserved(zf));
  EXPECT_EQ(pm->nr_free_pages(), before);
#if !defined(MMLAB_DEBUG_VM)
  // Even an unbalanced put leaves it allocated (a VM_WARN in debug builds).
  folio_put(zf);
  EXPECT_FALSE(pm->page_is_free(pm->zero_pfn()));
  EXPECT_EQ(pm->nr_free_pages(), before);
  folio_ref_inc(zf);
#endif
}

TEST(Phys, HugeZeroFolio) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB, 32 * MiB);
  EXPECT_EQ(pm->huge_zero_folio(), nullptr);
  const uint64_t before = pm->nr_free_pages();
  Folio* h = pm->mm_get_huge_zero_folio();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(pm->huge_zero_folio(), h);
  EXPECT_EQ(folio_order(h), PMD_ORDER);
  EXPECT_TRUE(folio_test_huge_zero(h));
  EXPECT_EQ(pm->page_zonenum(&h->page), ZONE_NORMAL);
  EXPECT_EQ(folio_ref_count(h), 2);  // the global holder and this user
  EXPECT_EQ(pm->nr_free_pages(), before - HPAGE_PMD_NR);
  const auto* b = static_cast<const uint8_t*>(folio_address(h));
  EXPECT_TRUE(std::all_of(b, b + PMD_SIZE, [](uint8_t x) { return x == 0; }));
  const pfn_t pfn = folio_pfn(h);
  EXPECT_TRUE(pm->is_huge_zero_pfn(pfn));
  EXPECT_TRUE(pm->is_huge_zero_pfn(pfn + HPAGE_PMD_NR - 1));
  EXPECT_FALSE(pm->is_huge_zero_pfn(pfn + HPAGE_PMD_NR));
  EXPECT_FALSE(pm->is_zero_pfn(pfn));

  EXPECT_EQ(pm->mm_get_huge_zero_folio(), h);
  EXPECT_EQ(folio_ref_count(h), 3);
  EXPECT_EQ(stats.read(VmStat::thp_zero_page_alloc), 1);
  pm->mm_put_huge_zero_folio();
  pm->mm_put_huge_zero_folio();
  EXPECT_EQ(folio_ref_count(h), 1);
  EXPECT_EQ(pm->huge_zero_folio(), h);  // kept while the PhysMem lives
  EXPECT_EQ(pm->nr_free_pages(), before - HPAGE_PMD_NR);
}

TEST(Phys, OfFindsTheOwnerAmongSeveral) {
  Stats s1, s2;
  auto a = make_phys(&s1, 64 * MiB);
  auto b = make_phys(&s2, 16 * MiB, 8 * MiB);
  EXPECT_EQ(PhysMem::of(a->zero_page()), a.get());
  EXPECT_EQ(PhysMem::of(b->zero_page()), b.get());
  EXPECT_EQ(PhysMem::of(a->pfn_to_page(a->nr_frames() - 1)), a.get());
  EXPECT_EQ(PhysMem::of(b->pfn_to_page(b->nr_frames() - 1)), b.get());

  const uint64_t fa = a->nr_free_pages(), fb = b->nr_free_pages();
  Folio* x = a->folio_alloc(GFP_KERNEL, 3);
  Folio* y = b->folio_alloc(GFP_HIGHUSER_MOVABLE, 5);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(page_phys(folio_page(x, 7)), a.get());
  EXPECT_EQ(page_phys(folio_page(y, 31)), b.get());
  EXPECT_EQ(folio_pfn(y), b->page_to_pfn(&y->page));
  EXPECT_EQ(folio_address(x), a->page_address(&x->page));
  // folio_put finds the right allocator from the page alone.
  folio_put(x);
  folio_put(y);
  EXPECT_EQ(a->nr_free_pages(), fa);
  EXPECT_EQ(b->nr_free_pages(), fb);
  EXPECT_EQ(s1.read(VmStat::pgfree), 8);
  EXPECT_EQ(s2.read(VmStat::pgfree), 32);
}

TEST(Phys, FreeHookMayTakeTheFolio) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  std::vector<Folio*> taken;
  pm->set_folio_free_hook([&](Folio* f) {
    if (!folio_test_hugetlb(f)) return false;
    taken.push_back(f);
    return true;
  });
  const uint64_t before = pm->nr_free_pages();
  Folio* f = pm->folio_alloc(GFP_KERNEL, 9);
  Folio* g = pm->folio_alloc(GFP_KERNEL, 2);
  ASSERT_TRUE(f && g);
  folio_set_hugetlb(f);
  folio_put(f);
  folio_put(g);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0], f);
  EXPECT_EQ(pm->nr_free_pages(), before - HPAGE_PMD_NR);
  // The pool gives it back later.
  folio_clear_hugetlb(f);
  pm->free_folio(f);
  EXPECT_EQ(pm->nr_free_pages(), before);
}

TEST(Phys, FolioPutRefs) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  const uint64_t before = pm->nr_free_pages();
  Folio* f = pm->folio_alloc(GFP_KERNEL, 4);
  ASSERT_NE(f, nullptr);
  folio_ref_add(f, 15);
  folio_put_refs(f, 10);
  EXPECT_EQ(folio_ref_count(f), 6);
  EXPECT_EQ(pm->nr_free_pages(), before - 16);
  folio_put_refs(f, 6);
  EXPECT_EQ(pm->nr_free_pages(), before);
}

TEST(Phys, FolioLock) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  Folio* f = pm->folio_alloc(GFP_KERNEL, 2);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(folio_trylock(f));
  EXPECT_TRUE(folio_test_locked(f));
  EXPECT_FALSE(folio_trylock(f));
  folio_unlock(f);
  EXPECT_FALSE(folio_test_locked(f));

  // Mutual exclusion between two threads; other flag bits survive.
  folio_set_dirty(f);
  long counter = 0;  // protected by the folio lock
  auto body = [&] {
    for (int i = 0; i < 20000; i++) {
      folio_lock(f);
      counter++;
      folio_unlock(f);
    }
  };
  std::thread t1(body), t2(body);
  t1.join();
  t2.join();
  EXPECT_EQ(counter, 40000);
  EXPECT_TRUE(folio_test_dirty(f));
  EXPECT_FALSE(folio_test_locked(f));
  folio_clear_dirty(f);
  folio_put(f);
}

// Freeing a mapped or already-free block is a VM_WARN: fatal in
// MMLAB_DEBUG_VM builds; otherwise a double free is refused so the free
// lists stay intact.
TEST(Phys, BadFreesAreCaught) {
  Stats stats;
  auto pm = make_phys(&stats, 16 * MiB);
  Page* p = pm->alloc_pages(GFP_KERNEL, 4);
  ASSERT_NE(p, nullptr);
  put_pages(*pm, p, 4);
  const uint64_t before = pm->nr_free_pages();
#if defined(MMLAB_DEBUG_VM)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(pm->free_pages(p, 4), "double free");
  Folio* f = pm->folio_alloc(GFP_KERNEL, 2);
  ASSERT_NE(f, nullptr);
  folio_page(f, 3)->mapcount = 1;
  EXPECT_DEATH(folio_put(f), "mapped page");
  folio_page(f, 3)->mapcount = 0;
  folio_put(f);
  Folio* g = pm->folio_alloc(GFP_KERNEL, 0);
  EXPECT_DEATH(folio_unlock(g), "unlocked folio");
  folio_put(g);
#else
  pm->free_pages(p, 4);  // ignored
  EXPECT_EQ(pm->nr_free_pages(), before);
  Page* q = pm->alloc_pages(GFP_KERNEL, 4);
  ASSERT_NE(q, nullptr);
  put_pages(*pm, q, 4);
#endif
  EXPECT_EQ(pm->nr_free_pages(), before);
  EXPECT_EQ(count_free_by_pfn(*pm), before);
}

// Two threads allocate and free concurrently, one through the pcp lists
// (order 0), one through zone->lock (order 4); a third wave frees on another
// thread than the one that allocated. Free counts must balance exactly.
TEST(Phys, ConcurrentAllocFree) {
  Stats stats;
  auto pm = make_phys(&stats, 64 * MiB, 16 * MiB);
  const uint64_t before = pm->nr_free_pages();
  std::atomic<bool> go{false};
  std::atomic<uint64_t> failures{0};
  auto worker = [&](unsigned order, gfp_t gfp, uint8_t pattern) {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    std::vector<Folio*> held;
    for (int round = 0; round < 200; round++) {
      for (int i = 0; i < 16; i++) {
        Folio* f = pm->folio_alloc(gfp, order);
        if (!f) {
          failures++;
          continue;
        }
        std::memset(folio_address(f), pattern, PAGE_SIZE << order);
        held.push_back(f);
      }
      for (Folio* f : held) {
        const auto* b = static_cast<const uint8_t*>(folio_address(f));
        ASSERT_EQ(b[0], pattern);
        ASSERT_EQ(b[(PAGE_SIZE << order) - 1], pattern);
        folio_put(f);
      }
      held.clear();
    }
  };
  std::thread a(worker, 0u, GFP_HIGHUSER_MOVABLE, uint8_t{0x11});
  std::thread b(worker, 4u, GFP_KERNEL, uint8_t{0x44});
  go.store(true, std::memory_order_release);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(pm->nr_free_pages(), before);

  // Allocated on one thread, freed on another.
  std::vector<Folio*> handoff;
  std::thread producer([&] {
    for (int i = 0; i < 500; i++) handoff.push_back(pm->folio_alloc(GFP_KERNEL, i % 4));
  });
  producer.join();
  std::thread consumer([&] {
    for (Folio* f : handoff) folio_put(f);
  });
  consumer.join();
  EXPECT_EQ(pm->nr_free_pages(), before);
  pm->drain_all_pages();
  EXPECT_EQ(pm->nr_free_pages(), before);
  EXPECT_EQ(count_free_by_pfn(*pm), before);
  EXPECT_EQ(stats.read(VmStat::pgfree), stats.read(VmStat::pgalloc_normal) + stats.read(VmStat::pgalloc_movable));
}

}  // namespace
}  // namespace mmlab
