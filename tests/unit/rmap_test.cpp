// The reverse-map walk (src/mm/rmap.cpp: rmap_walk, page_vma_mapped_walk,
// try_to_unmap_vma) on its own: which entries it hands to its callbacks, with
// which lock held, for PTE-mapped folios shared by fork, PMD-mapped THPs,
// large folios partly unmapped and moved, migration entries, and mappings
// that go away while a walk runs.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "fault/fault.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "pgtable/pgtable.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

constexpr uint64_t k16K = 16 * 1024;

// One entry a walk yielded: where, and which page of the folio it maps.
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

struct Found {
  const Mm* mm;
  uint64_t addr;
  long idx;  // page index in the folio; -1 for a PMD leaf
  bool operator<(const Found& o) const { return std::tie(mm, addr, idx) < std::tie(o.mm, o.addr, o.idx); }
  bool operator==(const Found& o) const { return mm == o.mm && addr == o.addr && idx == o.idx; }
};

class RmapWalkTest : public MmTest {
 protected:
  PhysMem* phys() { return sys->kernel()->phys.get(); }

  Folio* folio_at(Process* q, uint64_t addr) {
    PteDumpEntry e = entry_at(q, addr);
    EXPECT_TRUE(e.level != 0 && !e.swap && e.folio_order >= 0) << std::hex << addr;
    return page_folio(phys()->pfn_to_page(e.pfn));
  }

  // A 64K mTHP (order 4, PTE-mapped) at a 64K-aligned address.
  uint64_t map_mthp_64k(Process* q) {
    enable_order_kb(64);
    uint64_t a = map_aligned(q, k64K, k64K);
    EXPECT_TRUE(q->fill(a, 0x5a, k64K).ok());
    EXPECT_EQ(entry_at(q, a).folio_order, 4);
    return a;
  }

  // A PMD-mapped THP filled with byte.
  uint64_t map_pmd_thp(uint8_t byte) {
    uint64_t a = map_aligned(PMD_SIZE);
    EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
    EXPECT_TRUE(p->fill(a, byte, PMD_SIZE).ok());
    EXPECT_EQ(entry_at(a).level, 2);
    return a;
  }

  // rmap_walk + page_vma_mapped_walk over the whole folio; found entries are
  // recorded (PTEs checked to be locked and to map the page recorded).
  std::vector<Found> walk(Folio* folio, unsigned flags = 0, Ranges* tables = nullptr) {
    std::vector<Found> out;
    const pfn_t fpfn = folio_pfn(folio);
    rmap_walk(folio, {.rmap_one = [&](Vma* vma) {
      PageVmaMappedWalk pvmw = folio_vma_walk(folio, vma, flags);
      return page_vma_mapped_walk(
          &pvmw,
          [&](PageVmaMappedWalk* w) {
            if (!w->pte) {
              EXPECT_EQ(w->ptl, nullptr);
              out.push_back({vma->vm_mm, w->address, -1});
              return true;
            }
            EXPECT_TRUE(w->ptl && w->ptl->is_locked());
            const pte_t pte = ptep_get(w->pte);
            const pfn_t pfn = (flags & PVMW_MIGRATION) ? swp_offset_pfn(pte_to_swp_entry(pte)) : pte_pfn(pte);
            out.push_back({vma->vm_mm, w->address, static_cast<long>(pfn - fpfn)});
            return true;
          },
          [&](PageVmaMappedWalk* w, uint64_t start, uint64_t end) {
            EXPECT_TRUE(w->ptl && w->ptl->is_locked());
            if (tables) tables->push_back({start, end});
          });
    }});
    return out;
  }

  std::vector<Found> walk_locked(Folio* folio, unsigned flags = 0, Ranges* tables = nullptr) {
    folio_lock(folio);
    std::vector<Found> out = walk(folio, flags, tables);
    folio_unlock(folio);
    return out;
  }

  // Entries expected for pages [first, last) of a folio mapped linearly from base in q.
  static void expect_linear(std::vector<Found>* want, const Process* q, uint64_t base, long first, long last) {
    for (long i = first; i < last; i++) want->push_back({q->mm(), base + static_cast<uint64_t>(i) * PAGE_SIZE, i});
  }
  static std::set<Found> as_set(const std::vector<Found>& v) { return {v.begin(), v.end()}; }

  // A walk of the whole folio yields exactly want, in any order, and ends a
  // table once per range of tables.
  void expect_walk(Folio* folio, const std::vector<Found>& want, const Ranges& tables) {
    Ranges got_tables;
    std::vector<Found> got = walk_locked(folio, 0, &got_tables);
    EXPECT_EQ(got.size(), want.size());
    EXPECT_EQ(as_set(got), as_set(want));
    using RangeSet = std::multiset<std::pair<uint64_t, uint64_t>>;
    EXPECT_EQ(RangeSet(got_tables.begin(), got_tables.end()), RangeSet(tables.begin(), tables.end()));
  }
};

// A 64K folio mapped by 16 PTEs in the parent and, after fork, 16 in the
// child: the walk visits both VMAs of the anon_vma, each entry once, one
// table each.
TEST_F(RmapWalkTest, PteMappedFolioInTwoProcessesAfterFork) {
  uint64_t a = map_mthp_64k(p);
  Process* c = p->fork();
  ASSERT_TRUE(c);
  Folio* f = folio_at(p, a);
  ASSERT_EQ(folio_at(c, a), f);

  std::vector<Found> want;
  expect_linear(&want, p, a, 0, 16);
  expect_linear(&want, c, a, 0, 16);
  expect_walk(f, want, {{a, a + k64K}, {a, a + k64K}});

  // done() ends the rmap walk after the first VMA.
  int vmas = 0;
  folio_lock(f);
  rmap_walk(f, {.rmap_one =
                    [&](Vma*) {
                      vmas++;
                      return true;
                    },
                .done = [] { return true; }});
  folio_unlock(f);
  EXPECT_EQ(vmas, 1);
}

// A PMD-mapped THP is handed over once as a PMD leaf, without a lock. found()
// may stop there (nothing changes), or split it and get its 512 PTEs.
TEST_F(RmapWalkTest, PmdMappedThpIsYieldedAsALeafThenAsPtesOnceSplit) {
  uint64_t a = map_pmd_thp(0x11);
  Folio* f = folio_at(p, a);

  folio_lock(f);
  std::vector<Found> leaves;
  rmap_walk(f, {.rmap_one = [&](Vma* vma) {
    PageVmaMappedWalk pvmw = folio_vma_walk(f, vma, 0);
    EXPECT_FALSE(page_vma_mapped_walk(&pvmw, [&](PageVmaMappedWalk* w) {
      EXPECT_EQ(w->pte, nullptr);
      EXPECT_EQ(w->ptl, nullptr);
      EXPECT_TRUE(w->pmd && pmd_trans_huge(pmdp_get(w->pmd)));
      leaves.push_back({vma->vm_mm, w->address, -1});
      return false;
    }));
    return true;
  }});
  EXPECT_EQ(leaves, (std::vector<Found>{{p->mm(), a, -1}}));
  EXPECT_EQ(entry_at(a).level, 2);

  std::vector<Found> got, want{{p->mm(), a, -1}};
  Ranges tables;
  rmap_walk(f, {.rmap_one = [&](Vma* vma) {
    PageVmaMappedWalk pvmw = folio_vma_walk(f, vma, 0);
    return page_vma_mapped_walk(
        &pvmw,
        [&](PageVmaMappedWalk* w) {
          const long idx = w->pte ? static_cast<long>(pte_pfn(ptep_get(w->pte)) - folio_pfn(f)) : -1;
          got.push_back({vma->vm_mm, w->address, idx});
          if (!w->pte) split_huge_pmd(vma, w->pmd, w->address);
          return true;
        },
        [&](PageVmaMappedWalk*, uint64_t start, uint64_t end) { tables.push_back({start, end}); });
  }});
  folio_unlock(f);
  expect_linear(&want, p, a, 0, HPAGE_PMD_NR);
  EXPECT_EQ(got, want);
  EXPECT_EQ(tables, (Ranges{{a, a + PMD_SIZE}}));
  EXPECT_EQ(entry_at(a).level, 1);
  EXPECT_EQ(order_at(a), 9);  // still one folio, now PTE-mapped
}

// try_to_unmap_vma: in an mlocked VMA the first mapping stops the walk before
// the PMD is split (try_to_unmap_one); TTU_IGNORE_MLOCK (try_to_migrate_one)
// splits it and hands over the PTEs, until replace() refuses one.
TEST_F(RmapWalkTest, TryToUnmapVmaStopsAtMlockUnlessIgnored) {
  uint64_t a = map_pmd_thp(0x22);
  Folio* f = folio_at(p, a);
  Mm* mm = p->mm();
  // White-box mlock: VM_LOCKED without populating or mlocking the folio.
  auto set_vm_locked = [mm, a](bool on) {
    mmap_write_lock(mm);
    Vma* v = vma_lookup(mm, a);
    if (v) v->vm_flags = on ? v->vm_flags | VM_LOCKED : v->vm_flags & ~VM_LOCKED;
    mmap_write_unlock(mm);
    return v;
  };
  Vma* vma = set_vm_locked(true);
  ASSERT_TRUE(vma);

  int replaced = 0;
  auto refuse = [&](PageVmaMappedWalk* w, PteUnmapBatch*) {
    EXPECT_EQ(w->address, a);
    replaced++;
    return false;
  };
  folio_lock(f);
  EXPECT_FALSE(try_to_unmap_vma(f, vma, 0, refuse));
  EXPECT_EQ(replaced, 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_FALSE(try_to_unmap_vma(f, vma, TTU_IGNORE_MLOCK, refuse));
  EXPECT_EQ(replaced, 1);
  EXPECT_EQ(entry_at(a).level, 1);
  folio_unlock(f);

  set_vm_locked(false);
}

// A 64K folio with its middle 16K unmapped and its last 16K moved elsewhere by
// mremap: three VMAs of one anon_vma, each walked over its part of the folio
// only, every remaining page found at its (moved) linear address.
TEST_F(RmapWalkTest, PartlyUnmappedAndMremappedLargeFolio) {
  uint64_t a = map_mthp_64k(p);
  Folio* f = folio_at(p, a);
  uint64_t b = map_aligned(PMD_SIZE);  // a destination far from a
  ASSERT_EQ(p->mremap(a + 3 * k16K, k16K, k16K, MREMAP_MAYMOVE | MREMAP_FIXED, b), static_cast<long>(b));
  ASSERT_EQ(p->munmap(a + k16K, k16K), 0);
  ASSERT_EQ(folio_at(p, b), f);

  std::vector<Found> want;
  expect_linear(&want, p, a, 0, 4);
  expect_linear(&want, p, a, 8, 12);
  for (long i = 12; i < 16; i++) want.push_back({p->mm(), b + static_cast<uint64_t>(i - 12) * PAGE_SIZE, i});
  expect_walk(f, want, {{a, a + k16K}, {a + 2 * k16K, a + 3 * k16K}, {b, b + k16K}});
}

// PVMW_MIGRATION finds migration entries pointing into the range instead of
// present PTEs: every PTE of a forked 64K folio is swapped for a migration
// entry by hand, found again by a part of the range, then by the rest.
TEST_F(RmapWalkTest, MigrationEntriesAreFoundByPfnRange) {
  uint64_t a = map_mthp_64k(p);
  Process* c = p->fork();
  ASSERT_TRUE(c);
  Folio* f = folio_at(p, a);
  const pfn_t fpfn = folio_pfn(f);
  std::map<std::pair<const Mm*, uint64_t>, pte_t> saved;

  folio_lock(f);
  rmap_walk(f, {.rmap_one = [&](Vma* vma) {
    PageVmaMappedWalk pvmw = folio_vma_walk(f, vma, 0);
    return page_vma_mapped_walk(&pvmw, [&](PageVmaMappedWalk* w) {
      const pte_t old = ptep_get(w->pte);
      saved[{vma->vm_mm, w->address}] = old;
      entry_set(w->pte, swp_entry_to_pte(make_migration_entry(SWP_MIGRATION_READ, pte_pfn(old))));
      return true;
    });
  }});
  EXPECT_EQ(saved.size(), 32u);
  EXPECT_TRUE(walk(f).empty());  // no present PTE maps it now

  // Put back the entries pointing into pages [lo, hi) of the folio.
  auto restore = [&](uint64_t lo, uint64_t hi) {
    long n = 0;
    rmap_walk(f, {.rmap_one = [&](Vma* vma) {
      PageVmaMappedWalk pvmw{
          .pfn = fpfn + lo, .nr_pages = hi - lo, .pgoff = f->page.index + lo, .vma = vma, .flags = PVMW_MIGRATION};
      return page_vma_mapped_walk(&pvmw, [&](PageVmaMappedWalk* w) {
        EXPECT_TRUE(w->ptl && w->ptl->is_locked());
        const pfn_t pfn = swp_offset_pfn(pte_to_swp_entry(ptep_get(w->pte)));
        EXPECT_TRUE(pfn >= fpfn + lo && pfn < fpfn + hi);
        entry_set(w->pte, saved.at({vma->vm_mm, w->address}));
        n++;
        return true;
      });
    }});
    return n;
  };
  EXPECT_EQ(restore(4, 8), 8);
  EXPECT_EQ(walk(f, PVMW_MIGRATION).size(), 24u);
  EXPECT_EQ(restore(0, 16), 24);
  EXPECT_EQ(walk(f).size(), 32u);
  EXPECT_TRUE(walk(f, PVMW_MIGRATION).empty());
  folio_unlock(f);
  expect_bytes(c, a, k64K, 0x5a);
}

// Walks of a folio while forked children drop their mappings (MADV_DONTNEED,
// munmap, exit, which frees their tables): the parent's 16 PTEs are always
// found, each child's at most once each and where they belong, every one
// under its table's lock. The children are forked between rounds, while no
// walk runs: fork still writes a child VMA after publishing it to the rmap
// (docs/NOTES.md, "Left alone").
TEST_F(RmapWalkTest, WalkRacesWithChildrenUnmapping) {
  constexpr int kChildren = 6, kRounds = 15;
  uint64_t a = map_mthp_64k(p);
  Folio* f = folio_at(p, a);
  folio_get(f);  // the walker's: the folio outlives the children's mappings
  std::atomic<long> bad{0}, walks{0};
  auto check = [&](const std::vector<Found>& got) {
    std::map<const Mm*, long> per_mm;
    long misplaced = 0;
    for (const Found& e : got) {
      per_mm[e.mm]++;
      misplaced += e.addr != a + static_cast<uint64_t>(e.idx) * PAGE_SIZE;
    }
    bool ok = as_set(got).size() == got.size() && per_mm[p->mm()] == 16 && !misplaced;
    for (auto& [mm, n] : per_mm) ok = ok && n <= 16;
    return ok;
  };
  for (int round = 0; round < kRounds; round++) {
    std::vector<Process*> children;
    for (int i = 0; i < kChildren; i++) children.push_back(p->fork());
    std::latch start(2);
    std::atomic<bool> stop{false};
    std::thread churn([&] {
      start.arrive_and_wait();
      for (int i = 0; i < kChildren; i++) {
        Process* c = children[i];
        if (!c) continue;
        if (i % 3 == 1 && c->madvise(a, k64K / 2, MADV_DONTNEED)) bad++;
        if (i % 3 == 2 && c->munmap(a, k64K)) bad++;
        c->exit();
      }
      stop = true;
    });
    std::thread walker([&] {
      start.arrive_and_wait();
      do {
        if (!check(walk_locked(f))) bad++;
        walks++;
      } while (!stop);
    });
    churn.join();
    walker.join();
    for (Process* c : children) EXPECT_TRUE(c);
  }
  EXPECT_TRUE(check(walk_locked(f)));
  folio_put(f);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(walks.load(), kRounds);
}

}  // namespace
}  // namespace mmlab::test
