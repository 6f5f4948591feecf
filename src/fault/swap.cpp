// Swap: the in-memory swap device and its slots (mm/swapfile.c), the swap
// cache (mm/swap_state.c), swap-in faults (do_swap_page, mm/memory.c), swap
// and migration entries in zap and fork, the reclaim that MADV_COLD and
// MADV_PAGEOUT drive (madvise_cold_or_pageout_pte_range in mm/madvise.c,
// folio_deactivate in mm/swap.c, shrink_folio_list in mm/vmscan.c,
// try_to_unmap_one in mm/rmap.c), including the discard of MADV_FREE's
// lazy-free folios, and clearing soft-dirty bits (clear_refs_write in
// fs/proc/task_mmu.c).
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
//  - Writeback completes at once: pageout() copies the folio to the device
//    and the reclaimer frees the folio in the same pass, instead of a later
//    reclaim pass after the I/O completes. After MADV_PAGEOUT a reclaimed
//    folio is gone and only its swap entries remain.
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
//  - Swap-in is order 0 only (no mTHP swap-in: that needs SWP_SYNCHRONOUS_IO
//    devices); a large folio still in the swap cache is mapped whole when its
//    swap PTEs allow, as the kernel does.
//  - No readahead, no zswap, no swap cgroup accounting, no swapoff.
#include "fault/swap.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "fault/fault.h"
#include "mm/internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/vmdebug.h"
#include "phys/frame_copy.h"

namespace mmlab {

// ============================================================================
// The device and its slots (mm/swapfile.c)
// ============================================================================

SwapDevice::SwapDevice(unsigned t, uint64_t nr_slots, bool is_blkdev) : type(t), max(nr_slots), blkdev(is_blkdev) {
  data_len = nr_slots * PAGE_SIZE;
  void* p = ::mmap(nullptr, data_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) data = static_cast<uint8_t*>(p);
  swap_map.assign(nr_slots, 0);
  cache.assign(nr_slots, nullptr);
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
  std::lock_guard<std::mutex> g(ss->swapon_mutex);
  unsigned type = ss->nr_swapfiles.load(std::memory_order_relaxed);
  if (type >= MAX_SWAPFILES) return -EPERM;
  auto dev = std::make_unique<SwapDevice>(type, nr, kind == SwapKind::kBlkdev);
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
    VM_WARN_ON(si->cache[off], "a free swap slot still has a swap-cache folio");
    si->inuse_pages--;
  }
}

// Drop one reference of each of nr slots; true if any slot is left with only
// its swap-cache folio (__swap_entries_free's "any_only_cache").
bool swap_entries_free(SwapDevice* si, uint64_t off, uint64_t nr) REQUIRES(si->lock) {
  bool only_cache = false;
  for (uint64_t i = off; i < off + nr; i++) {
    uint16_t v = si->swap_map[i];
    VM_WARN_ON(!(v & SWAP_COUNT_MASK), "swap_free of a slot with no references");
    if (!(v & SWAP_COUNT_MASK)) continue;
    si->swap_map[i] = static_cast<uint16_t>(v - 1);
    if (si->swap_map[i] == SWAP_HAS_CACHE) only_cache = true;
    slot_maybe_free(si, i);
  }
  return only_cache;
}

// put_swap_folio for one slot: the swap cache no longer holds it.
void slot_drop_cache(SwapDevice* si, uint64_t off) REQUIRES(si->lock) {
  si->cache[off] = nullptr;
  si->swap_map[off] = static_cast<uint16_t>(si->swap_map[off] & ~SWAP_HAS_CACHE);
  slot_maybe_free(si, off);
}

// folio_swapped(): some slot of the folio still has references besides the
// swap cache (a swap PTE).
bool folio_swapped_locked(SwapDevice* si, uint64_t off, long nr) REQUIRES(si->lock) {
  for (long i = 0; i < nr; i++)
    if (si->swap_map[off + i] & SWAP_COUNT_MASK) return true;
  return false;
}

}  // namespace

int folio_alloc_swap(Folio* folio) {
  VM_WARN_ON_FOLIO(!folio_test_locked(folio), folio, "folio_alloc_swap on an unlocked folio");
  VM_WARN_ON_FOLIO(folio_test_swapcache(folio), folio, "folio_alloc_swap on a swap-cache folio");
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
  VM_WARN_ON_FOLIO(!folio_test_locked(folio), folio, "swap_cache_del_folio on an unlocked folio");
  VM_WARN_ON_FOLIO(!folio_test_swapcache(folio), folio, "swap_cache_del_folio of a folio not in the swap cache");
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
  VM_WARN_ON_FOLIO(!folio_test_locked(folio), folio, "folio_free_swap on an unlocked folio");
  if (!folio_test_swapcache(folio)) return false;
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

namespace {

// swap_read_folio: the slots' bytes into the folio.
void swap_read_folio(Kernel* k, Folio* folio, SwapDevice* si, uint64_t off) {
  PhysMem* phys = k->phys.get();
  const long nr = folio_nr_pages(folio);
  for (long i = 0; i < nr; i++)
    copy_frames(phys, phys->page_address(folio_page(folio, i)), si->data + (off + static_cast<uint64_t>(i)) * PAGE_SIZE,
                PAGE_SIZE);
  k->stats->count(VmStat::pswpin, static_cast<uint64_t>(nr));
  if (folio_test_large(folio)) k->stats->count_mthp(folio_order(folio), MthpStat::swpin);
}

// swap_writeout / __swap_writepage: the folio's bytes into its slots
// (count_swpout_vm_event). The folio is locked, in the swap cache, unmapped.
void swap_writeout(Kernel* k, Folio* folio) {
  swp_entry_t entry = folio_swap_entry(folio);
  SwapDevice* si = swp_swap_info(k, entry);
  PhysMem* phys = k->phys.get();
  const long nr = folio_nr_pages(folio);
  uint8_t* dst = si->data + swp_offset(entry) * PAGE_SIZE;
  for (long i = 0; i < nr; i++)
    copy_frames(phys, dst + static_cast<uint64_t>(i) * PAGE_SIZE, phys->page_address(folio_page(folio, i)), PAGE_SIZE);
  if (folio_order(folio) == PMD_ORDER) k->stats->count(VmStat::thp_swpout);
  k->stats->count_mthp(folio_order(folio), MthpStat::swpout);
  k->stats->count(VmStat::pswpout, static_cast<uint64_t>(nr));
}

}  // namespace

// ============================================================================
// Swap and migration entries in zap and fork (mm/memory.c)
// ============================================================================

// zap_nonpresent_ptes, for a caller without zap_details: swap entries free
// their slots (a batch of consecutive ones at once), migration entries drop
// the rss they stand for, and markers (uffd-wp, guard, poison) are dropped.
unsigned zap_nonpresent_ptes(Vma* vma, pte_t* pte, pte_t ptent, uint64_t addr, unsigned max_nr) {
  Mm* mm = vma->vm_mm;
  swp_entry_t entry = pte_to_swp_entry(ptent);
  unsigned nr = 1;
  if (!non_swap_entry(entry)) {
    nr = swap_pte_batch(pte, max_nr, ptent);
    add_mm_counter(mm, MM_SWAPENTS, -static_cast<long>(nr));
    free_swap_and_cache_nr(mm->kernel, entry, nr);
  } else if (is_migration_entry(entry)) {
    Folio* folio = page_folio(mm->phys->pfn_to_page(swp_offset_pfn(entry)));
    dec_mm_counter(mm, mm_counter(folio));
  }
  for (unsigned i = 0; i < nr; i++) ptep_get_and_clear(mm, addr + i * PAGE_SIZE, pte + i);
  return nr;
}

// copy_nonpresent_pte. Both PTLs are held (destination, then source).
int copy_nonpresent_pte(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, uint64_t addr) {
  Mm* dst_mm = dst_vma->vm_mm;
  Mm* src_mm = src_vma->vm_mm;
  const pte_t orig = ptep_get(src_pte);
  pte_t pte = orig;
  swp_entry_t entry = pte_to_swp_entry(orig);
  if (!non_swap_entry(entry)) {
    if (swap_duplicate(src_mm->kernel, entry) < 0) return -ENOMEM;
    // The swap entry is shared now: neither side may map it exclusive.
    if (pte_swp_exclusive(orig)) {
      pte = pte_swp_clear_exclusive(orig);
      entry_set(src_pte, pte);
    }
    inc_mm_counter(dst_mm, MM_SWAPENTS);
  } else if (is_migration_entry(entry)) {
    Folio* folio = page_folio(src_mm->phys->pfn_to_page(swp_offset_pfn(entry)));
    inc_mm_counter(dst_mm, mm_counter(folio));
    if (!is_readable_migration_entry(entry) && is_cow_mapping(dst_vma->vm_flags)) {
      // Parent and child must both map it read-only; a previously exclusive
      // entry is shared now.
      pte = swp_entry_to_pte(make_migration_entry(SWP_MIGRATION_READ, swp_offset(entry)));
      if (pte_swp_soft_dirty(orig)) pte = pte_swp_mksoft_dirty(pte);
      if (pte_swp_uffd_wp(orig)) pte = pte_swp_mkuffd_wp(pte);
      entry_set(src_pte, pte);
    }
  } else if (is_pte_marker_entry(entry)) {
    // copy_pte_marker: poison and guard markers are inherited; uffd-wp only
    // where the child VMA is registered for it.
    uint64_t marker = swp_offset(entry) & (PTE_MARKER_POISONED | PTE_MARKER_GUARD);
    if ((swp_offset(entry) & PTE_MARKER_UFFD_WP) && (dst_vma->vm_flags & VM_UFFD_WP)) marker |= PTE_MARKER_UFFD_WP;
    if (marker) set_pte_at(dst_mm, addr, dst_pte, swp_entry_to_pte(swp_entry(SWP_PTE_MARKER, marker)));
    return 0;
  }
  if (!(dst_vma->vm_flags & VM_UFFD_WP)) pte = pte_swp_clear_uffd_wp(pte);
  entry_set(dst_pte, pte);
  return 0;
}

// ============================================================================
// Swap-in (do_swap_page, mm/memory.c; __read_swap_cache_async, mm/swap_state.c)
// ============================================================================

namespace {

bool folio_matches_swap_entry(const Folio* folio, swp_entry_t entry) {
  if (!folio_test_swapcache(folio)) return false;
  swp_entry_t first = folio_swap_entry(folio);
  return swp_type(first) == swp_type(entry) && swp_offset(entry) >= swp_offset(first) &&
         swp_offset(entry) < swp_offset(first) + static_cast<uint64_t>(folio_nr_pages(folio));
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
    bool locked = folio_trylock(nf);
    VM_WARN_ON_FOLIO(!locked, nf, "a new folio is locked");
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
      std::this_thread::yield();
      continue;
    }
    swap_read_folio(k, nf, si, off);
    folio_set_uptodate(nf);
    folio_add_lru(nf);
    *fresh = true;
    return nf;
  }
}

// migration_entry_wait: sleep until the thread that replaced the PTE by a
// migration entry (a folio split) unlocks the folio; the fault then retries.
void migration_entry_wait(VmFault* vmf) NO_THREAD_SAFETY_ANALYSIS {
  Mm* mm = vmf->mm();
  SpinLock* ptl;
  pte_t* ptep = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &ptl);
  if (!ptep) return;
  pte_t pte = ptep_get(ptep);
  Folio* folio = nullptr;
  if (is_swap_pte(pte) && is_migration_entry(pte_to_swp_entry(pte))) {
    folio = page_folio(mm->phys->pfn_to_page(swp_offset_pfn(pte_to_swp_entry(pte))));
    if (!folio_ref_try_add(folio, 1)) folio = nullptr;  // frozen: being split right now
  }
  ptl->unlock();
  if (!folio) {
    std::this_thread::yield();
    return;
  }
  // migration_entry_wait_on_locked: wait for the lock bit, without taking it.
  while (folio_test_locked(folio)) std::this_thread::yield();
  folio_put(folio);
}

// pte_marker_clear: drop a marker that no longer means anything.
vm_fault_t pte_marker_clear(VmFault* vmf) NO_THREAD_SAFETY_ANALYSIS {
  Mm* mm = vmf->mm();
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte) return 0;
  if (ptep_get(vmf->pte) == vmf->orig_pte) ptep_get_and_clear(mm, vmf->address, vmf->pte);
  vmf->ptl->unlock();
  return 0;
}

// handle_pte_marker. uffd-wp markers are cleared and the access refaults on
// an empty PTE (userfaultfd itself is not modelled).
vm_fault_t handle_pte_marker(VmFault* vmf, swp_entry_t entry) {
  uint64_t marker = swp_offset(entry);
  if (!marker) return VM_FAULT_SIGBUS;
  if (marker & PTE_MARKER_POISONED) return VM_FAULT_HWPOISON;
  if (marker & PTE_MARKER_GUARD) return VM_FAULT_SIGSEGV;
  if (marker & PTE_MARKER_UFFD_WP) return pte_marker_clear(vmf);
  return VM_FAULT_SIGBUS;
}

bool vma_soft_dirty_enabled(const Vma* vma) { return !(vma->vm_flags & VM_SOFTDIRTY); }
// pte_needs_soft_dirty_wp: soft-dirty tracking wants the next write to fault.
bool pte_needs_soft_dirty_wp(const Vma* vma, pte_t pte) { return vma_soft_dirty_enabled(vma) && !pte_soft_dirty(pte); }
bool userfaultfd_pte_wp(const Vma* vma, pte_t pte) { return (vma->vm_flags & VM_UFFD_WP) && pte_uffd_wp(pte); }

}  // namespace

// Entered without the PTL; vmf->orig_pte is the non-present PTE read locklessly.
vm_fault_t do_swap_page(VmFault* vmf) NO_THREAD_SAFETY_ANALYSIS {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  Kernel* k = mm->kernel;
  swp_entry_t entry = pte_to_swp_entry(vmf->orig_pte);
  if (non_swap_entry(entry)) {
    if (is_migration_entry(entry)) {
      migration_entry_wait(vmf);
      return 0;
    }
    if (is_pte_marker_entry(entry)) return handle_pte_marker(vmf, entry);
    return VM_FAULT_SIGBUS;  // device entries are not modelled: print_bad_pte
  }
  // get_swap_device. (The kernel returns 0 and refaults when swapoff races;
  // without swapoff a bad entry is a corrupt PTE.)
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return VM_FAULT_SIGBUS;
  // A swap PTE implies an anon_vma; keep the invariant folio_add_new_anon_rmap needs.
  if (vm_fault_t ret = vmf_anon_prepare(vmf)) return ret;

  vm_fault_t ret = 0;
  bool fresh = false;
  Folio* folio = read_swap_cache(k, si, entry, &fresh);
  if (!folio) {
    // Back out if somebody else faulted in (or zapped) this PTE meanwhile.
    vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
    if (vmf->pte && ptep_get(vmf->pte) == vmf->orig_pte) ret = VM_FAULT_OOM;
    if (vmf->pte) vmf->ptl->unlock();
    return ret;
  }
  if (fresh) {
    // Had to read the page from the swap area: a major fault.
    ret = VM_FAULT_MAJOR;
    k->stats->count(VmStat::pgmajfault);
  } else {
    folio_lock(folio);  // folio_lock_or_retry: we hold no spinlock here
  }
  // folio_free_swap() or a split may have released the swap cache under us.
  if (!folio_matches_swap_entry(folio, entry)) {
    folio_unlock_swap(folio);
    folio_put(folio);
    return ret;
  }
  Page* page = folio_page(folio, static_cast<long>(swp_offset(entry) - swp_offset(folio_swap_entry(folio))));

  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte || !(ptep_get(vmf->pte) == vmf->orig_pte)) {
    if (vmf->pte) vmf->ptl->unlock();
    // out_nomap: with swap full, a folio nobody's swap PTE needs any more
    // leaves the swap cache now rather than at the next reclaim.
    folio_free_swap(folio);
    folio_unlock_swap(folio);
    folio_put(folio);
    return ret;
  }

  // A large folio still in the swap cache is mapped whole when its swap PTEs
  // are all there, in this page table and VMA.
  long nr_pages = 1, page_idx = 0;
  uint64_t address = vmf->address;
  pte_t* ptep = vmf->pte;
  if (folio_test_large(folio)) {
    const long nr = folio_nr_pages(folio);
    const long idx = folio_page_idx(folio, page);
    const uint64_t folio_start = address - static_cast<uint64_t>(idx) * PAGE_SIZE;
    const uint64_t folio_end = folio_start + static_cast<uint64_t>(nr) * PAGE_SIZE;
    if (folio_start >= std::max(address & PMD_MASK, vma->vm_start) &&
        folio_end <= pmd_addr_end(address, vma->vm_end)) {
      pte_t* folio_ptep = vmf->pte - idx;
      pte_t folio_pte = ptep_get(folio_ptep);
      if (folio_pte == pte_move_swp_offset(vmf->orig_pte, -idx) &&
          swap_pte_batch(folio_ptep, static_cast<unsigned>(nr), folio_pte) == static_cast<unsigned>(nr)) {
        page_idx = idx;
        address = folio_start;
        ptep = folio_ptep;
        nr_pages = nr;
        entry = folio_swap_entry(folio);
        page = &folio->page;
      }
    }
  }

  // A swap PTE never points at an AnonExclusive swap-cache page.
  VM_WARN_ON_FOLIO(folio_test_anon(folio) && PageAnonExclusive(page), folio, "swap PTE of an AnonExclusive page");
  // Checked under the PTL against a concurrent fork() sharing the entry.
  const bool exclusive = pte_swp_exclusive(vmf->orig_pte);

  // Drop the swap PTEs' slot references; with swap full, should_try_to_free_swap()
  // is always true, so the swap cache goes once no other swap PTE needs it.
  swap_free_nr(k, entry, static_cast<unsigned>(nr_pages));
  folio_free_swap(folio);

  add_mm_counter(mm, MM_ANONPAGES, nr_pages);
  add_mm_counter(mm, MM_SWAPENTS, -nr_pages);
  pte_t pte = pfn_pte(page_to_pfn(page), vma->vm_page_prot);
  if (pte_swp_soft_dirty(vmf->orig_pte)) pte = pte_mksoft_dirty(pte);
  if (pte_swp_uffd_wp(vmf->orig_pte)) pte = pte_mkuffd_wp(pte);

  // As do_wp_page(), but certainly unshared when the swap PTE said so or
  // nobody else holds the folio: map it writable at once where allowed.
  rmap_t rmap_flags = RMAP_NONE;
  if (exclusive || folio_ref_count(folio) == 1) {
    if ((vma->vm_flags & VM_WRITE) && !userfaultfd_pte_wp(vma, pte) && !pte_needs_soft_dirty_wp(vma, pte)) {
      pte = pte_mkwrite_novma(pte);
      if (vmf->flags & FAULT_FLAG_WRITE) {
        pte = pte_mkdirty(pte);
        vmf->flags &= ~FAULT_FLAG_WRITE;
      }
    }
    rmap_flags |= RMAP_EXCLUSIVE;
  }
  // The swap-cache lookup's reference becomes the mapping's.
  folio_ref_add(folio, static_cast<int>(nr_pages) - 1);
  vmf->orig_pte = pte_t{pte.v + static_cast<uint64_t>(page_idx) * PAGE_SIZE};
  if (!folio_test_anon(folio)) {
    folio_add_new_anon_rmap(folio, vma, address, rmap_flags, RmapLevel::kPte);
  } else {
    folio_add_anon_rmap_ptes(folio, page, static_cast<int>(nr_pages), vma, address, rmap_flags);
  }
  VM_WARN_ON_FOLIO(pte_write(pte) && !PageAnonExclusive(page), folio, "swap-in mapped a shared page writable");
  set_ptes(mm, address, ptep, pte, static_cast<unsigned>(nr_pages));
  folio_unlock_swap(folio);  // only trylocks: fine under the PTL

  if (vmf->flags & FAULT_FLAG_WRITE) {
    // A write to a page that may be shared: reuse or copy, with the PTL held.
    ret |= do_wp_page(vmf);
    if (ret & VM_FAULT_ERROR) ret &= VM_FAULT_ERROR;
    return ret;
  }
  vmf->ptl->unlock();
  return ret;
}

// ============================================================================
// MADV_COLD and MADV_PAGEOUT: deactivate or isolate, then reclaim
// (mm/madvise.c, mm/swap.c, mm/vmscan.c, mm/rmap.c)
// ============================================================================

namespace {

// One present PTE of a swap-backed folio (locked, in the swap cache)
// becomes a swap entry. false: the page must stay mapped (no swap count, or
// maybe pinned).
bool try_to_unmap_swap_pte(Folio* folio, PageVmaMappedWalk* pvmw, PteUnmapBatch* batch) {
  Mm* mm = pvmw->vma->vm_mm;
  Kernel* k = mm->kernel;
  pte_t* pte = pvmw->pte;
  const pfn_t pfn = pte_pfn(ptep_get(pte));
  Page* subpage = mm->phys->pfn_to_page(pfn);
  const bool anon_exclusive = PageAnonExclusive(subpage);
  // Clear first (see folio_try_share_anon_rmap_pte); the TLB flush is batched.
  pte_t pteval = entry_xchg(pte, pte_t{0});
  batch->cleared();
  if (pte_dirty(pteval)) folio_set_dirty(folio);
  const swp_entry_t entry{folio_swap_entry(folio).val + (pfn - folio_pfn(folio))};
  if (swap_duplicate(k, entry) < 0) {
    entry_set(pte, pteval);
    return false;
  }
  if (anon_exclusive && folio_try_share_anon_rmap_pte(folio, subpage)) {
    // Maybe pinned: the page must stay mapped.
    swap_free_nr(k, entry, 1);
    entry_set(pte, pteval);
    return false;
  }
  dec_mm_counter(mm, MM_ANONPAGES);
  inc_mm_counter(mm, MM_SWAPENTS);
  pte_t swp_pte = swp_entry_to_pte(entry);
  if (anon_exclusive) swp_pte = pte_swp_mkexclusive(swp_pte);
  batch->set_swp_pte(pte, pteval, swp_pte, subpage);
  return true;
}

// folio_unmap_pte_batch: a lazy-free large folio is unmapped a run of PTEs
// at a time, within one page table and VMA; everything else one by one.
unsigned folio_unmap_pte_batch(Folio* folio, const PageVmaMappedWalk* pvmw, pte_t pte) {
  if (!folio_test_large(folio)) return 1;
  if (!folio_test_anon(folio) || folio_test_swapbacked(folio)) return 1;
  const uint64_t end_addr = pmd_addr_end(pvmw->address, pvmw->vma->vm_end);
  return folio_pte_batch(folio, pvmw->pte, pte, static_cast<unsigned>((end_addr - pvmw->address) >> PAGE_SHIFT));
}

// try_to_unmap_one's MADV_FREE check for the run of PTEs at pvmw->pte of a
// lazy-free folio: a clean folio nobody else holds is discarded (its PTEs
// stay none, so the next access faults in a zeroed page); one redirtied
// through a PTE or a GUP reference is swap-backed again and keeps its PTEs;
// one with another reference keeps them too and stays lazy-free. false
// stops the walk (walk_abort).
bool try_to_unmap_lazyfree_ptes(Folio* folio, PageVmaMappedWalk* pvmw, PteUnmapBatch* batch) {
  Mm* mm = pvmw->vma->vm_mm;
  const pte_t first = ptep_get(pvmw->pte);
  Page* subpage = mm->phys->pfn_to_page(pte_pfn(first));
  const unsigned nr = folio_unmap_pte_batch(folio, pvmw, first);
  pte_t pteval = get_and_clear_full_ptes(mm, pvmw->address, pvmw->pte, nr);
  batch->cleared();
  if (pte_dirty(pteval)) folio_set_dirty(folio);  // folio_mark_dirty
  // Synchronize with GUP-fast: clear the PTEs, then read the refcount; it
  // takes its reference, then reads the PTE again.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const int ref_count = folio_ref_count(folio);
  const int map_count = folio_mapcount(folio);
  if (folio_test_dirty(folio)) {
    set_ptes(mm, pvmw->address, pvmw->pte, pteval, nr);
    folio_set_swapbacked(folio);
    return false;
  }
  // The cleared PTEs still count in both (their rmap goes at the table's
  // end), so only the isolation's reference may be left over.
  if (ref_count != 1 + map_count) {
    set_ptes(mm, pvmw->address, pvmw->pte, pteval, nr);
    return false;
  }
  add_mm_counter(mm, MM_ANONPAGES, -static_cast<long>(nr));
  batch->discarded(subpage, nr);
  return true;
}

// try_to_unmap_one(TTU_SPLIT_HUGE_PMD | TTU_BATCH_FLUSH) on one VMA: every
// PTE of vma mapping a page of the folio becomes a swap entry, or, for a
// lazy-free folio, is discarded. A PMD mapping is split first, except that
// of a lazy-free folio, which is discarded or kept whole. An mlocked VMA
// keeps its pages. false stops the rmap walk: a page could not be unmapped.
bool try_to_unmap_one(Folio* folio, Vma* vma) {
  return try_to_unmap_vma(
      folio, vma, 0,
      [folio](PageVmaMappedWalk* w, PteUnmapBatch* b) {
        VM_WARN_ON_FOLIO(folio_test_swapbacked(folio) != folio_test_swapcache(folio), folio,
                         "unmapping an anonymous folio that is swap-backed but not in the swap cache");
        if (!folio_test_swapbacked(folio)) return try_to_unmap_lazyfree_ptes(folio, w, b);
        return try_to_unmap_swap_pte(folio, w, b);
      },
      [folio, vma](PageVmaMappedWalk* w) {
        if (folio_test_swapbacked(folio)) return PmdLeafAction::kSplit;
        switch (unmap_huge_pmd_locked(vma, w->address, w->pmd, folio)) {
          case PmdDiscard::kDiscarded:
            return PmdLeafAction::kDone;
          case PmdDiscard::kKept:
            return PmdLeafAction::kAbort;
          case PmdDiscard::kNotLeaf:
            break;
        }
        return PmdLeafAction::kLookAtPtes;
      });
}

// try_to_unmap: the rmap walk over the folio's anon_vma (read-locked).
void try_to_unmap(Folio* folio) {
  rmap_walk(folio, {.rmap_one = [folio](Vma* vma) { return try_to_unmap_one(folio, vma); },
                    .done = [folio] { return !folio_mapped(folio); }});
}

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
    int expected = 1 + static_cast<int>(nr);
    if (folio_test_dirty(folio) ||
        !aref(folio->page.refcount).compare_exchange_strong(expected, 1, std::memory_order_acq_rel))
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

// shrink_folio_list() for one locked folio.
Reclaim reclaim_folio(Kernel* k, Folio* folio, std::vector<Folio*>* list) {
  // Page-cache folios are not reclaimed by the model (the walk does not
  // isolate them for MADV_PAGEOUT).
  if (!folio_test_anon(folio)) return Reclaim::kKeep;
  // Anonymous memory needs backing store; a lazy-free folio is discarded
  // instead and needs none.
  if (folio_test_swapbacked(folio) && !folio_test_swapcache(folio)) {
    if (std::optional<Reclaim> r = add_to_swap(k, folio, list)) return *r;
  }
  if (folio_mapped(folio)) {
    try_to_unmap(folio);
    if (folio_mapped(folio)) return Reclaim::kActivate;
  }
  // Unmapped, so it cannot be newly pinned; a pinned folio is not freed.
  if (folio_maybe_dma_pinned(folio)) return Reclaim::kActivate;
  if (folio_test_dirty(folio)) {
    // A lazy-free folio sits on the file LRU, where a dirty folio waits
    // for writeback instead.
    if (!folio_test_swapbacked(folio)) return Reclaim::kActivate;
    // pageout(): is_page_cache_freeable - nobody but the isolation and the
    // swap cache may hold the folio, or it is kept. (In the model this is
    // also what try_to_unmap_flush_dirty() guarantees in the kernel: a CPU
    // still storing through the translation it had before the unmap holds a
    // reference on the folio until its store is done.)
    if (folio_ref_count(folio) != 1 + static_cast<int>(folio_nr_pages(folio))) return Reclaim::kKeep;
    // folio_clear_dirty_for_io, then the write completes at once.
    folio_clear_dirty(folio);
    swap_writeout(k, folio);
  }
  if (!folio_test_swapbacked(folio)) {
    // folio_test_lazyfree: unmapped and clean; freed if only the isolation
    // holds it (folio_ref_freeze(folio, 1)). Nothing can find it to take a
    // new reference: it is in no page table and no cache.
    if (folio_ref_count(folio) != 1) return Reclaim::kKeep;
    k->stats->count(VmStat::pglazyfreed, static_cast<uint64_t>(folio_nr_pages(folio)));
    return Reclaim::kFreed;
  }
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

// The end of madvise_cold_or_pageout_pte_range for one folio: clear the
// reference bits (page-idle tracking's PG_young is not modelled), then
// deactivate it (MADV_COLD) or isolate it for reclaim (MADV_PAGEOUT).
void cold_or_pageout_folio(Folio* folio, ColdOrPageout what, std::vector<Folio*>* list) {
  folio_clear_referenced(folio);
  if (folio_test_active(folio)) folio_set_workingset(folio);
  if (what == ColdOrPageout::kCold) {
    folio_deactivate(folio);
    return;
  }
  if (!folio_isolate_lru(folio)) return;
  if (folio_test_unevictable(folio)) {
    folio_putback_lru(folio);
    return;
  }
  list->push_back(folio);
}

// A folio the walk leaves alone: MADV_PAGEOUT reclaims anonymous folios
// only (file reclaim is not modelled); MADV_COLD deactivates any folio.
bool skip_folio(const Folio* folio, ColdOrPageout what) {
  return what == ColdOrPageout::kPageout && !folio_test_anon(folio);
}

// The PMD-leaf part of madvise_cold_or_pageout_pte_range. true: done with
// this PMD; false: look at the PTEs (the leaf was split, or is gone).
bool cold_or_pageout_pmd(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t end, ColdOrPageout what,
                         std::vector<Folio*>* list) NO_THREAD_SAFETY_ANALYSIS {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl = pmd_lock(mm, pmd);
  pmd_t orig = pmdp_get(pmd);
  if (!pmd_trans_huge(orig)) {
    ptl->unlock();
    return pmd_none(orig);
  }
  Page* page = vm_normal_page_pmd(vma, addr, orig);
  Folio* folio = page ? page_folio(page) : nullptr;  // nullptr: the huge zero folio
  // Do not interfere with other mappings of this folio.
  if (!folio || folio_maybe_mapped_shared(folio) || skip_folio(folio, what)) {
    ptl->unlock();
    return true;
  }
  if (end - addr != PMD_SIZE) {
    // Only part of the THP is advised: split it, then work on the pages.
    folio_get(folio);
    ptl->unlock();
    folio_lock(folio);
    int err = split_folio(folio);
    folio_unlock_swap(folio);
    folio_put(folio);
    return err != 0;
  }
  if (what == ColdOrPageout::kCold && pmd_young(orig)) {
    // pmdp_invalidate, then the entry comes back old.
    pmd_t old = entry_xchg(pmd, pmd_mkinvalid(orig));
    flush_tlb_range(vma, addr, addr + PMD_SIZE);
    entry_set(pmd, pmd_mkold(old));
  }
  cold_or_pageout_folio(folio, what, list);
  ptl->unlock();
  return true;
}

// madvise_cold_or_pageout_pte_range for [addr, end) inside one PMD.
void cold_or_pageout_pmd_range(Vma* vma, uint64_t addr, uint64_t end, ColdOrPageout what,
                               std::vector<Folio*>* list) {
  Mm* mm = vma->vm_mm;
  pmd_t* pmd = mm_find_pmd(mm, addr);
  if (!pmd) return;
  if (pmd_trans_huge(pmdp_get(pmd)) && cold_or_pageout_pmd(vma, pmd, addr, end, what, list)) return;
  MadvisePteWalk w(vma, pmd, addr, end);
  if (!w.lock(addr)) return;
  unsigned nr;
  for (; addr < end; w.advance(nr), addr += nr * PAGE_SIZE) {
    nr = 1;
    pte_t ptent = ptep_get(w.pte());
    if (pte_none(ptent) || !pte_present(ptent)) continue;
    Page* page = vm_normal_page(vma, addr, ptent);
    if (!page) continue;
    Folio* folio = page_folio(page);
    if (skip_folio(folio, what)) continue;
    if (folio_test_large(folio)) {
      // Split a large folio only if it is not entirely mapped inside the
      // range; otherwise it is deactivated or reclaimed whole.
      MadvisePteWalk::LargeFolio step = w.large_folio(folio, addr, &ptent, &nr);
      if (step == MadvisePteWalk::LargeFolio::kStop) break;
      if (step == MadvisePteWalk::LargeFolio::kNext) continue;
    }
    // Other mappings of this folio, and folios off the LRU, are left alone.
    // A large folio here is mapped entirely by this range, so mapcount ==
    // nr_pages means nobody else maps it.
    if (!folio_test_lru(folio) || folio_mapcount(folio) != folio_nr_pages(folio)) continue;
    if (what == ColdOrPageout::kCold && pte_young(ptent)) {
      clear_young_dirty_ptes(mm, addr, w.pte(), nr, CYDP_CLEAR_YOUNG);
      w.owe_flush();  // tlb_remove_tlb_entries
    }
    cold_or_pageout_folio(folio, what, list);
  }
}

}  // namespace

// madvise_cold / madvise_pageout for [start, end) of vma (mmap_lock held
// for read), after can_madv_lru_vma().
void madvise_cold_or_pageout_range(Vma* vma, uint64_t start, uint64_t end, ColdOrPageout what) {
  Kernel* k = vma->vm_mm->kernel;
  // Shared mappings hold page cache or shmem, which the model does not
  // reclaim; MADV_COLD still deactivates their folios.
  if (what == ColdOrPageout::kPageout && (vma->vm_flags & (VM_SHARED | VM_MAYSHARE))) return;
  end = std::min(end, vma->vm_end);
  for (uint64_t addr = std::max(start, vma->vm_start), next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    std::vector<Folio*> list;
    cold_or_pageout_pmd_range(vma, addr, next, what, &list);
    shrink_folio_list(k, &list);  // reclaim_pages(); empty for MADV_COLD
  }
}

}  // namespace mmlab
