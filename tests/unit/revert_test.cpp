// The revert switches (issue 34 item 7, docs/RACES.md): each `tune revert.*`
// key restores the code before one fix. Here: the registry, and for each
// switch a run that shows it changes what the model does (one thread where
// the reverted check shows without a race; otherwise the race's minimal
// schedule, replayed) and that with the switch off the same run is clean.
// The PCT searches for the races themselves are in race_history_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gup/gup.h"
#include "mm/kernel.h"
#include "mm/settings.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "mmlab/tune.h"
#include "pgtable/pgtable.h"
#include "sync/cpu.h"
#include "revert_race_util.h"
#include "test_util.h"

namespace mmlab {
namespace {


// ---- the registry ----

TEST(RevertRegistryTest, EachSwitchIsATuneKeyWithItsCommit) {
  const std::vector<TuneKeyInfo> cat = tune_catalogue();
  for (unsigned i = 0; i < static_cast<unsigned>(Revert::kCount); i++) {
    const RevertInfo& r = revert_info(static_cast<Revert>(i));
    SCOPED_TRACE(r.key);
    EXPECT_EQ(std::string(r.key).rfind("revert.", 0), 0u);
    EXPECT_GE(std::string(r.commit).size(), 7u);
    EXPECT_FALSE(std::string(r.subject).empty());
    // Listed by `mmlab variants` (the catalogue), off by default, with the
    // commit in the meaning of its value.
    int listed = 0;
    for (const TuneKeyInfo& k : cat) {
      if (k.key != r.key) continue;
      listed++;
      EXPECT_EQ(k.default_value, "off");
      ASSERT_EQ(k.values.size(), 2u);
      EXPECT_EQ(k.values[0].name, "off");
      EXPECT_EQ(k.values[1].name, r.value);
      EXPECT_NE(k.values[1].meaning.find(r.commit), std::string::npos) << k.values[1].meaning;
      EXPECT_NE(k.values[1].meaning.find(r.subject), std::string::npos) << k.values[1].meaning;
    }
    EXPECT_EQ(listed, 1);
  }
}

TEST(RevertRegistryTest, ASwitchTurnsWarningRecordingOnWhileItIsOn) {
  auto sys = System::create({.ram_bytes = 16ull << 20});
  ASSERT_TRUE(sys);
  Kernel* k = sys->kernel();
  EXPECT_FALSE(k->vm_warn_records());
  for (unsigned i = 0; i < static_cast<unsigned>(Revert::kCount); i++) {
    const RevertInfo& r = revert_info(static_cast<Revert>(i));
    ASSERT_EQ(sys->tune(r.key, r.value), 0) << r.key;
    std::string v;
    ASSERT_EQ(sys->tune_read(r.key, &v), 0);
    EXPECT_EQ(v, r.value);
    EXPECT_TRUE(k->settings.reverted(static_cast<Revert>(i)));
    EXPECT_TRUE(k->vm_warn_records()) << r.key;
    ASSERT_EQ(sys->tune(r.key, "off"), 0);
    EXPECT_FALSE(k->settings.reverted(static_cast<Revert>(i)));
    EXPECT_FALSE(k->vm_warn_records()) << r.key;
  }
  EXPECT_EQ(sys->tune("revert.gup-force", "on"), -EINVAL);  // its value is drop-write
  EXPECT_EQ(sys->tune("revert.collapse-sync", "drop-write"), -EINVAL);
}

// ---- revert.gup-fast-wp-seq: one thread ----

// 57efa1fe5957 "mm/gup: prevent gup_fast from racing with COW during fork":
// while fork write-protects the parent (write_protect_seq odd), GUP-fast
// pins nothing. The odd count is made by hand here, as copy_page_range
// holds it; the revert pins anyway.
class RevertWpSeqTest : public test::MmTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RevertWpSeqTest, FastPinDuringForkWriteProtect) {
  const bool revert = GetParam();
  if (revert) {
    ASSERT_EQ(sys->tune("revert.gup-fast-wp-seq", "on"), 0);
  }
  uint64_t a = map_aligned(p, PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  Mm* mm = p->mm();
  Page* pg = nullptr;
  mm->write_protect_seq.write_begin();
  const long got = gup_fast_fallback(mm, a, 1, FOLL_PIN | FOLL_FAST_ONLY, &pg);
  mm->write_protect_seq.write_end();
  EXPECT_EQ(got, revert ? 1 : 0);
  if (got == 1) unpin_user_page(pg);
  // Outside the write section both pin.
  ASSERT_EQ(gup_fast_fallback(mm, a, 1, FOLL_PIN | FOLL_FAST_ONLY, &pg), 1);
  unpin_user_page(pg);
  EXPECT_TRUE(sys->warnings().empty());
}

INSTANTIATE_TEST_SUITE_P(OffAndOn, RevertWpSeqTest, ::testing::Bool());

// ---- GUP-fast against MADV_COLLAPSE: revert.gup-fast-pmd-recheck and
// revert.collapse-sync, each alone ----

// G pins one page of a PMD range of 4K pages with GUP-fast only; C
// collapses the range. The directed schedule stops G after it read the PTE
// (gup_fast.pte_read), before its reference, and runs C as far as it can.
struct FastCollapse {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t a = 0;
  long pinned = -1;
  Page* page = nullptr;
  int collapse = -1;
  bool g_done = false;
  bool c_done_first = false;  // the collapse returned while G's walk was open
};

// Whether some simulated CPU is inside a lockless walk (GUP-fast).
bool lockless_walk_open(Kernel* k) {
  for (int cpu = 0; cpu < NR_CPUS; cpu++)
    if (k->deferred_tables.walkers[cpu].active_epoch.load() != 0) return true;
  return false;
}

test::RaceSpec<FastCollapse> fast_collapse_race(std::vector<const char*> reverts) {
  test::RaceSpec<FastCollapse> race;
  race.setup([reverts](FastCollapse& f) {
    f.sys = System::create({.ram_bytes = 64ull << 20});
    for (const char* r : reverts) (void)f.sys->tune(r, "on");
    f.p = f.sys->new_process("P");
    const long raw = f.p->mmap(0, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    f.a = (static_cast<uint64_t>(raw) + PMD_SIZE - 1) & ~(PMD_SIZE - 1);
    (void)f.p->fill(f.a, 1, 8 * PAGE_SIZE);  // max_ptes_none lets the rest be none: fewer steps
  });
  race.thread("G", [](FastCollapse& f) {
    f.pinned = gup_fast_fallback(f.p->mm(), f.a + 5 * PAGE_SIZE, 1, FOLL_PIN | FOLL_FAST_ONLY, &f.page);
    f.g_done = true;
  });
  race.thread("C", [](FastCollapse& f) {
    f.collapse = f.p->madvise(f.a, PMD_SIZE, MADV_COLLAPSE);
    // Whether the collapse returned while G was still inside its lockless
    // walk (not whether G's body had returned: G has no step between its
    // walk's end and its body's, so a collapse that waited for the walk
    // still ends before G's body does).
    f.c_done_first = lockless_walk_open(f.sys->kernel());
  });
  race.check([](FastCollapse& f) -> std::optional<std::string> {
    if (!f.sys->warnings().empty()) return "warning: " + f.sys->warnings().back();
    // A pin of a small folio is GUP_PIN_COUNTING_BIAS references the
    // checker must be told of.
    std::map<uint64_t, long> refs;
    if (f.pinned == 1) refs[f.sys->kernel()->phys->page_to_pfn(f.page)] = GUP_PIN_COUNTING_BIAS;
    CheckReport r = f.sys->check_with_refs(refs);
    if (!r.ok()) return r.to_string();
    return std::nullopt;
  });
  return race;
}

// The end of a FastCollapse run: the pin (if any) is given back and the
// system checked with every process gone.
void fast_collapse_finish(FastCollapse* f) {
  if (f->pinned == 1) unpin_user_page(f->page);
  for (Process* q : f->sys->processes()) q->exit();
  CheckReport r = f->sys->check();
  EXPECT_TRUE(r.ok()) << r.to_string();
}

// 70cbc3cc78a9 "mm: gup: fix the fast GUP race against THP collapse": the
// PMD re-check after the reference. With it G sees the cleared PMD and
// backs off (the collapse waits for it, then succeeds); without it G's PTE
// re-check passes on the detached table, G pins the page, and the collapse
// finds the extra reference and gives up. Nothing is corrupted: the
// collapse's wait (2ba99c5e0881) still stands.
TEST(RevertCollapseTest, PmdRecheckMakesGupFastBackOffACollapse) {
  for (bool revert : {false, true}) {
    SCOPED_TRACE(revert ? "revert.gup-fast-pmd-recheck" : "fixed");
    auto spec = fast_collapse_race(revert ? std::vector<const char*>{"revert.gup-fast-pmd-recheck"}
                                          : std::vector<const char*>{});
    auto race = spec.race();
    bool hit = false;
    std::string sched = spec.directed("gup_fast.pte_read", &hit);
    ASSERT_TRUE(hit);
    auto r = race.replay(sched);
    ASSERT_EQ(r.outcome, explore::Outcome::kClean) << r.summary();
    FastCollapse* f = race.last();
    EXPECT_FALSE(f->c_done_first) << "the collapse waits for the walker";
    EXPECT_EQ(f->pinned, revert ? 1 : 0);
    EXPECT_EQ(f->collapse, revert ? -EAGAIN : 0);
    fast_collapse_finish(f);
  }
}

// 2ba99c5e0881 "mm/khugepaged: fix GUP-fast interaction by sending IPI":
// after clearing the PMD the collapse waits for the lockless walkers
// (tlb_remove_table_sync_one). Without it the collapse completes while G
// is stopped; G's PMD re-check still turns it away.
TEST(RevertCollapseTest, CollapseSyncWaitsForTheWalker) {
  for (bool revert : {false, true}) {
    SCOPED_TRACE(revert ? "revert.collapse-sync" : "fixed");
    auto spec =
        fast_collapse_race(revert ? std::vector<const char*>{"revert.collapse-sync"} : std::vector<const char*>{});
    auto race = spec.race();
    bool hit = false;
    std::string sched = spec.directed("gup_fast.pte_read", &hit);
    ASSERT_TRUE(hit);
    auto r = race.replay(sched);
    ASSERT_EQ(r.outcome, explore::Outcome::kClean) << r.summary();
    FastCollapse* f = race.last();
    EXPECT_EQ(f->c_done_first, revert);
    EXPECT_EQ(f->pinned, 0);
    EXPECT_EQ(f->collapse, 0);
    EXPECT_EQ(f->sys->counter("collapse.table_sync"), revert ? 0 : 1);
    fast_collapse_finish(f);
  }
}

// ---- revert.gup-fast-folio-recheck ----

// c24d37322548 "mm/gup: fix try_grab_compound_head() race with
// split_huge_page()": G has read page X's folio (a 64K mTHP) and stops
// before its reference (gup_fast.folio_read); S splits the folio (a partial
// munmap queues it, the shrinker splits it). The fix re-reads page_folio
// after the reference and retries; the revert keeps the old head, now an
// order-0 folio X is no part of, and pins that instead of X's.
struct FastSplit {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t a = 0;
  long pinned = -1;
  Page* page = nullptr;
  Page* head = nullptr;  // the mTHP's first page
  long split = -1;
};

test::RaceSpec<FastSplit> fast_split_race(bool revert) {
  test::RaceSpec<FastSplit> race;
  race.setup([revert](FastSplit& f) {
    f.sys = System::create({.ram_bytes = 64ull << 20});
    if (revert) (void)f.sys->tune("revert.gup-fast-folio-recheck", "on");
    (void)f.sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "never");
    (void)f.sys->sysfs_write("transparent_hugepage/hugepages-64kB/enabled", "always");
    f.p = f.sys->new_process("P");
    const long raw = f.p->mmap(0, 2 * 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    f.a = (static_cast<uint64_t>(raw) + 65535) & ~uint64_t{65535};
    (void)f.p->fill(f.a, 1, 65536);
    f.head = f.sys->kernel()->phys->pfn_to_page(f.p->page_info(f.a).pfn);
  });
  race.thread("G", [](FastSplit& f) {
    f.pinned = gup_fast_fallback(f.p->mm(), f.a + 5 * PAGE_SIZE, 1, FOLL_PIN | FOLL_FAST_ONLY, &f.page);
  });
  race.thread("S", [](FastSplit& f) {
    (void)f.p->munmap(f.a + 15 * PAGE_SIZE, PAGE_SIZE);
    f.split = f.sys->run_shrinkers();
  });
  return race;
}

TEST(RevertFolioRecheckTest, SplitBeforeTheReferenceMakesTheRevertPinTheWrongFolio) {
  for (bool revert : {false, true}) {
    SCOPED_TRACE(revert ? "revert.gup-fast-folio-recheck" : "fixed");
    auto spec = fast_split_race(revert);
    auto race = spec.race();
    bool hit = false;
    std::string sched = spec.directed("gup_fast.folio_read", &hit);
    ASSERT_TRUE(hit);
    auto r = race.replay(sched);
    ASSERT_EQ(r.outcome, explore::Outcome::kClean) << r.summary();
    FastSplit* f = race.last();
    ASSERT_EQ(f->split, 1);
    ASSERT_EQ(f->pinned, 1);
    PhysMem* phys = f->sys->kernel()->phys.get();
    EXPECT_EQ(f->page, phys->pfn_to_page(f->p->page_info(f->a + 5 * PAGE_SIZE).pfn));
    // The pin's references: on X's own folio with the fix, on the old head
    // (page 0, order 0 now) with the revert.
    Folio* x = page_folio(f->page);
    Folio* h = page_folio(f->head);
    EXPECT_EQ(folio_order(x), 0u);
    EXPECT_EQ(folio_maybe_dma_pinned(x), !revert);
    EXPECT_EQ(folio_maybe_dma_pinned(h), revert);
    if (!revert) {
      unpin_user_page(f->page);
    } else {
      // Give the references back where they were taken, as a caller holding
      // the folio would.
      gup_put_folio(h, 1, FOLL_PIN);
    }
    for (Process* q : f->sys->processes()) q->exit();
    CheckReport c = f->sys->check();
    EXPECT_TRUE(c.ok()) << c.to_string();
  }
}

}  // namespace
}  // namespace mmlab
