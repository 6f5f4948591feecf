// The page-table half of mremap (mm/mremap.c): move_page_tables(); hugetlb
// VMAs go to move_hugetlb_page_tables() (mm/hugetlb_pgtable.cpp).
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/mremap.h"
#include "mm/swap.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

pmd_t* alloc_new_pmd(Mm* mm, uint64_t addr) {
  pud_t* pud = pud_alloc(mm, addr);
  if (!pud) return nullptr;
  return pmd_alloc(mm, pud, addr);
}

// move_ptes: both PTLs held, the old one first, the new one nested.
void move_ptes(Vma* vma, pmd_t* old_pmd, uint64_t old_addr, uint64_t old_end, pmd_t* new_pmd, uint64_t new_addr) {
  Mm* mm = vma->vm_mm;
  SpinLock* old_ptl;
  pte_t* old_pte = pte_offset_map_lock(mm, old_pmd, old_addr, &old_ptl);
  if (!old_pte) return;
  old_ptl->assert_held();
  pmd_t new_pmdval = pmdp_get(new_pmd);
  pte_t* new_pte = pte_offset(mm->phys, new_pmdval, new_addr);
  SpinLock* new_ptl = pte_lockptr(mm->phys, new_pmdval);
  SpinNestedGuard nested(new_ptl, old_ptl, LockClass::kPteLock);
  bool flush = false;
  uint64_t start = old_addr;
  for (; old_addr < old_end; old_pte++, new_pte++, old_addr += PAGE_SIZE, new_addr += PAGE_SIZE) {
    pte_t pte = ptep_get(old_pte);
    if (pte_none(pte)) continue;
    pte = entry_xchg(old_pte, pte_t{0});
    if (pte_present(pte)) {
      flush = true;
      pte = pte_mksoft_dirty(pte);  // move_soft_dirty_pte
      pte = pte_clear_uffd_wp(pte);  // without the remap event feature, uffd-wp is dropped
    }
    entry_set(new_pte, pte);
    // A translation at the new address is a new one for the MMU.
    pte_first_use_forget(table_page_of(mm->phys, new_pte), pte_index(new_addr), 1);
  }
  if (flush) flush_tlb_range(vma, start, old_end);
  nested.unlock();
  old_ptl->unlock();
}

// The model's userfaultfd has no UFFD_FEATURE_EVENT_REMAP: a uffd-wp VMA
// (either end) needs its markers dropped entry by entry, so its table is
// not moved whole.
bool uffd_supports_page_table_move(const Vma* old_vma, const Vma* new_vma) {
  return !(vma_flags(old_vma) & VM_UFFD_WP) && !(vma_flags(new_vma) & VM_UFFD_WP);
}

// move_normal_pmd (CONFIG_HAVE_MOVE_PMD, x86-64 and arm64): a whole 2M step
// of PTEs moves by handing the PTE table itself to the new PMD entry. The
// entries keep their bits as they are (no per-entry soft-dirty or uffd-wp
// change: uffd-wp VMAs are refused above). A target PMD already populated
// (free_pgtables left it) takes the entry-by-entry path.
bool move_normal_pmd(Vma* vma, Vma* new_vma, uint64_t old_addr, pmd_t* old_pmd, pmd_t* new_pmd) {
  if (!uffd_supports_page_table_move(vma, new_vma)) return false;
  Mm* mm = vma->vm_mm;
  if (!pmd_none(pmdp_get(new_pmd))) return false;
  SpinLock* old_ptl = pmd_lock(mm, old_pmd);
  old_ptl->assert_held();
  SpinLock* new_ptl = pmd_lockptr(mm, new_pmd);
  SpinNestedGuard nested(new_ptl, old_ptl, LockClass::kPmdLock);
  const pmd_t pmd = pmdp_get(old_pmd);
  bool moved = false;
  // A collapse may have turned the table into a leaf meanwhile.
  if (pmd_present(pmd) && !pmd_leaf(pmd) && pmd_none(pmdp_get(new_pmd))) {
    entry_xchg(old_pmd, pmd_t{0});
    entry_set(new_pmd, pmd);
    pte_first_use_forget(mm->phys->pfn_to_page(pmd_pfn(pmd)), 0, PTRS_PER_PTE);
    flush_tlb_range(vma, old_addr, old_addr + PMD_SIZE);
    mm->stats->count(Event::mremap_pmd_move);
    moved = true;
  }
  nested.unlock();
  old_ptl->unlock();
  return moved;
}

}  // namespace

uint64_t move_page_tables(Vma* vma, uint64_t old_addr, Vma* new_vma, uint64_t new_addr, uint64_t len) {
  Mm* mm = vma->vm_mm;
  if (is_vm_hugetlb_page(vma)) return move_hugetlb_page_tables(vma, new_vma, old_addr, new_addr, len);
  uint64_t old_end = old_addr + len;
  uint64_t moved = 0;
  while (old_addr < old_end) {
    uint64_t extent = pmd_addr_end(old_addr, old_end) - old_addr;
    extent = std::min(extent, pmd_addr_end(new_addr, new_addr + extent) - new_addr);
    pmd_t* old_pmd = mm_find_pmd(mm, old_addr);
    if (old_pmd && !pmd_none(pmdp_get(old_pmd))) {
      pmd_t* new_pmd = alloc_new_pmd(mm, new_addr);
      if (!new_pmd) break;
      if (pmd_trans_huge(pmdp_get(old_pmd))) {
        if (extent == PMD_SIZE && move_huge_pmd(vma, old_addr, new_addr, old_pmd, new_pmd)) goto next;
        split_huge_pmd(vma, old_pmd, old_addr);
      } else if (extent == PMD_SIZE && move_normal_pmd(vma, new_vma, old_addr, old_pmd, new_pmd)) {
        goto next;
      }
      if (!pte_alloc(mm, new_pmd)) break;
      move_ptes(vma, old_pmd, old_addr, old_addr + extent, new_pmd, new_addr);
    }
  next:
    old_addr += extent;
    new_addr += extent;
    moved += extent;
  }
  return moved;
}

}  // namespace mmlab
