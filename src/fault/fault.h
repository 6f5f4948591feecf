// Page-fault handling (mm/memory.c, mm/huge_memory.c): the fault flags and
// results, struct vm_fault, and the entry points the CPU model, GUP and
// madvise call.
#pragma once

#include <cstdint>

#include "mm/huge_mm.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/swap.h"
#include "mm/settings.h"
#include "pgtable/pgtable.h"

namespace mmlab {

using vm_fault_t = unsigned;
inline constexpr vm_fault_t VM_FAULT_OOM = 0x1, VM_FAULT_SIGBUS = 0x2, VM_FAULT_MAJOR = 0x4;
inline constexpr vm_fault_t VM_FAULT_HWPOISON = 0x10, VM_FAULT_HWPOISON_LARGE = 0x20, VM_FAULT_SIGSEGV = 0x40;
inline constexpr vm_fault_t VM_FAULT_NOPAGE = 0x100, VM_FAULT_LOCKED = 0x200, VM_FAULT_RETRY = 0x400;
inline constexpr vm_fault_t VM_FAULT_FALLBACK = 0x800, VM_FAULT_DONE_COW = 0x1000, VM_FAULT_COMPLETED = 0x4000;
inline constexpr vm_fault_t VM_FAULT_ERROR =
    VM_FAULT_OOM | VM_FAULT_SIGBUS | VM_FAULT_SIGSEGV | VM_FAULT_HWPOISON | VM_FAULT_HWPOISON_LARGE;

using fault_flags_t = unsigned;
inline constexpr fault_flags_t FAULT_FLAG_WRITE = 1u << 0, FAULT_FLAG_MKWRITE = 1u << 1;
inline constexpr fault_flags_t FAULT_FLAG_ALLOW_RETRY = 1u << 2, FAULT_FLAG_RETRY_NOWAIT = 1u << 3;
inline constexpr fault_flags_t FAULT_FLAG_KILLABLE = 1u << 4, FAULT_FLAG_TRIED = 1u << 5;
inline constexpr fault_flags_t FAULT_FLAG_USER = 1u << 6, FAULT_FLAG_REMOTE = 1u << 7;
inline constexpr fault_flags_t FAULT_FLAG_INSTRUCTION = 1u << 8, FAULT_FLAG_INTERRUPTIBLE = 1u << 9;
inline constexpr fault_flags_t FAULT_FLAG_UNSHARE = 1u << 10, FAULT_FLAG_ORIG_PTE_VALID = 1u << 11;
inline constexpr fault_flags_t FAULT_FLAG_VMA_LOCK = 1u << 12;

// A folio allocator's answer when the page table went away under its
// lockless look (the kernel's ERR_PTR(-EAGAIN)): the fault returns 0 and is
// retried. alloc_anon_folio and the rfc alloc_wp_folio answer
// std::variant<Folio*, RetryFault>: a folio, nullptr when out of memory, or this.
struct RetryFault {};

// struct vm_fault: the state one fault carries down the handlers.
struct VmFault {
  Vma* vma = nullptr;
  uint64_t address = 0;       // page aligned
  uint64_t real_address = 0;  // as faulted
  fault_flags_t flags = 0;
  pud_t* pud = nullptr;
  pmd_t* pmd = nullptr;
  pmd_t orig_pmd{0};
  pte_t* pte = nullptr;       // mapped PTE (valid under ptl)
  pte_t orig_pte{0};
  SpinLock* ptl = nullptr;
  Page* page = nullptr;       // the page the fault is about (wp)
  Mm* mm() const { return vma->vm_mm; }
};

// handle_mm_fault: the caller holds mmap_lock (read) or the VMA's read lock
// (FAULT_FLAG_VMA_LOCK). Returns VM_FAULT_* bits; 0 means "resolved, or
// retry the access" (the caller re-walks and faults again if needed). The
// fault is accounted (pgfault, current's min_flt/maj_flt: mm_account_fault)
// once it completes, so not when it returns VM_FAULT_RETRY.
// VM_FAULT_RETRY has released the lock, as in the kernel: always under the
// per-VMA lock, and under mmap_lock unless FAULT_FLAG_RETRY_NOWAIT (only
// faults with FAULT_FLAG_ALLOW_RETRY return it there).
[[nodiscard]] vm_fault_t handle_mm_fault(Vma* vma, uint64_t address, fault_flags_t flags);

// __vmf_anon_prepare: an anon_vma for the anonymous page about to be
// mapped. Attaching one needs mmap_lock, so under FAULT_FLAG_VMA_LOCK it is
// tried (mmap_read_trylock) for the attach, and only if that fails does the
// fault retry under mmap_lock. 0, VM_FAULT_RETRY or VM_FAULT_OOM.
[[nodiscard]] vm_fault_t __vmf_anon_prepare(Vma* vma, fault_flags_t flags);
[[nodiscard]] inline vm_fault_t vmf_anon_prepare(VmFault* vmf) { return __vmf_anon_prepare(vmf->vma, vmf->flags); }

// ---- helpers used across the fault, zap and fork paths ----

// Anonymous THP policy (mm/huge_memory.c). enum tva_type (v6.18): who asks.
enum class TvaType : uint8_t {
  kSmaps,          // TVA_SMAPS: "THPeligible:" in smaps
  kPagefault,      // TVA_PAGEFAULT: serving a page fault
  kKhugepaged,     // TVA_KHUGEPAGED: khugepaged's scan and registration
  kForcedCollapse  // TVA_FORCED_COLLAPSE: MADV_COLLAPSE (ignores the sysfs controls)
};
// file_thp_enabled: CONFIG_READ_ONLY_THP_FOR_FS allows collapsing this
// VMA's file (a regular file nobody has open for write).
bool file_thp_enabled(const Vma* vma);
// thp_vma_allowable_orders: the subset of orders this VMA may have, for type.
uint64_t thp_vma_allowable_orders(Vma* vma, vm_flags_t vm_flags, TvaType type, uint64_t orders);
inline bool thp_vma_allowable_order(Vma* vma, vm_flags_t vm_flags, TvaType type, unsigned order) {
  return thp_vma_allowable_orders(vma, vm_flags, type, 1ull << order) != 0;
}
// The page-fault form (TVA_PAGEFAULT).
inline uint64_t thp_vma_allowable_orders(Vma* vma, vm_flags_t vm_flags, uint64_t orders) {
  return thp_vma_allowable_orders(vma, vm_flags, TvaType::kPagefault, orders);
}
// hugepage_global_enabled / hugepage_global_always: transparent_hugepage/enabled.
bool hugepage_global_enabled(const Settings& s);
bool hugepage_global_always(const Settings& s);
// VM_NO_KHUGEPAGED: special and hugetlb mappings are never collapsed.
inline constexpr vm_flags_t VM_NO_KHUGEPAGED =
    VM_IO | VM_DONTEXPAND | VM_PFNMAP | VM_MIXEDMAP | VM_HUGETLB;
uint64_t thp_vma_suitable_orders(Vma* vma, uint64_t addr, uint64_t orders);
inline bool thp_vma_suitable_order(Vma* vma, uint64_t addr, unsigned order) {
  return thp_vma_suitable_orders(vma, addr, BIT(order)) != 0;
}
// vma_thp_gfp_mask: the gfp of a THP allocation for vma under
// transparent_hugepage/defrag (whether it may reclaim and compact directly).
gfp_t vma_thp_gfp_mask(const Vma* vma);
inline unsigned highest_order(uint64_t orders) { return 63 - static_cast<unsigned>(__builtin_clzll(orders)); }
inline unsigned next_order(uint64_t* orders, unsigned prev) {
  *orders &= ~BIT(prev);
  return *orders ? highest_order(*orders) : 0;
}

// mm/huge_memory.c entry points used by memory.cpp and the mm layer.
// map_anon_folio_pmd_nopf: map a new anon PMD-order folio at haddr (PMD
// lock held, *pmd none, its deposit done); rmap, LRU, deferred-split queue,
// no fault statistics and no rss (the caller accounts those).
void map_anon_folio_pmd_nopf(Folio* folio, pmd_t* pmd, Vma* vma, uint64_t haddr);
// map_anon_folio_pte_nopf (mm/memory.c): map a new anon folio by PTEs from
// pte (addr aligned to it, the PTEs none and unreachable by others or
// locked); one reference per PTE, exclusive rmap, LRU. No rss, no statistics.
void map_anon_folio_pte_nopf(Folio* folio, pte_t* pte, Vma* vma, uint64_t addr, bool uffd_wp);
[[nodiscard]] vm_fault_t do_huge_pmd_anonymous_page(VmFault* vmf);
[[nodiscard]] vm_fault_t do_huge_pmd_wp_page(VmFault* vmf);
void huge_pmd_set_accessed(VmFault* vmf);

// mark_page_accessed-style helpers the CPU model uses for its A/D bits live in uaccess.

// Write fault on a read-only PTE (FAULT_FLAG_WRITE or UNSHARE); PTL held on entry, released on return.
[[nodiscard]] vm_fault_t do_wp_page(VmFault* vmf) RELEASE(vmf->ptl);
bool wp_can_reuse_anon_folio(Folio* folio, Vma* vma);

// fault/filemap.cpp: faults on file-backed and shmem VMAs (do_read_fault,
// do_cow_fault, do_shared_fault) and write faults on shared mappings.
[[nodiscard]] vm_fault_t do_fault(VmFault* vmf);
// do_set_pmd: map the PMD-order page-cache folio (locked, its reference
// given to the mapping on success) by a PMD at vmf->address if *vmf->pmd is
// none; VM_FAULT_FALLBACK where it cannot (THP disabled for the VMA, even
// MADV_NOHUGEPAGE; a misaligned or too small VMA; another order; the PMD
// not none any more: 0 from the kernel's `out` path is kept as FALLBACK's
// caller expects, see the definition).
[[nodiscard]] vm_fault_t do_set_pmd(VmFault* vmf, Folio* folio, Page* page);
// PTL held on entry, released on return.
[[nodiscard]] vm_fault_t wp_page_shared(VmFault* vmf, Folio* folio) RELEASE(vmf->ptl);
// fault/memory_swap.cpp
[[nodiscard]] vm_fault_t do_swap_page(VmFault* vmf);
// fault/hugetlb.cpp
[[nodiscard]] vm_fault_t hugetlb_fault(Vma* vma, uint64_t address, fault_flags_t flags);

}  // namespace mmlab
