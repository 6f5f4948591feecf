// Mapcount bookkeeping (mm/rmap.c). Counts are plain counts (no -1 bias).
// The reverse-map walk (rmap_walk, page_vma_mapped_walk of
// mm/page_vma_mapped.c) and the batch its unmapping callers share, and
// try_to_migrate (try_to_migrate_one), which the folio split and
// migration use to replace every mapping by a migration entry.
#include "mm/rmap.h"

#include <algorithm>
#include <cassert>

#include "mm/file.h"
#include "mm/huge_mm.h"
#include "mm/memory.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "mm/kernel.h"
#include "base/mmdebug.h"
#include "pgtable/entry.h"  // the migration-entry format (swapops.h)
#include "pgtable/pgtable.h"
#include "tlb/tlb.h"
#include "sync/sched.h"

namespace mmlab {
namespace {

int32_t atomic_add_return(int32_t& x, int32_t d) { return aref(x).fetch_add(d, std::memory_order_acq_rel) + d; }
int32_t atomic_read(const int32_t& x) { return aref(const_cast<int32_t&>(x)).load(std::memory_order_acquire); }
Stats* stats_of(Folio* f) { return kernel_of(&f->page)->stats.get(); }

// folio_lock_large_mapcount(): the MM-ID slots and the large mapcount change together.
// Its acquire and release are schedule points of their own; the wait (a
// step of its own) only when the bit is taken.
sched::Object mapcount_lock_object(Folio* f) { return {f, sched::ObjKind::kBitLock, sched::kByAddress}; }
void folio_lock_large_mapcount(Folio* f) {
  Page* p1 = folio_page(f, 1);
  sched::point("folio_lock_large_mapcount", sched::Op::kAcquire, mapcount_lock_object(f));
  if (!test_and_set_bit(PG_mapcount_lock, p1)) return;
  sched::wait_until("folio_lock_large_mapcount", mapcount_lock_object(f),
                    [p1] { return !test_and_set_bit(PG_mapcount_lock, p1); });
}
void folio_unlock_large_mapcount(Folio* f) {
  sched::point("folio_unlock_large_mapcount", sched::Op::kRelease, mapcount_lock_object(f));
  clear_bit(PG_mapcount_lock, folio_page(f, 1));
}

void account_new_anon(Folio* f, Vma* vma, uint64_t addr) {
  set_bit(PG_anon, &f->page);
  folio_set_swapbacked(f);
  aref(f->page.mapping).store(reinterpret_cast<uint64_t>(vma->anon_vma), std::memory_order_release);
  f->page.index = linear_page_index(vma, addr);
}

void add_pte_mappings(Folio* f, Page* page, int nr, Vma* vma, rmap_t flags) {
  stats_of(f)->count(Event::rmap_update);
  if (!folio_test_large(f)) {
    VM_WARN_ON_FOLIO(nr != 1, f, "small folio mapped by a batch");
    atomic_add_return(f->page.mapcount, 1);
    if (flags & RMAP_EXCLUSIVE) SetPageAnonExclusive(page);
    return;
  }
  Page* p1 = folio_page(f, 1);
  int newly = 0;
  for (int i = 0; i < nr; i++) {
    if (atomic_add_return(page[i].mapcount, 1) == 1) newly++;
    if (flags & RMAP_EXCLUSIVE) SetPageAnonExclusive(&page[i]);
  }
  if (newly) atomic_add_return(p1->f1.nr_pages_mapped, newly);
  folio_add_large_mapcount(f, nr, vma);
}

// NR_ANON_THPS counts folios that are entirely mapped somewhere, not mappings.
void add_entire_mapping(Folio* f, Page* page, Vma* vma, rmap_t flags) {
  stats_of(f)->count(Event::rmap_update);
  if (atomic_add_return(folio_page(f, 1)->f1.entire_mapcount, 1) == 1 && folio_test_anon(f) &&
      folio_order(f) == PMD_ORDER)
    stats_of(f)->count(VmStat::nr_anon_transparent_hugepages);
  folio_add_large_mapcount(f, 1, vma);
  if (flags & RMAP_EXCLUSIVE) SetPageAnonExclusive(page);  // the head only
}

}  // namespace

// The large mapcount and the MM-ID slots (CONFIG_MM_ID): a slot records one
// mm and how many of the folio's mappings are in it; when no slot can take
// an mm, or a new slot owner finds mappings that are not its own, the folio
// is "maybe mapped shared". The bit clears once one slot owns every mapping.
void folio_add_large_mapcount(Folio* f, int diff, const Vma* vma) {
  Page* p1 = folio_page(f, 1);
  int id = vma->vm_mm->mm_id;
  folio_lock_large_mapcount(f);
  int32_t old_total = atomic_read(p1->f1.large_mapcount);
  int32_t total = old_total + diff;
  int slot = -1;
  for (int i = 0; i < 2; i++)
    if (p1->mm_id[i] == id) slot = i;
  if (slot < 0) {
    for (int i = 0; i < 2 && slot < 0; i++) {
      if (p1->mm_id[i] == 0) {
        slot = i;
        p1->mm_id[i] = id;
        p1->mm_id_mapcount[i] = 0;
        if (old_total != 0) set_bit(PG_maybe_shared, p1);  // others map it already
      }
    }
  }
  if (slot >= 0) p1->mm_id_mapcount[slot] += diff;
  else set_bit(PG_maybe_shared, p1);
  aref(p1->f1.large_mapcount).store(total, std::memory_order_release);
  folio_unlock_large_mapcount(f);
}

void folio_sub_large_mapcount(Folio* f, int diff, const Vma* vma) {
  Page* p1 = folio_page(f, 1);
  int id = vma->vm_mm->mm_id;
  folio_lock_large_mapcount(f);
  int32_t total = atomic_read(p1->f1.large_mapcount) - diff;
  VM_WARN_ON_ONCE_FOLIO(total < 0, f, "large mapcount underflow");
  for (int i = 0; i < 2; i++) {
    if (p1->mm_id[i] == id) {
      p1->mm_id_mapcount[i] -= diff;
      if (p1->mm_id_mapcount[i] <= 0) {
        p1->mm_id[i] = 0;
        p1->mm_id_mapcount[i] = 0;
      }
    }
  }
  aref(p1->f1.large_mapcount).store(total, std::memory_order_release);
  bool exclusive = total == 0;
  for (int i = 0; i < 2; i++)
    if (p1->mm_id[i] && p1->mm_id_mapcount[i] == total) exclusive = true;
  if (exclusive) clear_bit(PG_maybe_shared, p1);
  folio_unlock_large_mapcount(f);
}

void folio_add_new_anon_rmap(Folio* folio, Vma* vma, uint64_t addr, rmap_t flags, RmapLevel level) {
  VM_WARN_ON_FOLIO(folio_mapped(folio), folio, "new anon folio already mapped");
  account_new_anon(folio, vma, addr);
  if (level == RmapLevel::kPte) {
    add_pte_mappings(folio, &folio->page, static_cast<int>(folio_nr_pages(folio)), vma, flags);
  } else {
    add_entire_mapping(folio, &folio->page, vma, flags);
  }
  if (folio_test_large(folio)) {
    stats_of(folio)->count_mthp(folio_order(folio), MthpStat::nr_anon);
  }
}

void folio_add_anon_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma, uint64_t, rmap_t flags) {
  add_pte_mappings(folio, page, nr, vma, flags);
}

void folio_add_file_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma) { add_pte_mappings(folio, page, nr, vma, RMAP_NONE); }
void folio_dup_file_rmap_ptes(Folio* folio, Page* page, int nr, Vma* dst) { add_pte_mappings(folio, page, nr, dst, RMAP_NONE); }

void folio_remove_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma) {
  stats_of(folio)->count(Event::rmap_update);
  if (!folio_test_large(folio)) {
    VM_WARN_ON_FOLIO(nr != 1, folio, "small folio unmapped by a batch");
    int32_t left = atomic_add_return(folio->page.mapcount, -1);
    VM_WARN_ON_ONCE_FOLIO(left < 0, folio, "mapcount underflow");
    return;
  }
  Page* p1 = folio_page(folio, 1);
  int unmapped = 0;
  for (int i = 0; i < nr; i++) {
    int32_t left = atomic_add_return(page[i].mapcount, -1);
    VM_WARN_ON_ONCE_FOLIO(left < 0, folio, "page mapcount underflow");
    if (left == 0) unmapped++;
  }
  int32_t still = unmapped ? atomic_add_return(p1->f1.nr_pages_mapped, -unmapped) : atomic_read(p1->f1.nr_pages_mapped);
  folio_sub_large_mapcount(folio, nr, vma);
  // Partially mapped: this removal unmapped pages while others stay PTE-mapped,
  // and no entire mapping covers the folio.
  bool partially = unmapped && still > 0 && folio_entire_mapcount(folio) == 0;
  if (partially && folio_test_anon(folio) && !folio_test_partially_mapped(folio))
    deferred_split_folio(folio, /*partially_mapped=*/true);
}

static void remove_entire(Folio* folio, Vma* vma) {
  stats_of(folio)->count(Event::rmap_update);
  Page* p1 = folio_page(folio, 1);
  int32_t left = atomic_add_return(p1->f1.entire_mapcount, -1);
  VM_WARN_ON_ONCE_FOLIO(left < 0, folio, "entire mapcount underflow");
  if (left == 0 && folio_test_anon(folio) && folio_order(folio) == PMD_ORDER)
    stats_of(folio)->uncount(VmStat::nr_anon_transparent_hugepages);
  folio_sub_large_mapcount(folio, 1, vma);
  // Unmapping the entire mapping while only some pages stay PTE-mapped.
  int32_t ptemapped = atomic_read(p1->f1.nr_pages_mapped);
  bool partially = left == 0 && ptemapped > 0 && ptemapped < folio_nr_pages(folio);
  if (partially && folio_test_anon(folio) && !folio_test_partially_mapped(folio))
    deferred_split_folio(folio, /*partially_mapped=*/true);
}

void folio_remove_rmap_pmd(Folio* folio, Page*, Vma* vma) { remove_entire(folio, vma); }
void folio_add_file_rmap_pmd(Folio* folio, Page* page, Vma* vma) { add_entire_mapping(folio, page, vma, RMAP_NONE); }

int folio_try_dup_anon_rmap_ptes(Folio* folio, Page* page, int nr, Vma* dst_vma, Vma* src_vma) {
  Mm* src_mm = src_vma->vm_mm;
  // folio_needs_cow_for_dma(): only meaningful while fork holds write_protect_seq.
  bool maybe_pinned = src_mm->test_flag(MMF_HAS_PINNED) && folio_maybe_dma_pinned(folio);
  if (maybe_pinned) {
    for (int i = 0; i < nr; i++)
      if (PageAnonExclusive(&page[i])) return -EBUSY;
  }
  for (int i = 0; i < nr; i++)
    if (PageAnonExclusive(&page[i])) ClearPageAnonExclusive(&page[i]);
  add_pte_mappings(folio, page, nr, dst_vma, RMAP_NONE);
  return 0;
}

int folio_try_dup_anon_rmap_pmd(Folio* folio, Page* page, Vma* dst_vma, Vma* src_vma) {
  bool maybe_pinned = src_vma->vm_mm->test_flag(MMF_HAS_PINNED) && folio_maybe_dma_pinned(folio);
  if (PageAnonExclusive(page)) {
    if (maybe_pinned) return -EBUSY;
    ClearPageAnonExclusive(page);
  }
  add_entire_mapping(folio, page, dst_vma, RMAP_NONE);
  return 0;
}

// The caller has cleared the entry: a concurrent GUP-fast either sees the
// entry change, or we see its pin, or it sees AnonExclusive cleared.
static int try_share(Folio* folio, Page* page) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (folio_maybe_dma_pinned(folio)) return -EBUSY;
  ClearPageAnonExclusive(page);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return 0;
}
int folio_try_share_anon_rmap_pte(Folio* folio, Page* page) { return try_share(folio, page); }

void folio_move_anon_rmap(Folio* folio, Vma* vma) {
  aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(vma->anon_vma), std::memory_order_release);
}

int folio_mm_id_mapcount(const Folio* folio, int mm_id) {
  if (!folio_test_large(folio)) return folio_mapcount(folio);
  const Page* p1 = folio_page(folio, 1);
  for (int i = 0; i < 2; i++)
    if (p1->mm_id[i] == mm_id) return p1->mm_id_mapcount[i];
  return 0;
}

// ---- deferred split queue ----

void deferred_split_folio(Folio* folio, bool partially_mapped) {
  if (folio_order(folio) <= 1) return;  // order-1 folios have no room for the list
  Kernel* k = kernel_of(&folio->page);
  // A whole THP is queued for the underused shrinker only while it may run.
  if (!partially_mapped && !k->settings.shrink_underused.load(std::memory_order_relaxed)) return;
  // A folio in the swap cache is reclaim's already: the shrinker need not
  // see it (so one unmapped PTE by PTE for swap-out is not flagged).
  if (folio_test_swapcache(folio)) return;
  MutexGuard g(&k->split_queue_lock);
  Page* p1 = folio_page(folio, 1);
  if (partially_mapped && !test_bit(PG_partially_mapped, p1)) {
    set_bit(PG_partially_mapped, p1);
    unsigned order = folio_order(folio);
    k->stats->count_mthp(order, MthpStat::split_deferred);
    k->stats->count_mthp(order, MthpStat::nr_anon_partially_mapped);
    if (order == PMD_ORDER) k->stats->count(VmStat::thp_deferred_split_page);
  }
  if (!test_bit(PG_deferred_list, p1)) {
    set_bit(PG_deferred_list, p1);
    k->split_queue.insert(folio);
  }
}

void folio_unqueue_deferred_split(Folio* folio) {
  if (folio_order(folio) <= 1) return;
  Page* p1 = folio_page(folio, 1);
  if (!test_bit(PG_deferred_list, p1)) return;
  Kernel* k = kernel_of(&folio->page);
  MutexGuard g(&k->split_queue_lock);
  if (!test_bit(PG_deferred_list, p1)) return;
  k->split_queue.erase(folio);
  clear_bit(PG_deferred_list, p1);
  if (test_and_clear_bit(PG_partially_mapped, p1))
    k->stats->count_mthp(folio_order(folio), MthpStat::nr_anon_partially_mapped, -1);
}

bool folio_on_deferred_list(const Folio* folio) {
  return folio_order(folio) > 1 && test_bit(PG_deferred_list, folio_page(folio, 1));
}

// ---- the reverse-map walk ----

bool vma_address_range(const Vma* vma, uint64_t pgoff, uint64_t nr_pages, uint64_t* start, uint64_t* end) {
  const uint64_t vstart = vma->vm_pgoff, vend = vma->vm_pgoff + vma->pages();
  const uint64_t first = std::max(pgoff, vstart), last = std::min(pgoff + nr_pages, vend);
  if (first >= last) return false;
  *start = vma->vm_start + ((first - vstart) << PAGE_SHIFT);
  *end = vma->vm_start + ((last - vstart) << PAGE_SHIFT);
  return true;
}

namespace {

// check_pte: does this entry map (or, with PVMW_MIGRATION, stand for) a pfn
// of the range? Special PTEs (the zero page) never map a folio's page.
bool check_pte(const PageVmaMappedWalk* pvmw, pte_t pte) {
  pfn_t pfn;
  if (pvmw->flags & PVMW_MIGRATION) {
    if (!is_swap_pte(pte)) return false;
    const swp_entry_t entry = pte_to_swp_entry(pte);
    if (!is_migration_entry(entry)) return false;
    pfn = swp_offset_pfn(entry);
  } else {
    if (!pte_present(pte) || pte_special(pte)) return false;
    pfn = pte_pfn(pte);
  }
  return pfn >= pvmw->pfn && pfn < pvmw->pfn + pvmw->nr_pages;
}

// The entries of [addr, end) (inside one PMD) in the PTE table under
// pvmw->pmd, under that table's lock. The lock is held across the whole
// table, not taken per entry, so that callers can batch what they replace.
bool walk_pte_table(PageVmaMappedWalk* pvmw, uint64_t addr, uint64_t end, const PvmwFn& found,
                    const PvmwTableFn& table_done) {
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(pvmw->vma->vm_mm, pvmw->pmd, addr, &ptl);
  if (!pte) return true;  // no table (none, a leaf, or gone meanwhile): nothing mapped here
  ptl->assert_held();
  pvmw->ptl = ptl;
  bool more = true;
  for (uint64_t a = addr; a < end && more; a += PAGE_SIZE, pte++) {
    if (!check_pte(pvmw, ptep_get(pte))) continue;
    pvmw->address = a;
    pvmw->pte = pte;
    more = found(pvmw);
  }
  if (table_done) table_done(pvmw, addr, end);
  pvmw->pte = nullptr;
  pvmw->ptl = nullptr;
  ptl->unlock();
  return more;
}

}  // namespace

bool page_vma_mapped_walk(PageVmaMappedWalk* pvmw, const PvmwFn& found, const PvmwTableFn& table_done) {
  uint64_t start, end;
  if (!vma_address_range(pvmw->vma, pvmw->pgoff, pvmw->nr_pages, &start, &end)) return true;
  Mm* mm = pvmw->vma->vm_mm;
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    pvmw->pmd = mm_find_pmd(mm, addr);
    if (!pvmw->pmd) continue;
    pvmw->address = addr;
    // A PMD leaf is only peeked at: found() splits it with split_huge_pmd(),
    // which takes the PMD lock and looks again. The model has no PMD
    // migration entries (a split leaves PTE ones).
    const pmd_t pmdval = pmdp_get(pvmw->pmd);
    if (!(pvmw->flags & PVMW_MIGRATION) && pmd_trans_huge(pmdval)) {
      if (pmd_pfn(pmdval) != pvmw->pfn) continue;  // another folio's leaf
      if (!found(pvmw)) return false;
    }
    if (!walk_pte_table(pvmw, addr, next, found, table_done)) return false;
  }
  pvmw->pmd = nullptr;
  return true;
}

void rmap_walk_locked(AnonVma* av, const RmapWalkControl& rwc) {
  av->rwsem.assert_held();
  for (Vma* vma : av->vmas) {
    if (!rwc.rmap_one(vma)) break;
    if (rwc.done && rwc.done()) break;
  }
}

void rmap_walk(Folio* folio, const RmapWalkControl& rwc) {
  AnonVma* av = folio_anon_vma(folio);
  if (!av) return;
  ReadGuard rmap(&av->rwsem);
  rmap_walk_locked(av, rwc);
}

void PteUnmapBatch::set_swp_pte(pte_t* pte, pte_t pteval, pte_t swp_pte, Page* page) {
  if (pte_soft_dirty(pteval)) swp_pte = pte_swp_mksoft_dirty(swp_pte);
  if (pte_uffd_wp(pteval)) swp_pte = pte_swp_mkuffd_wp(swp_pte);
  entry_set(pte, swp_pte);
  add(page);
}

void PteUnmapBatch::discarded(Page* page, unsigned nr) {
  for (unsigned i = 0; i < nr; i++) add(page + i);
}

void PteUnmapBatch::add(Page* page) {
  if (nr_ && page == first_ + nr_) {
    nr_++;
    return;
  }
  flush_run();
  first_ = page;
  nr_ = 1;
}

void PteUnmapBatch::flush_run() {
  if (!nr_) return;
  folio_remove_rmap_ptes(folio_, first_, nr_, vma_);
  folio_put_refs(folio_, nr_);  // never the last: the walker holds one
  first_ = nullptr;
  nr_ = 0;
}

void PteUnmapBatch::table_done(uint64_t start, uint64_t end) {
  flush_run();
  if (cleared_) flush_tlb_range(vma_, start, end);
  cleared_ = false;
}

bool try_to_unmap_vma(Folio* folio, Vma* vma, unsigned ttu_flags, const ReplacePteFn& replace,
                      const PmdLeafFn& pmd_leaf) {
  PteUnmapBatch batch(folio, vma);
  PageVmaMappedWalk pvmw = folio_vma_walk(folio, vma, 0);
  bool done = false;
  bool walked = page_vma_mapped_walk(
      &pvmw,
      [&](PageVmaMappedWalk* w) {
        if (!(ttu_flags & TTU_IGNORE_MLOCK) && (vma_flags(vma) & VM_LOCKED)) return false;
        if (!w->pte) {
          switch (pmd_leaf ? pmd_leaf(w) : PmdLeafAction::kSplit) {
            case PmdLeafAction::kSplit:
              split_huge_pmd(vma, w->pmd, w->address);
              return true;
            case PmdLeafAction::kDone:
              done = true;
              return false;
            case PmdLeafAction::kAbort:
              return false;
            case PmdLeafAction::kLookAtPtes:
              return true;
          }
        }
        return replace(w, &batch);
      },
      [&](PageVmaMappedWalk*, uint64_t start, uint64_t end) { batch.table_done(start, end); });
  return walked || done;
}

namespace {

// One present PTE of the folio becomes a migration entry that remembers
// write, exclusive, young, dirty, soft-dirty and uffd-wp. false: a page that
// may be pinned cannot lose its exclusive mapping.
bool try_to_migrate_pte(Folio* folio, PageVmaMappedWalk* pvmw, PteUnmapBatch* batch) {
  pte_t* pte = pvmw->pte;
  const pfn_t pfn = pte_pfn(ptep_get(pte));
  Page* subpage = pvmw->vma->vm_mm->phys->pfn_to_page(pfn);
  const bool anon_exclusive = PageAnonExclusive(subpage);
  // Clear first (see folio_try_share_anon_rmap_pte); one flush per table.
  pte_t pteval = entry_xchg(pte, pte_t{0});
  batch->cleared();
  if (pte_dirty(pteval)) folio_set_dirty(folio);
  if (anon_exclusive && folio_try_share_anon_rmap_pte(folio, subpage)) {
    entry_set(pte, pteval);
    return false;
  }
  unsigned type = pte_write(pteval) ? SWP_MIGRATION_WRITE
                  : anon_exclusive  ? SWP_MIGRATION_READ_EXCLUSIVE
                                    : SWP_MIGRATION_READ;
  uint64_t off = pfn;
  if (pte_young(pteval)) off |= SWP_MIG_YOUNG;
  if (pte_dirty(pteval)) off |= SWP_MIG_DIRTY;
  batch->set_swp_pte(pte, pteval, swp_entry_to_pte(make_migration_entry(type, off)), subpage);
  batch->remove_rmap_now();  // folio_remove_rmap_pte(), one page at a time
  return true;
}

// try_to_migrate_one(TTU_SPLIT_HUGE_PMD) for one VMA: a PMD mapping is split,
// then every PTE mapping a page of the folio becomes a migration entry
// (mlocked or not). false stops the walk.
bool try_to_migrate_one(Folio* folio, Vma* vma) {
  return try_to_unmap_vma(folio, vma, TTU_IGNORE_MLOCK,
                          [folio](PageVmaMappedWalk* w, PteUnmapBatch* b) { return try_to_migrate_pte(folio, w, b); });
}

}  // namespace

void try_to_migrate(Folio* folio, AnonVma* av) REQUIRES_SHARED(av->rwsem) {
  rmap_walk_locked(av, {.rmap_one = [folio](Vma* vma) { return try_to_migrate_one(folio, vma); },
                        .done = [folio] { return !folio_mapped(folio); }});
}

// ---- try_to_unmap: swap-out and the lazy-free discard (shrink_folio_list) ----

namespace {

// One present PTE of a swap-backed folio (locked, in the swap cache)
// becomes a swap entry. false: the page must stay mapped (no swap count, or
// maybe pinned).
bool try_to_unmap_swap_pte(Folio* folio, PageVmaMappedWalk* pvmw, PteUnmapBatch* batch) {
  Mm* mm = pvmw->vma->vm_mm;
  Kernel* k = mm->kernel;
  pte_t* pte = pvmw->pte;
  const pfn_t pfn = pte_pfn(ptep_get(pte));
  Page* subpage = mm->phys->pfn_to_page(pfn);
  const bool anon_exclusive = PageAnonExclusive(subpage);
  // Clear first (see folio_try_share_anon_rmap_pte); the TLB flush is batched.
  pte_t pteval = entry_xchg(pte, pte_t{0});
  batch->cleared();
  if (pte_dirty(pteval)) folio_set_dirty(folio);
  const swp_entry_t entry{folio_swap_entry(folio).val + (pfn - folio_pfn(folio))};
  if (swap_duplicate(k, entry) < 0) {
    entry_set(pte, pteval);
    return false;
  }
  if (anon_exclusive && folio_try_share_anon_rmap_pte(folio, subpage)) {
    // Maybe pinned: the page must stay mapped.
    swap_free_nr(k, entry, 1);
    entry_set(pte, pteval);
    return false;
  }
  dec_mm_counter(mm, MM_ANONPAGES);
  inc_mm_counter(mm, MM_SWAPENTS);
  pte_t swp_pte = swp_entry_to_pte(entry);
  if (anon_exclusive) swp_pte = pte_swp_mkexclusive(swp_pte);
  batch->set_swp_pte(pte, pteval, swp_pte, subpage);
  return true;
}

// folio_unmap_pte_batch: a lazy-free large folio is unmapped a run of PTEs
// at a time, within one page table and VMA; everything else one by one.
unsigned folio_unmap_pte_batch(Folio* folio, const PageVmaMappedWalk* pvmw, pte_t pte) {
  if (!folio_test_large(folio)) return 1;
  if (!folio_test_anon(folio) || folio_test_swapbacked(folio)) return 1;
  // uffd-wp markers are per PTE: one at a time.
  if (userfaultfd_wp(pvmw->vma)) return 1;
  const uint64_t end_addr = pmd_addr_end(pvmw->address, pvmw->vma->vm_end);
  // A redirtied or still-referenced folio gets its PTEs back from the first
  // one's value: the batch must agree on the write and soft-dirty bits, or
  // the restore would make writable a PTE of a page that is no longer
  // exclusive (a reuse after fork wrote only the first). The kernel fixed
  // this after v6.18 ("fix incorrect pte restoration for lazyfree folios");
  // stress found it in the model (seed 61, anon-64K, --inject 1%).
  return folio_pte_batch_flags(folio, pvmw->vma, pvmw->pte, &pte,
                               static_cast<unsigned>((end_addr - pvmw->address) >> PAGE_SHIFT),
                               FPB_RESPECT_WRITE | FPB_RESPECT_SOFT_DIRTY);
}

// try_to_unmap_one's MADV_FREE check for the run of PTEs at pvmw->pte of a
// lazy-free folio: a clean folio nobody else holds is discarded (its PTEs
// stay none, so the next access faults in a zeroed page); one redirtied
// through a PTE or a GUP reference is swap-backed again and keeps its PTEs;
// one with another reference keeps them too and stays lazy-free. false
// stops the walk (walk_abort).
bool try_to_unmap_lazyfree_ptes(Folio* folio, PageVmaMappedWalk* pvmw, PteUnmapBatch* batch) {
  Mm* mm = pvmw->vma->vm_mm;
  const pte_t first = ptep_get(pvmw->pte);
  Page* subpage = mm->phys->pfn_to_page(pte_pfn(first));
  const unsigned nr = folio_unmap_pte_batch(folio, pvmw, first);
  pte_t pteval = get_and_clear_full_ptes(mm, pvmw->address, pvmw->pte, nr);
  batch->cleared();
  if (pte_dirty(pteval)) folio_set_dirty(folio);  // folio_mark_dirty
  // Synchronize with GUP-fast: clear the PTEs, then read the refcount; it
  // takes its reference, then reads the PTE again.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const int ref_count = folio_ref_count(folio);
  const int map_count = folio_mapcount(folio);
  if (folio_test_dirty(folio)) {
    set_ptes(mm, pvmw->address, pvmw->pte, pteval, nr);
    folio_set_swapbacked(folio);
    return false;
  }
  // The cleared PTEs still count in both (their rmap goes at the table's
  // end), so only the isolation's reference may be left over.
  if (ref_count != 1 + map_count) {
    set_ptes(mm, pvmw->address, pvmw->pte, pteval, nr);
    return false;
  }
  add_mm_counter(mm, MM_ANONPAGES, -static_cast<long>(nr));
  batch->discarded(subpage, nr);
  return true;
}

// try_to_unmap_one(TTU_SPLIT_HUGE_PMD | TTU_BATCH_FLUSH) on one VMA: every
// PTE of vma mapping a page of the folio becomes a swap entry, or, for a
// lazy-free folio, is discarded. A PMD mapping is split first, except that
// of a lazy-free folio, which is discarded or kept whole. An mlocked VMA
// keeps its pages. false stops the rmap walk: a page could not be unmapped.
bool try_to_unmap_one(Folio* folio, Vma* vma) {
  return try_to_unmap_vma(
      folio, vma, 0,
      [folio](PageVmaMappedWalk* w, PteUnmapBatch* b) {
        VM_WARN_ON_ONCE_FOLIO(folio_test_swapbacked(folio) != folio_test_swapcache(folio), folio,
                         "unmapping an anonymous folio that is swap-backed but not in the swap cache");
        if (!folio_test_swapbacked(folio)) return try_to_unmap_lazyfree_ptes(folio, w, b);
        return try_to_unmap_swap_pte(folio, w, b);
      },
      [folio, vma](PageVmaMappedWalk* w) {
        if (folio_test_swapbacked(folio)) return PmdLeafAction::kSplit;
        switch (unmap_huge_pmd_locked(vma, w->address, w->pmd, folio)) {
          case PmdDiscard::kDiscarded:
            return PmdLeafAction::kDone;
          case PmdDiscard::kKept:
            return PmdLeafAction::kAbort;
          case PmdDiscard::kNotLeaf:
            break;
        }
        return PmdLeafAction::kLookAtPtes;
      });
}

}  // namespace

namespace {

// try_to_unmap_one for one PTE of a page-cache folio (shmem reclaim): the
// entry is cleared and stays none. The file is what the next fault reads:
// its page cache, or, once shmem_writeout() has moved the page to swap, the
// swap entry the file holds in its place (no swap PTE, unlike anonymous
// memory). A dirty PTE dirties the folio.
bool try_to_unmap_file_pte(Folio* folio, PageVmaMappedWalk* pvmw, PteUnmapBatch* batch) {
  Mm* mm = pvmw->vma->vm_mm;
  pte_t* pte = pvmw->pte;
  Page* subpage = mm->phys->pfn_to_page(pte_pfn(ptep_get(pte)));
  const pte_t pteval = entry_xchg(pte, pte_t{0});
  batch->cleared();
  if (pte_dirty(pteval)) folio_set_dirty(folio);
  dec_mm_counter(mm, mm_counter_file(folio));
  batch->discarded(subpage, 1);
  return true;
}

// rmap_walk_file for try_to_unmap: every VMA on the file's i_mmap (shared
// and private mappings alike map the page-cache folio).
void try_to_unmap_file(Folio* folio, unsigned ttu_flags) {
  auto* f = reinterpret_cast<File*>(aref(folio->page.mapping).load(std::memory_order_acquire));
  if (!f) return;
  ReadGuard g(&f->i_mmap_rwsem);  // i_mmap_lock_read
  for (Vma* vma : f->i_mmap) {
    const bool ok = try_to_unmap_vma(folio, vma, ttu_flags, [folio](PageVmaMappedWalk* w, PteUnmapBatch* b) {
      return try_to_unmap_file_pte(folio, w, b);
    });
    if (!ok || !folio_mapped(folio)) break;
  }
}

}  // namespace

void try_to_unmap(Folio* folio, unsigned ttu_flags) {
  if (!folio_test_anon(folio)) {
    try_to_unmap_file(folio, ttu_flags);
    return;
  }
  VM_WARN_ON_ONCE_FOLIO(ttu_flags, folio, "try_to_unmap flags are modelled for page-cache folios only");
  rmap_walk(folio, {.rmap_one = [folio](Vma* vma) { return try_to_unmap_one(folio, vma); },
                    .done = [folio] { return !folio_mapped(folio); }});
}


}  // namespace mmlab
