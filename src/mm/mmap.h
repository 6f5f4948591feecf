// mm/mmap.c (and include/linux/mman.h): mapping and unmapping, exit_mmap,
// mm_populate. Defined in mm/mmap.cpp. The system-call entries return the
// kernel's results: an address or 0 on success, -errno on failure.
#pragma once

#include <cstdint>
#include <memory>

#include "mm/mm.h"
#include "mmlab/types.h"

namespace mmlab {

struct File;

// mmap(2) of anonymous memory (do_mmap).
[[nodiscard]] long do_mmap(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, uint64_t pgoff);
// munmap(2): takes mmap_lock for write (__vm_munmap).
[[nodiscard]] int do_munmap(Mm* mm, uint64_t start, uint64_t len);

// Tear down every VMA and page table (exit_mmap).
void exit_mmap(Mm* mm);

// get_unmapped_area(): an address for a new mapping of len bytes (addr a
// hint, or the address itself with MAP_FIXED), or -errno. Anonymous only.
[[nodiscard]] long get_unmapped_area(Mm* mm, uint64_t addr, uint64_t len, uint64_t pgoff, int flags, vm_flags_t vm_flags)
    REQUIRES_SHARED(mm->mmap_lock);

// calc_vm_prot_bits (include/linux/mman.h): PROT_* to VM_READ/WRITE/EXEC.
inline vm_flags_t calc_vm_prot_bits(int prot) {
  return ((prot & PROT_READ) ? VM_READ : 0) | ((prot & PROT_WRITE) ? VM_WRITE : 0) |
         ((prot & PROT_EXEC) ? VM_EXEC : 0);
}

// __mm_populate: fault in the VMAs of [start, start+len) as
// populate_vma_page_range does (VM_LOCKONFAULT ones not at all). Takes
// mmap_lock for read itself. 0, or with !ignore_errors the first VMA's
// error (-EFAULT for PROT_NONE, GUP's otherwise); mlock reports it.
[[nodiscard]] long __mm_populate(Mm* mm, uint64_t start, uint64_t len, bool ignore_errors);
// mm_populate: __mm_populate(ignore_errors=1), after mmap(MAP_POPULATE or
// VM_LOCKED), mlockall(MCL_CURRENT) or an mremap expansion of a VM_LOCKED VMA.
void mm_populate(Mm* mm, uint64_t start, uint64_t len);

// do_mmap() of `file` (nullptr: anonymous, as do_mmap). The caller has done
// ksys_mmap_pgoff's part: an fd resolved to `file`, MAP_HUGETLB turned into a
// hugetlbfs file. Returns the address or -errno. read_only: the struct file
// mapped was opened without FMODE_WRITE (shmat's SHM_RDONLY), as a file
// whose fd is O_RDONLY (File::read_only_fd).
[[nodiscard]] long do_mmap_file(Mm* mm, std::shared_ptr<File> file, uint64_t addr, uint64_t len, int prot, int flags,
                  uint64_t pgoff, bool read_only = false);

}  // namespace mmlab
