// fs/hugetlbfs/inode.c: hugetlbfs files (hugetlb_file_setup for
// MAP_HUGETLB and memfd, hugetlbfs_file_mmap_prepare, get_unmapped_area,
// fallocate) and their eviction (remove_inode_hugepages +
// hugetlb_unreserve_pages).
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
