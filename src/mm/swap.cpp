// The LRU (mm/swap.c, with folio_isolate_lru of mm/vmscan.c): classic
// active/inactive lists, as PG_ flags on the folio.
#include "mm/swap.h"

#include "mm/file.h"
#include "mm/kernel.h"
#include "mm/rmap.h"

namespace mmlab {

bool folio_evictable(const Folio* folio) {
  if (folio_test_anon(folio)) return true;
  const auto* f =
      reinterpret_cast<const File*>(aref(const_cast<uint64_t&>(folio->page.mapping)).load(std::memory_order_acquire));
  return !f || !f->unevictable.load(std::memory_order_acquire);
}

namespace {

// lru_add: onto the list folio_evictable() says. A folio of an unevictable
// mapping goes to the unevictable LRU (PG_unevictable, never active),
// counted as culled the first time; one that was there and is evictable
// again (SHM_UNLOCK while it was isolated) is counted as rescued.
void lru_add(Folio* folio) {
  const bool was_unevictable = test_and_clear_bit(PG_unevictable, &folio->page);
  const auto nr = static_cast<uint64_t>(folio_nr_pages(folio));
  Stats* st = PhysMem::of(&folio->page)->stats();
  if (folio_evictable(folio)) {
    if (was_unevictable && st) st->count(VmStat::unevictable_pgs_rescued, nr);
  } else {
    folio_clear_active(folio);
    folio_set_unevictable(folio);
    if (!was_unevictable && st) st->count(VmStat::unevictable_pgs_culled, nr);
  }
  folio_set_lru(folio);
}

}  // namespace

void folio_add_lru(Folio* folio) {
  // The kernel batches LRU additions per CPU (the batch holds a reference
  // until drained); the model adds at once, as if the batch were drained.
  lru_add(folio);
  if (Stats* st = PhysMem::of(&folio->page)->stats()) st->count(Event::lru_add);
}

// folio_isolate_lru (mm/vmscan.c): off the LRU, with a reference for the isolator.
bool folio_isolate_lru(Folio* folio) {
  if (!test_and_clear_bit(PG_lru, &folio->page)) return false;
  folio_get(folio);
  return true;
}

// folio_putback_lru: folio_add_lru again (lru_add decides the list), then
// the isolation's reference goes.
void folio_putback_lru(Folio* folio) {
  lru_add(folio);
  folio_put(folio);
}

// check_move_unevictable_folios: each folio on the unevictable LRU whose
// mapping is evictable again moves to the evictable LRU (inactive); an
// isolated one is left to its putback's lru_add.
void check_move_unevictable_folios(const std::vector<Folio*>& folios) {
  uint64_t scanned = 0, rescued = 0;
  for (Folio* folio : folios) {
    const auto nr = static_cast<uint64_t>(folio_nr_pages(folio));
    scanned += nr;
    if (!folio_test_lru(folio) || !folio_test_unevictable(folio)) continue;
    if (folio_evictable(folio)) {
      folio_clear_unevictable(folio);
      rescued += nr;
    }
  }
  if (Stats* st = folios.empty() ? nullptr : PhysMem::of(&folios.front()->page)->stats()) {
    st->count(VmStat::unevictable_pgs_rescued, rescued);
    st->count(VmStat::unevictable_pgs_scanned, scanned);
  }
}

void folio_mark_accessed(Folio* folio) {
  if (folio_test_dropbehind(folio)) return;
  if (!folio_test_referenced(folio)) {
    folio_set_referenced(folio);
  } else if (folio_test_unevictable(folio) || folio_test_mlocked(folio)) {
    // nothing: such folios are not on the active/inactive lists
  } else if (!folio_test_active(folio)) {
    folio_set_active(folio);  // activate
    folio_clear_referenced(folio);
    folio_set_workingset(folio);
  }
  if (folio_test_idle(folio)) folio_clear_idle(folio);
}

// The kernel moves a folio between lists through a per-CPU batch: it takes
// the folio off the LRU (PG_lru cleared), and the batch's move function
// runs when the batch fills or is drained. The model runs it at once; a
// folio that is not on the LRU (isolated by a reclaimer) is left alone, as
// folio_test_clear_lru() makes the kernel do.

void folio_deactivate(Folio* folio) {
  if (folio_test_unevictable(folio) || !folio_test_active(folio)) return;
  if (!test_and_clear_bit(PG_lru, &folio->page)) return;
  // lru_deactivate: to the head of the inactive list of its type.
  folio_clear_active(folio);
  folio_clear_referenced(folio);
  folio_set_lru(folio);
  kernel_of(&folio->page)->stats->count(VmStat::pgdeactivate, static_cast<uint64_t>(folio_nr_pages(folio)));
}

void folio_mark_lazyfree(Folio* folio) {
  if (!folio_test_anon(folio) || !folio_test_swapbacked(folio) || folio_test_swapcache(folio) ||
      folio_test_unevictable(folio))
    return;
  if (!test_and_clear_bit(PG_lru, &folio->page)) return;
  // lru_lazyfree: a clean anonymous folio without swap backing goes to the
  // inactive file list, where reclaim may discard it instead of swapping.
  folio_clear_active(folio);
  folio_clear_referenced(folio);
  folio_clear_swapbacked(folio);
  folio_set_lru(folio);
  kernel_of(&folio->page)->stats->count(VmStat::pglazyfree, static_cast<uint64_t>(folio_nr_pages(folio)));
}

}  // namespace mmlab
