// mseal(2) (mm/mseal.c) and the seal's test for madvise (mm/madvise.c's
// can_madvise_modify). The other calls a seal refuses test vma_is_sealed
// where the kernel does: do_vmi_munmap, mprotect_fixup, mremap's VMA checks.
#include "mm/mseal.h"

#include <algorithm>

#include "base/mmdebug.h"
#include "mm/mm.h"
#include "mm/vma.h"

namespace mmlab {
namespace {

// range_contains_unmapped: a hole anywhere in [start, end), at either end
// included. A seal over a hole would let a later mmap fill it unsealed.
bool range_contains_unmapped(Mm* mm, uint64_t start, uint64_t end) REQUIRES(mm->mmap_lock) {
  uint64_t prev_end = start;
  for (Vma* vma = find_vma_intersection(mm, start, end); vma && vma->vm_start < end; vma = vma_next(mm, vma)) {
    if (vma->vm_start > prev_end) return true;
    prev_end = vma->vm_end;
  }
  return prev_end < end;
}

// mseal_apply: VM_SEALED on every VMA piece of [start, end), split at the
// ends and merged with sealed neighbours as any flag change.
int mseal_apply(Mm* mm, uint64_t start, uint64_t end) REQUIRES(mm->mmap_lock) {
  for (uint64_t cur = start; cur < end;) {
    Vma* vma = vma_lookup(mm, cur);
    VM_BUG_ON(!vma, "mseal_apply: a hole after range_contains_unmapped");
    uint64_t cur_end = std::min(vma->vm_end, end);
    if (!vma_is_sealed(vma)) {
      int err = -ENOMEM;
      vma = vma_modify_flags(mm, vma, cur, cur_end, vma->vm_flags | VM_SEALED, &err);
      if (!vma) return err;
      cur_end = vma->vm_end;  // a merge may have grown it
    }
    cur = cur_end;
  }
  return 0;
}

// Advice that throws away what a mapping holds.
bool is_discard(int behavior) {
  switch (behavior) {
    case MADV_FREE:
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_REMOVE:
    case MADV_DONTFORK:
    case MADV_WIPEONFORK:
    case MADV_GUARD_INSTALL:
      return true;
    default:
      return false;
  }
}

}  // namespace

int do_mseal(Mm* mm, uint64_t start, uint64_t len_in, unsigned long flags) {
  if (flags) return -EINVAL;
  uint64_t end = 0;
  if (int err = check_input_range(start, len_in, &end)) return err;
  if (end == start) return 0;
  mmap_write_lock(mm);
  const int ret = range_contains_unmapped(mm, start, end) ? -ENOMEM : mseal_apply(mm, start, end);
  mmap_write_unlock(mm);
  return ret;
}

bool can_madvise_modify(const Vma* vma, int behavior) {
  if (!vma_is_sealed(vma) || !is_discard(behavior)) return true;
  // A file (or shmem) mapping is taken not to lose data, even a private
  // one whose CoW copies the discard drops (v6.18, as this machine's kernel
  // answers); a writable one the caller could have zeroed anyway.
  return !vma->is_anonymous() || (vma->vm_flags & VM_WRITE);
}

}  // namespace mmlab
