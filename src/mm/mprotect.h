// mm/mprotect.c: the system call (mm/mprotect.cpp) and its page-table
// part (mm/mprotect_pgtable.cpp).
#pragma once

#include <cstdint>

#include "mm/mm.h"

namespace mmlab {
// mprotect(2): 0 or -errno.
[[nodiscard]] int do_mprotect(Mm* mm, uint64_t start, uint64_t len, int prot);

// Apply vma's new vm_page_prot to [start, end): write-protect or make
// writable as the kernel's change_protection() does (a PTE becomes writable
// only where a write fault would reuse without further checks:
// can_change_pte_writable). PMD leaves that are only partly covered are split
// first. Returns the number of entries changed.
[[nodiscard]] long change_protection(Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags);

}  // namespace mmlab
