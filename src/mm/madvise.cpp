// madvise() (mm/madvise.c): argument checks, the lock each behaviour needs,
// the walk over the VMAs of the range (holes are skipped and reported as
// -ENOMEM at the end), the behaviours that change vm_flags (splitting and
// merging VMAs as mprotect does), MADV_DONTNEED/FREE, and MADV_POPULATE_*.
//
// MADV_COLLAPSE is khugepaged's (reached through mm/khugepaged.h).
//
// Not modelled yet (they succeed as no-ops or fail as noted): MADV_FREE's
// lazy freeing, MADV_COLD/PAGEOUT (no swap device), MADV_WILLNEED (nothing to
// read ahead), MADV_REMOVE (-EINVAL: needs shmem files),
// MADV_GUARD_INSTALL/REMOVE (-EINVAL), MADV_HWPOISON/SOFT_OFFLINE (-EINVAL,
// as without CONFIG_MEMORY_FAILURE).
#include <algorithm>

#include "mm/internal.h"
#include "mm/khugepaged.h"

namespace mmlab {
namespace {

// uapi advice values the public header does not name.
constexpr int MADV_RANDOM = 1, MADV_SEQUENTIAL = 2, MADV_WILLNEED = 3;
constexpr int MADV_MERGEABLE = 12, MADV_UNMERGEABLE = 13;
constexpr int MADV_DONTDUMP = 16, MADV_DODUMP = 17;
constexpr int MADV_DONTNEED_LOCKED = 24;
constexpr int MADV_GUARD_INSTALL = 102, MADV_GUARD_REMOVE = 103;

// Read-ahead hints (include/linux/mm.h), only flags for anonymous memory.
constexpr vm_flags_t VM_SEQ_READ = 0x8000, VM_RAND_READ = 0x10000;

bool madvise_behavior_valid(int behavior) {
  switch (behavior) {
    case MADV_DOFORK:
    case MADV_DONTFORK:
    case MADV_NORMAL:
    case MADV_SEQUENTIAL:
    case MADV_RANDOM:
    case MADV_REMOVE:
    case MADV_WILLNEED:
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_FREE:
    case MADV_COLD:
    case MADV_PAGEOUT:
    case MADV_POPULATE_READ:
    case MADV_POPULATE_WRITE:
    case MADV_MERGEABLE:  // CONFIG_KSM
    case MADV_UNMERGEABLE:
    case MADV_HUGEPAGE:  // CONFIG_TRANSPARENT_HUGEPAGE
    case MADV_NOHUGEPAGE:
    case MADV_COLLAPSE:
    case MADV_DONTDUMP:
    case MADV_DODUMP:
    case MADV_WIPEONFORK:
    case MADV_KEEPONFORK:
    case MADV_GUARD_INSTALL:
    case MADV_GUARD_REMOVE:
      return true;
    default:
      return false;
  }
}

enum class MadviseLock : uint8_t { kMmapRead, kMmapWrite, kVmaRead };

// get_lock_mode: flag changes need mmap_lock for write; the rest read it,
// and MADV_DONTNEED/FREE first try the per-VMA lock of a single VMA.
MadviseLock get_lock_mode(int behavior) {
  switch (behavior) {
    case MADV_REMOVE:
    case MADV_WILLNEED:
    case MADV_COLD:
    case MADV_PAGEOUT:
    case MADV_POPULATE_READ:
    case MADV_POPULATE_WRITE:
    case MADV_COLLAPSE:
    case MADV_GUARD_INSTALL:
    case MADV_GUARD_REMOVE:
      return MadviseLock::kMmapRead;
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_FREE:
      return MadviseLock::kVmaRead;
    default:
      return MadviseLock::kMmapWrite;
  }
}

// ---- behaviours that only read the VMA set (mmap_lock read or VMA lock) ----

// madvise_dontneed_free_valid_vma. TODO(hugetlb): huge-page aligned ranges.
bool madvise_dontneed_free_valid_vma(const Vma* vma, int behavior) {
  vm_flags_t forbidden = VM_PFNMAP;
  if (behavior != MADV_DONTNEED_LOCKED) forbidden |= VM_LOCKED;
  return !(vma->vm_flags & forbidden);
}

int madvise_dontneed_free(Vma* vma, uint64_t start, uint64_t end, int behavior) {
  if (!madvise_dontneed_free_valid_vma(vma, behavior)) return -EINVAL;
  end = std::min(end, vma->vm_end);
  if (behavior == MADV_DONTNEED || behavior == MADV_DONTNEED_LOCKED) {
    zap_vma_range(vma, start, end);  // madvise_dontneed_single_vma
    return 0;
  }
  // MADV_FREE (madvise_free_single_vma): anonymous private memory only.
  if (!vma->is_anonymous()) return -EINVAL;
  // TODO(reclaim): mark the folios lazyfree (clean PTEs, split partly covered
  // large folios). Keeping the data is one of the outcomes MADV_FREE allows.
  return 0;
}

// can_madv_lru_vma
bool can_madv_lru_vma(const Vma* vma) { return !(vma->vm_flags & (VM_LOCKED | VM_PFNMAP | VM_HUGETLB)); }

// The behaviours of madvise_vma_behavior that leave vm_flags alone. *pprev
// receives the VMA the walk continues after (nullptr: look up again).
int madvise_vma_read_behavior(Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior) {
  *pprev = vma;
  switch (behavior) {
    case MADV_DONTNEED:
    case MADV_DONTNEED_LOCKED:
    case MADV_FREE:
      return madvise_dontneed_free(vma, start, end, behavior);
    case MADV_REMOVE:
      // madvise_remove: needs a shared, writable file (shmem included).
      // Without shmem files nothing qualifies yet. TODO(shmem): punch a hole.
      *pprev = nullptr;
      return -EINVAL;
    case MADV_WILLNEED:
      return 0;  // TODO(swap): swap in the range's swap entries
    case MADV_COLD:
    case MADV_PAGEOUT:
      if (!can_madv_lru_vma(vma)) return -EINVAL;
      // MADV_COLD only deactivates (the model keeps no LRU order to change);
      // MADV_PAGEOUT reclaims the range's private anonymous folios to swap.
      if (behavior == MADV_PAGEOUT) madvise_pageout_range(vma, start, end);
      return 0;
    case MADV_COLLAPSE: {
      bool lock_dropped = false;
      int err = madvise_collapse(vma, start, end, &lock_dropped);
      if (lock_dropped) *pprev = nullptr;  // the VMA may be gone: the walk looks up again
      return err;
    }
    case MADV_GUARD_INSTALL:
    case MADV_GUARD_REMOVE:
      return -EINVAL;  // guard regions are not modelled
    default:
      return -EINVAL;
  }
}

// ---- behaviours that change vm_flags (mmap_lock write) ----

// ksm_madvise: only the VMA flag; KSM itself is not modelled.
int ksm_madvise(const Vma* vma, int advice, vm_flags_t* vm_flags) {
  if (advice == MADV_MERGEABLE) {
    if (*vm_flags & VM_MERGEABLE) return 0;
    // vma_ksm_compatible
    if (vma->vm_flags & (VM_SHARED | VM_MAYSHARE | VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_HUGETLB | VM_MIXEDMAP))
      return 0;
    *vm_flags |= VM_MERGEABLE;
  } else {
    if (!(*vm_flags & VM_MERGEABLE)) return 0;
    *vm_flags &= ~VM_MERGEABLE;  // no KSM pages to unmerge
  }
  return 0;
}

// hugepage_madvise
int hugepage_madvise(Vma* vma, int advice, vm_flags_t* vm_flags) {
  if (advice == MADV_HUGEPAGE) {
    *vm_flags &= ~VM_NOHUGEPAGE;
    *vm_flags |= VM_HUGEPAGE;
    // Worth scanning now, without waiting for a fault that may never come.
    khugepaged_enter_vma(vma, *vm_flags);
  } else {
    *vm_flags &= ~VM_HUGEPAGE;
    *vm_flags |= VM_NOHUGEPAGE;
  }
  return 0;
}

// madvise_update_vma
int madvise_update_vma(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, vm_flags_t new_flags)
    REQUIRES(mm->mmap_lock) {
  *pprev = vma;
  if (new_flags == vma->vm_flags) return 0;
  int err = -ENOMEM;
  Vma* v = vma_modify_flags(mm, vma, start, end, new_flags, &err);
  if (!v) return err;
  *pprev = v;
  return 0;
}

// madvise_vma_behavior, flag-changing part.
int madvise_vma_write_behavior(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior)
    REQUIRES(mm->mmap_lock) {
  vm_flags_t new_flags = vma->vm_flags;
  int error = 0;
  switch (behavior) {
    case MADV_NORMAL:
      new_flags &= ~(VM_RAND_READ | VM_SEQ_READ);
      break;
    case MADV_SEQUENTIAL:
      new_flags = (new_flags & ~VM_RAND_READ) | VM_SEQ_READ;
      break;
    case MADV_RANDOM:
      new_flags = (new_flags & ~VM_SEQ_READ) | VM_RAND_READ;
      break;
    case MADV_DONTFORK:
      new_flags |= VM_DONTCOPY;
      break;
    case MADV_DOFORK:
      if (new_flags & VM_IO) return -EINVAL;
      new_flags &= ~VM_DONTCOPY;
      break;
    case MADV_WIPEONFORK:
      // Anonymous private memory only.
      if (vma->vm_file || (new_flags & VM_SHARED)) return -EINVAL;
      new_flags |= VM_WIPEONFORK;
      break;
    case MADV_KEEPONFORK:
      new_flags &= ~VM_WIPEONFORK;
      break;
    case MADV_DONTDUMP:
      new_flags |= VM_DONTDUMP;
      break;
    case MADV_DODUMP:
      if (!(new_flags & VM_HUGETLB) && (new_flags & VM_SPECIAL)) return -EINVAL;
      new_flags &= ~VM_DONTDUMP;
      break;
    case MADV_MERGEABLE:
    case MADV_UNMERGEABLE:
      error = ksm_madvise(vma, behavior, &new_flags);
      break;
    case MADV_HUGEPAGE:
    case MADV_NOHUGEPAGE:
      error = hugepage_madvise(vma, behavior, &new_flags);
      break;
    default:
      return -EINVAL;
  }
  if (!error) error = madvise_update_vma(mm, vma, pprev, start, end, new_flags);
  // madvise() reports a temporary lack of kernel memory as -EAGAIN.
  if (error == -ENOMEM) error = -EAGAIN;
  return error;
}

// The walk calls one of the two through this type; the lock mode decides.
// (A plain function pointer: the analysis cannot follow the call, so the
// write-side visitor re-asserts the write lock it was promised.)
using MadviseVisit = int (*)(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior);

int visit_read(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior) {
  (void)mm;
  return madvise_vma_read_behavior(vma, pprev, start, end, behavior);
}

int visit_write(Mm* mm, Vma* vma, Vma** pprev, uint64_t start, uint64_t end, int behavior) {
  mmap_assert_write_locked(mm);  // do_madvise took it (MadviseLock::kMmapWrite)
  return madvise_vma_write_behavior(mm, vma, pprev, start, end, behavior);
}

// madvise_walk_vmas: apply visit to each VMA piece of [start, end). Holes do
// not stop the walk; they make the result -ENOMEM once everything is done.
int madvise_walk_vmas(Mm* mm, uint64_t start, uint64_t end, int behavior, MadviseVisit visit)
    REQUIRES_SHARED(mm->mmap_lock) {
  int unmapped_error = 0;
  Vma* vma = find_vma(mm, start);
  for (;;) {
    if (!vma) return -ENOMEM;
    if (start < vma->vm_start) {
      unmapped_error = -ENOMEM;
      start = vma->vm_start;
      if (start >= end) break;
    }
    uint64_t piece_end = std::min(vma->vm_end, end);
    Vma* prev = nullptr;
    int error = visit(mm, vma, &prev, start, piece_end, behavior);
    if (error) return error;
    // A merge may have carried the VMA past the piece: skip what it covers.
    if (prev && piece_end < prev->vm_end) piece_end = prev->vm_end;
    if (piece_end >= end) break;
    vma = find_vma(mm, piece_end);
    start = piece_end;
  }
  return unmapped_error;
}

// madvise_populate: fault the whole range in; the errors say why it stopped.
int madvise_populate(Mm* mm, uint64_t start, uint64_t end, int behavior) REQUIRES_SHARED(mm->mmap_lock) {
  long ret = faultin_page_range(mm, start, end, behavior == MADV_POPULATE_WRITE);
  switch (ret) {
    case 0:
      return 0;
    case -EINTR:
    case -EINVAL:  // incompatible mapping or permissions
    case -EHWPOISON:
    case -EFAULT:  // VM_FAULT_SIGBUS or VM_FAULT_SIGSEGV
      return static_cast<int>(ret);
    default:  // -ENOMEM: no VMA or out of memory
      return -ENOMEM;
  }
}

}  // namespace

int do_madvise(Mm* mm, uint64_t start, uint64_t len_in, int behavior) {
  // madvise_should_skip
  if (!madvise_behavior_valid(behavior)) return -EINVAL;
  if (start & ~PAGE_MASK) return -EINVAL;
  const uint64_t len = round_up(len_in, PAGE_SIZE);
  if (len_in && !len) return -EINVAL;  // rounded up from a small negative
  const uint64_t end = start + len;
  if (end < start) return -EINVAL;
  if (end == start) return 0;

  int error;
  switch (get_lock_mode(behavior)) {
    case MadviseLock::kMmapWrite:
      mmap_write_lock(mm);
      error = madvise_walk_vmas(mm, start, end, behavior, visit_write);
      mmap_write_unlock(mm);
      return error;
    case MadviseLock::kVmaRead:
      // try_vma_read_lock: a range inside one VMA needs no mmap_lock.
      if (Vma* vma = lock_vma_under_rcu(mm, start)) {
        if (end <= vma->vm_end) {
          Vma* prev = nullptr;
          error = madvise_vma_read_behavior(vma, &prev, start, end, behavior);
          vma_end_read(vma);
          return error;
        }
        vma_end_read(vma);
      }
      [[fallthrough]];
    case MadviseLock::kMmapRead:
      mmap_read_lock(mm);
      if (behavior == MADV_POPULATE_READ || behavior == MADV_POPULATE_WRITE)
        error = madvise_populate(mm, start, end, behavior);
      else
        error = madvise_walk_vmas(mm, start, end, behavior, visit_read);
      mmap_read_unlock(mm);
      return error;
  }
  return -EINVAL;
}

}  // namespace mmlab
