// VMA-level operations of mm/vma.c (mm/vma.h): splitting, merging, linking
// and modifying VMAs, shared by mmap, munmap, mremap, mprotect, madvise and
// fork. Defined in mm/vma.cpp (do_vmi_munmap in mm/mmap.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "mm/mm.h"
#include "sync/rwsem.h"

namespace mmlab {

// Split vma at addr (addr strictly inside it); the new VMA covers [addr, old end)
// when new_below is false. Splits a PMD leaf that straddles addr first
// (vma_adjust_trans_huge). Returns 0 or -ENOMEM.
[[nodiscard]] int split_vma(Mm* mm, Vma* vma, uint64_t addr, bool new_below) REQUIRES(mm->mmap_lock);

// Try to merge vma with its neighbours after its flags changed (vma_modify / vma_merge).
Vma* vma_merge_neighbours(Mm* mm, Vma* vma) REQUIRES(mm->mmap_lock);

// A new, unlinked VMA with src's mm, range, flags, page protection, pgoff and
// file (vm_area_dup). Not linked to any anon_vma: anon_vma_clone() does that.
std::unique_ptr<Vma> vm_area_dup(const Vma* src);

// Insert a VMA whose range is free into mm's tree, write-locked (vma_link).
// Returns the VMA, now owned by mm. A file VMA also joins its file's i_mmap.
Vma* vma_link(Mm* mm, std::unique_ptr<Vma> vma) REQUIRES(mm->mmap_lock);

// The file rmap (mm/vma.c's vma_link_file, mm/mmap.c's unlink_file_vma): a
// file VMA joins its file's i_mmap when linked and leaves it before its page
// tables may be freed or the VMA destroyed (munmap, exit, merge, a moved
// VMA), so that a walker under i_mmap_rwsem never meets a freed VMA.
void vma_link_file(Vma* vma);
void unlink_file_vma(Vma* vma);

// The first VMA intersecting [start, end), or nullptr (find_vma_intersection).
Vma* find_vma_intersection(Mm* mm, uint64_t start, uint64_t end) REQUIRES_SHARED(mm->mmap_lock);

// Give [start, end) (inside vma) the flags newflags: split at the ends,
// set the flags and vm_page_prot, merge with compatible neighbours
// (vma_modify_flags). Returns the VMA now covering start, or nullptr on
// -ENOMEM. The page tables are the caller's (change_protection for mprotect).
Vma* vma_modify_flags(Mm* mm, Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags,
                      int* err = nullptr)
    REQUIRES(mm->mmap_lock);

// munmap with mmap_lock already held for write (do_vmi_munmap). kNoZap is
// mremap's unmap of a range whose entries were moved away already.
enum class MunmapZap : uint8_t { kZap, kNoZap };

[[nodiscard]] int do_vmi_munmap(Mm* mm, uint64_t start, uint64_t len, MunmapZap zap = MunmapZap::kZap) REQUIRES(mm->mmap_lock);

// VM_SPECIAL (include/linux/mm.h): mappings that never merge or expand.
inline constexpr vm_flags_t VM_SPECIAL = VM_IO | VM_DONTEXPAND | VM_PFNMAP | VM_MIXEDMAP;

// vma_prepare/vma_complete's rmap lock: holds av's rwsem for write (if av is
// not null) while a VMA's range changes, so an rmap walker sees the old or the
// new layout.
class AnonVmaWriteLock {
 public:
  explicit AnonVmaWriteLock(AnonVma* av) : hold_(av ? &av->rwsem : nullptr, RwSemHold::Mode::kWrite) {}

 private:
  RwSemHold hold_;
};

}  // namespace mmlab
