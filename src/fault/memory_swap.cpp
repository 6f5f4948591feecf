// Swap-in faults, the swap half of mm/memory.c's fault code: do_swap_page
// and its helpers (handle_pte_marker, pte_marker_clear). The swap-cache
// lookup and read it calls (read_swap_cache: __read_swap_cache_async of
// mm/swap_state.c) is in mm/swapfile.cpp with the device and the swap cache;
// migration_entry_wait is in mm/migrate.cpp.
#include "mm/mm.h"
#include "mm/swapfile.h"

#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "mm/kernel.h"
#include "mm/memcontrol.h"
#include "mm/migrate.h"
#include "mm/swap.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "phys/frame_copy.h"

namespace mmlab {

// ============================================================================
// Swap-in (do_swap_page, mm/memory.c)
// ============================================================================

namespace {

bool folio_matches_swap_entry(const Folio* folio, swp_entry_t entry) {
  if (!folio_test_swapcache(folio)) return false;
  swp_entry_t first = folio_swap_entry(folio);
  return swp_type(first) == swp_type(entry) && swp_offset(entry) >= swp_offset(first) &&
         swp_offset(entry) < swp_offset(first) + static_cast<uint64_t>(folio_nr_pages(folio));
}

// pte_marker_clear: drop a marker that no longer means anything.
vm_fault_t pte_marker_clear(VmFault* vmf) {
  Mm* mm = vmf->mm();
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte) return 0;
  vmf->ptl->assert_held();
  if (ptep_get(vmf->pte) == vmf->orig_pte) ptep_get_and_clear(mm, vmf->address, vmf->pte);
  vmf->ptl->unlock();
  return 0;
}

// handle_pte_marker. uffd-wp markers are cleared and the access refaults on
// an empty PTE (userfaultfd itself is not modelled).
vm_fault_t handle_pte_marker(VmFault* vmf, swp_entry_t entry) {
  uint64_t marker = swp_offset(entry);
  if (!marker) return VM_FAULT_SIGBUS;
  if (marker & PTE_MARKER_POISONED) return VM_FAULT_HWPOISON;
  if (marker & PTE_MARKER_GUARD) return VM_FAULT_SIGSEGV;
  if (marker & PTE_MARKER_UFFD_WP) return pte_marker_clear(vmf);
  return VM_FAULT_SIGBUS;
}

bool userfaultfd_pte_wp(const Vma* vma, pte_t pte) { return (vma->vm_flags & VM_UFFD_WP) && pte_uffd_wp(pte); }

// ---- the SWP_SYNCHRONOUS_IO path: no swap cache, mTHP swap-in ----

// thp_swap_suitable_orders: a folio of 2^order pages needs its first swap
// offset aligned as its address is.
uint64_t thp_swap_suitable_orders(uint64_t swp_off, uint64_t addr, uint64_t orders) {
  while (orders) {
    const unsigned order = highest_order(orders);
    const uint64_t nr = 1ull << order;
    if ((addr >> PAGE_SHIFT) % nr == swp_off % nr) break;
    orders &= ~BIT(order);
  }
  return orders;
}

// can_swapin_thp: the aligned range's PTEs are swap entries with contiguous
// offsets on one device and identical bits, and the swap cache holds none
// of them (a large folio cannot be read from two places).
bool can_swapin_thp(VmFault* vmf, const pte_t* ptep, unsigned nr) {
  Kernel* k = vmf->mm()->kernel;
  const uint64_t addr = round_down(vmf->address, static_cast<uint64_t>(nr) * PAGE_SIZE);
  const long idx = static_cast<long>((vmf->address - addr) >> PAGE_SHIFT);
  const pte_t pte = ptep_get(ptep);
  if (!(pte == pte_move_swp_offset(vmf->orig_pte, -idx))) return false;
  if (swap_pte_batch(ptep, nr, pte) != nr) return false;
  // A range partly in the zeromap cannot be read as one folio.
  if (swap_zeromap_batch(k, pte_to_swp_entry(pte), nr) != nr) return false;
  return non_swapcache_batch(k, pte_to_swp_entry(pte), nr) == nr;
}

// alloc_swap_folio: the largest folio the swapped range allows, else order
// 0. Never with userfaultfd (per-page fidelity), never the PMD order, and
// never where zswap was ever enabled (the model has no zswap: it never was).
Folio* alloc_swap_folio(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  uint64_t orders = 0;
  if (!userfaultfd_armed(vma)) {
    orders = thp_vma_allowable_orders(vma, vma->vm_flags, TvaType::kPagefault, BIT(PMD_ORDER) - 1);
    orders = thp_vma_suitable_orders(vma, vmf->address, orders);
    orders = thp_swap_suitable_orders(swp_offset(pte_to_swp_entry(vmf->orig_pte)), vmf->address, orders);
  }
  if (orders) {
    SpinLock* ptl;
    pte_t* table = pte_offset_map_lock(mm, vmf->pmd, vmf->address & PMD_MASK, &ptl);
    if (!table) {
      orders = 0;
    } else {
      ptl->assert_held();
      while (orders) {
        const unsigned order = highest_order(orders);
        const uint64_t addr = round_down(vmf->address, PAGE_SIZE << order);
        if (can_swapin_thp(vmf, table + pte_index(addr), 1u << order)) break;
        orders &= ~BIT(order);
      }
      ptl->unlock();
    }
  }
  while (orders) {
    const unsigned order = highest_order(orders);
    Folio* folio = mm->phys->folio_alloc(vma_thp_gfp_mask(vma), order);
    if (folio && !mem_cgroup_charge(folio, mm->phys)) return folio;
    if (folio) {
      mm->stats->count_mthp(order, MthpStat::swpin_fallback_charge);
      folio_put(folio);
    }
    mm->stats->count_mthp(order, MthpStat::swpin_fallback);
    orders &= ~BIT(order);
  }
  // __alloc_swap_folio
  Folio* folio = mm->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, 0);
  if (folio && mem_cgroup_charge(folio, mm->phys)) {
    folio_put(folio);
    folio = nullptr;
  }
  return folio;
}

// do_swap_page for an entry of a SWP_SYNCHRONOUS_IO device that nobody
// else uses (swap count 1): the folio is read straight into a new folio,
// never added to the swap cache; SWAP_HAS_CACHE on its slots keeps a
// parallel swap-in out meanwhile (swapcache_prepare). A large folio maps
// every PTE of its range, which must still be the swap entries it was read
// from.
vm_fault_t do_swap_page_synchronous(VmFault* vmf, SwapDevice* si, swp_entry_t entry) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  Kernel* k = mm->kernel;
  Folio* folio = alloc_swap_folio(vmf);
  if (!folio) {
    // Back out if somebody else faulted in (or zapped) this PTE meanwhile.
    vm_fault_t ret = 0;
    vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
    if (vmf->pte) {
      vmf->ptl->assert_held();
      if (ptep_get(vmf->pte) == vmf->orig_pte) ret = VM_FAULT_OOM;
      vmf->ptl->unlock();
    }
    return ret;
  }
  const long nr_pages = folio_nr_pages(folio);
  __folio_set_locked(folio);
  folio_set_swapbacked(folio);
  if (nr_pages > 1) entry = swp_entry(swp_type(entry), round_down(swp_offset(entry), static_cast<uint64_t>(nr_pages)));
  if (!swapcache_prepare(k, entry, static_cast<unsigned>(nr_pages))) {
    // Another swap-in has the slots (or the entries changed): refault.
    folio_unlock(folio);
    folio_put(folio);
    return 0;
  }
  vm_fault_t ret = VM_FAULT_MAJOR;
  k->stats->count(VmStat::pgmajfault);
  folio_add_lru(folio);
  const bool read = swap_read_folio(k, folio, si, swp_offset(entry));
  if (read) folio_set_uptodate(folio);

  uint64_t address = vmf->address;
  long page_idx = 0;
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  pte_t* ptep = vmf->pte;
  bool same = vmf->pte && ptep_get(vmf->pte) == vmf->orig_pte;
  if (same && nr_pages > 1) {
    const uint64_t folio_start = round_down(vmf->address, static_cast<uint64_t>(nr_pages) * PAGE_SIZE);
    page_idx = static_cast<long>((vmf->address - folio_start) >> PAGE_SHIFT);
    pte_t* folio_ptep = vmf->pte - page_idx;
    const pte_t folio_pte = ptep_get(folio_ptep);
    same = folio_pte == pte_move_swp_offset(vmf->orig_pte, -page_idx) &&
           swap_pte_batch(folio_ptep, static_cast<unsigned>(nr_pages), folio_pte) == static_cast<unsigned>(nr_pages);
    address = folio_start;
    ptep = folio_ptep;
  }
  if (!same || !read) {
    // out_nomap: someone else mapped or zapped the entries, or the read
    // failed (the entries stay: every fault on them tries again).
    if (vmf->pte) {
      vmf->ptl->assert_held();  // pte_offset_map_lock returned a table: its lock is held
      vmf->ptl->unlock();
    }
    swapcache_clear(k, entry, static_cast<unsigned>(nr_pages));
    folio_unlock(folio);
    folio_put(folio);
    return read ? ret : VM_FAULT_SIGBUS;
  }
  vmf->ptl->assert_held();
  swap_free_nr(k, entry, static_cast<unsigned>(nr_pages));
  add_mm_counter(mm, MM_ANONPAGES, nr_pages);
  add_mm_counter(mm, MM_SWAPENTS, -nr_pages);
  pte_t pte = pfn_pte(folio_pfn(folio), vma->vm_page_prot);
  if (pte_swp_soft_dirty(vmf->orig_pte)) pte = pte_mksoft_dirty(pte);
  if (pte_swp_uffd_wp(vmf->orig_pte)) pte = pte_mkuffd_wp(pte);
  // Nobody else holds the folio: the exclusive case of do_swap_page.
  if ((vma->vm_flags & VM_WRITE) && !userfaultfd_pte_wp(vma, pte) && !pte_needs_soft_dirty_wp(vma, pte)) {
    pte = pte_mkwrite_novma(pte);
    if (vmf->flags & FAULT_FLAG_WRITE) {
      pte = pte_mkdirty(pte);
      vmf->flags &= ~FAULT_FLAG_WRITE;
    }
  }
  // The allocation's reference becomes the mappings'.
  folio_ref_add(folio, static_cast<int>(nr_pages) - 1);
  folio_add_new_anon_rmap(folio, vma, address, RMAP_EXCLUSIVE, RmapLevel::kPte);
  set_ptes(mm, address, ptep, pte, static_cast<unsigned>(nr_pages));
  vmf->orig_pte = pte_t{pte.v + static_cast<uint64_t>(page_idx) * PAGE_SIZE};
  vmf->pte = ptep + page_idx;
  swapcache_clear(k, entry, static_cast<unsigned>(nr_pages));
  folio_unlock(folio);
  if (vmf->flags & FAULT_FLAG_WRITE) {
    // A write the VMA does not allow yet (soft-dirty or uffd-wp tracking).
    ret |= do_wp_page(vmf);
    if (ret & VM_FAULT_ERROR) ret &= VM_FAULT_ERROR;
    return ret;
  }
  vmf->ptl->unlock();
  return ret;
}

}  // namespace

// Entered without the PTL; vmf->orig_pte is the non-present PTE read locklessly.
vm_fault_t do_swap_page(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  Kernel* k = mm->kernel;
  swp_entry_t entry = pte_to_swp_entry(vmf->orig_pte);
  if (non_swap_entry(entry)) {
    if (is_migration_entry(entry)) {
      migration_entry_wait(mm, vmf->pmd, vmf->address);
      return 0;
    }
    if (is_pte_marker_entry(entry)) return handle_pte_marker(vmf, entry);
    return VM_FAULT_SIGBUS;  // device entries are not modelled: print_bad_pte
  }
  // get_swap_device. (The kernel returns 0 and refaults when swapoff races;
  // without swapoff a bad entry is a corrupt PTE.)
  SwapDevice* si = swp_swap_info(k, entry);
  if (!si) return VM_FAULT_SIGBUS;
  // A swap PTE implies an anon_vma; keep the invariant folio_add_new_anon_rmap needs.
  if (vm_fault_t ret = vmf_anon_prepare(vmf)) return ret;
  // SWP_SYNCHRONOUS_IO and nobody else uses the entry: skip the swap cache.
  if (si->synchronous_io && swap_count(k, entry) == 1) {
    if (Folio* cached = swap_cache_get_folio(k, entry)) {
      folio_put(cached);  // still in the swap cache after all: the usual path
    } else {
      return do_swap_page_synchronous(vmf, si, entry);
    }
  }

  vm_fault_t ret = 0;
  bool fresh = false;
  Folio* folio = read_swap_cache(k, si, entry, &fresh);
  if (!folio) {
    // Back out if somebody else faulted in (or zapped) this PTE meanwhile.
    vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
    if (vmf->pte) {
      vmf->ptl->assert_held();
      if (ptep_get(vmf->pte) == vmf->orig_pte) ret = VM_FAULT_OOM;
      vmf->ptl->unlock();
    }
    return ret;
  }
  if (fresh) {
    // Had to read the page from the swap area: a major fault.
    ret = VM_FAULT_MAJOR;
    k->stats->count(VmStat::pgmajfault);
  } else {
    folio_lock(folio);  // folio_lock_or_retry: we hold no spinlock here
  }
  // folio_free_swap() or a split may have released the swap cache under us.
  if (!folio_matches_swap_entry(folio, entry)) {
    folio_unlock_swap(folio);
    folio_put(folio);
    return ret;
  }
  Page* page = folio_page(folio, static_cast<long>(swp_offset(entry) - swp_offset(folio_swap_entry(folio))));

  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (!vmf->pte || !(ptep_get(vmf->pte) == vmf->orig_pte)) {
    if (vmf->pte) {
      vmf->ptl->assert_held();
      vmf->ptl->unlock();
    }
    // out_nomap: with swap full, a folio nobody's swap PTE needs any more
    // leaves the swap cache now rather than at the next reclaim.
    folio_free_swap(folio);
    folio_unlock_swap(folio);
    folio_put(folio);
    return ret;
  }
  vmf->ptl->assert_held();
  // The read failed (now or by an earlier fault): the entry stays, and so
  // does the folio in the swap cache, so every fault on it until then fails.
  if (!folio_test_uptodate(folio)) {
    vmf->ptl->unlock();
    folio_unlock_swap(folio);
    folio_put(folio);
    return VM_FAULT_SIGBUS;
  }

  // A large folio still in the swap cache is mapped whole when its swap PTEs
  // are all there, in this page table and VMA.
  long nr_pages = 1, page_idx = 0;
  uint64_t address = vmf->address;
  pte_t* ptep = vmf->pte;
  if (folio_test_large(folio)) {
    const long nr = folio_nr_pages(folio);
    const long idx = folio_page_idx(folio, page);
    const uint64_t folio_start = address - static_cast<uint64_t>(idx) * PAGE_SIZE;
    const uint64_t folio_end = folio_start + static_cast<uint64_t>(nr) * PAGE_SIZE;
    if (folio_start >= std::max(address & PMD_MASK, vma->vm_start) &&
        folio_end <= pmd_addr_end(address, vma->vm_end)) {
      pte_t* folio_ptep = vmf->pte - idx;
      pte_t folio_pte = ptep_get(folio_ptep);
      if (folio_pte == pte_move_swp_offset(vmf->orig_pte, -idx) &&
          swap_pte_batch(folio_ptep, static_cast<unsigned>(nr), folio_pte) == static_cast<unsigned>(nr)) {
        page_idx = idx;
        address = folio_start;
        ptep = folio_ptep;
        nr_pages = nr;
        entry = folio_swap_entry(folio);
        page = &folio->page;
      }
    }
  }

  // A swap PTE never points at an AnonExclusive swap-cache page.
  VM_BUG_ON_FOLIO(folio_test_anon(folio) && PageAnonExclusive(page), folio, "swap PTE of an AnonExclusive page");
  // Checked under the PTL against a concurrent fork() sharing the entry.
  const bool exclusive = pte_swp_exclusive(vmf->orig_pte);

  // Drop the swap PTEs' slot references; with swap full, should_try_to_free_swap()
  // is always true, so the swap cache goes once no other swap PTE needs it.
  swap_free_nr(k, entry, static_cast<unsigned>(nr_pages));
  folio_free_swap(folio);

  add_mm_counter(mm, MM_ANONPAGES, nr_pages);
  add_mm_counter(mm, MM_SWAPENTS, -nr_pages);
  pte_t pte = pfn_pte(page_to_pfn(page), vma->vm_page_prot);
  if (pte_swp_soft_dirty(vmf->orig_pte)) pte = pte_mksoft_dirty(pte);
  if (pte_swp_uffd_wp(vmf->orig_pte)) pte = pte_mkuffd_wp(pte);

  // As do_wp_page(), but certainly unshared when the swap PTE said so or
  // nobody else holds the folio: map it writable at once where allowed.
  rmap_t rmap_flags = RMAP_NONE;
  if (exclusive || folio_ref_count(folio) == 1) {
    if ((vma->vm_flags & VM_WRITE) && !userfaultfd_pte_wp(vma, pte) && !pte_needs_soft_dirty_wp(vma, pte)) {
      pte = pte_mkwrite_novma(pte);
      if (vmf->flags & FAULT_FLAG_WRITE) {
        pte = pte_mkdirty(pte);
        vmf->flags &= ~FAULT_FLAG_WRITE;
      }
    }
    rmap_flags |= RMAP_EXCLUSIVE;
  }
  // The swap-cache lookup's reference becomes the mapping's.
  folio_ref_add(folio, static_cast<int>(nr_pages) - 1);
  vmf->orig_pte = pte_t{pte.v + static_cast<uint64_t>(page_idx) * PAGE_SIZE};
  if (!folio_test_anon(folio)) {
    folio_add_new_anon_rmap(folio, vma, address, rmap_flags, RmapLevel::kPte);
  } else {
    folio_add_anon_rmap_ptes(folio, page, static_cast<int>(nr_pages), vma, address, rmap_flags);
  }
  VM_BUG_ON_FOLIO(pte_write(pte) && !PageAnonExclusive(page), folio, "swap-in mapped a shared page writable");
  set_ptes(mm, address, ptep, pte, static_cast<unsigned>(nr_pages));
  folio_unlock_swap(folio);  // only trylocks: fine under the PTL

  if (vmf->flags & FAULT_FLAG_WRITE) {
    // A write to a page that may be shared: reuse or copy, with the PTL held.
    ret |= do_wp_page(vmf);
    if (ret & VM_FAULT_ERROR) ret &= VM_FAULT_ERROR;
    return ret;
  }
  vmf->ptl->unlock();
  return ret;
}

}  // namespace mmlab
