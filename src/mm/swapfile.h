// Swap (mm/swapfile.c, mm/swap_state.c, mm/page_io.c; defined in
// mm/swapfile.cpp): an in-memory swap device, its slots, the swap cache and
// its read for swap-in faults (do_swap_page is in fault/memory_swap.cpp).
// The swap-entry and migration-entry formats are in pgtable/entry.h.
//
// The model's device is held in host memory and is of one of three classes
// (SwapKind): a block device (SWP_BLKDEV), a swap file (never gives a large
// folio its slots whole) or zram (SWP_BLKDEV | SWP_SYNCHRONOUS_IO). The
// first two write asynchronously: a folio written out stays in the swap
// cache under writeback until the scenario waits for the I/O
// (swap_writeback_wait), and then until a later reclaim, which the model
// has none of: touched again, it is mapped from the swap cache, whole if
// large. zram writes synchronously: the folio is freed in the same pass,
// and a swap-in of an entry with a swap count of 1 bypasses the swap cache,
// with a large folio where alloc_swap_folio() allows one.
//
// Locking (see sync/lock_order.h): each device's `lock` stands for the
// kernel's si->lock, the swap cluster locks and the swap cache's xarray lock
// at once. It is a leaf lock (LockClass::kGeneric): it may be taken under a
// page-table lock (zap, fork) and nothing is taken under it except the page
// allocator's locks, never a folio lock held blocking.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "mm/mm.h"
#include "mmlab/types.h"
#include "pgtable/entry.h"
#include "phys/page.h"
#include "sync/annotations.h"
#include "sync/mutex.h"
#include "sync/spinlock.h"

namespace mmlab {

struct Kernel;

// ---- swap_map values (include/linux/swap.h) ----
// The low bits count the references to a slot (one per swap PTE, and per
// other swap_duplicate() holder); SWAP_HAS_CACHE says the swap cache holds a
// folio for it (the kernel's "one for the swap cache").
inline constexpr uint16_t SWAP_HAS_CACHE = 0x8000;
inline constexpr uint16_t SWAP_COUNT_MASK = 0x7fff;

// struct swap_info_struct of an in-memory device. Slot 0 holds the swap
// header and is never allocated, as in the kernel.
struct SwapDevice {
  SwapDevice(unsigned type, uint64_t nr_slots, SwapKind kind);
  ~SwapDevice();
  SwapDevice(const SwapDevice&) = delete;
  SwapDevice& operator=(const SwapDevice&) = delete;

  const unsigned type;   // swp_type() of its entries
  const uint64_t max;    // slots, header included
  const bool blkdev;     // SWP_BLKDEV: only then can a large folio get its slots whole
  const bool synchronous_io;  // SWP_SYNCHRONOUS_IO (zram): writes complete before pageout() returns
  uint8_t* data = nullptr;  // max * PAGE_SIZE bytes of host memory, touched lazily
  uint64_t data_len = 0;

  SpinLock lock{};  // si->lock + the swap cache of this device (leaf)
  std::vector<uint16_t> swap_map GUARDED_BY(lock);  // per slot: count | SWAP_HAS_CACHE
  std::vector<Folio*> cache GUARDED_BY(lock);       // swap cache: slot -> folio (every slot of a large folio)
  uint64_t inuse_pages GUARDED_BY(lock) = 0;        // slots with a nonzero swap_map
  // si->zeromap (v6.12): a slot whose page was all zeros when written out;
  // nothing was written to the device, and a read fills the folio with
  // zeros. Cleared when the slot is freed or written with data.
  std::vector<uint8_t> zeromap GUARDED_BY(lock);
  uint64_t cluster_next GUARDED_BY(lock) = 1;       // allocation hint
};

// The swap devices of one Kernel (swap_info[]). Devices are only added
// (there is no swapoff): devices[i] is written once, under swapon_mutex,
// before nr_swapfiles publishes it.
struct SwapState {
  Mutex swapon_mutex;
  std::array<std::unique_ptr<SwapDevice>, MAX_SWAPFILES> devices;
  std::atomic<unsigned> nr_swapfiles{0};
  // Folios whose write to an asynchronous device is in flight (PG_writeback)
  // until swap_writeback_wait() completes them.
  Mutex writeback_lock;
  std::vector<Folio*> writeback GUARDED_BY(writeback_lock);
};

// ---- the swap cache and slots (mm/swap_state.c, mm/swapfile.c) ----
// folio->swap: the entry of the folio's first page (Page::private_).
inline swp_entry_t folio_swap_entry(const Folio* f) {
  return swp_entry_t{aref(const_cast<uint64_t&>(f->page.private_)).load(std::memory_order_acquire)};
}
// The device an entry names, or nullptr for a bad type or offset (get_swap_device).
SwapDevice* swp_swap_info(Kernel* k, swp_entry_t entry);
// The folio the swap cache holds for entry, with a reference; nullptr if none.
Folio* swap_cache_get_folio(Kernel* k, swp_entry_t entry);
// folio_alloc_swap: nr contiguous, naturally aligned slots for a locked folio
// that is not in the swap cache yet, and add it to the swap cache (PG_swapcache,
// private_ = first entry, one reference per page). 0 or -ENOMEM (no room).
[[nodiscard]] int folio_alloc_swap(Folio* folio);
// __read_swap_cache_async for one slot of si (the entry's device): the folio
// the swap cache holds, with a reference (*fresh false), or a new order-0
// folio added to the swap cache, read from the device and left locked
// (*fresh true). nullptr when the slot was freed meanwhile (its swap PTE is
// gone) or memory ran out.
Folio* read_swap_cache(Kernel* k, SwapDevice* si, swp_entry_t entry, bool* fresh);
// Remove a locked folio from the swap cache: its slots lose SWAP_HAS_CACHE
// (and are freed if no swap PTE uses them), PG_swapcache is cleared and the
// cache's references are dropped (swap_cache_del_folio + put_swap_folio).
void swap_cache_del_folio(Folio* folio);
// A split folio's pages became folios of their own: point each slot's cache
// entry at its page (__swap_cache_replace_folio). The folio is frozen.
void swap_cache_split_folio(Folio* head, long nr);
// folio_unlock() for a folio that may be in the swap cache, by a caller that
// holds a reference: a zap that dropped the last swap PTE of its slots while
// we held the lock could not reclaim it (__try_to_reclaim_swap only trylocks),
// so look again once unlocked. Stands in for the LRU reclaim that finds such
// folios later in the kernel.
void folio_unlock_swap(Folio* folio);
// free_swap_cache (mm/swap_state.c): a swap-cache folio that nothing maps
// any more leaves the swap cache, unless its slots are still swapped or its
// lock cannot be had without sleeping. What the kernel's mmu_gather does to
// every folio a zap releases (free_pages_and_swap_cache), and collapse to
// the folios it copied. The caller holds a reference.
void free_swap_cache(Folio* folio);
// Reclaim every swap-cache folio whose slots no swap PTE uses any more (the
// model's substitute for LRU reclaim of such folios; run by run_shrinkers()).
// Returns how many folios left the swap cache.
[[nodiscard]] long shrink_swap_cache(Kernel* k);
// swapon: a swap device of bytes (the first page is the header) of the given
// kind. 0, -EINVAL if too small, -EPERM past MAX_SWAPFILES, -ENOMEM.
[[nodiscard]] int swapon(Kernel* k, uint64_t bytes, SwapKind kind);
// mm/page_io.c: the slots' bytes into a folio at off (swap_read_folio: false
// on a read error, which leaves the folio !uptodate), and a locked, unmapped
// swap-cache folio's bytes into its slots (swap_writeout).
// A zero-filled folio is not written: its slots are marked in the zeromap
// (swpout_zero, no pswpout or swpout), and read back as zeros (swpin_zero,
// no pswpin); a large folio whose slots are partly marked fails its read,
// as the kernel's does.
[[nodiscard]] bool swap_read_folio(Kernel* k, Folio* folio, SwapDevice* si, uint64_t off);
void swap_writeout(Kernel* k, Folio* folio);
// The write swap_writeout() just started for a swap-cache folio stays in
// flight (folio_start_writeback), the folio in the swap cache: an
// asynchronous device, and a folio that was not zero-filled (a zeromap
// folio started no write, so reclaim frees it in the same pass).
bool swap_writeout_is_async(Kernel* k, const Folio* folio);
// swap_zeromap_batch: how many of nr slots from entry share the first's
// zeromap bit (alloc_swap_folio swaps in no large folio across a mix).
unsigned swap_zeromap_batch(Kernel* k, swp_entry_t entry, unsigned nr);
void folio_start_writeback(Kernel* k, Folio* folio);
// Wait for every swap write in flight (folio_end_writeback of each): a
// folio that nothing maps and no swap PTE needs any more then leaves the
// swap cache, as the reclaim that PG_reclaim rotates it to would free it.
// Returns the number of writes completed.
long swap_writeback_wait(Kernel* k);
// The swap count of one slot without the cache bit (__swap_count).
unsigned swap_count(Kernel* k, swp_entry_t entry);
// swapcache_prepare / swapcache_clear for nr slots from entry: SWAP_HAS_CACHE
// taken on slots that are in use and not cached (false, nothing taken, if one
// is not), so that a swap-in that bypasses the swap cache has them to itself.
[[nodiscard]] bool swapcache_prepare(Kernel* k, swp_entry_t entry, unsigned nr);
void swapcache_clear(Kernel* k, swp_entry_t entry, unsigned nr);
// non_swapcache_batch: how many of nr slots from entry the swap cache holds nothing for.
unsigned non_swapcache_batch(Kernel* k, swp_entry_t entry, unsigned nr);
// put_swap_folio for one slot: the swap cache no longer holds it.
void slot_drop_cache(SwapDevice* si, uint64_t off) REQUIRES(si->lock);
// swap_duplicate: one more reference to a slot in use. 0, or -ENOENT if the
// slot is free, -ENOMEM if its count would overflow.
[[nodiscard]] int swap_duplicate(Kernel* k, swp_entry_t entry);
// swap_free_nr: drop one reference to each of nr slots from entry.
void swap_free_nr(Kernel* k, swp_entry_t entry, unsigned nr);
// free_swap_and_cache_nr: drop the references of nr swap PTEs being zapped;
// a slot left with only its swap-cache folio gets that folio reclaimed if it
// can be locked without sleeping (__try_to_reclaim_swap).
void free_swap_and_cache_nr(Kernel* k, swp_entry_t entry, unsigned nr);
// swap_pte_batch: consecutive swap PTEs from ptep whose offsets increase by
// one, with identical type and swap PTE bits; 1..max_nr.
unsigned swap_pte_batch(const pte_t* ptep, unsigned max_nr, pte_t pte);

// Slots in use over every device (for tests and reports).
uint64_t swap_inuse_pages(Kernel* k);
// For the invariant checker (quiescent system): every slot in use, with its
// reference count (swap PTEs), whether the swap cache holds it, and the folio
// the swap cache holds for it (nullptr if none).
void swap_for_each_slot(Kernel* k,
                        const std::function<void(swp_entry_t entry, unsigned count, bool has_cache, Folio* cached)>& fn);
// The swap cache holds this folio under every one of its entries.
bool swap_cache_holds(Kernel* k, const Folio* folio);
// swap_map value of one slot (white-box tests); 0 for a bad entry.
unsigned swap_map_of(Kernel* k, swp_entry_t entry);

// Drop the swap-cache reference of a folio whose swap slots nobody uses any more.
bool folio_free_swap(Folio* folio);

}  // namespace mmlab
