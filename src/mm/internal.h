// Functions shared between the layers below the public API (the model's
// mm/internal.h). Each comment gives the contract the caller relies on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mm/filemap.h"
#include "mm/hugetlb.h"
#include "mm/mm.h"

namespace mmlab {

// ---- mm/vma.c, mm/mmap.c: VMA-level operations (mm/vma.cpp, mm/mmap.cpp) ----
// All return the kernel's results: an address or 0 on success, -errno on failure.
long do_mmap(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, uint64_t pgoff);
int do_munmap(Mm* mm, uint64_t start, uint64_t len);
int do_mprotect(Mm* mm, uint64_t start, uint64_t len, int prot);
long do_mremap(Mm* mm, uint64_t addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr);
int do_madvise(Mm* mm, uint64_t start, uint64_t len, int advice);
// Tear down every VMA and page table (exit_mmap).
void exit_mmap(Mm* mm);
// The last user of mm is gone (mmput): mm_users drops to 0, khugepaged
// lets go of the mm, then exit_mmap.
void mmput(Mm* mm);

// Split vma at addr (addr strictly inside it); the new VMA covers [addr, old end)
// when new_below is false. Splits a PMD leaf that straddles addr first
// (vma_adjust_trans_huge). Returns 0 or -ENOMEM.
int split_vma(Mm* mm, Vma* vma, uint64_t addr, bool new_below) REQUIRES(mm->mmap_lock);
// Try to merge vma with its neighbours after its flags changed (vma_modify / vma_merge).
Vma* vma_merge_neighbours(Mm* mm, Vma* vma) REQUIRES(mm->mmap_lock);

// ---- mm/rmap.c: anon_vma ----
// Attach an anon_vma to vma if it has none (anon_vma_prepare). Returns 0 or -ENOMEM.
int anon_vma_prepare(Vma* vma);
// Link a new VMA (split or copy) into every anon_vma of src (anon_vma_clone).
void anon_vma_clone(Vma* dst, const Vma* src);
// Unlink vma from its anon_vmas, freeing ones that become unused (unlink_anon_vmas).
void unlink_anon_vmas(Vma* vma);

// ---- mm/memory.c: zap and page-table freeing (mm/zap.cpp) ----
// Unmap every present/swap entry of [start, end) inside vma, releasing the
// folios' mappings and references (zap_page_range_single / unmap_vmas). Caller
// holds mmap_lock (read for MADV_DONTNEED, write for munmap/exit).
void zap_vma_range(Vma* vma, uint64_t start, uint64_t end);
// Free the page-table pages that map only [start, end), where no VMA remains,
// staying within [floor, ceiling) (the neighbours' tables are kept).
void free_pgtables(Mm* mm, uint64_t start, uint64_t end, uint64_t floor, uint64_t ceiling);

// ---- mm/mprotect.c (mm/mprotect.cpp): page-table part ----
// Apply vma's new vm_page_prot to [start, end): write-protect or make
// writable as the kernel's change_protection() does (a PTE becomes writable
// only where a write fault would reuse without further checks:
// can_change_pte_writable). PMD leaves that are only partly covered are split
// first. Returns the number of entries changed.
long change_protection(Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags);

// ---- mm/mremap.c: page-table part ----
// Move the entries of [old_addr, old_addr+len) to new_addr (new_vma already
// exists and covers the destination). PMD leaves move whole when both ends are
// PMD-aligned, else they are split first (move_huge_pmd / split_huge_pmd).
// Returns the number of bytes moved (len on success).
uint64_t move_page_tables(Vma* vma, uint64_t old_addr, Vma* new_vma, uint64_t new_addr, uint64_t len);

// ---- mm/huge_memory.c ----
// Split any PMD leaf mapping that straddles start or end of [start,end) in vma
// (vma_adjust_trans_huge). The folios stay whole; their mappings become PTEs.
void vma_adjust_trans_huge(Vma* vma, uint64_t start, uint64_t end);
void split_huge_pmd_address(Vma* vma, uint64_t address);

// ==== BEGIN vma-layer helpers (added with mm/vma.cpp, mm/mmap.cpp; the
// ==== VMA engineer's block: shared by mmap, munmap, mremap, mprotect, madvise
// ==== and fork) ====

// A new, unlinked VMA with src's mm, range, flags, page protection, pgoff and
// file (vm_area_dup). Not linked to any anon_vma: anon_vma_clone() does that.
std::unique_ptr<Vma> vm_area_dup(const Vma* src);
// Insert a VMA whose range is free into mm's tree, write-locked (vma_link).
// Returns the VMA, now owned by mm.
Vma* vma_link(Mm* mm, std::unique_ptr<Vma> vma) REQUIRES(mm->mmap_lock);
// The first VMA intersecting [start, end), or nullptr (find_vma_intersection).
Vma* find_vma_intersection(Mm* mm, uint64_t start, uint64_t end) REQUIRES_SHARED(mm->mmap_lock);
// Give [start, end) (inside vma) the flags newflags: split at the ends,
// set the flags and vm_page_prot, merge with compatible neighbours
// (vma_modify_flags). Returns the VMA now covering start, or nullptr on
// -ENOMEM. The page tables are the caller's (change_protection for mprotect).
Vma* vma_modify_flags(Mm* mm, Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags,
                      int* err = nullptr)
    REQUIRES(mm->mmap_lock);
// get_unmapped_area(): an address for a new mapping of len bytes (addr a
// hint, or the address itself with MAP_FIXED), or -errno. Anonymous only.
long get_unmapped_area(Mm* mm, uint64_t addr, uint64_t len, uint64_t pgoff, int flags, vm_flags_t vm_flags)
    REQUIRES_SHARED(mm->mmap_lock);
// munmap with mmap_lock already held for write (do_vmi_munmap). kNoZap is
// mremap's unmap of a range whose entries were moved away already.
enum class MunmapZap : uint8_t { kZap, kNoZap };
int do_vmi_munmap(Mm* mm, uint64_t start, uint64_t len, MunmapZap zap = MunmapZap::kZap) REQUIRES(mm->mmap_lock);
// VM_SPECIAL (include/linux/mm.h): mappings that never merge or expand.
inline constexpr vm_flags_t VM_SPECIAL = VM_IO | VM_DONTEXPAND | VM_PFNMAP | VM_MIXEDMAP;
// calc_vm_prot_bits (include/linux/mman.h): PROT_* to VM_READ/WRITE/EXEC.
inline vm_flags_t calc_vm_prot_bits(int prot) {
  return ((prot & PROT_READ) ? VM_READ : 0) | ((prot & PROT_WRITE) ? VM_WRITE : 0) |
         ((prot & PROT_EXEC) ? VM_EXEC : 0);
}
// __mm_populate(start, len, ignore_errors=1) after mmap(MAP_POPULATE/VM_LOCKED)
// or an mremap expansion of a VM_LOCKED VMA. Takes mmap_lock for read itself.
void mm_populate(Mm* mm, uint64_t start, uint64_t len);
// vma_prepare/vma_complete's rmap lock: holds av's rwsem for write (if av is
// not null) while a VMA's range changes, so an rmap walker sees the old or the
// new layout. Conditional locking is beyond the analysis, hence the opt-out.
class AnonVmaWriteLock {
 public:
  explicit AnonVmaWriteLock(AnonVma* av) NO_THREAD_SAFETY_ANALYSIS : av_(av) {
    if (av_) av_->rwsem.down_write();
  }
  ~AnonVmaWriteLock() NO_THREAD_SAFETY_ANALYSIS {
    if (av_) av_->rwsem.up_write();
  }
  AnonVmaWriteLock(const AnonVmaWriteLock&) = delete;
  AnonVmaWriteLock& operator=(const AnonVmaWriteLock&) = delete;

 private:
  AnonVma* av_;
};
// anon_vma references beyond the VMA links (an rmap walker that must keep
// one alive after dropping its lock). put_anon_vma frees it at zero.
void get_anon_vma(AnonVma* av);
void put_anon_vma(AnonVma* av);
// ==== END vma-layer helpers ====

// ---- kernel/sys.c, fs/userfaultfd.c + mm/userfaultfd.c (mm/mm.cpp, mm/userfaultfd.cpp) ----
// prctl(PR_SET_THP_DISABLE): MMF_DISABLE_THP (flags 0) or
// MMF_DISABLE_THP_EXCEPT_ADVISED (PR_THP_DISABLE_EXCEPT_ADVISED), both
// cleared when enabling. 0 or -EINVAL (flags when enabling, unknown flags).
int prctl_set_thp_disable(Mm* mm, bool disable, unsigned long flags);
// UFFDIO_REGISTER: give every VMA piece of [start, start + len) the
// VM_UFFD_* flags in uffd_flags (splitting and merging as madvise does).
// 0, -EINVAL (unaligned, no VMA, a VMA userfaultfd cannot serve), -EPERM
// (a VMA not VM_MAYWRITE), -ENOMEM.
int userfaultfd_register(Mm* mm, uint64_t start, uint64_t len, vm_flags_t uffd_flags);
// UFFDIO_WRITEPROTECT (mwriteprotect_range): set (or clear) uffd-wp on the
// range's present and swap entries, write-protecting them. 0, -EINVAL,
// -ENOENT (a VMA not registered for write-protection).
int mwriteprotect_range(Mm* mm, uint64_t start, uint64_t len, bool enable_wp);

// ---- layers of issue 3: each function's owner is named ----
struct File;
struct VmFault;


// ==== BEGIN file layer (fault/filemap.cpp, mm/mmap.cpp's file paths) ====
// do_mmap() of `file` (nullptr: anonymous, as do_mmap). The caller has done
// ksys_mmap_pgoff's part: an fd resolved to `file`, MAP_HUGETLB turned into a
// hugetlbfs file. Returns the address or -errno.
long do_mmap_file(Mm* mm, std::shared_ptr<File> file, uint64_t addr, uint64_t len, int prot, int flags,
                  uint64_t pgoff);
// ==== END file layer ====

// fault/swap.cpp: swap entries in the zap and fork paths.
// Zap the non-present entries starting at pte (swap entries, migration
// entries, markers); returns how many it consumed (>= 1).
unsigned zap_nonpresent_ptes(Vma* vma, pte_t* pte, pte_t ptent, uint64_t addr, unsigned max_nr);
// fork: copy one non-present PTE (swap_duplicate, clear the exclusive marker
// in the source). Returns 0 or -ENOMEM.
int copy_nonpresent_pte(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, uint64_t addr);
// Drop the swap-cache reference of a folio whose swap slots nobody uses any more.
bool folio_free_swap(Folio* folio);
// MADV_COLD (madvise_cold: deactivate) or MADV_PAGEOUT (madvise_pageout:
// reclaim to swap, discard lazy-free folios) of [start, end) in vma, which
// passed can_madv_lru_vma(). Large folios the range covers only in part are
// split first; folios another process may map are left alone.
enum class ColdOrPageout : uint8_t { kCold, kPageout };
void madvise_cold_or_pageout_range(Vma* vma, uint64_t start, uint64_t end, ColdOrPageout what);
// The PTE-table part that the madvise walkers over [start, end) inside one
// PMD share (madvise_cold_or_pageout_pte_range, madvise_free_pte_range,
// mm/madvise.cpp): the table's lock, the TLB flush owed for the entries
// made old or clean under it, and the step for a large folio.
class MadvisePteWalk {
 public:
  MadvisePteWalk(Vma* vma, pmd_t* pmd, uint64_t start, uint64_t end) : vma_(vma), pmd_(pmd), start_(start), end_(end) {}
  ~MadvisePteWalk() { unlock(); }
  MadvisePteWalk(const MadvisePteWalk&) = delete;
  MadvisePteWalk& operator=(const MadvisePteWalk&) = delete;
  // Map and lock the table at addr (pte_offset_map_lock); false if none.
  bool lock(uint64_t addr);
  // Flush what is owed, then unlock (nothing if not locked).
  void unlock();
  pte_t* pte() const { return pte_; }
  void advance(unsigned nr) { pte_ += nr; }
  // An entry under the lock was made old or clean: flush before unlocking.
  void owe_flush() { flush_ = true; }
  // The large folio mapped from pte() at addr (*ptent its PTE): with the
  // run of PTEs that map it inside the range in *nr (young and dirty bits
  // merged into *ptent), kWhole when the range maps all of it; otherwise it
  // is split, unless another mm may map it or it is locked (kNext: go on
  // after *nr entries, 0 to look at addr again after a split), and kStop if
  // the table went away meanwhile.
  enum class LargeFolio : uint8_t { kWhole, kNext, kStop };
  LargeFolio large_folio(Folio* folio, uint64_t addr, pte_t* ptent, unsigned* nr);

 private:
  Vma* vma_;
  pmd_t* pmd_;
  uint64_t start_, end_;
  pte_t* pte_ = nullptr;
  SpinLock* ptl_ = nullptr;
  bool flush_ = false;
};

// ==== BEGIN swap layer (fault/swap.cpp, mm/huge_split.cpp; the swap
// ==== engineer's block) ====
// split_huge_page_to_list_to_order(folio, list, 0) for an anonymous large
// folio: every page becomes an order-0 folio keeping its mappings (zero-filled
// pages are remapped to the shared zero page, as RMP_USE_SHARED_ZEROPAGE).
// The caller holds the folio lock and one reference; on success they stay on
// the (now order-0) head. With a list, the other new folios are appended to
// it, each with one reference for the list (the pageout path); otherwise they
// keep only their mappings. 0, -EAGAIN (unexpected references: pinned, GET),
// -EBUSY (not mapped / not anonymous) or -EINVAL (not large).
int split_folio_to_list(Folio* folio, std::vector<Folio*>* list);
inline int split_folio(Folio* folio) { return split_folio_to_list(folio, nullptr); }
// can_split_folio: refcount == mapcount + caller_pins + swap-cache references.
bool can_split_folio(Folio* folio, int caller_pins, int* pextra_pins);
// The deferred-split shrinker (deferred_split_scan): returns folios split.
long deferred_split_scan(Kernel* k);
// ==== END swap layer ====

// ==== BEGIN fork layer (mm/fork.cpp: kernel/fork.c's dup_mmap, mm/memory.c's
// ==== copy_page_range family, mm/huge_memory.c's copy_huge_pmd) ====
// Copy oldmm's VMAs and page tables into the new, empty mm (dup_mmap). Takes
// both mmap_locks for write. 0, or -ENOMEM with mm partly built: the caller
// tears it down with exit_mmap().
int dup_mmap(Mm* mm, Mm* oldmm);
// dup_mm: a new Mm holding a copy of oldmm (dup_mmap); nullptr on -ENOMEM.
std::unique_ptr<Mm> dup_mm(Mm* oldmm);
// Copy src_vma's entries into dst_vma, its new twin in the child (both
// mmap_locks held for write, src_vma write-locked). VMAs a fault can refill
// are skipped; hugetlb goes to copy_hugetlb_page_range. 0 or -ENOMEM.
int copy_page_range(Vma* dst_vma, Vma* src_vma);
// Copy the PMD leaf at src_pmd (copy_huge_pmd). 0 when copied or skipped (file
// VMAs refault), -ENOMEM, or -EAGAIN: copy at PTE level (the source PMD may
// have been split because its THP may be pinned).
int copy_huge_pmd(Vma* dst_vma, Vma* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr);
// ==== END fork layer ====

}  // namespace mmlab
