// The PMD-leaf operations of mm/huge_memory.c (include/linux/huge_mm.h),
// defined in mm/huge_memory.cpp, and the folio split (split_folio_to_list,
// the deferred-split shrinker) of mm/huge_memory_split.cpp. Callers hold mmap_lock (or the VMA lock,
// for the fault path) and find the PMD leaf themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "pgtable/mm_types.h"

namespace mmlab {

// vma_thp_disabled (v6.18): MADV_NOHUGEPAGE, PR_SET_THP_DISABLE, and
// PR_THP_DISABLE_EXCEPT_ADVISED unless the VMA or a forced collapse asks.
bool vma_thp_disabled(const Vma* vma, vm_flags_t vm_flags, bool forced_collapse);

// Split the PMD leaf at *pmd (address inside it) into a PTE table (__split_huge_pmd).
void split_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t address);
// Zap a PMD leaf entirely covered by the zap range; returns true if it was a leaf.
bool zap_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t addr);
// mprotect of a whole PMD leaf; returns HPAGE_PMD_NR if changed, 0 if not a leaf any more.
[[nodiscard]] long change_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t addr, pgprot_t newprot, bool may_make_writable);
// Move a whole PMD leaf (mremap); false if the source is not a leaf any more.
bool move_huge_pmd(Vma* vma, uint64_t old_addr, uint64_t new_addr, pmd_t* old_pmd, pmd_t* new_pmd);
// MADV_FREE of the PMD leaf at *pmd over [addr, next) (madvise_free_huge_pmd):
// true when the whole leaf was marked lazy-free; false when the walk must
// look at PTEs (the leaf was split because the range covers part of it, or
// it was not a leaf to mark: gone, the huge zero folio, maybe shared, locked).
bool madvise_free_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t next);
// Reclaim of a lazy-free PMD-mapped THP (unmap_huge_pmd_locked): discard the
// PMD mapping at *pmd if the folio is clean and nobody but the isolation and
// its mappings holds it; a dirty folio is made swap-backed again and stays
// mapped, as does one with another reference. The folio is locked.
enum class PmdDiscard : uint8_t {
  kDiscarded,  // the mapping is gone
  kKept,       // it stays mapped (redirtied or referenced): stop unmapping
  kNotLeaf,    // *pmd no longer maps the folio as a leaf: look at PTEs
};
PmdDiscard unmap_huge_pmd_locked(Vma* vma, uint64_t addr, pmd_t* pmd, Folio* folio);

// Allocating and freeing the PTE table deposited under a PMD leaf.
void pgtable_trans_huge_deposit(Mm* mm, pmd_t* pmd, Page* table);
Page* pgtable_trans_huge_withdraw(Mm* mm, pmd_t* pmd);
// Free the table deposited under the PMD leaf at *pmd (PMD lock held).
void zap_deposited_table(Mm* mm, pmd_t* pmd);
bool is_huge_zero_pmd(PhysMem* phys, pmd_t pmd);

// Split any PMD leaf mapping that straddles start or end of [start,end) in vma
// (vma_adjust_trans_huge). The folios stay whole; their mappings become PTEs.
void vma_adjust_trans_huge(Vma* vma, uint64_t start, uint64_t end);

void split_huge_pmd_address(Vma* vma, uint64_t address);

// split_huge_page_to_list_to_order(folio, list, 0) for an anonymous large
// folio: every page becomes an order-0 folio keeping its mappings (zero-filled
// pages are remapped to the shared zero page, as RMP_USE_SHARED_ZEROPAGE).
// The caller holds the folio lock and one reference; on success they stay on
// the (now order-0) head. With a list, the other new folios are appended to
// it, each with one reference for the list (the pageout path); otherwise they
// keep only their mappings. 0, -EAGAIN (unexpected references: pinned, GET),
// -EBUSY (not mapped / not anonymous) or -EINVAL (not large).
[[nodiscard]] int split_folio_to_list(Folio* folio, std::vector<Folio*>* list);

inline int split_folio(Folio* folio) { return split_folio_to_list(folio, nullptr); }

// can_split_folio: refcount == mapcount + caller_pins + swap-cache references.
bool can_split_folio(Folio* folio, int caller_pins, int* pextra_pins);

// The deferred-split shrinker (deferred_split_scan): returns folios split.
[[nodiscard]] long deferred_split_scan(Kernel* k);

}  // namespace mmlab
