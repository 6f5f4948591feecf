// madvise() (mm/madvise.c): argument checks, the lock each behaviour needs,
// the walk over the VMAs of the range (holes are skipped and reported as
// -ENOMEM at the end), the behaviours that change vm_flags (splitting and
// merging VMAs as mprotect does), MADV_DONTNEED (with the huge-page
// alignment rules of hugetlb VMAs), MADV_FREE's lazy freeing
// (madvise_free_pte_range; the PMD leaf in fault/huge_memory.cpp), and
// MADV_POPULATE_*, and MADV_COLD and MADV_PAGEOUT
// (madvise_cold_or_pageout_pte_range: deactivate, or isolate for the
// reclaim_pages of mm/vmscan.cpp).
//
// MADV_COLLAPSE is khugepaged's (reached through mm/khugepaged_hooks.h).
//
// MADV_REMOVE punches a hole in the file behind a shared mapping
// (madvise_remove -> vfs_fallocate, mm/truncate.cpp and mm/shmem.cpp).
//
// MADV_WILLNEED reads swap entries into the swap cache: those of anonymous
// memory's page tables (madvise_willneed, swapin_walk_pmd_entry), and
// those a shmem file keeps for the range (shmem_swapin_range).
//
// Not modelled yet (they succeed as no-ops or fail as noted): MADV_WILLNEED
// of other files (page-cache readahead: the model's files have no backing
// store to read ahead from, and their pages never leave the page cache),
// MADV_HWPOISON/SOFT_OFFLINE (-EINVAL, as without CONFIG_MEMORY_FAILURE).
#include <algorithm>

#include "mm/anon_vma.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/gup_hooks.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/khugepaged_hooks.h"
#include "mm/madvise.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/mseal.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "mm/vma.h"
#include "mm/vmscan.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// uapi advice values the public header does not name.
constexpr int MADV_RANDOM = 1, MADV_SEQUENTIAL = 2, MADV_WILLNEED = 3;
constexpr int MADV_MERGEABLE = 12, MADV_UNMERGEABLE = 13;
constexpr int MADV_DONTDUMP = 16, MADV_DODUMP = 17;

// Read-ahead hints (include/linux/mm.h), only flags for anonymous memory.
constexpr vm_flags_t VM_SEQ_READ = 0x8000, VM_RAND_READ = 0x10000;

bool madvise_behavior_valid(int behavior) {
  switch (behavior) {
    case MADV_DOFORK:
    case MADV_DONTFORK:
    case MADV_NORMAL:
    case MADV_SEQUENTIAL:
    case MADV_RANDOM:
    case MADV_REMOVE:
    case MADV_WILLNEED:
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_FREE:
    case MADV_COLD:
    case MADV_PAGEOUT:
    case MADV_POPULATE_READ:
    case MADV_POPULATE_WRITE:
    case MADV_MERGEABLE:  // CONFIG_KSM
    case MADV_UNMERGEABLE:
    case MADV_HUGEPAGE:  // CONFIG_TRANSPARENT_HUGEPAGE
    case MADV_NOHUGEPAGE:
    case MADV_COLLAPSE:
    case MADV_DONTDUMP:
    case MADV_DODUMP:
    case MADV_WIPEONFORK:
    case MADV_KEEPONFORK:
    case MADV_GUARD_INSTALL:
    case MADV_GUARD_REMOVE:
      return true;
    default:
      return false;
  }
}

enum class MadviseLock : uint8_t { kMmapRead, kMmapWrite, kVmaRead };

// get_lock_mode: flag changes need mmap_lock for write; the rest read it,
// and MADV_DONTNEED/FREE first try the per-VMA lock of a single VMA.
MadviseLock get_lock_mode(int behavior) {
  switch (behavior) {
    case MADV_REMOVE:
    case MADV_WILLNEED:
    case MADV_COLD:
    case MADV_PAGEOUT:
    case MADV_POPULATE_READ:
    case MADV_POPULATE_WRITE:
    case MADV_COLLAPSE:
    case MADV_GUARD_INSTALL:
    case MADV_GUARD_REMOVE:
      return MadviseLock::kMmapRead;
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_FREE:
      return MadviseLock::kVmaRead;
    default:
      return MadviseLock::kMmapWrite;
  }
}

// ---- behaviours that only read the VMA set (mmap_lock read or VMA lock) ----

// madvise_dontneed_free_valid_vma, for the part [start, *end) of vma. A
// hugetlb VMA takes MADV_DONTNEED only, from a huge-page aligned start, and
// *end is aligned down to the huge page size: a caller who rounded the
// length up to PAGE_SIZE may not know the VMA maps huge pages, and must not
// lose the page that only partly fits.
bool madvise_dontneed_free_valid_vma(const Vma* vma, uint64_t start, uint64_t* end, int behavior) {
  if (!is_vm_hugetlb_page(vma)) {
    vm_flags_t forbidden = VM_PFNMAP;
    if (behavior != MADV_DONTNEED_LOCKED) forbidden |= VM_LOCKED;
    return !(vma->vm_flags & forbidden);
  }
  if (behavior != MADV_DONTNEED && behavior != MADV_DONTNEED_LOCKED) return false;
  const uint64_t hsize = vma_kernel_pagesize(vma);
  if (start & (hsize - 1)) return false;
  *end = round_down(*end, hsize);
  return true;
}

// madvise_free_pte_range for [addr, end) inside one PMD: swap entries are
// dropped (a zeroed page is cheaper than a swap-in), poison markers too;
// every folio mapped only here is cleaned (young and dirty cleared in its
// PTEs) and marked lazy-free. A large folio the range covers only in part is
// split first, unless another process may map it or it is locked.
void madvise_free_pte_range(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t end) {
  Mm* mm = vma->vm_mm;
  if (pmd_trans_huge(pmdp_get(pmd)) && madvise_free_huge_pmd(vma, pmd, addr, end)) return;
  MadvisePteWalk w(vma, pmd, addr, end);
  if (!w.lock(addr)) return;
  long nr_swap = 0;
  unsigned nr;
  for (; addr != end; w.advance(nr), addr += nr * PAGE_SIZE) {
    nr = 1;
    pte_t* pte = w.pte();
    pte_t ptent = ptep_get(pte);
    if (pte_none(ptent)) continue;
    if (!pte_present(ptent)) {
      const swp_entry_t entry = pte_to_swp_entry(ptent);
      if (!non_swap_entry(entry)) {
        nr = swap_pte_batch(pte, static_cast<unsigned>((end - addr) >> PAGE_SHIFT), ptent);
        nr_swap -= nr;
        free_swap_and_cache_nr(mm->kernel, entry, nr);
        for (unsigned i = 0; i < nr; i++) ptep_get_and_clear(mm, addr + i * PAGE_SIZE, pte + i);
      } else if (is_pte_marker_entry(entry) && (swp_offset(entry) & PTE_MARKER_POISONED)) {
        ptep_get_and_clear(mm, addr, pte);
      }
      continue;
    }
    Page* page = vm_normal_page(vma, addr, ptent);
    if (!page) continue;
    Folio* folio = page_folio(page);
    if (folio_test_large(folio)) {
      // Mapped entirely inside the range: marked lazy-free whole.
      MadvisePteWalk::LargeFolio step = w.large_folio(folio, addr, &ptent, &nr);
      if (step == MadvisePteWalk::LargeFolio::kStop) break;
      if (step == MadvisePteWalk::LargeFolio::kNext) continue;
    }
    if (folio_test_swapcache(folio) || folio_test_dirty(folio)) {
      if (!folio_trylock(folio)) continue;
      // Shared with another mapping: its PG_dirty cannot be cleared. (A
      // large folio here is mapped entirely by this range, so mapcount ==
      // nr_pages means exclusive.)
      if (folio_mapcount(folio) != folio_nr_pages(folio) ||
          (folio_test_swapcache(folio) && !folio_free_swap(folio))) {
        folio_unlock(folio);
        continue;
      }
      folio_clear_dirty(folio);
      folio_unlock(folio);
    }
    if (pte_young(ptent) || pte_dirty(ptent)) {
      clear_young_dirty_ptes(mm, addr, pte, nr, CYDP_CLEAR_YOUNG | CYDP_CLEAR_DIRTY);
      w.owe_flush();  // tlb_remove_tlb_entries
    }
    folio_mark_lazyfree(folio);
  }
  if (nr_swap) add_mm_counter(mm, MM_SWAPENTS, nr_swap);
}

// madvise_free_single_vma: anonymous private memory only.
int madvise_free_single_vma(Vma* vma, uint64_t start, uint64_t end) {
  if (!vma_is_anonymous(vma)) return -EINVAL;
  Mm* mm = vma->vm_mm;
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    pmd_t* pmd = mm_find_pmd(mm, addr);
    if (!pmd) continue;
    madvise_free_pte_range(vma, pmd, addr, next);
  }
  return 0;
}

int madvise_dontneed_free(Vma* vma, uint64_t start, uint64_t end, int behavior) {
  end = std::min(end, vma->vm_end);
  if (!madvise_dontneed_free_valid_vma(vma, start, &end, behavior)) return -EINVAL;
  if (start == end) return 0;
  if (behavior == MADV_DONTNEED || behavior == MADV_DONTNEED_LOCKED) {
    // madvise_dontneed_single_vma -> zap_page_range_single: its own gather;
    // markers stay, emptied tables go (PT_RECLAIM).
    MmuGather tlb;
    tlb_gather_mmu(&tlb, vma->vm_mm);
    const ZapDetails details{.drop_markers = false, .reclaim_pt = true};
    zap_vma_range(vma, start, end, &details);
    tlb_finish_mmu(&tlb);
    return 0;
  }
  return madvise_free_single_vma(vma, start, end);
}

// ---- MADV_COLD and MADV_PAGEOUT (madvise_cold_or_pageout_pte_range) ----

// MADV_COLD (madvise_cold: deactivate) or MADV_PAGEOUT (madvise_pageout:
// reclaim to swap, discard lazy-free folios) of [start, end) in a VMA that
// passed can_madv_lru_vma(). Large folios the range covers only in part are
// split first; folios another process may map are left alone.
enum class ColdOrPageout : uint8_t { kCold, kPageout };

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

// The PMD-leaf part of madvise_cold_or_pageout_pte_range. true: done with
// this PMD; false: look at the PTEs (the leaf was split, or is gone).
bool cold_or_pageout_pmd(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t end, ColdOrPageout what,
                         std::vector<Folio*>* list) {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  pmd_t orig = pmdp_get(pmd);
  if (!pmd_trans_huge(orig)) {
    ptl->unlock();
    return pmd_none(orig);
  }
  Page* page = vm_normal_page_pmd(vma, addr, orig);
  Folio* folio = page ? page_folio(page) : nullptr;  // nullptr: the huge zero folio
  // Do not interfere with other mappings of this folio.
  if (!folio || folio_maybe_mapped_shared(folio)) {
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
    flush_pmd_tlb_range(vma, addr, addr + PMD_SIZE);
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

// madvise_cold / madvise_pageout for [start, end) of vma (mmap_lock held
// for read), after can_madv_lru_vma().
void madvise_cold_or_pageout_range(Vma* vma, uint64_t start, uint64_t end, ColdOrPageout what) {
  mmap_assert_locked(vma->vm_mm);
  Kernel* k = vma->vm_mm->kernel;
  // madvise_pageout's can_do_file_pageout() and the walk's
  // pageout_anon_only_filter: a process that neither owns the file nor may
  // write it pages out only anonymous memory. The model's processes run as
  // root (inode_owner_or_capable), so file folios are always isolated: the
  // page cache of the ext4 class is dropped or kept by shrink_folio_list,
  // shmem's swapped out (shmem_writeout).
  end = std::min(end, vma->vm_end);
  for (uint64_t addr = std::max(start, vma->vm_start), next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    std::vector<Folio*> list;
    cold_or_pageout_pmd_range(vma, addr, next, what, &list);
    reclaim_pages(k, &list);  // empty for MADV_COLD
  }
}

// ---- MADV_WILLNEED ----

// read_swap_cache_async for MADV_WILLNEED: the slot is read into the swap
// cache and left there; a hint only, so an entry freed meanwhile or a
// failed allocation reads nothing.
void willneed_read_swap_entry(Kernel* k, swp_entry_t entry) {
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return;
  bool fresh = false;
  Folio* folio = read_swap_cache(k, si, entry, &fresh);
  if (!folio) return;
  if (fresh) folio_unlock_swap(folio);  // the read completed: its end unlocks the folio
  folio_put(folio);
}

// swapin_walk_pmd_entry for [addr, end) under one PMD: the slot of each
// swap entry is read into the swap cache (read_swap_cache_async) and left
// there unmapped, so that the fault that maps it later finds it and is
// minor. The PTE lock is not held across a read, which may sleep: each
// entry is read with the lock dropped, as the kernel drops it.
void swapin_walk_pmd_range(Vma* vma, uint64_t addr, uint64_t end) {
  Mm* mm = vma->vm_mm;
  Kernel* k = mm->kernel;
  pmd_t* pmd = mm_find_pmd(mm, addr);
  if (!pmd) return;
  for (; addr < end; addr += PAGE_SIZE) {
    SpinLock* ptl;
    pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
    if (!pte) return;  // no table, or a PMD leaf: no swap entry here
    ptl->assert_held();
    const pte_t ptent = ptep_get(pte);
    ptl->unlock();
    if (!is_swap_pte(ptent)) continue;
    const swp_entry_t entry = pte_to_swp_entry(ptent);
    if (non_swap_entry(entry)) continue;  // migration entries and markers
    willneed_read_swap_entry(k, entry);
  }
}

// shmem_swapin_range: the swap entries the file keeps for the VMA's range
// [start, end) are read into the swap cache; the file keeps its entries,
// so the fault that maps a page later finds the folio there and is minor.
// The kernel reads each with the xarray's RCU dropped, as here with the
// file's lock dropped: an entry freed meanwhile (a truncation) reads
// nothing or a slot that is no longer the file's, which is harmless.
void shmem_swapin_range(Vma* vma, uint64_t start, uint64_t end, File* f) {
  const uint64_t first = vma->vm_pgoff + ((start - vma->vm_start) >> PAGE_SHIFT);
  const uint64_t last = vma->vm_pgoff + ((end - vma->vm_start) >> PAGE_SHIFT);  // exclusive
  std::vector<swp_entry_t> entries;
  {
    MutexGuard g(&f->lock);
    for (auto it = f->swapped.lower_bound(first); it != f->swapped.end() && it->first < last; ++it)
      entries.push_back(it->second);
  }
  for (swp_entry_t entry : entries) willneed_read_swap_entry(vma->vm_mm->kernel, entry);
}

// madvise_willneed: anonymous memory reads the swap entries of its page
// tables, shmem (shared anonymous memory too: shmem_zero_setup gives it a
// file) those of its file. A private mapping of a shmem file reads the
// file's entries only, not those of its CoW copies, as the kernel's.
int madvise_willneed(Vma* vma, uint64_t start, uint64_t end) {
  end = std::min(end, vma->vm_end);
  start = std::max(start, vma->vm_start);
  if (vma->vm_file) {
    File* f = vma->vm_file.get();
    if (f->fs == FsClass::kShmem && start < end) shmem_swapin_range(vma, start, end, f);
    return 0;  // another file's readahead: nothing to read (see the top)
  }
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    swapin_walk_pmd_range(vma, addr, next);
  }
  return 0;
}

// ---- guard regions (v6.13; file-backed VMAs from v6.15) ----

// is_valid_guard_vma: a VMA whose page tables the core manages alone.
// Installing zaps what is mapped, so a locked VMA refuses it; removing
// destroys nothing and is allowed there.
bool is_valid_guard_vma(const Vma* vma, bool allow_locked) {
  vm_flags_t disallowed = VM_SPECIAL | VM_HUGETLB;
  if (!allow_locked) disallowed |= VM_LOCKED;
  return !(vma->vm_flags & disallowed);
}

// The install walk's result for one range: done, or an entry other than
// none or a guard marker is in the way (the range is zapped and walked
// again), or no memory for a page table.
enum class GuardWalk : uint8_t { kDone, kZap, kNoMem };

// guard_install_pte_entry / guard_install_set_pte for [addr, end) under one
// PMD: a missing table is allocated (the walk's install_pte), a THP leaf
// (or a PMD migration entry) asks for the zap.
GuardWalk guard_install_pmd_range(Vma* vma, uint64_t addr, uint64_t end) {
  Mm* mm = vma->vm_mm;
  pud_t* pud = pud_alloc(mm, addr);
  pmd_t* pmd = pud ? pmd_alloc(mm, pud, addr) : nullptr;
  if (!pmd) return GuardWalk::kNoMem;
  if (pmd_none(pmdp_get(pmd)) && !pte_alloc(mm, pmd)) return GuardWalk::kNoMem;
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
  if (!pte) return GuardWalk::kZap;
  ptl->assert_held();
  GuardWalk ret = GuardWalk::kDone;
  for (; addr < end; pte++, addr += PAGE_SIZE) {
    const pte_t ptent = ptep_get(pte);
    if (is_guard_pte_marker(ptent)) continue;
    if (!pte_none(ptent)) {
      ret = GuardWalk::kZap;
      break;
    }
    set_pte_at(mm, addr, pte, swp_entry_to_pte(swp_entry(SWP_PTE_MARKER, PTE_MARKER_GUARD)));
  }
  ptl->unlock();
  return ret;
}

GuardWalk guard_install_walk(Vma* vma, uint64_t start, uint64_t end) {
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    const GuardWalk r = guard_install_pmd_range(vma, addr, next);
    if (r != GuardWalk::kDone) return r;
  }
  return GuardWalk::kDone;
}

// madvise_guard_install: a guard marker in every PTE of the range, so any
// access faults with SIGSEGV. What is mapped there is zapped first (the
// markers already installed stay). The VMA gets an anon_vma now, file
// VMAs too, because fork copies page tables (and so the markers) only of
// VMAs that have one (vma_needs_copy). The kernel gives up after a few rounds
// lost to concurrent faults and restarts the system call; the model goes
// round until the walk wins, which is the same to the caller.
int madvise_guard_install(Vma* vma, uint64_t start, uint64_t end) {
  if (!is_valid_guard_vma(vma, /*allow_locked=*/false)) return -EINVAL;
  if (anon_vma_prepare(vma)) return -ENOMEM;
  const ZapDetails keep_markers{.drop_markers = false};
  for (;;) {
    switch (guard_install_walk(vma, start, end)) {
      case GuardWalk::kDone:
        vma->vm_mm->stats->count(Event::guard_install);
        return 0;
      case GuardWalk::kNoMem:
        return -ENOMEM;
      case GuardWalk::kZap:
        vma->vm_mm->stats->count(Event::guard_zap);
        zap_vma_range(vma, start, end, &keep_markers);
        break;
    }
  }
}

// madvise_guard_remove: clear the guard markers of the range; a THP leaf
// cannot hold one and is skipped, and other entries stay as they are.
int madvise_guard_remove(Vma* vma, uint64_t start, uint64_t end) {
  if (!is_valid_guard_vma(vma, /*allow_locked=*/true)) return -EINVAL;
  Mm* mm = vma->vm_mm;
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    pmd_t* pmd = mm_find_pmd(mm, addr);
    if (!pmd) continue;
    SpinLock* ptl;
    pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
    if (!pte) continue;
    ptl->assert_held();
    for (uint64_t a = addr; a < next; pte++, a += PAGE_SIZE)
      if (is_guard_pte_marker(ptep_get(pte))) ptep_get_and_clear(mm, a, pte);
    ptl->unlock();
  }
  return 0;
}

// can_madv_lru_vma
bool can_madv_lru_vma(const Vma* vma) { return !(vma->vm_flags & (VM_LOCKED | VM_PFNMAP | VM_HUGETLB)); }

// The behaviours of madvise_vma_behavior that leave vm_flags alone. *pprev
// receives the VMA the walk continues after (nullptr: look up again).
int madvise_vma_read_behavior(Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior) {
  *pprev = vma;
  if (!can_madvise_modify(vma, behavior)) return -EPERM;
  switch (behavior) {
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_FREE:
      return madvise_dontneed_free(vma, start, end, behavior);
    case MADV_WILLNEED:
      return madvise_willneed(vma, start, end);
    case MADV_COLD:
    case MADV_PAGEOUT:
      if (!can_madv_lru_vma(vma)) return -EINVAL;
      madvise_cold_or_pageout_range(vma, start, end,
                                    behavior == MADV_COLD ? ColdOrPageout::kCold : ColdOrPageout::kPageout);
      return 0;
    case MADV_COLLAPSE: {
      bool lock_dropped = false;
      int err = mm_madvise_collapse(vma, start, end, &lock_dropped);
      if (lock_dropped) *pprev = nullptr;  // the VMA may be gone: the walk looks up again
      return err;
    }
    case MADV_GUARD_INSTALL:
      return madvise_guard_install(vma, start, end);
    case MADV_GUARD_REMOVE:
      return madvise_guard_remove(vma, start, end);
    default:
      return -EINVAL;
  }
}

// ---- behaviours that change vm_flags (mmap_lock write) ----

// ksm_madvise: only the VMA flag; KSM itself is not modelled.
int ksm_madvise(const Vma* vma, int advice, vm_flags_t* vm_flags) {
  if (advice == MADV_MERGEABLE) {
    if (*vm_flags & VM_MERGEABLE) return 0;
    // vma_ksm_compatible
    if (vma->vm_flags & (VM_SHARED | VM_MAYSHARE | VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_HUGETLB | VM_MIXEDMAP))
      return 0;
    *vm_flags |= VM_MERGEABLE;
  } else {
    if (!(*vm_flags & VM_MERGEABLE)) return 0;
    *vm_flags &= ~VM_MERGEABLE;  // no KSM pages to unmerge
  }
  return 0;
}

// hugepage_madvise
int hugepage_madvise(Vma* vma, int advice, vm_flags_t* vm_flags) {
  if (advice == MADV_HUGEPAGE) {
    *vm_flags &= ~VM_NOHUGEPAGE;
    *vm_flags |= VM_HUGEPAGE;
    // Worth scanning now, without waiting for a fault that may never come.
    mm_khugepaged_enter_vma(vma, *vm_flags);
  } else {
    *vm_flags &= ~VM_HUGEPAGE;
    *vm_flags |= VM_NOHUGEPAGE;
  }
  return 0;
}

// madvise_update_vma
int madvise_update_vma(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, vm_flags_t new_flags)
    REQUIRES(mm->mmap_lock) {
  *pprev = vma;
  if (new_flags == vma->vm_flags) return 0;
  int err = -ENOMEM;
  Vma* v = vma_modify_flags(mm, vma, start, end, new_flags, &err);
  if (!v) return err;
  *pprev = v;
  return 0;
}

// madvise_vma_behavior, flag-changing part.
int madvise_vma_write_behavior(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior)
    REQUIRES(mm->mmap_lock) {
  if (!can_madvise_modify(vma, behavior)) return -EPERM;
  vm_flags_t new_flags = vma->vm_flags;
  int error = 0;
  switch (behavior) {
    case MADV_NORMAL:
      new_flags &= ~(VM_RAND_READ | VM_SEQ_READ);
      break;
    case MADV_SEQUENTIAL:
      new_flags = (new_flags & ~VM_RAND_READ) | VM_SEQ_READ;
      break;
    case MADV_RANDOM:
      new_flags = (new_flags & ~VM_SEQ_READ) | VM_RAND_READ;
      break;
    case MADV_DONTFORK:
      new_flags |= VM_DONTCOPY;
      break;
    case MADV_DOFORK:
      if (new_flags & VM_IO) return -EINVAL;
      new_flags &= ~VM_DONTCOPY;
      break;
    case MADV_WIPEONFORK:
      // Anonymous private memory only.
      if (vma->vm_file || (new_flags & VM_SHARED)) return -EINVAL;
      new_flags |= VM_WIPEONFORK;
      break;
    case MADV_KEEPONFORK:
      new_flags &= ~VM_WIPEONFORK;
      break;
    case MADV_DONTDUMP:
      new_flags |= VM_DONTDUMP;
      break;
    case MADV_DODUMP:
      if (!(new_flags & VM_HUGETLB) && (new_flags & VM_SPECIAL)) return -EINVAL;
      new_flags &= ~VM_DONTDUMP;
      break;
    case MADV_MERGEABLE:
    case MADV_UNMERGEABLE:
      error = ksm_madvise(vma, behavior, &new_flags);
      break;
    case MADV_HUGEPAGE:
    case MADV_NOHUGEPAGE:
      error = hugepage_madvise(vma, behavior, &new_flags);
      break;
    default:
      return -EINVAL;
  }
  if (!error) error = madvise_update_vma(mm, vma, pprev, start, end, new_flags);
  // madvise() reports a temporary lack of kernel memory as -EAGAIN.
  if (error == -ENOMEM) error = -EAGAIN;
  return error;
}

// The walk calls one of the two through this type; the lock mode decides.
// (A plain function pointer: the analysis cannot follow the call, so the
// write-side visitor re-asserts the write lock it was promised.)
using MadviseVisit = int (*)(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior);

int visit_read(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior) {
  (void)mm;
  return madvise_vma_read_behavior(vma, pprev, start, end, behavior);
}

int visit_write(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior) {
  mmap_assert_write_locked(mm);  // do_madvise took it (MadviseLock::kMmapWrite)
  return madvise_vma_write_behavior(mm, vma, pprev, start, end, behavior);
}

// madvise_walk_vmas: apply visit to each VMA piece of [start, end). Holes do
// not stop the walk; they make the result -ENOMEM once everything is done.
int madvise_walk_vmas(Mm* mm, uint64_t start, uint64_t end, int behavior, MadviseVisit visit)
    REQUIRES_SHARED(mm->mmap_lock) {
  int unmapped_error = 0;
  Vma* vma = find_vma(mm, start);
  for (;;) {
    if (!vma) return -ENOMEM;
    if (start < vma->vm_start) {
      unmapped_error = -ENOMEM;
      start = vma->vm_start;
      if (start >= end) break;
    }
    uint64_t piece_end = std::min(vma->vm_end, end);
    Vma* prev = nullptr;
    int error = visit(mm, vma, &prev, start, piece_end, behavior);
    if (error) return error;
    // A merge may have carried the VMA past the piece: skip what it covers.
    if (prev && piece_end < prev->vm_end) piece_end = prev->vm_end;
    if (piece_end >= end) break;
    vma = find_vma(mm, piece_end);
    start = piece_end;
  }
  return unmapped_error;
}

// madvise_remove for the piece [start, end) of vma: the checks, then the
// hole, punched with mmap_lock dropped (vfs_fallocate may sleep on the
// file's locks; the kernel holds a file reference meanwhile, as the VMA may
// go). Returns with mmap_lock held for read again; the caller looks the VMAs
// up afresh.
int madvise_remove(Mm* mm, Vma* vma, uint64_t start, uint64_t end) REQUIRES_SHARED(mm->mmap_lock) {
  if (!can_madvise_modify(vma, MADV_REMOVE)) return -EPERM;
  if (vma->vm_flags & VM_LOCKED) return -EINVAL;
  if (!vma->vm_file) return -EINVAL;
  // vma_is_shared_maywrite: a private mapping, or one of a file opened read-only.
  if ((vma->vm_flags & (VM_SHARED | VM_MAYWRITE)) != (VM_SHARED | VM_MAYWRITE)) return -EACCES;
  const int64_t offset = static_cast<int64_t>((start - vma->vm_start) + (vma->vm_pgoff << PAGE_SHIFT));
  std::shared_ptr<File> f = vma->vm_file;  // get_file
  mmap_read_unlock(mm);
  constexpr int FALLOC_FL_KEEP_SIZE = 0x01, FALLOC_FL_PUNCH_HOLE = 0x02;
  const int error = vfs_fallocate(f.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                                  static_cast<int64_t>(end - start));
  f.reset();  // fput
  mmap_read_lock(mm);
  return error;
}

// madvise_walk_vmas for MADV_REMOVE: as the walk above, but each piece drops
// mmap_lock, so the next VMA is looked up again from where the piece ended
// (mark_mmap_lock_dropped in the kernel).
int madvise_remove_walk(Mm* mm, uint64_t start, uint64_t end) REQUIRES_SHARED(mm->mmap_lock) {
  int unmapped_error = 0;
  while (start < end) {
    Vma* vma = find_vma(mm, start);
    if (!vma) return -ENOMEM;
    if (start < vma->vm_start) {
      unmapped_error = -ENOMEM;
      start = vma->vm_start;
      if (start >= end) break;
    }
    const uint64_t piece_end = std::min(vma->vm_end, end);
    if (int error = madvise_remove(mm, vma, start, piece_end)) return error;
    start = piece_end;
  }
  return unmapped_error;
}

// madvise_populate: fault the whole range in; the errors say why it stopped.
int madvise_populate(Mm* mm, uint64_t start, uint64_t end, int behavior) REQUIRES_SHARED(mm->mmap_lock) {
  long ret = mm_faultin_page_range(mm, start, end, behavior == MADV_POPULATE_WRITE);
  switch (ret) {
    case 0:
      return 0;
    case -EINTR:
    case -EINVAL:  // incompatible mapping or permissions
    case -EHWPOISON:
    case -EFAULT:  // VM_FAULT_SIGBUS or VM_FAULT_SIGSEGV
      return static_cast<int>(ret);
    default:  // -ENOMEM: no VMA or out of memory
      return -ENOMEM;
  }
}

}  // namespace

// The PTL is held exactly while pte_ is not null, a member state the
// analysis cannot follow across calls: unlock() states it (assert_held, a
// run-time check in debug builds) before releasing.
bool MadvisePteWalk::lock(uint64_t addr) {
  pte_ = pte_offset_map_lock(vma_->vm_mm, pmd_, addr, &ptl_);
  return pte_ != nullptr;
}

void MadvisePteWalk::unlock() {
  if (!pte_) return;
  ptl_->assert_held();
  if (flush_) flush_tlb_range(vma_, start_, end_);
  flush_ = false;
  ptl_->unlock();
  pte_ = nullptr;
}

MadvisePteWalk::LargeFolio MadvisePteWalk::large_folio(Folio* folio, uint64_t addr, pte_t* ptent, unsigned* nr) {
  *nr = folio_pte_batch_flags(folio, vma_, pte_, ptent, static_cast<unsigned>((end_ - addr) >> PAGE_SHIFT),
                              FPB_MERGE_YOUNG_DIRTY);
  if (static_cast<long>(*nr) >= folio_nr_pages(folio)) return LargeFolio::kWhole;
  if (folio_maybe_mapped_shared(folio) || !folio_trylock(folio)) return LargeFolio::kNext;
  folio_get(folio);
  unlock();
  const int err = split_folio(folio);
  folio_unlock_swap(folio);
  folio_put(folio);
  if (!lock(addr)) return LargeFolio::kStop;
  if (!err) *nr = 0;  // look at the same address again, now order 0
  return LargeFolio::kNext;
}

int do_madvise(Mm* mm, uint64_t start, uint64_t len_in, int behavior) {
  // madvise_should_skip
  if (!madvise_behavior_valid(behavior)) return -EINVAL;
  uint64_t end = 0;
  if (int err = check_input_range(start, len_in, &end)) return err;
  if (end == start) return 0;

  int error;
  switch (get_lock_mode(behavior)) {
    case MadviseLock::kMmapWrite:
      mmap_write_lock(mm);
      error = madvise_walk_vmas(mm, start, end, behavior, visit_write);
      mmap_write_unlock(mm);
      return error;
    case MadviseLock::kVmaRead:
      // try_vma_read_lock: a range inside one VMA needs no mmap_lock.
      if (Vma* vma = lock_vma_under_rcu(mm, start)) {
        if (end <= vma->vm_end) {
          Vma* prev = nullptr;
          error = madvise_vma_read_behavior(vma, &prev, start, end, behavior);
          vma_end_read(vma);
          return error;
        }
        vma_end_read(vma);
      }
      [[fallthrough]];
    case MadviseLock::kMmapRead:
      mmap_read_lock(mm);
      if (behavior == MADV_POPULATE_READ || behavior == MADV_POPULATE_WRITE)
        error = madvise_populate(mm, start, end, behavior);
      else if (behavior == MADV_REMOVE)
        error = madvise_remove_walk(mm, start, end);
      else
        error = madvise_walk_vmas(mm, start, end, behavior, visit_read);
      mmap_read_unlock(mm);
      return error;
  }
  return -EINVAL;
}

}  // namespace mmlab
