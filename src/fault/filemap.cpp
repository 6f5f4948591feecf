// File-backed and shared memory: the page cache of the model's files
// (mm/filemap.c, mm/shmem.c), their system calls (memfd_create + fallocate,
// pread, pwrite, close, mmap of an fd), the ->mmap checks of shmem,
// ext4-class files and hugetlbfs, shared anonymous memory (shmem_zero_setup),
// and the faults on file VMAs (mm/memory.c's do_fault family: do_read_fault
// with fault-around, do_cow_fault, do_shared_fault, finish_fault,
// set_pte_range; wp_page_shared with ->page_mkwrite).
//
// The file systems modelled, and where they differ:
//   shmem (memfd, tmpfs; also MAP_SHARED|MAP_ANONYMOUS): PG_swapbacked folios
//     (MM_SHMEMPAGES). create_file is memfd_create + ftruncate + fallocate:
//     the folios exist, zeroed, dirty and !uptodate (shmem_fallocate); the
//     first fault or write makes a folio uptodate, so fault-around (which
//     maps only uptodate folios) skips untouched fallocated pages, as in the
//     kernel. Holes (shared anonymous memory, pages past an old EOF) are
//     filled on fault (shmem_fault, SGP_CACHE). No ->page_mkwrite, no
//     writeback: shared writable mappings are mapped writable at once.
//   ext4, xfs, btrfs: folios not swapbacked (MM_FILEPAGES). create_file
//     leaves the whole file in the page cache, uptodate and clean (as if it
//     had been written and synced). ->page_mkwrite marks the folio dirty, and
//     shared writable mappings are write-notify (vma_wants_writenotify): the
//     first write to each page faults.
//   hugetlbfs: the hugetlb code (mm/hugetlbfs_inode.cpp) creates the file, fills
//     it (hugetlb_fallocate), checks and reserves its mappings
//     (hugetlb_file_mmap) and handles its faults; this file registers it and
//     reads it. pwrite is -EINVAL (hugetlbfs has no write_iter).
#include <algorithm>
#include <cstring>
#include <vector>

#include "fault/fault.h"
#include "fault/filemap.h"
#include "mm/file.h"
#include "mm/internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/vmdebug.h"
#include "phys/frame_copy.h"

namespace mmlab {
namespace {

// fault_around_bytes (mm/memory.c, default 64 KiB): pages a read fault maps.
constexpr uint64_t kFaultAroundPages = 65536 >> PAGE_SHIFT;
constexpr uint64_t kMaxLfsFilesize = static_cast<uint64_t>(INT64_MAX);

// DIV_ROUND_UP(i_size, PAGE_SIZE): the first page index past EOF.
uint64_t file_end_index(const File* f) { return (i_size_read(f) + PAGE_SIZE - 1) >> PAGE_SHIFT; }

PhysMem* phys_of(const File* f) { return f->kernel->phys.get(); }

// The cached folio containing page `index` and its first page's index; the
// caller holds f->lock.
Folio* lookup_locked(File* f, uint64_t index, uint64_t* start) {
  auto it = f->pages.upper_bound(index);
  if (it == f->pages.begin()) return nullptr;
  --it;
  if (index >= it->first + static_cast<uint64_t>(folio_nr_pages(it->second))) return nullptr;
  *start = it->first;
  return it->second;
}

// filemap_get_folio: the cached folio containing `index`, with a reference.
Folio* filemap_get_folio(File* f, uint64_t index, uint64_t* start) {
  std::lock_guard<std::mutex> g(f->lock);
  Folio* folio = lookup_locked(f, index, start);
  if (folio) folio_get(folio);
  return folio;
}

// A new order-0 folio for f's page cache, zeroed (the model never hands out
// stale frames: shmem clears on first use, a regular file reads zeros from
// a hole or from the zeroed file the model pretends was written).
Folio* filemap_alloc_folio(File* f) {
  Folio* folio = phys_of(f)->folio_alloc(GFP_HIGHUSER_MOVABLE | __GFP_ZERO, 0);
  if (folio && file_is_shmem(f)) folio_set_swapbacked(folio);
  return folio;
}

// __filemap_add_folio + folio_add_lru: insert a new folio at `index`. The
// cache takes folio_nr_pages references; the caller keeps its own. If the
// slot is taken (a racing fault filled it), the caller's folio is released
// and the cached one is returned, referenced, instead.
Folio* filemap_add_folio(File* f, Folio* folio, uint64_t index, uint64_t* start) {
  {
    std::lock_guard<std::mutex> g(f->lock);
    if (Folio* cur = lookup_locked(f, index, start)) {
      folio_get(cur);
      folio_put(folio);
      return cur;
    }
    aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
    folio->page.index = index;
    folio_ref_add(folio, static_cast<int>(folio_nr_pages(folio)));
    folio_add_lru(folio);
    f->pages.emplace(index, folio);
    *start = index;
  }
  return folio;
}

// Fill [0, size) of a new file's page cache: memfd's fallocate for shmem,
// an already written (and synced) file for the ext4 class.
int file_populate(File* f, uint64_t size) {
  const uint64_t end = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
  for (uint64_t index = 0; index < end; index++) {
    Folio* folio = filemap_alloc_folio(f);
    if (!folio) return -ENOMEM;  // the destructor releases what was added
    if (file_is_shmem(f)) {
      // shmem_fallocate: left !uptodate (cleared on first use) but dirty, so
      // reclaim would swap it rather than drop it.
      folio_set_dirty(folio);
    } else {
      folio_set_uptodate(folio);
    }
    uint64_t start;
    Folio* cached = filemap_add_folio(f, folio, index, &start);
    folio_put(cached);  // the allocation's reference: only the cache's remain
  }
  return 0;
}

// shmem_get_folio(SGP_CACHE) / filemap_fault's lookup: the folio for page
// `index`, referenced and locked, created if the page is a hole. -EINVAL
// past EOF, -ENOMEM, or -EAGAIN if the folio left the cache meanwhile.
int file_get_folio_locked(File* f, uint64_t index, Folio** foliop, uint64_t* start) {
  if (index >= file_end_index(f)) return -EINVAL;
  Folio* folio = filemap_get_folio(f, index, start);
  if (!folio) {
    Folio* nf = filemap_alloc_folio(f);
    if (!nf) return -ENOMEM;
    if (!file_is_shmem(f)) folio_set_uptodate(nf);  // a hole reads as zeros
    folio = filemap_add_folio(f, nf, index, start);
  }
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f)) {
    folio_unlock(folio);
    folio_put(folio);
    return -EAGAIN;
  }
  // Perhaps the file shrank since we checked (no truncate yet; kept for form).
  if (index >= file_end_index(f)) {
    folio_unlock(folio);
    folio_put(folio);
    return -EINVAL;
  }
  // shmem: a fallocated folio is cleared (it is zero already) and becomes
  // uptodate on first use.
  if (!folio_test_uptodate(folio)) folio_set_uptodate(folio);
  *foliop = folio;
  return 0;
}

// Register a new file in the System's table: the lowest free fd from 3 up.
int file_install(Kernel* k, std::shared_ptr<File> f, const std::string& name) {
  FileTable* t = k->files.get();
  std::lock_guard<std::mutex> g(t->lock);
  int fd = 3;
  while (t->files.count(fd)) fd++;
  f->id = t->next_id++;
  f->name = name.empty() ? "memfd:" + std::to_string(f->id) : name;
  t->files.emplace(fd, std::move(f));
  return fd;
}

// ---- faults ----

// Does the VMA's file have ->page_mkwrite (ext4-class files)?
bool vma_has_page_mkwrite(const Vma* vma) { return vma->vm_file && file_needs_dirty_tracking(vma->vm_file.get()); }

// __do_fault: ->fault gives the folio for page pgoff, referenced and locked.
vm_fault_t do_file_fault(VmFault* vmf, uint64_t pgoff, Folio** foliop, Page** pagep) {
  File* f = vmf->vma->vm_file.get();
  uint64_t start = 0;
  Folio* folio = nullptr;
  int err = file_get_folio_locked(f, pgoff, &folio, &start);
  if (err == -EINVAL) return VM_FAULT_SIGBUS;  // beyond EOF
  if (err == -ENOMEM) return VM_FAULT_OOM;
  if (err) return VM_FAULT_NOPAGE;  // retry
  *foliop = folio;
  *pagep = folio_page(folio, static_cast<long>(pgoff - start));
  return 0;
}

// set_pte_range: map nr pages of folio from page at addr (ptep, PTL held).
// A write in a private mapping maps a new exclusive anon folio (do_cow_fault);
// anything else maps the page-cache folio.
void set_pte_range(VmFault* vmf, Folio* folio, Page* page, unsigned nr, uint64_t addr, pte_t* ptep) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  const bool write = vmf->flags & FAULT_FLAG_WRITE;
  pte_t entry = pfn_pte(mm->phys->page_to_pfn(page), vma->vm_page_prot);  // young: the prot has ACCESSED
  if (write)
    entry = maybe_mkwrite(pte_mkdirty(entry), vma);
  else if (pte_write(entry) && folio_test_dirty(folio))
    entry = pte_mkdirty(entry);
  if (write && !(vma->vm_flags & VM_SHARED)) {
    VM_WARN_ON(nr != 1, "CoW of more than one page");
    folio_add_new_anon_rmap(folio, vma, addr, RMAP_EXCLUSIVE, RmapLevel::kPte);
    folio_add_lru(folio);
  } else {
    folio_add_file_rmap_ptes(folio, page, static_cast<int>(nr), vma);
  }
  set_ptes(mm, addr, ptep, entry, nr);
}

// finish_fault: map `page` (of `folio`, locked, its reference given to the
// PTE on success) at vmf->address if the PTE is still none.
vm_fault_t finish_fault(VmFault* vmf, Folio* folio, Page* page, bool is_cow) NO_THREAD_SAFETY_ANALYSIS {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  if (!pte_alloc(mm, vmf->pmd)) return VM_FAULT_OOM;
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &ptl);
  if (!pte) return VM_FAULT_NOPAGE;
  if (!pte_none(ptep_get(pte))) {  // vmf_pte_changed: a racing fault mapped it
    ptl->unlock();
    mm->stats->count(Event::fault_retry);
    return VM_FAULT_NOPAGE;
  }
  set_pte_range(vmf, folio, page, 1, vmf->address, pte);
  add_mm_counter(mm, is_cow ? MM_ANONPAGES : mm_counter_file(folio), 1);
  ptl->unlock();
  return 0;
}

// filemap_map_pages: map the uptodate, unlocked cached pages of
// [start_pgoff, end_pgoff] (inside one page table and the VMA) whose PTEs
// are none, read-only unless the VMA's protection says otherwise.
// VM_FAULT_NOPAGE if the faulting address got mapped.
vm_fault_t filemap_map_pages(VmFault* vmf, uint64_t start_pgoff, uint64_t end_pgoff) NO_THREAD_SAFETY_ANALYSIS {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  File* f = vma->vm_file.get();
  struct Candidate {
    uint64_t index, start;
    Folio* folio;
  };
  std::vector<Candidate> cands;
  cands.reserve(kFaultAroundPages);
  {
    // next_uptodate_folio, with the speculative references taken under the
    // cache lock; the folio trylock waits for the PTL as in the kernel.
    std::lock_guard<std::mutex> g(f->lock);
    uint64_t max_idx = file_end_index(f);
    if (max_idx == 0) return 0;
    end_pgoff = std::min(end_pgoff, max_idx - 1);
    for (uint64_t index = start_pgoff; index <= end_pgoff; index++) {
      uint64_t start;
      Folio* folio = lookup_locked(f, index, &start);
      if (!folio || folio_test_locked(folio) || !folio_test_uptodate(folio)) continue;
      folio_get(folio);
      cands.push_back({index, start, folio});
    }
  }
  if (cands.empty()) return 0;
  auto release = [&] {
    for (auto& c : cands) folio_put(c.folio);
  };
  if (!pte_alloc(mm, vmf->pmd)) {  // do_fault_around's prealloc_pte
    release();
    return VM_FAULT_OOM;
  }
  const uint64_t addr0 = vma->vm_start + ((start_pgoff - vma->vm_pgoff) << PAGE_SHIFT);
  SpinLock* ptl;
  pte_t* pte0 = pte_offset_map_lock(mm, vmf->pmd, addr0, &ptl);
  if (!pte0) {
    release();
    return 0;
  }
  vm_fault_t ret = 0;
  long rss = 0;
  MmCounter type = MM_FILEPAGES;
  for (auto& c : cands) {
    if (!folio_trylock(c.folio)) continue;
    bool ok = aref(c.folio->page.mapping).load(std::memory_order_acquire) == reinterpret_cast<uint64_t>(f) &&
              folio_test_uptodate(c.folio) && c.index < file_end_index(f);
    uint64_t addr = addr0 + ((c.index - start_pgoff) << PAGE_SHIFT);
    pte_t* pte = pte0 + (c.index - start_pgoff);
    if (ok && pte_none(ptep_get(pte))) {
      if (addr == vmf->address) ret = VM_FAULT_NOPAGE;
      // Fault-around is a read fault: the flags carry no FAULT_FLAG_WRITE.
      set_pte_range(vmf, c.folio, folio_page(c.folio, static_cast<long>(c.index - c.start)), 1, addr, pte);
      folio_ref_inc(c.folio);
      type = mm_counter_file(c.folio);
      rss++;
    }
    folio_unlock(c.folio);
  }
  add_mm_counter(mm, type, rss);
  ptl->unlock();
  release();  // the lookup references (the cache keeps the folios alive)
  return ret;
}

// do_fault_around: up to fault_around_bytes of naturally aligned pages
// around the fault, clamped to the VMA and the page table.
vm_fault_t do_fault_around(VmFault* vmf, uint64_t pgoff) {
  Vma* vma = vmf->vma;
  const uint64_t nr = kFaultAroundPages;
  const uint64_t pte_off = pte_index(vmf->address);
  const uint64_t vma_off = pgoff - vma->vm_pgoff;  // page offset of the address within the VMA
  const uint64_t from_pte = std::max(round_down(pte_off, nr), pte_off - std::min(pte_off, vma_off));
  const uint64_t to_pte =
      std::min({from_pte + nr, static_cast<uint64_t>(PTRS_PER_PTE), pte_off + vma->pages() - vma_off}) - 1;
  return filemap_map_pages(vmf, pgoff + from_pte - pte_off, pgoff + to_pte - pte_off);
}

vm_fault_t do_read_fault(VmFault* vmf, uint64_t pgoff) {
  // should_fault_around: every file here has ->map_pages (no userfaultfd).
  if (kFaultAroundPages > 1) {
    vm_fault_t ret = do_fault_around(vmf, pgoff);
    if (ret) return ret;
  }
  Folio* folio;
  Page* page;
  vm_fault_t ret = do_file_fault(vmf, pgoff, &folio, &page);
  if (ret) return ret;
  ret = finish_fault(vmf, folio, page, false);
  folio_unlock(folio);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) folio_put(folio);
  return ret;
}

// A write to a private file mapping: copy the page-cache page into a new
// exclusive anon page; the page cache is untouched.
vm_fault_t do_cow_fault(VmFault* vmf, uint64_t pgoff) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  if (vm_fault_t ret = vmf_anon_prepare(vmf)) return ret;
  Folio* new_folio = mm->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, 0);
  if (!new_folio) return VM_FAULT_OOM;
  Folio* folio;
  Page* page;
  vm_fault_t ret = do_file_fault(vmf, pgoff, &folio, &page);
  if (ret) {
    folio_put(new_folio);
    return ret;
  }
  copy_user_page(mm->phys, mm->phys->page_address(&new_folio->page), mm->phys->page_address(page));
  mm->stats->count(Event::copy_bytes, PAGE_SIZE);
  folio_set_uptodate(new_folio);
  ret = finish_fault(vmf, new_folio, &new_folio->page, true);
  folio_unlock(folio);
  folio_put(folio);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) folio_put(new_folio);
  return ret;
}

// ->page_mkwrite of the ext4 class (filemap_page_mkwrite): lock the folio,
// check it is still cached, dirty it. Returns VM_FAULT_LOCKED with the folio
// locked, or VM_FAULT_NOPAGE (retry).
vm_fault_t do_page_mkwrite(VmFault* vmf, Folio* folio) {
  File* f = vmf->vma->vm_file.get();
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f)) {
    folio_unlock(folio);
    return VM_FAULT_NOPAGE;
  }
  folio_set_dirty(folio);  // dirtied before it becomes writable (writeback sees it)
  return VM_FAULT_LOCKED;
}

// fault_dirty_shared_page: dirty the folio (ext4: already done by
// ->page_mkwrite) and unlock it.
void fault_dirty_shared_page(Folio* folio) {
  folio_set_dirty(folio);
  folio_unlock(folio);
}

// A write to a shared mapping with a none PTE: map the page-cache folio
// writable and dirty, after ->page_mkwrite where the file has one.
vm_fault_t do_shared_fault(VmFault* vmf, uint64_t pgoff) {
  Folio* folio;
  Page* page;
  vm_fault_t ret = do_file_fault(vmf, pgoff, &folio, &page);
  if (ret) return ret;
  if (vma_has_page_mkwrite(vmf->vma)) {
    folio_unlock(folio);
    vm_fault_t tmp = do_page_mkwrite(vmf, folio);
    if (!tmp || (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE))) {
      folio_put(folio);
      return tmp;
    }
  }
  ret = finish_fault(vmf, folio, page, false);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) {
    folio_unlock(folio);
    folio_put(folio);
    return ret;
  }
  fault_dirty_shared_page(folio);
  return ret;
}

// wp_page_reuse for a shared mapping: writable (if VM_WRITE), dirty, young.
void wp_page_reuse_shared(VmFault* vmf) NO_THREAD_SAFETY_ANALYSIS {
  Vma* vma = vmf->vma;
  pte_t entry = maybe_mkwrite(pte_mkdirty(pte_mkyoung(vmf->orig_pte)), vma);
  entry_set(vmf->pte, entry);
  vmf->ptl->unlock();
  vma->vm_mm->stats->count(VmStat::pgreuse);
  vma->vm_mm->stats->count(Event::fault_wp_reuse);
}

// finish_mkwrite_fault: retake the PTL; reuse if the PTE did not change.
vm_fault_t finish_mkwrite_fault(VmFault* vmf) NO_THREAD_SAFETY_ANALYSIS {
  Mm* mm = vmf->vma->vm_mm;
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte) return VM_FAULT_NOPAGE;
  if (!(ptep_get(vmf->pte) == vmf->orig_pte)) {
    vmf->ptl->unlock();
    mm->stats->count(Event::fault_retry);
    return VM_FAULT_NOPAGE;
  }
  wp_page_reuse_shared(vmf);
  return 0;
}

}  // namespace

// ---- the fault entry points (fault/fault.h) ----

vm_fault_t do_fault(VmFault* vmf) {
  Vma* vma = vmf->vma;
  if (!vma->vm_file) return VM_FAULT_SIGBUS;  // no ->fault
  const uint64_t pgoff = linear_page_index(vma, vmf->address);
  if (!(vmf->flags & FAULT_FLAG_WRITE)) return do_read_fault(vmf, pgoff);
  if (!(vma->vm_flags & VM_SHARED)) return do_cow_fault(vmf, pgoff);
  return do_shared_fault(vmf, pgoff);
}

vm_fault_t wp_page_shared(VmFault* vmf, Folio* folio) NO_THREAD_SAFETY_ANALYSIS {
  if (!folio) {  // wp_pfn_shared: no ->pfn_mkwrite in the model
    wp_page_reuse_shared(vmf);
    return 0;
  }
  folio_get(folio);
  if (vma_has_page_mkwrite(vmf->vma)) {
    vmf->ptl->unlock();
    vm_fault_t tmp = do_page_mkwrite(vmf, folio);
    if (!tmp || (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE))) {
      folio_put(folio);
      return tmp;
    }
    tmp = finish_mkwrite_fault(vmf);
    if (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE)) {
      folio_unlock(folio);
      folio_put(folio);
      return tmp;
    }
  } else {
    wp_page_reuse_shared(vmf);
    folio_lock(folio);
  }
  fault_dirty_shared_page(folio);
  folio_put(folio);
  return 0;
}

// ---- mmap (mm/internal.h) ----

bool vma_fs_can_writeback(const Vma* vma) { return vma_has_page_mkwrite(vma); }

int file_mmap_prepare(File* file, Vma* vma) {
  switch (file->fs) {
    case FsClass::kHugetlbfs:
      // hugetlbfs_file_mmap (the hugetlb layer): VM_HUGETLB|VM_DONTEXPAND,
      // alignment, reservations, i_size growth of writable mappings.
      return hugetlb_file_mmap(file, vma);
    case FsClass::kShmem:  // shmem_mmap: no seals modelled
    case FsClass::kExt4:   // ext4_file_mmap, xfs_file_mmap, btrfs_file_mmap: no DAX
    case FsClass::kXfs:
    case FsClass::kBtrfs:
      return 0;
  }
  return -ENODEV;
}

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

std::shared_ptr<File> file_get(Kernel* k, int fd) {
  FileTable* t = k->files.get();
  std::lock_guard<std::mutex> g(t->lock);
  auto it = t->files.find(fd);
  return it == t->files.end() ? nullptr : it->second;
}

// ---- system calls ----

int memfd_create(Kernel* k, uint64_t size, FsClass fs, unsigned hugetlb_shift, const std::string& name) {
  if (size > kMaxLfsFilesize) return -EFBIG;
  std::shared_ptr<File> f;
  if (hugetlb_shift || fs == FsClass::kHugetlbfs) {
    // memfd_create(MFD_HUGETLB | size log) on hugetlbfs.
    if (fs != FsClass::kShmem && fs != FsClass::kHugetlbfs) return -EINVAL;
    unsigned shift = hugetlb_shift ? hugetlb_shift : PMD_SHIFT;
    if (shift != PMD_SHIFT && shift != PUD_SHIFT) return -EINVAL;
    // ftruncate on hugetlbfs takes whole huge pages only.
    if (size & ((1ull << shift) - 1)) return -EINVAL;
    int err = 0;
    f = hugetlb_file_setup(k, size, shift, &err);
    if (!f) return err ? err : -ENOMEM;
    // fallocate: the pages come from the pool now (-ENOSPC if it is short).
    if ((err = hugetlb_fallocate(f.get(), 0, size))) return err;
  } else {
    f = std::make_shared<File>();
    f->kernel = k;
    f->fs = fs;
    f->size = size;
    if (int err = file_populate(f.get(), size)) return err;  // f's destructor frees the partial cache
  }
  return file_install(k, std::move(f), name);
}

long ksys_pread64(Kernel* k, int fd, uint64_t off, void* buf, uint64_t len) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (off > kMaxLfsFilesize) return -EINVAL;
  const uint64_t size = i_size_read(f.get());
  if (off >= size || !len) return 0;
  len = std::min(len, size - off);
  PhysMem* phys = phys_of(f.get());
  auto* out = static_cast<uint8_t*>(buf);
  for (uint64_t done = 0; done < len;) {
    const uint64_t pos = off + done;
    const uint64_t index = pos >> PAGE_SHIFT;
    const uint64_t in_page = pos & ~PAGE_MASK;
    const uint64_t n = std::min(len - done, PAGE_SIZE - in_page);
    uint64_t start = 0;
    Folio* folio = filemap_get_folio(f.get(), index, &start);
    // shmem (SGP_READ) reads a fallocated, never-used folio as a hole.
    if (folio && file_is_shmem(f.get()) && !folio_test_uptodate(folio)) {
      folio_put(folio);
      folio = nullptr;
    }
    if (folio) {
      const auto* src = static_cast<const uint8_t*>(phys->page_address(folio_page(folio, static_cast<long>(index - start))));
      user_memcpy(phys, out + done, src + in_page, n);
      folio_put(folio);
    } else {
      std::memset(out + done, 0, n);  // the caller's buffer
    }
    done += n;
  }
  return static_cast<long>(len);
}

long ksys_pwrite64(Kernel* k, int fd, uint64_t off, const void* buf, uint64_t len) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (f->fs == FsClass::kHugetlbfs) return -EINVAL;  // hugetlbfs has no write_iter
  if (off > kMaxLfsFilesize) return -EINVAL;
  if (!len) return 0;
  if (len > kMaxLfsFilesize - off) return -EFBIG;
  PhysMem* phys = phys_of(f.get());
  const auto* in = static_cast<const uint8_t*>(buf);
  uint64_t done = 0;
  while (done < len) {
    const uint64_t pos = off + done;
    const uint64_t index = pos >> PAGE_SHIFT;
    const uint64_t in_page = pos & ~PAGE_MASK;
    const uint64_t n = std::min(len - done, PAGE_SIZE - in_page);
    // write_begin: find or create the folio (past EOF too) and lock it.
    uint64_t start = 0;
    Folio* folio = filemap_get_folio(f.get(), index, &start);
    if (!folio) {
      Folio* nf = filemap_alloc_folio(f.get());
      if (!nf) break;
      folio = filemap_add_folio(f.get(), nf, index, &start);
    }
    folio_lock(folio);
    auto* dst = static_cast<uint8_t*>(phys->page_address(folio_page(folio, static_cast<long>(index - start))));
    user_memcpy(phys, dst + in_page, in + done, n);
    // write_end: the folio is uptodate (the rest of a new page is zero) and dirty.
    folio_set_uptodate(folio);
    folio_set_dirty(folio);
    folio_unlock(folio);
    folio_put(folio);
    done += n;
    {
      std::lock_guard<std::mutex> g(f->lock);
      if (pos + n > i_size_read(f.get())) i_size_write(f.get(), pos + n);
    }
  }
  if (!done) return -ENOMEM;
  return static_cast<long>(done);
}

int close_fd(Kernel* k, int fd) {
  FileTable* t = k->files.get();
  std::shared_ptr<File> f;
  {
    std::lock_guard<std::mutex> g(t->lock);
    auto it = t->files.find(fd);
    if (it == t->files.end()) return -EBADF;
    f = std::move(it->second);
    t->files.erase(it);
  }
  f.reset();  // the last reference (no mapping left) frees the page cache, outside the table lock
  return 0;
}

long ksys_mmap_pgoff(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off) {
  if (off & ~PAGE_MASK) return -EINVAL;  // sys_mmap: offset in bytes, page aligned
  if (flags & MAP_ANONYMOUS) return do_mmap(mm, addr, len, prot, flags, off >> PAGE_SHIFT);  // fd ignored
  std::shared_ptr<File> f = file_get(mm->kernel, fd);
  if (!f) return -EBADF;
  return do_mmap_file(mm, std::move(f), addr, len, prot, flags, off >> PAGE_SHIFT);
}

}  // namespace mmlab
