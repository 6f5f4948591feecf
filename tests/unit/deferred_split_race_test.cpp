// The stress finding of issue 34 settled under the scheduler: an anonymous
// large folio on the deferred split queue with PG_partially_mapped set while
// every one of its pages is mapped again. The kernel reaches that state:
// __folio_split() checks can_split_folio(), unmaps the folio page by page
// (try_to_migrate; a removal that leaves other pages mapped calls
// deferred_split_folio(folio, true)), and if a reference taken after the
// check (GUP-fast) makes folio_ref_freeze() fail, remap_page() maps every
// page again. The flag is only cleared when the folio leaves the queue
// (a split whose freeze succeeded, __folio_unqueue_deferred_split, the
// shrinker losing a race with the last put); deferred_split_folio() warns
// when asked to make a flagged folio "not partially mapped". So the flag
// means "was partially mapped since it was queued", not "is partially mapped
// now", and the checker must not report a fully mapped flagged folio.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "phys/page.h"
#include "phys/phys.h"

namespace mmlab {
namespace {


constexpr uint64_t k64K = 65536;

struct SplitGet {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t a = 0;
  GupPages held;
};

constexpr const char* kReached = "reached: the split failed, the folio is fully mapped and flagged";

Folio* folio_mapped_at(SplitGet& f, uint64_t addr) {
  PageInfo pi = f.p->page_info(addr);
  if (pi.level != 1 || pi.swap || pi.zero) return nullptr;
  return page_folio(f.sys->kernel()->phys->pfn_to_page(pi.pfn));
}

// MADV_PAGEOUT of one page of a 64K mTHP splits the folio first
// (madvise_cold_or_pageout_pte_range); get_user_pages_fast of page 8 beside
// it. A pin would not do: try_to_migrate stops at the first exclusive page
// of a maybe-pinned folio, before anything is unmapped. Without swap the
// split pages stay where they are.
explore::Race<SplitGet> split_get_race() {
  explore::Race<SplitGet> race;
  race.setup([](SplitGet& f) {
    SystemConfig cfg;
    cfg.ram_bytes = 64ull << 20;
    f.sys = System::create(cfg);
    (void)f.sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "never");
    (void)f.sys->sysfs_write("transparent_hugepage/hugepages-64kB/enabled", "always");
    f.p = f.sys->new_process("P");
    const long raw = f.p->mmap(0, 2 * k64K, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    f.a = (static_cast<uint64_t>(raw) + k64K - 1) & ~(k64K - 1);
    (void)f.p->fill(f.a, 1, k64K);
  });
  race.thread("S", [](SplitGet& f) { (void)f.p->madvise(f.a, 4096, MADV_PAGEOUT); });
  race.thread("G", [](SplitGet& f) {
    (void)gup(f.p, GupEntry::kGetUserPagesFast, f.a + 8 * 4096, 1, foll::WRITE, &f.held);
  });
  race.check([](SplitGet& f) -> std::optional<std::string> {
    if (f.held.count() != 1) return "GUP got " + std::to_string(f.held.count()) + " pages";
    Folio* folio = folio_mapped_at(f, f.a);
    if (!folio) return std::string("page 0 is not mapped after the split");
    bool flagged = false;
    if (folio_test_large(folio)) {
      long mapped = 0;
      for (int i = 0; i < 16; i++) mapped += folio_mapped_at(f, f.a + 4096u * i) == folio;
      if (mapped != 16) return "the unsplit folio maps " + std::to_string(mapped) + " of 16 pages";
      flagged = folio_test_partially_mapped(folio);
    }
    // The checker, with GUP's reference accounted for, then after it is
    // dropped and the process has gone.
    if (flagged && !folio_on_deferred_list(folio)) return std::string("flagged but not on the split queue");
    std::map<uint64_t, long> refs;
    f.held.add_refs(&refs);
    CheckReport r = f.sys->check_with_refs(refs);
    if (!r.ok()) return r.to_string();
    f.held.release();
    f.p->exit();
    CheckReport after = f.sys->check();
    if (!after.ok()) return "after exit: " + after.to_string();
    std::vector<std::string> w = f.sys->warnings();
    if (!w.empty()) return "warning: " + w.back();
    // The state is the finding: the explorer stops at the first run that
    // reaches it, with its schedule.
    if (flagged) return std::string(kReached);
    return std::nullopt;
  });
  return race;
}

// PCT (d = 2) puts the reference between can_split_folio() and the freeze; the
// checker, run in that state before the oracle says "reached", is quiet
// (it reported "partially mapped flag without partial mapping" here), and
// the schedule replays to the same state.
TEST(DeferredSplitRaceTest, FailedFreezeLeavesAFullyMappedFolioFlaggedAndTheCheckerQuiet) {
  auto race = split_get_race();
  // Unfiltered: GUP-fast takes no lock, so no object here is touched by
  // both threads at a lock point, and a filtered run never preempts.
  auto res = race.explore({.depth = 2, .runs = 2000, .seed = 1, .filter = false});
  ASSERT_TRUE(res.found) << "no run put the reference inside the split's window: " << res.summary();
  std::printf("# k %llu; reached in run %d: %s\n", static_cast<unsigned long long>(res.k), res.runs,
              res.failure.schedule.c_str());
  ASSERT_EQ(res.failure.outcome, explore::Outcome::kViolation) << res.summary();
  ASSERT_EQ(res.failure.detail, kReached) << res.summary();
  auto again = race.replay(res.failure.schedule);
  EXPECT_EQ(again.outcome, explore::Outcome::kViolation) << again.summary();
  EXPECT_EQ(again.detail, kReached);
  EXPECT_EQ(again.trace_hash, res.failure.trace_hash);
}


// A run ended early on model code: the model takes locks without guards (as
// the kernel does), so unwinding its threads would leave them held and the
// System could not be torn down. A diverged replay and a step-bound run are
// drained instead (each thread runs to its end, unrecorded): the fixture is
// torn down as usual and the next run starts from a fresh one.
TEST(DeferredSplitRaceTest, ARunEndedEarlyOnModelCodeIsDrainedAndTornDown) {
  auto race = split_get_race();
  auto cut = race.replay("0*5");  // the schedule ends while S holds the mmap_lock
  EXPECT_EQ(cut.outcome, explore::Outcome::kDiverged) << cut.summary();
  EXPECT_FALSE(cut.abandoned) << cut.summary();
  auto bounded = race.explore({.depth = 2, .runs = 3, .seed = 1, .k = 40, .step_bound = 8});
  ASSERT_TRUE(bounded.found);
  EXPECT_EQ(bounded.failure.outcome, explore::Outcome::kStepBound) << bounded.summary();
  EXPECT_FALSE(bounded.failure.abandoned);
  auto again = race.replay("1*1,0*200");  // G first, then S: longer than the run
  EXPECT_EQ(again.outcome, explore::Outcome::kDiverged) << again.summary();
  // Each of those fixtures was torn down by the next run's set-up (a lock
  // left held would hang Process::exit there); the last one checks clean.
  std::map<uint64_t, long> refs;
  race.last()->held.add_refs(&refs);
  CheckReport r = race.last()->sys->check_with_refs(refs);
  EXPECT_TRUE(r.ok()) << r.to_string();
}

// A body that throws while it holds the mmap_lock by hand: its thread is
// unwound, the lock stays held, and the fixture is kept rather than torn
// down (its exit would wait for the lock forever).
TEST(DeferredSplitRaceTest, AnExceptionUnderAHandTakenLockAbandonsTheFixture) {
  explore::Race<SplitGet> race;
  race.setup([](SplitGet& f) {
    SystemConfig cfg;
    cfg.ram_bytes = 16ull << 20;
    f.sys = System::create(cfg);
    f.p = f.sys->new_process("P");
  });
  race.thread("T", [](SplitGet& f) {
    mmap_read_lock(f.p->mm());
    throw std::runtime_error("thrown with the mmap_lock held");
  });
  auto res = race.explore({.depth = 2, .runs = 2, .seed = 1});
  ASSERT_TRUE(res.found);
  EXPECT_EQ(res.failure.outcome, explore::Outcome::kException) << res.summary();
  EXPECT_TRUE(res.failure.abandoned);
  ASSERT_NE(race.last(), nullptr);
  EXPECT_FALSE(race.last()->p->mm()->mmap_lock.down_write_trylock()) << "the lock was released after all";
  // The next run starts from a fresh fixture without touching the kept one.
  auto next = race.explore({.depth = 2, .runs = 1, .seed = 2});
  EXPECT_EQ(next.failure.outcome, explore::Outcome::kException);
}

}  // namespace
}  // namespace mmlab
