// The mm half of mm/memory.c that the layout changes share with the fault
// path: vm_normal_page (the fault half is fault/memory.cpp and
// fault/memory_swap.cpp; zap, with its swap and migration entries, is
// mm/zap.cpp; fork's copy_page_range family mm/fork.cpp).
#include "mm/memory.h"

#include "base/mmdebug.h"
#include "mm/kernel.h"
#include "mm/mm.h"

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

}  // namespace mmlab
