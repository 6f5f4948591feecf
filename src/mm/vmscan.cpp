// The reclaim that MADV_PAGEOUT drives (reclaim_pages and shrink_folio_list
// in mm/vmscan.c; try_to_unmap is in mm/rmap.cpp, as in mm/rmap.c); the walk that
// deactivates or isolates the folios (madvise_cold_or_pageout_pte_range) is
// in mm/madvise.cpp. See mm/swapfile.cpp for how the model departs from the
// kernel.
#include "mm/mm.h"
#include "mm/swapfile.h"

#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "mm/vmscan.h"
#include "phys/frame_copy.h"
#include "tlb/tlb.h"

namespace mmlab {

// ============================================================================
// MADV_PAGEOUT's reclaim of the folios madvise isolated (mm/vmscan.c)
// ============================================================================

namespace {

// __remove_mapping for the swap cache: a written-out folio held by nobody but
// the swap cache and the reclaimer (folio_ref_freeze(folio, 1 + nr)) leaves
// the swap cache; the reclaimer's reference stays. false: someone else holds
// it (a GUP reference, a racing swap-in), so it stays in the swap cache.
bool remove_mapping(Kernel* k, Folio* folio) {
  swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  const long nr = folio_nr_pages(folio);
  {
    SpinGuard g(&si->lock);  // swap-cache lookups cannot take a reference meanwhile
    // The kernel's folio_ref_freeze(1 + nr) and unfreeze to 1, in one CAS.
    int expected = 1 + static_cast<int>(nr);
    if (folio_test_dirty(folio)) return false;
    sched::point("folio_ref_freeze", sched::Op::kRmw, refcount_object(folio));
    if (!aref(folio->page.refcount).compare_exchange_strong(expected, 1, std::memory_order_acq_rel))
      return false;
    for (long i = 0; i < nr; i++) slot_drop_cache(si, swp_offset(entry) + static_cast<uint64_t>(i));
  }
  folio_clear_swapcache(folio);
  aref(folio->page.private_).store(0, std::memory_order_release);
  return true;
}

enum class Reclaim : uint8_t { kKeep, kActivate, kFreed };

// The swap-space part of shrink_folio_list for a swap-backed folio not in
// the swap cache yet: slots for the folio whole, or, when there are none
// (no room, no swap at all, or a swap file, which never takes a large folio
// whole), split it and get a slot for its first page; the other pages join
// the list. kActivate/kKeep when it cannot be swapped; nullopt to go on.
std::optional<Reclaim> add_to_swap(Kernel* k, Folio* folio, std::vector<Folio*>* list) {
  if (folio_maybe_dma_pinned(folio)) return Reclaim::kKeep;
  if (folio_test_large(folio)) {
    // cannot split folio, skip it
    if (!can_split_folio(folio, 1, nullptr)) return Reclaim::kActivate;
    // Split partially mapped folios right away: the unmapped pages are freed without I/O.
    if (folio_on_deferred_list(folio) && folio_test_partially_mapped(folio) && split_folio_to_list(folio, list))
      return Reclaim::kActivate;
  }
  if (folio_alloc_swap(folio)) {
    if (!folio_test_large(folio)) return Reclaim::kActivate;
    // Fall back to swapping the pages one by one.
    const unsigned order = folio_order(folio);
    if (split_folio_to_list(folio, list)) return Reclaim::kActivate;
    if (order >= PMD_ORDER) k->stats->count(VmStat::thp_swpout_fallback);
    k->stats->count_mthp(order, MthpStat::swpout_fallback);
    if (folio_alloc_swap(folio)) return Reclaim::kActivate;
  }
  // A fresh slot holds nothing yet: the folio must be written.
  folio_set_dirty(folio);
  return std::nullopt;
}

// A shmem folio still in its file's page cache (not yet moved to swap).
bool shmem_cache_folio(const Folio* folio) {
  return !folio_test_anon(folio) && folio_test_swapbacked(folio) && !folio_test_swapcache(folio) &&
         aref(const_cast<uint64_t&>(folio->page.mapping)).load(std::memory_order_acquire) != 0;
}

// A folio of the file LRU in a page cache (the ext4 class: not swap-backed).
// A lazy-free folio is on the file LRU too but anonymous.
bool file_cache_folio(const Folio* folio) {
  return !folio_test_anon(folio) && !folio_test_swapbacked(folio) &&
         aref(const_cast<uint64_t&>(folio->page.mapping)).load(std::memory_order_acquire) != 0;
}

// AS_UNEVICTABLE of the folio's page-cache mapping.
bool mapping_unevictable(const Folio* folio) {
  auto* f = reinterpret_cast<const File*>(aref(const_cast<uint64_t&>(folio->page.mapping)).load(std::memory_order_acquire));
  return f && f->unevictable;
}

// __remove_mapping for a clean folio still in the page cache: held by nobody
// but the page cache and the reclaimer, it leaves the cache and is freed. A
// shmem index is a hole again (it was never written, so it reads as zeros);
// an ext4-class index is read from the disk by the next access, a major
// fault (filemap_fault: no folio, so the disk is read).
bool remove_mapping_file(Folio* folio) {
  auto* f = reinterpret_cast<File*>(aref(folio->page.mapping).load(std::memory_order_acquire));
  if (folio_ref_count(folio) != 1 + static_cast<int>(folio_nr_pages(folio))) return false;
  filemap_remove_folio(f, folio);
  return true;
}

// shrink_folio_list() for one locked folio.
Reclaim reclaim_folio(Kernel* k, Folio* folio, std::vector<Folio*>* list) {
  const bool shmem = shmem_cache_folio(folio);
  const bool file = file_cache_folio(folio);
  // A page-cache folio truncated away while isolated: its last references
  // are ours and the mappings' (none after the truncation's unmap).
  if (!folio_test_anon(folio) && !shmem && !file) return Reclaim::kKeep;
  // folio_evictable(): a folio of an unevictable mapping (a file on a
  // noswap tmpfs) is put back before anything is unmapped.
  if (shmem && mapping_unevictable(folio)) return Reclaim::kActivate;
  // Its write is still in flight: kept for a later pass.
  if (folio_test_writeback(folio)) return Reclaim::kKeep;
  // Anonymous memory needs backing store; a lazy-free folio is discarded
  // instead and needs none.
  if (!shmem && folio_test_swapbacked(folio) && !folio_test_swapcache(folio)) {
    if (std::optional<Reclaim> r = add_to_swap(k, folio, list)) return *r;
  }
  if (folio_mapped(folio)) {
    try_to_unmap(folio);
    if (folio_mapped(folio)) return Reclaim::kActivate;
  }
  // Unmapped, so it cannot be newly pinned; a pinned folio is not freed.
  if (folio_maybe_dma_pinned(folio)) return Reclaim::kActivate;
  if (folio_test_dirty(folio)) {
    // A dirty folio of the file LRU (a lazy-free folio redirtied, a page of
    // the ext4 class written through a mapping or pwrite) is activated,
    // already unmapped: only kswapd writes file pages back, and MADV_PAGEOUT
    // is not kswapd. The next access is a minor fault.
    if (!folio_test_swapbacked(folio)) return Reclaim::kActivate;
    // pageout(): is_page_cache_freeable - nobody but the isolation and the
    // swap cache may hold the folio, or it is kept. (In the model this is
    // also what try_to_unmap_flush_dirty() guarantees in the kernel: a CPU
    // still storing through the translation it had before the unmap holds a
    // reference on the folio until its store is done.)
    if (folio_ref_count(folio) != 1 + static_cast<int>(folio_nr_pages(folio))) return Reclaim::kKeep;
    // folio_clear_dirty_for_io, then the write: to an asynchronous device
    // it is still in flight when pageout() returns, and the folio is kept
    // (in the swap cache, for a later reclaim pass); a synchronous one
    // (zram) is done, and the folio can go at once.
    folio_clear_dirty(folio);
    if (shmem) {
      // pageout() -> shmem_writeout(): the folio moves from the page cache
      // to the swap cache, its file keeping the swap entry. A large folio
      // goes whole if the device gives it slots, else it is split and its
      // other pages join the list (pageout() passes folio_list down).
      if (shmem_writeout(folio, list)) return Reclaim::kActivate;
    } else {
      swap_writeout(k, folio);
    }
    if (folio_test_swapbacked(folio) && swap_writeout_is_async(k, folio)) {
      folio_start_writeback(k, folio);
      return Reclaim::kKeep;
    }
  }
  if (file) return remove_mapping_file(folio) ? Reclaim::kFreed : Reclaim::kKeep;
  if (!folio_test_swapbacked(folio)) {
    // folio_test_lazyfree: unmapped and clean; freed if only the isolation
    // holds it (folio_ref_freeze(folio, 1)). Nothing can find it to take a
    // new reference: it is in no page table and no cache.
    if (folio_ref_count(folio) != 1) return Reclaim::kKeep;
    k->stats->count(VmStat::pglazyfreed, static_cast<uint64_t>(folio_nr_pages(folio)));
    return Reclaim::kFreed;
  }
  if (shmem_cache_folio(folio)) return remove_mapping_file(folio) ? Reclaim::kFreed : Reclaim::kKeep;
  return remove_mapping(k, folio) ? Reclaim::kFreed : Reclaim::kKeep;
}

// shrink_folio_list over isolated folios (each holds an isolation
// reference). Folios split on the way append their other parts.
void shrink_folio_list(Kernel* k, std::vector<Folio*>* list) {
  for (size_t i = 0; i < list->size(); i++) {
    Folio* folio = (*list)[i];
    if (!folio_trylock(folio)) {
      folio_putback_lru(folio);
      continue;
    }
    switch (reclaim_folio(k, folio, list)) {
      case Reclaim::kFreed:
        folio_unlock(folio);
        folio_put(folio);  // the last reference: the folio is freed
        break;
      case Reclaim::kActivate:
        // Not a candidate for swapping: give back swap space it no longer
        // needs (swap is "full" for the model).
        if (folio_test_swapcache(folio)) folio_free_swap(folio);
        if (!folio_test_mlocked(folio)) folio_set_active(folio);
        folio_unlock_swap(folio);
        folio_putback_lru(folio);
        break;
      case Reclaim::kKeep:
        folio_unlock_swap(folio);
        folio_putback_lru(folio);
        break;
    }
  }
}

}  // namespace

// reclaim_pages (MADV_PAGEOUT): shrink_folio_list over the folios it isolated.
void reclaim_pages(Kernel* k, std::vector<Folio*>* folio_list) {
  // The writes an earlier reclaim started have completed by now (a device
  // takes far less than the time between two calls), so a folio swapped in
  // meanwhile is not kept for a write still in flight.
  (void)swap_writeback_wait(k);
  shrink_folio_list(k, folio_list);
}

}  // namespace mmlab
