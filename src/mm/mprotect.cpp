// mprotect(): the VMA part (mm/mprotect.c's do_mprotect_pkey and
// mprotect_fixup). The page tables are change_protection()'s
// (mprotect_pgtable.cpp).
#include <algorithm>

#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/mprotect.h"
#include "mm/mseal.h"
#include "mm/vma.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// uapi bits the public header does not name.
constexpr int PROT_SEM = 0x8;
constexpr int PROT_GROWSDOWN = 0x01000000;
constexpr int PROT_GROWSUP = 0x02000000;

// arch_validate_prot (generic; x86 without protection keys in the model).
bool arch_validate_prot(int prot) { return (prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM)) == 0; }

// mprotect_fixup: give [start, end) of vma the flags newflags. *pprev
// receives the VMA that covers the range afterwards (possibly merged).
int mprotect_fixup(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, vm_flags_t newflags)
    REQUIRES(mm->mmap_lock) {
  if (vma_is_sealed(vma)) return -EPERM;  // even when nothing would change
  const vm_flags_t oldflags = vma->vm_flags;
  if (newflags == oldflags) {
    *pprev = vma;
    return 0;
  }
  // Commit accounting: private memory becoming writable is charged; an
  // anonymous VMA that never faulted is uncharged when it loses write.
  if (newflags & VM_WRITE) {
    if (!(oldflags & (VM_ACCOUNT | VM_WRITE | VM_HUGETLB | VM_SHARED | VM_NORESERVE))) newflags |= VM_ACCOUNT;
  } else if ((oldflags & VM_ACCOUNT) && vma->is_anonymous() && !vma->anon_vma) {
    newflags &= ~VM_ACCOUNT;
  }
  int err = -ENOMEM;
  Vma* merged = vma_modify_flags(mm, vma, start, end, newflags, &err);
  if (!merged) return err;
  *pprev = merged;
  // The range is write-locked: no per-VMA fault runs in it while the entries change.
  (void)change_protection(merged, start, end, newflags);  // how many entries changed: mprotect does not say
  // The kernel populates a private VM_LOCKED VMA that becomes writable
  // (populate_vma_page_range: the CoW now rather than at the first write);
  // the model leaves its pages to fault on first write (docs/NOTES.md).
  return 0;
}

}  // namespace

int do_mprotect(Mm* mm, uint64_t start, uint64_t len, int prot) {
  const int grows = prot & (PROT_GROWSDOWN | PROT_GROWSUP);
  prot &= ~(PROT_GROWSDOWN | PROT_GROWSUP);
  if (grows == (PROT_GROWSDOWN | PROT_GROWSUP)) return -EINVAL;  // can't be both
  if (start & ~PAGE_MASK) return -EINVAL;
  if (!len) return 0;
  len = round_up(len, PAGE_SIZE);
  uint64_t end = start + len;
  if (end <= start) return -ENOMEM;
  if (!arch_validate_prot(prot)) return -EINVAL;

  mmap_write_lock(mm);
  int error = -ENOMEM;
  Vma* vma = find_vma_intersection(mm, start, end);
  if (!vma) goto out;
  if (grows & PROT_GROWSDOWN) {
    start = vma->vm_start;
    error = -EINVAL;
    if (!(vma->vm_flags & VM_GROWSDOWN)) goto out;
  } else {
    if (vma->vm_start > start) goto out;  // a hole at the start
    if (grows & PROT_GROWSUP) {
      error = -EINVAL;  // no VM_GROWSUP on x86
      goto out;
    }
  }

  {
    uint64_t nstart = start;
    uint64_t tmp = start;
    error = 0;
    // do_mprotect_pkey's mmu_gather: change_protection's flushes widen it,
    // and it is flushed once after the last VMA.
    MmuGather tlb;
    tlb_gather_mmu(&tlb, mm);
    for (;;) {
      // Here vma->vm_start <= nstart < vma->vm_end.
      vm_flags_t newflags = calc_vm_prot_bits(prot) | (vma->vm_flags & ~VM_ACCESS_FLAGS);
      // newflags >> 4 puts VM_MAY* where VM_* are: asking for what the
      // mapping may never have (write to a read-only shared file) fails.
      if ((newflags & ~(newflags >> 4)) & VM_ACCESS_FLAGS) {
        error = -EACCES;
        break;
      }
      tmp = std::min(vma->vm_end, end);
      Vma* prev = nullptr;
      error = mprotect_fixup(mm, vma, &prev, nstart, tmp, newflags);
      if (error) break;
      nstart = tmp;
      if (nstart >= end) break;
      vma = find_vma(mm, nstart);
      if (!vma || vma->vm_start > nstart) {  // a hole
        error = -ENOMEM;
        break;
      }
    }
    tlb_finish_mmu(&tlb);
  }
out:
  mmap_write_unlock(mm);
  return error;
}

}  // namespace mmlab
