// The page-table half of mprotect (mm/mprotect.c): change_protection().
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/mprotect.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// can_change_pte_writable: may this PTE be made writable without a write
// fault? Only if the fault would reuse the page without further checks.
bool can_change_pte_writable(Vma* vma, uint64_t addr, pte_t pte) {
  if (!(vma->vm_flags & VM_WRITE)) return false;
  if (pte_protnone(pte)) return false;
  if (pte_needs_soft_dirty_wp(vma, pte)) return false;  // soft-dirty tracking wants the fault
  if (pte_uffd_wp(pte)) return false;
  if (!(vma->vm_flags & VM_SHARED)) {
    Page* page = vm_normal_page(vma, addr, pte);
    return page && folio_test_anon(page_folio(page)) && PageAnonExclusive(page);
  }
  return pte_dirty(pte);
}

// A writable migration entry becomes a readable one (anonymous folios keep
// their exclusivity): when the migration ends, remove_migration_pte makes a
// writable entry a writable PTE whatever the VMA allows by then, so without
// this an mprotect(PROT_READ) during the migration leaves a writable PTE in
// a read-only VMA. The kernel does not check the new protection here either,
// it always downgrades. Swap entries and markers keep their bits; none stay none.
bool change_nonpresent_pte(Mm* mm, uint64_t addr, pte_t* pte) {
  const pte_t old = ptep_get(pte);
  if (!is_swap_pte(old)) return false;
  const swp_entry_t entry = pte_to_swp_entry(old);
  if (!is_writable_migration_entry(entry)) return false;
  Folio* folio = page_folio(mm->phys->pfn_to_page(swp_offset_pfn(entry)));
  const unsigned type = folio_test_anon(folio) ? SWP_MIGRATION_READ_EXCLUSIVE : SWP_MIGRATION_READ;
  pte_t newpte = swp_entry_to_pte(make_migration_entry(type, swp_offset(entry)));
  if (pte_swp_soft_dirty(old)) newpte = pte_swp_mksoft_dirty(newpte);
  if (pte_swp_uffd_wp(old)) newpte = pte_swp_mkuffd_wp(newpte);
  set_pte_at(mm, addr, pte, newpte);
  return true;
}

long change_pte_range(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t end, pgprot_t newprot, bool try_writable) {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
  if (!pte) return 0;
  ptl->assert_held();
  long pages = 0;
  bool flush = false;
  uint64_t start = addr;
  // revert.mprotect-migration-entry (before the model's ef1e3dd): swap and
  // migration entries keep their bits, a writable migration entry too.
  const bool keep_nonpresent = mm->kernel->settings.reverted(Revert::kMprotectMigrationEntry);
  for (; addr < end; pte++, addr += PAGE_SIZE) {
    pte_t old = ptep_get(pte);
    if (!pte_present(old)) {
      if (!keep_nonpresent && change_nonpresent_pte(mm, addr, pte)) pages++;
      continue;
    }
    pte_t ptent = pte_modify(old, newprot);
    if (pte_special(old) && mm->phys->is_zero_pfn(pte_pfn(old))) ptent = pte_wrprotect(ptent);
    else if (try_writable && !pte_write(ptent) && can_change_pte_writable(vma, addr, ptent))
      ptent = pte_mkwrite_novma(ptent);
    if (ptent == old) continue;
    // The hardware may set A/D concurrently: start/commit keep them.
    ptep_modify_prot_commit(pte, ptep_modify_prot_start(mm, addr, pte), ptent);
    if (pte_write(old) && !pte_write(ptent)) flush = true;
    pages++;
  }
  if (flush) flush_tlb_range(vma, start, end);
  ptl->unlock();
  return pages;
}

}  // namespace

long change_protection(Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags) {
  Mm* mm = vma->vm_mm;
  // mprotect_fixup has set vm_flags and vm_page_prot (read-only where write-notify is wanted).
  pgprot_t newprot = vma->vm_page_prot;
  // vma_wants_manual_pte_write_upgrade: where vm_page_prot is read-only but a
  // write fault would not need to do anything, make the PTE writable now:
  // private writable mappings (exclusive anon pages) and write-notify shared ones (dirty pages).
  bool try_writable = (newflags & VM_SHARED) ? vma_wants_writenotify(vma) : (newflags & VM_WRITE) != 0;
  if (is_vm_hugetlb_page(vma)) return hugetlb_change_protection(vma, start, end, newprot);
  long pages = 0;
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pmd_addr_end(addr, end);
    pmd_t* pmd = mm_find_pmd(mm, addr);
    if (!pmd) continue;
    pmd_t v = pmdp_get(pmd);
    if (pmd_none(v)) continue;
    if (pmd_trans_huge(v)) {
      if (next - addr == PMD_SIZE) {
        long n = change_huge_pmd(vma, pmd, addr, newprot, try_writable);
        if (n) {
          pages += n;
          continue;
        }
      } else {
        split_huge_pmd(vma, pmd, addr);
      }
    }
    pages += change_pte_range(vma, pmd, addr, next, newprot, try_writable);
  }
  return pages;
}

}  // namespace mmlab
