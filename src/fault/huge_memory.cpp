// PMD-level transparent huge pages, the fault half of mm/huge_memory.c: the
// THP policy, anonymous PMD faults and the huge zero folio, write-protect
// faults on a PMD leaf. The PMD-leaf operations (split, zap, mprotect,
// mremap, MADV_FREE, deposit) are the mm half, in mm/huge_memory.cpp.
#include <atomic>
#include <cstring>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "mm/anon_vma.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/khugepaged_hooks.h"
#include "mm/memcontrol.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "phys/frame_copy.h"
#include "tlb/tlb.h"
#include "trace/trace.h"

namespace mmlab {

// ---- policy ----

bool hugepage_global_enabled(const Settings& s) { return s.thp_enabled.load(std::memory_order_relaxed) != ThpEnabled::kNever; }
bool hugepage_global_always(const Settings& s) { return s.thp_enabled.load(std::memory_order_relaxed) == ThpEnabled::kAlways; }

// file_thp_enabled: with CONFIG_READ_ONLY_THP_FOR_FS, a regular file (every
// model file that is not shmem or hugetlbfs, which answer for themselves
// first) that no struct file has open for write.
bool file_thp_enabled(const Vma* vma) {
  if (!vma->vm_mm->kernel->settings.read_only_thp_for_fs.load(std::memory_order_relaxed)) return false;
  const File* f = vma->vm_file.get();
  return f && !file_is_shmem(f) && f->fs != FsClass::kHugetlbfs && !inode_is_open_for_write(f);
}

namespace {

// __thp_vma_allowable_orders: the checks that do not depend on the sysfs
// per-size controls. The model has no DAX, no ->huge_fault handlers and
// no CONFIG_READ_ONLY_THP_FOR_FS (file_thp_enabled() is false); shmem asks
// shmem_allowable_huge_orders.
uint64_t __thp_vma_allowable_orders(Vma* vma, vm_flags_t vm_flags, TvaType type, uint64_t orders) {
  const bool smaps = type == TvaType::kSmaps;
  const bool in_pf = type == TvaType::kPagefault;
  const bool forced_collapse = type == TvaType::kForcedCollapse;
  const uint64_t supported = vma_is_anonymous(vma) ? THP_ORDERS_ALL_ANON : (BIT(PMD_ORDER) | BIT(PUD_ORDER));
  orders &= supported;
  if (!orders) return 0;
  if (vma_thp_disabled(vma, vm_flags, forced_collapse)) return 0;
  if (!in_pf && !smaps && (vm_flags & VM_NO_KHUGEPAGED)) return 0;
  if (!in_pf) {
    // Drop the orders too large to fit at the VMA's end (size and, for
    // files, alignment), highest first.
    unsigned order = highest_order(orders);
    while (orders && !thp_vma_suitable_order(vma, vma->vm_end - (PAGE_SIZE << order), order))
      order = next_order(&orders, order);
    if (!orders) return 0;
  }
  if (!vma_is_anonymous(vma)) {
    // shmem answers for itself (shmem_allowable_huge_orders; its faults ask
    // shmem_fault, not here): transparent_hugepage/enabled does not govern
    // it, even for khugepaged (this machine's 6.18 collapses a memfd with
    // `enabled` never). The global check that follows in the kernel is for
    // the other files, which the model never collapses.
    if (!in_pf && vma_is_shmem(vma))
      return orders & shmem_allowable_huge_orders(vma->vm_file.get(), vma, vma->vm_pgoff, forced_collapse);
    // Other files: khugepaged follows `enabled` (always, or madvise with
    // VM_HUGEPAGE); MADV_COLLAPSE does not. Then only the collapse path
    // of a regular file (file_thp_enabled) is left: the model has no
    // ->huge_fault handlers.
    const Settings& s = vma->vm_mm->kernel->settings;
    if (!forced_collapse &&
        (!hugepage_global_enabled(s) || (!(vm_flags & VM_HUGEPAGE) && !hugepage_global_always(s))))
      return 0;
    if (!in_pf && file_thp_enabled(vma)) return orders;
    return 0;
  }
  // Page faults (and smaps) allow a VMA without an anon_vma yet: the first
  // fault attaches one. Collapse needs it. A fault under the per-VMA lock
  // may be attaching it meanwhile (anon_vma_prepare publishes it atomically).
  if (!std::atomic_ref<AnonVma* const>(vma->anon_vma).load(std::memory_order_acquire)) return (smaps || in_pf) ? orders : 0;
  return orders;
}

}  // namespace

uint64_t thp_vma_allowable_orders(Vma* vma, vm_flags_t vm_flags, TvaType type, uint64_t orders) {
  // The per-size sysfs controls, for everyone but a forced collapse.
  if (type != TvaType::kForcedCollapse && vma_is_anonymous(vma)) {
    const Settings& s = vma->vm_mm->kernel->settings;
    uint64_t mask = s.huge_anon_orders_always.load(std::memory_order_relaxed);
    if (vm_flags & VM_HUGEPAGE) mask |= s.huge_anon_orders_madvise.load(std::memory_order_relaxed);
    if (hugepage_global_always(s) || ((vm_flags & VM_HUGEPAGE) && hugepage_global_enabled(s)))
      mask |= s.huge_anon_orders_inherit.load(std::memory_order_relaxed);
    orders &= mask;
    if (!orders) return 0;
  }
  return __thp_vma_allowable_orders(vma, vm_flags, type, orders);
}

uint64_t thp_vma_suitable_orders(Vma* vma, uint64_t addr, uint64_t orders) {
  uint64_t out = 0;
  for (uint64_t o = orders; o; o &= o - 1) {
    unsigned order = static_cast<unsigned>(__builtin_ctzll(o));
    uint64_t size = PAGE_SIZE << order;
    uint64_t haddr = round_down(addr, size);
    if (!vma_is_anonymous(vma) && !is_aligned((vma->vm_start >> PAGE_SHIFT) - vma->vm_pgoff, size >> PAGE_SHIFT))
      continue;
    if (haddr < vma->vm_start || haddr + size > vma->vm_end) continue;
    out |= BIT(order);
  }
  return out;
}

// vma_thp_gfp_mask: how hard a THP allocation for vma may try, by
// transparent_hugepage/defrag (synchronous compaction is direct reclaim).
gfp_t vma_thp_gfp_mask(const Vma* vma) {
  const bool madvised = vma && (vma->vm_flags & VM_HUGEPAGE);
  switch (vma->vm_mm->kernel->settings.thp_defrag.load(std::memory_order_relaxed)) {
    case ThpDefrag::kAlways: return GFP_TRANSHUGE_LIGHT | __GFP_DIRECT_RECLAIM | (madvised ? 0 : __GFP_NORETRY);
    case ThpDefrag::kDefer: return GFP_TRANSHUGE_LIGHT | __GFP_KSWAPD_RECLAIM;
    case ThpDefrag::kDeferMadvise: return GFP_TRANSHUGE_LIGHT | (madvised ? __GFP_DIRECT_RECLAIM : __GFP_KSWAPD_RECLAIM);
    case ThpDefrag::kMadvise: return GFP_TRANSHUGE_LIGHT | (madvised ? __GFP_DIRECT_RECLAIM : 0);
    case ThpDefrag::kNever: break;
  }
  return GFP_TRANSHUGE_LIGHT;
}

// The mm's reference on the huge zero folio (MMF_HUGE_ZERO_PAGE), dropped at exit.
static Folio* mm_get_huge_zero_folio(Mm* mm) {
  if (mm->test_flag(MMF_HUGE_ZERO_PAGE)) return mm->phys->huge_zero_folio();
  Folio* f = mm->phys->mm_get_huge_zero_folio();
  if (!f) return nullptr;
  if (mm->flags.fetch_or(1ull << MMF_HUGE_ZERO_PAGE) & (1ull << MMF_HUGE_ZERO_PAGE)) mm->phys->mm_put_huge_zero_folio();
  return f;
}

// ---- anonymous PMD faults ----

static Folio* vma_alloc_anon_folio_pmd(Vma* vma, uint64_t addr) {
  Mm* mm = vma->vm_mm;
  Folio* f = mm->phys->folio_alloc(GFP_TRANSHUGE, PMD_ORDER);
  if (!f) {
    mm->stats->count(VmStat::thp_fault_fallback);
    mm->stats->count_mthp(PMD_ORDER, MthpStat::anon_fault_fallback);
    MM_TRACE("mm_fault_fallback", "address={:#x} order={} reason=alloc_failed", addr, PMD_ORDER);
    return nullptr;
  }
  if (mem_cgroup_charge(f, mm->phys)) {
    folio_put(f);
    mm->stats->count(VmStat::thp_fault_fallback);
    mm->stats->count(VmStat::thp_fault_fallback_charge);
    mm->stats->count_mthp(PMD_ORDER, MthpStat::anon_fault_fallback);
    mm->stats->count_mthp(PMD_ORDER, MthpStat::anon_fault_fallback_charge);
    return nullptr;
  }
  PhysMem* phys = mm->phys;
  uint64_t haddr = addr & PMD_MASK;
  long target = static_cast<long>((addr - haddr) >> PAGE_SHIFT);
  zero_folio_frames(phys, static_cast<uint8_t*>(phys->page_address(&f->page)), HPAGE_PMD_NR, target);
  mm->stats->count_zeroed(PMD_ORDER, PMD_SIZE);
  folio_set_uptodate(f);
  return f;
}

void map_anon_folio_pmd_nopf(Folio* folio, pmd_t* pmd, Vma* vma, uint64_t haddr) {
  pmd_t entry = pfn_pmd(folio_pfn(folio), vma->vm_page_prot);
  entry = maybe_pmd_mkwrite(pmd_mkdirty(entry), vma);
  folio_add_new_anon_rmap(folio, vma, haddr, RMAP_EXCLUSIVE, RmapLevel::kPmd);
  folio_add_lru(folio);
  entry_set(pmd, entry);
  deferred_split_folio(folio, /*partially_mapped=*/false);  // for the underused-THP shrinker
}

// map_anon_folio_pmd_pf: the fault's mapping, with its rss and statistics.
// PMD lock held, *pmd none (or the huge zero PMD just cleared).
static void map_anon_folio_pmd(Folio* folio, pmd_t* pmd, Vma* vma, uint64_t haddr) {
  Mm* mm = vma->vm_mm;
  pmd_lockptr(mm, pmd)->assert_held();
  map_anon_folio_pmd_nopf(folio, pmd, vma, haddr);
  add_mm_counter(mm, MM_ANONPAGES, HPAGE_PMD_NR);
  mm->stats->count(VmStat::thp_fault_alloc);
  mm->stats->count_mthp(PMD_ORDER, MthpStat::anon_fault_alloc);
  mm->stats->count(Event::fault_anon);
  MM_TRACE("mm_fault_anon", "address={:#x} order={}", haddr, PMD_ORDER);
}

vm_fault_t do_huge_pmd_anonymous_page(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  uint64_t haddr = vmf->address & PMD_MASK;
  if (!thp_vma_suitable_order(vma, haddr, PMD_ORDER)) {
    MM_TRACE("mm_fault_fallback", "address={:#x} order={} reason=unsuitable", vmf->address, PMD_ORDER);
    return VM_FAULT_FALLBACK;
  }
  if (vm_fault_t ret = vmf_anon_prepare(vmf)) return ret;
  mm_khugepaged_enter_vma(vma, vma->vm_flags);
  // handle_userfault(VM_UFFD_MISSING): with nobody reading the userfaultfd
  // the model delivers what UFFD_FEATURE_SIGBUS does.
  if (userfaultfd_missing(vma)) return VM_FAULT_SIGBUS;

  if (!(vmf->flags & FAULT_FLAG_WRITE) && !mm_forbids_zeropage(mm) && mm->kernel->settings.use_zero_page.load()) {
    Page* table = pte_alloc_one(mm);
    if (!table) return VM_FAULT_OOM;
    Folio* zero = mm_get_huge_zero_folio(mm);
    if (!zero) {
      pgtable_free(mm, table);
      mm->stats->count(VmStat::thp_fault_fallback);
      MM_TRACE("mm_fault_fallback", "address={:#x} order={} reason=no_huge_zero_folio", vmf->address, PMD_ORDER);
      return VM_FAULT_FALLBACK;
    }
    SpinLock* ptl = pmd_lock(mm, vmf->pmd);
    ptl->assert_held();
    if (pmd_none(pmdp_get(vmf->pmd))) {
      pgtable_trans_huge_deposit(mm, vmf->pmd, table);
      entry_set(vmf->pmd, pmd_mkspecial(pfn_pmd(folio_pfn(zero), vma->vm_page_prot)));
      table = nullptr;
      mm->stats->count(Event::fault_zero);
    }
    ptl->unlock();
    if (table) pgtable_free(mm, table);
    return 0;
  }

  Folio* folio = vma_alloc_anon_folio_pmd(vma, vmf->address);
  if (!folio) return VM_FAULT_FALLBACK;
  Page* table = pte_alloc_one(mm);
  if (!table) {
    folio_put(folio);
    return VM_FAULT_OOM;
  }
  SpinLock* ptl = pmd_lock(mm, vmf->pmd);
  ptl->assert_held();
  if (!pmd_none(pmdp_get(vmf->pmd))) {
    ptl->unlock();
    folio_put(folio);
    pgtable_free(mm, table);
    mm->stats->count(Event::fault_retry);
    return 0;
  }
  pgtable_trans_huge_deposit(mm, vmf->pmd, table);
  map_anon_folio_pmd(folio, vmf->pmd, vma, haddr);
  ptl->unlock();
  return 0;
}

void huge_pmd_set_accessed(VmFault* vmf) {
  SpinLock* ptl = pmd_lock(vmf->mm(), vmf->pmd);
  ptl->assert_held();
  pmd_t cur = pmdp_get(vmf->pmd);
  if (cur == vmf->orig_pmd) {
    pmd_t entry = pmd_mkyoung(cur);
    if (vmf->flags & FAULT_FLAG_WRITE) entry = pmd_mkdirty(entry);
    if (!(entry == cur)) entry_set(vmf->pmd, entry);
  }
  ptl->unlock();
}

// ≈v6.13+: a write (or unshare) on the huge zero PMD allocates a THP.
static vm_fault_t do_huge_zero_wp_pmd(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  uint64_t haddr = vmf->address & PMD_MASK;
  Folio* folio = vma_alloc_anon_folio_pmd(vma, vmf->address);
  if (!folio) return VM_FAULT_FALLBACK;
  SpinLock* ptl = pmd_lock(mm, vmf->pmd);
  ptl->assert_held();
  if (pmdp_get(vmf->pmd) == vmf->orig_pmd) {
    entry_xchg(vmf->pmd, pmd_t{0});
    flush_pmd_tlb_range(vma, haddr, haddr + PMD_SIZE);
    map_anon_folio_pmd(folio, vmf->pmd, vma, haddr);  // the deposited table stays deposited
    folio = nullptr;
  }
  ptl->unlock();
  if (folio) folio_put(folio);
  return 0;
}

vm_fault_t do_huge_pmd_wp_page(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  bool unshare = vmf->flags & FAULT_FLAG_UNSHARE;
  // wp_huge_pmd's handle_userfault(VM_UFFD_WP), as UFFD_FEATURE_SIGBUS ends it.
  if (!unshare && (vma->vm_flags & VM_UFFD_WP) && pmd_uffd_wp(vmf->orig_pmd)) return VM_FAULT_SIGBUS;
  if (is_huge_zero_pmd(mm->phys, vmf->orig_pmd)) {
    vm_fault_t ret = do_huge_zero_wp_pmd(vmf);
    if (!(ret & VM_FAULT_FALLBACK)) return ret;
    split_huge_pmd(vma, vmf->pmd, vmf->address);
    return VM_FAULT_FALLBACK;
  }
  if (!vma_is_anonymous(vma)) {  // file PMDs: split and refault at PTE level
    split_huge_pmd(vma, vmf->pmd, vmf->address);
    return VM_FAULT_FALLBACK;
  }

  SpinLock* ptl = pmd_lock(mm, vmf->pmd);
  ptl->assert_held();
  if (!(pmdp_get(vmf->pmd) == vmf->orig_pmd)) {
    ptl->unlock();
    return 0;
  }
  Page* page = mm->phys->pfn_to_page(pmd_pfn(vmf->orig_pmd));
  Folio* folio = page_folio(page);
  bool reuse = PageAnonExclusive(page);
  if (!reuse) {
    if (!folio_trylock(folio)) {
      // Sleep on the folio lock without the PMD lock, then re-validate.
      folio_get(folio);
      ptl->unlock();
      folio_lock(folio);
      ptl = pmd_lock(mm, vmf->pmd);
      ptl->assert_held();
      if (!(pmdp_get(vmf->pmd) == vmf->orig_pmd)) {
        ptl->unlock();
        folio_unlock(folio);
        folio_put(folio);
        return 0;
      }
      folio_put(folio);
    }
    if (PageAnonExclusive(page)) {
      reuse = true;
    } else if (folio_ref_count(folio) == 1) {  // (a swap-cache reference is freed first once swap exists)
      folio_move_anon_rmap(folio, vma);
      SetPageAnonExclusive(page);
      reuse = true;
    }
    folio_unlock(folio);
  }
  if (reuse) {
    if (!unshare) {
      pmd_t entry = maybe_pmd_mkwrite(pmd_mkdirty(pmd_mkyoung(vmf->orig_pmd)), vma);
      entry_set(vmf->pmd, entry);
      mm->stats->count(VmStat::pgreuse);
      mm->stats->count(Event::fault_wp_reuse);
      mm->stats->count_order(PMD_ORDER, OrderStat::reuse);
      mm->stats->count(Event::cow_reuse_pages, HPAGE_PMD_NR);
    } else {
      mm->stats->count(Event::fault_unshare);
    }
    ptl->unlock();
    return 0;
  }
  ptl->unlock();
  // No PMD-sized copy on write: split the mapping, CoW one page at PTE level.
  split_huge_pmd(vma, vmf->pmd, vmf->address);
  return VM_FAULT_FALLBACK;
}

}  // namespace mmlab
