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
#include "mm/migrate.h"
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
