// mm/mremap.c: the system call (mm/mremap.cpp) and its page-table part
// (mm/mremap_pgtable.cpp).
#pragma once

#include <cstdint>

#include "mm/mm.h"

namespace mmlab {
// mremap(2): the new address or -errno.
[[nodiscard]] long do_mremap(Mm* mm, uint64_t addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr);

// Move the entries of [old_addr, old_addr+len) to new_addr (new_vma already
// exists and covers the destination). PMD leaves move whole when both ends are
// PMD-aligned, else they are split first (move_huge_pmd / split_huge_pmd).
// Returns the number of bytes moved (len on success).
uint64_t move_page_tables(Vma* vma, uint64_t old_addr, Vma* new_vma, uint64_t new_addr, uint64_t len);

}  // namespace mmlab
