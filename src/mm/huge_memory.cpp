// The mm half of mm/huge_memory.c: operations on PMD leaves that the layout
// changes need (the fault half is fault/huge_memory.cpp): the deposited page
// table, splitting a PMD mapping, the PMD-leaf cases of zap, mprotect and
// mremap, and MADV_FREE of a PMD leaf with its reclaim (lazy-free discard
// without a split, as v6.18's try_to_unmap_one does).
#include <atomic>
#include <cstring>

#include "base/mmdebug.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/khugepaged_hooks.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "phys/frame_copy.h"
#include "tlb/tlb.h"

namespace mmlab {

// ---- deposited page tables (pgtable_trans_huge_deposit/withdraw) ----
// A PMD leaf keeps a preallocated PTE table for its split; the deposits of
// one PMD table are a list headed in that table page's metadata. PMD lock held.

bool vma_thp_disabled(const Vma* vma, vm_flags_t vm_flags, bool forced_collapse) {
  if (vm_flags & VM_NOHUGEPAGE) return true;
  if (vma->vm_mm->test_flag(MMF_DISABLE_THP)) return true;
  if (vm_flags & VM_HUGEPAGE) return false;
  if (forced_collapse) return false;  // MADV_COLLAPSE is advice enough
  return vma->vm_mm->test_flag(MMF_DISABLE_THP_EXCEPT_ADVISED);
}

void pgtable_trans_huge_deposit(Mm* mm, pmd_t* pmd, Page* table) {
  pmd_lockptr(mm, pmd)->assert_held();
  Page* pmd_table = table_page_of(mm->phys, pmd);
  table->pt.free_next = pmd_table->pt.free_next;
  pmd_table->pt.free_next = reinterpret_cast<uint64_t>(table);
}

Page* pgtable_trans_huge_withdraw(Mm* mm, pmd_t* pmd) {
  pmd_lockptr(mm, pmd)->assert_held();
  Page* pmd_table = table_page_of(mm->phys, pmd);
  auto* t = reinterpret_cast<Page*>(pmd_table->pt.free_next);
  VM_BUG_ON(!t, "no deposited page table under a PMD leaf");
  pmd_table->pt.free_next = t->pt.free_next;
  t->pt.free_next = 0;
  // Its entries are written anew (a split): none has been used since.
  pte_first_use_forget(t, 0, PTRS_PER_PTE);
  return t;
}

void zap_deposited_table(Mm* mm, pmd_t* pmd) { pgtable_free(mm, pgtable_trans_huge_withdraw(mm, pmd)); }

bool is_huge_zero_pmd(PhysMem* phys, pmd_t pmd) { return pmd_present(pmd) && phys->is_huge_zero_pfn(pmd_pfn(pmd)); }

// ---- splitting a PMD mapping (__split_huge_pmd_locked) ----

static void split_huge_zero_page_pmd(Vma* vma, uint64_t haddr, pmd_t* pmd) {
  Mm* mm = vma->vm_mm;
  pmd_t old = entry_xchg(pmd, pmd_t{0});
  flush_pmd_tlb_range(vma, haddr, haddr + PMD_SIZE);
  Page* table = pgtable_trans_huge_withdraw(mm, pmd);
  auto* pte = static_cast<pte_t*>(mm->phys->page_address(table));
  pte_t entry = pte_mkspecial(pfn_pte(mm->phys->zero_pfn(), vma_page_prot(vma)));
  if (pmd_uffd_wp(old)) entry = pte_mkuffd_wp(entry);
  for (unsigned i = 0; i < PTRS_PER_PTE; i++) entry_set(pte + i, entry);
  entry_set(pmd, mk_table_pmd(mm->phys->page_to_pfn(table)));
}

static void split_huge_pmd_locked(Vma* vma, pmd_t* pmd, uint64_t haddr) {
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  mm->stats->count(VmStat::thp_split_pmd);
  if (is_huge_zero_pmd(phys, pmdp_get(pmd))) {
    split_huge_zero_page_pmd(vma, haddr, pmd);
    return;
  }
  if (!vma_is_anonymous(vma)) {
    // File THP: drop the PMD mapping; PTEs are refaulted later.
    pmd_t old = entry_xchg(pmd, pmd_t{0});
    flush_pmd_tlb_range(vma, haddr, haddr + PMD_SIZE);
    Page* page = phys->pfn_to_page(pmd_pfn(old));
    Folio* folio = page_folio(page);
    if (pmd_dirty(old)) folio_set_dirty(folio);
    folio_remove_rmap_pmd(folio, page, vma);
    add_mm_counter(mm, mm_counter_file(folio), -static_cast<long>(HPAGE_PMD_NR));
    // x86 deposits no table under a file PMD (arch_needs_pgtable_deposit).
    folio_put(folio);
    return;
  }
  // Invalidate first so the hardware walker and GUP-fast stop using the
  // leaf, then build the PTE table from the recorded bits.
  pmd_t old = pmdp_get(pmd);
  entry_set(pmd, pmd_mkinvalid(old));
  flush_pmd_tlb_range(vma, haddr, haddr + PMD_SIZE);
  Page* page = phys->pfn_to_page(pmd_pfn(old));
  Folio* folio = page_folio(page);
  bool write = pmd_write(old), young = pmd_young(old), dirty = pmd_dirty(old);
  bool soft_dirty = pmd_soft_dirty(old), uffd_wp = pmd_uffd_wp(old);
  if (dirty) folio_set_dirty(folio);
  bool anon_exclusive = PageAnonExclusive(page);
  folio_ref_add(folio, HPAGE_PMD_NR - 1);  // one reference per future PTE
  folio_add_anon_rmap_ptes(folio, page, HPAGE_PMD_NR, vma, haddr, anon_exclusive ? RMAP_EXCLUSIVE : RMAP_NONE);

  Page* table = pgtable_trans_huge_withdraw(mm, pmd);
  auto* pte = static_cast<pte_t*>(phys->page_address(table));
  pte_t entry = pfn_pte(phys->page_to_pfn(page), vma_page_prot(vma));
  if (write) entry = pte_mkwrite_novma(entry);
  if (!young) entry = pte_mkold(entry);
  if (dirty) entry = pte_mkdirty(entry);
  if (soft_dirty) entry = pte_mksoft_dirty(entry);
  if (uffd_wp) entry = pte_mkuffd_wp(entry);
  set_ptes(mm, haddr, pte, entry, HPAGE_PMD_NR);
  folio_remove_rmap_pmd(folio, page, vma);
  entry_set(pmd, mk_table_pmd(phys->page_to_pfn(table)));
}

void split_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t address) {
  VM_BUG_ON(is_vm_hugetlb_page(vma), "split_huge_pmd on a hugetlb mapping");
  if (is_vm_hugetlb_page(vma)) return;  // hugetlb leaves are never split
  SpinLock* ptl = pmd_lock(vma->vm_mm, pmd);
  ptl->assert_held();
  if (pmd_trans_huge(pmdp_get(pmd))) split_huge_pmd_locked(vma, pmd, address & PMD_MASK);
  ptl->unlock();
}

void split_huge_pmd_address(Vma* vma, uint64_t address) {
  pmd_t* pmd = mm_find_pmd(vma->vm_mm, address);
  if (pmd && pmd_trans_huge(pmdp_get(pmd))) split_huge_pmd(vma, pmd, address);
}

void vma_adjust_trans_huge(Vma* vma, uint64_t start, uint64_t end) {
  // A PMD leaf straddling either boundary cannot stay whole in one VMA.
  if (!is_aligned(start, PMD_SIZE) && round_down(start, PMD_SIZE) >= vma->vm_start &&
      round_down(start, PMD_SIZE) + PMD_SIZE <= vma->vm_end)
    split_huge_pmd_address(vma, start);
  if (!is_aligned(end, PMD_SIZE) && round_down(end, PMD_SIZE) >= vma->vm_start &&
      round_down(end, PMD_SIZE) + PMD_SIZE <= vma->vm_end)
    split_huge_pmd_address(vma, end);
}

// ---- zap, mprotect and mremap of whole PMD leaves ----

bool zap_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t addr) {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  pmd_t old = pmdp_get(pmd);
  if (!pmd_trans_huge(old)) {
    ptl->unlock();
    return false;
  }
  entry_xchg(pmd, pmd_t{0});
  flush_pmd_tlb_range(vma, addr, addr + PMD_SIZE);
  Folio* to_put = nullptr;
  if (is_huge_zero_pmd(mm->phys, old)) {
    zap_deposited_table(mm, pmd);
  } else {
    Page* page = mm->phys->pfn_to_page(pmd_pfn(old));
    Folio* folio = page_folio(page);
    folio_remove_rmap_pmd(folio, page, vma);
    if (folio_test_anon(folio)) {
      add_mm_counter(mm, MM_ANONPAGES, -static_cast<long>(HPAGE_PMD_NR));
    } else {
      if (pmd_dirty(old)) folio_set_dirty(folio);
      if (pmd_young(old)) folio_mark_accessed(folio);
      add_mm_counter(mm, mm_counter_file(folio), -static_cast<long>(HPAGE_PMD_NR));
    }
    if (vma_is_anonymous(vma)) zap_deposited_table(mm, pmd);  // file PMDs have none (x86)
    to_put = folio;
  }
  ptl->unlock();
  if (to_put) {  // after the flush, as the TLB batch does (free_pages_and_swap_cache)
    if (folio_test_anon(to_put)) free_swap_cache(to_put);
    folio_put(to_put);
  }
  return true;
}

static bool can_change_pmd_writable(Vma* vma, pmd_t pmd) {
  if (!(vma->vm_flags & VM_WRITE)) return false;
  if (pmd_protnone(pmd)) return false;
  if (pmd_needs_soft_dirty_wp(vma, pmd)) return false;
  if (pmd_uffd_wp(pmd)) return false;
  if (!(vma->vm_flags & VM_SHARED)) {
    Page* page = vm_normal_page_pmd(vma, 0, pmd);
    return page && folio_test_anon(page_folio(page)) && PageAnonExclusive(page);
  }
  return pmd_dirty(pmd);
}

long change_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t addr, pgprot_t newprot, bool may_make_writable) {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  pmd_t old = pmdp_get(pmd);
  if (!pmd_trans_huge(old)) {
    ptl->unlock();
    return 0;
  }
  pmd_t entry = pmd_modify(old, newprot);
  if (is_huge_zero_pmd(mm->phys, old)) entry = pmd_wrprotect(entry);
  else if (may_make_writable && !pmd_write(entry) && can_change_pmd_writable(vma, entry))
    entry = pmd_mkwrite_novma(entry);
  if (!(entry == old)) {
    entry_set(pmd, entry);
    if (pmd_write(old) && !pmd_write(entry)) flush_pmd_tlb_range(vma, addr, addr + PMD_SIZE);
  }
  ptl->unlock();
  return HPAGE_PMD_NR;
}

bool move_huge_pmd(Vma* vma, uint64_t old_addr, uint64_t, pmd_t* old_pmd, pmd_t* new_pmd) {
  Mm* mm = vma->vm_mm;
  SpinLock* old_ptl = pmd_lock(mm, old_pmd);
  old_ptl->assert_held();
  SpinLock* new_ptl = pmd_lockptr(mm, new_pmd);
  SpinNestedGuard nested(new_ptl, old_ptl, LockClass::kPmdLock);
  pmd_t old = pmdp_get(old_pmd);
  bool moved = false;
  if (pmd_trans_huge(old) && pmd_none(pmdp_get(new_pmd))) {
    entry_xchg(old_pmd, pmd_t{0});
    flush_pmd_tlb_range(vma, old_addr, old_addr + PMD_SIZE);
    if (vma_is_anonymous(vma)) {  // pmd_move_must_withdraw: file PMDs have no deposit
      Page* table = pgtable_trans_huge_withdraw(mm, old_pmd);
      pgtable_trans_huge_deposit(mm, new_pmd, table);
    }
    entry_set(new_pmd, old);
    moved = true;
  }
  nested.unlock();
  old_ptl->unlock();
  return moved;
}

// ---- MADV_FREE of a PMD leaf, and its discard by reclaim ----

bool madvise_free_huge_pmd(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t next) {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl = pmd_lock(mm, pmd);  // pmd_trans_huge_lock
  ptl->assert_held();
  pmd_t orig = pmdp_get(pmd);
  if (!pmd_trans_huge(orig) || is_huge_zero_pmd(mm->phys, orig)) {
    ptl->unlock();
    return false;
  }
  Folio* folio = page_folio(mm->phys->pfn_to_page(pmd_pfn(orig)));
  // Another process mapping it would lose its data too: leave it alone
  // unless every mapper gives the same advice.
  if (folio_maybe_mapped_shared(folio) || !folio_trylock(folio)) {
    ptl->unlock();
    return false;
  }
  if (next - addr != PMD_SIZE) {
    // Only part of the THP is advised: split it; the PTE walk then marks
    // the pages of the range.
    folio_get(folio);
    ptl->unlock();
    (void)split_folio(folio);  // on failure the leaf stays and the PTE walk finds no table
    folio_unlock_swap(folio);
    folio_put(folio);
    return false;
  }
  folio_clear_dirty(folio);
  folio_unlock(folio);
  if (pmd_young(orig) || pmd_dirty(orig)) {
    // pmdp_invalidate, then the entry comes back old and clean.
    pmd_t old = entry_xchg(pmd, pmd_mkinvalid(orig));
    flush_pmd_tlb_range(vma, addr, addr + PMD_SIZE);
    entry_set(pmd, pmd_mkclean(pmd_mkold(old)));
  }
  folio_mark_lazyfree(folio);
  ptl->unlock();
  return true;
}

// __discard_anon_folio_pmd_locked, with the PMD lock taken here: the rmap
// walk hands a PMD leaf over unlocked.
PmdDiscard unmap_huge_pmd_locked(Vma* vma, uint64_t addr, pmd_t* pmd, Folio* folio) {
  VM_WARN_ON_FOLIO(!folio_test_locked(folio), folio, "lazy-free PMD discard of an unlocked folio");
  VM_WARN_ON_FOLIO(!folio_test_anon(folio) || folio_test_swapbacked(folio), folio,
                   "PMD discard of a folio that is not lazy-free");
  Mm* mm = vma->vm_mm;
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  pmd_t orig = pmdp_get(pmd);
  if (!pmd_trans_huge(orig) || pmd_pfn(orig) != folio_pfn(folio)) {
    ptl->unlock();
    return PmdDiscard::kNotLeaf;
  }
  // Redirtied through the PMD or through an earlier GUP reference: the data
  // is wanted again, so the folio goes back to being swap-backed.
  if (pmd_dirty(orig)) folio_set_dirty(folio);
  if (folio_test_dirty(folio)) {
    folio_set_swapbacked(folio);
    ptl->unlock();
    return PmdDiscard::kKept;
  }
  // pmdp_huge_clear_flush, then read the references: a GUP-fast that got in
  // first shows in the refcount; one that comes later sees the PMD cleared.
  orig = entry_xchg(pmd, pmd_t{0});
  flush_pmd_tlb_range(vma, addr, addr + PMD_SIZE);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const int ref_count = folio_ref_count(folio);
  const int map_count = folio_mapcount(folio);
  if (pmd_dirty(orig)) folio_set_dirty(folio);
  if (folio_test_dirty(folio)) {
    folio_set_swapbacked(folio);
    entry_set(pmd, orig);
    ptl->unlock();
    return PmdDiscard::kKept;
  }
  // Only the isolation's reference and the mappings' may be left.
  if (ref_count != map_count + 1) {
    entry_set(pmd, orig);
    ptl->unlock();
    return PmdDiscard::kKept;
  }
  folio_remove_rmap_pmd(folio, mm->phys->pfn_to_page(pmd_pfn(orig)), vma);
  zap_deposited_table(mm, pmd);
  add_mm_counter(mm, MM_ANONPAGES, -static_cast<long>(HPAGE_PMD_NR));
  ptl->unlock();
  folio_put(folio);  // the mapping's reference; the reclaimer still holds its own
  return PmdDiscard::kDiscarded;
}

}  // namespace mmlab
