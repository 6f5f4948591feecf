// Reverse-map bookkeeping of folio mappings (mm/rmap.c, include/linux/rmap.h):
// mapcounts (small, large, entire, per page), the MM-ID slots, AnonExclusive,
// and the deferred-split queue for partially mapped large anon folios; and
// the reverse-map walk (rmap_walk, page_vma_mapped_walk).
//
// Callers hold the page-table lock of every entry they add or remove, and a
// reference on the folio for each mapping (taken before adding, dropped after
// removing).
#pragma once

#include <cstdint>
#include <functional>

#include "mm/mm.h"
#include "phys/page.h"

namespace mmlab {

using rmap_t = unsigned;
inline constexpr rmap_t RMAP_NONE = 0;
inline constexpr rmap_t RMAP_EXCLUSIVE = 1u << 0;

enum class RmapLevel : uint8_t { kPte, kPmd, kPud };

// A brand-new anon folio: PTE-mapped as a whole (small or mTHP) when level is
// kPte, or by one entire mapping (PMD THP) when kPmd.
void folio_add_new_anon_rmap(Folio* folio, Vma* vma, uint64_t addr, rmap_t flags, RmapLevel level);
void folio_add_anon_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma, uint64_t addr, rmap_t flags);
void folio_add_file_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma);
void folio_remove_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma);
inline void folio_remove_rmap_pte(Folio* folio, Page* page, Vma* vma) { folio_remove_rmap_ptes(folio, page, 1, vma); }
void folio_remove_rmap_pmd(Folio* folio, Page* page, Vma* vma);
// folio_add_file_rmap_pmd: a PMD maps the whole page-cache folio.
void folio_add_file_rmap_pmd(Folio* folio, Page* page, Vma* vma);

// fork: share an anon mapping with the child, or -EBUSY if a page is
// AnonExclusive and the folio may be DMA-pinned (the caller copies instead).
[[nodiscard]] int folio_try_dup_anon_rmap_ptes(Folio* folio, Page* page, int nr, Vma* dst_vma, Vma* src_vma);
[[nodiscard]] int folio_try_dup_anon_rmap_pmd(Folio* folio, Page* page, Vma* dst_vma, Vma* src_vma);
void folio_dup_file_rmap_ptes(Folio* folio, Page* page, int nr, Vma* dst_vma);
// Swap-out / migration: the entry is already cleared; -EBUSY if maybe pinned.
[[nodiscard]] int folio_try_share_anon_rmap_pte(Folio* folio, Page* page);

// folio_move_anon_rmap: a reused folio now belongs to this VMA's anon_vma.
void folio_move_anon_rmap(Folio* folio, Vma* vma);

// The large mapcount and MM-ID slots of a large folio, by diff mappings of
// vma's mm (the bookkeeping under folio_lock_large_mapcount()); the entire
// and per-page counts are the caller's.
void folio_add_large_mapcount(Folio* f, int diff, const Vma* vma);
void folio_sub_large_mapcount(Folio* f, int diff, const Vma* vma);

// MM-ID mapcount of this mm in the folio's slots (0 if none); for checkers.
[[nodiscard]] int folio_mm_id_mapcount(const Folio* folio, int mm_id);

// Deferred split queue (mm/huge_memory.c's deferred_split_folio).
void deferred_split_folio(Folio* folio, bool partially_mapped);
// Removes the folio from the queue if it is on it (on free or split).
void folio_unqueue_deferred_split(Folio* folio);
bool folio_on_deferred_list(const Folio* folio);

// ---- the reverse-map walk (mm/rmap.c rmap_walk, mm/page_vma_mapped.c) ----
// Swap-out (try_to_unmap), folio split (unmap_folio, remap_page) and the
// long-term-pin migration find a folio's entries through these two and differ
// only in what they install there.

// The anon_vma a folio's mapping names (nullptr if not anonymous).
inline AnonVma* folio_anon_vma(const Folio* f) {
  if (!folio_test_anon(f)) return nullptr;
  return reinterpret_cast<AnonVma*>(aref(const_cast<uint64_t&>(f->page.mapping)).load(std::memory_order_acquire));
}

// vma_address over the linear page indices [pgoff, pgoff + nr_pages): the
// user addresses [*start, *end) at which vma may map them, clipped to the
// VMA; false if none.
bool vma_address_range(const Vma* vma, uint64_t pgoff, uint64_t nr_pages, uint64_t* start, uint64_t* end);

// PageVmaMappedWalk::flags: look for migration entries pointing into the
// range instead of present PTEs mapping it (remove_migration_pte).
inline constexpr unsigned PVMW_MIGRATION = 1u << 1;

// struct page_vma_mapped_walk: which pfns to look for in which VMA, and,
// while a callback runs, where they were found.
struct PageVmaMappedWalk {
  pfn_t pfn = 0;          // the first pfn of the range
  uint64_t nr_pages = 0;  // its length
  uint64_t pgoff = 0;     // the linear page index pfn is mapped at
  Vma* vma = nullptr;
  unsigned flags = 0;
  // Set by the walk for its callbacks.
  uint64_t address = 0;
  pmd_t* pmd = nullptr;
  pte_t* pte = nullptr;     // nullptr: *pmd is a PMD leaf mapping the range
  SpinLock* ptl = nullptr;  // the PTE table's lock, held while pte is set
};

// DEFINE_FOLIO_VMA_WALK: every page of folio in vma.
inline PageVmaMappedWalk folio_vma_walk(const Folio* folio, Vma* vma, unsigned flags) {
  return {.pfn = folio_pfn(folio),
          .nr_pages = static_cast<uint64_t>(folio_nr_pages(folio)),
          .pgoff = folio->page.index,
          .vma = vma,
          .flags = flags};
}

// Called for each mapping found; false stops the walk. For a PTE the table's
// lock is held. A PMD leaf (pte == nullptr; present mappings only) is handed
// over with no lock held, as the callers split it with split_huge_pmd(): the
// walk then looks at the PTEs that replaced it.
using PvmwFn = std::function<bool(PageVmaMappedWalk* pvmw)>;
// Called before the walk unlocks a PTE table it looked at over [start, end),
// also when found stopped the walk there: batched rmap removal and TLB
// flushes must happen under that lock.
using PvmwTableFn = std::function<void(PageVmaMappedWalk* pvmw, uint64_t start, uint64_t end)>;

// page_vma_mapped_walk: every entry of pvmw->vma that maps the range (or,
// with PVMW_MIGRATION, stands for it). Where the kernel's is an iterator the
// caller loops on, ours calls found back (and table_done at each table's end). A table that went away or became a leaf meanwhile has nothing
// to yield; the caller holds what keeps the folio's mappings from being added
// (the folio lock) and the VMA alive (the anon_vma lock). Returns false when
// found stopped it.
bool page_vma_mapped_walk(PageVmaMappedWalk* pvmw, const PvmwFn& found, const PvmwTableFn& table_done = nullptr);

// struct rmap_walk_control for anonymous folios.
struct RmapWalkControl {
  std::function<bool(Vma* vma)> rmap_one = nullptr;  // false stops the walk
  std::function<bool()> done = nullptr;              // optional: true stops it after a VMA
};
// rmap_walk_locked: every VMA of av, whose rwsem the caller holds (read or write).
void rmap_walk_locked(AnonVma* av, const RmapWalkControl& rwc) REQUIRES_SHARED(av->rwsem);
// rmap_walk: the same under the folio's anon_vma lock taken for read; nothing
// for a folio without one.
void rmap_walk(Folio* folio, const RmapWalkControl& rwc);

// Migration entries of anonymous folios (try_to_migrate: mm/rmap.c, defined
// in mm/rmap.cpp; remove_migration_ptes: mm/migrate.c, in mm/migrate.cpp).
// try_to_migrate: every mapping of the locked folio in av's VMAs becomes a
// migration entry (PMD mappings split first); it stops at a page that may be
// pinned, leaving the folio mapped.
void try_to_migrate(Folio* folio, AnonVma* av) REQUIRES_SHARED(av->rwsem);
// ttu_flags: the one the model's callers differ by (TTU_SPLIT_HUGE_PMD is
// what they all do).
inline constexpr unsigned TTU_IGNORE_MLOCK = 0x8;  // an mlocked VMA's mappings go too

// try_to_unmap (TTU_SPLIT_HUGE_PMD | TTU_BATCH_FLUSH): shrink_folio_list's
// unmap of a locked folio over the rmap walk: every PTE mapping it becomes a
// swap entry (it is in the swap cache), or, lazy-free, is discarded; an
// mlocked VMA or a maybe-pinned page keeps it mapped (folio_mapped after).
// A page-cache folio's PTEs are cleared (the page cache keeps it); with
// TTU_IGNORE_MLOCK (collapse_file) an mlocked VMA's go too.
void try_to_unmap(Folio* folio, unsigned ttu_flags = 0);
// remove_migration_ptes: every migration entry into [fpfn, fpfn + nr) (linear
// index `index`) in av's VMAs maps the page at the same index of dst again,
// or its own page when dst is null; repeated until a pass finds none, so that
// an entry a concurrent fork or mremap copied or moved into a VMA already
// walked is not left behind.
void remove_migration_ptes(AnonVma* av, pfn_t fpfn, uint64_t index, uint64_t nr, Folio* dst,
                           bool map_unused_to_zeropage) REQUIRES_SHARED(av->rwsem);

// The entries of one folio that try_to_unmap_one or try_to_migrate_one
// replaced within one PTE table; the table's TLB is flushed once. For
// try_to_unmap_one consecutive pages lose their rmap and references together
// (one folio_remove_rmap_ptes(), as its lazy-free batch does; a folio it
// swaps out is in the swap cache, which deferred_split_folio() ignores).
// try_to_migrate_one removes each page's rmap as it goes
// (remove_rmap_now()), as the kernel's does: a PTE-mapped anonymous large
// folio is "partially mapped" from its first page on, and queued for
// deferred split with the flag, which a split whose refcount freeze then
// fails leaves set on the remapped folio.
class PteUnmapBatch {
 public:
  PteUnmapBatch(Folio* folio, Vma* vma) : folio_(folio), vma_(vma) {}
  // An entry was cleared, even if it is then put back: the table needs a flush.
  void cleared() { cleared_ = true; }
  // The present entry pteval, cleared from pte, becomes swp_pte (a swap or
  // migration entry) with pteval's soft-dirty and uffd-wp bits; page joins
  // the run whose rmap and references go at the table's end.
  void set_swp_pte(pte_t* pte, pte_t pteval, pte_t swp_pte, Page* page);
  // nr consecutive pages from page, whose entries were cleared and stay
  // none (a discarded lazy-free run), join the run likewise.
  void discarded(Page* page, unsigned nr);
  // The pages added so far lose their rmap and references now.
  void remove_rmap_now() { flush_run(); }
  // Under the lock of the table walked over [start, end), before it is dropped.
  void table_done(uint64_t start, uint64_t end);

 private:
  void add(Page* page);
  void flush_run();
  Folio* folio_;
  Vma* vma_;
  Page* first_ = nullptr;
  int nr_ = 0;
  bool cleared_ = false;
};


// What try_to_unmap_one() or try_to_migrate_one() puts in place of one
// present PTE of the folio (pvmw->pte, its table locked), telling batch what
// it cleared and replaced. false leaves the page mapped and stops the walk.
using ReplacePteFn = std::function<bool(PageVmaMappedWalk* pvmw, PteUnmapBatch* batch)>;

// What the walk does with a PMD leaf mapping the folio (pvmw->pte nullptr,
// no lock held): split it and look at the PTEs (TTU_SPLIT_HUGE_PMD), or let
// the caller deal with it whole (try_to_unmap_one's lazy-free discard).
enum class PmdLeafAction : uint8_t {
  kSplit,       // split_huge_pmd(), then the PTEs go to replace()
  kDone,        // the leaf is gone: this VMA is done (walk_done)
  kAbort,       // the folio must stay mapped: stop (walk_abort)
  kLookAtPtes,  // it is not a leaf of this folio any more: look at the PTEs
};
using PmdLeafFn = std::function<PmdLeafAction(PageVmaMappedWalk* pvmw)>;

// The walk try_to_unmap_one() and try_to_migrate_one() share over one VMA:
// a PMD mapping of the folio goes to pmd_leaf (default: split it,
// TTU_SPLIT_HUGE_PMD), then each PTE mapping it goes to replace(), and the
// batch is flushed at each table's end. Without TTU_IGNORE_MLOCK the first
// mapping found in an mlocked VMA stops the walk before anything is split or
// cleared. false: stopped (walk_abort).
bool try_to_unmap_vma(Folio* folio, Vma* vma, unsigned ttu_flags, const ReplacePteFn& replace,
                      const PmdLeafFn& pmd_leaf = nullptr);

}  // namespace mmlab
