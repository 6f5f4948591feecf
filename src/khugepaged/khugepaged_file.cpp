// The collapse of shmem of mm/khugepaged.c (v6.18): hpage_collapse_scan_file,
// collapse_file, retract_page_tables, collapse_pte_mapped_thp and
// set_huge_pmd, which khugepaged's scan and MADV_COLLAPSE (khugepaged.cpp)
// share.
//
// A file range is collapsed in the page cache, not in one process: the
// small folios of [start, start + 512) are locked, isolated and unmapped
// from every process (try_to_unmap), copied into a new PMD-order folio that
// takes their place in the page cache (holes become zeroed pages), and the
// now empty PTE tables of the mappings that can lose them are freed
// (retract_page_tables): a later fault maps the new folio by a PMD
// (do_set_pmd) where the VMA allows it. MADV_COLLAPSE maps it at once
// (collapse_pte_mapped_thp with install_pmd); khugepaged does not.
//
// The model's large page-cache folios are shmem's (these, and those a shmem
// fault allocates where the THP controls allow: shmem_alloc_and_add_large_folio)
// and, with CONFIG_READ_ONLY_THP_FOR_FS (tune mm.read_only_thp_for_fs),
// the ext4 class's made here from a file nobody has open for write: its
// folios must be uptodate and clean, its holes are read (zeros), and the
// new folio is clean and not swap-backed. A smaller large folio in the
// range is copied like the small ones (v6.18). Not modelled: the
// memcg charge of the holes (shmem_charge: the model has no shmem block
// accounting), NUMA node choice, MMU notifiers, the writeback retry of
// MADV_COLLAPSE (no shmem folio is ever under writeback when it is looked
// at: the swap write completes before shmem_swapin_folio returns it).
#include <algorithm>
#include <memory>
#include <vector>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "khugepaged/khugepaged_internal.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "tlb/tlb.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

// A page-cache folio's references besides the caller's: the page cache's
// one per page and one per mapping (folio_expected_ref_count of a file folio).
int file_folio_expected_refs(const Folio* folio) { return static_cast<int>(folio_nr_pages(folio)) + folio_mapcount(folio); }

// Is there any page or swap entry of f in [start, end)? (collapse_file's
// xas_next_entry for a range that starts with a hole.)
bool file_range_has_entries(File* f, uint64_t start, uint64_t end) REQUIRES(f->lock) {
  uint64_t s;
  for (uint64_t index = start; index < end; index++)
    if (lookup_locked(f, index, &s)) return true;
  auto it = f->swapped.lower_bound(start);
  return it != f->swapped.end() && it->first < end;
}

// One small folio collapse_file holds: locked, isolated from the LRU,
// unmapped, referenced.
struct HeldFolio {
  Folio* folio;
  uint64_t index;
};

void collapse_file_release(std::vector<HeldFolio>* held) {
  for (auto& h : *held) {
    folio_putback_lru(h.folio);
    folio_unlock(h.folio);
    folio_put(h.folio);
  }
  held->clear();
}

// The folio at `index` for collapse_file: locked and referenced, read back
// from swap if shmem swapped it out (shmem_get_folio(SGP_NOALLOC)). nullptr
// with *result SCAN_SUCCEED for a hole.
Folio* collapse_file_get_folio(File* f, uint64_t index, int* result) {
  Folio* folio = nullptr;
  uint64_t start = 0;
  swp_entry_t entry{};
  bool swapped = false;
  {
    MutexGuard g(&f->lock);
    folio = lookup_locked(f, index, &start);
    if (folio) {
      folio_get(folio);
    } else if (auto it = f->swapped.find(index); it != f->swapped.end()) {
      swapped = true;
      entry = it->second;
    }
  }
  *result = SCAN_SUCCEED;
  if (!file_is_shmem(f)) {
    if (!folio) {
      // A regular file's hole: page_cache_sync_readahead reads it (the
      // model's disk reads zeros there), then the folio is locked. Past
      // EOF nothing is read: SCAN_FAIL.
      uint64_t s = 0;
      bool major = false;
      if (file_get_folio_locked(f, index, &folio, &s, &major, nullptr, 0)) {
        *result = SCAN_FAIL;
        return nullptr;
      }
      return folio;
    }
    // khugepaged works on files nobody writes: a dirty folio was written
    // before the last writer closed it and not flushed yet (the kernel
    // starts filemap_flush and gives up this time); one under writeback
    // waits for the next visit.
    if (folio_test_dirty(folio) || folio_test_writeback(folio)) {
      folio_put(folio);
      *result = SCAN_FAIL;
      return nullptr;
    }
  }
  if (swapped) {
    if (shmem_swapin_folio(f, index, entry, &folio, nullptr)) {
      *result = SCAN_FAIL;
      return nullptr;
    }
    return folio;  // locked and referenced
  }
  if (!folio) return nullptr;
  if (!folio_trylock(folio)) {
    folio_put(folio);
    *result = SCAN_PAGE_LOCK;
    return nullptr;
  }
  return folio;
}

// Take one small folio of the range: checks, isolation, unmap, and the
// reference count (the caller's, the cache's, the isolation's and nothing
// else). Consumes folio on failure.
int collapse_file_take(File* f, Folio* folio, uint64_t index, uint64_t start, std::vector<HeldFolio>* held) {
  auto drop = [&](int r) {
    folio_unlock(folio);
    folio_put(folio);
    return r;
  };
  // A PMD-order folio there already: the caller maps it. A smaller large
  // folio (a shmem mTHP from a fault) is copied like the small ones.
  if (folio_order(folio) == PMD_ORDER && folio->page.index == start) return drop(SCAN_PTE_MAPPED_HUGEPAGE);
  if (folio->page.index != index) return drop(SCAN_PAGE_COMPOUND);  // reaches below the range
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f))
    return drop(SCAN_TRUNCATED);
  if (file_is_shmem(f)) {
    // A fallocated shmem page never written reads as zeros (shmem_get_folio
    // clears it and marks it uptodate); the model's frames are zeroed already.
    if (!folio_test_uptodate(folio)) folio_set_uptodate(folio);
  } else if (!folio_test_uptodate(folio)) {
    return drop(SCAN_FAIL);  // a read that failed
  } else if (folio_test_dirty(folio)) {
    return drop(SCAN_FAIL);  // dirtied since the look-up: not flushed
  }
  if (folio_test_writeback(folio)) return drop(SCAN_FAIL);
  if (!folio_isolate_lru(folio)) return drop(SCAN_DEL_PAGE_LRU);
  if (folio_mapped(folio)) try_to_unmap(folio, TTU_IGNORE_MLOCK);
  // Ours, the page cache's and the isolation's: anything else (a mapping
  // try_to_unmap could not remove, a GUP pin) keeps the page.
  if (folio_ref_count(folio) != 2 + static_cast<int>(folio_nr_pages(folio))) {
    folio_putback_lru(folio);
    return drop(SCAN_PAGE_COUNT);
  }
  held->push_back({folio, index});
  return SCAN_SUCCEED;
}

// Copy the held pages into new_folio, zeroing the holes. SCAN_COPY_MC if a
// source page meets a machine check (the injector's `copy_mc` site).
int collapse_file_copy(PhysMem* phys, Folio* new_folio, uint64_t start, const std::vector<HeldFolio>& held, Stats* st) {
  size_t next = 0;
  for (uint64_t i = 0; i < HPAGE_PMD_NR;) {
    void* dst = phys->page_address(folio_page(new_folio, static_cast<long>(i)));
    if (next < held.size() && held[next].index == start + i) {
      Folio* src = held[next].folio;
      for (long j = 0; j < folio_nr_pages(src); j++, i++) {
        if (copy_mc_user_highpage(phys, phys->page_address(folio_page(new_folio, static_cast<long>(i))),
                                  phys->page_address(folio_page(src, j))))
          return SCAN_COPY_MC;
        st->count_copied(0, PAGE_SIZE);
      }
      next++;
    } else {
      zero_frames(phys, dst, PAGE_SIZE);
      i++;
    }
  }
  return SCAN_SUCCEED;
}

// The new folio takes the range's place in the page cache; the old ones
// leave it. SCAN_PAGE_FILLED if a fault filled a hole (or a page went to
// swap) meanwhile: the caller rolls back.
int collapse_file_replace(File* f, Folio* new_folio, uint64_t start, const std::vector<HeldFolio>& held) {
  MutexGuard g(&f->lock);
  const uint64_t end = start + HPAGE_PMD_NR;
  size_t found = 0;
  for (auto it = f->pages.lower_bound(start); it != f->pages.end() && it->first < end; ++it) found++;
  auto sw = f->swapped.lower_bound(start);
  if (found != held.size() || (sw != f->swapped.end() && sw->first < end)) return SCAN_PAGE_FILLED;
  for (auto& h : held) {
    f->pages.erase(h.index);
    aref(h.folio->page.mapping).store(0, std::memory_order_release);
  }
  new_folio->page.index = start;
  aref(new_folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
  // The allocation's reference and HPAGE_PMD_NR - 1 more: the cache's.
  folio_ref_add(new_folio, HPAGE_PMD_NR - 1);
  f->pages.emplace(start, new_folio);
  MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(new_folio), start,
           folio_order(new_folio));
  return SCAN_SUCCEED;
}

// file_backed_vma_is_retractable: a VMA with anonymous pages (a private
// mapping written to) or uffd-wp markers keeps its table.
bool file_backed_vma_is_retractable(const Vma* vma) {
  return !std::atomic_ref<AnonVma* const>(vma->anon_vma).load(std::memory_order_acquire) &&
         !(vma->vm_flags & VM_UFFD_WP);
}

// The emptied PTE table goes (pte_free_defer): lockless walkers may still
// read it, so it is freed as the PT_RECLAIM path frees one.
void collapse_free_pte_table(Mm* mm, uint64_t haddr, pmd_t pgt_pmd) {
  pgtable_free(mm, mm->phys->pfn_to_page(pmd_pfn(pgt_pmd)));
  tlb_note_freed_table(mm, haddr, haddr + PMD_SIZE);
}

// retract_page_tables: every mapping of the range [pgoff, pgoff + 512) of f
// whose PMD range lies inside its VMA loses its PTE table, which the unmap
// of the small folios emptied; the next fault maps the new folio by a PMD.
void retract_page_tables(File* f, uint64_t pgoff) {
  ReadGuard g(&f->i_mmap_rwsem);  // i_mmap_lock_read
  for (Vma* vma : f->i_mmap) {
    if (pgoff < vma->vm_pgoff || pgoff >= vma->vm_pgoff + vma->pages()) continue;
    const uint64_t addr = vma->vm_start + ((pgoff - vma->vm_pgoff) << PAGE_SHIFT);
    if ((addr & ~PMD_MASK) || vma->vm_end < addr + PMD_SIZE) continue;
    Mm* mm = vma->vm_mm;
    pmd_t* pmd;
    if (find_pmd_or_thp_or_none(mm, addr, &pmd) != SCAN_SUCCEED) continue;
    if (hpage_collapse_test_exit(mm)) continue;
    if (!file_backed_vma_is_retractable(vma)) continue;
    SpinLock* pml = pmd_lock(mm, pmd);
    pml->assert_held();
    const pmd_t pgt = pmdp_get(pmd);
    if (pmd_none(pgt) || pmd_leaf(pgt)) {
      pml->unlock();
      continue;
    }
    SpinLock* ptl = pte_lockptr(mm->phys, pgt);
    bool success = false;
    {
      SpinNestedGuard nested(ptl, pml, LockClass::kPteLock);
      // The folio lock keeps faults out of the range: the table is empty.
      // Check it is, rather than trust it (a racing uffd ioctl could fill it).
      const pte_t* pte = pte_offset(mm->phys, pgt, addr);
      bool empty = true;
      for (unsigned i = 0; i < PTRS_PER_PTE && empty; i++) empty = pte_none(ptep_get(pte + i));
      if (empty && file_backed_vma_is_retractable(vma)) {
        (void)pmdp_collapse_flush(vma, addr, pmd);
        mm->stats->count(Event::collapse_flush);
        success = true;
      }
      nested.unlock();
    }
    pml->unlock();
    if (success) collapse_free_pte_table(mm, addr, pgt);
  }
}

// collapse_file: the range [start, start + 512) of file f becomes one
// PMD-order folio. SCAN_SUCCEED (khugepaged), SCAN_PTE_MAPPED_HUGEPAGE
// (MADV_COLLAPSE, whose caller maps it), or why not.
int collapse_file(Mm* mm, uint64_t addr, File* f, uint64_t start, CollapseControl* cc) {
  (void)addr;
  const uint64_t end = start + HPAGE_PMD_NR;
  Folio* new_folio = nullptr;
  int result = alloc_charge_folio(&new_folio, mm, cc, PMD_ORDER);
  if (result != SCAN_SUCCEED) return result;
  __folio_set_locked(new_folio);
  const bool is_shmem = file_is_shmem(f);
  if (is_shmem) folio_set_swapbacked(new_folio);

  std::vector<HeldFolio> held;
  for (uint64_t index = start; index < end && result == SCAN_SUCCEED;) {
    Folio* folio = collapse_file_get_folio(f, index, &result);
    if (result != SCAN_SUCCEED) break;
    if (!folio) {  // shmem only: a regular file's hole was read
      // A hole: zeroes in the new folio, unless the whole range is empty
      // (a truncation got there first).
      if (index == start) {
        MutexGuard g(&f->lock);
        if (!file_range_has_entries(f, start, end)) result = SCAN_TRUNCATED;
      }
      index++;
      continue;
    }
    const uint64_t nr = static_cast<uint64_t>(folio_nr_pages(folio));
    result = collapse_file_take(f, folio, index, start, &held);
    index += nr;
  }
  // A regular file: a writer that opened it meanwhile would see a THP in
  // its page cache (do_dentry_open truncates the cache of a file with THPs
  // for a writer; the model has no open): give up.
  if (result == SCAN_SUCCEED && !is_shmem && inode_is_open_for_write(f)) result = SCAN_FAIL;
  if (result == SCAN_SUCCEED) result = collapse_file_copy(mm->phys, new_folio, start, held, mm->stats);
  if (result == SCAN_SUCCEED) result = collapse_file_replace(f, new_folio, start, held);
  if (result != SCAN_SUCCEED) {
    // Rollback: the small folios stay in the page cache, unmapped (faults
    // map them again); the new folio goes.
    collapse_file_release(&held);
    folio_unlock(new_folio);
    folio_put(new_folio);
    return result;
  }
  folio_set_uptodate(new_folio);
  // shmem: the only copy is in memory. A regular file's THP is clean: its
  // data is on disk.
  if (is_shmem) folio_set_dirty(new_folio);
  folio_add_lru(new_folio);
  for (auto& h : held) {
    // Out of the cache: the cache's references, the isolation's and ours go.
    folio_unlock(h.folio);
    folio_put_refs(h.folio, 2 + static_cast<int>(folio_nr_pages(h.folio)));
  }
  cc->collapsed++;
  // Remove the PTE tables, so that the range can be faulted in as huge.
  retract_page_tables(f, start);
  if (!cc->is_khugepaged) result = SCAN_PTE_MAPPED_HUGEPAGE;  // MADV_COLLAPSE maps it
  folio_unlock(new_folio);
  return result;
}

// set_huge_pmd: do_set_pmd for collapse_pte_mapped_thp (a read fault's
// PMD: not writable, not dirty); the mapping takes a reference.
int set_huge_pmd(Mm* mm, Vma* vma, uint64_t haddr, pmd_t* pmd, Folio* folio) REQUIRES_SHARED(mm->mmap_lock) {
  VM_BUG_ON(vma->vm_mm != mm, "set_huge_pmd on another mm's VMA");
  VmFault vmf;
  vmf.vma = vma;
  vmf.address = haddr;
  vmf.real_address = haddr;
  vmf.flags = 0;
  vmf.pmd = pmd;
  if (do_set_pmd(&vmf, folio, &folio->page)) return SCAN_FAIL;
  folio_get(folio);
  return SCAN_SUCCEED;
}

// collapse_pte_mapped_thp's steps 1 and 2 over the locked table at pte: all
// present PTEs map the matching page of folio (else SCAN_FAIL or
// SCAN_PTE_NON_PRESENT), then they are cleared. The number cleared in *nr.
int clear_pte_mapped_thp(Vma* vma, uint64_t haddr, pte_t* pte, Folio* folio, long* nr) {
  Mm* mm = vma->vm_mm;
  for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
    pte_t ptent = ptep_get(pte + i);
    if (pte_none(ptent)) continue;
    if (!pte_present(ptent)) return SCAN_PTE_NON_PRESENT;
    if (pte_pfn(ptent) != folio_pfn(folio) + i) return SCAN_FAIL;  // a CoW copy or another page
  }
  for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
    pte_t ptent = ptep_get(pte + i);
    if (pte_none(ptent)) continue;
    // Shmem is dirty already: the PTE's dirty bit adds nothing. The flush
    // comes with pmdp_collapse_flush.
    entry_set(pte + i, pte_t{0});
    folio_remove_rmap_ptes(folio, folio_page(folio, i), 1, vma);
    (*nr)++;
  }
  (void)haddr;
  (void)mm;
  return SCAN_SUCCEED;
}

}  // namespace

int hpage_collapse_scan_file(Mm* mm, uint64_t addr, File* f, uint64_t start, CollapseControl* cc) {
  int result = SCAN_SUCCEED;
  unsigned present = 0, swap = 0;
  {
    MutexGuard g(&f->lock);
    const uint64_t end = start + HPAGE_PMD_NR;
    for (auto sw = f->swapped.lower_bound(start); sw != f->swapped.end() && sw->first < end; ++sw) {
      swap++;
      if (cc->is_khugepaged && swap > static_cast<unsigned>(cc->settings->max_ptes_swap.load())) {
        mm->stats->count(VmStat::thp_scan_exceed_swap_pte);
        result = SCAN_EXCEED_SWAP_PTE;
        break;
      }
    }
    // The folios of the range, in index order; a folio that starts below
    // start but reaches into it counts too.
    uint64_t s;
    for (uint64_t index = start; result == SCAN_SUCCEED && index < end;) {
      Folio* folio = lookup_locked(f, index, &s);
      if (!folio) {
        index++;
        continue;
      }
      if (folio_order(folio) == PMD_ORDER && s == start) {
        // Maybe PMD-mapped already: the caller looks (no LRU or count check).
        result = SCAN_PTE_MAPPED_HUGEPAGE;
        break;
      }
      if (!folio_test_lru(folio)) {
        result = SCAN_PAGE_LRU;
        break;
      }
      // The scan's own reference, which the kernel takes, is not taken here
      // (the page-cache lock is held): compare without it.
      if (file_folio_expected_refs(folio) != folio_ref_count(folio)) {
        result = SCAN_PAGE_COUNT;
        break;
      }
      present += static_cast<unsigned>(folio_nr_pages(folio));
      index = s + static_cast<uint64_t>(folio_nr_pages(folio));
    }
  }
  cc->ptes_scanned += HPAGE_PMD_NR;
  if (result == SCAN_SUCCEED) {
    if (cc->is_khugepaged && present < HPAGE_PMD_NR - static_cast<unsigned>(cc->settings->max_ptes_none.load())) {
      mm->stats->count(VmStat::thp_scan_exceed_none_pte);
      result = SCAN_EXCEED_NONE_PTE;
    } else {
      result = collapse_file(mm, addr, f, start, cc);
    }
  }
  MM_TRACE("mm_khugepaged_scan_file", "mm={} index={:#x} present={} swap={} result={}", mm->mm_id, start, present, swap,
           result);
  return result;
}

int collapse_pte_mapped_thp(Mm* mm, uint64_t addr, bool install_pmd) {
  mmap_assert_locked(mm);
  const uint64_t haddr = addr & PMD_MASK;
  Vma* vma = vma_lookup(mm, haddr);
  if (!vma || !vma->vm_file || vma->vm_start > haddr || vma->vm_end < haddr + PMD_SIZE) return SCAN_VMA_CHECK;
  pmd_t* pmd;
  int result = find_pmd_or_thp_or_none(mm, haddr, &pmd);
  if (result == SCAN_PMD_MAPPED) return result;
  // The page cache holds a PMD-order folio now, which any fault would map
  // by a PMD whatever the sysfs settings: so ignore them here too.
  if (!thp_vma_allowable_order(vma, vma->vm_flags, TvaType::kForcedCollapse, PMD_ORDER)) return SCAN_VMA_CHECK;
  if (vma->vm_flags & VM_UFFD_WP) return SCAN_PTE_UFFD_WP;
  File* f = vma->vm_file.get();
  Folio* folio = nullptr;
  {
    uint64_t s;
    MutexGuard g(&f->lock);
    folio = lookup_locked(f, linear_page_index(vma, haddr), &s);
    if (folio) folio_get(folio);
  }
  if (!folio) return SCAN_PAGE_NULL;
  folio_lock(folio);
  auto drop = [&](int r) {
    folio_unlock(folio);
    folio_put(folio);
    return r;
  };
  if (folio_order(folio) != PMD_ORDER || folio->page.index != linear_page_index(vma, haddr) ||
      aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f))
    return drop(SCAN_PAGE_COMPOUND);
  result = find_pmd_or_thp_or_none(mm, haddr, &pmd);
  if (result == SCAN_PMD_NONE) return drop(install_pmd ? set_huge_pmd(mm, vma, haddr, pmd, folio) : SCAN_SUCCEED);
  if (result != SCAN_SUCCEED) return drop(result);
  // A PTE table: it may map only pages of this folio, each at its place.
  SpinLock* pml = pmd_lock(mm, pmd);
  pml->assert_held();
  const pmd_t pgt = pmdp_get(pmd);
  if (pmd_none(pgt) || pmd_leaf(pgt)) {
    pml->unlock();
    return drop(SCAN_FAIL);
  }
  long nr = 0;
  {
    SpinNestedGuard nested(pte_lockptr(mm->phys, pgt), pml, LockClass::kPteLock);
    result = clear_pte_mapped_thp(vma, haddr, pte_offset(mm->phys, pgt, haddr), folio, &nr);
    if (result == SCAN_SUCCEED) {
      (void)pmdp_collapse_flush(vma, haddr, pmd);
      mm->stats->count(Event::collapse_flush);
    }
    nested.unlock();
  }
  pml->unlock();
  if (result != SCAN_SUCCEED) return drop(result);
  if (nr) {
    folio_ref_add(folio, -static_cast<int>(nr));  // the cleared PTEs' references
    add_mm_counter(mm, mm_counter_file(folio), -nr);
  }
  collapse_free_pte_table(mm, haddr, pgt);
  if (pmd_none(pmdp_get(pmd)) && install_pmd) return drop(set_huge_pmd(mm, vma, haddr, pmd, folio));
  return drop(SCAN_SUCCEED);
}

}  // namespace mmlab
