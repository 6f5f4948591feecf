// khugepaged and MADV_COLLAPSE (mm/khugepaged.c, v6.18), anonymous memory.
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
// Not modelled: file and shmem collapse (collapse_file, collapse_pte_mapped_thp:
// MADV_COLLAPSE of such a range returns kCollapseFileNotModelled, khugepaged
// finds no file VMA eligible since the model has no file THP), NUMA node
// selection (one node), page idle tracking and MMU notifiers (no secondary
// MMUs). The memcg charge (SCAN_CGROUP_CHARGE_FAIL) and machine-check copies
// (SCAN_COPY_MC) fail only by fault injection (phys/fault_inject.h).
#include "khugepaged/khugepaged.h"

#include <bitset>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "fault/fault.h"
#include "mm/kernel.h"
#include "mm/khugepaged.h"
#include "mm/memcontrol.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "mm/vmdebug.h"
#include "pgtable/pgtable.h"
#include "mmlab/trace.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

enum ScanResult : int {
  SCAN_FAIL,
  SCAN_SUCCEED,
  SCAN_PMD_NULL,
  SCAN_PMD_NONE,
  SCAN_PMD_MAPPED,
  SCAN_EXCEED_NONE_PTE,
  SCAN_EXCEED_SWAP_PTE,
  SCAN_EXCEED_SHARED_PTE,
  SCAN_PTE_NON_PRESENT,
  SCAN_PTE_UFFD_WP,
  SCAN_PTE_MAPPED_HUGEPAGE,
  SCAN_LACK_REFERENCED_PAGE,
  SCAN_PAGE_NULL,
  SCAN_SCAN_ABORT,
  SCAN_PAGE_COUNT,
  SCAN_PAGE_LRU,
  SCAN_PAGE_LOCK,
  SCAN_PAGE_ANON,
  SCAN_PAGE_COMPOUND,
  SCAN_ANY_PROCESS,
  SCAN_VMA_NULL,
  SCAN_VMA_CHECK,
  SCAN_ADDRESS_RANGE,
  SCAN_DEL_PAGE_LRU,
  SCAN_ALLOC_HUGE_PAGE_FAIL,
  SCAN_CGROUP_CHARGE_FAIL,
  SCAN_TRUNCATED,
  SCAN_PAGE_HAS_PRIVATE,
  SCAN_STORE_FAILED,
  SCAN_COPY_MC,
  SCAN_PAGE_FILLED,
};

// KHUGEPAGED_MAX_PTES_LIMIT / COLLAPSE_MAX_PTES_LIMIT of the mTHP series.
constexpr unsigned kMaxPtesLimit = HPAGE_PMD_NR - 1;

// Who collapses: khugepaged's scan, or MADV_COLLAPSE (the kernel's
// collapse_control.is_khugepaged).
enum class Collapser : uint8_t { kKhugepaged, kMadviseCollapse };

struct CollapseControl {
  CollapseControl(Kernel* k, Collapser who)
      : settings(&k->settings),
        is_khugepaged(who == Collapser::kKhugepaged),
        mthp(k->settings.khugepaged_mthp.load()) {}
  const Settings* settings;
  bool is_khugepaged;
  bool mthp;  // khugepaged.mthp, read once per collapse_control
  // mTHP: one bit per occupied (neither none nor zero-page) PTE of the PMD
  // range scanned last (the series' mthp_bitmap).
  std::bitset<HPAGE_PMD_NR> present;
  // fix-up: the swap PTEs of that range, which v18's occupancy test leaves
  // out (it would allocate for, and then fail, every order holding one).
  std::bitset<HPAGE_PMD_NR> swapped;
  // What this collapse_control's work did, for khugepaged's wake statistics.
  uint64_t ptes_scanned = 0, collapsed = 0, bytes_copied = 0;
};

bool is_pmd_order(unsigned order) { return order == PMD_ORDER; }
Khugepaged* state_of(const Mm* mm) { return mm->kernel->khugepaged; }

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The calling thread's CPU time: a wake blocked on an mm's lock spends wall
// time, not CPU.
uint64_t thread_cpu_ns() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

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

void warn_max_ptes_none_once() {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    std::fprintf(stderr, "khugepaged: mTHP collapse only supports max_ptes_none values of 0 or %u\n", kMaxPtesLimit);
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
  warn_max_ptes_none_once();
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
    pte_t* pte = pte_offset_map(mm, pmd, addr, &pmdval);
    if (!pte) {
      mmap_read_unlock(mm);
      return SCAN_PMD_NULL;
    }
    const pte_t orig = ptep_get(pte);
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

// alloc_charge_folio: the new folio, allocated and charged with no lock
// held (the charge fails only by injection: src/mm/memcontrol.h).
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
  if (result == SCAN_SUCCEED)
    __collapse_huge_page_copy_succeeded(pte, vma, address, ptl, order, compound_pagelist);
  else
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
  const uint64_t t0 = now_ns();
  MM_TRACE("mm_collapse_huge_page", "address={:#x} order={}", address, order);
  uint64_t t_write = 0, write_ns = 0, copy_ns = 0;
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
  mm->stats->count(Event::collapse_attempt);

  int result = alloc_charge_folio(&folio, mm, cc, order);
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
  t_write = now_ns();
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
  // Wait for every GUP-fast walker that may have read the old PMD before
  // it was cleared: after this, any reference it took is in a refcount.
  tlb_remove_table_sync_one(mm);
  mm->stats->count(Event::collapse_table_sync);

  pte = pte_offset_map_lock(mm, &_pmd, start_addr, &pte_ptl);
  if (pte) {
    result = __collapse_huge_page_isolate(vma, start_addr, pte, cc, order, &compound_pagelist);
    pte_ptl->unlock();
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
    const uint64_t tc = now_ns();
    result = __collapse_huge_page_copy(pte, folio, pmd, _pmd, vma, start_addr, pte_ptl, order, &compound_pagelist, cc);
    copy_ns = now_ns() - tc;
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
  write_ns = now_ns() - t_write;
  mmap_write_unlock(mm);
out_nolock:
  if (folio) folio_put(folio);
  if (Khugepaged* kh = mm->kernel->khugepaged)
    kh->account_collapse({.total_ns = now_ns() - t0,
                          .write_ns = t_write ? write_ns : 0,
                          .copy_ns = copy_ns,
                          .write_locked = t_write != 0,
                          .ok = result == SCAN_SUCCEED});
  (void)end_addr;
  return result;
}

int mthp_collapse(Mm* mm, uint64_t address, int referenced, int unmapped, CollapseControl* cc, uint64_t enabled_orders);

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

// madvise_collapse_errno: MADV_COLLAPSE tells the caller what to do next.
int madvise_collapse_errno(int r) {
  switch (r) {
    case SCAN_ALLOC_HUGE_PAGE_FAIL:
      return -ENOMEM;
    case SCAN_CGROUP_CHARGE_FAIL:
    case SCAN_EXCEED_NONE_PTE:
      return -EBUSY;
    // Temporarily unavailable: trying again may succeed.
    case SCAN_PAGE_COUNT:
    case SCAN_PAGE_LOCK:
    case SCAN_PAGE_LRU:
    case SCAN_DEL_PAGE_LRU:
    case SCAN_PAGE_FILLED:
      return -EAGAIN;
    // Intrinsic to the range: khugepaged would not collapse it either.
    default:
      return -EINVAL;
  }
}

// madvise_collapse: mmap_lock held for read on entry and on return.
// Opt-out: in between, a local mmap_locked says whether it is held.
int madvise_collapse(Vma* vma, uint64_t start, uint64_t end, bool* lock_dropped) NO_THREAD_SAFETY_ANALYSIS {
  Mm* mm = vma->vm_mm;
  mmap_assert_locked(mm);
  VM_BUG_ON(vma->vm_start > start || vma->vm_end < end, "madvise_collapse outside the VMA");
  CollapseControl cc(mm->kernel, Collapser::kMadviseCollapse);
  if (!collapse_allowable_orders(vma, vma->vm_flags, &cc)) return -EINVAL;
  if (!vma_is_anonymous(vma)) return kCollapseFileNotModelled;

  uint64_t hstart = (start + ~PMD_MASK) & PMD_MASK;
  uint64_t hend = end & PMD_MASK;
  unsigned thps = 0;
  int last_fail = SCAN_FAIL;
  bool mmap_locked = true;
  bool file = false;
  for (uint64_t addr = hstart; addr < hend; addr += PMD_SIZE) {
    int result = SCAN_FAIL;
    if (!mmap_locked) {
      mmap_read_lock(mm);
      mmap_locked = true;
      result = hugepage_vma_revalidate(mm, addr, /*expect_anon=*/false, &vma, &cc, PMD_ORDER);
      if (result != SCAN_SUCCEED) {
        last_fail = result;
        break;  // out_nolock (the lock is held)
      }
      hend = std::min(hend, vma->vm_end & PMD_MASK);
    }
    if (!vma_is_anonymous(vma)) {  // remapped to a file meanwhile
      file = true;
      break;
    }
    result = hpage_collapse_scan_pmd(mm, vma, addr, &mmap_locked, &cc);
    if (!mmap_locked) *lock_dropped = true;
    bool stop = false;
    switch (result) {
      case SCAN_SUCCEED:
      case SCAN_PMD_MAPPED:
        ++thps;
        break;
      // The results after which the next PMD is tried.
      case SCAN_PMD_NULL:
      case SCAN_PTE_NON_PRESENT:
      case SCAN_PTE_UFFD_WP:
      case SCAN_LACK_REFERENCED_PAGE:
      case SCAN_PAGE_NULL:
      case SCAN_PAGE_COUNT:
      case SCAN_PAGE_LOCK:
      case SCAN_PAGE_COMPOUND:
      case SCAN_PAGE_LRU:
      case SCAN_DEL_PAGE_LRU:
        last_fail = result;
        break;
      default:
        last_fail = result;
        stop = true;
        break;
    }
    if (stop) break;
  }
  if (!mmap_locked) mmap_read_lock(mm);  // the caller expects it held
  if (file) return kCollapseFileNotModelled;
  return thps == ((hend - hstart) >> PMD_SHIFT) ? 0 : madvise_collapse_errno(last_fail);
}

// ---- the hooks below this layer reach ----

bool hugepage_enabled_for_collapse(const Settings& s);

void hook_enter_vma(Vma* vma, vm_flags_t vm_flags) {
  Mm* mm = vma->vm_mm;
  Khugepaged* kh = state_of(mm);
  if (!kh || mm->test_flag(MMF_VM_HUGEPAGE) || !hugepage_enabled_for_collapse(mm->kernel->settings)) return;
  CollapseControl cc(mm->kernel, Collapser::kKhugepaged);
  if (collapse_allowable_orders(vma, vm_flags, &cc)) kh->__khugepaged_enter(mm);
}

void hook_enter(Mm* mm) {
  if (Khugepaged* kh = state_of(mm)) kh->__khugepaged_enter(mm);
}

void hook_exit(Mm* mm) {
  if (Khugepaged* kh = state_of(mm)) kh->__khugepaged_exit(mm);
}

const KhugepagedHooks kHooks = {hook_enter_vma, hook_enter, hook_exit, madvise_collapse};

// hugepage_pmd_enabled (v6.18), or the series' hugepage_enabled(): whether
// the khugepaged thread runs. The model is a kernel without
// CONFIG_READ_ONLY_THP_FOR_FS and without shmem THP, so only the
// anonymous controls count.
bool hugepage_enabled_for_collapse(const Settings& s) {
  const uint64_t always = s.huge_anon_orders_always.load(), madvise = s.huge_anon_orders_madvise.load();
  const uint64_t inherit = s.huge_anon_orders_inherit.load();
  const uint64_t mask = s.khugepaged_mthp.load() ? THP_ORDERS_ALL_ANON : BIT(PMD_ORDER);
  if ((always | madvise) & mask) return true;
  return (inherit & mask) && hugepage_global_enabled(s);
}

}  // namespace

// ============================================================================
// The khugepaged thread: the mm_slot list, the scan, the wake schedule
// ============================================================================

Khugepaged::Khugepaged(Kernel* k, std::atomic<uint64_t>* clock) : k_(k), clock_(clock), cursor_(mm_head_.end()) {
  k_->khugepaged = this;
  k_->khugepaged_hooks = &kHooks;
  start_stop_khugepaged();  // khugepaged_init + the first start_stop
}

Khugepaged::~Khugepaged() {
  stop_thread();
  k_->khugepaged_hooks = nullptr;
  k_->khugepaged = nullptr;
}

bool Khugepaged::hugepage_pmd_enabled() const { return hugepage_enabled_for_collapse(k_->settings); }

bool Khugepaged::khugepaged_has_work() const { return !mm_head_.empty() && hugepage_pmd_enabled(); }

bool Khugepaged::kthread_running() const {
  MutexGuard g(&mm_lock_);
  return kthread_;
}

// wake_up_interruptible(&khugepaged_wait): ends an untimed wait that has an
// mm to scan now, and an alloc sleep. A timed scan sleep ends only if its
// expiry was reset (the sleep stores do that themselves).
void Khugepaged::wake_up_interruptible() {
  if (!kthread_) return;
  if (wait_ == Wait::kEvent && !mm_head_.empty()) wait_ = Wait::kRunnable;
  if (wait_ == Wait::kTimer && scan_.active) wait_ = Wait::kRunnable;
  work_cv_.notify_all();
}

void Khugepaged::__khugepaged_enter(Mm* mm) {
  VM_BUG_ON(hpage_collapse_test_exit(mm), "__khugepaged_enter of an exiting mm");
  if (mm->test_and_set_flag(MMF_VM_HUGEPAGE)) return;
  MutexGuard g(&mm_lock_);
  const bool wakeup = mm_head_.empty();
  // At the tail, just behind the scan cursor: the area settles a little.
  mm_head_.push_back({mm});
  mm_slots_hash_[mm] = std::prev(mm_head_.end());
  if (wakeup) wake_up_interruptible();
}

void Khugepaged::__khugepaged_exit(Mm* mm) {
  MutexGuard g(&mm_lock_);
  // A scan working on this mm finishes with it first (the kernel's
  // mmap_write_lock/unlock serialisation); then the slot is found gone or
  // still here.
  exit_cv_.wait(mm_lock_, [&]() REQUIRES(mm_lock_) { return scanning_mm_ != mm; });
  auto it = mm_slots_hash_.find(mm);
  if (it == mm_slots_hash_.end()) return;
  SlotList::iterator slot = it->second;
  if (cursor_valid_ && cursor_ == slot) {
    // The cursor rests on this mm between wakes. The kernel leaves the slot
    // for the next wake to find the mm dead and move on; the model's Mm goes
    // away now, so the cursor moves on now as that wake would move it.
    if (std::next(slot) != mm_head_.end()) {
      cursor_ = std::next(slot);
      scan_address_ = 0;
    } else {
      cursor_valid_ = false;
      full_scans_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  mm_slots_hash_.erase(it);
  mm_head_.erase(slot);
  mm->clear_flag(MMF_VM_HUGEPAGE);
  exit_cv_.notify_all();
}

void Khugepaged::collect_mm_slot(SlotList::iterator slot) {
  if (!hpage_collapse_test_exit(slot->mm)) return;
  mm_slots_hash_.erase(slot->mm);
  mm_head_.erase(slot);
}

// The mmap_lock part of khugepaged_scan_mm_slot: from *address, scan the
// mm's VMAs under mmap_lock (read, never waited for) for up to `pages` of
// progress. *vma_out: the VMA the scan stopped in, nullptr if it got past
// the last. hpage_collapse_scan_pmd drops mmap_lock when it collapses and
// says so in mmap_locked, which the analysis cannot follow.
static unsigned khugepaged_scan_mm_vmas(Mm* mm, uint64_t* address, unsigned pages, int* result, CollapseControl* cc,
                                        Vma** vma_out, std::atomic<unsigned>* pages_collapsed) NO_THREAD_SAFETY_ANALYSIS {
  unsigned progress = 0;
  Vma* vma = nullptr;
  // Never wait for mmap_lock: move on to the next mm instead.
  if (mmap_read_trylock(mm)) {
    bool mmap_locked = true;
    progress++;
    if (!hpage_collapse_test_exit_or_disable(mm)) {
      for (vma = find_vma(mm, *address); vma; vma = vma_next(mm, vma)) {
        if (hpage_collapse_test_exit_or_disable(mm)) {
          progress++;
          break;
        }
        // No file VMA is eligible: the model has no file THP.
        if (!collapse_allowable_orders(vma, vma->vm_flags, cc) || !vma_is_anonymous(vma)) {
          progress++;
          continue;
        }
        const uint64_t hstart = round_up(vma->vm_start, PMD_SIZE), hend = round_down(vma->vm_end, PMD_SIZE);
        if (*address > hend) {
          progress++;
          continue;
        }
        if (*address < hstart) *address = hstart;
        bool out = false;
        while (*address < hend) {
          if (hpage_collapse_test_exit_or_disable(mm)) {
            out = true;
            break;
          }
          *result = hpage_collapse_scan_pmd(mm, vma, *address, &mmap_locked, cc);
          if (*result == SCAN_SUCCEED) pages_collapsed->fetch_add(1, std::memory_order_acq_rel);
          *address += PMD_SIZE;
          progress += HPAGE_PMD_NR;
          // The collapse dropped mmap_lock (before any allocation, so an
          // allocation failure is always reported from here).
          if (!mmap_locked || progress >= pages) {
            out = true;
            break;
          }
        }
        if (out) break;
      }
    }
    if (mmap_locked) mmap_read_unlock(mm);  // exit_mmap destroys the tables after this
  }
  *vma_out = vma;
  return progress;
}

// khugepaged_scan_mm_slot: scan the cursor's mm from the cursor's address
// for up to `pages` of progress. mm_lock_ held on entry and on return,
// dropped meanwhile.
unsigned Khugepaged::khugepaged_scan_mm_slot(unsigned pages, int* result) {
  *result = SCAN_FAIL;
  if (!cursor_valid_) {
    cursor_ = mm_head_.begin();
    cursor_valid_ = true;
    scan_address_ = 0;
  }
  const SlotList::iterator slot = cursor_;
  Mm* mm = slot->mm;
  uint64_t address = scan_address_;
  scanning_mm_ = mm;
  mm_lock_.unlock();

  CollapseControl cc(k_, Collapser::kKhugepaged);
  Vma* vma = nullptr;
  const unsigned progress = khugepaged_scan_mm_vmas(mm, &address, pages, result, &cc, &vma, &pages_collapsed_);

  mm_lock_.lock();
  VM_BUG_ON(!cursor_valid_ || cursor_ != slot, "khugepaged's cursor moved during a scan");
  scanning_mm_ = nullptr;
  scan_address_ = address;
  wake_stats_.ptes_scanned += cc.ptes_scanned;
  wake_stats_.collapsed += cc.collapsed;
  wake_stats_.bytes_copied += cc.bytes_copied;
  // Done with this mm: it is exiting, or every VMA was scanned.
  if (hpage_collapse_test_exit(mm) || !vma) {
    if (std::next(slot) != mm_head_.end()) {
      cursor_ = std::next(slot);
      scan_address_ = 0;
    } else {
      cursor_valid_ = false;
      full_scans_.fetch_add(1, std::memory_order_acq_rel);
    }
    collect_mm_slot(slot);
  }
  exit_cv_.notify_all();
  return progress;
}

// khugepaged_do_scan: one wake, up to pages_to_scan of progress and at most
// two passes over the list head. The first allocation failure sleeps
// alloc_sleep_millisecs (kAllocSleep: the wake resumes later), the second
// ends the wake.
Khugepaged::StepEnd Khugepaged::khugepaged_do_scan() {
  MutexGuard g(&mm_lock_);
  if (!scan_.active) {
    scan_ = DoScan{true, static_cast<unsigned>(k_->settings.pages_to_scan.load()), 0, 0, true};
    wake_stats_ = {};
    k_->stats->count(Event::khugepaged_wake);
  }
  int result = SCAN_SUCCEED;
  for (;;) {
    if (!kthread_) break;  // kthread_should_stop
    if (!cursor_valid_) scan_.pass_through_head++;
    if (khugepaged_has_work() && scan_.pass_through_head < 2)
      scan_.progress += khugepaged_scan_mm_slot(scan_.pages - scan_.progress, &result);
    else
      scan_.progress = scan_.pages;
    if (scan_.progress >= scan_.pages) break;
    if (result == SCAN_ALLOC_HUGE_PAGE_FAIL) {
      if (!scan_.wait) break;
      scan_.wait = false;
      return StepEnd::kAllocSleep;
    }
  }
  scan_.active = false;
  wake_stats_.progress = scan_.progress;
  return StepEnd::kDone;
}

// khugepaged_wait_work: sleep scan_sleep_millisecs while there is work,
// else until an mm registers.
void Khugepaged::khugepaged_wait_work() {
  if (khugepaged_has_work()) {
    const uint64_t sleep_ns = uint64_t{k_->settings.scan_sleep_millisecs.load()} * 1000000;
    if (!sleep_ns) {
      wait_ = Wait::kRunnable;
      return;
    }
    wait_ = Wait::kTimer;
    wake_at_ = clock_->load() + sleep_ns;
    return;
  }
  wait_ = Wait::kEvent;
}

bool Khugepaged::next_run(uint64_t* at) const {
  if (!kthread_) return false;
  switch (wait_) {
    case Wait::kRunnable:
      *at = clock_->load();
      return true;
    case Wait::kTimer:
      *at = wake_at_;
      return true;
    case Wait::kEvent:
      return false;
  }
  return false;
}

void Khugepaged::step() {
  const uint64_t w0 = now_ns(), c0 = thread_cpu_ns();
  const StepEnd end = khugepaged_do_scan();
  const uint64_t busy = now_ns() - w0;
  t_wake_busy_ns_.fetch_add(busy, std::memory_order_relaxed);
  t_wake_cpu_ns_.fetch_add(thread_cpu_ns() - c0, std::memory_order_relaxed);
  MutexGuard g(&mm_lock_);
  // A paced thread's wake takes its host time on the clock too: the sleep
  // after it starts when it ends. Elsewhere time stays deterministic.
  if (threaded_ && speedup_) clock_->fetch_add(busy);
  if (end == StepEnd::kAllocSleep) {
    wait_ = Wait::kTimer;
    wake_at_ = clock_->load() + uint64_t{k_->settings.alloc_sleep_millisecs.load()} * 1000000;
    return;
  }
  if (wake_cost_) clock_->fetch_add(wake_cost_(wake_stats_));
  khugepaged_wait_work();
}

// start_stop_khugepaged: the kthread runs while some THP size that khugepaged
// serves is enabled. Its first wake is at once; stopped, it lets go of the
// cursor's slot (collecting it if its mm exited).
void Khugepaged::start_stop_khugepaged() {
  MutexGuard g(&mm_lock_);
  if (hugepage_pmd_enabled()) {
    if (!kthread_) {
      kthread_ = true;
      wait_ = Wait::kRunnable;
      scan_ = DoScan{};
    } else if (!mm_head_.empty()) {
      wake_up_interruptible();
    }
  } else if (kthread_) {
    kthread_ = false;
    scan_ = DoScan{};
    wait_ = Wait::kEvent;
    if (cursor_valid_) {
      cursor_valid_ = false;
      collect_mm_slot(cursor_);
    }
  }
  work_cv_.notify_all();
  exit_cv_.notify_all();
}

void Khugepaged::sysfs_written(const std::string& path) {
  const std::string thp = "transparent_hugepage/";
  if (path == thp + "enabled" ||
      (path.rfind(thp + "hugepages-", 0) == 0 && path.size() > 8 && path.compare(path.size() - 8, 8, "/enabled") == 0)) {
    start_stop_khugepaged();
    return;
  }
  if (path == thp + "khugepaged/scan_sleep_millisecs" || path == thp + "khugepaged/alloc_sleep_millisecs") {
    // khugepaged_sleep_expire = 0, then a wakeup: any sleep ends now.
    MutexGuard g(&mm_lock_);
    if (kthread_ && wait_ == Wait::kTimer) wait_ = Wait::kRunnable;
    work_cv_.notify_all();
  }
}

int Khugepaged::sysfs_read(const std::string& path, std::string* out) const {
  if (path == "transparent_hugepage/khugepaged/pages_collapsed") {
    *out = std::to_string(pages_collapsed());
    return 0;
  }
  if (path == "transparent_hugepage/khugepaged/full_scans") {
    *out = std::to_string(full_scans());
    return 0;
  }
  return -ENOENT;
}

void Khugepaged::set_wake_cost(std::function<uint64_t(const KhugepagedWakeStats&)> cost) {
  MutexGuard g(&run_lock_);
  wake_cost_ = std::move(cost);
}

namespace {
// Wakes at one instant beyond this mean they come without end (no sleep
// between them, and no cost).
constexpr unsigned kMaxRunsAtOneInstant = 100000;
}  // namespace

int Khugepaged::advance(uint64_t ns) {
  {
    MutexGuard g(&mm_lock_);
    if (threaded_) return -EBUSY;
  }
  MutexGuard run(&run_lock_);
  const uint64_t end = clock_->load() + ns;
  unsigned same_instant = 0;
  uint64_t last = ~0ull;
  for (;;) {
    uint64_t at = 0;
    {
      MutexGuard g(&mm_lock_);
      if (!next_run(&at) || at > end) break;
    }
    const uint64_t now = std::max(clock_->load(), at);
    clock_->store(now);
    same_instant = now == last ? same_instant + 1 : 0;
    last = now;
    if (same_instant > kMaxRunsAtOneInstant) return -ELOOP;
    step();
  }
  if (clock_->load() < end) clock_->store(end);
  return 0;
}

int Khugepaged::run_full_scans(unsigned n) {
  MutexGuard lk(&mm_lock_);
  if (!kthread_ || !n) return 0;
  const unsigned target = full_scans() + n + (cursor_valid_ ? 1 : 0);
  if (threaded_) {
    exit_cv_.wait(mm_lock_, [&]() REQUIRES(mm_lock_) {
      return full_scans() >= target || !kthread_ || mm_head_.empty() || !threaded_;
    });
    return 0;
  }
  lk.unlock();
  MutexGuard run(&run_lock_);
  unsigned same_instant = 0;
  uint64_t last = ~0ull;
  while (full_scans() < target) {
    uint64_t at = 0;
    {
      MutexGuard g(&mm_lock_);
      if (!next_run(&at)) break;  // stopped, or nothing registered: nothing to scan
    }
    const uint64_t now = std::max(clock_->load(), at);
    clock_->store(now);
    same_instant = now == last ? same_instant + 1 : 0;
    last = now;
    if (same_instant > kMaxRunsAtOneInstant) return -ELOOP;
    step();
  }
  return 0;
}

int Khugepaged::start_thread(uint64_t speedup) {
  MutexGuard g(&mm_lock_);
  if (threaded_) return -EBUSY;
  threaded_ = true;
  stop_thread_ = false;
  speedup_ = speedup;
  host_ref_ = std::chrono::steady_clock::now();
  clock_ref_ = clock_->load();
  // The thread's events are its System's in the trace.
  thread_ = std::thread([this, system = trace::current_system()] {
    trace::adopt_system(system);
    thread_main();
  });
  return 0;
}

void Khugepaged::stop_thread() {
  {
    MutexGuard g(&mm_lock_);
    if (!threaded_) return;
    stop_thread_ = true;
    work_cv_.notify_all();
  }
  thread_.join();
  MutexGuard g(&mm_lock_);
  // A paced thread's sleep under way when it stopped has lasted so far.
  if (speedup_) {
    uint64_t at = paced_clock(std::chrono::steady_clock::now());
    if (kthread_ && wait_ == Wait::kTimer) at = std::min(at, wake_at_);
    if (clock_->load() < at) clock_->store(at);
  }
  speedup_ = 0;
  threaded_ = false;
  exit_cv_.notify_all();
}

uint64_t Khugepaged::paced_clock(std::chrono::steady_clock::time_point now) const {
  const double host = std::chrono::duration<double, std::nano>(now - host_ref_).count();
  return clock_ref_ + static_cast<uint64_t>(std::max(0.0, host) * static_cast<double>(speedup_));
}

std::chrono::steady_clock::time_point Khugepaged::paced_host_time(uint64_t at) const {
  const uint64_t ahead = at > clock_ref_ ? at - clock_ref_ : 0;
  return host_ref_ + std::chrono::nanoseconds(ahead / speedup_);
}

// After a wake: the next sleep is measured from here, on both clocks.
void Khugepaged::paced_resync() {
  MutexGuard g(&mm_lock_);
  host_ref_ = std::chrono::steady_clock::now();
  clock_ref_ = clock_->load();
}

// Back to back, the thread runs each wake as soon as it is due in virtual
// time, that is at once: the clock jumps over the sleeps. Paced, it waits
// for the host time the wake falls at (a sysfs store or a new mm may bring
// it forward: the wait is woken and looks again). A timer's wake happens at
// its virtual time, the host's lateness in waking it not counted; a wake
// that waited for an event happens at the virtual time now.
void Khugepaged::thread_main() {
  while (!stop_thread_) {
    uint64_t at = 0;
    {
      MutexGuard g(&mm_lock_);
      work_cv_.wait(mm_lock_, [&]() REQUIRES(mm_lock_) { return stop_thread_ || next_run(&at); });
      if (stop_thread_) break;
      if (speedup_) {
        const auto due = paced_host_time(at);
        const auto now = std::chrono::steady_clock::now();
        if (now < due) {
          work_cv_.wait_until(mm_lock_, due);
          continue;
        }
        if (wait_ != Wait::kTimer) at = std::max(at, paced_clock(now));
      }
    }
    MutexGuard run(&run_lock_);
    if (clock_->load() < at) clock_->store(at);
    step();
    paced_resync();
  }
}

void Khugepaged::account_collapse(const CollapseAttempt& a) {
  const uint64_t write_ns = a.write_ns;
  t_attempts_.fetch_add(1, std::memory_order_relaxed);
  if (a.ok) t_collapsed_.fetch_add(1, std::memory_order_relaxed);
  if (a.write_locked) t_write_locked_.fetch_add(1, std::memory_order_relaxed);
  t_total_ns_.fetch_add(a.total_ns, std::memory_order_relaxed);
  t_write_ns_.fetch_add(write_ns, std::memory_order_relaxed);
  uint64_t longest = t_write_max_ns_.load(std::memory_order_relaxed);
  while (write_ns > longest && !t_write_max_ns_.compare_exchange_weak(longest, write_ns, std::memory_order_relaxed)) {
  }
  t_copy_ns_.fetch_add(a.copy_ns, std::memory_order_relaxed);
}

CollapseTiming Khugepaged::timing() const {
  CollapseTiming t;
  t.attempts = t_attempts_.load();
  t.collapsed = t_collapsed_.load();
  t.write_locked = t_write_locked_.load();
  t.total_ns = t_total_ns_.load();
  t.mmap_write_ns = t_write_ns_.load();
  t.copy_ns = t_copy_ns_.load();
  t.mmap_write_max_ns = t_write_max_ns_.load();
  return t;
}

KhugepagedTiming Khugepaged::wake_timing() const {
  KhugepagedTiming t;
  t.cpu_ns = t_wake_cpu_ns_.load();
  t.busy_ns = t_wake_busy_ns_.load();
  return t;
}

}  // namespace mmlab
