// fs/hugetlbfs/inode.c: hugetlbfs files (hugetlb_file_setup for
// MAP_HUGETLB and memfd, hugetlbfs_file_mmap_prepare, get_unmapped_area,
// fallocate), their truncation and hole punching (hugetlbfs_setattr ->
// hugetlb_vmtruncate, hugetlbfs_punch_hole: hugetlb_vmdelete_list,
// remove_inode_hugepages, hugetlb_unreserve_pages) and their eviction.
//
// Unlike shmem's and ext4's, a hugetlbfs truncation or hole unmaps every
// mapping of the range, private CoW copies included (hugetlb_vmdelete_list
// zaps each VMA on i_mmap whole, with no even_cows), and the file's region
// map gives back the reservations of the indices it drops: all of them past
// a new size, only those of the pages it frees in a hole (an index reserved
// but never instantiated keeps its reservation). A private owner's anon page
// unmapped this way gets its reservation back in the owner's map, as any
// zap of it does (__unmap_hugepage_range).
//
// Not modelled: i_rwsem (nothing serialises two truncations, or one with a
// fallocate of the same file), the shared mappings' vma_lock (a fault of a
// shared mapping racing with the truncation is caught by the fault mutex
// and the re-unmap in remove_inode_single_folio, as the kernel's is when the
// trylock fails), seals (F_SEAL_*: EPERM) and subpools (a hugetlbfs mount's
// size=/min_size=; memfd and MAP_HUGETLB files have none).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/rmap.h"
#include "mm/vma.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"
#include "sync/sched.h"
#include "trace/trace.h"

namespace mmlab {

HugetlbFileState::HugetlbFileState(Kernel* k, File* f, Hstate* hs) : kernel(k), file(f), h(hs), cid(f->cid) {}

namespace {

// remove_inode_hugepages + hugetlb_unreserve_pages for the whole file.
void evict_hugetlb_file(File* f, HugetlbFileState* fs) {
  Kernel* k = fs->kernel;
  if (!k) return;
  HugetlbState* hs = k->hugetlb.get();
  std::vector<Folio*> folios;
  {
    MutexGuard g(&f->lock);
    for (auto& [index, folio] : f->pages) {
      MM_TRACE("mm_filemap_delete_from_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index,
               folio_order(folio));
      folios.push_back(folio);
    }
    f->pages.clear();
  }
  const long freed = static_cast<long>(folios.size());
  for (Folio* folio : folios) {
    VM_BUG_ON_FOLIO(folio_mapped(folio), folio, "evicting a mapped hugetlb folio");
    aref(folio->page.mapping).store(0, std::memory_order_release);
    folio_put_refs(folio, static_cast<int>(folio_nr_pages(folio)));
  }
  (void)freed;
  // Every instantiated page consumed its index's reservation; the File's
  // destructor may have dropped them already (it runs before ours).
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    long chg = static_cast<long>(fs->regions.size());
    long instantiated = fs->cached;
    fs->regions.clear();
    fs->cached = 0;
    VM_BUG_ON(chg < instantiated, "hugetlb page cache outside the reserve map");
    if (chg > instantiated) return_unused_surplus_pages(hs, fs->h, chg - instantiated, &to_free);
  }
  free_folios(k, to_free);
}
}  // namespace

namespace {

// ---- truncation and hole punching ----

// vma_offset_start / vma_offset_end: the addresses of vma that map the file
// pages [start, end) (end 0: to the end of the VMA).
uint64_t vma_offset_start(const Vma* vma, uint64_t start) {
  if (vma->vm_pgoff >= start) return vma->vm_start;
  return vma->vm_start + ((start - vma->vm_pgoff) << PAGE_SHIFT);
}
uint64_t vma_offset_end(const Vma* vma, uint64_t end) {
  if (!end) return vma->vm_end;
  return std::min(vma->vm_start + ((end - vma->vm_pgoff) << PAGE_SHIFT), vma->vm_end);
}
bool vma_maps_pgoff(const Vma* vma, uint64_t first, uint64_t last) {
  return first < vma->vm_pgoff + vma->pages() && last >= vma->vm_pgoff;
}

// hugetlb_vmdelete_list: unmap the file pages [start, end) (end 0: to the
// end) from every VMA on i_mmap, private ones (their CoW copies) too. A VMA
// whose hugetlb VMA lock is held is skipped, as the kernel's trylock does.
void hugetlb_vmdelete_list(File* f, uint64_t start, uint64_t end) {
  WriteGuard g(&f->i_mmap_rwsem);  // i_mmap_lock_write
  for (Vma* vma : f->i_mmap) {
    if (!vma_maps_pgoff(vma, start, end ? end - 1 : UINT64_MAX)) continue;
    (void)unmap_hugepage_range_trylock(vma, vma_offset_start(vma, start), vma_offset_end(vma, end), nullptr);
  }
}

// hugetlb_unmap_file_folio: a page-cache folio mapped again since the
// range was unmapped (a fault in between): unmap it wherever it is mapped.
// A VMA whose lock is held is waited for, with i_mmap_rwsem dropped (the
// lock order), and everything looked at again. Under the fault mutex, so
// no new mapping of the folio can appear.
void hugetlb_unmap_file_folio(File* f, const Hstate* h, Folio* folio, uint64_t idx) {
  const uint64_t start = idx << h->order, end = (idx + 1) << h->order;
  const pfn_t pfn = folio_pfn(folio);
  for (;;) {
    std::shared_ptr<HugetlbResvMap> busy;
    {
      WriteGuard g(&f->i_mmap_rwsem);
      for (Vma* vma : f->i_mmap) {
        if (!vma_maps_pgoff(vma, start, end - 1)) continue;
        const uint64_t v_start = vma_offset_start(vma, start);
        if (!hugetlb_vma_maps_pfn(vma, v_start, pfn)) continue;
        if (!unmap_hugepage_range_trylock(vma, v_start, vma_offset_end(vma, end), &busy)) break;
      }
    }
    if (!busy) return;
    busy->rw_sema.down_write();  // wait for the fault that holds it
    busy->rw_sema.up_write();
  }
}

// hugetlb_unreserve_pages: the region map lets go of the indices [start,
// end); those of them that no freed page had consumed (chg - freed) go
// back to the pool's reservations (no subpool to ask).
void hugetlb_unreserve_pages(File* f, uint64_t start, uint64_t end, long freed) {
  Kernel* k = f->kernel;
  HugetlbState* hs = hugetlb_state(k);
  HugetlbFileState* fs = f->hstate.get();
  long chg = 0;
  {
    SpinGuard g(&hs->lock);
    for (auto it = fs->regions.lower_bound(start); it != fs->regions.end() && *it < end; chg++)
      it = fs->regions.erase(it);  // region_del
  }
  VM_BUG_ON(chg < freed, "hugetlb_unreserve_pages: more pages freed than indices in the region map");
  if (chg > freed) (void)hugetlb_acct_memory(k, hs, fs->h, -(chg - freed));
}

// hugetlb_delete_from_page_cache: the folio (locked, referenced by the
// caller) leaves the page cache, which drops its references.
void hugetlb_delete_from_page_cache(File* f, Folio* folio) {
  HugetlbState* hs = hugetlb_state(f->kernel);
  {
    MutexGuard g(&f->lock);
    MM_TRACE("mm_filemap_delete_from_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), folio->page.index,
             folio_order(folio));
    f->pages.erase(folio->page.index);
  }
  {
    SpinGuard g(&hs->lock);
    f->hstate->cached--;
  }
  folio_clear_dirty(folio);
  aref(folio->page.mapping).store(0, std::memory_order_release);
  folio_ref_sub_and_test(folio, static_cast<int>(folio_nr_pages(folio)));  // the caller's reference remains
}

// remove_inode_single_folio, under the fault mutex of idx: true if the
// folio left the page cache. A hole gives back the index's region at once;
// a truncation does it for the whole range afterwards.
bool remove_inode_single_folio(File* f, const Hstate* h, Folio* folio, uint64_t idx, bool truncate_op) {
  if (folio_mapped(folio)) hugetlb_unmap_file_folio(f, h, folio, idx);
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f)) {
    folio_unlock(folio);  // gone meanwhile (the file evicted)
    return false;
  }
  VM_BUG_ON_FOLIO(folio_test_hugetlb_restore_reserve(folio), folio, "a page-cache folio holding a reservation");
  hugetlb_delete_from_page_cache(f, folio);
  if (!truncate_op) hugetlb_unreserve_pages(f, idx, idx + 1, 1);
  folio_unlock(folio);
  return true;
}

// remove_inode_hugepages: every page-cache folio of [lstart, lend) (byte
// offsets, huge-page aligned; lend UINT64_MAX: a truncation) leaves the
// page cache and, unless a pin holds it, goes back to the pool. A
// truncation then drops every region from lstart on.
void remove_inode_hugepages(File* f, uint64_t lstart, uint64_t lend) {
  HugetlbState* hs = hugetlb_state(f->kernel);
  const Hstate* h = hstate_file(f);
  const bool truncate_op = lend == UINT64_MAX;
  const uint64_t first = lstart >> h->shift();
  const uint64_t last = truncate_op ? UINT64_MAX : lend >> h->shift();  // exclusive
  long freed = 0;
  for (uint64_t next = first; next < last;) {
    Folio* folio = nullptr;
    uint64_t idx = 0;
    {
      MutexGuard g(&f->lock);
      auto it = f->pages.lower_bound(next << h->order);
      if (it == f->pages.end() || (it->first >> h->order) >= last) break;
      idx = it->first >> h->order;
      folio = it->second;
      folio_get(folio);
    }
    {
      MutexGuard fm(&hugetlb_fault_mutex(hs, f, idx));
      if (remove_inode_single_folio(f, h, folio, idx, truncate_op)) freed++;
    }
    folio_put(folio);  // the last reference, unless a pin holds the folio
    next = idx + 1;
  }
  if (truncate_op) hugetlb_unreserve_pages(f, first, UINT64_MAX, freed);
}

// hugetlb_vmtruncate: the new size first (a fault from now on past it is
// SIGBUS), then every mapping past it unmapped, then the page cache.
void hugetlb_vmtruncate(File* f, uint64_t offset) {
  {
    MutexGuard g(&f->lock);
    i_size_write(f, offset);
  }
  hugetlb_vmdelete_list(f, offset >> PAGE_SHIFT, 0);
  remove_inode_hugepages(f, offset, UINT64_MAX);
}

// hugetlbfs_zero_partial_page: zero [start, end) of the huge page holding
// start, if it is cached (both inside one huge page; end 0 in it: its end).
void hugetlbfs_zero_partial_page(File* f, const Hstate* h, uint64_t start, uint64_t end) {
  Folio* folio = filemap_lock_hugetlb_folio(f, h, start >> h->shift());
  if (!folio) return;
  const uint64_t from = start & (h->size() - 1);
  uint64_t to = end & (h->size() - 1);
  if (!to) to = h->size();
  PhysMem* phys = f->kernel->phys.get();
  user_memset(phys, static_cast<uint8_t*>(folio_address(folio)) + from, 0, to - from);
  folio_unlock(folio);
  folio_put(folio);
}

}  // namespace

int hugetlbfs_setattr_size(File* f, uint64_t newsize) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  if (newsize & (hstate_file(f)->size() - 1)) return -EINVAL;
  hugetlb_vmtruncate(f, newsize);
  return 0;
}

int hugetlbfs_punch_hole(File* f, uint64_t offset, uint64_t len) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  const Hstate* h = hstate_file(f);
  const uint64_t end = offset + len;  // vfs_fallocate refused an overflow
  const uint64_t hole_start = round_up(offset, h->size());
  const uint64_t hole_end = round_down(end, h->size());
  // The kernel zeroes the partial pages under i_mmap_rwsem; here the folio
  // lock ranks above it (sync/lock_order.h), and nothing maps or unmaps
  // differently for it: they are zeroed outside.
  if (offset < hole_start) hugetlbfs_zero_partial_page(f, h, offset, std::min(end, hole_start));
  if (hole_end > hole_start) hugetlb_vmdelete_list(f, hole_start >> PAGE_SHIFT, hole_end >> PAGE_SHIFT);
  if (end > hole_end && end > hole_start) hugetlbfs_zero_partial_page(f, h, hole_end, end);
  // Label: the hole unmapped, its pages still in the page cache, where a
  // fault may map them again (remove_inode_single_folio unmaps them anew).
  sched::point("hugetlb_punch.after_unmap", sched::Op::kLabel, {f, sched::ObjKind::kLabel, f->cid});
  if (hole_end > hole_start) remove_inode_hugepages(f, hole_start, hole_end);
  return 0;
}

// ---- HugetlbFileState ----

HugetlbFileState::~HugetlbFileState() {
  Kernel* k = kernel;
  if (!k) return;  // the Kernel's hugetlb state is already gone
  HugetlbState* hs = k->hugetlb.get();
  evict_hugetlb_file(file, this);
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    hs->files.erase(this);
    for (auto& m : private_maps) release_resv_map(hs, m.get(), &to_free);
    private_maps.clear();
    // The VMAs mapping this file are gone (they held references to it).
    for (auto it = hs->vmas.begin(); it != hs->vmas.end();) {
      if (it->second.file == file) it = hs->vmas.erase(it);
      else ++it;
    }
  }
  free_folios(k, to_free);
}

// ---- files ----

std::shared_ptr<File> hugetlb_file_setup(Kernel* k, uint64_t len, unsigned huge_shift, int* err) {
  if (huge_shift == 0) huge_shift = PMD_SHIFT;  // default_hstate
  if (huge_shift != PMD_SHIFT && huge_shift != PUD_SHIFT) {
    *err = -EINVAL;
    return nullptr;
  }
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = &hs->hstates[hstate_index(huge_shift - PAGE_SHIFT)];
  const uint64_t size = round_up(len, h->size());
  if (size < len) {
    *err = -ENOMEM;
    return nullptr;
  }
  auto f = std::make_shared<File>();
  f->kernel = k;
  f->cid = k->next_cid.fetch_add(1, std::memory_order_relaxed);
  f->name = "anon_hugepage";
  f->size = size;
  f->fs = FsClass::kHugetlbfs;
  f->hugetlb_order = h->order;
  f->hstate = std::make_unique<HugetlbFileState>(k, f.get(), h);
  {
    SpinGuard g(&hs->lock);
    hs->files.insert(f->hstate.get());
  }
  *err = 0;
  return f;
}

int hugetlb_file_mmap(File* f, Vma* vma) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  Hstate* h = hstate_file(f);
  // Set first, so that an unwinding do_mmap unmaps it as hugetlb.
  vma->vm_flags |= VM_HUGETLB | VM_DONTEXPAND;
  if (!is_aligned(vma->vm_start, h->size()) || !is_aligned(vma->vm_end, h->size())) return -EINVAL;
  if (vma->vm_pgoff & (static_cast<uint64_t>(h->pages_per_huge_page()) - 1)) return -EINVAL;
  const uint64_t vma_len = vma->vm_end - vma->vm_start;
  const uint64_t len = vma_len + (vma->vm_pgoff << PAGE_SHIFT);
  if (len < vma_len) return -EINVAL;
  if (hugetlb_reserve_pages(f->kernel, f, vma->vm_pgoff >> h->order, len >> h->shift(), vma, vma->vm_flags) < 0)
    return -ENOMEM;
  if (vma->vm_flags & VM_WRITE) {
    MutexGuard g(&f->lock);
    if (i_size_read(f) < len) i_size_write(f, len);
  }
  return 0;
}

long hugetlb_get_unmapped_area(Mm* mm, File* f, uint64_t addr, uint64_t len, uint64_t pgoff, int flags) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  const uint64_t sz = hstate_file(f)->size();
  if (len & (sz - 1)) return -EINVAL;
  if (len > mm->task_size) return -ENOMEM;
  if (flags & MAP_FIXED) return (addr & (sz - 1)) ? -EINVAL : static_cast<long>(addr);
  if (addr) {
    addr = round_up(addr, sz);
    if (addr >= mmap_min_addr && addr + len <= mm->task_size && addr + len > addr &&
        !find_vma_intersection(mm, addr, addr + len))
      return static_cast<long>(addr);
  }
  // Room for len plus the alignment slack; the aligned start is inside it.
  long r = get_unmapped_area(mm, 0, len + sz, pgoff, 0, 0);
  if (r < 0) return r;
  return static_cast<long>(round_up(static_cast<uint64_t>(r), sz));
}

int hugetlb_fallocate(File* f, uint64_t offset, uint64_t len) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  if (offset + len < offset) return -EFBIG;
  Kernel* k = f->kernel;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = hstate_file(f);
  const uint64_t start = offset >> h->shift();
  const uint64_t end = round_up(offset + len, h->size()) >> h->shift();
  const ResvCtx c = ctx_of(f);
  for (uint64_t idx = start; idx < end; idx++) {
    MutexGuard g(&hugetlb_fault_mutex(hs, f, idx));
    {
      MutexGuard pg(&f->lock);
      if (f->pages.count(idx << h->order)) continue;
    }
    int err = 0;
    Folio* folio = alloc_hugetlb_folio(k, hs, c, idx, /*cow_from_owner=*/false, &err);
    if (!folio) return -ENOSPC;
    folio_zero_huge(folio, k->stats.get());
    folio_set_uptodate(folio);
    if (hugetlb_add_to_page_cache(folio, f, h, idx)) {
      restore_reserve_on_error(k, hs, c, idx, folio);
      folio_put(folio);
      continue;
    }
    folio_unlock(folio);
    folio_put(folio);  // the page cache keeps its own references
  }
  MutexGuard g(&f->lock);
  if (offset + len > i_size_read(f)) i_size_write(f, offset + len);
  return 0;
}

void hugetlb_evict_inode(File* f) {
  if (!is_hugetlb_file(f)) return;
  evict_hugetlb_file(f, f->hstate.get());
}

}  // namespace mmlab
