// Page-table entries in the x86-64 format (arch/x86/include/asm/pgtable_types.h):
// hardware bits present, RW, user, accessed, dirty, PSE (a leaf at PMD/PUD
// level), NX, plus the software bits the kernel uses (special, uffd-wp,
// soft-dirty; protnone reuses the global bit while present is clear).
// Non-present, non-none entries are swap-format entries (swap, migration,
// PTE markers) with a type and an offset; the migration-entry helpers of
// include/linux/swapops.h are here too.
#pragma once

#include <atomic>
#include <cstdint>

#include "mmlab/types.h"
#include "sync/sched.h"

namespace mmlab {

inline constexpr uint64_t _PAGE_PRESENT = 1ull << 0;
inline constexpr uint64_t _PAGE_RW = 1ull << 1;
inline constexpr uint64_t _PAGE_USER = 1ull << 2;
inline constexpr uint64_t _PAGE_PWT = 1ull << 3;
inline constexpr uint64_t _PAGE_PCD = 1ull << 4;
inline constexpr uint64_t _PAGE_ACCESSED = 1ull << 5;
inline constexpr uint64_t _PAGE_DIRTY = 1ull << 6;
inline constexpr uint64_t _PAGE_PSE = 1ull << 7;
inline constexpr uint64_t _PAGE_GLOBAL = 1ull << 8;
inline constexpr uint64_t _PAGE_SPECIAL = 1ull << 9;    // _PAGE_BIT_SOFTW1
inline constexpr uint64_t _PAGE_UFFD_WP = 1ull << 10;   // _PAGE_BIT_SOFTW2
inline constexpr uint64_t _PAGE_SOFT_DIRTY = 1ull << 11;  // _PAGE_BIT_SOFTW3
inline constexpr uint64_t _PAGE_NX = 1ull << 63;
inline constexpr uint64_t _PAGE_PROTNONE = _PAGE_GLOBAL;  // only meaningful with present clear
inline constexpr uint64_t PTE_PFN_MASK = ((1ull << 52) - 1) & PAGE_MASK;
inline constexpr uint64_t _PAGE_TABLE = _PAGE_PRESENT | _PAGE_RW | _PAGE_USER | _PAGE_ACCESSED | _PAGE_DIRTY;

// Swap-format (non-present) entries: bit 0 clear, bit 8 clear.
inline constexpr uint64_t _PAGE_SWP_SOFT_DIRTY = 1ull << 1;
inline constexpr uint64_t _PAGE_SWP_UFFD_WP = 1ull << 2;
inline constexpr uint64_t _PAGE_SWP_EXCLUSIVE = 1ull << 3;
inline constexpr unsigned SWP_OFFSET_SHIFT = 9;
inline constexpr uint64_t SWP_OFFSET_MASK = (1ull << 49) - 1;  // bits 9..57
inline constexpr unsigned SWP_TYPE_SHIFT = 58;
inline constexpr uint64_t SWP_TYPE_MASK = 0x1f;
// Swap types above MAX_SWAPFILES encode the kernel's special entries.
inline constexpr unsigned MAX_SWAPFILES = 27;
inline constexpr unsigned SWP_PTE_MARKER = 27;
inline constexpr unsigned SWP_MIGRATION_READ = 28;
inline constexpr unsigned SWP_MIGRATION_READ_EXCLUSIVE = 29;
inline constexpr unsigned SWP_MIGRATION_WRITE = 30;
inline constexpr unsigned SWP_DEVICE = 31;
// PTE marker bits (in the offset of a SWP_PTE_MARKER entry).
inline constexpr uint64_t PTE_MARKER_UFFD_WP = 1ull << 0;
inline constexpr uint64_t PTE_MARKER_POISONED = 1ull << 1;
inline constexpr uint64_t PTE_MARKER_GUARD = 1ull << 2;

struct pgprot_t {
  uint64_t v;
};

// One entry type per level, as the kernel's pte_t/pmd_t/pud_t/pgd_t, so a
// PMD value cannot be passed where a PTE is meant.
#define MMLAB_ENTRY_TYPE(T)                                        \
  struct T {                                                       \
    uint64_t v;                                                    \
    friend bool operator==(T a, T b) { return a.v == b.v; }        \
  };
MMLAB_ENTRY_TYPE(pte_t)
MMLAB_ENTRY_TYPE(pmd_t)
MMLAB_ENTRY_TYPE(pud_t)
MMLAB_ENTRY_TYPE(pgd_t)
#undef MMLAB_ENTRY_TYPE

// ---- atomic access to entries in table frames (the hardware walker and
// lockless GUP-fast read entries without locks) ----
//
// Every access is a schedule point (sync/sched.h): one thread-local test
// without an explorer; under one, the entry is named by (table pfn, index).
inline sched::Object entry_object(const void* p) { return {p, sched::ObjKind::kEntry, sched::kByAddress}; }
template <typename T>
inline T entry_get(const T* p) {
  sched::point("entry_get", sched::Op::kRead, entry_object(p));
  return T{std::atomic_ref<uint64_t>(const_cast<uint64_t&>(p->v)).load(std::memory_order_acquire)};
}
template <typename T>
inline void entry_set(T* p, T val) {
  sched::point("entry_set", sched::Op::kWrite, entry_object(p));
  std::atomic_ref<uint64_t>(p->v).store(val.v, std::memory_order_release);
}
template <typename T>
inline T entry_xchg(T* p, T val) {
  sched::point("entry_xchg", sched::Op::kRmw, entry_object(p));
  return T{std::atomic_ref<uint64_t>(p->v).exchange(val.v, std::memory_order_acq_rel)};
}
template <typename T>
inline void entry_or(T* p, uint64_t bits) {  // a hardware walker setting A/D bits
  sched::point("entry_or", sched::Op::kRmw, entry_object(p));
  std::atomic_ref<uint64_t>(p->v).fetch_or(bits, std::memory_order_acq_rel);
}
// Clears `bits` and returns the old value: the write-protect and A/D
// clearing of a batch of entries (wrprotect_ptes, clear_young_dirty_ptes,
// pmdp_set_wrprotect), one atomic per entry as the kernel's.
template <typename T>
inline T entry_clear_bits(T* p, uint64_t bits) {
  sched::point("entry_clear_bits", sched::Op::kRmw, entry_object(p));
  return T{std::atomic_ref<uint64_t>(p->v).fetch_and(~bits, std::memory_order_acq_rel)};
}
template <typename T>
inline bool entry_cmpxchg(T* p, T old, T val) {
  sched::point("entry_cmpxchg", sched::Op::kRmw, entry_object(p));
  return std::atomic_ref<uint64_t>(p->v).compare_exchange_strong(old.v, val.v, std::memory_order_acq_rel);
}
inline pte_t ptep_get(const pte_t* p) { return entry_get(p); }
inline pmd_t pmdp_get(const pmd_t* p) { return entry_get(p); }
inline pud_t pudp_get(const pud_t* p) { return entry_get(p); }
inline pgd_t pgdp_get(const pgd_t* p) { return entry_get(p); }

// ---- bits, shared by all levels ----
#define MMLAB_ENTRY_OPS(T, p)                                                                   \
  inline bool p##_none(T e) { return e.v == 0; }                                               \
  inline bool p##_write(T e) { return e.v & _PAGE_RW; }                                        \
  inline bool p##_dirty(T e) { return e.v & _PAGE_DIRTY; }                                     \
  inline bool p##_young(T e) { return e.v & _PAGE_ACCESSED; }                                  \
  inline bool p##_special(T e) { return (e.v & (_PAGE_PRESENT | _PAGE_SPECIAL)) == (_PAGE_PRESENT | _PAGE_SPECIAL); } \
  inline bool p##_soft_dirty(T e) { return e.v & _PAGE_SOFT_DIRTY; }                           \
  inline bool p##_uffd_wp(T e) { return e.v & _PAGE_UFFD_WP; }                                 \
  inline bool p##_protnone(T e) { return (e.v & (_PAGE_PRESENT | _PAGE_PROTNONE)) == _PAGE_PROTNONE; } \
  inline pfn_t p##_pfn(T e) { return (e.v & PTE_PFN_MASK) >> PAGE_SHIFT; }                     \
  inline T p##_mkwrite_novma(T e) { return T{e.v | _PAGE_RW}; }                                \
  inline T p##_wrprotect(T e) { return T{e.v & ~_PAGE_RW}; }                                   \
  inline T p##_mkdirty(T e) { return T{e.v | _PAGE_DIRTY | _PAGE_SOFT_DIRTY}; }                \
  inline T p##_mkclean(T e) { return T{e.v & ~_PAGE_DIRTY}; }                                  \
  inline T p##_mkyoung(T e) { return T{e.v | _PAGE_ACCESSED}; }                                \
  inline T p##_mkold(T e) { return T{e.v & ~_PAGE_ACCESSED}; }                                 \
  inline T p##_mkspecial(T e) { return T{e.v | _PAGE_SPECIAL}; }                               \
  inline T p##_mksoft_dirty(T e) { return T{e.v | _PAGE_SOFT_DIRTY}; }                         \
  inline T p##_clear_soft_dirty(T e) { return T{e.v & ~_PAGE_SOFT_DIRTY}; }                    \
  inline T p##_mkuffd_wp(T e) { return T{e.v | _PAGE_UFFD_WP}; }                               \
  inline T p##_clear_uffd_wp(T e) { return T{e.v & ~_PAGE_UFFD_WP}; }                          \
  inline T p##_modify(T e, pgprot_t prot) {                                                    \
    constexpr uint64_t keep = PTE_PFN_MASK | _PAGE_PSE | _PAGE_SPECIAL | _PAGE_ACCESSED | _PAGE_DIRTY | \
                              _PAGE_SOFT_DIRTY | _PAGE_UFFD_WP;                                \
    return T{(e.v & keep) | (prot.v & ~keep)};                                                 \
  }
MMLAB_ENTRY_OPS(pte_t, pte)
MMLAB_ENTRY_OPS(pmd_t, pmd)
MMLAB_ENTRY_OPS(pud_t, pud)
#undef MMLAB_ENTRY_OPS

// present: the hardware bit, or protnone (a NUMA-hinting entry still maps a page).
inline bool pte_present(pte_t e) { return e.v & (_PAGE_PRESENT | _PAGE_PROTNONE); }
inline pte_t pfn_pte(pfn_t pfn, pgprot_t prot) { return pte_t{(pfn << PAGE_SHIFT) | prot.v}; }

// PMD/PUD: a leaf has PSE; a table entry points at the next-level table frame.
inline bool pmd_present(pmd_t e) { return e.v & (_PAGE_PRESENT | _PAGE_PROTNONE | _PAGE_PSE); }
inline bool pmd_leaf(pmd_t e) { return pmd_present(e) && (e.v & _PAGE_PSE); }
inline bool pmd_trans_huge(pmd_t e) { return pmd_leaf(e); }
inline bool pmd_bad(pmd_t e) { return pmd_present(e) && !(e.v & _PAGE_PSE) && (e.v & ~PTE_PFN_MASK & ~_PAGE_NX) != _PAGE_TABLE; }
inline pmd_t pfn_pmd(pfn_t pfn, pgprot_t prot) { return pmd_t{(pfn << PAGE_SHIFT) | prot.v | _PAGE_PSE}; }
inline pmd_t pmd_mkinvalid(pmd_t e) { return pmd_t{e.v & ~_PAGE_PRESENT & ~_PAGE_PROTNONE}; }  // keeps PSE
inline pmd_t mk_table_pmd(pfn_t table_pfn) { return pmd_t{(table_pfn << PAGE_SHIFT) | _PAGE_TABLE}; }
inline bool pud_present(pud_t e) { return e.v & (_PAGE_PRESENT | _PAGE_PROTNONE | _PAGE_PSE); }
inline bool pud_leaf(pud_t e) { return pud_present(e) && (e.v & _PAGE_PSE); }
inline pud_t mk_table_pud(pfn_t table_pfn) { return pud_t{(table_pfn << PAGE_SHIFT) | _PAGE_TABLE}; }
inline bool pgd_none(pgd_t e) { return e.v == 0; }
inline bool pgd_present(pgd_t e) { return e.v & _PAGE_PRESENT; }
inline pfn_t pgd_pfn(pgd_t e) { return (e.v & PTE_PFN_MASK) >> PAGE_SHIFT; }
inline pgd_t mk_table_pgd(pfn_t table_pfn) { return pgd_t{(table_pfn << PAGE_SHIFT) | _PAGE_TABLE}; }

// ---- swap-format entries ----
struct swp_entry_t {
  uint64_t val;  // type << SWP_TYPE_SHIFT | offset
};
inline swp_entry_t swp_entry(unsigned type, uint64_t offset) {
  return swp_entry_t{(static_cast<uint64_t>(type) << SWP_TYPE_SHIFT) | (offset & SWP_OFFSET_MASK)};
}
inline unsigned swp_type(swp_entry_t e) { return static_cast<unsigned>(e.val >> SWP_TYPE_SHIFT); }
inline uint64_t swp_offset(swp_entry_t e) { return e.val & SWP_OFFSET_MASK; }
inline pte_t swp_entry_to_pte(swp_entry_t e) {
  return pte_t{((e.val & SWP_OFFSET_MASK) << SWP_OFFSET_SHIFT) | ((e.val >> SWP_TYPE_SHIFT) << SWP_TYPE_SHIFT)};
}
inline bool is_swap_pte(pte_t e) { return !pte_none(e) && !(e.v & (_PAGE_PRESENT | _PAGE_PROTNONE)); }
inline swp_entry_t pte_to_swp_entry(pte_t e) {
  return swp_entry(static_cast<unsigned>((e.v >> SWP_TYPE_SHIFT) & SWP_TYPE_MASK), (e.v >> SWP_OFFSET_SHIFT) & SWP_OFFSET_MASK);
}
inline bool non_swap_entry(swp_entry_t e) { return swp_type(e) >= MAX_SWAPFILES; }
inline bool is_migration_entry(swp_entry_t e) {
  unsigned t = swp_type(e);
  return t == SWP_MIGRATION_READ || t == SWP_MIGRATION_READ_EXCLUSIVE || t == SWP_MIGRATION_WRITE;
}
inline bool is_pte_marker_entry(swp_entry_t e) { return swp_type(e) == SWP_PTE_MARKER; }
// is_guard_swp_entry: a PTE marker a guard region (MADV_GUARD_INSTALL) put there.
inline bool is_guard_swp_entry(swp_entry_t e) { return is_pte_marker_entry(e) && (swp_offset(e) & PTE_MARKER_GUARD); }
inline bool is_guard_pte_marker(pte_t e) { return is_swap_pte(e) && is_guard_swp_entry(pte_to_swp_entry(e)); }
inline bool pte_swp_exclusive(pte_t e) { return e.v & _PAGE_SWP_EXCLUSIVE; }
inline pte_t pte_swp_mkexclusive(pte_t e) { return pte_t{e.v | _PAGE_SWP_EXCLUSIVE}; }
inline pte_t pte_swp_clear_exclusive(pte_t e) { return pte_t{e.v & ~_PAGE_SWP_EXCLUSIVE}; }
inline bool pte_swp_soft_dirty(pte_t e) { return e.v & _PAGE_SWP_SOFT_DIRTY; }
inline pte_t pte_swp_mksoft_dirty(pte_t e) { return pte_t{e.v | _PAGE_SWP_SOFT_DIRTY}; }
inline bool pte_swp_uffd_wp(pte_t e) { return e.v & _PAGE_SWP_UFFD_WP; }
inline pte_t pte_swp_mkuffd_wp(pte_t e) { return pte_t{e.v | _PAGE_SWP_UFFD_WP}; }
inline pte_t pte_swp_clear_soft_dirty(pte_t e) { return pte_t{e.v & ~_PAGE_SWP_SOFT_DIRTY}; }
inline pte_t pte_swp_clear_uffd_wp(pte_t e) { return pte_t{e.v & ~_PAGE_SWP_UFFD_WP}; }
// The same swap PTE with its offset moved by delta (pte_move_swp_offset).
inline pte_t pte_move_swp_offset(pte_t e, long delta) {
  return pte_t{e.v + static_cast<uint64_t>(delta) * (1ull << SWP_OFFSET_SHIFT)};
}

// ---- migration entries (include/linux/swapops.h) ----
// The offset holds the pfn; x86 keeps the young and dirty bits of the
// replaced PTE above it (SWP_MIG_YOUNG_BIT / SWP_MIG_DIRTY_BIT).
inline constexpr uint64_t SWP_MIG_YOUNG = 1ull << 44;
inline constexpr uint64_t SWP_MIG_DIRTY = 1ull << 45;
inline pfn_t swp_offset_pfn(swp_entry_t e) { return swp_offset(e) & (SWP_MIG_YOUNG - 1); }
inline swp_entry_t make_migration_entry(unsigned type, pfn_t pfn) { return swp_entry(type, pfn); }
inline bool is_writable_migration_entry(swp_entry_t e) { return swp_type(e) == SWP_MIGRATION_WRITE; }
inline bool is_readable_migration_entry(swp_entry_t e) { return swp_type(e) == SWP_MIGRATION_READ; }
inline bool is_migration_entry_young(swp_entry_t e) { return swp_offset(e) & SWP_MIG_YOUNG; }
inline bool is_migration_entry_dirty(swp_entry_t e) { return swp_offset(e) & SWP_MIG_DIRTY; }

// ---- index helpers ----
inline unsigned pgd_index(uint64_t a) { return (a >> PGDIR_SHIFT) & (PTRS_PER_PGD - 1); }
inline unsigned pud_index(uint64_t a) { return (a >> PUD_SHIFT) & (PTRS_PER_PUD - 1); }
inline unsigned pmd_index(uint64_t a) { return (a >> PMD_SHIFT) & (PTRS_PER_PMD - 1); }
inline unsigned pte_index(uint64_t a) { return (a >> PAGE_SHIFT) & (PTRS_PER_PTE - 1); }
inline uint64_t pmd_addr_end(uint64_t a, uint64_t end) {
  uint64_t b = (a + PMD_SIZE) & PMD_MASK;
  return (b - 1 < end - 1) ? b : end;
}
inline uint64_t pud_addr_end(uint64_t a, uint64_t end) {
  uint64_t b = (a + PUD_SIZE) & PUD_MASK;
  return (b - 1 < end - 1) ? b : end;
}
inline uint64_t pgd_addr_end(uint64_t a, uint64_t end) {
  uint64_t b = (a + PGDIR_SIZE) & ~(PGDIR_SIZE - 1);
  return (b - 1 < end - 1) ? b : end;
}

}  // namespace mmlab
