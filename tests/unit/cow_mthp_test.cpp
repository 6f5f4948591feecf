// Large-folio copy-on-write (`tune cow.policy` rfc and fixed, `cow.reuse
// whole`; docs/VARIANTS.md): what the scenario language cannot say. Races of
// a copy with another process's exit and with a zap in the same process, the
// posting's IS_ERR path, allocation and charge fallback, and the bookkeeping
// a fixed copy leaves in both processes. Each race runs once through the
// fault's own window (a directed schedule stopping the fault at the label
// wp_copy.enter or wp_copy.before_revalidate, docs/RACES.md) and once as two
// free-running threads with their allowed outcomes. Every test ends with the
// invariant checker; the rfc ones assert the damage it finds.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fault/fault.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mmlab/explore.h"
#include "mmlab/scenario.h"
#include "pgtable/pgtable.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

// A directed run's own fixture: empty, the test's System is the state.
struct CowWindowRun {};

class CowMthpTest : public MmTest {
 protected:
  void SetUp() override {
    MmTest::SetUp();
    set("transparent_hugepage/hugepages-2048kB/enabled", "never");
    enable_order_kb(64);
  }

  void policy(const char* p) { ASSERT_EQ(sys->tune("cow.policy", p), 0) << p; }
  int64_t stat(unsigned kb, const char* item) {
    std::string v;
    EXPECT_EQ(sys->sysfs_read("transparent_hugepage/hugepages-" + std::to_string(kb) + "kB/stats/" + item, &v), 0) << item;
    return std::stoll(v);
  }
  Folio* folio_at(Process* q, uint64_t addr) {
    PteDumpEntry e = entry_at(q, addr);
    if (e.level != 1 || e.swap || e.folio_order < 0) return nullptr;
    return page_folio(sys->kernel()->phys->pfn_to_page(e.pfn));
  }
  void checked(const std::string& step) {
    CheckReport r = sys->check();
    EXPECT_TRUE(r.ok()) << "after " << step << ":\n" << r.to_string();
  }
  // A 64K mTHP at an aligned address holding `byte`, shared with a child.
  uint64_t shared_mthp(Process** child, uint8_t byte = 1) {
    uint64_t a = map_aligned(k64K, k64K);
    EXPECT_TRUE(p->fill(a, byte, k64K).ok());
    EXPECT_EQ(order_at(a), 4);
    *child = p->fork("child");
    EXPECT_NE(*child, nullptr);
    return a;
  }
  // The write-protect fault `fault` (thread W) runs under the scheduler
  // until it reaches `label`, then `action` (thread Z) runs to its end, then
  // the fault goes on: Z inside W's window, every time. The objects are the
  // test's, set up before and looked at after the one run.
  void in_window(const char* label, std::function<void()> fault, std::function<void()> action) {
    explore::Race<CowWindowRun> race;
    race.thread("W", [fault](CowWindowRun&) { fault(); });
    race.thread("Z", [action](CowWindowRun&) { action(); });
    explore::RunResult r = race.replay_directed(std::string("W@") + label + " Z W");
    EXPECT_EQ(r.outcome, explore::Outcome::kClean) << r.summary() << "\n" << race.explain(r);
  }
};

const char* const kPolicies[] = {"base", "rfc", "fixed"};

// ---- what a fixed copy leaves behind ----

TEST_F(CowMthpTest, FixedCopyAccountsTheRunInBothProcesses) {
  policy("fixed");
  Process* c;
  uint64_t a = shared_mthp(&c);
  Folio* old_folio = folio_at(p, a);
  ASSERT_NE(old_folio, nullptr);
  sys->reset_counters();
  ASSERT_TRUE(c->fill(a + 5 * PAGE_SIZE, 2, PAGE_SIZE).ok());
  Folio* new_folio = folio_at(c, a);
  ASSERT_NE(new_folio, nullptr);
  EXPECT_NE(new_folio, old_folio);
  EXPECT_EQ(folio_order(new_folio), 4u);
  EXPECT_EQ(folio_ref_count(new_folio), 16);
  EXPECT_EQ(folio_large_mapcount(new_folio), 16);
  for (long i = 0; i < 16; i++) EXPECT_TRUE(PageAnonExclusive(folio_page(new_folio, i))) << i;
  // The old folio is the parent's alone again: one MM-ID slot, 16 mappings.
  EXPECT_EQ(folio_large_mapcount(old_folio), 16);
  EXPECT_EQ(folio_ref_count(old_folio), 16);
  EXPECT_FALSE(folio_maybe_mapped_shared(old_folio));
  EXPECT_EQ(folio_mm_id_mapcount(old_folio, p->mm()->mm_id), 16);
  EXPECT_EQ(folio_mm_id_mapcount(old_folio, c->mm()->mm_id), 0);
  EXPECT_FALSE(folio_on_deferred_list(old_folio));
  EXPECT_EQ(c->rss_anon(), static_cast<long>(k64K));
  // One fault, one clear-and-flush, one notifier range, 64K copied.
  EXPECT_EQ(sys->counter("fault.wp_copy"), 1);
  EXPECT_EQ(sys->counter("tlb.flush"), 1);
  EXPECT_EQ(sys->counter("cow.notifier_ranges"), 1);
  EXPECT_EQ(sys->counter("cow.bytes_copied"), static_cast<int64_t>(k64K));
  EXPECT_EQ(stat(64, "wp_fault_alloc"), 1);
  expect_bytes(c, a, 5 * PAGE_SIZE, 1);
  expect_bytes(c, a + 5 * PAGE_SIZE, PAGE_SIZE, 2);
  expect_bytes(c, a + 6 * PAGE_SIZE, 10 * PAGE_SIZE, 1);
  expect_bytes(p, a, k64K, 1);
  checked("the child's copy");
}

// cow.zero_subpages_copied counts the copied pages whose bytes were all
// zero, whatever the policy copies: here pages 3 and 7 of 16 are zero.
TEST_F(CowMthpTest, ZeroSubpagesCopiedCountsAllZeroSourcePages) {
  for (const char* pol : kPolicies) {
    SCOPED_TRACE(pol);
    policy(pol);
    Process* c;
    uint64_t a = map_aligned(k64K, k64K);
    ASSERT_TRUE(p->fill(a, 1, k64K).ok());
    ASSERT_TRUE(p->fill(a + 3 * PAGE_SIZE, 0, PAGE_SIZE).ok());
    ASSERT_TRUE(p->fill(a + 7 * PAGE_SIZE, 0, PAGE_SIZE).ok());
    ASSERT_EQ(order_at(a), 4);
    c = p->fork("child");
    ASSERT_NE(c, nullptr);
    sys->reset_counters();
    ASSERT_TRUE(c->fill(a + 5 * PAGE_SIZE, 2, 1).ok());  // a data page: 4K under base, the whole run otherwise
    const int64_t whole = std::string(pol) == "base" ? 0 : 2;
    EXPECT_EQ(sys->counter("cow.zero_subpages_copied"), whole);
    if (whole == 0) {
      ASSERT_TRUE(c->fill(a + 3 * PAGE_SIZE, 2, 1).ok());  // the zero page itself
      EXPECT_EQ(sys->counter("cow.zero_subpages_copied"), 1);
    }
    expect_bytes(c, a + 3 * PAGE_SIZE + 1, PAGE_SIZE - 1, 0);
    c->exit();
    ASSERT_EQ(p->munmap(a, k64K), 0);
    checked(pol);
  }
}

// __folio_remove_rmap under CONFIG_PAGE_MAPCOUNT queues a large anon folio
// when a removal unmaps a page while another stays PTE-mapped: the fixed
// copy of half the folio does exactly that once the parent has zapped it.
TEST_F(CowMthpTest, FixedCopyQueuesDeferredSplitAsRemoveRmapDecides) {
  policy("fixed");
  enable_order_kb(32);
  ASSERT_EQ(sys->tune("cow.max_order", "3"), 0);
  Process* c;
  uint64_t a = shared_mthp(&c);
  Folio* old_folio = folio_at(p, a);
  ASSERT_EQ(p->madvise(a + k64K / 2, k64K / 2, MADV_DONTNEED), 0);
  EXPECT_FALSE(folio_on_deferred_list(old_folio));  // the child still maps the upper half
  ASSERT_TRUE(c->fill(a + k64K / 2, 2, PAGE_SIZE).ok());
  EXPECT_EQ(order_at(a + k64K / 2), -1);  // order_at reads the parent: zapped there
  EXPECT_EQ(entry_at(c, a + k64K / 2).folio_order, 3);
  EXPECT_TRUE(folio_test_partially_mapped(old_folio));
  EXPECT_EQ(stat(64, "split_deferred"), 1);
  EXPECT_EQ(stat(64, "nr_anon_partially_mapped"), 1);
  checked("the copy of the upper half");
}

// ---- allocation and charge fallback ----

// An allocation failure (the injector's page_alloc site) and a charge failure of
// the 64K folio: both fall back to 32K, counted per size as the posting
// counts them (a charge failure is a fallback too).
TEST_F(CowMthpTest, AllocationAndChargeFailuresFallBackAndCount) {
  enable_order_kb(32);
  for (const char* pol : {"rfc", "fixed"}) {
    for (bool charge : {false, true}) {
      SCOPED_TRACE(std::string(pol) + (charge ? " charge" : " alloc"));
      policy(pol);
      Process* c;
      uint64_t a = shared_mthp(&c);
      const int64_t fallback = stat(64, "wp_fault_fallback"), fallback_charge = stat(64, "wp_fault_fallback_charge");
      const int64_t alloc32 = stat(32, "wp_fault_alloc"), alloc64 = stat(64, "wp_fault_alloc");
      // Every allocation (or charge) of order 4 fails while the fault runs.
      FaultSpec fail64{.mode = FaultSpec::Mode::kEvery, .order = 4, .n = 1};
      const FaultSite site = charge ? FaultSite::charge : FaultSite::page_alloc;
      ASSERT_EQ(sys->kernel()->phys->fault_injector().set(site, fail64), 0);
      ASSERT_TRUE(c->fill(a + PAGE_SIZE, 2, PAGE_SIZE).ok());
      ASSERT_EQ(sys->kernel()->phys->fault_injector().set(site, FaultSpec{}), 0);
      EXPECT_EQ(entry_at(c, a).folio_order, 3);
      EXPECT_EQ(stat(64, "wp_fault_fallback") - fallback, 1);
      EXPECT_EQ(stat(64, "wp_fault_fallback_charge") - fallback_charge, charge ? 1 : 0);
      EXPECT_EQ(stat(64, "wp_fault_alloc") - alloc64, 0);
      EXPECT_EQ(stat(32, "wp_fault_alloc") - alloc32, 1);
      expect_bytes(c, a, PAGE_SIZE, 1);
      expect_bytes(c, a + PAGE_SIZE, PAGE_SIZE, 2);
      expect_bytes(c, a + 2 * PAGE_SIZE, k64K - 2 * PAGE_SIZE, 1);
      checked("the fallback");
      c->exit();
      ASSERT_EQ(p->munmap(a, k64K), 0);
    }
  }
}

// fixed allocates without direct reclaim or compaction whatever defrag
// says; the posting's vma_thp_gfp_mask() allows both under defrag=always.
TEST_F(CowMthpTest, FixedNeverReclaimsDirectly) {
  set("transparent_hugepage/defrag", "always");
  for (const char* pol : {"rfc", "fixed"}) {
    SCOPED_TRACE(pol);
    policy(pol);
    Process* c;
    uint64_t a = shared_mthp(&c);
    sys->reset_counters();
    ASSERT_TRUE(c->fill(a, 2, PAGE_SIZE).ok());
    EXPECT_EQ(entry_at(c, a).folio_order, 4);
    EXPECT_EQ(sys->counter("cow.alloc_direct_reclaim"), std::string(pol) == "rfc" ? 1 : 0);
    c->exit();
    ASSERT_EQ(p->munmap(a, k64K), 0);
  }
}

// ---- the last sharer exits while a copy is in flight ----

// Between the snapshot (and the copy) and the re-validation the child
// exits: the parent's entries did not change, so the copy is installed and
// the old folio, unmapped everywhere now, is freed. Every policy.
TEST_F(CowMthpTest, LastSharerExitsBetweenSnapshotAndRevalidation) {
  for (const char* pol : kPolicies) {
    SCOPED_TRACE(pol);
    policy(pol);
    Process* c;
    uint64_t a = shared_mthp(&c);
    sys->reset_counters();
    in_window(
        "wp_copy.before_revalidate", [&] { ASSERT_TRUE(p->fill(a + 3 * PAGE_SIZE, 7, PAGE_SIZE).ok()); },
        [c] { c->exit(); });
    EXPECT_TRUE(c->exited());
    EXPECT_EQ(sys->counter("fault.wp_copy"), 1);
    EXPECT_EQ(sys->counter("fault.retry"), 0);
    expect_bytes(p, a, 3 * PAGE_SIZE, 1);
    expect_bytes(p, a + 3 * PAGE_SIZE, PAGE_SIZE, 7);
    expect_bytes(p, a + 4 * PAGE_SIZE, 12 * PAGE_SIZE, 1);
    checked("the copy after the exit");
    // base copied one page and the parent maps the rest of the old folio;
    // rfc and fixed replaced all 16 entries: the old folio was freed (the
    // checker's frame scan above found no leak).
    EXPECT_EQ(entry_at(p, a + 3 * PAGE_SIZE).folio_order, std::string(pol) == "base" ? 0 : 4);
    ASSERT_EQ(p->munmap(a, k64K), 0);
    checked("munmap");
  }
}

// The same race with free-running threads: the child exits while the
// parent writes its range page by page. Allowed outcomes: any mix of
// copies and reuses, the parent's data intact, nothing leaked.
TEST_F(CowMthpTest, LastSharerExitRacesWithWrites) {
  for (const char* pol : kPolicies) {
    SCOPED_TRACE(pol);
    policy(pol);
    for (int round = 0; round < 8; round++) {
      Process* c;
      uint64_t a = shared_mthp(&c);
      std::atomic<bool> go{false};
      std::thread exiter([&] {
        while (!go.load()) std::this_thread::yield();
        c->exit();
      });
      go.store(true);
      for (uint64_t off = 0; off < k64K; off += PAGE_SIZE)
        ASSERT_TRUE(p->fill(a + off, static_cast<uint8_t>(0x10 + off / PAGE_SIZE), PAGE_SIZE).ok());
      exiter.join();
      for (uint64_t off = 0; off < k64K; off += PAGE_SIZE)
        expect_bytes(p, a + off, PAGE_SIZE, static_cast<uint8_t>(0x10 + off / PAGE_SIZE));
      checked("round " + std::to_string(round));
      ASSERT_EQ(p->munmap(a, k64K), 0);
    }
  }
}

// ---- a zap of another page of the range while the copy is in flight ----

// The parent zaps page 9 of the range after the copy, before the
// re-validation. base re-validates its one entry; fixed every entry of the
// run against its snapshot: it backs out and refaults.
TEST_F(CowMthpTest, ZapDuringTheCopyIsSeenByBaseAndFixed) {
  for (const char* pol : {"base", "fixed"}) {
    SCOPED_TRACE(pol);
    policy(pol);
    Process* c;
    uint64_t a = shared_mthp(&c);
    const uint64_t zapped = a + 9 * PAGE_SIZE;
    sys->reset_counters();
    in_window(
        "wp_copy.before_revalidate", [&] { ASSERT_TRUE(p->fill(a, 2, PAGE_SIZE).ok()); },
        [&] { EXPECT_EQ(p->madvise(zapped, PAGE_SIZE, MADV_DONTNEED), 0); });
    EXPECT_EQ(sys->counter("fault.retry"), std::string(pol) == "fixed" ? 1 : 0);
    expect_bytes(p, a, PAGE_SIZE, 2);
    expect_bytes(p, a + PAGE_SIZE, 8 * PAGE_SIZE, 1);
    expect_bytes(p, zapped, PAGE_SIZE, 0);
    expect_bytes(p, zapped + PAGE_SIZE, 6 * PAGE_SIZE, 1);
    expect_bytes(c, a, k64K, 1);
    checked("the copy raced with a zap");
    c->exit();
    ASSERT_EQ(p->munmap(a, k64K), 0);
  }
}

// Flaw (b): the posting re-checks a large copy only for "no entry of the
// range is writable", so the zapped (now none) page is mapped again with the
// data copied before the zap, and the posting removes 16 mappings of the old
// folio where 15 were left. The model records that finding and removes only
// the 15 (its own mapcounts stay sound, so its teardown cannot read freed
// memory); what the checker then sees is the posting's accounting: the rss
// counter still counts the 15 pages the zap left while 16 PTEs map the new
// folio.
TEST_F(CowMthpTest, RfcInstallsOverAPageZappedDuringTheCopy) {
  policy("rfc");
  Process* c;
  uint64_t a = shared_mthp(&c);
  const uint64_t zapped = a + 9 * PAGE_SIZE;
  in_window(
      "wp_copy.before_revalidate", [&] { ASSERT_TRUE(p->fill(a, 2, PAGE_SIZE).ok()); },
      [&] { EXPECT_EQ(p->madvise(zapped, PAGE_SIZE, MADV_DONTNEED), 0); });
  uint8_t v = 0;
  ASSERT_TRUE(p->read(zapped, &v, 1).ok());
  EXPECT_EQ(v, 1);  // MADV_DONTNEED promised zeroes
  std::vector<std::string> w = sys->warnings();
  ASSERT_FALSE(w.empty());
  EXPECT_NE(w.back().find("16 PTEs, 15 of which mapped it"), std::string::npos) << w.back();
  CheckReport r = sys->check();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.to_string().find("rss counter mismatch at test (pid 1) MM_ANONPAGES\nstored 15 pages, page tables map 16"),
            std::string::npos)
      << r.to_string();
  // The rss counters are wrong by design (the posting's accounting):
  // nothing more to check.
  sys.reset();
}

// ---- the posting's IS_ERR(new_folio) path ----

// CONFIG_PT_RECLAIM (x86-64, v6.14+): MADV_DONTNEED frees a PTE table it
// emptied. The model's zap keeps empty tables, so the test does what
// reclaim_pt does: under the PMD lock and the table's PTE lock, clear the
// PMD of an empty table and free it after the lockless walkers.
void reclaim_empty_pte_table(Mm* mm, uint64_t addr) NO_THREAD_SAFETY_ANALYSIS {
  mmap_read_lock(mm);
  pmd_t* pmd = mm_find_pmd(mm, addr);
  ASSERT_NE(pmd, nullptr);
  SpinLock* pml = pmd_lock(mm, pmd);
  pmd_t v = pmdp_get(pmd);
  ASSERT_FALSE(pmd_none(v) || pmd_leaf(v));
  SpinLock* ptl = pte_lockptr(mm->phys, v);
  ptl->lock(LockClass::kPteLock);
  const pte_t* t = table_of<pte_t>(mm->phys, pmd_pfn(v));
  bool empty = true;
  for (unsigned i = 0; i < PTRS_PER_PTE; i++) empty &= pte_none(ptep_get(t + i));
  if (empty) entry_set(pmd, pmd_t{0});
  ptl->unlock();
  pml->unlock();
  if (empty) pgtable_free(mm, mm->phys->pfn_to_page(pmd_pfn(v)));
  mmap_read_unlock(mm);
  ASSERT_TRUE(empty);
}

// The table vanishes while the fault sleeps before alloc_wp_folio():
// pte_offset_map() fails, alloc_wp_folio() returns ERR_PTR(-EAGAIN), and
// wp_page_copy() returns without dropping the old folio's reference
// (flaw d): the folio outlives every mapping. base and fixed drop it.
TEST_F(CowMthpTest, RfcErrAgainLeaksTheOldFolio) {
  for (const char* pol : kPolicies) {
    SCOPED_TRACE(pol);
    policy(pol);
    Process* c;
    uint64_t a = shared_mthp(&c);
    Folio* old_folio = folio_at(p, a);
    in_window(
        "wp_copy.enter", [&] { ASSERT_TRUE(p->fill(a, 2, PAGE_SIZE).ok()); },  // refaults: a fresh anonymous folio
        [&] {
          ASSERT_EQ(p->madvise(a, k64K, MADV_DONTNEED), 0);
          reclaim_empty_pte_table(p->mm(), a);
        });
    expect_bytes(p, a, PAGE_SIZE, 2);
    expect_bytes(p, a + PAGE_SIZE, k64K - PAGE_SIZE, 0);
    expect_bytes(c, a, k64K, 1);
    const int refs = folio_ref_count(old_folio);
    c->exit();
    if (std::string(pol) == "rfc") {
      EXPECT_EQ(refs, 17);  // the child's 16 mappings and the leaked one
      CheckReport r = sys->check();
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.violations.front().invariant, "frame leaked") << r.to_string();
      folio_put(old_folio);  // what the fix would have dropped: the test ends clean
    } else {
      EXPECT_EQ(refs, 16);
    }
    checked("after the child's exit");
    ASSERT_EQ(p->munmap(a, k64K), 0);
  }
}

// ---- the posting's damage is recorded, never a crash (debug builds too) ----

// cow.c's "single PTE of THP" under rfc: in a debug build the VM_WARN sites
// it trips (mapcount underflows, bad pages at free) record a violation
// instead of aborting, and the scenario's `expect violation` sees them.
TEST(CowMthpScenarioTest, RfcDamageIsReportedNotFatal) {
  const char* text =
      "sysfs transparent_hugepage/hugepages-2048kB/enabled never\n"
      "sysfs transparent_hugepage/hugepages-64kB/enabled always\n"
      "tune cow.policy rfc\n"
      "test single-pte\n"
      "expect violation references of the old folio\n"
      "proc P\n"
      "P mmap A 64K rw private align=64K\n"
      "P write A 64K 1\n"
      "P madvise A+4K 60K dontneed\n"
      "P fork C\n"
      "C write A 4K 2\n"
      "C read A+4K 60K 0\n"
      "check\n"
      "C exit\n"
      "P exit\n"
      "check\n";
  std::string err;
  auto prog = scenario_parse_text("t.mms", text, &err);
  ASSERT_TRUE(prog) << err;
  ScenarioOptions opt;
  opt.ram_bytes = 256ull << 20;
  std::ostringstream tap;
  auto res = scenario_run(*prog, opt, tap);
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].outcome, Outcome::kPass) << tap.str();
  bool data = false, checker = false;
  for (auto& v : res[0].violations) {
    data |= v.find("expected every byte of A+0x1000") != std::string::npos;
    checker |= v.find("invariant checker") != std::string::npos;
  }
  EXPECT_TRUE(data) << tap.str();
  EXPECT_TRUE(checker) << tap.str();
}

}  // namespace
}  // namespace mmlab::test
