// Page-table pages and the helpers every walker uses (include/linux/pgtable.h,
// mm/pgtable-generic.c, include/linux/mm.h's ptlock helpers).
//
// Tables are real frames from phys holding 512 64-bit entries. A PTE table's
// split lock and a PMD table's split lock live in the table page's Page
// (Page::pt.ptl), as in the kernel's ptdesc; PGD and PUD entries (and PUD
// leaves) are covered by mm->page_table_lock.
//
// Table pages are freed through pte_free_defer()-style deferred freeing so a
// lockless walker (GUP-fast) that may still read a table finishes first.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/mmdebug.h"
#include "pgtable/entry.h"
#include "pgtable/mm_types.h"
#include "phys/phys.h"
#include "sync/mutex.h"
#include "sync/spinlock.h"

namespace mmlab {

// The frame holding a table entry / table.
inline Page* table_page_of(PhysMem* phys, const void* entry) {
  auto* base = static_cast<const uint8_t*>(phys->pfn_address(0));
  auto off = static_cast<uint64_t>(static_cast<const uint8_t*>(entry) - base);
  return phys->pfn_to_page(off >> PAGE_SHIFT);
}
template <typename T>
inline T* table_of(PhysMem* phys, pfn_t pfn) {
  return static_cast<T*>(phys->pfn_address(pfn));
}

// ---- what a table page is: its level and owner ----
// The level of a table page, numbered as walk_page_range's table visitor
// numbers them.
enum class TableLevel : uint8_t { kPte = 1, kPmd = 2, kPud = 3, kPgd = 4 };
// Debug builds record in each table page its level (Page::private_) and the
// mm it belongs to (Page::mapping) when it is allocated; the frame's reset at
// free clears both. Release builds record nothing: these read 0 there.
inline TableLevel pgtable_level(const Page* t) {
  return static_cast<TableLevel>(aref(const_cast<uint64_t&>(t->private_)).load(std::memory_order_relaxed));
}
inline const Mm* pgtable_mm(const Page* t) {
  return reinterpret_cast<const Mm*>(aref(const_cast<uint64_t&>(t->mapping)).load(std::memory_order_relaxed));
}
// A walk step's table (debug builds): t must be a table of `level` that mm
// owns. The kernel has no such check (its ptdesc records no level, and its
// owner for x86 PGDs only); a table of another level or mm is corrupt state,
// so a VM_BUG_ON_PAGE. PG_table is the invariant checker's to report
// (check/), which walks with walk_page_range.
inline void assert_table_page(const Mm* mm, const Page* t, TableLevel level) {
  VM_BUG_ON_PAGE(pgtable_level(t) != level, t, "page-table walk: a table of another level");
  VM_BUG_ON_PAGE(pgtable_mm(t) != mm, t, "page-table walk: another mm's table");
}
// The same for the table that holds entry.
inline void assert_table_of(Mm* mm, const void* entry, TableLevel level) {
  if constexpr (kDebugVm) assert_table_page(mm, table_page_of(mm->phys, entry), level);
}

// ---- the MMU's first use of a PTE ----
// Each PTE table records, one bit per entry, whether a CPU has translated
// through the entry since the kernel last installed it (set_ptes(), or a
// deposited table taken back for a split). The first translation through a
// new entry is a page walk that nothing cached; on a guest whose hypervisor
// shadows the guest's page tables it is also an exit that fills the shadow
// entry, which there costs as much as the fault that set the PTE. Changing a
// present entry's protection in place (mprotect, fork's write-protect) keeps
// the record: a shadow-paging host shows no second cost there. The bits live
// in a small array the table page points to from Page::index (where the
// kernel's ptdesc keeps pt_index, which the model has no use for): a bitmap
// for the program's accesses and one for the kernel's on its behalf
// (copy_to_user), which with PTI go through another page-table root.
inline constexpr unsigned kFirstUseWords = PTRS_PER_PTE / 64;
inline uint64_t* pte_first_use_bits(const Page* table) {
  return reinterpret_cast<uint64_t*>(aref(const_cast<uint64_t&>(table->index)).load(std::memory_order_relaxed));
}
// Entries [idx, idx + nr) of table were (re)installed: their next use is a first use.
void pte_first_use_forget(Page* table, unsigned idx, unsigned nr);
// A CPU translated through *ptep (a table that pmd points to): true if it is
// the first time since the entry was installed, which is then recorded.
inline bool pte_first_use(PhysMem* phys, pmd_t pmd, const pte_t* ptep, bool kernel_mode) {
  uint64_t* bits = pte_first_use_bits(phys->pfn_to_page(pmd_pfn(pmd))) + (kernel_mode ? kFirstUseWords : 0);
  const auto idx = static_cast<unsigned>((reinterpret_cast<uint64_t>(ptep) & ~PAGE_MASK) / sizeof(pte_t));
  const uint64_t bit = 1ull << (idx % 64);
  std::atomic_ref<uint64_t> w(bits[idx / 64]);
  if (w.load(std::memory_order_relaxed) & bit) return false;
  return !(w.fetch_or(bit, std::memory_order_relaxed) & bit);
}

// ---- allocation (pte_alloc_one, pmd_alloc_one, ...) ----
// A zeroed table page of `level` accounted to mm; nullptr on failure.
Page* pgtable_alloc(Mm* mm, TableLevel level);
// pte_alloc_one: a PTE table, as a THP's deposit.
inline Page* pte_alloc_one(Mm* mm) { return pgtable_alloc(mm, TableLevel::kPte); }
// Free a table page that no walker can reach any more (unlinked under its lock).
void pgtable_free(Mm* mm, Page* table);
// Deferred freeing for tables unlinked while lockless walkers may still read them.
void pgtable_free_deferred(Mm* mm, Page* table);

// ---- offsets ----
inline pgd_t* pgd_offset(Mm* mm, uint64_t addr) { return mm->pgd + pgd_index(addr); }
inline pud_t* pud_offset(PhysMem* phys, pgd_t pgd, uint64_t addr) {
  return table_of<pud_t>(phys, pgd_pfn(pgd)) + pud_index(addr);
}
inline pmd_t* pmd_offset(PhysMem* phys, pud_t pud, uint64_t addr) {
  return table_of<pmd_t>(phys, pud_pfn(pud)) + pmd_index(addr);
}
inline pte_t* pte_offset(PhysMem* phys, pmd_t pmd, uint64_t addr) {
  return table_of<pte_t>(phys, pmd_pfn(pmd)) + pte_index(addr);
}

// ---- allocation on the way down (__pud_alloc, __pmd_alloc, __pte_alloc) ----
// Return nullptr only on allocation failure (the caller returns VM_FAULT_OOM / -ENOMEM).
pud_t* pud_alloc(Mm* mm, uint64_t addr);
pmd_t* pmd_alloc(Mm* mm, pud_t* pud, uint64_t addr);
// Install a PTE table under *pmd if it is none; returns false on allocation failure.
bool pte_alloc(Mm* mm, pmd_t* pmd);
// Walk down without allocating; nullptr if a level is missing or is a leaf above.
pmd_t* mm_find_pmd(Mm* mm, uint64_t addr);
pud_t* mm_find_pud(Mm* mm, uint64_t addr);

// ---- locks ----
inline SpinLock* pte_lockptr(PhysMem* phys, pmd_t pmd) { return &phys->pfn_to_page(pmd_pfn(pmd))->pt.ptl; }
inline SpinLock* pmd_lockptr(Mm* mm, pmd_t* pmdp) { return &table_page_of(mm->phys, pmdp)->pt.ptl; }
inline SpinLock* pud_lockptr(Mm* mm, pud_t*) { return &mm->page_table_lock; }
// Return the lock taken; callers release it. A returned lock cannot be named
// for -Wthread-safety, so the caller states it with ptl->assert_held() right
// after taking it (checked by lockdep in debug builds), and the analysis
// follows it from there to the unlock. The same holds for *ptlp below.
SpinLock* pmd_lock(Mm* mm, pmd_t* pmdp);
SpinLock* pud_lock(Mm* mm, pud_t* pudp);

// Map and lock the PTE table under *pmd: re-validates the PMD after taking the
// lock; nullptr if there is no table (none, a leaf, or it changed). The
// caller unlocks *ptlp (pte_unmap_unlock). subclass 1 for a nested second PTL.
pte_t* pte_offset_map_lock(Mm* mm, pmd_t* pmd, uint64_t addr, SpinLock** ptlp, int subclass = 0);
// Lockless map: the table under *pmd or nullptr; *pmdvalp receives the PMD value read.
pte_t* pte_offset_map(Mm* mm, pmd_t* pmd, uint64_t addr, pmd_t* pmdvalp);
// Lock the table that pte_offset_map returned, if *pmd still points to it.
bool pte_lock_if_unchanged(Mm* mm, pmd_t* pmd, pmd_t pmdval, SpinLock** ptlp, int subclass = 0);

// ---- batch helpers ----
// Install nr consecutive PTEs mapping consecutive pfns starting at pte (set_ptes).
void set_ptes(Mm* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr);
// The entries alone, without the contpte wrappers (arm64's __set_ptes).
void __set_ptes(pte_t* ptep, pte_t pte, unsigned nr);
// ptep_set_access_flags: rewrite one present entry with more access (young,
// dirty, or the write bit a reusing fault gives); the caller flushes if needed.
void ptep_set_access_flags(Mm* mm, uint64_t addr, pte_t* ptep, pte_t entry);
// The wrappers installed by the TLB layer (tlb.geometry arm64), or nullptr.
inline const ContPteOps* contpte_ops(const Mm* mm) {
  return mm->tlb ? mm->tlb->contpte.load(std::memory_order_acquire) : nullptr;
}
inline void set_pte_at(Mm* mm, uint64_t addr, pte_t* ptep, pte_t pte) { set_ptes(mm, addr, ptep, pte, 1); }
// Clear nr entries, returning the first value with the dirty/young bits of all
// of them merged in (get_and_clear_full_ptes).
pte_t get_and_clear_full_ptes(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr);
inline pte_t ptep_get_and_clear(Mm* mm, uint64_t addr, pte_t* ptep) { return get_and_clear_full_ptes(mm, addr, ptep, 1); }
// ptep_modify_prot_start/commit: an entry changed in place (mprotect), the
// hardware's A/D bits of the cleared entry merged into the new one.
// Counted as a modification (pgtable.pte_modify), not as a zap's clear.
pte_t ptep_modify_prot_start(Mm* mm, uint64_t addr, pte_t* ptep);
void ptep_modify_prot_commit(pte_t* ptep, pte_t old, pte_t pte);
void wrprotect_ptes(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr);
// clear_young_dirty_ptes (the generic version x86 uses): the accessed bit
// alone is cleared atomically in place (ptep_test_and_clear_young); with the
// dirty bit, each entry is cleared and set again old and/or clean. The
// caller flushes the TLB (MADV_COLD, MADV_FREE).
using cydp_t = unsigned;
inline constexpr cydp_t CYDP_CLEAR_YOUNG = 1u << 0;
inline constexpr cydp_t CYDP_CLEAR_DIRTY = 1u << 1;
void clear_young_dirty_ptes(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr, cydp_t flags);
// The TLB flushes (flush_tlb_range, ptep_clear_flush, clear_flush_ptes,
// pmdp_collapse_flush) are the TLB layer's, one above: tlb/tlb.h.

// folio_pte_batch_flags() flags (v6.17+).
using fpb_t = unsigned;
inline constexpr fpb_t FPB_RESPECT_DIRTY = 1u << 0;
inline constexpr fpb_t FPB_RESPECT_SOFT_DIRTY = 1u << 1;
inline constexpr fpb_t FPB_RESPECT_WRITE = 1u << 2;
inline constexpr fpb_t FPB_MERGE_WRITE = 1u << 3;
inline constexpr fpb_t FPB_MERGE_YOUNG_DIRTY = 1u << 4;

// Count consecutive present PTEs from ptep that map consecutive pages of
// folio with (after normalising by flags) identical bits, up to max_nr and the
// folio's end. *ptentp is the first PTE's value on entry; merge flags update it.
// Caller guarantees: the first PTE maps a page of the (large) folio, max_nr >= 1,
// and max_nr does not cross the page table or the VMA.
unsigned folio_pte_batch_flags(Folio* folio, const struct Vma* vma, pte_t* ptep, pte_t* ptentp, unsigned max_nr,
                               fpb_t flags);
inline unsigned folio_pte_batch(Folio* folio, pte_t* ptep, pte_t pte, unsigned max_nr) {
  return folio_pte_batch_flags(folio, nullptr, ptep, &pte, max_nr, 0);
}

// ---- lockless walkers (GUP-fast) and deferred table freeing ----
// Deferred page-table freeing: an epoch scheme standing in for RCU /
// IRQ-disabled GUP-fast walks. One per Kernel, shared by its mms.
struct DeferredTables {
  DeferredTables();
  std::atomic<uint64_t> walk_epoch{1};
  struct WalkerSlot {
    std::atomic<uint64_t> active_epoch{0};  // 0: not walking
    unsigned depth = 0;  // nested walks of the slot's CPU (only its thread touches it)
  };
  std::unique_ptr<WalkerSlot[]> walkers;  // one per simulated CPU
  Mutex lock{LockClass::kDeferredFreeLock};
  struct Table {
    Page* table;
    uint64_t epoch;
  };
  std::vector<Table> tables GUARDED_BY(lock);
};

// A lockless walker brackets its walk with these (local_irq_save/restore in
// the kernel, or rcu_read_lock around pte_offset_map); tables freed with
// pgtable_free_deferred are not reused until every walker that started
// before the free has ended. Walks nest: the outermost one's epoch holds.
void lockless_walk_begin(Mm* mm);
void lockless_walk_end(Mm* mm);
// rcu_read_lock() .. rcu_read_unlock() around a PTE table reached from a
// PMD entry read without its lock: PT_RECLAIM may unlink and free the table
// meanwhile (zap under mmap_lock read), so the table stays readable, and
// its lock takeable, until the section ends. Every reader that reads a PMD
// entry and then the table under it without holding the PMD lock or the
// VMA write lock is inside one (pte_offset_map_lock, the fault's lockless
// read of the PTE, the CPU's walk, GUP-fast).
class PteTableReadSection {
 public:
  explicit PteTableReadSection(Mm* mm) : mm_(mm) { lockless_walk_begin(mm); }
  ~PteTableReadSection() { lockless_walk_end(mm_); }
  PteTableReadSection(const PteTableReadSection&) = delete;
  PteTableReadSection& operator=(const PteTableReadSection&) = delete;

 private:
  Mm* mm_;
};
// Free every deferred table whose grace period has passed (called on frees).
void pgtable_reclaim_deferred(Mm* mm);
// tlb_remove_table_sync_one (mm/mmu_gather.c): return once every lockless
// walker that may have read a table entry before this call has ended (the
// kernel's IPI to every CPU). Must not be called from inside a lockless walk.
void tlb_remove_table_sync_one(Mm* mm);

}  // namespace mmlab
