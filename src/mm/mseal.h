// mm/mseal.c: mseal(2), and the test the calls that a seal refuses make.
// Defined in mm/mseal.cpp.
//
// A sealed VMA (VM_SEALED) refuses, with -EPERM: munmap and mmap(MAP_FIXED)
// over it (do_vmi_munmap), mremap of it (check_prep_vma) or onto it,
// mprotect (mprotect_fixup), and the madvise advice that discards data of an
// anonymous mapping the caller cannot write (can_madvise_modify). Fork copies
// the seal; exit tears the VMA down as any other.
#pragma once

#include <cstdint>

#include "mm/mm.h"

namespace mmlab {

// mseal(start, len, flags): flags must be 0 and start page-aligned
// (-EINVAL); [start, start+len) must be mapped without a hole (-ENOMEM).
// Sealing a sealed VMA again is no error.
[[nodiscard]] int do_mseal(Mm* mm, uint64_t start, uint64_t len, unsigned long flags);

inline bool vma_is_sealed(const Vma* vma) { return vma->vm_flags & VM_SEALED; }

// can_madvise_modify: may `behavior` run on vma? Not a discard
// (MADV_DONTNEED, DONTNEED_LOCKED, FREE, REMOVE, DONTFORK, WIPEONFORK,
// GUARD_INSTALL) of a sealed anonymous VMA without VM_WRITE.
bool can_madvise_modify(const Vma* vma, int behavior);

}  // namespace mmlab
