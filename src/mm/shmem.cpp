// mm/shmem.c: the shmem file behind shared anonymous memory, shmem's
// reclaim to swap and its swap-in (shmem_writeout, shmem_swapin_folio), and
// its truncation and hole punching (shmem_setattr, shmem_fallocate,
// shmem_undo_range). The rest of shmem (its page cache, reads and writes)
// shares the code of mm/filemap.cpp, which says where shmem differs; the
// generic page-cache truncation of the ext4 class is in mm/truncate.cpp.
//
// Swapped-out shmem is held by the file, not by page tables: the PTEs of
// every mapping were cleared before the write (try_to_unmap), and the file
// keeps the swap entry where the folio was (File::swapped, the kernel's
// xarray value entry), holding one swap count. The next fault on any mapping
// finds the entry and reads the page back (shmem_swapin_folio: a major
// fault when the folio had left the swap cache).
//
// Large shmem folios (shmem THP): a fault allocates one where the THP
// controls allow (shmem_alloc_and_add_large_folio), khugepaged and
// MADV_COLLAPSE make PMD-order ones; a truncation or hole splits one that
// straddles its edge. Reclaim swaps one out whole where the device gives it
// contiguous slots (a block device), else splits it (a swap file, a folio
// across i_size); touched again while still in the swap cache it comes back
// whole, read back from the device it comes back page by page.
//
// A tmpfs mounted noswap and a SysV segment under SHM_LOCK (mm/shm.cpp)
// make their files' mappings unevictable: reclaim puts their folios back,
// onto the unevictable LRU, before it unmaps anything (folio_evictable in
// shrink_folio_list), and shmem_writeout() refuses them too.
//
// Not modelled: shmem's mTHP swap-in from a
// SWP_SYNCHRONOUS_IO device (shmem_swap_alloc_folio: the model reads order
// 0); the shmem_falloc wait of a fault racing a hole punch (a fault during the
// punch fills the hole again, which the kernel only makes unlikely).
#include <algorithm>
#include <memory>
#include <vector>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/settings.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"

namespace mmlab {

std::shared_ptr<File> shmem_zero_setup(Kernel* k, uint64_t len) {
  // shmem_kernel_file_setup("dev/zero", size): an unlinked shmem file of the
  // mapping's size whose pages appear on first fault.
  auto f = std::make_shared<File>();
  f->kernel = k;
  f->cid = k->next_cid.fetch_add(1, std::memory_order_relaxed);
  f->fs = FsClass::kShmem;
  f->anon_shared = true;
  f->name = "dev/zero";
  f->size = len;
  return f;
}

// ---- THP policy (shmem_enabled and the per-size shmem_enabled) ----

namespace {

// shmem_get_orders_within_size: of `orders`, those whose naturally aligned
// block holding `index` ends inside i_size, or inside write_end where a
// write or fallocate is about to extend the file that far.
uint64_t shmem_get_orders_within_size(const File* f, uint64_t orders, uint64_t index, uint64_t write_end = 0) {
  const uint64_t pages = round_up(std::max(write_end, i_size_read(f)), PAGE_SIZE) >> PAGE_SHIFT;
  uint64_t ok = 0;
  for (unsigned order = 1; order <= PMD_ORDER; order++)
    if ((orders & BIT(order)) && round_up(index + 1, 1ull << order) <= pages) ok |= BIT(order);
  return ok;
}

// shmem_huge_global_enabled: what the mount's huge= (here always the
// internal mount's) allows. deny wins over everything, then force and
// MADV_COLLAPSE (shmem_huge_force) get the PMD order.
uint64_t shmem_huge_global_enabled(const File* f, uint64_t index, bool shmem_huge_force, vm_flags_t vm_flags,
                                   uint64_t write_end = 0) {
  const Settings& s = f->kernel->settings;
  const ShmemHuge huge = s.shmem_huge.load(std::memory_order_relaxed);
  if (huge == ShmemHuge::kDeny) return 0;
  if (shmem_huge_force || huge == ShmemHuge::kForce) return BIT(PMD_ORDER);
  const ShmemHuge mount_huge =
      f->tmpfs ? static_cast<ShmemHuge>(f->tmpfs_huge) : s.shm_mnt_huge.load(std::memory_order_relaxed);
  switch (mount_huge) {
    case ShmemHuge::kAlways:
      return THP_ORDERS_ALL_FILE_DEFAULT;
    case ShmemHuge::kWithinSize:
      if (uint64_t within = shmem_get_orders_within_size(f, THP_ORDERS_ALL_FILE_DEFAULT, index, write_end))
        return within;
      [[fallthrough]];
    case ShmemHuge::kAdvise:
      if (vm_flags & VM_HUGEPAGE) return THP_ORDERS_ALL_FILE_DEFAULT;
      return 0;
    default:
      return 0;
  }
}

}  // namespace

// shmem_mmap_prepare's choice of shmem_anon_vm_ops: the inode has no link
// (i_nlink 0): a memfd, or the file behind shared anonymous memory; a
// `file ... huge=` is a linked file on a tmpfs mount.
bool shmem_file_unlinked(const File* f) { return file_is_shmem(f) && !f->tmpfs; }

uint64_t shmem_allowable_huge_orders(const File* f, const Vma* vma, uint64_t index, bool shmem_huge_force,
                                     uint64_t write_end) {
  const Settings& s = f->kernel->settings;
  const vm_flags_t vm_flags = vma ? vma->vm_flags : 0;
  const uint64_t global_orders = shmem_huge_global_enabled(f, index, shmem_huge_force, vm_flags, write_end);
  // A tmpfs file gets what huge= allows; the per-size controls govern
  // "anonymous" shmem (vma_is_anon_shmem: shmem_anon_vm_ops), which v6.18
  // gives to shared anonymous memory and to every unlinked shmem file, so
  // to a memfd too. The model's shmem files are all unlinked (no tmpfs).
  if (!vma || !shmem_file_unlinked(f)) return global_orders;
  const ShmemHuge huge = s.shmem_huge.load(std::memory_order_relaxed);
  if (huge == ShmemHuge::kDeny) return 0;
  if (huge == ShmemHuge::kForce) return s.huge_shmem_orders_inherit.load(std::memory_order_relaxed);
  uint64_t mask = s.huge_shmem_orders_always.load(std::memory_order_relaxed);
  mask |= shmem_get_orders_within_size(f, s.huge_shmem_orders_within_size.load(std::memory_order_relaxed), index);
  if (vm_flags & VM_HUGEPAGE) mask |= s.huge_shmem_orders_madvise.load(std::memory_order_relaxed);
  if (global_orders) mask |= s.huge_shmem_orders_inherit.load(std::memory_order_relaxed);
  return THP_ORDERS_ALL_FILE_DEFAULT & mask;
}

namespace {

// Does the naturally aligned block of 2^order pages around the fault fit
// the VMA, file offset and address aligned alike (thp_vma_suitable_order)?
bool shmem_order_fits_vma(const Vma* vma, uint64_t addr, unsigned order) {
  const uint64_t nr = 1ull << order;
  if ((((vma->vm_start >> PAGE_SHIFT) - vma->vm_pgoff) & (nr - 1)) != 0) return false;
  const uint64_t haddr = addr & ~((PAGE_SIZE << order) - 1);
  return haddr >= vma->vm_start && haddr + (PAGE_SIZE << order) <= vma->vm_end;
}

}  // namespace

void shmem_shrinklist_add(File* f) {
  FileTable* t = f->kernel->files.get();
  MutexGuard g(&t->shrinklist_lock);
  if (f->on_shrinklist.exchange(true)) return;
  t->shrinklist.push_back(f->weak_from_this());
}

uint64_t shmem_fallocend(const File* f, uint64_t end) { return std::max(end, f->fallocend); }

long shmem_unused_huge_shrink(Kernel* k) {
  FileTable* t = k->files.get();
  std::vector<std::shared_ptr<File>> list;
  {
    MutexGuard g(&t->shrinklist_lock);
    for (auto& w : t->shrinklist)
      if (auto f = w.lock()) list.push_back(std::move(f));
    t->shrinklist.clear();
  }
  long split = 0;
  std::vector<std::shared_ptr<File>> back;  // to try again later (move_back)
  for (auto& f : list) {
    f->on_shrinklist.store(false);
    const uint64_t i_size = i_size_read(f.get());
    Folio* folio = nullptr;
    {
      MutexGuard g(&f->lock);
      uint64_t s;
      folio = lookup_locked(f.get(), i_size >> PAGE_SHIFT, &s);
      if (folio) folio_get(folio);
    }
    if (!folio) continue;  // drop: nothing there
    // Anything to gain? The folio must reach past the end (and past what
    // fallocate kept) but start before it.
    const uint64_t next = folio->page.index + static_cast<uint64_t>(folio_nr_pages(folio));
    const uint64_t end = shmem_fallocend(f.get(), (i_size + PAGE_SIZE - 1) >> PAGE_SHIFT);
    if (!folio_test_large(folio) || end <= folio->page.index || end >= next) {
      folio_put(folio);
      continue;
    }
    if (!folio_trylock(folio)) {
      folio_put(folio);
      back.push_back(f);
      continue;
    }
    const int r = split_folio(folio);
    folio_unlock(folio);
    folio_put(folio);
    if (r) {
      back.push_back(f);
      continue;
    }
    split++;
  }
  for (auto& f : back) shmem_shrinklist_add(f.get());
  return split;
}

Folio* shmem_alloc_and_add_large_folio(File* f, const Vma* vma, uint64_t addr, uint64_t index, uint64_t* start,
                                       uint64_t write_end) {
  Kernel* k = f->kernel;
  if (vma && vma_thp_disabled(vma, vma->vm_flags, /*forced_collapse=*/false)) return nullptr;
  uint64_t orders = shmem_allowable_huge_orders(f, vma, index, false, write_end) & THP_ORDERS_ALL_FILE_DEFAULT;
  while (orders) {
    const unsigned order = 63 - static_cast<unsigned>(__builtin_clzll(orders));
    orders &= ~BIT(order);
    // Without a VMA (fallocate) the block need only be free in the cache:
    // it may reach past i_size (huge=always: the fallocate of a 1M file
    // makes one PMD-order folio).
    if (vma && !shmem_order_fits_vma(vma, addr, order)) continue;
    const uint64_t nr = 1ull << order, first = index & ~(nr - 1);
    {
      // shmem_suitable_orders: the block must hold no page and no swap entry.
      MutexGuard g(&f->lock);
      uint64_t s;
      bool busy = false;
      for (uint64_t i = first; i < first + nr && !busy; i++) busy = lookup_locked(f, i, &s) != nullptr;
      auto sw = f->swapped.lower_bound(first);
      if (busy || (sw != f->swapped.end() && sw->first < first + nr)) continue;
    }
    Folio* folio = k->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, order);
    if (!folio) {
      if (order == PMD_ORDER) k->stats->count(VmStat::thp_file_fallback);
      k->stats->count_mthp(order, MthpStat::shmem_fallback);
      continue;
    }
    PhysMem* phys = k->phys.get();
    zero_folio_frames(phys, static_cast<uint8_t*>(phys->page_address(&folio->page)), static_cast<long>(nr), -1);
    folio_set_swapbacked(folio);
    folio_set_uptodate(folio);
    bool added = false;
    {
      MutexGuard g(&f->lock);
      uint64_t s;
      bool busy = false;
      for (uint64_t i = first; i < first + nr && !busy; i++) busy = lookup_locked(f, i, &s) != nullptr;
      auto sw = f->swapped.lower_bound(first);
      if (!busy && (sw == f->swapped.end() || sw->first >= first + nr)) {
        aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
        folio->page.index = first;
        folio_ref_add(folio, static_cast<int>(nr));  // the page cache's
        folio_add_lru(folio);
        f->pages.emplace(first, folio);
        added = true;
      }
    }
    if (!added) {
      folio_put(folio);  // filled meanwhile: try a smaller order
      continue;
    }
    MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), first, order);
    // Part of a PMD-mappable folio lies past i_size: the superblock's
    // shrinker may split it under memory pressure (shmem_get_folio_gfp).
    if (order == PMD_ORDER && file_end_index(f) < first + nr) shmem_shrinklist_add(f);
    if (order == PMD_ORDER) k->stats->count(VmStat::thp_file_alloc);
    k->stats->count_mthp(order, MthpStat::shmem_alloc);
    *start = first;
    return folio;
  }
  return nullptr;
}

// shmem_hpage_pmd_enabled: whether some shmem control allows the PMD order
// (one of the reasons the khugepaged thread runs).
bool shmem_hpage_pmd_enabled(const Settings& s) {
  const ShmemHuge huge = s.shmem_huge.load(std::memory_order_relaxed);
  if (huge == ShmemHuge::kDeny) return false;
  const uint64_t pmd = BIT(PMD_ORDER);
  if ((s.huge_shmem_orders_always.load() | s.huge_shmem_orders_madvise.load() |
       s.huge_shmem_orders_within_size.load()) & pmd)
    return true;
  return (s.huge_shmem_orders_inherit.load() & pmd) && huge != ShmemHuge::kNever;
}

// ---- reclaim ----

namespace {

// The large swap entry that covers index, if any, is no longer whole
// (shmem_split_large_entry, in effect): its pages become order-0 entries.
void shmem_drop_large_entry(File* f, uint64_t index) REQUIRES(f->lock) {
  auto it = f->swapped_order.upper_bound(index);
  if (it == f->swapped_order.begin()) return;
  --it;
  if (index < it->first + (uint64_t{1} << it->second)) f->swapped_order.erase(it);
}

// shmem_delete_from_page_cache: the folio leaves the page cache and the
// swap entry takes its index; the cache's references go.
void shmem_delete_from_page_cache(File* f, Folio* folio, swp_entry_t entry) {
  const uint64_t index = folio->page.index;
  {
    MutexGuard g(&f->lock);
    f->pages.erase(index);
    // One swap entry per page: a large folio's pages take consecutive slots.
    for (long i = 0; i < folio_nr_pages(folio); i++)
      f->swapped[index + static_cast<uint64_t>(i)] = swp_entry_t{entry.val + static_cast<uint64_t>(i)};
    if (folio_test_large(folio)) f->swapped_order[index] = folio_order(folio);
    aref(folio->page.mapping).store(0, std::memory_order_release);
  }
  MM_TRACE("mm_filemap_delete_from_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index,
           folio_order(folio));
  folio_put_refs(folio, static_cast<int>(folio_nr_pages(folio)));  // never the last: reclaim isolated it
}

}  // namespace

namespace {

// total_swap_pages != 0: some swap device is on (the model has no swapoff).
bool shmem_total_swap_pages(Kernel* k) { return k->swap->nr_swapfiles.load(std::memory_order_acquire) != 0; }

}  // namespace

int shmem_writeout(Folio* folio, std::vector<Folio*>* list) {
  VM_BUG_ON_FOLIO(!folio_test_locked(folio), folio, "shmem_writeout on an unlocked folio");
  VM_BUG_ON_FOLIO(folio_mapped(folio), folio, "shmem_writeout of a mapped folio");
  auto* f = reinterpret_cast<File*>(aref(folio->page.mapping).load(std::memory_order_acquire));
  Kernel* k = f->kernel;
  // A noswap mount's file (or an SHM_LOCK'd segment): redirtied
  // and kept. Reclaim stops such a folio earlier (folio_evictable); this
  // is the writeout's own refusal, as the kernel's. Without any swap device
  // (total_swap_pages 0) a large folio is kept whole, not split.
  auto redirty = [&] {
    folio_set_dirty(folio);  // AOP_WRITEPAGE_ACTIVATE
    return -ENOMEM;
  };
  if (f->unevictable || !shmem_total_swap_pages(k)) return redirty();
  // Truncation frees swap entries page by page but does not split a large
  // one, so a large folio that crosses i_size is split before it goes
  // (fallocate's preallocation beyond EOF, which would extend the limit, is
  // not modelled). THP_SWAP is on (x86-64).
  bool split = false;
  if (folio_test_large(folio)) {
    const uint64_t end = file_end_index(f);
    split = end > folio->page.index && end < folio->page.index + static_cast<uint64_t>(folio_nr_pages(folio));
  }
  for (;;) {
    if (split) {
      // The pages must stay dirty through the split (the caller cleared
      // the folio's bit for the write): set it, split, clear the first's.
      folio_set_dirty(folio);
      if (split_folio_to_list(folio, list)) return redirty();
      folio_clear_dirty(folio);
    }
    if (!folio_alloc_swap(folio)) break;
    // No room for it whole (a swap file never gives a large folio its
    // slots): split it and try again with its first page. No
    // thp_swpout_fallback or mTHP swpout_fallback: only add_to_swap()
    // counts those.
    if (!folio_test_large(folio)) return redirty();
    split = true;
  }
  const swp_entry_t entry = folio_swap_entry(folio);
  // The file's own reference to each slot (swap_duplicate_nr in v6.18).
  for (long i = 0; i < folio_nr_pages(folio); i++) {
    const int dup = swap_duplicate(k, swp_entry_t{entry.val + static_cast<uint64_t>(i)});
    VM_WARN_ON_ONCE_FOLIO(dup != 0, folio, "shmem_writeout: a new swap slot refused a reference");
  }
  shmem_delete_from_page_cache(f, folio, entry);
  swap_writeout(k, folio);
  return 0;
}

// ---- swap-in ----

namespace {

// A page of a large swap-cache folio whose file no longer holds every entry
// of the folio (a truncation or hole punch took some while it waited in the
// swap cache): the page alone goes back, copied into an order-0 folio, and
// the large folio stays in the swap cache for its other entries. The kernel
// splits its large swap entries instead (shmem_split_large_entry); the model
// keeps one entry per page, so only the folio is too large. nullptr if no
// memory (the caller retries).
Folio* shmem_swapin_copy_page(File* f, Folio* large, uint64_t index, swp_entry_t entry) {
  Kernel* k = f->kernel;
  PhysMem* phys = k->phys.get();
  Folio* nf = phys->folio_alloc(GFP_HIGHUSER_MOVABLE, 0);
  if (!nf) return nullptr;
  const long off = static_cast<long>(entry.val - folio_swap_entry(large).val);
  copy_frames(phys, phys->page_address(&nf->page), phys->page_address(folio_page(large, off)), PAGE_SIZE);
  __folio_set_locked(nf);
  folio_set_swapbacked(nf);
  folio_set_uptodate(nf);
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.find(index);
    if (it == f->swapped.end() || it->second.val != entry.val) {
      folio_unlock(nf);
      folio_put(nf);
      return nullptr;
    }
    shmem_drop_large_entry(f, index);
    f->swapped.erase(it);
    nf->page.index = index;
    aref(nf->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
    folio_ref_add(nf, 1);
    f->pages.emplace(index, nf);
  }
  folio_set_dirty(nf);
  folio_add_lru(nf);
  swap_free_nr(k, entry, 1);
  return nf;
}

}  // namespace

namespace {

// The large swap entry that holds index, whole: its first index and order
// (false if index has an order-0 entry). A record whose pages no longer
// hold consecutive slots is stale and dropped.
bool shmem_large_entry(File* f, uint64_t index, uint64_t* base, unsigned* order) REQUIRES(f->lock) {
  auto it = f->swapped_order.upper_bound(index);
  if (it == f->swapped_order.begin()) return false;
  --it;
  const uint64_t nr = uint64_t{1} << it->second;
  if (index >= it->first + nr) return false;
  auto first = f->swapped.find(it->first);
  bool whole = first != f->swapped.end();
  for (uint64_t i = 1; whole && i < nr; i++) {
    auto e = f->swapped.find(it->first + i);
    whole = e != f->swapped.end() && e->second.val == first->second.val + i;
  }
  if (!whole) {
    f->swapped_order.erase(it);
    return false;
  }
  *base = it->first;
  *order = it->second;
  return true;
}

// shmem_swap_alloc_folio for a large swap entry of a SWP_SYNCHRONOUS_IO
// device (zram): the whole entry is read into a new folio of its order,
// never added to the swap cache (SWAP_HAS_CACHE on its slots keeps a
// parallel swap-in out meanwhile), and put in the page cache at the
// entry's first index. 1: fall back to order 0 (no large entry, no
// memory, or a slot of the range is in the swap cache: the kernel's
// non_swapcache_batch / swapcache_prepare); -EAGAIN: the entries changed
// meanwhile; -EIO: the read failed. The model has no zswap (never enabled)
// and no VMA here: the kernel's userfaultfd fallback is not modelled.
int shmem_swapin_direct_large(File* f, uint64_t index, swp_entry_t entry, SwapDevice* si, Folio** foliop,
                              bool* major) {
  Kernel* k = f->kernel;
  uint64_t base = 0;
  unsigned order = 0;
  swp_entry_t first{};
  {
    MutexGuard g(&f->lock);
    if (!shmem_large_entry(f, index, &base, &order)) return 1;
    first = f->swapped.at(base);
    if (first.val + (index - base) != entry.val) return -EAGAIN;
  }
  const long nr = 1L << order;
  Folio* folio = k->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, order);
  if (!folio) return 1;
  __folio_set_locked(folio);
  folio_set_swapbacked(folio);
  if (!swapcache_prepare(k, first, static_cast<unsigned>(nr))) {
    folio_unlock(folio);
    folio_put(folio);
    return 1;
  }
  auto give_up = [&](int err) {
    swapcache_clear(k, first, static_cast<unsigned>(nr));
    folio_unlock(folio);
    folio_put(folio);
    return err;
  };
  if (major) *major = true;
  if (!swap_read_folio(k, folio, si, swp_offset(first))) return give_up(-EIO);
  folio_set_uptodate(folio);
  {
    MutexGuard g(&f->lock);
    uint64_t b = 0;
    unsigned o = 0;
    if (!shmem_large_entry(f, index, &b, &o) || b != base || o != order || f->swapped.at(base).val != first.val)
      return give_up(-EAGAIN);
    f->swapped_order.erase(base);
    for (long i = 0; i < nr; i++) f->swapped.erase(base + static_cast<uint64_t>(i));
    folio->page.index = base;
    aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
    folio_ref_add(folio, static_cast<int>(nr));
    f->pages.emplace(base, folio);
  }
  MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), base, folio_order(folio));
  folio_add_lru(folio);
  folio_set_dirty(folio);
  // The file's swap count, then the SWAP_HAS_CACHE pin: the slots are free.
  swap_free_nr(k, first, static_cast<unsigned>(nr));
  swapcache_clear(k, first, static_cast<unsigned>(nr));
  *foliop = folio;
  return 0;
}

}  // namespace

int shmem_swapin_folio(File* f, uint64_t index, swp_entry_t entry, Folio** foliop, bool* major) {
  Kernel* k = f->kernel;
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return -EIO;
  Folio* folio = swap_cache_get_folio(k, entry);
  bool locked = false;
  if (!folio && si->synchronous_io) {
    // A large entry comes back whole from zram (v6.14's mTHP swap-in for
    // shmem); an order-0 one takes the cached path below, which the model
    // counts the same as the kernel's direct order-0 read.
    const int r = shmem_swapin_direct_large(f, index, entry, si, foliop, major);
    if (r <= 0) return r;
  }
  if (!folio) {
    // Not in the swap cache any more: the I/O starts here (a major fault),
    // page by page (a large entry of a block device or swap file is read
    // back order 0, as swapin_readahead does).
    bool fresh = false;
    folio = read_swap_cache(k, si, entry, &fresh);
    if (!folio) return -EAGAIN;  // the entry went meanwhile (a truncation): look again
    locked = fresh;
    if (fresh && major) *major = true;
  }
  if (!locked) folio_lock(folio);
  auto give_up = [&](int err) {
    folio_unlock(folio);
    folio_put(folio);
    return err;
  };
  // The folio still the swap cache's, for a range of slots that holds the
  // entry (a large folio written out whole holds consecutive slots).
  auto holds_entry = [&] {
    if (!folio_test_swapcache(folio)) return false;
    const uint64_t first = folio_swap_entry(folio).val;
    return entry.val >= first && entry.val - first < static_cast<uint64_t>(folio_nr_pages(folio));
  };
  // shmem_confirm_swap, and the folio still the swap cache's for the entry.
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.find(index);
    if (it == f->swapped.end() || it->second.val != entry.val) return give_up(-EAGAIN);
  }
  if (!holds_entry()) return give_up(-EAGAIN);
  if (!folio_test_uptodate(folio)) return give_up(-EIO);  // the read failed: SIGBUS
  if (folio_test_writeback(folio)) {
    // folio_wait_writeback: the write out is still in flight; the model
    // completes the writes in flight at once.
    folio_unlock(folio);
    (void)swap_writeback_wait(k);
    folio_lock(folio);
    if (!holds_entry()) return give_up(-EAGAIN);
  }
  // A large folio goes back whole, at the index of its first page (v6.18
  // rounds the index and the entry down to the folio's order).
  const long nr = folio_nr_pages(folio);
  const swp_entry_t first = folio_swap_entry(folio);
  const uint64_t base = index - (entry.val - first.val);
  // shmem_add_to_page_cache(expected = the swap entries).
  bool whole = true;
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.find(index);
    if (it == f->swapped.end() || it->second.val != entry.val) return give_up(-EAGAIN);
    for (long i = 0; i < nr && whole; i++) {
      auto e = f->swapped.find(base + static_cast<uint64_t>(i));
      whole = e != f->swapped.end() && e->second.val == first.val + static_cast<uint64_t>(i);
    }
    if (whole) {
      shmem_drop_large_entry(f, base);
      for (long i = 0; i < nr; i++) f->swapped.erase(base + static_cast<uint64_t>(i));
      folio->page.index = base;
      aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
      folio_ref_add(folio, static_cast<int>(nr));
      f->pages.emplace(base, folio);
    }
  }
  if (!whole) {
    Folio* nf = shmem_swapin_copy_page(f, folio, index, entry);
    // The large folio leaves the swap cache once no entry needs it.
    folio_free_swap(folio);
    give_up(0);
    if (!nf) return -EAGAIN;
    *foliop = nf;
    return 0;
  }
  MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), base, folio_order(folio));
  // The page cache holds the only copy now: dirty, out of the swap cache,
  // and the file's swap count dropped (which frees the slots).
  folio_set_dirty(folio);
  swap_cache_del_folio(folio);
  swap_free_nr(k, first, static_cast<unsigned>(nr));
  *foliop = folio;
  return 0;
}

// ---- truncation and hole punching ----

namespace {

// The part of a page that stays in the file keeps its bytes, the rest is
// zeroed (shmem_undo_range's partial pages, folio_zero_range; a hole in a
// page that is swapped out reads it back first, as SGP_READ does).
void shmem_zero_partial(File* f, uint64_t index, uint64_t from, uint64_t to) {
  Folio* folio = nullptr;
  uint64_t start = 0;
  {
    MutexGuard g(&f->lock);
    folio = lookup_locked(f, index, &start);
    if (folio) folio_get(folio);
  }
  if (!folio) {
    swp_entry_t entry{};
    bool swapped;
    {
      MutexGuard g(&f->lock);
      auto it = f->swapped.find(index);
      swapped = it != f->swapped.end();
      if (swapped) entry = it->second;
    }
    if (!swapped || shmem_swapin_folio(f, index, entry, &folio, nullptr)) return;  // a hole stays a hole
    start = index;
  } else {
    folio_lock(folio);
  }
  truncate_partial_zero(f, folio, index - start, from, to);
}

// truncate_inode_partial_folio's split for a large folio: the one holding
// page `index` reaches outside the whole pages [start, end) that go, so it
// is split (into order-0 folios, which the loop then takes one by one). If
// it cannot be (a pin, a racing reference) its pages inside the range are
// zeroed instead and it stays whole, as the kernel leaves it.
void shmem_split_edge_folio(File* f, uint64_t index, uint64_t start, uint64_t end) {
  Folio* folio = nullptr;
  uint64_t fstart = 0;
  {
    MutexGuard g(&f->lock);
    folio = lookup_locked(f, index, &fstart);
    if (!folio || !folio_test_large(folio)) return;
    folio_get(folio);
  }
  const uint64_t fend = fstart + static_cast<uint64_t>(folio_nr_pages(folio));
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) == reinterpret_cast<uint64_t>(f) &&
      (fstart < start || fend > end) && split_folio(folio)) {
    PhysMem* phys = f->kernel->phys.get();
    for (uint64_t i = std::max(fstart, start); i < std::min(fend, end); i++)
      user_memset(phys, static_cast<uint8_t*>(phys->page_address(folio_page(folio, static_cast<long>(i - fstart)))), 0,
                  PAGE_SIZE);
    folio_set_dirty(folio);
  }
  folio_unlock(folio);
  folio_put(folio);
}

}  // namespace

void shmem_undo_range(File* f, uint64_t lstart, uint64_t lend) {
  // Whole pages [start, end) go; the partial pages at either edge are zeroed.
  const TruncateRange r = truncate_range(lstart, lend);
  const uint64_t start = r.start, end = r.end;
  // The swap entries of the range (shmem_free_swap): out of the file, then
  // their slots freed outside the page-cache lock.
  std::vector<swp_entry_t> freed;
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.lower_bound(start);
    while (it != f->swapped.end() && it->first < end) {
      freed.push_back(it->second);
      shmem_drop_large_entry(f, it->first);
      it = f->swapped.erase(it);
    }
  }
  for (swp_entry_t e : freed) free_swap_and_cache_nr(f->kernel, e, 1);
  // A large folio (a collapsed THP) across either edge is split first.
  if (start < end) {
    shmem_split_edge_folio(f, start, start, end);
    if (end != UINT64_MAX) shmem_split_edge_folio(f, end - 1, start, end);
  }
  // The folios of the range; a large one still across an edge stays.
  truncate_inode_folios(f, start, end);
  truncate_partial_pages(f, r, shmem_zero_partial);
}

int shmem_setattr_size(File* f, uint64_t newsize) {
  const uint64_t oldsize = i_size_read(f);
  if (newsize != oldsize) {
    MutexGuard g(&f->lock);
    i_size_write(f, newsize);
  }
  if (newsize < oldsize) {
    const uint64_t holebegin = round_up(newsize, PAGE_SIZE);
    unmap_mapping_range(f, holebegin, 0, /*even_cows=*/true);
    shmem_undo_range(f, newsize, UINT64_MAX);
    // Again, for private copies a racing fault made meanwhile.
    unmap_mapping_range(f, holebegin, 0, /*even_cows=*/true);
  }
  return 0;
}

int shmem_fallocate_punch(File* f, uint64_t offset, uint64_t len) {
  // Only whole pages are unmapped, and private copies stay (even_cows 0);
  // the partial pages at the edges are zeroed in the page cache.
  const uint64_t unmap_start = round_up(offset, PAGE_SIZE);
  const uint64_t unmap_end = (offset + len) & PAGE_MASK;
  if (unmap_end > unmap_start) unmap_mapping_range(f, unmap_start, unmap_end - unmap_start, /*even_cows=*/false);
  shmem_undo_range(f, offset, offset + len - 1);
  return 0;
}

void shmem_evict_swap(File* f) {
  // shmem_evict_inode's truncation, for the swap entries: the folios go with
  // the page cache in ~File.
  std::vector<swp_entry_t> entries;
  {
    MutexGuard g(&f->lock);
    for (auto& [index, entry] : f->swapped) entries.push_back(entry);
    f->swapped.clear();
    f->swapped_order.clear();
  }
  for (swp_entry_t e : entries) free_swap_and_cache_nr(f->kernel, e, 1);
}

}  // namespace mmlab
