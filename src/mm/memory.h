// The parts of mm/memory.c below the fault path: vm_normal_page in
// mm/memory.cpp, zap in mm/zap.cpp, fork's copy_page_range in mm/fork.cpp.
#pragma once

#include <cstdint>

#include "pgtable/mm_types.h"

namespace mmlab {

// vm_normal_page: the Page a present PTE maps, or nullptr for special
// entries (the zero page, PFN maps).
Page* vm_normal_page(Vma* vma, uint64_t addr, pte_t pte);
Page* vm_normal_page_pmd(Vma* vma, uint64_t addr, pmd_t pmd);
bool is_zero_pfn(PhysMem* phys, pfn_t pfn);

// struct zap_details, as far as the model's callers differ. Without one
// (munmap, exit: unmap_vmas' ZAP_FLAG_DROP_MARKER) every entry goes.
struct ZapDetails {
  // ZAP_FLAG_DROP_MARKER: drop guard markers, and uffd-wp markers of file
  // VMAs, too (an anonymous VMA's uffd-wp markers always go).
  bool drop_markers = true;
  // PT_RECLAIM (v6.14, x86-64): free a PTE table that a zap of its whole
  // range emptied (MADV_DONTNEED, MADV_DONTNEED_LOCKED).
  bool reclaim_pt = false;
  // even_cows: zap a private mapping's anonymous (CoW) folios and swap
  // entries too. Only unmap_mapping_range asks to keep them: a hole
  // punched in a file leaves the private copies, a truncation does not.
  bool even_cows = true;
};

// Unmap every present/swap entry of [start, end) inside vma, releasing the
// folios' mappings and references (zap_page_range_single / unmap_vmas). Caller
// holds mmap_lock (read for MADV_DONTNEED, write for munmap/exit).
void zap_vma_range(Vma* vma, uint64_t start, uint64_t end, const ZapDetails* details = nullptr);

// zap_pte_range's work for one entry, under the caller's PTL: the entry is
// cleared, a present page's rmap and rss dropped, a swap entry's slot freed,
// a migration entry's rss dropped. Returns the folio whose reference the
// caller puts after its TLB flush and the PTL (as the mmu_gather would), or
// nullptr.
Folio* zap_one_pte(Vma* vma, pte_t* pte, uint64_t addr);

// unmap_mapping_range (mm/memory.c): zap, in every VMA on the file's i_mmap,
// the pages of the file's byte range [holebegin, holebegin + holelen)
// (holelen 0: to the end of the file); a private mapping's CoW copies go
// too only with even_cows. Called without mmap_lock, under i_mmap_rwsem,
// as the kernel's. Guard markers stay (no ZAP_FLAG_DROP_MARKER).
void unmap_mapping_range(File* f, uint64_t holebegin, uint64_t holelen, bool even_cows);

// Free the page-table pages that map only [start, end), where no VMA remains,
// staying within [floor, ceiling) (the neighbours' tables are kept).
void free_pgtables(Mm* mm, uint64_t start, uint64_t end, uint64_t floor, uint64_t ceiling);

}  // namespace mmlab
