// The address space's functions: mmap_lock, VMA lookup, per-VMA locks,
// rss counters (the types are in pgtable/mm_types.h).
#pragma once

#include <cstdint>
#include <memory>

#include "pgtable/mm_types.h"

namespace mmlab {

bool vma_is_shmem(const Vma* vma);

// mm_alloc (kernel/fork.c): a new address space with its PGD and the next
// MM ID; nullptr if the PGD cannot be allocated (-ENOMEM).
std::unique_ptr<Mm> mm_alloc(Kernel* k);
MmCounter mm_counter_file(const Folio* folio);  // MM_SHMEMPAGES for shmem folios, else MM_FILEPAGES
MmCounter mm_counter(const Folio* folio);       // MM_ANONPAGES for anon folios

// ---- mmap_lock (include/linux/mmap_lock.h) ----
inline void mmap_read_lock(Mm* mm) ACQUIRE_SHARED(mm->mmap_lock) { mm->mmap_lock.down_read(); }
inline void mmap_read_unlock(Mm* mm) RELEASE_SHARED(mm->mmap_lock) { mm->mmap_lock.up_read(); }
inline bool mmap_read_trylock(Mm* mm) TRY_ACQUIRE_SHARED(true, mm->mmap_lock) { return mm->mmap_lock.down_read_trylock(); }
inline void mmap_write_lock(Mm* mm) ACQUIRE(mm->mmap_lock) { mm->mmap_lock.down_write(); }
// Ends every VMA write lock taken under this write lock (vma_end_write_all).
inline void mmap_write_unlock(Mm* mm) RELEASE(mm->mmap_lock) {
  mm->mm_lock_seq.fetch_add(1, std::memory_order_acq_rel);
  mm->mmap_lock.up_write();
}
// Debug builds check that this thread holds mmap_lock (for write); the
// analysis takes the caller's word from here on.
inline void mmap_assert_locked(Mm* mm) ASSERT_SHARED_CAPABILITY(mm->mmap_lock) { mm->mmap_lock.assert_held(); }
inline void mmap_assert_write_locked(Mm* mm) ASSERT_CAPABILITY(mm->mmap_lock) {
  mm->mmap_lock.assert_write_held();
}

// ---- VMA lookup (mm/mmap.c, mm/vma.c) ----
// The VMA containing addr, or nullptr. mmap_lock held.
Vma* vma_lookup(Mm* mm, uint64_t addr) REQUIRES_SHARED(mm->mmap_lock);

// check_input_range (madvise, mseal): a page-aligned start and a length
// that rounds up to pages without wrapping; *end is start plus that. 0 or
// -EINVAL.
inline int check_input_range(uint64_t start, uint64_t len_in, uint64_t* end) {
  if (start & ~PAGE_MASK) return -EINVAL;
  const uint64_t len = round_up(len_in, PAGE_SIZE);
  if (len_in && !len) return -EINVAL;  // rounded up from a small negative
  *end = start + len;
  return *end < start ? -EINVAL : 0;
}
// The first VMA with vm_end > addr, or nullptr.
Vma* find_vma(Mm* mm, uint64_t addr) REQUIRES_SHARED(mm->mmap_lock);
Vma* vma_prev(Mm* mm, Vma* vma) REQUIRES_SHARED(mm->mmap_lock);
Vma* vma_next(Mm* mm, Vma* vma) REQUIRES_SHARED(mm->mmap_lock);

// ---- per-VMA locks (include/linux/mmap_lock.h) ----
// Without mmap_lock: find the VMA at addr and read-lock it; nullptr if
// there is none or it is being changed (the caller falls back to mmap_lock).
Vma* lock_vma_under_rcu(Mm* mm, uint64_t addr);
void vma_end_read(Vma* vma);
// mmap_lock held for write: exclude per-VMA readers until mmap_write_unlock.
void vma_start_write(Vma* vma) REQUIRES(vma->vm_mm->mmap_lock);
bool vma_is_write_locked(const Vma* vma);

pgprot_t vm_get_page_prot(vm_flags_t flags);
// A shared writable mapping whose pages must write-fault first (soft-dirty,
// uffd-wp, or dirty tracking of an ext4-class file): its vm_page_prot is read-only.
bool vma_wants_writenotify(const Vma* vma);
void vma_set_page_prot(Vma* vma);
// maybe_mkwrite: writable only where the VMA allows writes.
inline pte_t maybe_mkwrite(pte_t pte, const Vma* vma) {
  return (vma->vm_flags & VM_WRITE) ? pte_mkwrite_novma(pte) : pte;
}
inline pmd_t maybe_pmd_mkwrite(pmd_t pmd, const Vma* vma) {
  return (vma->vm_flags & VM_WRITE) ? pmd_mkwrite_novma(pmd) : pmd;
}
// vma_soft_dirty_enabled: soft-dirty tracking is on for the VMA (clear_refs
// cleared VM_SOFTDIRTY), so a clean entry must fault on its next write.
inline bool vma_soft_dirty_enabled(const Vma* vma) { return !(vma->vm_flags & VM_SOFTDIRTY); }
// mm_forbids_zeropage: read faults may not map the shared zero page or the
// huge zero folio (tune mm.zero_page off, a vendor option's behaviour;
// upstream only s390 KVM guests forbid it, and there it also stops a
// split's remap of zero-filled pages, which the vendor option does not).
bool mm_forbids_zeropage(const Mm* mm);
// userfaultfd_wp (include/linux/userfaultfd_k.h): the VMA is registered for uffd-wp.
inline bool userfaultfd_wp(const Vma* vma) { return vma->vm_flags & VM_UFFD_WP; }
// pte_needs_soft_dirty_wp / pmd_needs_soft_dirty_wp (mm/internal.h): soft-dirty
// tracking wants the entry's next write to fault.
inline bool pte_needs_soft_dirty_wp(const Vma* vma, pte_t pte) {
  return vma_soft_dirty_enabled(vma) && !pte_soft_dirty(pte);
}
inline bool pmd_needs_soft_dirty_wp(const Vma* vma, pmd_t pmd) {
  return vma_soft_dirty_enabled(vma) && !pmd_soft_dirty(pmd);
}

// The last user of mm is gone (mmput): mm_users drops to 0, khugepaged
// lets go of the mm, then exit_mmap.
void mmput(Mm* mm);

// prctl(PR_SET_THP_DISABLE): MMF_DISABLE_THP (flags 0) or
// MMF_DISABLE_THP_EXCEPT_ADVISED (PR_THP_DISABLE_EXCEPT_ADVISED), both
// cleared when enabling. 0 or -EINVAL (flags when enabling, unknown flags).
[[nodiscard]] int prctl_set_thp_disable(Mm* mm, bool disable, unsigned long flags);

}  // namespace mmlab
