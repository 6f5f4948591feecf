// mm/userfaultfd.c and fs/userfaultfd.c: registering ranges and
// write-protecting them. Defined in mm/userfaultfd.cpp.
#pragma once

#include <cstdint>

#include "mm/mm.h"

namespace mmlab {

// UFFDIO_REGISTER: give every VMA piece of [start, start + len) the
// VM_UFFD_* flags in uffd_flags (splitting and merging as madvise does).
// 0, -EINVAL (unaligned, no VMA, a VMA userfaultfd cannot serve), -EPERM
// (a VMA not VM_MAYWRITE), -ENOMEM.
[[nodiscard]] int userfaultfd_register(Mm* mm, uint64_t start, uint64_t len, vm_flags_t uffd_flags);

// UFFDIO_WRITEPROTECT (mwriteprotect_range): set (or clear) uffd-wp on the
// range's present and swap entries, write-protecting them. 0, -EINVAL,
// -ENOENT (a VMA not registered for write-protection).
[[nodiscard]] int mwriteprotect_range(Mm* mm, uint64_t start, uint64_t len, bool enable_wp);

}  // namespace mmlab
