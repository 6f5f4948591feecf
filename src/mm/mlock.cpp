// The mlock family (mm/mlock.c): do_mlock, apply_vma_lock_flags,
// mlock_fixup, apply_mlockall_flags, and the population of what they lock
// through __mm_populate (mm/mmap.cpp, after mm/gup.c).
//
// Locking is a VMA flag here: mlock_fixup gives the range VM_LOCKED (and
// VM_LOCKONFAULT) with the same split-and-merge helper mprotect and madvise
// use (vma_modify_flags). The kernel then walks the range to mark present
// folios PG_mlocked and move them to the unevictable list
// (mlock_vma_pages_range); the model's unevictable list (mm/swap.cpp's
// lru_add) takes only the folios of unevictable mappings (SHM_LOCK, noswap
// tmpfs), and its reclaim paths test the VMA flag instead, so that walk has
// nothing to do.
#include <algorithm>

#include "mm/hugetlb.h"
#include "mm/mlock.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/vma.h"

namespace mmlab {
namespace {

// mlock_fixup: give [start, end) of vma the lock bits of newflags. VMAs
// that can never be locked (VM_SPECIAL, hugetlb; the kernel adds DAX,
// secretmem and MAP_DROPPABLE, none of which the model has) keep their
// flags and count as done: mlock succeeds on them and only populates.
int mlock_fixup(Mm* mm, Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags) REQUIRES(mm->mmap_lock) {
  const vm_flags_t oldflags = vma->vm_flags;
  if (newflags == oldflags || (oldflags & VM_SPECIAL) || is_vm_hugetlb_page(vma)) return 0;
  int err = -ENOMEM;
  return vma_modify_flags(mm, vma, start, end, newflags, &err) ? 0 : err;
}

// apply_vma_lock_flags: set the lock bits `flags` (0 to unlock) on every VMA
// of [start, start+len). A hole is -ENOMEM, found as the walk reaches it:
// the VMAs before it keep their new flags, as in the kernel.
int apply_vma_lock_flags(Mm* mm, uint64_t start, uint64_t len, vm_flags_t flags) REQUIRES(mm->mmap_lock) {
  const uint64_t end = start + len;
  if (end < start) return -EINVAL;
  if (end == start) return 0;
  Vma* vma = vma_lookup(mm, start);
  if (!vma) return -ENOMEM;
  for (uint64_t nstart = start;;) {
    const vm_flags_t newflags = (vma->vm_flags & ~VM_LOCKED_MASK) | flags;
    const uint64_t tmp = std::min(vma->vm_end, end);
    if (int err = mlock_fixup(mm, vma, nstart, tmp, newflags)) return err;
    nstart = tmp;
    if (nstart >= end) return 0;
    vma = vma_lookup(mm, nstart);  // the fixup may have split or merged: look again
    if (!vma) return -ENOMEM;
  }
}

// __mlock_posix_error_return: what GUP's errors mean to a caller of mlock.
int mlock_posix_error_return(long err) {
  if (err == -EFAULT) return -ENOMEM;
  if (err == -ENOMEM) return -EAGAIN;
  return static_cast<int>(err);
}

// do_mlock: lock the pages covering [start, start+len) with `flags`
// (VM_LOCKED, maybe VM_LOCKONFAULT), then fault them in.
int do_mlock(Mm* mm, uint64_t start, uint64_t len, vm_flags_t flags) {
  len = round_up(len + (start & ~PAGE_MASK), PAGE_SIZE);
  start &= PAGE_MASK;
  // The RLIMIT_MEMLOCK check passes: the model has CAP_IPC_LOCK.
  mmap_write_lock(mm);
  int error = apply_vma_lock_flags(mm, start, len, flags);
  mmap_write_unlock(mm);
  if (error) return error;
  const long ret = __mm_populate(mm, start, len, /*ignore_errors=*/false);
  return ret ? mlock_posix_error_return(ret) : 0;
}

// apply_mlockall_flags: MCL_FUTURE goes to mm->def_flags (every later
// mapping is locked), MCL_CURRENT to every VMA now; errors are ignored.
void apply_mlockall_flags(Mm* mm, int flags) REQUIRES(mm->mmap_lock) {
  mm->def_flags &= ~VM_LOCKED_MASK;
  if (flags & MCL_FUTURE) {
    mm->def_flags |= VM_LOCKED | ((flags & MCL_ONFAULT) ? VM_LOCKONFAULT : 0);
    if (!(flags & MCL_CURRENT)) return;
  }
  vm_flags_t to_add = 0;
  if (flags & MCL_CURRENT) to_add = VM_LOCKED | ((flags & MCL_ONFAULT) ? VM_LOCKONFAULT : 0);
  for (uint64_t addr = 0;;) {
    Vma* vma = find_vma(mm, addr);
    if (!vma) return;
    const uint64_t end = vma->vm_end;
    (void)mlock_fixup(mm, vma, vma->vm_start, end, (vma->vm_flags & ~VM_LOCKED_MASK) | to_add);
    addr = end;  // a merge may have grown the VMA past end: find_vma finds it again, harmlessly
  }
}

}  // namespace

int do_mlock2(Mm* mm, uint64_t start, uint64_t len, int flags) {
  if (flags & ~MLOCK_ONFAULT) return -EINVAL;
  return do_mlock(mm, start, len, VM_LOCKED | ((flags & MLOCK_ONFAULT) ? VM_LOCKONFAULT : 0));
}

int do_munlock(Mm* mm, uint64_t start, uint64_t len) {
  len = round_up(len + (start & ~PAGE_MASK), PAGE_SIZE);
  start &= PAGE_MASK;
  mmap_write_lock(mm);
  const int ret = apply_vma_lock_flags(mm, start, len, 0);
  mmap_write_unlock(mm);
  return ret;
}

int do_mlockall(Mm* mm, int flags) {
  if (!flags || (flags & ~(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) || flags == MCL_ONFAULT) return -EINVAL;
  mmap_write_lock(mm);
  apply_mlockall_flags(mm, flags);
  mmap_write_unlock(mm);
  if (flags & MCL_CURRENT) mm_populate(mm, 0, mm->task_size);
  return 0;
}

int do_munlockall(Mm* mm) {
  mmap_write_lock(mm);
  apply_mlockall_flags(mm, 0);
  mmap_write_unlock(mm);
  return 0;
}

uint64_t mm_locked_bytes(Mm* mm) {
  uint64_t bytes = 0;
  mmap_read_lock(mm);
  for (auto& [start, vma] : mm->vmas)
    if (vma->vm_flags & VM_LOCKED) bytes += vma->vm_end - vma->vm_start;
  mmap_read_unlock(mm);
  return bytes;
}

}  // namespace mmlab
