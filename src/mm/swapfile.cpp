// Swap. This file: the in-memory swap device and its slots (mm/swapfile.c),
// the swap cache and its read for swap-in (mm/swap_state.c:
// __read_swap_cache_async is read_swap_cache), and the device I/O
// (mm/page_io.c). Elsewhere, and described here too: swap-in faults
// (do_swap_page, mm/memory.c) in fault/memory_swap.cpp; swap and migration
// entries in zap and fork in mm/zap.cpp and mm/fork.cpp; the reclaim that MADV_COLD and
// MADV_PAGEOUT drive, in mm/madvise.cpp (madvise_cold_or_pageout_pte_range,
// with folio_deactivate of mm/swap.c) and mm/vmscan.cpp (shrink_folio_list,
// try_to_unmap_one of mm/rmap.c), including the discard of MADV_FREE's
// lazy-free folios.
//
// Reclaim follows shrink_folio_list's order: a swap-backed folio gets swap
// space first (a large folio whole from a block device; a swap file, no
// room or no swap at all splits it, counting the fallback, and a small
// folio that gets none is activated), then it is unmapped, written and
// freed; a lazy-free folio needs no swap: try_to_unmap_one discards its
// mappings while it is clean and nobody else holds it (a PMD mapping whole,
// without a split), else makes it swap-backed again (redirtied) or leaves it
// (another reference), and it is freed once unmapped.
//
// Where the model departs from the kernel:
//  - The device's bytes are copied when pageout() writes. On an
//    asynchronous device (a block device, a swap file) the write then stays
//    in flight (PG_writeback) until the scenario waits for it
//    (swap_writeback_wait): the folio stays in the swap cache, unmapped,
//    and a later touch maps it from there (whole, if large). The kernel
//    frees it at a later reclaim pass, which the model never runs (no
//    memory pressure), as an idle host never does either. On zram
//    (SWP_SYNCHRONOUS_IO) the write is done before pageout() returns and
//    the folio is freed in the same pass.
//  - Swap is treated as always "full" (mem_cgroup_swap_full() true): every
//    place that may drop a swap-cache folio whose slots no swap PTE uses any
//    more does so (should_try_to_free_swap, activate_locked, the swap-in
//    back-out paths). With no reclaim running in the background, this keeps
//    the swap cache to the folios whose slots are still shared. A zap that
//    drops the last swap PTE of a slot may fail to lock its folio (it only
//    trylocks, under the PTL); the model's lock holders look again when they
//    unlock (folio_unlock_swap), and run_shrinkers() sweeps the swap cache
//    (shrink_swap_cache), standing in for the LRU reclaim that frees such
//    folios in the kernel.
//  - The model's CPU keeps a translation for the whole of a page-sized store,
//    holding a folio reference meanwhile; pageout()'s is_page_cache_freeable
//    test (no references but the isolation's and the swap cache's) is what
//    keeps such a store from racing with the write to the device, where the
//    kernel relies on try_to_unmap_flush_dirty(). The lazy-free discard's
//    reference check catches such a store the same way.
//  - MADV_PAGEOUT reclaims anonymous folios only: page-cache and shmem
//    folios (file reclaim, shmem swap-out) are not modelled, so the walk
//    skips them (MADV_COLD deactivates them all the same).
//  - The LRU is the classic one, kept as folio flags only (PG_lru, PG_active,
//    PG_referenced, PG_workingset; a lazy-free folio's list is implied by
//    !PG_swapbacked), with no list order and no per-CPU batches: a move
//    between lists happens at once, as if the batch were drained.
//  - Swap-in through the swap cache is order 0 (swapin_readahead without
//    readahead); a large folio still in the swap cache is mapped whole when
//    its swap PTEs allow, as the kernel does. mTHP swap-in is zram's only
//    (do_swap_page's SWP_SYNCHRONOUS_IO path, alloc_swap_folio() in
//    fault/memory_swap.cpp).
//  - No readahead, no zswap (so zswap_never_enabled() holds), no zeromap
//    (zero-filled pages are written like the others), no swap cgroup
//    accounting, no swapoff.
#include "mm/swapfile.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include "mm/swapfile.h"

#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "base/mmdebug.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"
#include "sync/sched.h"

namespace mmlab {

// ============================================================================
// The device and its slots (mm/swapfile.c)
// ============================================================================

SwapDevice::SwapDevice(unsigned t, uint64_t nr_slots, SwapKind kind)
    : type(t), max(nr_slots), blkdev(kind != SwapKind::kFile), synchronous_io(kind == SwapKind::kZram) {
  data_len = nr_slots * PAGE_SIZE;
  void* p = ::mmap(nullptr, data_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) data = static_cast<uint8_t*>(p);
  swap_map.assign(nr_slots, 0);
  cache.assign(nr_slots, nullptr);
  zeromap.assign(nr_slots, 0);
}

SwapDevice::~SwapDevice() {
  if (data) ::munmap(data, data_len);
}

// sys_swapon of an in-memory device of `bytes` (rounded down to pages).
int swapon(Kernel* k, uint64_t bytes, SwapKind kind) {
  SwapState* ss = k->swap.get();
  uint64_t nr = bytes >> PAGE_SHIFT;
  if (nr < 2) return -EINVAL;  // the header page and at least one slot
  nr = std::min<uint64_t>(nr, SWP_MIG_YOUNG);  // offsets must fit a swap PTE
  MutexGuard g(&ss->swapon_mutex);
  unsigned type = ss->nr_swapfiles.load(std::memory_order_relaxed);
  if (type >= MAX_SWAPFILES) return -EPERM;
  auto dev = std::make_unique<SwapDevice>(type, nr, kind);
  if (!dev->data) return -ENOMEM;
  ss->devices[type] = std::move(dev);
  ss->nr_swapfiles.store(type + 1, std::memory_order_release);
  return 0;
}

SwapDevice* swp_swap_info(Kernel* k, swp_entry_t entry) {
  unsigned type = swp_type(entry);
  if (type >= k->swap->nr_swapfiles.load(std::memory_order_acquire)) return nullptr;
  SwapDevice* si = k->swap->devices[type].get();
  uint64_t off = swp_offset(entry);
  if (off == 0 || off >= si->max) return nullptr;
  return si;
}

uint64_t swap_inuse_pages(Kernel* k) {
  uint64_t n = 0;
  unsigned nr = k->swap->nr_swapfiles.load(std::memory_order_acquire);
  for (unsigned t = 0; t < nr; t++) {
    SwapDevice* si = k->swap->devices[t].get();
    SpinGuard g(&si->lock);
    n += si->inuse_pages;
  }
  return n;
}

void swap_for_each_slot(Kernel* k,
                        const std::function<void(swp_entry_t entry, unsigned count, bool has_cache, Folio* cached)>& fn) {
  unsigned nr = k->swap->nr_swapfiles.load(std::memory_order_acquire);
  for (unsigned t = 0; t < nr; t++) {
    SwapDevice* si = k->swap->devices[t].get();
    std::vector<std::pair<uint64_t, std::pair<uint16_t, Folio*>>> used;
    {
      SpinGuard g(&si->lock);
      for (uint64_t off = 1; off < si->max; off++)
        if (si->swap_map[off] || si->cache[off]) used.push_back({off, {si->swap_map[off], si->cache[off]}});
    }
    for (auto& [off, v] : used)
      fn(swp_entry(t, off), v.first & SWAP_COUNT_MASK, v.first & SWAP_HAS_CACHE, v.second);
  }
}

bool swap_cache_holds(Kernel* k, const Folio* folio) {
  if (!folio_test_swapcache(folio)) return false;
  swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return false;
  const long nr = folio_nr_pages(folio);
  if (swp_offset(entry) + static_cast<uint64_t>(nr) > si->max) return false;
  SpinGuard g(&si->lock);
  for (long i = 0; i < nr; i++) {
    uint64_t off = swp_offset(entry) + static_cast<uint64_t>(i);
    if (si->cache[off] != folio || !(si->swap_map[off] & SWAP_HAS_CACHE)) return false;
  }
  return true;
}

unsigned swap_map_of(Kernel* k, swp_entry_t entry) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return 0;
  SpinGuard g(&si->lock);
  return si->swap_map[swp_offset(entry)];
}

namespace {

// A naturally aligned run of nr free slots in [from, to), first fit; 0 if none.
uint64_t scan_free_run(SwapDevice* si, uint64_t from, uint64_t to, uint64_t nr) REQUIRES(si->lock) {
  for (uint64_t c = round_up(std::max<uint64_t>(from, 1), nr); c + nr <= to;) {
    uint64_t i = 0;
    while (i < nr && si->swap_map[c + i] == 0) i++;
    if (i == nr) return c;
    c = round_up(c + i + 1, nr);
  }
  return 0;
}

// scan_swap_map_slots: nr contiguous slots, naturally aligned (a large
// folio's slots are, so that swap-in can find its swap PTEs as a batch),
// searching from the hint and wrapping. The slots start with SWAP_HAS_CACHE.
uint64_t swap_alloc_slots(SwapDevice* si, uint64_t nr) REQUIRES(si->lock) {
  if (si->max - 1 - si->inuse_pages < nr) return 0;
  uint64_t hint = std::max<uint64_t>(si->cluster_next, 1);
  uint64_t off = scan_free_run(si, hint, si->max, nr);
  if (!off) off = scan_free_run(si, 1, std::min(si->max, hint + nr), nr);
  if (!off) return 0;
  for (uint64_t i = 0; i < nr; i++) si->swap_map[off + i] = SWAP_HAS_CACHE;
  si->inuse_pages += nr;
  si->cluster_next = off + nr;
  return off;
}

// A slot whose swap_map dropped to zero is free again (swap_entries_free).
void slot_maybe_free(SwapDevice* si, uint64_t off) REQUIRES(si->lock) {
  if (si->swap_map[off] == 0) {
    VM_BUG_ON(si->cache[off], "a free swap slot still has a swap-cache folio");
    si->inuse_pages--;
    si->zeromap[off] = 0;  // swap_range_free
  }
}

// Drop one reference of each of nr slots; true if any slot is left with only
// its swap-cache folio (__swap_entries_free's "any_only_cache").
bool swap_entries_free(SwapDevice* si, uint64_t off, uint64_t nr) REQUIRES(si->lock) {
  bool only_cache = false;
  for (uint64_t i = off; i < off + nr; i++) {
    uint16_t v = si->swap_map[i];
    VM_BUG_ON(!(v & SWAP_COUNT_MASK), "swap_free of a slot with no references");
    if (!(v & SWAP_COUNT_MASK)) continue;
    si->swap_map[i] = static_cast<uint16_t>(v - 1);
    if (si->swap_map[i] == SWAP_HAS_CACHE) only_cache = true;
    slot_maybe_free(si, i);
  }
  return only_cache;
}

}  // namespace

void slot_drop_cache(SwapDevice* si, uint64_t off) {
  si->cache[off] = nullptr;
  si->swap_map[off] = static_cast<uint16_t>(si->swap_map[off] & ~SWAP_HAS_CACHE);
  slot_maybe_free(si, off);
}

namespace {

// folio_swapped(): some slot of the folio still has references besides the
// swap cache (a swap PTE).
bool folio_swapped_locked(SwapDevice* si, uint64_t off, long nr) REQUIRES(si->lock) {
  for (long i = 0; i < nr; i++)
    if (si->swap_map[off + i] & SWAP_COUNT_MASK) return true;
  return false;
}

}  // namespace

int folio_alloc_swap(Folio* folio) {
  VM_BUG_ON_FOLIO(!folio_test_locked(folio), folio, "folio_alloc_swap on an unlocked folio");
  VM_WARN_ON_ONCE_FOLIO(folio_test_swapcache(folio), folio, "folio_alloc_swap on a swap-cache folio");
  Kernel* k = kernel_of(&folio->page);
  const long nr = folio_nr_pages(folio);
  unsigned nr_dev = k->swap->nr_swapfiles.load(std::memory_order_acquire);
  // Devices in the order they were added: the kernel gives each swapon
  // without a priority a lower one than the last, so the first fills first.
  for (unsigned t = 0; t < nr_dev; t++) {
    SwapDevice* si = k->swap->devices[t].get();
    // cluster_alloc_swap_entry: a swap file (not SWP_BLKDEV) cannot do the
    // large contiguous I/O, so it never gives a large folio its slots.
    if (nr > 1 && !si->blkdev) continue;
    SpinGuard g(&si->lock);
    uint64_t off = swap_alloc_slots(si, static_cast<uint64_t>(nr));
    if (!off) continue;
    // swap_cache_add_folio: the folio is complete before lookups can find it.
    folio_ref_add(folio, static_cast<int>(nr));
    aref(folio->page.private_).store(swp_entry(t, off).val, std::memory_order_release);
    folio_set_swapcache(folio);
    for (long i = 0; i < nr; i++) si->cache[off + i] = folio;
    return 0;
  }
  return -ENOMEM;
}

Folio* swap_cache_get_folio(Kernel* k, swp_entry_t entry) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return nullptr;
  SpinGuard g(&si->lock);
  Folio* f = si->cache[swp_offset(entry)];
  // A folio being split is frozen (refcount 0): not found, try again later.
  if (!f || !folio_ref_try_add(f, 1)) return nullptr;
  return f;
}

void swap_cache_del_folio(Folio* folio) {
  VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio, "swap_cache_del_folio on an unlocked folio");
  VM_WARN_ON_ONCE_FOLIO(!folio_test_swapcache(folio), folio, "swap_cache_del_folio of a folio not in the swap cache");
  Kernel* k = kernel_of(&folio->page);
  swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  const long nr = folio_nr_pages(folio);
  {
    SpinGuard g(&si->lock);
    for (long i = 0; i < nr; i++) slot_drop_cache(si, swp_offset(entry) + static_cast<uint64_t>(i));
  }
  folio_clear_swapcache(folio);
  aref(folio->page.private_).store(0, std::memory_order_release);
  folio_put_refs(folio, static_cast<int>(nr));
}

void swap_cache_split_folio(Folio* head, long nr) {
  Kernel* k = kernel_of(&head->page);
  swp_entry_t entry = folio_swap_entry(head);
  SwapDevice* si = swp_swap_info(k, entry);
  SpinGuard g(&si->lock);
  for (long i = 0; i < nr; i++)
    si->cache[swp_offset(entry) + static_cast<uint64_t>(i)] = reinterpret_cast<Folio*>(folio_page(head, i));
}

// __read_swap_cache_async for one slot: the folio the swap cache holds, with a
// reference (*fresh false), or a new order-0 folio added to the swap cache,
// read from the device and left locked (*fresh true). nullptr when the slot
// was freed meanwhile (its swap PTE is gone) or memory ran out.
Folio* read_swap_cache(Kernel* k, SwapDevice* si, swp_entry_t entry, bool* fresh) {
  const uint64_t off = swp_offset(entry);
  for (;;) {
    if (Folio* f = swap_cache_get_folio(k, entry)) {
      *fresh = false;
      return f;
    }
    Folio* nf = k->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, 0);
    if (!nf) return nullptr;
    // Private to us until added to the cache: the lock cannot be contended.
    __folio_set_locked(nf);
    folio_set_swapbacked(nf);
    enum class Add : uint8_t { kAdded, kRaced, kGone } r;
    {
      SpinGuard g(&si->lock);
      uint16_t v = si->swap_map[off];
      if (si->cache[off]) {
        r = Add::kRaced;  // another folio is (being) added, or is frozen by a split
      } else if (!(v & SWAP_COUNT_MASK)) {
        r = Add::kGone;  // !swap_entry_swapped(): every swap PTE of it is gone
      } else {
        // swapcache_prepare + swap_cache_add_folio.
        folio_ref_add(nf, 1);
        aref(nf->page.private_).store(entry.val, std::memory_order_release);
        folio_set_swapcache(nf);
        si->swap_map[off] = static_cast<uint16_t>(v | SWAP_HAS_CACHE);
        si->cache[off] = nf;
        r = Add::kAdded;
      }
    }
    if (r != Add::kAdded) {
      folio_unlock(nf);
      folio_put(nf);
      if (r == Add::kGone) return nullptr;
      // The kernel's livelock of 029c4628b2eb under a strict scheduler:
      // under the explorer, wait for another thread's step before retrying.
      sched::yield("read_swap_cache", {si, sched::ObjKind::kSwapSlot, off});
      continue;
    }
    if (swap_read_folio(k, nf, si, off)) folio_set_uptodate(nf);
    folio_add_lru(nf);
    *fresh = true;
    return nf;
  }
}

int swap_duplicate(Kernel* k, swp_entry_t entry) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return -ENOENT;
  SpinGuard g(&si->lock);
  uint16_t& v = si->swap_map[swp_offset(entry)];
  if (v == 0) return -ENOENT;
  // The kernel chains swap-count continuation pages past SWAP_MAP_MAX; the
  // model's count simply has room for 32767 references.
  if ((v & SWAP_COUNT_MASK) == SWAP_COUNT_MASK) return -ENOMEM;
  v = static_cast<uint16_t>(v + 1);
  return 0;
}

void swap_free_nr(Kernel* k, swp_entry_t entry, unsigned nr) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return;
  SpinGuard g(&si->lock);
  swap_entries_free(si, swp_offset(entry), nr);
}

bool folio_free_swap(Folio* folio) {
  VM_BUG_ON_FOLIO(!folio_test_locked(folio), folio, "folio_free_swap on an unlocked folio");
  if (!folio_test_swapcache(folio)) return false;
  if (folio_test_writeback(folio)) return false;  // the device still reads it
  Kernel* k = kernel_of(&folio->page);
  swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  const long nr = folio_nr_pages(folio);
  {
    SpinGuard g(&si->lock);
    if (folio_swapped_locked(si, swp_offset(entry), nr)) return false;
    for (long i = 0; i < nr; i++) slot_drop_cache(si, swp_offset(entry) + static_cast<uint64_t>(i));
  }
  folio_clear_swapcache(folio);
  aref(folio->page.private_).store(0, std::memory_order_release);
  // The folio now holds the only copy of its data.
  folio_set_dirty(folio);
  folio_put_refs(folio, static_cast<int>(nr));
  return true;
}

void folio_unlock_swap(Folio* folio) {
  folio_unlock(folio);
  if (folio_test_swapcache(folio) && folio_trylock(folio)) {
    folio_free_swap(folio);  // only if no swap PTE uses its slots
    folio_unlock(folio);
  }
}

void free_swap_cache(Folio* folio) {
  if (folio_test_swapcache(folio) && !folio_mapped(folio) && folio_trylock(folio)) {
    folio_free_swap(folio);
    folio_unlock(folio);
  }
}

long shrink_swap_cache(Kernel* k) {
  long freed = 0;
  unsigned nr_dev = k->swap->nr_swapfiles.load(std::memory_order_acquire);
  for (unsigned t = 0; t < nr_dev; t++) {
    SwapDevice* si = k->swap->devices[t].get();
    for (uint64_t off = 1; off < si->max; off++) {
      bool only_cache;
      {
        SpinGuard g(&si->lock);
        only_cache = si->swap_map[off] == SWAP_HAS_CACHE;
      }
      if (!only_cache) continue;
      Folio* folio = swap_cache_get_folio(k, swp_entry(t, off));
      if (!folio) continue;
      if (folio_trylock(folio)) {
        if (folio_free_swap(folio)) freed++;
        folio_unlock(folio);
      }
      folio_put(folio);
    }
  }
  return freed;
}

namespace {

// __try_to_reclaim_swap(si, offset, TTRS_UNMAPPED | TTRS_FULL): a folio whose
// slots only the swap cache uses is removed from it, if it can be locked
// without sleeping (the caller may hold a page-table lock). Returns the
// folio's size (positive if reclaimed, negative if not), 0 if none.
long try_to_reclaim_swap(Kernel* k, SwapDevice* si, uint64_t off) {
  Folio* folio = swap_cache_get_folio(k, swp_entry(si->type, off));
  if (!folio) return 0;
  const long nr = folio_nr_pages(folio);
  long ret = -nr;
  if (folio_trylock(folio)) {
    // The model treats swap as full, so TTRS_FULL reclaims mapped folios too.
    if (folio_free_swap(folio)) ret = nr;
    folio_unlock(folio);
  }
  folio_put(folio);
  return ret;
}

}  // namespace

void free_swap_and_cache_nr(Kernel* k, swp_entry_t entry, unsigned nr) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return;
  const uint64_t start = swp_offset(entry), end = start + nr;
  bool any_only_cache;
  {
    SpinGuard g(&si->lock);
    any_only_cache = swap_entries_free(si, start, nr);
  }
  if (!any_only_cache) return;
  for (uint64_t off = start; off < end;) {
    uint16_t v;
    {
      SpinGuard g(&si->lock);
      v = si->swap_map[off];
    }
    uint64_t step = 1;
    if (v == SWAP_HAS_CACHE) {
      // Folios sit naturally aligned in swap: skip to the next boundary.
      long r = try_to_reclaim_swap(k, si, off);
      if (r) step = round_up(off + 1, static_cast<uint64_t>(std::labs(r))) - off;
    }
    off += step;
  }
}

unsigned swap_pte_batch(const pte_t* ptep, unsigned max_nr, pte_t pte) {
  pte_t expected = pte_move_swp_offset(pte, 1);
  unsigned nr = 1;
  while (nr < max_nr && ptep_get(ptep + nr) == expected) {
    nr++;
    expected = pte_move_swp_offset(expected, 1);
  }
  return nr;
}

// ============================================================================
// Reading and writing the device (mm/page_io.c)
// ============================================================================

// swap_read_folio: the slots' bytes into the folio. false for a read error
// (only by fault injection, the site `swapin`): the folio is left
// !uptodate, as end_swap_bio_read leaves it, and stays in the swap cache.
bool swap_read_folio(Kernel* k, Folio* folio, SwapDevice* si, uint64_t off) {
  PhysMem* phys = k->phys.get();
  const long nr = folio_nr_pages(folio);
  // swap_read_folio_zeromap: before any I/O (so before the injected error).
  long zero = 0;
  {
    SpinGuard g(&si->lock);
    for (long i = 0; i < nr; i++) zero += si->zeromap[off + static_cast<uint64_t>(i)];
  }
  if (zero == nr) {
    for (long i = 0; i < nr; i++) zero_frames(phys, phys->page_address(folio_page(folio, i)), PAGE_SIZE);
    k->stats->count(VmStat::swpin_zero, static_cast<uint64_t>(nr));
    return true;
  }
  // Partly in the zeromap: not handled by the kernel either, which leaves
  // the folio !uptodate (an I/O error). alloc_swap_folio avoids it.
  if (zero) return false;
  if (phys->should_fail(FaultSite::swapin, folio_order(folio))) return false;
  for (long i = 0; i < nr; i++)
    copy_frames(phys, phys->page_address(folio_page(folio, i)), si->data + (off + static_cast<uint64_t>(i)) * PAGE_SIZE,
                PAGE_SIZE);
  k->stats->count(VmStat::pswpin, static_cast<uint64_t>(nr));
  MM_TRACE("swap_read_folio", "pfn={:#x} order={} swap={}:{:#x}", folio_pfn(folio), folio_order(folio), si->type, off);
  if (folio_test_large(folio)) k->stats->count_mthp(folio_order(folio), MthpStat::swpin);
  return true;
}

// swap_writeout / __swap_writepage: the folio's bytes into its slots
// (count_swpout_vm_event). The folio is locked, in the swap cache, unmapped.
void swap_writeout(Kernel* k, Folio* folio) {
  swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  PhysMem* phys = k->phys.get();
  const long nr = folio_nr_pages(folio);
  // is_folio_zero_filled: a folio of zeros is marked in the zeromap, not
  // written (no pswpout, no thp_swpout or mTHP swpout: those count I/O).
  bool zero = true;
  for (long i = 0; i < nr && zero; i++) zero = frame_is_zero(phys->page_address(folio_page(folio, i)));
  {
    SpinGuard g(&si->lock);
    for (long i = 0; i < nr; i++) si->zeromap[swp_offset(entry) + static_cast<uint64_t>(i)] = zero ? 1 : 0;
  }
  if (zero) {
    k->stats->count(VmStat::swpout_zero, static_cast<uint64_t>(nr));
    return;
  }
  uint8_t* dst = si->data + swp_offset(entry) * PAGE_SIZE;
  for (long i = 0; i < nr; i++)
    copy_frames(phys, dst + static_cast<uint64_t>(i) * PAGE_SIZE, phys->page_address(folio_page(folio, i)), PAGE_SIZE);
  MM_TRACE("mm_vmscan_write_folio", "pfn={:#x} order={} swap={}:{:#x}", folio_pfn(folio), folio_order(folio),
           swp_type(entry), swp_offset(entry));
  if (folio_order(folio) == PMD_ORDER) k->stats->count(VmStat::thp_swpout);
  k->stats->count_mthp(folio_order(folio), MthpStat::swpout);
  k->stats->count(VmStat::pswpout, static_cast<uint64_t>(nr));
}

bool swap_writeout_is_async(Kernel* k, const Folio* folio) {
  const swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si || si->synchronous_io) return false;
  SpinGuard g(&si->lock);
  return !si->zeromap[swp_offset(entry)];
}

unsigned swap_zeromap_batch(Kernel* k, swp_entry_t entry, unsigned nr) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return 0;
  SpinGuard g(&si->lock);
  const uint64_t off = swp_offset(entry);
  unsigned i = 1;
  while (i < nr && off + i < si->max && si->zeromap[off + i] == si->zeromap[off]) i++;
  return i;
}

void folio_start_writeback(Kernel* k, Folio* folio) {
  VM_BUG_ON_FOLIO(!folio_test_locked(folio), folio, "folio_start_writeback on an unlocked folio");
  // No reference: PG_writeback alone keeps the folio in the swap cache
  // (folio_free_swap() and reclaim refuse it), and so allocated.
  folio_set_writeback(folio);
  SwapState* ss = k->swap.get();
  MutexGuard g(&ss->writeback_lock);
  ss->writeback.push_back(folio);
}

long swap_writeback_wait(Kernel* k) {
  SwapState* ss = k->swap.get();
  std::vector<Folio*> done;
  {
    MutexGuard g(&ss->writeback_lock);
    done.swap(ss->writeback);
  }
  for (Folio* folio : done) {
    // folio_end_writeback (end_swap_bio_write): the write completed.
    folio_clear_writeback(folio);
    MM_TRACE("swap_writeback_end", "pfn={:#x} order={}", folio_pfn(folio), folio_order(folio));
    // Standing in for the later reclaim pass, which isolates the folio
    // first: free_swap_cache's caller holds a reference, since the swap
    // cache's may be the last one and the folio is unlocked after it goes.
    folio_get(folio);
    free_swap_cache(folio);
    folio_put(folio);
  }
  return static_cast<long>(done.size());
}

unsigned swap_count(Kernel* k, swp_entry_t entry) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return 0;
  SpinGuard g(&si->lock);
  return si->swap_map[swp_offset(entry)] & SWAP_COUNT_MASK;
}

bool swapcache_prepare(Kernel* k, swp_entry_t entry, unsigned nr) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si || swp_offset(entry) + nr > si->max) return false;
  SpinGuard g(&si->lock);
  const uint64_t off = swp_offset(entry);
  for (unsigned i = 0; i < nr; i++) {
    const uint16_t v = si->swap_map[off + i];
    if (!(v & SWAP_COUNT_MASK) || (v & SWAP_HAS_CACHE) || si->cache[off + i]) return false;
  }
  for (unsigned i = 0; i < nr; i++) si->swap_map[off + i] |= SWAP_HAS_CACHE;
  return true;
}

void swapcache_clear(Kernel* k, swp_entry_t entry, unsigned nr) {
  SwapDevice* si = swp_swap_info(k, entry);
  SpinGuard g(&si->lock);
  for (unsigned i = 0; i < nr; i++) slot_drop_cache(si, swp_offset(entry) + i);
}

unsigned non_swapcache_batch(Kernel* k, swp_entry_t entry, unsigned nr) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return 0;
  SpinGuard g(&si->lock);
  unsigned i = 0;
  for (const uint64_t off = swp_offset(entry); i < nr && off + i < si->max; i++)
    if ((si->swap_map[off + i] & SWAP_HAS_CACHE) || si->cache[off + i]) break;
  return i;
}

}  // namespace mmlab
