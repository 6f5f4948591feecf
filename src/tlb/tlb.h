// The TLB model (docs/TLB.md): one TLB per simulated CPU with a named
// geometry, x86's flush rules and shootdown IPIs (arch/x86/mm/tlb.c), and
// arm64's contiguous-PTE blocks (arch/arm64/mm/contpte.c). It sits between
// the table code and mm: mm hands it an address space's MmTlbContext (the
// address-space id, tlb_gen and CPU set) and includes it; it includes
// nothing of mm.
//
// Events only: the model counts lookups, misses, flushes, IPIs, folds and
// unfolds; it never charges time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "pgtable/pgtable.h"
#include "stats/stats.h"
#include "sync/annotations.h"
#include "sync/cpu.h"
#include "sync/spinlock.h"

namespace mmlab {

static_assert(NR_CPUS <= 64, "mm_cpumask is one 64-bit word");

// `tune tlb.geometry`: which CPU's TLB the model has (kOff: none, and the
// access path pays one predicted branch).
enum class TlbGeometry : uint8_t { kOff, kX86Intel, kX86Amd, kArm64 };

// The sizes a TLB entry can translate: base pages, AMD's coalesced 4 × 4K,
// arm64's contiguous 16 × 4K, PMD and PUD leaves.
enum TlbSize : uint8_t { kTlb4K, kTlb16K, kTlb64K, kTlb2M, kTlb1G, kNrTlbSizes };
inline constexpr unsigned kTlbSizeShift[kNrTlbSizes] = {12, 14, 16, 21, 30};
inline constexpr uint8_t tlb_size_bit(TlbSize s) { return static_cast<uint8_t>(1u << s); }

// One array of a TLB level: entries in sets of `ways`, holding the sizes in
// `sizes` (a bit per TlbSize).
struct TlbArrayGeom {
  unsigned entries;
  unsigned ways;
  uint8_t sizes;
};

struct TlbLevelGeom {
  static constexpr int kMaxArrays = 3;
  TlbArrayGeom arrays[kMaxArrays];
  int nr_arrays;
};

struct TlbGeometryDesc {
  const char* name;  // the tune value
  const char* part;  // the core whose capacities these are
  TlbLevelGeom l1;   // L1 data TLB
  TlbLevelGeom l2;   // unified L2 TLB (STLB)
  bool coalesce_4k;  // AMD: 4 aligned contiguous 4K PTEs fill one 16K entry
  bool contpte;      // arm64: a folded 16 × 4K block fills one 64K entry
};

// The description of a geometry (nullptr for kOff).
const TlbGeometryDesc* tlb_geometry_desc(TlbGeometry g);
const char* tlb_geometry_name(TlbGeometry g);

// TLB_NR_DYN_ASIDS (arch/x86/include/asm/tlbflush.h): the PCIDs a CPU keeps
// address spaces in before it must recycle one.
inline constexpr int TLB_NR_DYN_ASIDS = 6;
inline constexpr uint64_t TLB_FLUSH_ALL = ~0ull;
// arch/x86/mm/tlb.c: a range of more entries of its stride than this is
// flushed whole.
inline constexpr uint64_t tlb_single_page_flush_ceiling = 33;

// arm64 with 4K pages: CONT_PTES entries make one contiguous block.
inline constexpr unsigned CONT_PTES = 16;
inline constexpr uint64_t CONT_PTE_SIZE = CONT_PTES * PAGE_SIZE;
inline constexpr uint64_t CONT_PTE_MASK = ~(CONT_PTE_SIZE - 1);

struct TlbEntry {
  uint64_t tag = 0;  // 0: invalid; else the vpn of its size, its size and its ASID slot
  uint64_t lru = 0;
};

struct TlbArray {
  TlbArrayGeom g{};
  unsigned sets = 0;
  std::unique_ptr<TlbEntry[]> e;  // sets × ways
};

struct TlbLevel {
  TlbArray arrays[TlbLevelGeom::kMaxArrays];
  int nr_arrays = 0;
};

// Per-CPU counters of the TLB, readable while the CPU runs.
struct TlbCpuCounters {
  std::atomic<uint64_t> lookups{0}, l1_miss{0}, l2_miss{0}, ipis_received{0};
};

// One simulated CPU's TLB and its cpu_tlbstate.
struct TlbCpu {
  SpinLock lock{};
  // cpu_tlbstate: the mm loaded (its ctx_id; 0 is init_mm), its ASID slot,
  // is_lazy, and the ASID slots' contexts with the tlb_gen each caught up to.
  uint64_t loaded_ctx GUARDED_BY(lock) = 0;
  int loaded_asid GUARDED_BY(lock) = 0;
  bool is_lazy GUARDED_BY(lock) = false;
  uint64_t occupant GUARDED_BY(lock) = 0;  // cpu_release_count when it last switched mm
  struct Ctx {
    uint64_t ctx_id = 0;
    uint64_t tlb_gen = 0;
  } ctxs[TLB_NR_DYN_ASIDS] GUARDED_BY(lock);
  int next_asid GUARDED_BY(lock) = 1;
  TlbLevel l1 GUARDED_BY(lock), l2 GUARDED_BY(lock);
  uint64_t clock GUARDED_BY(lock) = 0;  // LRU stamps
  TlbCpuCounters counters;
};

// A System's TLB model: the geometry and one TlbCpu per simulated CPU.
struct TlbState : TlbHooks {
  TlbState();
  ~TlbState();
  TlbState(const TlbState&) = delete;
  TlbState& operator=(const TlbState&) = delete;

  std::atomic<TlbGeometry> geometry{TlbGeometry::kOff};
  std::atomic<uint64_t> next_ctx_id{1};
  std::unique_ptr<TlbCpu[]> cpus;  // NR_CPUS
  // arm64's folded blocks (the PTE_CONT bits, kept beside the x86 entries):
  // the address of each folded block's first PTE and the pfn it maps.
  SpinLock contpte_lock{};
  std::unordered_map<uintptr_t, uint64_t> contpte_folded GUARDED_BY(contpte_lock);
};

inline TlbState* tlb_state(const Mm* mm) { return static_cast<TlbState*>(mm->tlb); }
inline bool tlb_enabled(const TlbState* t) {
  return t && t->geometry.load(std::memory_order_relaxed) != TlbGeometry::kOff;
}

// Select a geometry: every CPU's TLB is emptied and rebuilt to it, the
// contpte wrappers installed for arm64 and the folded blocks forgotten
// otherwise. Call between operations (a `tune` write).
void tlb_set_geometry(TlbState* t, TlbGeometry g);
// Give an address space its context (mm_alloc's init_new_context).
void init_new_context(TlbState* t, Mm* mm);

// switch_mm_irqs_off: CPU `cpu` now runs mm (ctx), leaving lazy mode.
void switch_mm_irqs_off(TlbState* t, int cpu, MmTlbContext* ctx);
// enter_lazy_tlb: CPU `cpu` runs a kernel thread, keeping its mm loaded.
void enter_lazy_tlb(TlbState* t, int cpu);
// The mm CPU `cpu` has loaded (0 for none) and whether it is lazy.
uint64_t tlb_loaded_ctx(TlbState* t, int cpu, bool* lazy);

// A user load or store on the calling CPU through a translation of `size`
// at addr mapping pfn; ptep is the PTE for base pages (AMD coalescing and
// arm64 blocks read the entries around it), else nullptr. Switches the CPU
// to mm if it ran another, then looks up L1, L2, fills on a miss.
void tlb_user_access(Mm* mm, uint64_t addr, TlbSize size, const pte_t* ptep);

// Does CPU `cpu`'s TLB hold a translation of addr for mm (any level)?
bool tlb_holds(TlbState* t, int cpu, const MmTlbContext* ctx, uint64_t addr);
// Valid entries of CPU `cpu`'s TLB at a level (1 or 2) of a size.
unsigned tlb_count_entries(TlbState* t, int cpu, int level, TlbSize size);
// The valid entries at a level (1 or 2) over every CPU's TLB, and the bytes
// they translate (the level's reach: an entry of size S covers S, so a
// coalesced x86-amd entry 16K and a folded arm64 block 64K). Zero without a
// geometry.
struct TlbReach {
  uint64_t entries = 0, bytes = 0;
};
TlbReach tlb_reach(TlbState* t, int level);

// ---- flushes (tlbflush.cpp: arch/x86/mm/tlb.c, asm/tlbflush.h) ----
void flush_tlb_mm_range(Mm* mm, uint64_t start, uint64_t end, unsigned stride_shift, bool freed_tables);
inline void flush_tlb_mm(Mm* mm) { flush_tlb_mm_range(mm, 0, TLB_FLUSH_ALL, PAGE_SHIFT, /*freed_tables=*/false); }
// x86's flush_tlb_range: the page stride.
inline void flush_tlb_range(Vma* vma, uint64_t start, uint64_t end) {
  flush_tlb_mm_range(vma->vm_mm, start, end, PAGE_SHIFT, /*freed_tables=*/false);
}
// x86's flush_tlb_range of a hugetlb VMA: the stride of its page size
// (huge_page_shift(hstate_vma(vma)), which mm passes).
inline void flush_hugetlb_tlb_range(Vma* vma, unsigned huge_page_shift, uint64_t start, uint64_t end) {
  flush_tlb_mm_range(vma->vm_mm, start, end, huge_page_shift, /*freed_tables=*/false);
}
// flush_pmd_tlb_range: PMD stride.
inline void flush_pmd_tlb_range(Vma* vma, uint64_t start, uint64_t end) {
  flush_tlb_mm_range(vma->vm_mm, start, end, PMD_SHIFT, /*freed_tables=*/false);
}
// flush_tlb_page: one entry.
inline void flush_tlb_page(Vma* vma, uint64_t addr) { flush_tlb_mm_range(vma->vm_mm, addr, addr + PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false); }

// x86's pte_accessible: a present entry may be cached (the model has no
// NUMA-balancing protnone entries with a flush pending).
inline bool pte_accessible(const Mm*, pte_t e) { return e.v & _PAGE_PRESENT; }

// mm/pgtable-generic.c's flushing helpers.
// ptep_clear_flush: clear one entry, flush it only if it was accessible.
pte_t ptep_clear_flush(Vma* vma, uint64_t addr, pte_t* ptep);
// Clear nr entries and flush the range once if any was accessible.
pte_t clear_flush_ptes(Vma* vma, uint64_t addr, pte_t* ptep, unsigned nr);
// pmdp_collapse_flush: clear the PMD (a table entry) and flush the range
// (PMD stride); returns the old value. PMD lock held. A GUP-fast walker that
// read the old value sees the change at its re-check.
pmd_t pmdp_collapse_flush(Vma* vma, uint64_t address, pmd_t* pmdp);

// ---- the mmu_gather (tlbflush.cpp: include/asm-generic/tlb.h, mm/mmu_gather.c) ----
// A zap gathers the range it cleared and flushes once at the end
// (tlb_finish_mmu), with freed_tables when page tables went with it, so that
// the IPIs reach every CPU in the mm's cpumask. While a gather is open on
// this thread for an mm, flush_tlb_range/flush_pmd_tlb_range of that mm
// widen it instead of flushing.
struct MmuGather {
  Mm* mm = nullptr;
  uint64_t start = ~0ull, end = 0;
  bool freed_tables = false;
  bool fullmm = false;  // exit_mmap: flush everything
  bool cleared_ptes = false, cleared_pmds = false, cleared_puds = false;
  MmuGather* prev = nullptr;  // the gather this one nests in (another mm's)
};
void tlb_gather_mmu(MmuGather* tlb, Mm* mm);
void tlb_finish_mmu(MmuGather* tlb);
// A page table of [start, end) of the gather's mm was freed (pte_free_tlb & co.).
void tlb_note_freed_table(Mm* mm, uint64_t start, uint64_t end);

// ---- arm64 contiguous PTEs (contpte.cpp) ----
// Is the block holding addr folded (tlb.geometry arm64)?
bool contpte_block_folded(Mm* mm, uint64_t addr, const pte_t* ptep);
extern const ContPteOps kContPteOps;
void contpte_forget_all(TlbState* t);

}  // namespace mmlab
