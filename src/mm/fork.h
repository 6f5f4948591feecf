// kernel/fork.c's dup_mm/dup_mmap and the copy_page_range family of
// mm/memory.c and mm/huge_memory.c. Defined in mm/fork.cpp.
#pragma once

#include <memory>

#include "mm/mm.h"

namespace mmlab {

// Copy oldmm's VMAs and page tables into the new, empty mm (dup_mmap). Takes
// both mmap_locks for write. 0, or -ENOMEM with mm partly built: the caller
// tears it down with exit_mmap().
[[nodiscard]] int dup_mmap(Mm* mm, Mm* oldmm);

// dup_mm: a new Mm holding a copy of oldmm (dup_mmap); nullptr with *err
// -ENOMEM, or -EHWPOISON from a machine check copying a maybe-pinned page.
std::unique_ptr<Mm> dup_mm(Mm* oldmm, int* err);

// Copy src_vma's entries into dst_vma, its new twin in the child (both
// mmap_locks held for write, src_vma write-locked). VMAs a fault can refill
// are skipped; hugetlb goes to copy_hugetlb_page_range. 0 or -ENOMEM.
[[nodiscard]] int copy_page_range(Vma* dst_vma, Vma* src_vma);

// Copy the PMD leaf at src_pmd (copy_huge_pmd). 0 when copied or skipped (file
// VMAs refault), -ENOMEM, or -EAGAIN: copy at PTE level (the source PMD may
// have been split because its THP may be pinned).
[[nodiscard]] int copy_huge_pmd(Vma* dst_vma, Vma* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr);

}  // namespace mmlab
