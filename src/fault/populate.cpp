// MADV_POPULATE_READ/WRITE until the GUP layer carries it (mm/gup.c's
// faultin_page_range): fault every page of the range in, VMA by VMA.
#include "fault/fault.h"
#include "mm/internal.h"
#include "mm/kernel.h"

namespace mmlab {
namespace {

// check_vma_flags for the populate path: the access must be allowed.
int check_vma_flags(Vma* vma, bool write) {
  if (vma->vm_flags & (VM_IO | VM_PFNMAP)) return -EFAULT;
  if (write) {
    if (!(vma->vm_flags & VM_WRITE)) return -EFAULT;
  } else if (!(vma->vm_flags & VM_READ)) {
    return -EFAULT;
  }
  return 0;
}

// Is the page at addr mapped the way the access needs (follow_page_mask's answer)?
bool page_present_for(Mm* mm, uint64_t addr, bool write) {
  pmd_t* pmd = mm_find_pmd(mm, addr);
  if (!pmd) return false;
  pmd_t v = pmdp_get(pmd);
  if (pmd_trans_huge(v)) return !write || pmd_write(v);
  if (!pmd_present(v) || pmd_none(v)) return false;
  pte_t pte = ptep_get(pte_offset(mm->phys, v, addr));
  return pte_present(pte) && (!write || pte_write(pte));
}

}  // namespace

long faultin_page_range(Mm* mm, uint64_t start, uint64_t end, bool write) {
  for (uint64_t addr = start; addr < end;) {
    Vma* vma = vma_lookup(mm, addr);
    if (!vma) return -ENOMEM;
    if (check_vma_flags(vma, write)) return -EINVAL;
    uint64_t vend = std::min(end, vma->vm_end);
    for (; addr < vend; addr += PAGE_SIZE) {
      // Fault until the entry satisfies the access, as GUP re-follows.
      for (int tries = 0; !page_present_for(mm, addr, write); tries++) {
        vm_fault_t ret = handle_mm_fault(vma, addr, write ? FAULT_FLAG_WRITE : 0);
        if (ret & VM_FAULT_ERROR) return vm_fault_to_errno(ret, 1u << 6 /* FOLL_HWPOISON */);
        if (tries > 1000) return -EFAULT;
      }
    }
  }
  return 0;
}

}  // namespace mmlab
