// get_user_pages: entry points, flag validation, accounting, the variants'
// counter facts, a differential test of every variant against legacy,
// GUP-fast, FOLL_DUMP, FOLL_LONGTERM migration, and races.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gup/gup.h"
#include "mm/kernel.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

class GupTest : public MmTest {
 protected:
  GupTest() { ram_bytes = 768ull << 20; }
  void tune(const char* key, const char* v) { ASSERT_EQ(sys->tune(key, v), 0) << key << "=" << v; }
  int64_t ctr(const char* n) { return sys->counter(n); }
  Mm* mm() { return p->mm(); }
  // pin_user_pages under the mmap read lock, as gup_test -L does.
  long pin(uint64_t a, long n, unsigned flags, std::vector<Page*>& pages) NO_THREAD_SAFETY_ANALYSIS {
    pages.assign(static_cast<size_t>(std::max<long>(n, 1)), nullptr);
    mmap_read_lock(mm());
    long r = pin_user_pages(mm(), a, n, flags, pages.data());
    mmap_read_unlock(mm());
    return r;
  }
  long get(uint64_t a, long n, unsigned flags, std::vector<Page*>& pages) NO_THREAD_SAFETY_ANALYSIS {
    pages.assign(static_cast<size_t>(std::max<long>(n, 1)), nullptr);
    mmap_read_lock(mm());
    long r = get_user_pages(mm(), a, n, flags, pages.data());
    mmap_read_unlock(mm());
    return r;
  }
  void put_all(std::vector<Page*>& pages, long n) {
    for (long i = 0; i < n; i++) put_page(pages[static_cast<size_t>(i)]);
  }
};

TEST_F(GupTest, InvalidArgumentsPerEntryPoint) {
  uint64_t a = map_aligned(PAGE_SIZE * 4, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, 4 * PAGE_SIZE).ok());
  std::vector<Page*> pg(4);
  EXPECT_EQ(get(a, 1, FOLL_TOUCH, pg), -EINVAL);     // an internal flag from the caller
  EXPECT_EQ(pin(a, 1, FOLL_TOUCH, pg), 0);            // pin_user_pages says 0, not an errno
  EXPECT_EQ(pin(a, 1, FOLL_GET, pg), 0);              // GET with PIN
  EXPECT_EQ(get(a, 1, FOLL_LONGTERM, pg), -EINVAL);   // LONGTERM without PIN
  EXPECT_EQ(get_user_pages_fast(mm(), a, 1, 0, nullptr), -EINVAL);  // GET without pages
  EXPECT_EQ(pin_user_pages_fast(mm(), a, 1, 0, nullptr), -EINVAL);
  EXPECT_EQ(pin_user_pages_unlocked(mm(), a, 1, nullptr, 0), 0);
  EXPECT_EQ(get_user_pages_fast(mm(), a, 1, FOLL_SPLIT_PMD, pg.data()), -EINVAL);  // not a fast-path flag
  EXPECT_EQ(get(a - PAGE_SIZE, 1, 0, pg), -EFAULT);  // no VMA
}

TEST_F(GupTest, PinAccountingSmallLargeAndZeroPage) {
  enable_order_kb(64);
  uint64_t a = map_aligned(128 * 1024, 64 * 1024);
  ASSERT_TRUE(p->fill(a, 1, 64 * 1024).ok());  // one 64K folio; the next 64K stays unpopulated
  std::vector<Page*> pg;
  ASSERT_EQ(pin(a, 16, 0, pg), 16);
  Folio* f = page_folio(pg[0]);
  EXPECT_EQ(folio_order(f), 4u);
  EXPECT_EQ(folio_pincount(f), 16);
  EXPECT_EQ(folio_ref_count(f), 32);  // 16 mappings + 16 pins
  EXPECT_TRUE(folio_maybe_dma_pinned(f));
  EXPECT_TRUE(mm()->test_flag(MMF_HAS_PINNED));
  EXPECT_EQ(sys->vmstat("nr_foll_pin_acquired"), 16);
  unpin_user_pages(pg.data(), 16);
  EXPECT_EQ(folio_pincount(f), 0);
  EXPECT_EQ(folio_ref_count(f), 16);
  EXPECT_EQ(sys->vmstat("nr_foll_pin_released"), 16);

  set("transparent_hugepage/hugepages-64kB/enabled", "never");
  uint64_t b = map_aligned(PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(b, 1, 1).ok());
  ASSERT_EQ(pin(b, 1, 0, pg), 1);
  EXPECT_EQ(folio_ref_count(page_folio(pg[0])), 1 + GUP_PIN_COUNTING_BIAS);
  EXPECT_TRUE(folio_maybe_dma_pinned(page_folio(pg[0])));
  unpin_user_page(pg[0]);

  uint64_t z = map_aligned(PAGE_SIZE, PAGE_SIZE);
  expect_bytes(p, z, 1, 0);  // the zero page
  int zref = folio_ref_count(page_folio(sys->kernel()->phys->zero_page()));
  ASSERT_EQ(pin(z, 1, 0, pg), 1);
  EXPECT_EQ(pg[0], sys->kernel()->phys->zero_page());
  EXPECT_EQ(folio_ref_count(page_folio(pg[0])), zref);  // pins of the zero page are not accounted
  unpin_user_page(pg[0]);
  ASSERT_EQ(get(z, 1, 0, pg), 1);  // FOLL_GET does take a reference
  EXPECT_EQ(folio_ref_count(page_folio(pg[0])), zref + 1);
  put_page(pg[0]);
}

// The counter facts of gup-batch-follow-page-mask v5.
TEST_F(GupTest, LegacyDescendsPerPageWalkPerTable) {
  const long n = 65536;
  uint64_t a = map_aligned(n * PAGE_SIZE);
  ASSERT_EQ(p->madvise(a, n * PAGE_SIZE, MADV_POPULATE_WRITE), 0);
  std::vector<Page*> pg;
  for (const char* w : {"legacy", "walk"}) {
    tune("gup.walk", w);
    sys->reset_counters();
    ASSERT_EQ(pin(a, n, FOLL_LONGTERM, pg), n);
    long expect = std::string(w) == "legacy" ? n : n / 512;
    EXPECT_EQ(ctr("gup.descents"), expect) << w;
    EXPECT_EQ(ctr("gup.pte_lock"), expect) << w;
    EXPECT_EQ(ctr("gup.grab"), n) << w;
    EXPECT_EQ(ctr("gup.cache_flush"), n) << w;
    unpin_user_pages(pg.data(), n);
  }
}

TEST_F(GupTest, BatchGrabsOncePerMthp) {
  const long n = 65536;
  enable_order_kb(64);
  set("transparent_hugepage/hugepages-2048kB/enabled", "never");
  uint64_t a = map_aligned(n * PAGE_SIZE);
  ASSERT_EQ(p->madvise(a, n * PAGE_SIZE, MADV_POPULATE_WRITE), 0);
  EXPECT_EQ(sys->mthp_stat(4, "anon_fault_alloc"), n / 16);
  std::vector<Page*> pg;
  for (const char* w : {"walk", "batch", "batch-ro"}) {
    tune("gup.walk", w);
    sys->reset_counters();
    ASSERT_EQ(pin(a, n, FOLL_LONGTERM, pg), n);
    EXPECT_EQ(ctr("gup.grab"), std::string(w) == "walk" ? n : n / 16) << w;
    unpin_user_pages(pg.data(), n);
  }
}

TEST_F(GupTest, MarkAccessedOncePerRun) {
  enable_order_kb(64);
  set("transparent_hugepage/hugepages-2048kB/enabled", "never");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_POPULATE_WRITE), 0);
  std::vector<Page*> pg;
  const long n = 512;
  struct Case {
    const char* walk;
    bool pin;
    int64_t expect;
  } cases[] = {{"walk", false, 512}, {"batch", false, 32}, {"walk", true, 0}, {"batch", true, 0}};
  for (auto& c : cases) {
    tune("gup.walk", c.walk);
    sys->reset_counters();
    if (c.pin) {
      ASSERT_EQ(pin(a, n, 0, pg), n);
      unpin_user_pages(pg.data(), n);
    } else {
      ASSERT_EQ(get(a, n, 0, pg), n);
      put_all(pg, n);
    }
    EXPECT_EQ(ctr("gup.mark_accessed"), c.expect) << c.walk << (c.pin ? " pin" : " get");
  }
}

TEST_F(GupTest, BatchLeavesFreshMthpReferencedButInactive) {
  enable_order_kb(64);
  uint64_t a = map_aligned(64 * 1024, 64 * 1024);
  ASSERT_EQ(p->madvise(a, 64 * 1024, MADV_POPULATE_WRITE), 0);
  std::vector<Page*> pg;
  Folio* f = nullptr;
  for (const char* w : {"walk", "batch"}) {
    tune("gup.walk", w);
    ASSERT_EQ(get(a, 16, 0, pg), 16);
    f = page_folio(pg[0]);
    bool walk = std::string(w) == "walk";
    EXPECT_EQ(folio_test_active(f), walk) << w;  // per page: the second call activates
    EXPECT_TRUE(folio_test_referenced(f)) << w;  // once per run: referenced but inactive
    put_all(pg, 16);
    folio_clear_active(f);
    folio_clear_referenced(f);
  }
}

TEST_F(GupTest, HugeLeavesOneGrabPerCallExceptV65) {
  uint64_t a = map_aligned(2 * PMD_SIZE);
  ASSERT_EQ(p->madvise(a, 2 * PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(p->madvise(a, 2 * PMD_SIZE, MADV_POPULATE_WRITE), 0);
  std::vector<Page*> pg;
  struct Case {
    const char* walk;
    int64_t descents, grabs;
  } cases[] = {{"v6.5", 1024, 1024}, {"legacy", 2, 4}, {"walk", 2, 2}, {"batch", 2, 2}};
  for (auto& c : cases) {
    tune("gup.walk", c.walk);
    sys->reset_counters();
    ASSERT_EQ(pin(a, 1024, FOLL_LONGTERM, pg), 1024);
    EXPECT_EQ(ctr("gup.descents"), c.descents) << c.walk;
    EXPECT_EQ(ctr("gup.grab"), c.grabs) << c.walk;
    EXPECT_EQ(folio_pincount(page_folio(pg[0])), 512);
    for (long i = 0; i < 1024; i++) EXPECT_EQ(pg[static_cast<size_t>(i)], pg[static_cast<size_t>(i - i % 512)] + (i % 512)) << i;
    unpin_user_pages(pg.data(), 1024);
  }
}

// Every variant returns the same pages, references, pins and errors as legacy.
TEST_F(GupTest, DifferentialAgainstLegacy) {
  std::mt19937 rng(12345);
  // A mixed layout: base pages, each mTHP size, PMD THP, the zero page, holes, a PROT_NONE VMA.
  for (unsigned kb : {16, 32, 64, 128, 256, 512, 1024}) enable_order_kb(kb, "never");
  uint64_t a = map_aligned(16 * PMD_SIZE);
  ASSERT_EQ(p->madvise(a + 4 * PMD_SIZE, 2 * PMD_SIZE, MADV_HUGEPAGE), 0);
  const unsigned sizes[] = {0, 16, 32, 64, 128, 256, 512, 1024};
  for (unsigned chunk = 0; chunk < 16; chunk++) {
    uint64_t base = a + chunk * PMD_SIZE;
    if (chunk == 4 || chunk == 5) {
      ASSERT_TRUE(p->fill(base, 0x40 + chunk, PMD_SIZE).ok());  // PMD THP
      continue;
    }
    unsigned kb = sizes[chunk % 8];
    if (kb) enable_order_kb(kb, "always");
    for (uint64_t off = 0; off < PMD_SIZE; off += PAGE_SIZE) {
      unsigned r = rng() % 8;
      if (r == 0) continue;                                  // hole
      if (r == 1) expect_bytes(p, base + off, 1, 0);         // zero page (or part of a folio)
      else ASSERT_TRUE(p->fill(base + off, static_cast<uint8_t>(off >> 12), 1).ok());
    }
    if (kb) enable_order_kb(kb, "never");
  }
  ASSERT_EQ(p->madvise(a + 9 * PMD_SIZE + 64 * PAGE_SIZE, 32 * PAGE_SIZE, MADV_DONTNEED), 0);
  ASSERT_EQ(p->mprotect(a + 12 * PMD_SIZE, PMD_SIZE, PROT_NONE), 0);  // a failure in the middle

  struct Result {
    long ret;
    std::vector<Page*> pages;
    std::map<Folio*, std::pair<int, int>> folios;  // refcount, pincount while held
  };
  auto run = [&](const char* walk, uint64_t start, long n, bool use_pin, unsigned flags) {
    tune("gup.walk", walk);
    Result r;
    std::vector<Page*> pg;
    r.ret = use_pin ? pin(start, n, flags, pg) : get(start, n, flags, pg);
    for (long i = 0; i < r.ret; i++) {
      r.pages.push_back(pg[static_cast<size_t>(i)]);
      Folio* f = page_folio(pg[static_cast<size_t>(i)]);
      r.folios[f] = {folio_ref_count(f), folio_pincount(f)};
    }
    if (r.ret > 0) {
      if (use_pin) unpin_user_pages(pg.data(), r.ret);
      else put_all(pg, r.ret);
    }
    return r;
  };
  for (int iter = 0; iter < 200; iter++) {
    uint64_t start = a + (rng() % (16 * 512)) * PAGE_SIZE;
    long n = 1 + static_cast<long>(rng() % 1200);
    n = std::min<long>(n, static_cast<long>((a + 16 * PMD_SIZE - start) >> PAGE_SHIFT));
    bool use_pin = rng() % 2;
    unsigned flags = (rng() % 3 == 0 ? FOLL_WRITE : 0) | (use_pin && rng() % 2 ? FOLL_LONGTERM : 0);
    Result ref = run("legacy", start, n, use_pin, flags);
    for (const std::string& w : tune_values("gup.walk")) {  // every registered walk
      if (w == "legacy") continue;
      Result got = run(w.c_str(), start, n, use_pin, flags);
      ASSERT_EQ(got.ret, ref.ret) << w << " iter " << iter;
      ASSERT_EQ(got.pages, ref.pages) << w << " iter " << iter;
      ASSERT_EQ(got.folios, ref.folios) << w << " iter " << iter;
    }
  }
  ASSERT_EQ(p->mprotect(a + 12 * PMD_SIZE, PMD_SIZE, PROT_READ | PROT_WRITE), 0);
}

TEST_F(GupTest, FastLegacyAndBatchAgree) {
  enable_order_kb(64);
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_POPULATE_WRITE), 0);
  std::vector<Page*> l(512), b(512);
  tune("gup.fast", "legacy");
  sys->reset_counters();
  ASSERT_EQ(pin_user_pages_fast(mm(), a, 512, FOLL_WRITE | FOLL_LONGTERM, l.data()), 512);
  EXPECT_EQ(ctr("gup.fast_speculative"), 512);
  EXPECT_EQ(ctr("gup.fast_fallback"), 0);
  tune("gup.fast", "batch");
  sys->reset_counters();
  ASSERT_EQ(pin_user_pages_fast(mm(), a, 512, FOLL_WRITE | FOLL_LONGTERM, b.data()), 512);
  EXPECT_EQ(ctr("gup.fast_speculative"), 32);
  EXPECT_EQ(l, b);
  EXPECT_EQ(folio_pincount(page_folio(l[0])), 32);  // 16 from each call
  unpin_user_pages(l.data(), 512);
  unpin_user_pages(b.data(), 512);
}

TEST_F(GupTest, FastFallsBackForZeroPageAndFaults) {
  uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  expect_bytes(p, a, 1, 0);  // zero page at a; a+4K..a+16K unpopulated
  std::vector<Page*> pg(4);
  sys->reset_counters();
  ASSERT_EQ(get_user_pages_fast(mm(), a, 4, 0, pg.data()), 4);
  EXPECT_EQ(ctr("gup.fast_fallback"), 1);
  EXPECT_EQ(pg[0], sys->kernel()->phys->zero_page());  // the slow path returns it
  for (auto* q : pg) put_page(q);
  EXPECT_EQ(get_user_pages_fast_only(mm(), a + PAGE_SIZE, 1, 0, pg.data()), 0);  // zero page: never from GUP-fast
}

TEST_F(GupTest, WriteToReadOnlyMappingNeedsForceInCowMapping) {
  uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 7, PAGE_SIZE).ok());
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ), 0);
  std::vector<Page*> pg;
  EXPECT_EQ(get(a, 1, FOLL_WRITE, pg), -EFAULT);
  ASSERT_EQ(get(a, 1, FOLL_WRITE | FOLL_FORCE, pg), 1);  // ptrace-style poke: the page is exclusive already
  put_page(pg[0]);
  // A PROT_NONE VMA is readable only with FOLL_FORCE.
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_NONE), 0);
  EXPECT_EQ(get(a, 1, 0, pg), -EFAULT);
}

TEST_F(GupTest, DumpReportsHoles) {
  uint64_t a = map_aligned(3 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 3, 1).ok());
  expect_bytes(p, a + PAGE_SIZE, 1, 0);  // zero page
  Page* pg = get_dump_page(mm(), a);
  ASSERT_TRUE(pg);
  put_page(pg);
  EXPECT_EQ(get_dump_page(mm(), a + PAGE_SIZE), nullptr);      // zero page: a hole
  EXPECT_EQ(get_dump_page(mm(), a + 2 * PAGE_SIZE), nullptr);  // never touched: a hole, not faulted in
  EXPECT_EQ(p->rss_anon(), 4096);
}

TEST_F(GupTest, NofaultAndPopulate) {
  uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  std::vector<Page*> pg;
  EXPECT_EQ(get(a, 1, FOLL_NOFAULT, pg), -EFAULT);
  ASSERT_EQ(get(a, 2, FOLL_WRITE, pg), 2);  // faults them in
  put_all(pg, 2);
  EXPECT_EQ(p->rss_anon(), 8192);
}

class GupMovableTest : public GupTest {
 protected:
  void SetUp() override {
    SystemConfig cfg;
    cfg.ram_bytes = 256ull << 20;
    cfg.movable_bytes = 128ull << 20;
    sys = System::create(cfg);
    ASSERT_TRUE(sys);
    p = sys->new_process("test");
  }
};

TEST_F(GupMovableTest, LongtermPinMigratesOutOfMovableZone) {
  PhysMem* phys = sys->kernel()->phys.get();
  uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 0x5c, 4 * PAGE_SIZE).ok());
  pfn_t before = entry_at(a).pfn;
  ASSERT_EQ(phys->page_zonenum(phys->pfn_to_page(before)), ZONE_MOVABLE);
  std::vector<Page*> pg;
  ASSERT_EQ(pin(a, 4, FOLL_LONGTERM, pg), 4);  // R/O long-term pin
  for (auto* q : pg) EXPECT_EQ(phys->page_zonenum(q), ZONE_NORMAL);
  EXPECT_NE(entry_at(a).pfn, before);
  EXPECT_EQ(entry_at(a).pfn, phys->page_to_pfn(pg[0]));
  EXPECT_EQ(sys->vmstat("pgmigrate_success"), 4);
  expect_bytes(p, a, 4 * PAGE_SIZE, 0x5c);
  unpin_user_pages(pg.data(), 4);
  // A short-term pin does not migrate.
  uint64_t b = map_aligned(PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(b, 1, 1).ok());
  ASSERT_EQ(pin(b, 1, 0, pg), 1);
  EXPECT_EQ(phys->page_zonenum(pg[0]), ZONE_MOVABLE);
  unpin_user_page(pg[0]);
}

// pin_user_pages_unlocked (as GUP-fast's slow fallback) migrates what may
// not be pinned long-term after dropping the mmap_lock: other threads of the
// process can fork, zap or mremap meanwhile. A directed schedule runs the
// pin (thread P) until the label migrate.unmapped, where every mapping of
// the folio is a migration entry, then `action` (thread X, its own lock
// context) to its end, then the pin: the interleaving is fixed. The
// directed run's own fixture (MigrateWindowRun) is empty: the test's System
// is the state.
struct MigrateWindowRun {};

class GupMigrateRaceTest : public GupMovableTest {
 protected:
  void during_migration(std::function<void()> pin, std::function<void()> action) {
    explore::Race<MigrateWindowRun> race;
    race.thread("P", [pin](MigrateWindowRun&) { pin(); });
    race.thread("X", [action](MigrateWindowRun&) { action(); });
    explore::RunResult r = race.replay_directed("P@migrate.unmapped X P");
    EXPECT_EQ(r.outcome, explore::Outcome::kClean) << r.summary() << "\n" << race.explain(r);
  }
  long pin_unlocked(uint64_t a, long n, std::vector<Page*>& pages) {
    pages.assign(static_cast<size_t>(n), nullptr);
    return pin_user_pages_unlocked(mm(), a, n, pages.data(), FOLL_LONGTERM);
  }
  ZoneType zone_at(Process* q, uint64_t a) {
    PhysMem* phys = sys->kernel()->phys.get();
    return phys->page_zonenum(phys->pfn_to_page(entry_at(q, a).pfn));
  }
};

TEST_F(GupMigrateRaceTest, ForkDuringMigrationCopiesEntriesThatAreRestored) {
  uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 0x5c, PAGE_SIZE).ok());
  // The process forks while its page is a migration entry: the child
  // inherits the entry, which the migration must replace there too.
  Process* child = nullptr;
  std::vector<Page*> pg;
  long got = 0;
  during_migration([&] { got = pin_unlocked(a, 1, pg); }, [&] { child = p->fork(); });
  ASSERT_EQ(got, 1);
  ASSERT_TRUE(child);
  for (Process* q : {p, child}) {
    ASSERT_EQ(entry_at(q, a).level, 1);
    ASSERT_FALSE(entry_at(q, a).swap) << "a migration entry was left behind";
    EXPECT_EQ(zone_at(q, a), ZONE_NORMAL);
  }
  // The retry found the page shared with the child: the R/O long-term pin
  // unshared it (a copy, migrated in turn), so only the parent maps the pin.
  EXPECT_EQ(entry_at(p, a).pfn, sys->kernel()->phys->page_to_pfn(pg[0]));
  EXPECT_NE(entry_at(child, a).pfn, entry_at(p, a).pfn);
  EXPECT_EQ(sys->vmstat("pgmigrate_success"), 2);
  expect_bytes(child, a, PAGE_SIZE, 0x5c);
  unpin_user_pages(pg.data(), 1);
  expect_bytes(p, a, PAGE_SIZE, 0x5c);
}

TEST_F(GupMigrateRaceTest, ZapDuringMigrationLeavesNothingBehind) {
  uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 0x6d, 2 * PAGE_SIZE).ok());
  // MADV_DONTNEED drops a page while it is a migration entry: the migration
  // must neither map the new folio there nor keep a reference for it; the
  // pin then faults a new page in (and migrates that).
  std::vector<Page*> pg;
  long got = 0;
  during_migration([&] { got = pin_unlocked(a, 2, pg); },
                   [&] { EXPECT_EQ(p->madvise(a, PAGE_SIZE, MADV_DONTNEED), 0); });
  ASSERT_EQ(got, 2);
  for (uint64_t off : {uint64_t{0}, PAGE_SIZE}) {
    ASSERT_EQ(entry_at(a + off).level, 1);
    ASSERT_FALSE(entry_at(a + off).swap) << "a migration entry was left behind";
    EXPECT_EQ(zone_at(p, a + off), ZONE_NORMAL);
  }
  for (Page* q : pg) EXPECT_EQ(folio_ref_count(page_folio(q)), 1 + GUP_PIN_COUNTING_BIAS);
  unpin_user_pages(pg.data(), 2);
  expect_bytes(p, a, PAGE_SIZE, 0);
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 0x6d);
}

TEST_F(GupMigrateRaceTest, MremapDuringMigrationMovesEntriesThatAreRestored) {
  uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  uint64_t b = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 0x7e, 2 * PAGE_SIZE).ok());
  // mremap moves the migration entries to b while the folio is unmapped.
  std::vector<Page*> pg;
  during_migration(
      [&] { (void)pin_unlocked(a, 1, pg); },  // a is gone after the retry: -EFAULT, or 1 if it raced differently
      [&] {
        EXPECT_EQ(p->mremap(a, 2 * PAGE_SIZE, 2 * PAGE_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, b), static_cast<long>(b));
      });
  if (pg[0]) unpin_user_pages(pg.data(), 1);
  for (uint64_t off : {uint64_t{0}, PAGE_SIZE}) {
    ASSERT_EQ(entry_at(b + off).level, 1);
    ASSERT_FALSE(entry_at(b + off).swap) << "a migration entry was left behind";
  }
  expect_bytes(p, b, 2 * PAGE_SIZE, 0x7e);
}

TEST_F(GupMigrateRaceTest, MprotectDuringMigrationLeavesNoWritablePte) {
  uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 0x3a, PAGE_SIZE).ok());
  ASSERT_TRUE(p->page_info(a).writable);
  // The page is a writable migration entry when mprotect makes the VMA
  // read-only: mprotect must downgrade the entry, or the migration's end
  // maps a writable PTE that GUP-fast with FOLL_WRITE and the CPU use.
  std::vector<Page*> pg;
  long got = 0;
  during_migration([&] { got = pin_unlocked(a, 1, pg); },
                   [&] { EXPECT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ), 0); });
  ASSERT_EQ(got, 1);
  PageInfo pi = p->page_info(a);
  ASSERT_EQ(pi.level, 1);
  ASSERT_FALSE(pi.swap) << "a migration entry was left behind";
  EXPECT_EQ(zone_at(p, a), ZONE_NORMAL);
  EXPECT_FALSE(pi.writable);
  EXPECT_TRUE(pi.anon_exclusive) << "the readable entry keeps the page exclusive";
  Page* w = nullptr;
  EXPECT_LE(get_user_pages_fast(mm(), a, 1, FOLL_WRITE, &w), 0);
  EXPECT_EQ(p->fill(a, 0x3b, 1).sig, Signal::kSigsegv);
  unpin_user_pages(pg.data(), 1);
  expect_bytes(p, a, PAGE_SIZE, 0x3a);
  // Exclusive still: making it writable again needs no fault.
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  EXPECT_TRUE(p->page_info(a).writable);
}

// The oracle of GUP-fast pins racing layout changes, once every pin was
// released: no reference or pin is left over (the checker counts them
// against the mappings and finds no leaked frame), before and after every
// process exits. Used by the free-running test and by its explorer twin.
std::optional<std::string> pins_released_oracle(System& sys) {
  CheckReport r = sys.check();
  if (!r.ok()) return "with the processes:\n" + r.to_string();
  for (Process* q : sys.processes()) q->exit();
  CheckReport after = sys.check();
  if (!after.ok()) return "after exit:\n" + after.to_string();
  return std::nullopt;
}

// Free-running: a smoke test (FastPinRacesWithDontneedMunmapAndSplitUnderPct
// is the explorer's twin with the same oracle).
TEST_F(GupTest, FastPinRacesWithDontneedMunmapAndSplit) {
  // GUP-fast (batch) pins while the layout changes under it: zap, unmap and
  // remap, and splits of partially mapped mTHPs by the shrinker. Every pin
  // must be released exactly; the checker at the end sees no leak.
  enable_order_kb(64);
  uint64_t len = 4 * PMD_SIZE;
  uint64_t a = map_aligned(len);
  ASSERT_TRUE(p->fill(a, 1, len).ok());
  tune("gup.fast", "batch");
  std::atomic<bool> stop{false};
  std::thread pinner([&] {
    std::vector<Page*> pg(64);
    for (int i = 0; i < 3000 && !stop; i++) {
      uint64_t off = (static_cast<uint64_t>(i) * 37 % 1024) * PAGE_SIZE;
      long n = pin_user_pages_fast(p->mm(), a + off, 64, FOLL_WRITE | FOLL_LONGTERM, pg.data());
      if (n > 0) unpin_user_pages(pg.data(), n);
    }
  });
  for (int i = 0; i < 60; i++) {
    EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_DONTNEED), 0);
    ASSERT_TRUE(p->fill(a, 2, 64).ok());
    EXPECT_EQ(p->munmap(a + PMD_SIZE, PMD_SIZE), 0);
    EXPECT_EQ(p->mmap(a + PMD_SIZE, PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED),
              static_cast<long>(a + PMD_SIZE));
    ASSERT_TRUE(p->fill(a + PMD_SIZE, 3, PMD_SIZE).ok());
    EXPECT_EQ(p->madvise(a + PMD_SIZE + 32 * 1024, 32 * 1024, MADV_DONTNEED), 0);  // half a 64K folio
    (void)sys->run_shrinkers();                                                     // splits it
  }
  stop = true;
  pinner.join();
  std::optional<std::string> bad = pins_released_oracle(*sys);
  EXPECT_FALSE(bad) << *bad;
}

// The explorer's twin, under PCT (fixed seeds, depth 2 and 3 in turn): two
// 64K mTHPs; G pins the 32 pages with GUP-fast (batch) and releases them;
// L zaps the second half of the first folio, lets the shrinker split it,
// and unmaps the second folio. The same oracle after every run.
struct FastPinRun {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t a = 0;
};

TEST(GupExploreTest, FastPinRacesWithDontneedMunmapAndSplitUnderPct) {
  constexpr uint64_t k64 = 64 * 1024;
  explore::Race<FastPinRun> race;
  race.setup([](FastPinRun& f) {
    SystemConfig cfg;
    cfg.ram_bytes = 64ull << 20;
    f.sys = System::create(cfg);
    (void)f.sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "never");
    (void)f.sys->sysfs_write("transparent_hugepage/hugepages-64kB/enabled", "always");
    (void)f.sys->tune("gup.fast", "batch");
    f.p = f.sys->new_process("P");
    const long raw = f.p->mmap(0, 3 * k64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    f.a = round_up(static_cast<uint64_t>(raw), k64);
    (void)f.p->fill(f.a, 1, 2 * k64);
  });
  race.thread("G", [](FastPinRun& f) {
    std::vector<Page*> pg(32);
    long n = pin_user_pages_fast(f.p->mm(), f.a, 32, FOLL_WRITE | FOLL_LONGTERM, pg.data());
    if (n > 0) unpin_user_pages(pg.data(), n);
  });
  race.thread("L", [](FastPinRun& f) {
    (void)f.p->madvise(f.a + k64 / 2, k64 / 2, MADV_DONTNEED);  // half the first folio
    (void)f.sys->run_shrinkers();                               // splits it
    (void)f.p->munmap(f.a + k64, k64);
  });
  race.check([](FastPinRun& f) { return pins_released_oracle(*f.sys); });
  race.id("GupExploreTest.FastPinRacesWithDontneedMunmapAndSplitUnderPct");
  for (uint64_t seed : {1, 2}) {
    auto res = race.explore(explore::Pct{.runs = 150, .seed = seed});
    EXPECT_FALSE(res.found) << res.summary() << "\n" << race.explain(res.failure);
    EXPECT_EQ(res.runs, 150);
    EXPECT_GT(res.k, 0u);
  }
}

// get/pin_user_pages_remote (process_vm_readv, ptrace): another process's
// pages, the caller's mmap_read_lock of the target given back or dropped as
// *locked says, the entry points' own answers to invalid arguments.
TEST_F(GupTest, RemoteEntryPointsPinAnotherAddressSpace) {
  Process* q = sys->new_process("target");
  const long raw = q->mmap(0, 4 * PAGE_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(raw, 0);
  const uint64_t a = static_cast<uint64_t>(raw);
  ASSERT_TRUE(q->fill(a, 0x5a, 4 * PAGE_SIZE).ok());
  GupPages pins;
  ASSERT_EQ(gup(q, GupEntry::kPinUserPagesRemote, a, 4, foll::WRITE, &pins), 4);
  EXPECT_TRUE(pins.pinned());
  EXPECT_TRUE(pins.all_maybe_dma_pinned());
  ASSERT_EQ(pins.fill(PAGE_SIZE, 0x77, PAGE_SIZE), 0);  // a device write reaches the target
  int64_t bad = 0;
  uint8_t found = 0;
  ASSERT_TRUE(q->read_expect(a + PAGE_SIZE, 0x77, PAGE_SIZE, &bad, &found).ok());
  EXPECT_EQ(bad, -1);
  // The lock is back with nobody: a writer gets it at once.
  if (q->mm()->mmap_lock.down_write_trylock())
    q->mm()->mmap_lock.up_write();
  else
    ADD_FAILURE() << "the remote entry point left mmap_lock held";
  GupPages gets;
  EXPECT_EQ(gup(q, GupEntry::kGetUserPagesRemote, a, 2, 0, &gets), 2);
  EXPECT_FALSE(gets.pinned());
  EXPECT_EQ(gup(q, GupEntry::kGetUserPagesRemote, a, 1, foll::LONGTERM, &gets), -EINVAL);  // LONGTERM without PIN
  EXPECT_EQ(gup(q, GupEntry::kPinUserPagesRemote, a, 1, foll::GET, &gets), 0);  // GET with PIN: pin says 0
  EXPECT_EQ(gup(q, GupEntry::kGetUserPagesRemote, a + 8 * PAGE_SIZE, 1, 0, &gets), -EFAULT);  // no VMA
  pins.release(Dirty::kYes);
  gets.release();
  q->exit();
}

// gup_reachable_pages: the run of VMAs without a gap from the address,
// across VMA boundaries, ending at the first hole; a call for far more
// pages than that, its array sized by it, returns just the run.
TEST_F(GupTest, ReachablePagesEndAtTheFirstHole) {
  const long raw = p->mmap(0, 16 * PAGE_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(raw, 0);
  const uint64_t a = static_cast<uint64_t>(raw);
  ASSERT_EQ(p->mprotect(a + 4 * PAGE_SIZE, 4 * PAGE_SIZE, PROT_READ), 0);  // three VMAs, no gap
  EXPECT_EQ(gup_reachable_pages(p, a, 1000), 16);
  EXPECT_EQ(gup_reachable_pages(p, a, 5), 5);
  EXPECT_EQ(gup_reachable_pages(p, a + 2 * PAGE_SIZE + 123, 1000), 14);  // from the page holding the address
  EXPECT_EQ(gup_reachable_pages(p, a + 16 * PAGE_SIZE, 1000), 0);
  EXPECT_EQ(gup_reachable_pages(p, a, 0), 0);
  ASSERT_EQ(p->munmap(a + 10 * PAGE_SIZE, PAGE_SIZE), 0);
  EXPECT_EQ(gup_reachable_pages(p, a, 1000), 10);
  EXPECT_EQ(gup_reachable_pages(p, a + 11 * PAGE_SIZE, 1000), 5);
  const long huge = 1L << 26;  // an array of this many pointers would take 512 MiB
  GupPages gets, pins;
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a, huge, 0, &gets, gup_reachable_pages(p, a, huge)), 10);
  EXPECT_EQ(gets.count(), 10);
  EXPECT_EQ(gup(p, GupEntry::kPinUserPagesFast, a + 11 * PAGE_SIZE, huge, foll::WRITE, &pins,
                gup_reachable_pages(p, a + 11 * PAGE_SIZE, huge)),
            5);
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a + 10 * PAGE_SIZE, huge, 0, &gets, gup_reachable_pages(p, a + 10 * PAGE_SIZE, huge)),
            -EFAULT);
  pins.release();
}

}  // namespace
}  // namespace mmlab::test
