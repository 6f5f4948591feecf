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
// Not modelled: SHM_LOCK (SysV shm) and tmpfs mounts with `noswap`, which
// shmem_writeout() refuses to swap (the model has neither); large shmem
// folios (shmem THP: every shmem folio of the model is order 0, so no
// folio straddles a hole and shmem_writeout() never splits); the
// shmem_falloc wait of a fault racing a hole punch (a fault during the
// punch fills the hole again, which the kernel only makes unlikely).
#include <algorithm>
#include <memory>
#include <vector>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/kernel.h"
#include "mm/memory.h"
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
  f->fs = FsClass::kShmem;
  f->anon_shared = true;
  f->name = "dev/zero";
  f->size = len;
  return f;
}

// ---- reclaim ----

namespace {

// shmem_delete_from_page_cache: the folio leaves the page cache and the
// swap entry takes its index; the cache's references go.
void shmem_delete_from_page_cache(File* f, Folio* folio, swp_entry_t entry) {
  const uint64_t index = folio->page.index;
  {
    MutexGuard g(&f->lock);
    f->pages.erase(index);
    f->swapped[index] = entry;
    aref(folio->page.mapping).store(0, std::memory_order_release);
  }
  MM_TRACE("mm_filemap_delete_from_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index,
           folio_order(folio));
  folio_put_refs(folio, static_cast<int>(folio_nr_pages(folio)));  // never the last: reclaim isolated it
}

}  // namespace

int shmem_writeout(Folio* folio) {
  VM_BUG_ON_FOLIO(!folio_test_locked(folio), folio, "shmem_writeout on an unlocked folio");
  VM_BUG_ON_FOLIO(folio_mapped(folio), folio, "shmem_writeout of a mapped folio");
  auto* f = reinterpret_cast<File*>(aref(folio->page.mapping).load(std::memory_order_acquire));
  Kernel* k = f->kernel;
  // (SHM_LOCK'd and noswap files are redirtied here in the kernel: not
  // modelled, see the top of the file.)
  if (folio_alloc_swap(folio)) {
    // No swap (none, or full): redirty and keep it (AOP_WRITEPAGE_ACTIVATE).
    folio_set_dirty(folio);
    return -ENOMEM;
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

int shmem_swapin_folio(File* f, uint64_t index, swp_entry_t entry, Folio** foliop, bool* major) {
  Kernel* k = f->kernel;
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return -EIO;
  Folio* folio = swap_cache_get_folio(k, entry);
  bool locked = false;
  if (!folio) {
    // Not in the swap cache any more: the I/O starts here (a major fault).
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
  // shmem_confirm_swap, and the folio still the swap cache's for the entry.
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.find(index);
    if (it == f->swapped.end() || it->second.val != entry.val) return give_up(-EAGAIN);
  }
  if (!folio_test_swapcache(folio) || folio_swap_entry(folio).val != entry.val) return give_up(-EAGAIN);
  if (!folio_test_uptodate(folio)) return give_up(-EIO);  // the read failed: SIGBUS
  if (folio_test_writeback(folio)) {
    // folio_wait_writeback: the write out is still in flight; the model
    // completes the writes in flight at once.
    folio_unlock(folio);
    (void)swap_writeback_wait(k);
    folio_lock(folio);
    if (!folio_test_swapcache(folio) || folio_swap_entry(folio).val != entry.val) return give_up(-EAGAIN);
  }
  // shmem_add_to_page_cache(expected = the swap entry).
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.find(index);
    if (it == f->swapped.end() || it->second.val != entry.val) return give_up(-EAGAIN);
    f->swapped.erase(it);
    folio->page.index = index;
    aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
    folio_ref_add(folio, static_cast<int>(folio_nr_pages(folio)));
    f->pages.emplace(index, folio);
  }
  MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index, folio_order(folio));
  // The page cache holds the only copy now: dirty, out of the swap cache,
  // and the file's swap count dropped (which frees the slots).
  folio_set_dirty(folio);
  swap_cache_del_folio(folio);
  swap_free_nr(k, entry, static_cast<unsigned>(folio_nr_pages(folio)));
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
      it = f->swapped.erase(it);
    }
  }
  for (swp_entry_t e : freed) free_swap_and_cache_nr(f->kernel, e, 1);
  // The folios of the range (truncate_inode_folio: order 0 in the model).
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
  }
  for (swp_entry_t e : entries) free_swap_and_cache_nr(f->kernel, e, 1);
}

}  // namespace mmlab
