// Reverse-map bookkeeping of folio mappings (mm/rmap.c, include/linux/rmap.h):
// mapcounts (small, large, entire, per page), the MM-ID slots, AnonExclusive,
// and the deferred-split queue for partially mapped large anon folios.
//
// Callers hold the page-table lock of every entry they add or remove, and a
// reference on the folio for each mapping (taken before adding, dropped after
// removing).
#pragma once

#include <cstdint>

#include "mm/mm.h"
#include "phys/page.h"

namespace mmlab {

using rmap_t = unsigned;
inline constexpr rmap_t RMAP_NONE = 0;
inline constexpr rmap_t RMAP_EXCLUSIVE = 1u << 0;

enum class RmapLevel : uint8_t { kPte, kPmd, kPud };

// A brand-new anon folio: PTE-mapped as a whole (small or mTHP) when level is
// kPte, or by one entire mapping (PMD THP) when kPmd.
void folio_add_new_anon_rmap(Folio* folio, Vma* vma, uint64_t addr, rmap_t flags, RmapLevel level);
void folio_add_anon_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma, uint64_t addr, rmap_t flags);
void folio_add_anon_rmap_pmd(Folio* folio, Page* page, Vma* vma, uint64_t addr, rmap_t flags);
void folio_add_file_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma);
void folio_add_file_rmap_pmd(Folio* folio, Page* page, Vma* vma);
void folio_remove_rmap_ptes(Folio* folio, Page* page, int nr, Vma* vma);
inline void folio_remove_rmap_pte(Folio* folio, Page* page, Vma* vma) { folio_remove_rmap_ptes(folio, page, 1, vma); }
void folio_remove_rmap_pmd(Folio* folio, Page* page, Vma* vma);
void folio_remove_rmap_pud(Folio* folio, Page* page, Vma* vma);

// fork: share an anon mapping with the child, or -EBUSY if a page is
// AnonExclusive and the folio may be DMA-pinned (the caller copies instead).
int folio_try_dup_anon_rmap_ptes(Folio* folio, Page* page, int nr, Vma* dst_vma, Vma* src_vma);
int folio_try_dup_anon_rmap_pmd(Folio* folio, Page* page, Vma* dst_vma, Vma* src_vma);
void folio_dup_file_rmap_ptes(Folio* folio, Page* page, int nr, Vma* dst_vma);
void folio_dup_file_rmap_pmd(Folio* folio, Page* page, Vma* dst_vma);
// Swap-out / migration: the entry is already cleared; -EBUSY if maybe pinned.
int folio_try_share_anon_rmap_pte(Folio* folio, Page* page);
int folio_try_share_anon_rmap_pmd(Folio* folio, Page* page);

// folio_move_anon_rmap: a reused folio now belongs to this VMA's anon_vma.
void folio_move_anon_rmap(Folio* folio, Vma* vma);

// The large mapcount and MM-ID slots of a large folio, by diff mappings of
// vma's mm (the bookkeeping under folio_lock_large_mapcount()); the entire
// and per-page counts are the caller's.
void folio_add_large_mapcount(Folio* f, int diff, const Vma* vma);
void folio_sub_large_mapcount(Folio* f, int diff, const Vma* vma);

// MM-ID mapcount of this mm in the folio's slots (0 if none); for checkers.
int folio_mm_id_mapcount(const Folio* folio, int mm_id);

// Deferred split queue (mm/huge_memory.c's deferred_split_folio).
void deferred_split_folio(Folio* folio, bool partially_mapped);
// Removes the folio from the queue if it is on it (on free or split).
void folio_unqueue_deferred_split(Folio* folio);
bool folio_on_deferred_list(const Folio* folio);

}  // namespace mmlab
