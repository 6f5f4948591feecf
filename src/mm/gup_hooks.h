// The call sites below the GUP layer: MADV_POPULATE_READ/WRITE
// (madvise_populate) and mm_populate (MAP_POPULATE, VM_LOCKED) fault their
// ranges in through faultin_page_range(), which the kernel keeps in
// mm/gup.c next to them. The model's GUP (src/gup/) sits above this layer,
// so these reach it through a table the System installs in the Kernel when
// it is made, as vm_operations_struct lets mm reach a driver's code.
#pragma once

#include <cerrno>
#include <cstdint>

#include "mm/kernel.h"
#include "mm/mm.h"

namespace mmlab {

struct GupHooks {
  // faultin_page_range: fault in [start, end) of mm (mmap_lock held for
  // read). 0 or -errno (-ENOMEM no VMA, -EINVAL VMA check, -EFAULT fault error).
  long (*faultin_page_range)(Mm* mm, uint64_t start, uint64_t end, bool write);
};

// faultin_page_range() for mm's callers. Without the GUP layer (no hooks
// installed) nothing can be faulted in: -EFAULT.
inline long mm_faultin_page_range(Mm* mm, uint64_t start, uint64_t end, bool write) REQUIRES_SHARED(mm->mmap_lock) {
  if (const GupHooks* h = mm->kernel->gup_hooks) return h->faultin_page_range(mm, start, end, write);
  return -EFAULT;
}

}  // namespace mmlab
