// Migrating an anonymous folio out of ZONE_MOVABLE for a long-term pin
// (mm/migrate.c's migrate_pages() with MR_LONGTERM_PIN, reached from
// check_and_migrate_movable_folios()).
//
// As the kernel does (migrate_folio_unmap, migrate_folio_move), with the
// folio locked every mapping is replaced by a migration entry through the
// rmap (so nobody writes while the bytes move), the refcount is frozen at
// the caller's isolation reference (any other reference, such as a pin,
// makes it fail), the contents are copied, and remove_migration_ptes() turns
// every migration entry then found through the rmap into a mapping of the
// new folio. Nothing is remembered between the two walks: while the folio is
// unmapped, processes whose mmap_lock the migrating thread does not hold
// can fork (copying the entries), zap or move them.
//
// Also mm/migrate.c's remove_migration_ptes (remove_migration_pte,
// try_to_map_unused_to_zeropage), shared with the folio split's
// remap_page, and migration_entry_wait, where a fault on a migration entry
// waits (do_swap_page in fault/memory_swap.cpp calls it).
#include <vector>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/filemap.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/migrate.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "pgtable/entry.h"  // the migration-entry format (swapops.h)
#include "phys/frame_copy.h"
#include "trace/trace.h"
#include "sync/sched.h"

namespace mmlab {
namespace {

// folio_migrate_flags and the anon mapping: dst takes src's place.
void migrate_folio_state(Kernel* k, Folio* dst, Folio* src) {
  for (unsigned bit : {PG_dirty, PG_referenced, PG_active, PG_workingset, PG_swapbacked, PG_uptodate, PG_anon})
    if (test_bit(bit, &src->page)) set_bit(bit, &dst->page);
  if (folio_test_large(src) && test_bit(PG_large_rmappable, &src->page)) set_bit(PG_large_rmappable, &dst->page);
  aref(dst->page.mapping).store(src->page.mapping, std::memory_order_release);
  dst->page.index = src->page.index;
  folio_add_lru(dst);
  if (folio_test_large(dst)) k->stats->count_mthp(folio_order(dst), MthpStat::nr_anon);
}

// try_to_map_unused_to_zeropage: a zero-filled order-0 page of a split folio
// is mapped by the shared zero page instead (and so freed). Upstream,
// mm_forbids_zeropage() (s390 KVM guests) stops this too; `tune
// mm.zero_page off` does not, because it stands for a vendor option
// (pvm_no_zero_page=1) that only changes what read faults map: on such a
// kernel a split still remaps zero-filled pages to the zero page
// (tests/scenarios/zero_page.mms, which the host agrees with).
bool try_to_map_unused_to_zeropage(Vma* vma, uint64_t addr, pte_t* ptep, pte_t old, Page* page, Folio* folio) {
  if (folio_test_large(folio)) return false;
  if (folio_test_mlocked(folio) || (vma_flags(vma) & VM_LOCKED)) return false;
  PhysMem* phys = vma->vm_mm->phys;
  uint8_t found = 0;
  if (user_find_not(phys, phys->page_address(page), 0, PAGE_SIZE, &found) >= 0) return false;  // memchr_inv
  pte_t newpte = pte_mkspecial(pfn_pte(phys->zero_pfn(), vma_page_prot(vma)));
  if (pte_swp_soft_dirty(old)) newpte = pte_mksoft_dirty(newpte);
  if (pte_swp_uffd_wp(old)) newpte = pte_mkuffd_wp(newpte);
  set_pte_at(vma->vm_mm, addr, ptep, newpte);
  dec_mm_counter(vma->vm_mm, mm_counter(folio));
  return true;
}

// remove_migration_pte for one entry the walk found: it becomes a PTE of the
// page at the same index of dst (a migration), of the page's own (new) folio
// (dst null: a split, or a migration undone), or of the zero page.
void remove_migration_pte(PageVmaMappedWalk* pvmw, Folio* dst, bool map_unused_to_zeropage) {
  Vma* vma = pvmw->vma;
  const uint64_t a = pvmw->address;
  pte_t* pte = pvmw->pte;
  const pte_t old = ptep_get(pte);
  const swp_entry_t entry = pte_to_swp_entry(old);
  PhysMem* phys = vma->vm_mm->phys;
  Page* page = dst ? folio_page(dst, static_cast<long>(swp_offset_pfn(entry) - pvmw->pfn))
                   : phys->pfn_to_page(swp_offset_pfn(entry));
  const pfn_t pfn = phys->page_to_pfn(page);
  Folio* folio = page_folio(page);
  if (map_unused_to_zeropage && try_to_map_unused_to_zeropage(vma, a, pte, old, page, folio)) return;
  folio_get(folio);
  pte_t ptev = pfn_pte(pfn, vma_page_prot(vma));
  if (pte_swp_soft_dirty(old)) ptev = pte_mksoft_dirty(ptev);
  ptev = is_migration_entry_young(entry) ? pte_mkyoung(ptev) : pte_mkold(ptev);
  if (folio_test_dirty(folio) && is_migration_entry_dirty(entry)) ptev = pte_mkdirty(ptev);
  if (is_writable_migration_entry(entry)) ptev = pte_mkwrite_novma(ptev);
  else if (pte_swp_uffd_wp(old)) ptev = pte_mkuffd_wp(ptev);
  rmap_t flags = RMAP_NONE;
  if (folio_test_anon(folio) && !is_readable_migration_entry(entry)) flags |= RMAP_EXCLUSIVE;
  folio_add_anon_rmap_ptes(folio, page, 1, vma, a, flags);
  set_pte_at(vma->vm_mm, a, pte, ptev);
}

// remove_migration_ptes on one VMA: every migration entry pointing into
// [fpfn, fpfn + nr) (the folio before the split or migration) is replaced.
// Returns how many it replaced.
long remove_migration_ptes_vma(Vma* vma, pfn_t fpfn, uint64_t index, uint64_t nr, Folio* dst,
                               bool map_unused_to_zeropage) {
  PageVmaMappedWalk pvmw{.pfn = fpfn, .nr_pages = nr, .pgoff = index, .vma = vma, .flags = PVMW_MIGRATION};
  long restored = 0;
  page_vma_mapped_walk(&pvmw, [&](PageVmaMappedWalk* w) {
    remove_migration_pte(w, dst, map_unused_to_zeropage);
    restored++;
    return true;
  });
  return restored;
}

}  // namespace

void remove_migration_ptes(AnonVma* av, pfn_t fpfn, uint64_t index, uint64_t nr, Folio* dst,
                           bool map_unused_to_zeropage) REQUIRES_SHARED(av->rwsem) {
  for (;;) {
    long restored = 0;
    rmap_walk_locked(av, {.rmap_one = [&](Vma* vma) {
      restored += remove_migration_ptes_vma(vma, fpfn, index, nr, dst, map_unused_to_zeropage);
      return true;
    }});
    if (!restored) break;
  }
}

// migration_entry_wait: sleep until the thread that replaced the PTE by a
// migration entry (a folio split) unlocks the folio; the fault then retries.
void migration_entry_wait(Mm* mm, pmd_t* pmd, uint64_t address) {
  SpinLock* ptl;
  pte_t* ptep = pte_offset_map_lock(mm, pmd, address, &ptl);
  if (!ptep) return;
  ptl->assert_held();
  pte_t pte = ptep_get(ptep);
  Folio* folio = nullptr;
  bool frozen = false;
  if (is_swap_pte(pte) && is_migration_entry(pte_to_swp_entry(pte))) {
    folio = page_folio(mm->phys->pfn_to_page(swp_offset_pfn(pte_to_swp_entry(pte))));
    if (!folio_ref_try_add(folio, 1)) {  // frozen: being split right now
      folio = nullptr;
      frozen = true;
    }
  }
  ptl->unlock();
  if (!folio) {
    // The fault returns to be retried. Frozen: under the explorer, wait for
    // another thread's step first, or a strategy that prefers this thread
    // would retry forever while the splitter never runs. No migration entry
    // any more (the split restored the PTE meanwhile): retry at once, as
    // the kernel does; a yield here waited for a step that, with the
    // splitter ended, never came (a false deadlock DFS found on K3's fixed
    // code).
    if (frozen) sched::yield("migration_entry_wait", {pmd, sched::ObjKind::kRefcount});
    return;
  }
  // migration_entry_wait_on_locked: wait for the lock bit, without taking it.
  sched::wait_until("migration_entry_wait", {folio, sched::ObjKind::kFolioLock, folio_pfn(folio)},
                    [folio] { return !folio_test_locked(folio); });
  folio_put(folio);
}

// Returns 0 when the folio was moved (or freed meanwhile), -ENOMEM or -EBUSY.
int migrate_longterm_unpinnable_folio(Folio* src) {
  MM_TRACE("mm_migrate_pages", "pfn={:#x} order={} reason=longterm_pin", folio_pfn(src), folio_order(src));
  // File and hugetlb folios: not modelled (see docs/NOTES.md).
  if (!folio_test_anon(src) || folio_test_hugetlb(src)) return -EBUSY;
  Kernel* k = kernel_of(&src->page);
  PhysMem* phys = k->phys.get();
  const unsigned order = folio_order(src);
  const long nr = folio_nr_pages(src);
  Folio* dst = phys->folio_alloc(GFP_HIGHUSER_MOVABLE | __GFP_PINNABLE, order);
  if (!dst) {
    k->stats->count(VmStat::pgmigrate_fail);
    return -ENOMEM;
  }
  folio_lock(src);
  // Only the isolation reference left: freed from under us, nothing to move.
  if (folio_ref_count(src) == 1) {
    folio_unlock(src);
    folio_put(dst);
    return 0;
  }
  // The model does not move a swap-cache slot to a new folio (see docs/NOTES.md).
  AnonVma* av = folio_anon_vma(src);
  if (folio_test_swapcache(src) || !av || !folio_mapped(src)) {
    folio_unlock(src);
    folio_put(dst);
    k->stats->count(VmStat::pgmigrate_fail);
    return -EBUSY;
  }
  // folio_get_anon_vma: keeps it alive while src is unmapped.
  get_anon_vma(av);
  const pfn_t fpfn = folio_pfn(src);
  const uint64_t index = src->page.index;
  {
    ReadGuard rmap(&av->rwsem);
    try_to_migrate(src, av);
  }
  // Label: src locked, every mapping a migration entry, no other lock held.
  sched::point("migrate.unmapped", sched::Op::kLabel, refcount_object(src));
  // __folio_migrate_mapping: with every mapping gone only the isolation
  // reference may remain; freezing it keeps GUP-fast from taking another.
  const bool frozen = !folio_mapped(src) && folio_ref_freeze(src, 1);
  if (!frozen) {
    ReadGuard rmap(&av->rwsem);
    remove_migration_ptes(av, fpfn, index, static_cast<uint64_t>(nr), nullptr, /*map_unused_to_zeropage=*/false);
  } else {
    for (long i = 0; i < nr; i++)
      copy_frames(phys, phys->page_address(folio_page(dst, i)), phys->page_address(folio_page(src, i)), PAGE_SIZE);
    k->stats->count_copied(folio_order(dst), static_cast<uint64_t>(nr) * PAGE_SIZE);
    migrate_folio_state(k, dst, src);
    folio_ref_unfreeze(src, 1);
    ReadGuard rmap(&av->rwsem);
    remove_migration_ptes(av, fpfn, index, static_cast<uint64_t>(nr), dst, /*map_unused_to_zeropage=*/false);
  }
  put_anon_vma(av);
  folio_put(dst);  // the allocation reference: the mappings hold the rest
  if (!frozen) {
    folio_unlock(src);
    k->stats->count(VmStat::pgmigrate_fail);
    return -EBUSY;
  }
  for (long i = 0; i < nr; i++) ClearPageAnonExclusive(folio_page(src, i));
  folio_unlock(src);
  k->stats->count(VmStat::pgmigrate_success, static_cast<uint64_t>(nr));
  if (order == PMD_ORDER) k->stats->count(VmStat::thp_migration_success);
  return 0;
}

}  // namespace mmlab
