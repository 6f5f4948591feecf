// Migrating an anonymous folio out of ZONE_MOVABLE for a long-term pin
// (mm/migrate.c's migrate_pages() with MR_LONGTERM_PIN, reached from
// check_and_migrate_movable_folios()).
//
// As the kernel does, every mapping is first replaced by a migration entry
// (so nobody writes while the bytes move), the contents are copied, and the
// migration entries are replaced by mappings of the new folio with the same
// bits and the same per-page AnonExclusive state.
#include <vector>

#include "mm/huge_mm.h"
#include "mm/memory.h"
#include "mm/swap.h"
#include "mm/internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/vmdebug.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

struct Mapping {
  Vma* vma;
  uint64_t addr;
  long idx;    // page index within the folio
  pte_t orig;  // the entry before migration
};

// The rmap walk (try_to_migrate's, before anything is replaced): every PTE in
// every VMA of the folio's anon_vma that maps a page of it, PMD mappings
// split first. Each entry is read under its PTE lock.
std::vector<Mapping> collect_mappings(Folio* folio) {
  std::vector<Mapping> out;
  const pfn_t fpfn = folio_pfn(folio);
  rmap_walk(folio, {.rmap_one = [&](Vma* vma) {
    PageVmaMappedWalk pvmw = folio_vma_walk(folio, vma, 0);
    return page_vma_mapped_walk(&pvmw, [&](PageVmaMappedWalk* w) {
      if (!w->pte) {
        split_huge_pmd(vma, w->pmd, w->address);
        return true;
      }
      const pte_t pte = ptep_get(w->pte);
      out.push_back({vma, w->address, static_cast<long>(pte_pfn(pte) - fpfn), pte});
      return true;
    });
  }});
  return out;
}

// Replace (or restore) one mapping's entry under its PTL if it still holds `expect`.
bool swap_entry(Mapping& m, pte_t expect, pte_t val) {
  Mm* mm = m.vma->vm_mm;
  pmd_t* pmd = mm_find_pmd(mm, m.addr);
  if (!pmd) return false;
  SpinLock* ptl;
  pte_t* ptep = pte_offset_map_lock(mm, pmd, m.addr, &ptl);
  if (!ptep) return false;
  ptl->assert_held();
  bool ok = ptep_get(ptep) == expect;
  if (ok) {
    entry_set(ptep, val);
    if (pte_present(expect)) flush_tlb_range(m.vma, m.addr, m.addr + PAGE_SIZE);
  }
  ptl->unlock();
  return ok;
}

pte_t make_migration_entry(PhysMem* phys, Page* page, pte_t orig) {
  unsigned type = pte_write(orig) ? SWP_MIGRATION_WRITE
                  : PageAnonExclusive(page) ? SWP_MIGRATION_READ_EXCLUSIVE
                                            : SWP_MIGRATION_READ;
  pte_t e = swp_entry_to_pte(swp_entry(type, phys->page_to_pfn(page)));
  if (pte_soft_dirty(orig)) e = pte_swp_mksoft_dirty(e);
  if (pte_uffd_wp(orig)) e = pte_swp_mkuffd_wp(e);
  return e;
}

}  // namespace

// Returns 0 when the folio was moved (its pins had been dropped), -ENOMEM or -EBUSY.
int migrate_longterm_unpinnable_folio(Folio* src) {
  MM_TRACE("mm_migrate_pages", "pfn={:#x} order={} reason=longterm_pin", folio_pfn(src), folio_order(src));
  if (!folio_test_anon(src)) return -EBUSY;  // file folios: not modelled (see docs/NOTES.md)
  Kernel* k = kernel_of(&src->page);
  PhysMem* phys = k->phys.get();
  unsigned order = folio_order(src);
  Folio* dst = phys->folio_alloc(GFP_HIGHUSER_MOVABLE | __GFP_PINNABLE, order);
  if (!dst) {
    k->stats->count(VmStat::pgmigrate_fail);
    return -ENOMEM;
  }
  folio_lock(src);
  std::vector<Mapping> maps = collect_mappings(src);
  // Every reference must be a mapping or the caller's isolation reference.
  long expected = static_cast<long>(maps.size()) + 1;
  if (folio_ref_count(src) != expected || static_cast<long>(maps.size()) != folio_mapcount(src)) {
    folio_unlock(src);
    folio_put(dst);
    k->stats->count(VmStat::pgmigrate_fail);
    return -EBUSY;
  }
  // try_to_migrate: mappings become migration entries.
  std::vector<bool> exclusive(maps.size());
  for (size_t i = 0; i < maps.size(); i++) {
    Page* page = folio_page(src, maps[i].idx);
    exclusive[i] = PageAnonExclusive(page);
    pte_t mig = make_migration_entry(phys, page, maps[i].orig);
    bool ok = swap_entry(maps[i], maps[i].orig, mig);
    VM_BUG_ON(!ok, "mapping changed under the folio lock and mmap_lock");
    folio_remove_rmap_pte(src, page, maps[i].vma);
  }
  // Move the contents and the folio state.
  for (long i = 0; i < folio_nr_pages(src); i++)
    copy_frames(phys, phys->page_address(folio_page(dst, i)), phys->page_address(folio_page(src, i)), PAGE_SIZE);
  k->stats->count(Event::copy_bytes, static_cast<uint64_t>(folio_nr_pages(src)) * PAGE_SIZE);
  for (unsigned bit : {PG_dirty, PG_referenced, PG_active, PG_workingset, PG_swapbacked, PG_uptodate, PG_anon})
    if (test_bit(bit, &src->page)) set_bit(bit, &dst->page);
  if (folio_test_large(src) && test_bit(PG_large_rmappable, &src->page)) set_bit(PG_large_rmappable, &dst->page);
  aref(dst->page.mapping).store(src->page.mapping, std::memory_order_release);
  dst->page.index = src->page.index;
  folio_add_lru(dst);
  if (folio_test_large(dst)) k->stats->count_mthp(order, MthpStat::nr_anon);
  // remove_migration_ptes: the new folio takes every mapping.
  for (size_t i = 0; i < maps.size(); i++) {
    Page* page = folio_page(dst, maps[i].idx);
    pte_t val = pfn_pte(phys->page_to_pfn(page), pgprot_t{maps[i].orig.v & ~PTE_PFN_MASK});
    folio_get(dst);
    folio_add_anon_rmap_ptes(dst, page, 1, maps[i].vma, maps[i].addr, exclusive[i] ? RMAP_EXCLUSIVE : RMAP_NONE);
    pte_t mig = make_migration_entry(phys, folio_page(src, maps[i].idx), maps[i].orig);
    bool ok = swap_entry(maps[i], mig, val);
    VM_BUG_ON(!ok, "migration entry changed");
    folio_put(src);  // that mapping's reference on the old folio
  }
  folio_put(dst);  // the allocation reference: the mappings hold the rest
  for (long i = 0; i < folio_nr_pages(src); i++) ClearPageAnonExclusive(folio_page(src, i));
  folio_unlock(src);
  k->stats->count(VmStat::pgmigrate_success, static_cast<uint64_t>(folio_nr_pages(src)));
  if (order == PMD_ORDER) k->stats->count(VmStat::thp_migration_success);
  return 0;
}

}  // namespace mmlab
