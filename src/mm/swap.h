// The LRU (mm/swap.c), defined in mm/swap.cpp.
#pragma once

#include "phys/page.h"

namespace mmlab {

// folio_mark_accessed (mm/swap.c): the classic LRU state machine.
void folio_mark_accessed(Folio* folio);
void folio_add_lru(Folio* folio);
// folio_isolate_lru: false if the folio was not on the LRU; else off it, with
// a reference the caller drops in folio_putback_lru.
bool folio_isolate_lru(Folio* folio);
void folio_putback_lru(Folio* folio);
// folio_evictable(): false for a folio of an unevictable mapping (a noswap
// tmpfs file, an SHM_LOCK'd segment). PG_mlocked is not consulted: the
// model keeps mlocked folios on the evictable lists (mm/mlock.cpp).
bool folio_evictable(const Folio* folio);
// check_move_unevictable_folios (mm/vmscan.c), for SHM_UNLOCK.
void check_move_unevictable_folios(const std::vector<Folio*>& folios);
// folio_deactivate (MADV_COLD): an active folio on the LRU moves to the
// inactive list, losing PG_active and PG_referenced (pgdeactivate).
void folio_deactivate(Folio* folio);
// folio_mark_lazyfree (MADV_FREE): an anonymous, swap-backed folio that is
// not in the swap cache and is on the LRU loses PG_swapbacked (moving to the
// file LRU, where reclaim discards it while it stays clean), PG_active and
// PG_referenced (pglazyfree).
void folio_mark_lazyfree(Folio* folio);

}  // namespace mmlab
