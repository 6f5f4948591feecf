// The parts of mm/memory.c below the fault path.
#pragma once

#include <cstdint>

#include "pgtable/mm_types.h"

namespace mmlab {

// vm_normal_page: the Page a present PTE maps, or nullptr for special
// entries (the zero page, PFN maps).
Page* vm_normal_page(Vma* vma, uint64_t addr, pte_t pte);
Page* vm_normal_page_pmd(Vma* vma, uint64_t addr, pmd_t pmd);
bool is_zero_pfn(PhysMem* phys, pfn_t pfn);

}  // namespace mmlab
