// userfaultfd, as far as the model has it (fs/userfaultfd.c's
// userfaultfd_register, mm/userfaultfd.c's mwriteprotect_range): VMAs can be
// registered for missing and write-protect faults, and ranges
// write-protected. There is no userfaultfd reader: a fault that would be
// handed to one ends with SIGBUS (UFFD_FEATURE_SIGBUS), see fault/memory.cpp.
// No pte markers are installed on empty PTEs (UFFD_FEATURE_WP_UNPOPULATED
// is not modelled); fork drops the registration (no UFFD_FEATURE_EVENT_FORK).
#include <algorithm>

#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "mm/userfaultfd.h"
#include "mm/vma.h"
#include "pgtable/pgtable.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// vma_can_userfault: anonymous, shmem or hugetlb memory.
bool vma_can_userfault(const Vma* vma) {
  return vma_is_anonymous(vma) || is_vm_hugetlb_page(vma) || vma_is_shmem(vma);
}

// change_pte_range / change_huge_pmd with MM_CP_UFFD_WP(_RESOLVE) over
// [addr, end) inside one PMD of vma. Returns the entries changed.
long uffd_wp_pmd_range(Vma* vma, uint64_t addr, uint64_t end, bool wp) {
  Mm* mm = vma->vm_mm;
  pmd_t* pmd = mm_find_pmd(mm, addr);
  if (!pmd) return 0;
  if (pmd_trans_huge(pmdp_get(pmd))) {
    if (end - addr < PMD_SIZE) {
      split_huge_pmd(vma, pmd, addr);
    } else {
      SpinLock* ptl = pmd_lock(mm, pmd);
      ptl->assert_held();
      pmd_t old = pmdp_get(pmd);
      long changed = 0;
      if (pmd_trans_huge(old)) {
        pmd_t e = wp ? pmd_mkuffd_wp(pmd_wrprotect(old)) : pmd_clear_uffd_wp(old);
        if (!(e == old)) {
          entry_set(pmd, e);
          if (pmd_write(old)) flush_pmd_tlb_range(vma, addr, addr + PMD_SIZE);
          changed = HPAGE_PMD_NR;
        }
      }
      ptl->unlock();
      return changed;
    }
  }
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
  if (!pte) return 0;
  ptl->assert_held();
  long changed = 0;
  bool flush = false;
  const uint64_t start = addr;
  for (; addr < end; pte++, addr += PAGE_SIZE) {
    const pte_t old = ptep_get(pte);
    pte_t e = old;
    if (pte_present(old)) {
      e = wp ? pte_mkuffd_wp(pte_wrprotect(old)) : pte_clear_uffd_wp(old);
      if (e == old) continue;
      // ptep_modify_prot_start/commit: keep what the hardware set meanwhile.
      pte_t cur = entry_xchg(pte, pte_t{0});
      e.v |= cur.v & (_PAGE_ACCESSED | _PAGE_DIRTY);
      entry_set(pte, e);
      flush |= pte_write(old);
    } else if (is_swap_pte(old) && !non_swap_entry(pte_to_swp_entry(old))) {
      e = wp ? pte_swp_mkuffd_wp(old) : pte_swp_clear_uffd_wp(old);
      if (e == old) continue;
      entry_set(pte, e);
    } else {
      continue;
    }
    changed++;
  }
  if (flush) flush_tlb_range(vma, start, end);
  ptl->unlock();
  return changed;
}

bool range_args_ok(uint64_t start, uint64_t len) {
  return !(start & ~PAGE_MASK) && !(len & ~PAGE_MASK) && len && start + len > start && start + len <= TASK_SIZE;
}

}  // namespace

int userfaultfd_register(Mm* mm, uint64_t start, uint64_t len, vm_flags_t uffd_flags) {
  if (!range_args_ok(start, len) || !uffd_flags || (uffd_flags & ~VM_UFFD_FLAGS)) return -EINVAL;
  const uint64_t end = start + len;
  mmap_write_lock(mm);
  int ret = -EINVAL;
  // Every VMA of the range must be one userfaultfd can serve; holes are allowed.
  Vma* first = find_vma_intersection(mm, start, end);
  if (first) {
    ret = 0;
    for (Vma* v = first; v && v->vm_start < end; v = vma_next(mm, v)) {
      if (!vma_can_userfault(v)) ret = -EINVAL;
      else if (!(v->vm_flags & VM_MAYWRITE)) ret = -EPERM;
      if (ret) break;
    }
  }
  for (uint64_t addr = start; !ret && addr < end;) {
    Vma* v = find_vma_intersection(mm, addr, end);
    if (!v) break;
    const uint64_t s = std::max(addr, v->vm_start), e = std::min(end, v->vm_end);
    const vm_flags_t nf = (v->vm_flags & ~VM_UFFD_FLAGS) | uffd_flags;
    Vma* got = v;
    if (nf != v->vm_flags) {
      int err = -ENOMEM;
      got = vma_modify_flags(mm, v, s, e, nf, &err);
      if (!got) ret = err;
    }
    addr = got ? std::max(e, std::min(end, got->vm_end)) : end;
  }
  mmap_write_unlock(mm);
  return ret;
}

int mwriteprotect_range(Mm* mm, uint64_t start, uint64_t len, bool enable_wp) {
  if (!range_args_ok(start, len)) return -EINVAL;
  const uint64_t end = start + len;
  mmap_read_lock(mm);
  int ret = -ENOENT;
  for (Vma* v = find_vma_intersection(mm, start, end); v && v->vm_start < end; v = vma_next(mm, v)) {
    if (!(v->vm_flags & VM_UFFD_WP)) {
      ret = -ENOENT;
      break;
    }
    if (is_vm_hugetlb_page(v)) {  // hugetlb write-protection is not modelled
      ret = -EOPNOTSUPP;
      break;
    }
    ret = 0;
    const uint64_t s = std::max(start, v->vm_start), e = std::min(end, v->vm_end);
    for (uint64_t a = s; a < e; a = pmd_addr_end(a, e)) uffd_wp_pmd_range(v, a, pmd_addr_end(a, e), enable_wp);
  }
  mmap_read_unlock(mm);
  return ret;
}

}  // namespace mmlab
