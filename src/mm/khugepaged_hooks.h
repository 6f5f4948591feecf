// The call sites below the khugepaged layer (include/linux/khugepaged.h's
// inline wrappers): registration from MADV_HUGEPAGE, the PMD fault, VMA
// creation and merge, fork and exit, and the way into MADV_COLLAPSE.
//
// khugepaged (src/khugepaged/) sits above this layer, so these reach it
// through a table the System installs in the Kernel when it is made, next to
// GUP's (mm/gup_hooks.h). Without it nothing registers and MADV_COLLAPSE is
// -EINVAL, as in a kernel built without CONFIG_TRANSPARENT_HUGEPAGE's
// collapse support. A wrapper for a function that mm/khugepaged.c defines is
// named mm_<function>, so that the kernel's name leads to the real one in
// src/khugepaged/; khugepaged_fork and khugepaged_exit are the header's own.
#pragma once

#include <cerrno>
#include <cstdint>

#include "mm/kernel.h"
#include "mm/mm.h"

namespace mmlab {

struct KhugepagedHooks {
  void (*enter_vma)(Vma* vma, vm_flags_t vm_flags);  // khugepaged_enter_vma
  void (*enter)(Mm* mm);                             // __khugepaged_enter
  void (*exit)(Mm* mm);                              // __khugepaged_exit
  // madvise_collapse: mmap_lock held for read on entry and on return;
  // *lock_dropped set if it was released meanwhile (vma is stale then).
  int (*madvise_collapse)(Vma* vma, uint64_t start, uint64_t end, bool* lock_dropped);
};

// A VMA whose flags may now make its mm worth scanning (mmap, merge,
// MADV_HUGEPAGE with the flags it is about to get, the PMD fault).
inline void mm_khugepaged_enter_vma(Vma* vma, vm_flags_t vm_flags) {
  if (const KhugepagedHooks* h = vma->vm_mm->kernel->khugepaged_hooks) h->enter_vma(vma, vm_flags);
}

// fork of a registered mm registers the child (dup_mmap).
inline void khugepaged_fork(Mm* mm, Mm* oldmm) {
  if (!oldmm->test_flag(MMF_VM_HUGEPAGE)) return;
  if (const KhugepagedHooks* h = mm->kernel->khugepaged_hooks) h->enter(mm);
}

// The last user of mm is gone (mmput, before exit_mmap): mm->mm_users is 0.
inline void khugepaged_exit(Mm* mm) {
  if (!mm->test_flag(MMF_VM_HUGEPAGE)) return;
  if (const KhugepagedHooks* h = mm->kernel->khugepaged_hooks) h->exit(mm);
}

// MADV_COLLAPSE of [start, end) in vma (see madvise_collapse above).
inline int mm_madvise_collapse(Vma* vma, uint64_t start, uint64_t end, bool* lock_dropped) {
  if (const KhugepagedHooks* h = vma->vm_mm->kernel->khugepaged_hooks)
    return h->madvise_collapse(vma, start, end, lock_dropped);
  return -EINVAL;
}

// What MADV_COLLAPSE returns for a range of a file other than shmem that
// passed the eligibility checks (never, in a model without
// CONFIG_READ_ONLY_THP_FOR_FS: kept as the guard for such a kernel); the
// scenario runner turns it into a SKIP. The kernel never returns it.
inline constexpr int kCollapseFileNotModelled = -ENOSYS;

}  // namespace mmlab
