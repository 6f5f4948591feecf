// The mm half of mm/memory.c that the layout changes share with the fault
// path: vm_normal_page, and swap and migration entries in zap and fork
// (the fault half is fault/memory.cpp).
#include "mm/memory.h"

#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "mm/vmdebug.h"

namespace mmlab {

bool is_zero_pfn(PhysMem* phys, pfn_t pfn) { return phys->is_zero_pfn(pfn); }

Page* vm_normal_page(Vma* vma, uint64_t, pte_t pte) {
  PhysMem* phys = vma->vm_mm->phys;
  pfn_t pfn = pte_pfn(pte);
  if (pte_special(pte)) return nullptr;  // the zero page, raw PFN maps
  if (phys->is_zero_pfn(pfn) || !phys->pfn_valid(pfn)) return nullptr;
  return phys->pfn_to_page(pfn);
}

Page* vm_normal_page_pmd(Vma* vma, uint64_t, pmd_t pmd) {
  PhysMem* phys = vma->vm_mm->phys;
  if (pmd_special(pmd) || phys->is_huge_zero_pfn(pmd_pfn(pmd))) return nullptr;
  return phys->pfn_to_page(pmd_pfn(pmd));
}

// ============================================================================
// Swap and migration entries in zap and fork (mm/memory.c)
// ============================================================================

// zap_nonpresent_ptes, for a caller without zap_details: swap entries free
// their slots (a batch of consecutive ones at once), migration entries drop
// the rss they stand for, and markers (uffd-wp, guard, poison) are dropped.
unsigned zap_nonpresent_ptes(Vma* vma, pte_t* pte, pte_t ptent, uint64_t addr, unsigned max_nr) {
  Mm* mm = vma->vm_mm;
  swp_entry_t entry = pte_to_swp_entry(ptent);
  unsigned nr = 1;
  if (!non_swap_entry(entry)) {
    nr = swap_pte_batch(pte, max_nr, ptent);
    add_mm_counter(mm, MM_SWAPENTS, -static_cast<long>(nr));
    free_swap_and_cache_nr(mm->kernel, entry, nr);
  } else if (is_migration_entry(entry)) {
    Folio* folio = page_folio(mm->phys->pfn_to_page(swp_offset_pfn(entry)));
    dec_mm_counter(mm, mm_counter(folio));
  }
  for (unsigned i = 0; i < nr; i++) ptep_get_and_clear(mm, addr + i * PAGE_SIZE, pte + i);
  return nr;
}

// copy_nonpresent_pte. Both PTLs are held (destination, then source).
int copy_nonpresent_pte(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, uint64_t addr) {
  Mm* dst_mm = dst_vma->vm_mm;
  Mm* src_mm = src_vma->vm_mm;
  const pte_t orig = ptep_get(src_pte);
  pte_t pte = orig;
  swp_entry_t entry = pte_to_swp_entry(orig);
  if (!non_swap_entry(entry)) {
    if (swap_duplicate(src_mm->kernel, entry) < 0) return -ENOMEM;
    // The swap entry is shared now: neither side may map it exclusive.
    if (pte_swp_exclusive(orig)) {
      pte = pte_swp_clear_exclusive(orig);
      entry_set(src_pte, pte);
    }
    inc_mm_counter(dst_mm, MM_SWAPENTS);
  } else if (is_migration_entry(entry)) {
    Folio* folio = page_folio(src_mm->phys->pfn_to_page(swp_offset_pfn(entry)));
    inc_mm_counter(dst_mm, mm_counter(folio));
    if (!is_readable_migration_entry(entry) && is_cow_mapping(dst_vma->vm_flags)) {
      // Parent and child must both map it read-only; a previously exclusive
      // entry is shared now.
      pte = swp_entry_to_pte(make_migration_entry(SWP_MIGRATION_READ, swp_offset(entry)));
      if (pte_swp_soft_dirty(orig)) pte = pte_swp_mksoft_dirty(pte);
      if (pte_swp_uffd_wp(orig)) pte = pte_swp_mkuffd_wp(pte);
      entry_set(src_pte, pte);
    }
  } else if (is_pte_marker_entry(entry)) {
    // copy_pte_marker: poison and guard markers are inherited; uffd-wp only
    // where the child VMA is registered for it.
    uint64_t marker = swp_offset(entry) & (PTE_MARKER_POISONED | PTE_MARKER_GUARD);
    if ((swp_offset(entry) & PTE_MARKER_UFFD_WP) && (dst_vma->vm_flags & VM_UFFD_WP)) marker |= PTE_MARKER_UFFD_WP;
    if (marker) set_pte_at(dst_mm, addr, dst_pte, swp_entry_to_pte(swp_entry(SWP_PTE_MARKER, marker)));
    return 0;
  }
  if (!(dst_vma->vm_flags & VM_UFFD_WP)) pte = pte_swp_clear_uffd_wp(pte);
  entry_set(dst_pte, pte);
  return 0;
}

}  // namespace mmlab
