// The collapse of mm/khugepaged.c (v6.18), anonymous memory: the scan of one
// PMD range and collapse_huge_page with its helpers, which khugepaged's scan
// and MADV_COLLAPSE (khugepaged.cpp) share.
//
// The collapse of one range follows collapse_huge_page(): a scan under
// mmap_lock for read (hpage_collapse_scan_pmd), the folio allocated with no
// lock held, swap-in under the read lock, then under mmap_lock for write and
// the VMA write lock: the PMD cleared and flushed, lockless walkers waited
// for (tlb_remove_table_sync_one), the pages isolated with their references
// checked again, copied, and the new folio mapped. The old PTE table is
// deposited under the new PMD (put back on failure): anonymous collapse frees
// no page-table page.
//
// `tune khugepaged.mthp on` applies "khugepaged: add mTHP collapse support"
// v18: the PMD scan records the occupied PTEs and the collapse tries the
// enabled orders from the PMD's down (mthp_collapse). The fix-ups applied to
// the posting are marked "fix-up" below and listed in docs/VARIANTS.md.
//
// shmem collapse (collapse_file, collapse_pte_mapped_thp) is in
// khugepaged_file.cpp. Not modelled: the collapse of other files
// (CONFIG_READ_ONLY_THP_FOR_FS, which the model's kernel lacks), NUMA node
// selection (one node), page idle tracking and MMU notifiers (no secondary
// MMUs). The memcg charge (SCAN_CGROUP_CHARGE_FAIL) and machine-check copies
// (SCAN_COPY_MC) fail only by fault injection (phys/fault_inject.h).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <vector>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "khugepaged/khugepaged_internal.h"
#include "mm/kernel.h"
#include "mm/memcontrol.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "mmlab/trace.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/sched.h"
#include "tlb/tlb.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

// The per-size collapse statistics exist only under the mTHP variant; v6.18
// has none.
void count_mthp_collapse(const CollapseControl* cc, Mm* mm, unsigned order, MthpStat s) {
  if (cc->mthp) mm->stats->count_mthp(order, s);
}

// A THP_SCAN_EXCEED_* event: the vmstat item for PMD-order limits (the
// series counts vmstat for the PMD order only), and its per-size twin.
void count_exceed(const CollapseControl* cc, Mm* mm, unsigned order, VmStat v, MthpStat m) {
  if (is_pmd_order(order)) mm->stats->count(v);
  count_mthp_collapse(cc, mm, order, m);
}

bool pte_none_or_zero(PhysMem* phys, pte_t pte) {
  if (pte_none(pte)) return true;
  return pte_present(pte) && phys->is_zero_pfn(pte_pfn(pte));
}

// pte_swp_uffd_wp_any: a swap entry or PTE marker carrying uffd-wp.
bool pte_swp_uffd_wp_any(pte_t pte) {
  if (!is_swap_pte(pte)) return false;
  if (pte_swp_uffd_wp(pte)) return true;
  swp_entry_t e = pte_to_swp_entry(pte);
  return is_pte_marker_entry(e) && (swp_offset(e) & PTE_MARKER_UFFD_WP);
}

// ---- folio helpers (include/linux/mm.h, mm/vmscan.c, mm/swap_state.c) ----

// folio_expected_ref_count: the references the folio's mappings and the
// swap cache account for; any other is a GUP pin or reference, an
// isolation or a speculative lookup.
int folio_expected_ref_count(const Folio* folio) {
  int refs = 0;
  if (folio_test_anon(folio) && folio_test_swapcache(folio)) refs += 1 << folio_order(folio);
  return refs + folio_mapcount(folio);
}


// ---- the limits: the series' collapse_max_ptes_* helpers. With
// khugepaged.mthp off every order is the PMD's, and they are v6.18's rules. ----

void warn_max_ptes_none_once(Kernel* k) {
  static const char site = 0;
  k->pr_warn_once(&site, fmt::format("khugepaged: mTHP collapse only supports max_ptes_none values of 0 or {}", kMaxPtesLimit));
}

unsigned collapse_max_ptes_none(const CollapseControl* cc, const Vma* vma, unsigned order) {
  // A userfaultfd-armed VMA must see every empty PTE fault.
  if (vma && userfaultfd_armed(vma)) return 0;
  if (!cc->is_khugepaged) return HPAGE_PMD_NR;  // MADV_COLLAPSE: no limit
  const unsigned max_ptes_none = static_cast<unsigned>(cc->settings->max_ptes_none.load());
  if (is_pmd_order(order)) return max_ptes_none;
  // mTHP: 0 never fills a hole, 511 fills any; other values would let a
  // collapse make the next, larger one eligible ("creep").
  if (!max_ptes_none) return 0;
  if (max_ptes_none == kMaxPtesLimit) return (1u << order) - 1;
  warn_max_ptes_none_once(cc->kernel);
  return 0;
}

// mTHP collapse takes no shared or swapped page: either could make the
// range grow into the next order on a later scan.
unsigned collapse_max_ptes_shared(const CollapseControl* cc, unsigned order) {
  if (!cc->is_khugepaged) return HPAGE_PMD_NR;
  return is_pmd_order(order) ? static_cast<unsigned>(cc->settings->max_ptes_shared.load()) : 0;
}

unsigned collapse_max_ptes_swap(const CollapseControl* cc, unsigned order) {
  if (!cc->is_khugepaged) return HPAGE_PMD_NR;
  return is_pmd_order(order) ? static_cast<unsigned>(cc->settings->max_ptes_swap.load()) : 0;
}

}  // namespace

// collapse_allowable_orders: the orders a collapse may produce here. The PMD
// order only, except for khugepaged on anonymous memory under the mTHP variant.
uint64_t collapse_allowable_orders(Vma* vma, vm_flags_t vm_flags, const CollapseControl* cc) {
  const TvaType type = cc->is_khugepaged ? TvaType::kKhugepaged : TvaType::kForcedCollapse;
  const uint64_t orders = cc->mthp && cc->is_khugepaged && vma_is_anonymous(vma) ? THP_ORDERS_ALL_ANON : BIT(PMD_ORDER);
  return thp_vma_allowable_orders(vma, vm_flags, type, orders);
}

// ---- the mm: exiting or THP-disabled (hpage_collapse_test_exit*) ----

bool hpage_collapse_test_exit(const Mm* mm) { return mm->mm_users.load(std::memory_order_acquire) == 0; }
bool hpage_collapse_test_exit_or_disable(const Mm* mm) {
  return hpage_collapse_test_exit(mm) || mm->test_flag(MMF_DISABLE_THP);
}

// hugepage_vma_revalidate: after mmap_lock was dropped, the VMA at address
// must still be one this collapse may work on.
int hugepage_vma_revalidate(Mm* mm, uint64_t address, bool expect_anon, Vma** vmap, const CollapseControl* cc,
                            unsigned order) REQUIRES_SHARED(mm->mmap_lock) {
  const TvaType type = cc->is_khugepaged ? TvaType::kKhugepaged : TvaType::kForcedCollapse;
  if (hpage_collapse_test_exit_or_disable(mm)) return SCAN_ANY_PROCESS;
  Vma* vma = find_vma(mm, address);
  *vmap = vma;
  if (!vma) return SCAN_VMA_NULL;
  if (!thp_vma_suitable_order(vma, address, order)) return SCAN_ADDRESS_RANGE;
  if (!thp_vma_allowable_order(vma, vma->vm_flags, type, order)) return SCAN_VMA_CHECK;
  // The range may have been unmapped and mapped again, to a file.
  if (expect_anon && (!vma->anon_vma || !vma_is_anonymous(vma))) return SCAN_PAGE_ANON;
  return SCAN_SUCCEED;
}

int check_pmd_state(pmd_t* pmd) {
  pmd_t pmde = pmdp_get(pmd);
  if (pmd_none(pmde)) return SCAN_PMD_NONE;
  if (!pmd_present(pmde)) return SCAN_PMD_NULL;
  if (pmd_trans_huge(pmde)) return SCAN_PMD_MAPPED;
  if (pmd_bad(pmde)) return SCAN_PMD_NULL;
  return SCAN_SUCCEED;
}

int find_pmd_or_thp_or_none(Mm* mm, uint64_t address, pmd_t** pmd) {
  *pmd = mm_find_pmd(mm, address);
  if (!*pmd) return SCAN_PMD_NULL;
  return check_pmd_state(*pmd);
}

namespace {

int check_pmd_still_valid(Mm* mm, uint64_t address, pmd_t* pmd) {
  pmd_t* new_pmd;
  int result = find_pmd_or_thp_or_none(mm, address, &new_pmd);
  if (result != SCAN_SUCCEED) return result;
  if (new_pmd != pmd) return SCAN_FAIL;
  return SCAN_SUCCEED;
}

// __collapse_huge_page_swapin: bring the range's swapped-out pages in.
// mmap_lock held for read; on failure it has been released. Opt-out: the
// lock's state on return depends on the result, which the analysis cannot
// express.
int __collapse_huge_page_swapin(Mm* mm, Vma* vma, uint64_t start_addr, pmd_t* pmd, const CollapseControl* cc,
                                unsigned order) NO_THREAD_SAFETY_ANALYSIS {
  mmap_assert_locked(mm);
  const uint64_t end = start_addr + (PAGE_SIZE << order);
  for (uint64_t addr = start_addr; addr < end; addr += PAGE_SIZE) {
    pmd_t pmdval;
    pte_t orig;
    {
      PteTableReadSection rcu(mm);
      pte_t* pte = pte_offset_map(mm, pmd, addr, &pmdval);
      if (!pte) {
        mmap_read_unlock(mm);
        return SCAN_PMD_NULL;
      }
      orig = ptep_get(pte);
    }
    if (pte_none(orig) || pte_present(orig)) continue;
    // An mTHP collapse takes no swapped-out page.
    if (!is_pmd_order(order)) {
      count_mthp_collapse(cc, mm, order, MthpStat::collapse_exceed_swap_pte);
      mmap_read_unlock(mm);
      return SCAN_EXCEED_SWAP_PTE;
    }
    VmFault vmf;
    vmf.vma = vma;
    vmf.address = addr;
    vmf.real_address = addr;
    vmf.flags = FAULT_FLAG_ALLOW_RETRY;
    vmf.pmd = pmd;
    vmf.orig_pte = orig;
    vm_fault_t ret = do_swap_page(&vmf);
    // The model's do_swap_page sleeps on the folio lock instead of
    // returning VM_FAULT_RETRY; an error leaves the swap entry in place.
    if (ret & VM_FAULT_RETRY) return SCAN_PAGE_LOCK;
    if (ret & VM_FAULT_ERROR) {
      mmap_read_unlock(mm);
      return SCAN_FAIL;
    }
  }
  return SCAN_SUCCEED;
}

}  // namespace

int alloc_charge_folio(Folio** foliop, Mm* mm, const CollapseControl* cc, unsigned order) {
  // khugepaged/defrag picks GFP_TRANSHUGE or GFP_TRANSHUGE_LIGHT: the same
  // to an allocator without reclaim or compaction.
  const gfp_t gfp = GFP_TRANSHUGE;
  Folio* folio = mm->phys->folio_alloc(gfp, order);
  if (!folio) {
    *foliop = nullptr;
    if (is_pmd_order(order)) mm->stats->count(VmStat::thp_collapse_alloc_failed);
    count_mthp_collapse(cc, mm, order, MthpStat::collapse_alloc_failed);
    return SCAN_ALLOC_HUGE_PAGE_FAIL;
  }
  if (is_pmd_order(order)) mm->stats->count(VmStat::thp_collapse_alloc);
  count_mthp_collapse(cc, mm, order, MthpStat::collapse_alloc);
  if (mem_cgroup_charge(folio, mm->phys)) {
    folio_put(folio);
    *foliop = nullptr;
    return SCAN_CGROUP_CHARGE_FAIL;
  }
  *foliop = folio;
  return SCAN_SUCCEED;
}

namespace {

// ---- isolation and copy ----

void release_pte_folio(Folio* folio) {
  folio_unlock(folio);
  folio_putback_lru(folio);
}

// Undo the isolation of the small folios mapped by [pte, end) and of the
// large ones on compound_pagelist.
void release_pte_pages(PhysMem* phys, pte_t* pte, pte_t* end, std::vector<Folio*>* compound_pagelist) {
  while (--end >= pte) {
    pte_t pteval = ptep_get(end);
    if (pte_none(pteval)) continue;
    VM_BUG_ON(!pte_present(pteval), "a non-present PTE was isolated");
    if (phys->is_zero_pfn(pte_pfn(pteval))) continue;
    Folio* folio = page_folio(phys->pfn_to_page(pte_pfn(pteval)));
    if (folio_test_large(folio)) continue;
    release_pte_folio(folio);
  }
  for (Folio* folio : *compound_pagelist) release_pte_folio(folio);
  compound_pagelist->clear();
}

// __collapse_huge_page_isolate: the second pass, over the detached table
// (its PTL held): every page locked, isolated from the LRU and with no
// reference beyond its mappings, so no GUP can hold one now or reach one later.
int __collapse_huge_page_isolate(Vma* vma, uint64_t start_addr, pte_t* pte, const CollapseControl* cc, unsigned order,
                                 std::vector<Folio*>* compound_pagelist) {
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  table_page_of(phys, pte)->pt.ptl.assert_held();
  const unsigned max_ptes_none = collapse_max_ptes_none(cc, vma, order);
  const unsigned max_ptes_shared = collapse_max_ptes_shared(cc, order);
  const unsigned nr_pages = 1u << order;
  unsigned none_or_zero = 0, shared = 0, referenced = 0;
  int result = SCAN_FAIL;
  unsigned i = 0;
  for (; i < nr_pages; i++) {
    const uint64_t addr = start_addr + i * PAGE_SIZE;
    const pte_t pteval = ptep_get(pte + i);
    if (pte_none_or_zero(phys, pteval)) {
      if (++none_or_zero > max_ptes_none) {
        result = SCAN_EXCEED_NONE_PTE;
        count_exceed(cc, mm, order, VmStat::thp_scan_exceed_none_pte, MthpStat::collapse_exceed_none_pte);
        goto out;
      }
      continue;
    }
    if (!pte_present(pteval)) {
      result = SCAN_PTE_NON_PRESENT;
      goto out;
    }
    if (pte_uffd_wp(pteval)) {
      result = SCAN_PTE_UFFD_WP;
      goto out;
    }
    {
      Page* page = vm_normal_page(vma, addr, pteval);
      if (!page) {
        result = SCAN_PAGE_NULL;
        goto out;
      }
      Folio* folio = page_folio(page);
      VM_BUG_ON_FOLIO(!folio_test_anon(folio), folio, "collapse of a non-anonymous folio");
      if (folio_maybe_mapped_shared(folio)) {
        if (++shared > max_ptes_shared) {
          result = SCAN_EXCEED_SHARED_PTE;
          count_exceed(cc, mm, order, VmStat::thp_scan_exceed_share_pte, MthpStat::collapse_exceed_shared_pte);
          goto out;
        }
      }
      // mTHP: a range some folio of this order or larger covers already.
      if (!is_pmd_order(order) && folio_order(folio) >= order) {
        result = SCAN_PTE_MAPPED_HUGEPAGE;
        goto out;
      }
      bool seen = false;
      if (folio_test_large(folio))
        for (Folio* f : *compound_pagelist) seen |= f == folio;
      if (!seen) {
        // The folio lock keeps split_huge_page (and swap-out) away.
        if (!folio_trylock(folio)) {
          result = SCAN_PAGE_LOCK;
          goto out;
        }
        // Any reference beyond the mappings: a GUP pin or reference. The
        // table is detached, so this mm cannot take a new one; another mm
        // sharing the page can only CoW it, never write it.
        if (folio_expected_ref_count(folio) != folio_ref_count(folio)) {
          folio_unlock(folio);
          result = SCAN_PAGE_COUNT;
          goto out;
        }
        if (!folio_isolate_lru(folio)) {
          folio_unlock(folio);
          result = SCAN_DEL_PAGE_LRU;
          goto out;
        }
        if (folio_test_large(folio)) compound_pagelist->push_back(folio);
        mm->stats->count(Event::collapse_isolated);
      }
      // khugepaged's referenced rule (young PTE or referenced folio; the
      // model has no page-idle tracking and no secondary MMU).
      if (cc->is_khugepaged && (pte_young(pteval) || folio_test_referenced(folio))) referenced++;
    }
  }
  if (cc->is_khugepaged && !referenced) {
    result = SCAN_LACK_REFERENCED_PAGE;
  } else {
    return SCAN_SUCCEED;
  }
out:
  release_pte_pages(phys, pte, pte + i, compound_pagelist);
  return result;
}

// __collapse_huge_page_copy_succeeded: the old PTEs go and their folios
// lose the mapping; none and zero-page slots become anon rss.
void __collapse_huge_page_copy_succeeded(pte_t* pte, Vma* vma, uint64_t address, SpinLock* ptl, unsigned order,
                                         std::vector<Folio*>* compound_pagelist) {
  // Label: the copy is made, the old PTEs not yet cleared.
  sched::point("collapse.before_clear", sched::Op::kLabel, entry_object(pte));
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  const unsigned nr_pages = 1u << order;
  unsigned nr_ptes;
  for (unsigned i = 0; i < nr_pages; i += nr_ptes, address += nr_ptes * PAGE_SIZE) {
    nr_ptes = 1;
    pte_t* _pte = pte + i;
    const pte_t pteval = ptep_get(_pte);
    if (pte_none_or_zero(phys, pteval)) {
      add_mm_counter(mm, MM_ANONPAGES, 1);
      if (pte_none(pteval)) continue;
      ptl->lock(LockClass::kPteLock);  // mostly unnecessary: the table is detached
      entry_xchg(_pte, pte_t{0});
      ptl->unlock();
      continue;
    }
    Page* src_page = phys->pfn_to_page(pte_pfn(pteval));
    Folio* src = page_folio(src_page);
    if (folio_test_large(src))
      nr_ptes = folio_pte_batch(src, _pte, pteval, nr_pages - i);
    else
      release_pte_folio(src);
    ptl->lock(LockClass::kPteLock);
    for (unsigned j = 0; j < nr_ptes; j++) entry_xchg(_pte + j, pte_t{0});  // the flush was pmdp_collapse_flush's
    folio_remove_rmap_ptes(src, src_page, static_cast<int>(nr_ptes), vma);
    ptl->unlock();
    free_swap_cache(src);
    folio_put_refs(src, static_cast<int>(nr_ptes));
  }
  for (Folio* src : *compound_pagelist) {
    folio_unlock(src);
    free_swap_cache(src);
    folio_putback_lru(src);
  }
  compound_pagelist->clear();
}

// __collapse_huge_page_copy_failed: a machine check during the copy. The
// detached table goes back first (the pages are still isolated and locked,
// so no rmap walker needs the anon_vma lock for it), then the isolated pages
// are released, mapped as before.
void __collapse_huge_page_copy_failed(pte_t* pte, pmd_t* pmd, pmd_t orig_pmd, Vma* vma, unsigned order,
                                      std::vector<Folio*>* compound_pagelist) {
  Mm* mm = vma->vm_mm;
  SpinLock* pmd_ptl = pmd_lock(mm, pmd);
  pmd_ptl->assert_held();
  VM_BUG_ON(!pmd_none(pmdp_get(pmd)), "collapse: PMD filled while detached");
  entry_set(pmd, mk_table_pmd(pmd_pfn(orig_pmd)));  // pmd_populate
  pmd_ptl->unlock();
  release_pte_pages(mm->phys, pte, pte + (1u << order), compound_pagelist);
}

// __collapse_huge_page_copy: the contents into the new folio, with neither
// the PTL nor the anon_vma lock held (the pages are isolated and locked).
// copy_mc_user_highpage may meet a machine check (SCAN_COPY_MC): then the
// old mapping is restored and nothing was collapsed.
int __collapse_huge_page_copy(pte_t* pte, Folio* folio, pmd_t* pmd, pmd_t orig_pmd, Vma* vma, uint64_t address,
                              SpinLock* ptl, unsigned order, std::vector<Folio*>* compound_pagelist,
                              CollapseControl* cc) {
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  const unsigned nr_pages = 1u << order;
  int result = SCAN_SUCCEED;
  for (unsigned i = 0; i < nr_pages; i++) {
    const pte_t pteval = ptep_get(pte + i);
    void* dst = phys->page_address(folio_page(folio, i));
    if (pte_none_or_zero(phys, pteval)) {
      zero_frames(phys, dst, PAGE_SIZE);  // clear_user_highpage
      mm->stats->count(Event::collapse_zeroed, PAGE_SIZE);
      continue;
    }
    if (copy_mc_user_highpage(phys, dst, phys->pfn_address(pte_pfn(pteval)))) {
      result = SCAN_COPY_MC;
      break;
    }
    mm->stats->count(Event::collapse_copied, PAGE_SIZE);
    if (frame_is_zero(dst)) mm->stats->count(Event::collapse_zero_subpages);
    cc->bytes_copied += PAGE_SIZE;
  }
  if (result == SCAN_SUCCEED) {
    __collapse_huge_page_copy_succeeded(pte, vma, address, ptl, order, compound_pagelist);
  } else
    __collapse_huge_page_copy_failed(pte, pmd, orig_pmd, vma, order, compound_pagelist);
  return result;
}

// collapse_huge_page: collapse [address, address + (PAGE_SIZE << order))
// into one new folio. Entered and left with mmap_lock not held (the
// series' patch 5; v6.18 drops it first thing, which is the same).
// Opt-out: whether __collapse_huge_page_swapin kept mmap_lock is its result.
int collapse_huge_page(Mm* mm, uint64_t address, int referenced, int unmapped, CollapseControl* cc,
                       unsigned order) NO_THREAD_SAFETY_ANALYSIS {
  (void)referenced;
  MM_TRACE_SLICE("mm_collapse_huge_page", "address={:#x} order={}", address, order);
  const uint64_t start_addr = address;
  const uint64_t pmd_addr = start_addr & PMD_MASK;
  const uint64_t end_addr = start_addr + (PAGE_SIZE << order);
  std::vector<Folio*> compound_pagelist;
  pmd_t* pmd = nullptr;
  pmd_t _pmd{0};
  pte_t* pte = nullptr;
  SpinLock* pte_ptl = nullptr;
  Folio* folio = nullptr;
  Vma* vma = nullptr;
  bool anon_vma_locked = false;
  int result = SCAN_FAIL;
  CollapseTimer timer(mm, &result);
  mm->stats->count(Event::collapse_attempt);

  result = alloc_charge_folio(&folio, mm, cc, order);
  if (result != SCAN_SUCCEED) goto out_nolock;

  mmap_read_lock(mm);
  result = hugepage_vma_revalidate(mm, pmd_addr, /*expect_anon=*/true, &vma, cc, order);
  // fix-up: an mTHP collapse clears the whole PMD, so the whole PMD range
  // must still lie in this one VMA (v18 checks only the target range, and
  // write-locks only this VMA: a fault under another VMA's lock could
  // install a table or a THP in the cleared PMD).
  if (result == SCAN_SUCCEED && !is_pmd_order(order) && (vma->vm_start > pmd_addr || vma->vm_end < pmd_addr + PMD_SIZE))
    result = SCAN_ADDRESS_RANGE;
  if (result != SCAN_SUCCEED) {
    mmap_read_unlock(mm);
    goto out_nolock;
  }
  result = find_pmd_or_thp_or_none(mm, pmd_addr, &pmd);
  if (result != SCAN_SUCCEED) {
    mmap_read_unlock(mm);
    goto out_nolock;
  }
  if (unmapped) {
    // Returns with mmap_lock released when it fails.
    result = __collapse_huge_page_swapin(mm, vma, start_addr, pmd, cc, order);
    if (result != SCAN_SUCCEED) goto out_nolock;
  }
  mmap_read_unlock(mm);

  // Nothing but GUP-fast reaches the page tables from here on: mmap_lock
  // for write and the VMA write lock keep faults, GUP and layout changes
  // out, the anon_vma lock and the folio locks keep rmap walkers out.
  mmap_write_lock(mm);
  timer.mmap_write_locked();
  result = hugepage_vma_revalidate(mm, pmd_addr, /*expect_anon=*/true, &vma, cc, order);
  if (result == SCAN_SUCCEED && !is_pmd_order(order) && (vma->vm_start > pmd_addr || vma->vm_end < pmd_addr + PMD_SIZE))
    result = SCAN_ADDRESS_RANGE;  // fix-up: as above
  if (result != SCAN_SUCCEED) goto out_up_write;
  vma_start_write(vma);
  result = check_pmd_still_valid(mm, pmd_addr, pmd);
  if (result != SCAN_SUCCEED) goto out_up_write;

  vma->anon_vma->rwsem.down_write();  // anon_vma_lock_write
  anon_vma_locked = true;
  {
    // (The MMU-notifier range would open here: no secondary MMUs.)
    SpinLock* pmd_ptl = pmd_lock(mm, pmd);
    // GUP-fast that read the old entry sees the change when it re-checks
    // the PMD after taking its reference, and backs off.
    _pmd = pmdp_collapse_flush(vma, pmd_addr, pmd);
    mm->stats->count(Event::collapse_flush);
    pmd_ptl->unlock();
  }
  // Label: the PMD is cleared and flushed, GUP-fast walkers not yet waited
  // for (2ba99c5e0881's sync comes next).
  sched::point("collapse.after_flush", sched::Op::kLabel, entry_object(pmd));
  // Wait for every GUP-fast walker that may have read the old PMD before
  // it was cleared: after this, any reference it took is in a refcount.
  // revert.collapse-sync (before 2ba99c5e0881) goes on at once, as on an
  // architecture whose TLB flush sends no IPI that a walker would hold off.
  if (!mm->kernel->settings.reverted(Revert::kCollapseSync)) {
    tlb_remove_table_sync_one(mm);
    mm->stats->count(Event::collapse_table_sync);
  }

  pte = pte_offset_map_lock(mm, &_pmd, start_addr, &pte_ptl);
  if (pte) {
    result = __collapse_huge_page_isolate(vma, start_addr, pte, cc, order, &compound_pagelist);
    pte_ptl->unlock();
    // Label: the folios isolated and their references checked, nothing copied.
    sched::point("collapse.after_isolate", sched::Op::kLabel, entry_object(pmd));
  } else {
    result = SCAN_PMD_NULL;
  }
  if (result != SCAN_SUCCEED) {
    // Put the table back: pmd_populate, never set_pmd_at for a table.
    SpinLock* pmd_ptl = pmd_lock(mm, pmd);
    VM_BUG_ON(!pmd_none(pmdp_get(pmd)), "collapse: PMD filled while detached");
    entry_set(pmd, mk_table_pmd(pmd_pfn(_pmd)));
    pmd_ptl->unlock();
    goto out_up_write;
  }
  // PMD collapse: every page is isolated and locked, rmap walkers cannot
  // reach them. mTHP: PTEs outside the range still map folios rmap can
  // reach through a PMD that is now none, so the lock stays until the
  // table is back.
  if (is_pmd_order(order)) {
    vma->anon_vma->rwsem.up_write();
    anon_vma_locked = false;
  }
  {
    CollapseTimer::Span copying = timer.copy();
    result = __collapse_huge_page_copy(pte, folio, pmd, _pmd, vma, start_addr, pte_ptl, order, &compound_pagelist, cc);
  }
  if (result != SCAN_SUCCEED) goto out_up_write;
  folio_set_uptodate(folio);  // __folio_mark_uptodate: the copy is visible before the mapping
  {
    SpinLock* pmd_ptl = pmd_lock(mm, pmd);
    VM_BUG_ON(!pmd_none(pmdp_get(pmd)), "collapse: PMD filled while detached");
    if (is_pmd_order(order)) {
      pgtable_trans_huge_deposit(mm, pmd, mm->phys->pfn_to_page(pmd_pfn(_pmd)));
      map_anon_folio_pmd_nopf(folio, pmd, vma, pmd_addr);
    } else {
      // The table is still detached: the PTEs are written before the PMD
      // makes them reachable again.
      map_anon_folio_pte_nopf(folio, pte, vma, start_addr, /*uffd_wp=*/false);
      entry_set(pmd, mk_table_pmd(pmd_pfn(_pmd)));
    }
    pmd_ptl->unlock();
  }
  folio = nullptr;
  result = SCAN_SUCCEED;
  mm->stats->count(Event::collapse_success);
  cc->collapsed++;

out_up_write:
  if (anon_vma_locked) vma->anon_vma->rwsem.up_write();
  timer.mmap_write_unlocking();
  mmap_write_unlock(mm);
out_nolock:
  if (folio) folio_put(folio);
  (void)end_addr;
  return result;
}

int mthp_collapse(Mm* mm, uint64_t address, int referenced, int unmapped, CollapseControl* cc, uint64_t enabled_orders);

}  // namespace

// hpage_collapse_scan_pmd: the first pass, under mmap_lock for read and
// the PTL; on success the collapse itself, which returns with mmap_lock
// released (*mmap_locked false). Opt-out: the lock's state on return is the
// value of *mmap_locked, which the analysis cannot follow.
int hpage_collapse_scan_pmd(Mm* mm, Vma* vma, uint64_t start_addr, bool* mmap_locked, CollapseControl* cc)
    NO_THREAD_SAFETY_ANALYSIS {
  PhysMem* phys = mm->phys;
  MM_TRACE("mm_khugepaged_scan_pmd", "address={:#x}", start_addr);
  const unsigned max_ptes_shared = collapse_max_ptes_shared(cc, PMD_ORDER);
  const unsigned max_ptes_swap = collapse_max_ptes_swap(cc, PMD_ORDER);
  unsigned max_ptes_none = collapse_max_ptes_none(cc, vma, PMD_ORDER);
  unsigned none_or_zero = 0, shared = 0, referenced = 0, unmapped = 0;
  pmd_t* pmd;
  SpinLock* ptl;
  pte_t* pte;
  uint64_t enabled_orders;
  mm->stats->count(Event::collapse_scan_pmd);

  int result = find_pmd_or_thp_or_none(mm, start_addr, &pmd);
  if (result != SCAN_SUCCEED) return result;
  cc->present.reset();
  cc->swapped.reset();
  enabled_orders = collapse_allowable_orders(vma, vma->vm_flags, cc);
  // With any mTHP order enabled the whole range is scanned, to fill the
  // occupancy bitmap; mthp_collapse applies each order's limit.
  if (enabled_orders != BIT(PMD_ORDER)) max_ptes_none = kMaxPtesLimit;

  pte = pte_offset_map_lock(mm, pmd, start_addr, &ptl);
  if (!pte) return SCAN_PMD_NULL;
  for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
    const uint64_t addr = start_addr + i * PAGE_SIZE;
    const pte_t pteval = ptep_get(pte + i);
    mm->stats->count(Event::collapse_ptes_scanned);
    cc->ptes_scanned++;
    if (pte_none_or_zero(phys, pteval)) {
      if (++none_or_zero > max_ptes_none) {
        result = SCAN_EXCEED_NONE_PTE;
        count_exceed(cc, mm, PMD_ORDER, VmStat::thp_scan_exceed_none_pte, MthpStat::collapse_exceed_none_pte);
        goto out_unmap;
      }
      continue;
    }
    if (!pte_present(pteval)) {
      if (++unmapped > max_ptes_swap) {
        result = SCAN_EXCEED_SWAP_PTE;
        count_exceed(cc, mm, PMD_ORDER, VmStat::thp_scan_exceed_swap_pte, MthpStat::collapse_exceed_swap_pte);
        goto out_unmap;
      }
      // Always strict with uffd-wp swap entries and markers (see below).
      if (pte_swp_uffd_wp_any(pteval)) {
        result = SCAN_PTE_UFFD_WP;
        goto out_unmap;
      }
      cc->swapped.set(i);
      continue;
    }
    // A uffd-wp PTE would need the new PMD write-protected too, and would
    // bring userfaults for pages outside the registered range: no collapse.
    if (pte_uffd_wp(pteval)) {
      result = SCAN_PTE_UFFD_WP;
      goto out_unmap;
    }
    {
      Page* page = vm_normal_page(vma, addr, pteval);
      if (!page) {
        result = SCAN_PAGE_NULL;
        goto out_unmap;
      }
      Folio* folio = page_folio(page);
      if (!folio_test_anon(folio)) {
        result = SCAN_PAGE_ANON;
        goto out_unmap;
      }
      // A page counts as shared if any part of its folio is.
      if (folio_maybe_mapped_shared(folio)) {
        if (++shared > max_ptes_shared) {
          result = SCAN_EXCEED_SHARED_PTE;
          count_exceed(cc, mm, PMD_ORDER, VmStat::thp_scan_exceed_share_pte, MthpStat::collapse_exceed_shared_pte);
          goto out_unmap;
        }
      }
      cc->present.set(i);
      if (!folio_test_lru(folio)) {
        result = SCAN_PAGE_LRU;
        goto out_unmap;
      }
      if (folio_test_locked(folio)) {
        result = SCAN_PAGE_LOCK;
        goto out_unmap;
      }
      // Racy here (a mapping may be on its way); the isolation checks again.
      if (folio_expected_ref_count(folio) != folio_ref_count(folio)) {
        result = SCAN_PAGE_COUNT;
        goto out_unmap;
      }
      if (cc->is_khugepaged && (pte_young(pteval) || folio_test_referenced(folio))) referenced++;
    }
  }
  if (cc->is_khugepaged && (!referenced || (unmapped && referenced < HPAGE_PMD_NR / 2)))
    result = SCAN_LACK_REFERENCED_PAGE;
  else
    result = SCAN_SUCCEED;
out_unmap:
  ptl->unlock();
  if (result == SCAN_SUCCEED) {
    mmap_read_unlock(mm);
    *mmap_locked = false;
    // fix-up: with the PMD order the only one (always for MADV_COLLAPSE,
    // and all of v6.18), the collapse's own result is the scan's, as it was
    // before the series; v18's mthp_collapse() reports only "collapsed
    // something or SCAN_FAIL", which turned every MADV_COLLAPSE failure
    // into -EINVAL.
    if (enabled_orders == BIT(PMD_ORDER))
      result = collapse_huge_page(mm, start_addr, static_cast<int>(referenced), static_cast<int>(unmapped), cc, PMD_ORDER);
    else
      result = mthp_collapse(mm, start_addr, static_cast<int>(referenced), static_cast<int>(unmapped), cc, enabled_orders);
  }
  return result;
}
namespace {


// mthp_collapse (v18): try the enabled orders from the PMD's down over the
// bitmap the scan filled, depth first (left half before right), each range
// whose occupancy meets its order's max_ptes_none. mmap_lock not held.
int mthp_collapse(Mm* mm, uint64_t address, int referenced, int unmapped, CollapseControl* cc, uint64_t enabled_orders) {
  struct Range {
    unsigned offset, order;
  };
  std::vector<Range> stack{{0, PMD_ORDER}};
  unsigned collapsed = 0;
  int last_result = SCAN_FAIL;
  bool alloc_failed = false;
  while (!stack.empty()) {
    const Range r = stack.back();
    stack.pop_back();
    const unsigned nr_ptes = 1u << r.order;
    if (enabled_orders & BIT(r.order)) {
      // fix-up: v18 passed the VMA here, used after mmap_lock was dropped
      // (the posted follow-up passes NULL, as here).
      const unsigned max_ptes_none = collapse_max_ptes_none(cc, nullptr, r.order);
      unsigned occupied = 0, swapped = 0;
      for (unsigned i = r.offset; i < r.offset + nr_ptes; i++) {
        occupied += cc->present[i];
        swapped += cc->swapped[i];
      }
      // fix-up: an mTHP range holding a swap PTE is refused here, as the
      // swap-in would refuse it, without allocating a folio first.
      if (!is_pmd_order(r.order) && swapped) {
        count_mthp_collapse(cc, mm, r.order, MthpStat::collapse_exceed_swap_pte);
        last_result = SCAN_EXCEED_SWAP_PTE;
      } else if (occupied >= nr_ptes - max_ptes_none) {
        const int ret = collapse_huge_page(mm, address + r.offset * PAGE_SIZE, referenced, unmapped, cc, r.order);
        last_result = ret;
        bool next_order = false;
        switch (ret) {
          case SCAN_SUCCEED:
            collapsed += nr_ptes;
            [[fallthrough]];
          case SCAN_PTE_MAPPED_HUGEPAGE:
            continue;  // the next candidate; nothing smaller inside this one
          // Results after which a smaller order may still succeed.
          case SCAN_ALLOC_HUGE_PAGE_FAIL:
            alloc_failed = true;  // fix-up: reported, so that khugepaged's alloc sleep happens
            [[fallthrough]];
          case SCAN_LACK_REFERENCED_PAGE:
          case SCAN_EXCEED_NONE_PTE:
          case SCAN_EXCEED_SWAP_PTE:
          case SCAN_EXCEED_SHARED_PTE:
          case SCAN_PAGE_LOCK:
          case SCAN_PAGE_COUNT:
          case SCAN_PAGE_NULL:
          case SCAN_DEL_PAGE_LRU:
          case SCAN_PTE_NON_PRESENT:
          case SCAN_PTE_UFFD_WP:
            next_order = true;
            break;
          default:  // nothing more will collapse in this PMD
            stack.clear();
            break;
        }
        if (!next_order) continue;
      }
    }
    // The two halves at the next order, while any smaller order is enabled.
    if ((BIT(r.order) - 1) & enabled_orders) {
      stack.push_back({r.offset + nr_ptes / 2, r.order - 1});
      stack.push_back({r.offset, r.order - 1});
    }
  }
  // fix-up: a result khugepaged_do_scan() and madvise_collapse_errno() can
  // act on (v18 gave SCAN_FAIL for everything but a collapse, so an
  // allocation failure never started the alloc sleep).
  if (collapsed) return SCAN_SUCCEED;
  if (alloc_failed) return SCAN_ALLOC_HUGE_PAGE_FAIL;
  return last_result;
}

}  // namespace
}  // namespace mmlab
