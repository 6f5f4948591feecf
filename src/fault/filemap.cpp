// The faults on file VMAs (mm/memory.c's do_fault family: do_read_fault
// with fault-around and filemap_map_pages, do_cow_fault, do_shared_fault,
// finish_fault, set_pte_range; wp_page_shared with ->page_mkwrite). The
// page cache, the files and their system calls are in mm/filemap.cpp; what
// each file system does differently is described there.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "phys/frame_copy.h"

namespace mmlab {
namespace {

// fault_around_bytes (mm/memory.c, default 64 KiB): pages a read fault maps.
constexpr uint64_t kFaultAroundPages = 65536 >> PAGE_SHIFT;

// ---- faults ----

// maybe_unlock_mmap_for_io: the first try of a fault that may retry drops
// its lock for the I/O and returns VM_FAULT_RETRY once it is done. Under the
// per-VMA lock, handle_mm_fault's dispatch drops it. Opt-out: which lock is
// held is a fault flag, which the analysis cannot follow.
bool maybe_unlock_mmap_for_io(VmFault* vmf) NO_THREAD_SAFETY_ANALYSIS {
  const fault_flags_t flags = vmf->flags;
  if (!(flags & FAULT_FLAG_ALLOW_RETRY) || (flags & (FAULT_FLAG_TRIED | FAULT_FLAG_RETRY_NOWAIT))) return false;
  if (!(flags & FAULT_FLAG_VMA_LOCK)) mmap_read_unlock(vmf->vma->vm_mm);
  return true;
}

// filemap_fault's miss in a file of the ext4 class: PGMAJFAULT, the mmap
// read-around (do_sync_mmap_readahead), and VM_FAULT_RETRY if the fault
// dropped its lock for the read: the retry finds the pages cached, and a
// read fault's fault-around maps those around it (a 64K mapping comes back
// by one major fault). 0 if the page is cached: the fault goes on (minor).
vm_fault_t filemap_fault_miss(VmFault* vmf, File* f, uint64_t pgoff) {
  const bool ra_off = vmf->vma->vm_mm->kernel->settings.read_ahead_off.load(std::memory_order_relaxed);
  if (file_is_shmem(f) || !filemap_read_around(f, pgoff, ra_off ? 1 : VM_READAHEAD_PAGES)) return 0;
  vmf->vma->vm_mm->kernel->stats->count(VmStat::pgmajfault);
  if (maybe_unlock_mmap_for_io(vmf)) return VM_FAULT_MAJOR | VM_FAULT_RETRY;
  return VM_FAULT_MAJOR;
}

// __do_fault: ->fault gives the folio for page pgoff, referenced and locked.
vm_fault_t do_file_fault(VmFault* vmf, uint64_t pgoff, Folio** foliop, Page** pagep) {
  File* f = vmf->vma->vm_file.get();
  uint64_t start = 0;
  Folio* folio = nullptr;
  const vm_fault_t miss = filemap_fault_miss(vmf, f, pgoff);
  if (miss & VM_FAULT_RETRY) return miss;
  bool major = false;
  int err = file_get_folio_locked(f, pgoff, &folio, &start, &major, vmf->vma, vmf->address);
  // shmem_swapin_folio started a read: a major fault (pgmajfault here, and
  // VM_FAULT_MAJOR for mm_account_fault's task counts).
  if (major) vmf->vma->vm_mm->kernel->stats->count(VmStat::pgmajfault);
  if (err == -EINVAL || err == -EIO) return VM_FAULT_SIGBUS;  // beyond EOF, or the swap read failed
  if (err == -ENOMEM) return VM_FAULT_OOM;
  if (err) return VM_FAULT_NOPAGE;  // retry
  *foliop = folio;
  *pagep = folio_page(folio, static_cast<long>(pgoff - start));
  return (major ? VM_FAULT_MAJOR : 0) | miss;
}

// set_pte_range: map nr pages of folio from page at addr (ptep, PTL held).
// A write in a private mapping maps a new exclusive anon folio (do_cow_fault);
// anything else maps the page-cache folio.
void set_pte_range(VmFault* vmf, Folio* folio, Page* page, unsigned nr, uint64_t addr, pte_t* ptep) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  table_page_of(mm->phys, ptep)->pt.ptl.assert_held();
  const bool write = vmf->flags & FAULT_FLAG_WRITE;
  pte_t entry = pfn_pte(mm->phys->page_to_pfn(page), vma->vm_page_prot);  // young: the prot has ACCESSED
  if (write)
    entry = maybe_mkwrite(pte_mkdirty(entry), vma);
  else if (pte_write(entry) && folio_test_dirty(folio))
    entry = pte_mkdirty(entry);
  if (write && !(vma->vm_flags & VM_SHARED)) {
    VM_BUG_ON(nr != 1, "CoW of more than one page");
    folio_add_new_anon_rmap(folio, vma, addr, RMAP_EXCLUSIVE, RmapLevel::kPte);
    folio_add_lru(folio);
  } else {
    folio_add_file_rmap_ptes(folio, page, static_cast<int>(nr), vma);
  }
  set_ptes(mm, addr, ptep, entry, nr);
}

// finish_fault's choice of how much of a large folio to map: shmem maps
// the whole folio at once where it lies inside the VMA and one page table
// (so its RSS is the folio's), everything else one page. *addr and *page
// move to the folio's first page when it is mapped whole.
unsigned finish_fault_nr_pages(VmFault* vmf, Folio* folio, Page** page, uint64_t* addr, bool is_cow) {
  Vma* vma = vmf->vma;
  const uint64_t nr = static_cast<uint64_t>(folio_nr_pages(folio));
  if (is_cow || nr == 1 || !vma_is_shmem(vma) || userfaultfd_armed(vma)) return 1;
  const uint64_t idx = static_cast<uint64_t>(*page - &folio->page);
  const uint64_t vma_off = linear_page_index(vma, vmf->address) - vma->vm_pgoff;
  const uint64_t pte_off = pte_index(vmf->address);
  if (vma_off < idx || vma_off + (nr - idx) > vma->pages() || pte_off < idx || pte_off + (nr - idx) > PTRS_PER_PTE)
    return 1;
  *addr = vmf->address - idx * PAGE_SIZE;
  *page = &folio->page;
  return static_cast<unsigned>(nr);
}

// finish_fault: map `page` (of `folio`, locked, its reference given to the
// mapping on success) at vmf->address if the PTE is still none. A PMD-order
// page-cache folio under a none PMD is mapped by a PMD where do_set_pmd may;
// a large shmem folio otherwise by as many PTEs as it has, when all are none.
vm_fault_t finish_fault(VmFault* vmf, Folio* folio, Page* page, bool is_cow) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  if (pmd_none(pmdp_get(vmf->pmd))) {
    if (!is_cow && folio_order(folio) == PMD_ORDER) {
      vm_fault_t ret = do_set_pmd(vmf, folio, page);
      if (ret != VM_FAULT_FALLBACK) return ret;
    }
    if (!pte_alloc(mm, vmf->pmd)) return VM_FAULT_OOM;
  }
  uint64_t addr = vmf->address;
  unsigned nr = finish_fault_nr_pages(vmf, folio, &page, &addr, is_cow);
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, vmf->pmd, addr, &ptl);
  if (!pte) return VM_FAULT_NOPAGE;
  ptl->assert_held();
  bool changed = false;
  for (unsigned i = 0; i < nr && !changed; i++) changed = !pte_none(ptep_get(pte + i));
  if (changed && nr > 1) {
    // needs_fallback: some PTE of the folio's range is mapped; map one page.
    ptl->unlock();
    page = page + ((vmf->address - addr) >> PAGE_SHIFT);
    addr = vmf->address;
    nr = 1;
    pte = pte_offset_map_lock(mm, vmf->pmd, addr, &ptl);
    if (!pte) return VM_FAULT_NOPAGE;
    ptl->assert_held();
    changed = !pte_none(ptep_get(pte));
  }
  if (changed) {  // vmf_pte_changed: a racing fault mapped it
    ptl->unlock();
    mm->stats->count(Event::fault_retry);
    return VM_FAULT_NOPAGE;
  }
  if (nr > 1) folio_ref_add(folio, static_cast<int>(nr) - 1);
  set_pte_range(vmf, folio, page, nr, addr, pte);
  add_mm_counter(mm, is_cow ? MM_ANONPAGES : mm_counter_file(folio), nr);
  ptl->unlock();
  return 0;
}

// filemap_map_pages: map the uptodate, unlocked cached pages of
// [start_pgoff, end_pgoff] (inside one page table and the VMA) whose PTEs
// are none, read-only unless the VMA's protection says otherwise.
// VM_FAULT_NOPAGE if the faulting address got mapped.
vm_fault_t filemap_map_pages(VmFault* vmf, uint64_t start_pgoff, uint64_t end_pgoff) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  File* f = vma->vm_file.get();
  struct Candidate {
    uint64_t index, start;
    Folio* folio;
  };
  std::vector<Candidate> cands;
  cands.reserve(kFaultAroundPages);  // more when a large folio is mapped whole
  {
    // next_uptodate_folio, with the speculative references taken under the
    // cache lock; the folio trylock waits for the PTL as in the kernel.
    MutexGuard g(&f->lock);
    uint64_t max_idx = file_end_index(f);
    if (max_idx == 0) return 0;
    end_pgoff = std::min(end_pgoff, max_idx - 1);
    // A large folio at either end of the window is mapped whole where it
    // lies inside the VMA, inside the fault's page table and below EOF
    // (v6.18's filemap_map_folio_range maps the entire folio, as
    // finish_fault would on a cold page cache).
    auto widen = [&](uint64_t idx) REQUIRES(f->lock) {
      uint64_t first;
      Folio* lf = lookup_locked(f, idx, &first);
      if (!lf || !folio_test_large(lf)) return;
      const uint64_t last = first + static_cast<uint64_t>(folio_nr_pages(lf)) - 1;
      if (first < vma->vm_pgoff || last >= vma->vm_pgoff + vma->pages() || last >= max_idx) return;
      const uint64_t a_first = vma->vm_start + ((first - vma->vm_pgoff) << PAGE_SHIFT);
      const uint64_t a_last = vma->vm_start + ((last - vma->vm_pgoff) << PAGE_SHIFT);
      if ((a_first & PMD_MASK) != (vmf->address & PMD_MASK) || (a_last & PMD_MASK) != (vmf->address & PMD_MASK)) return;
      start_pgoff = std::min(start_pgoff, first);
      end_pgoff = std::max(end_pgoff, last);
    };
    widen(start_pgoff);
    widen(end_pgoff);
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
  // filemap_map_pmd: a PMD leaf there already is the fault's answer; a
  // PMD-order first folio under a none PMD is mapped by a PMD if it may be.
  if (pmd_trans_huge(pmdp_get(vmf->pmd))) {
    release();
    return 0;
  }
  if (pmd_none(pmdp_get(vmf->pmd)) && folio_order(cands.front().folio) == PMD_ORDER) {
    Folio* first = cands.front().folio;
    if (folio_trylock(first)) {
      const bool ok = aref(first->page.mapping).load(std::memory_order_acquire) == reinterpret_cast<uint64_t>(f) &&
                      folio_test_uptodate(first);
      vm_fault_t r = VM_FAULT_FALLBACK;
      if (ok) {
        folio_get(first);  // the reference the PMD mapping takes
        r = do_set_pmd(vmf, first, folio_page(first, static_cast<long>(cands.front().index - cands.front().start)));
        if (r) folio_put(first);
      }
      folio_unlock(first);
      if (!r) {
        release();
        return VM_FAULT_NOPAGE;
      }
    }
  }
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
  ptl->assert_held();
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
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) return ret;
  ret |= finish_fault(vmf, folio, page, /*is_cow=*/false);
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
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) {
    folio_put(new_folio);
    return ret;
  }
  copy_user_page(mm->phys, mm->phys->page_address(&new_folio->page), mm->phys->page_address(page));
  mm->stats->count_copied(0, PAGE_SIZE);
  folio_set_uptodate(new_folio);
  ret |= finish_fault(vmf, new_folio, &new_folio->page, /*is_cow=*/true);
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
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) return ret;
  if (vma_has_page_mkwrite(vmf->vma)) {
    folio_unlock(folio);
    vm_fault_t tmp = do_page_mkwrite(vmf, folio);
    if (!tmp || (tmp & (VM_FAULT_ERROR | VM_FAULT_NOPAGE))) {
      folio_put(folio);
      return tmp;
    }
  }
  ret |= finish_fault(vmf, folio, page, /*is_cow=*/false);
  if (ret & (VM_FAULT_ERROR | VM_FAULT_NOPAGE | VM_FAULT_RETRY)) {
    folio_unlock(folio);
    folio_put(folio);
    return ret;
  }
  fault_dirty_shared_page(folio);
  return ret;
}

// wp_page_reuse for a shared mapping: writable (if VM_WRITE), dirty, young.
void wp_page_reuse_shared(VmFault* vmf) RELEASE(vmf->ptl) {
  Vma* vma = vmf->vma;
  pte_t entry = maybe_mkwrite(pte_mkdirty(pte_mkyoung(vmf->orig_pte)), vma);
  entry_set(vmf->pte, entry);
  vmf->ptl->unlock();
  vma->vm_mm->stats->count(VmStat::pgreuse);
  vma->vm_mm->stats->count(Event::fault_wp_reuse);
}

// finish_mkwrite_fault: retake the PTL; reuse if the PTE did not change.
vm_fault_t finish_mkwrite_fault(VmFault* vmf) {
  Mm* mm = vmf->vma->vm_mm;
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte) return VM_FAULT_NOPAGE;
  vmf->ptl->assert_held();
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

vm_fault_t do_set_pmd(VmFault* vmf, Folio* folio, Page* page) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  const bool write = vmf->flags & FAULT_FLAG_WRITE;
  const uint64_t haddr = vmf->address & PMD_MASK;
  (void)page;  // the PMD maps the folio from its first page
  // Too late for a small folio: refuse the PMD where THP is disabled for
  // the VMA (MADV_NOHUGEPAGE included), as a forced collapse would; the
  // folio is then mapped by PTEs.
  if (vma_thp_disabled(vma, vma->vm_flags, /*forced_collapse=*/true)) return VM_FAULT_FALLBACK;
  if (!thp_vma_suitable_order(vma, haddr, PMD_ORDER)) return VM_FAULT_FALLBACK;
  if (folio_order(folio) != PMD_ORDER) return VM_FAULT_FALLBACK;
  SpinLock* ptl = pmd_lock(mm, vmf->pmd);
  ptl->assert_held();
  if (!pmd_none(pmdp_get(vmf->pmd))) {
    ptl->unlock();
    return VM_FAULT_FALLBACK;
  }
  pmd_t entry = pfn_pmd(folio_pfn(folio), vma->vm_page_prot);
  if (write) entry = maybe_pmd_mkwrite(pmd_mkdirty(entry), vma);
  add_mm_counter(mm, mm_counter_file(folio), HPAGE_PMD_NR);
  folio_add_file_rmap_pmd(folio, &folio->page, vma);
  // x86 deposits no page table under a file PMD.
  entry_set(vmf->pmd, entry);
  mm->stats->count(VmStat::thp_file_mapped);
  ptl->unlock();
  return 0;
}

vm_fault_t do_fault(VmFault* vmf) {
  Vma* vma = vmf->vma;
  if (!vma->vm_file) return VM_FAULT_SIGBUS;  // no ->fault
  const uint64_t pgoff = linear_page_index(vma, vmf->address);
  if (!(vmf->flags & FAULT_FLAG_WRITE)) return do_read_fault(vmf, pgoff);
  if (!(vma->vm_flags & VM_SHARED)) return do_cow_fault(vmf, pgoff);
  return do_shared_fault(vmf, pgoff);
}

vm_fault_t wp_page_shared(VmFault* vmf, Folio* folio) {
  vmf->ptl->assert_held();
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
}  // namespace mmlab
