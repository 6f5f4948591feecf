// Page-fault handling for PTE-level anonymous memory (mm/memory.c):
// handle_mm_fault and its dispatch, do_anonymous_page with mTHP order
// selection (alloc_anon_folio), and write-protect faults (do_wp_page,
// wp_can_reuse_anon_folio, wp_page_reuse, wp_page_copy at order 0; the
// large-CoW policies of `tune cow.policy` and `cow.reuse` are in
// fault/wp_copy.cpp).
#include <atomic>
#include <cstring>
#include <variant>

#include "fault/fault.h"
#include "fault/current.h"
#include "mm/variants.h"
#include "fault/wp_copy.h"
#include "mm/anon_vma.h"
#include "mm/filemap.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/memcontrol.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "base/mmdebug.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"
#include "tlb/tlb.h"

namespace mmlab {

// ---- helpers ----

// __vmf_anon_prepare: anon_vma_prepare looks at the neighbouring VMAs for an
// anon_vma to share, which the per-VMA lock alone does not make safe. Under
// it the fault tries mmap_lock for read; only if someone holds (or waits
// for) it does the fault give up with VM_FAULT_RETRY, to be repeated under
// mmap_lock (the caller's vmf_anon_prepare drops the VMA lock; in the model
// handle_mm_fault does). Opt-out: mmap_lock is taken or not as the fault
// flags say, which the analysis cannot follow.
vm_fault_t __vmf_anon_prepare(Vma* vma, fault_flags_t flags) NO_THREAD_SAFETY_ANALYSIS {
  // Another thread may attach one under mmap_lock while we hold only the
  // VMA lock: anon_vma_prepare publishes it with release.
  if (std::atomic_ref<AnonVma*>(vma->anon_vma).load(std::memory_order_acquire)) return 0;
  Mm* mm = vma->vm_mm;
  if ((flags & FAULT_FLAG_VMA_LOCK) && !mmap_read_trylock(mm)) return VM_FAULT_RETRY;
  vm_fault_t ret = 0;
  if (anon_vma_prepare(vma)) ret = VM_FAULT_OOM;
  if (flags & FAULT_FLAG_VMA_LOCK) mmap_read_unlock(mm);
  return ret;
}

static bool pte_range_none(pte_t* pte, unsigned nr) {
  for (unsigned i = 0; i < nr; i++)
    if (!pte_none(ptep_get(pte + i))) return false;
  return true;
}

// An order-0 folio for a fault, charged; nullptr (the caller's VM_FAULT_OOM,
// with no statistic) when the allocation or the charge fails.
Folio* folio_prealloc(Mm* mm, uint64_t addr, bool need_zero) {
  Folio* f = mm->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, 0);
  if (!f) return nullptr;
  if (mem_cgroup_charge(f, mm->phys)) {
    folio_put(f);
    return nullptr;
  }
  if (need_zero) folio_zero_user(f, addr, addr, mm->stats);
  return f;
}

// ---- do_anonymous_page ----

// mTHP order selection for an anonymous fault (alloc_anon_folio): a folio,
// nullptr when out of memory, or RetryFault.
static std::variant<Folio*, RetryFault> alloc_anon_folio(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  uint64_t orders = 0;
  if (!(vma->vm_flags & VM_UFFD_MISSING)) {
    orders = thp_vma_allowable_orders(vma, vma->vm_flags, BIT(PMD_ORDER) - 1);
    orders = thp_vma_suitable_orders(vma, vmf->address, orders);
  }
  if (orders) {
    // The highest order whose naturally aligned range is entirely empty
    // (read without the lock, as pte_offset_map under RCU: rechecked later).
    unsigned order = highest_order(orders);
    {
      PteTableReadSection rcu(mm);
      pmd_t pmdval;
      pte_t* table = pte_offset_map(mm, vmf->pmd, vmf->address & PMD_MASK, &pmdval);
      if (!table) return RetryFault{};
      while (orders) {
        uint64_t addr = round_down(vmf->address, PAGE_SIZE << order);
        if (pte_range_none(table + pte_index(addr), 1u << order)) break;
        MM_TRACE("mm_fault_fallback", "address={:#x} order={} reason=ptes_not_none", vmf->address, order);
        order = next_order(&orders, order);
      }
    }
    while (orders) {
      uint64_t addr = round_down(vmf->address, PAGE_SIZE << order);
      Folio* f = mm->phys->folio_alloc(GFP_TRANSHUGE, order);
      if (f && mem_cgroup_charge(f, mm->phys)) {
        // A charge failure is a fallback too: both statistics count it.
        mm->stats->count_mthp(order, MthpStat::anon_fault_fallback_charge);
        folio_put(f);
        f = nullptr;
      } else if (f) {
        folio_zero_user(f, vmf->address, addr, mm->stats);
        MM_TRACE("mm_fault_anon", "address={:#x} order={}", vmf->address, order);
        return f;
      }
      mm->stats->count_mthp(order, MthpStat::anon_fault_fallback);
      MM_TRACE("mm_fault_fallback", "address={:#x} order={} reason=alloc_failed", vmf->address, order);
      order = next_order(&orders, order);
    }
  }
  MM_TRACE("mm_fault_anon", "address={:#x} order=0", vmf->address);
  return folio_prealloc(mm, vmf->address, true);
}

void map_anon_folio_pte_nopf(Folio* folio, pte_t* pte, Vma* vma, uint64_t addr, bool uffd_wp) {
  const unsigned nr = static_cast<unsigned>(folio_nr_pages(folio));
  pte_t entry = pfn_pte(folio_pfn(folio), vma->vm_page_prot);
  if (vma->vm_flags & VM_WRITE) entry = pte_mkwrite_novma(pte_mkdirty(entry));
  if (uffd_wp) entry = pte_mkuffd_wp(entry);
  folio_ref_add(folio, static_cast<int>(nr) - 1);  // one reference per PTE
  folio_add_new_anon_rmap(folio, vma, addr, RMAP_EXCLUSIVE, RmapLevel::kPte);
  folio_add_lru(folio);
  set_ptes(vma->vm_mm, addr, pte, entry, nr);
}

static vm_fault_t do_anonymous_page(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;

  // Shared anonymous memory is shmem and never gets here.
  if (vma->vm_flags & VM_SHARED) return VM_FAULT_SIGBUS;
  // handle_userfault(VM_UFFD_MISSING): nobody reads the model's userfaultfd,
  // so the fault ends as UFFD_FEATURE_SIGBUS makes it end.
  if (userfaultfd_missing(vma)) return VM_FAULT_SIGBUS;
  if (!pte_alloc(mm, vmf->pmd)) return VM_FAULT_OOM;

  if (!(vmf->flags & FAULT_FLAG_WRITE) && !mm_forbids_zeropage(mm)) {
    // Map the shared zero page: no reference, mapcount or rss change.
    pte_t entry = pte_mkspecial(pfn_pte(phys->zero_pfn(), vma->vm_page_prot));
    vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
    if (!vmf->pte) return 0;
    vmf->ptl->assert_held();
    if (!pte_none(ptep_get(vmf->pte))) {
      vmf->ptl->unlock();
      return 0;
    }
    set_pte_at(mm, vmf->address, vmf->pte, entry);
    vmf->ptl->unlock();
    mm->stats->count(Event::fault_zero);
    return 0;
  }

  if (vm_fault_t ret = vmf_anon_prepare(vmf)) return ret;
  const std::variant<Folio*, RetryFault> alloc = alloc_anon_folio(vmf);
  if (std::holds_alternative<RetryFault>(alloc)) return 0;
  Folio* folio = std::get<Folio*>(alloc);
  if (!folio) return VM_FAULT_OOM;

  unsigned nr = static_cast<unsigned>(folio_nr_pages(folio));
  uint64_t addr = round_down(vmf->address, nr * PAGE_SIZE);
  folio_set_uptodate(folio);

  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, addr, &vmf->ptl);
  if (!vmf->pte) {
    folio_put(folio);
    return 0;
  }
  vmf->ptl->assert_held();
  if ((nr == 1 && !pte_none(ptep_get(vmf->pte))) || (nr > 1 && !pte_range_none(vmf->pte, nr))) {
    // Raced with another fault; a retry may choose a smaller order.
    vmf->ptl->unlock();
    folio_put(folio);
    mm->stats->count(Event::fault_retry);
    return 0;
  }
  add_mm_counter(mm, MM_ANONPAGES, nr);
  mm->stats->count_mthp(folio_order(folio), MthpStat::anon_fault_alloc);
  map_anon_folio_pte_nopf(folio, vmf->pte, vma, addr, /*uffd_wp=*/false);
  vmf->ptl->unlock();
  mm->stats->count(Event::fault_anon);
  return 0;
}

// ---- write-protect faults ----

bool wp_can_reuse_anon_folio(Folio* folio, Vma* vma) {
  if (folio_test_large(folio)) {
    // v6.15+: reuse only if every reference is a mapping, all in this mm.
    if (folio_large_mapcount(folio) <= 1) return false;  // copy the page, let the folio go
    if (folio_maybe_mapped_shared(folio)) return false;
    if (folio_test_swapcache(folio)) {
      if (!folio_trylock(folio)) return false;
      folio_free_swap(folio);
      folio_unlock(folio);
    }
    if (folio_large_mapcount(folio) != folio_ref_count(folio)) return false;
    return true;
  }
  if (folio_ref_count(folio) > 3) return false;  // quick reject
  int swapref = folio_test_swapcache(folio) ? 1 : 0;
  if (folio_ref_count(folio) > 1 + swapref) return false;
  if (!folio_trylock(folio)) return false;
  if (folio_test_swapcache(folio)) folio_free_swap(folio);
  if (folio_ref_count(folio) != 1) {
    folio_unlock(folio);
    return false;
  }
  folio_move_anon_rmap(folio, vma);
  folio_unlock(folio);
  return true;
}

// PTL held on entry, released on return.
static vm_fault_t wp_page_reuse(VmFault* vmf, Folio* folio) RELEASE(vmf->ptl) {
  vmf->ptl->assert_held();
  Vma* vma = vmf->vma;
  Stats* st = vma->vm_mm->stats;
  pte_t entry = pte_mkyoung(vmf->orig_pte);
  entry = maybe_mkwrite(pte_mkdirty(entry), vma);
  ptep_set_access_flags(vma->vm_mm, vmf->address, vmf->pte, entry);
  vmf->ptl->unlock();
  st->count(VmStat::pgreuse);
  st->count(Event::fault_wp_reuse);
  MM_TRACE("mm_cow_reuse", "address={:#x} pfn={:#x} order={}", vmf->address, folio_pfn(folio), folio_order(folio));
  st->count_order(folio_order(folio), OrderStat::reuse);
  st->count(Event::cow_reuse_pages);
  return 0;
}

// Entered without the PTL, holding a reference on the old folio (if any).
// The order-0 copy of v6.18; `cow.policy` rfc and fixed decide first
// (fault/wp_copy.cpp).
static vm_fault_t wp_page_copy(VmFault* vmf) {
  MM_TRACE_SLICE("mm_cow_copy", "address={:#x} policy={}", vmf->address, static_cast<int>(vmf->vma->vm_mm->kernel->settings.cow_policy.load(std::memory_order_relaxed)));
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  Folio* old_folio = vmf->page ? page_folio(vmf->page) : nullptr;

  wp_copy_window(mm, WpCopyPoint::kEnter);
  switch (mm->kernel->settings.cow_policy.load(std::memory_order_relaxed)) {
    case CowPolicy::kRfc: return rfc::wp_page_copy(vmf);
    case CowPolicy::kFixed: {
      vm_fault_t ret;
      if (wp_page_copy_large(vmf, &ret)) return ret;
      break;
    }
    case CowPolicy::kBase: break;
  }
  if (vm_fault_t ret = vmf_anon_prepare(vmf)) {
    if (old_folio) folio_put(old_folio);
    return ret;
  }
  bool from_zero = phys->is_zero_pfn(pte_pfn(vmf->orig_pte));
  Folio* new_folio = folio_prealloc(mm, vmf->address, from_zero);
  if (!new_folio) {
    if (old_folio) folio_put(old_folio);
    return VM_FAULT_OOM;
  }
  if (!from_zero) {
    // __wp_page_copy_user: a machine check on the source is not retried.
    if (copy_mc_user_highpage(phys, phys->page_address(&new_folio->page), phys->pfn_address(pte_pfn(vmf->orig_pte)))) {
      folio_put(new_folio);
      if (old_folio) folio_put(old_folio);
      return VM_FAULT_HWPOISON;
    }
    count_wp_copy_bytes(mm, new_folio, 1);
  }
  folio_set_uptodate(new_folio);

  wp_copy_before_revalidate(mm);
  bool copied = false;
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &vmf->ptl);
  if (vmf->pte) {
    vmf->ptl->assert_held();
    if (ptep_get(vmf->pte) == vmf->orig_pte) {
      if (old_folio) {
        if (!folio_test_anon(old_folio)) {
          dec_mm_counter(mm, mm_counter_file(old_folio));
          inc_mm_counter(mm, MM_ANONPAGES);
        }
      } else {
        inc_mm_counter(mm, MM_ANONPAGES);
      }
      // The old entry goes (and the TLB is flushed) before the new one appears.
      clear_flush_ptes(vma, vmf->address, vmf->pte, 1);
      wp_install_new_folio(vmf, new_folio, vmf->pte, vmf->address, 1);
      if (old_folio) folio_remove_rmap_pte(old_folio, vmf->page, vma);
      new_folio = old_folio;  // drop the old PTE's reference below
      copied = true;
    }
    vmf->ptl->unlock();
  }
  if (new_folio) folio_put(new_folio);
  if (old_folio) {
    // The copy may have been the last mapping of a folio whose slot lost its
    // last swap PTE while the folio was locked (free_swap_cache, as the
    // kernel's wp_page_copy does).
    if (copied) free_swap_cache(old_folio);
    folio_put(old_folio);  // the fault's own reference
  }
  if (copied) count_wp_copy(vmf, 0);
  else mm->stats->count(Event::fault_retry);
  return 0;
}

// PTL held on entry, released on return.
vm_fault_t do_wp_page(VmFault* vmf) {
  vmf->ptl->assert_held();
  Vma* vma = vmf->vma;
  bool unshare = vmf->flags & FAULT_FLAG_UNSHARE;
  vmf->page = vm_normal_page(vma, vmf->address, vmf->orig_pte);
  Folio* folio = vmf->page ? page_folio(vmf->page) : nullptr;

  // handle_userfault(VM_UFFD_WP): a write to a userfaultfd write-protected
  // page ends as UFFD_FEATURE_SIGBUS makes it end (nobody reads the model's
  // userfaultfd). An unshare is no write and goes on.
  if (!unshare && (vma->vm_flags & VM_UFFD_WP) && pte_uffd_wp(vmf->orig_pte)) {
    vmf->ptl->unlock();
    return VM_FAULT_SIGBUS;
  }
  if (vma->vm_flags & (VM_SHARED | VM_MAYSHARE)) return wp_page_shared(vmf, folio);  // shared mappings never CoW
  if (folio && folio_test_anon(folio) &&
      (PageAnonExclusive(vmf->page) || wp_can_reuse_anon_folio(folio, vma))) {
    if (!PageAnonExclusive(vmf->page)) SetPageAnonExclusive(vmf->page);
    if (unshare) {  // unsharing an exclusive page changes nothing
      vmf->ptl->unlock();
      vma->vm_mm->stats->count(Event::fault_unshare);
      MM_TRACE("mm_fault_unshare", "address={:#x} result=exclusive_already", vmf->address);
      return 0;
    }
    if (vma->vm_mm->kernel->settings.cow_reuse.load(std::memory_order_relaxed) == CowReuse::kWhole &&
        wp_page_reuse_run(vmf, folio)) {
      vmf->ptl->unlock();
      return 0;
    }
    return wp_page_reuse(vmf, folio);
  }
  if (folio) folio_get(folio);
  vmf->ptl->unlock();
  return wp_page_copy(vmf);
}

// ---- dispatch ----

static vm_fault_t handle_pte_fault(VmFault* vmf) {
  Mm* mm = vmf->mm();
  pmd_t pmdval;
  vmf->pte = nullptr;
  if (!pmd_none(pmdp_get(vmf->pmd))) {
    // The table may be reclaimed (PT_RECLAIM) until its lock is held with
    // the PMD unchanged: read it inside the section, as under RCU.
    PteTableReadSection rcu(mm);
    vmf->pte = pte_offset_map(mm, vmf->pmd, vmf->address, &pmdval);
    if (!vmf->pte) return 0;  // the PMD changed under us (became a leaf): retry
    vmf->orig_pte = ptep_get(vmf->pte);
    if (pte_none(vmf->orig_pte)) vmf->pte = nullptr;
    else if (pte_present(vmf->orig_pte) && !pte_lock_if_unchanged(mm, vmf->pmd, pmdval, &vmf->ptl)) return 0;
  }
  if (!vmf->pte) return vma_is_anonymous(vmf->vma) ? do_anonymous_page(vmf) : do_fault(vmf);  // do_pte_missing
  if (!pte_present(vmf->orig_pte)) return do_swap_page(vmf);  // relocks the table itself
  vmf->ptl->assert_held();
  pte_t entry = ptep_get(vmf->pte);
  if (!(entry == vmf->orig_pte)) {
    vmf->ptl->unlock();
    return 0;
  }
  if (vmf->flags & (FAULT_FLAG_WRITE | FAULT_FLAG_UNSHARE)) {
    if (!pte_write(entry)) return do_wp_page(vmf);
    if (vmf->flags & FAULT_FLAG_WRITE) entry = pte_mkdirty(entry);
  }
  entry = pte_mkyoung(entry);
  if (!(entry == vmf->orig_pte)) ptep_set_access_flags(vmf->vma->vm_mm, vmf->address, vmf->pte, entry);
  vmf->ptl->unlock();
  return 0;
}

static vm_fault_t __handle_mm_fault(Vma* vma, uint64_t address, fault_flags_t flags) {
  Mm* mm = vma->vm_mm;
  VmFault vmf;
  vmf.vma = vma;
  vmf.real_address = address;
  vmf.address = address & PAGE_MASK;
  vmf.flags = flags;

  vmf.pud = pud_alloc(mm, address);
  if (!vmf.pud) return VM_FAULT_OOM;
  vmf.pmd = pmd_alloc(mm, vmf.pud, address);
  if (!vmf.pmd) return pud_leaf(pudp_get(vmf.pud)) ? VM_FAULT_SIGBUS : VM_FAULT_OOM;

  vmf.orig_pmd = pmdp_get(vmf.pmd);
  if (pmd_none(vmf.orig_pmd) && vma_is_anonymous(vma) &&
      thp_vma_allowable_orders(vma, vma->vm_flags, BIT(PMD_ORDER))) {
    vm_fault_t ret = do_huge_pmd_anonymous_page(&vmf);
    if (!(ret & VM_FAULT_FALLBACK)) return ret;
  } else if (pmd_trans_huge(vmf.orig_pmd)) {
    if ((flags & (FAULT_FLAG_WRITE | FAULT_FLAG_UNSHARE)) && !pmd_write(vmf.orig_pmd)) {
      vm_fault_t ret = do_huge_pmd_wp_page(&vmf);
      if (!(ret & VM_FAULT_FALLBACK)) return ret;
    } else {
      huge_pmd_set_accessed(&vmf);
      return 0;
    }
  }
  return handle_pte_fault(&vmf);
}

// release_fault_lock: the lock the fault was entered with (the per-VMA
// lock, or mmap_lock for read), dropped before a VM_FAULT_RETRY. Opt-out:
// which lock is held is a fault flag, which the analysis cannot follow.
static void release_fault_lock(Vma* vma, fault_flags_t flags) NO_THREAD_SAFETY_ANALYSIS {
  if (flags & FAULT_FLAG_VMA_LOCK)
    vma_end_read(vma);
  else
    mmap_read_unlock(vma->vm_mm);
}

// The site `fault_retry`: a fault that may retry (FAULT_FLAG_ALLOW_RETRY)
// gives up as __folio_lock_or_retry does when it would have to wait: it
// drops the fault's lock unless FAULT_FLAG_RETRY_NOWAIT and returns
// VM_FAULT_RETRY. FAULT_FLAG_TRIED does not stop it: the kernel lets a
// fault retry more than once.
static bool inject_fault_retry(Vma* vma, fault_flags_t flags) {
  if (!(flags & FAULT_FLAG_ALLOW_RETRY)) return false;
  if (!vma->vm_mm->phys->should_fail(FaultSite::fault_retry)) return false;
  if (!(flags & FAULT_FLAG_RETRY_NOWAIT)) release_fault_lock(vma, flags);
  return true;
}

// ---- current and the task's fault counts (fault/current.h) ----

namespace {
thread_local TaskStruct* t_current = nullptr;
}  // namespace

TaskStruct* get_current() { return t_current; }

CurrentTask::CurrentTask(TaskStruct* t) : prev_(t_current) {
  if (!t_current) t_current = t;
}

CurrentTask::~CurrentTask() { t_current = prev_; }

// mm_account_fault: the fault's accounting, once it is complete. A
// VM_FAULT_RETRY is not: the retry that completes it counts, so a fault that
// falls back from the per-VMA lock to mmap_lock counts once. pgfault counts
// failed faults too (VM_FAULT_ERROR), as older kernels did; the task's
// min_flt/maj_flt only successful ones, a retried one (FAULT_FLAG_TRIED) as
// major. The kernel's GUP faults (regs NULL) skip only the perf events and
// still count to current, the task that called GUP, whatever mm the fault
// was in. pgmajfault is not counted here but by the handlers that read
// (do_swap_page, shmem's swap-in).
static void mm_account_fault(Mm* mm, fault_flags_t flags, vm_fault_t ret) {
  if (ret & VM_FAULT_RETRY) return;
  mm->stats->count(VmStat::pgfault);
  if (ret & VM_FAULT_ERROR) return;
  TaskStruct* t = get_current();
  if (!t) return;
  const bool major = (ret & VM_FAULT_MAJOR) || (flags & FAULT_FLAG_TRIED);
  (major ? t->maj_flt : t->min_flt).fetch_add(1, std::memory_order_relaxed);
}

// sanitize_fault_flags: 0, or VM_FAULT_SIGSEGV for flags no caller may pass.
static vm_fault_t sanitize_fault_flags(Vma* vma, fault_flags_t* flags) {
  if (*flags & FAULT_FLAG_UNSHARE) {
    if (*flags & FAULT_FLAG_WRITE) return VM_FAULT_SIGSEGV;
    if (!is_cow_mapping(vma->vm_flags)) *flags &= ~FAULT_FLAG_UNSHARE;  // a plain read fault
  } else if (*flags & FAULT_FLAG_WRITE) {
    if (!(vma->vm_flags & VM_MAYWRITE)) return VM_FAULT_SIGSEGV;
    // FOLL_FORCE writes only work in CoW mappings.
    if (!(vma->vm_flags & VM_WRITE) && !is_cow_mapping(vma->vm_flags)) return VM_FAULT_SIGSEGV;
  }
  return 0;
}

// handle_mm_fault's dispatch, between sanitize_fault_flags and
// mm_account_fault (the model's own split, for the injection site).
static vm_fault_t handle_mm_fault_dispatch(Vma* vma, uint64_t address, fault_flags_t flags) {
  if (inject_fault_retry(vma, flags)) return VM_FAULT_RETRY;
  const vm_fault_t ret = is_vm_hugetlb_page(vma) ? hugetlb_fault(vma, address, flags) : __handle_mm_fault(vma, address, flags);
  // A VM_FAULT_RETRY under the per-VMA lock (__vmf_anon_prepare: mmap_lock
  // contended) releases that lock, as the kernel's vmf_anon_prepare does;
  // the model's fault paths return it held, so it goes here, once.
  if ((ret & VM_FAULT_RETRY) && (flags & FAULT_FLAG_VMA_LOCK)) release_fault_lock(vma, flags);
  return ret;
}

vm_fault_t handle_mm_fault(Vma* vma, uint64_t address, fault_flags_t flags) {
  // If the fault drops its lock, vma may go; mm stays (its owner holds it).
  Mm* mm = vma->vm_mm;
  MM_TRACE_SLICE("mm_fault", "address={:#x} flags={:#x} write={} unshare={}", address, static_cast<uint64_t>(flags), (flags & FAULT_FLAG_WRITE) ? 1 : 0, (flags & FAULT_FLAG_UNSHARE) ? 1 : 0);
  if (flags & FAULT_FLAG_VMA_LOCK)
    lockdep_assert_held(vma);  // vma_start_read's lockdep entry
  else
    mmap_assert_locked(mm);
  vm_fault_t ret = sanitize_fault_flags(vma, &flags);
  if (!ret) ret = handle_mm_fault_dispatch(vma, address, flags);
  mm_account_fault(mm, flags, ret);
  return ret;
}

}  // namespace mmlab
