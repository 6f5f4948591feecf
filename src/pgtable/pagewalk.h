// A generic page-table walker with per-level visitors (mm/pagewalk.c's
// walk_page_range), used by the read-only views: smaps, the page-table
// dump and the invariant checker. Fault, zap, mprotect and GUP keep their
// own kernel-shaped descents, since their shape is what is being modelled.
#pragma once

#include <cstdint>
#include <functional>

#include "pgtable/entry.h"
#include "pgtable/mm_types.h"

namespace mmlab {

struct PageWalkOps {
  // Each visitor gets the address the entry maps and a pointer to the entry.
  std::function<void(uint64_t addr, pud_t* pud)> pud_leaf;  // present PUD leaves
  std::function<void(uint64_t addr, pmd_t* pmd)> pmd_leaf;  // present or invalidated PMD leaves
  std::function<void(uint64_t addr, pte_t* pte)> pte_entry;  // non-none PTEs
  // Table pages themselves: level 4 = PGD ... 1 = PTE table (the table's Page).
  std::function<void(int level, uint64_t addr, Page* table)> table;
};

// Walk [start, end) of mm without locks: the caller must hold what keeps the
// tables stable (mmap_lock, or a quiescent system).
void walk_page_range(Mm* mm, uint64_t start, uint64_t end, const PageWalkOps& ops);

}  // namespace mmlab
