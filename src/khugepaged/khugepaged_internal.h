// The helpers mm/khugepaged.c keeps static, shared here by the files the
// model splits it into: khugepaged.cpp (registration, the mm_slot list and
// its scan, MADV_COLLAPSE), khugepaged_collapse.cpp (the scan of one PMD
// range and its collapse), khugepaged_file.cpp (shmem collapse in the page
// cache) and khugepaged_thread.cpp (the model's thread,
// clock and timing, which have no kernel counterpart). Not for other users:
// the layers above reach khugepaged through khugepaged/khugepaged.h, the
// ones below through mm/khugepaged_hooks.h.
#pragma once

#include <bitset>
#include <cstdint>

#include "mm/file.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "sync/annotations.h"

namespace mmlab {

enum ScanResult : int {
  SCAN_FAIL,
  SCAN_SUCCEED,
  SCAN_PMD_NULL,
  SCAN_PMD_NONE,
  SCAN_PMD_MAPPED,
  SCAN_EXCEED_NONE_PTE,
  SCAN_EXCEED_SWAP_PTE,
  SCAN_EXCEED_SHARED_PTE,
  SCAN_PTE_NON_PRESENT,
  SCAN_PTE_UFFD_WP,
  SCAN_PTE_MAPPED_HUGEPAGE,
  SCAN_LACK_REFERENCED_PAGE,
  SCAN_PAGE_NULL,
  SCAN_SCAN_ABORT,
  SCAN_PAGE_COUNT,
  SCAN_PAGE_LRU,
  SCAN_PAGE_LOCK,
  SCAN_PAGE_ANON,
  SCAN_PAGE_COMPOUND,
  SCAN_ANY_PROCESS,
  SCAN_VMA_NULL,
  SCAN_VMA_CHECK,
  SCAN_ADDRESS_RANGE,
  SCAN_DEL_PAGE_LRU,
  SCAN_ALLOC_HUGE_PAGE_FAIL,
  SCAN_CGROUP_CHARGE_FAIL,
  SCAN_TRUNCATED,
  SCAN_PAGE_HAS_PRIVATE,
  SCAN_STORE_FAILED,
  SCAN_COPY_MC,
  SCAN_PAGE_FILLED,
};

// KHUGEPAGED_MAX_PTES_LIMIT / COLLAPSE_MAX_PTES_LIMIT of the mTHP series.
constexpr unsigned kMaxPtesLimit = HPAGE_PMD_NR - 1;

// Who collapses: khugepaged's scan, or MADV_COLLAPSE (the kernel's
// collapse_control.is_khugepaged).
enum class Collapser : uint8_t { kKhugepaged, kMadviseCollapse };

struct CollapseControl {
  CollapseControl(Kernel* k, Collapser who)
      : kernel(k),
        settings(&k->settings),
        is_khugepaged(who == Collapser::kKhugepaged),
        mthp(k->settings.khugepaged_mthp.load()) {}
  Kernel* kernel;
  const Settings* settings;
  bool is_khugepaged;
  bool mthp;  // khugepaged.mthp, read once per collapse_control
  // mTHP: one bit per occupied (neither none nor zero-page) PTE of the PMD
  // range scanned last (the series' mthp_bitmap).
  std::bitset<HPAGE_PMD_NR> present;
  // fix-up: the swap PTEs of that range, which v18's occupancy test leaves
  // out (it would allocate for, and then fail, every order holding one).
  std::bitset<HPAGE_PMD_NR> swapped;
  // What this collapse_control's work did, for khugepaged's wake statistics.
  uint64_t ptes_scanned = 0, collapsed = 0, bytes_copied = 0;
};

inline bool is_pmd_order(unsigned order) { return order == PMD_ORDER; }

// collapse_allowable_orders: the orders a collapse may produce here.
uint64_t collapse_allowable_orders(Vma* vma, vm_flags_t vm_flags, const CollapseControl* cc);
// hpage_collapse_test_exit*: the mm is exiting, or THP-disabled too.
bool hpage_collapse_test_exit(const Mm* mm);
bool hpage_collapse_test_exit_or_disable(const Mm* mm);
// hugepage_vma_revalidate: after mmap_lock was dropped, the VMA at address
// must still be one this collapse may work on.
int hugepage_vma_revalidate(Mm* mm, uint64_t address, bool expect_anon, Vma** vmap, const CollapseControl* cc,
                            unsigned order) REQUIRES_SHARED(mm->mmap_lock);
// check_pmd_state / find_pmd_or_thp_or_none: SCAN_SUCCEED for a PTE table,
// SCAN_PMD_NONE, SCAN_PMD_NULL (no table level, or a bad entry) or
// SCAN_PMD_MAPPED (a leaf).
int check_pmd_state(pmd_t* pmd);
int find_pmd_or_thp_or_none(Mm* mm, uint64_t address, pmd_t** pmd);
// alloc_charge_folio: the new folio, allocated and charged with no lock
// held (the charge fails only by injection: src/mm/memcontrol.h).
int alloc_charge_folio(Folio** foliop, Mm* mm, const CollapseControl* cc, unsigned order);
// hpage_collapse_scan_file (khugepaged_file.cpp): scan the page cache of
// file f over [start, start + HPAGE_PMD_NR) (mapped at addr in mm) and
// collapse it into a PMD-order folio (collapse_file) if it qualifies. No
// mmap_lock held. SCAN_PTE_MAPPED_HUGEPAGE: the range is (now) one
// PMD-order folio; the caller maps it (collapse_pte_mapped_thp).
int hpage_collapse_scan_file(Mm* mm, uint64_t addr, File* f, uint64_t start, CollapseControl* cc);
// collapse_pte_mapped_thp: the PMD range at addr maps pages of the PMD-order
// page-cache folio there, or nothing: its PTE table goes and, with
// install_pmd (MADV_COLLAPSE), a PMD maps the folio. mmap_lock held for read.
int collapse_pte_mapped_thp(Mm* mm, uint64_t addr, bool install_pmd) REQUIRES_SHARED(mm->mmap_lock);
// hpage_collapse_scan_pmd: scan the PMD range at start_addr and collapse it
// if it qualifies; *mmap_locked false if the collapse dropped mmap_lock.
int hpage_collapse_scan_pmd(Mm* mm, Vma* vma, uint64_t start_addr, bool* mmap_locked, CollapseControl* cc);

// The host time of one collapse_huge_page call, for Khugepaged::timing():
// the model's instrumentation, with no kernel counterpart. Made on entry,
// told when mmap_lock is taken and about to be dropped for write, the copy
// timed by a Span; accounted to the mm's khugepaged when the call returns,
// with *result saying whether it collapsed.
class CollapseTimer {
 public:
  CollapseTimer(Mm* mm, const int* result);
  ~CollapseTimer();
  CollapseTimer(const CollapseTimer&) = delete;
  CollapseTimer& operator=(const CollapseTimer&) = delete;

  void mmap_write_locked();
  void mmap_write_unlocking();
  // Adds the host time it lives to *into.
  class Span {
   public:
    explicit Span(uint64_t* into);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    uint64_t* into_;
    uint64_t t0_;
  };
  Span copy() { return Span(&copy_ns_); }

 private:
  Mm* const mm_;
  const int* const result_;
  const uint64_t t0_;
  uint64_t t_write_ = 0, write_ns_ = 0, copy_ns_ = 0;
};

}  // namespace mmlab
