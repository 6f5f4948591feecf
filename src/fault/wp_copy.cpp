// The copy-on-write order policies (docs/VARIANTS.md, "mTHP copy-on-write").
//
// `cow.policy rfc` is "[RFC PATCH 6/7] mm: memory: add mTHP support for wp"
// (on v6.16, here on v6.18: TVA_PAGEFAULT for TVA_IN_PF|TVA_ENFORCE_SYSFS),
// with patches 1-5's helpers folded in: alloc_wp_folio, thp_wp_suitable_orders,
// pte_range_readonly and the posting's wp_page_copy, flaws included. Where a
// flaw would make the kernel corrupt memory the model cannot survive (struct
// pages outside its memmap, references it does not hold), the model records
// the finding in the System (Kernel::vm_warn) and does the nearest thing its
// memory safety allows; everything else it does as the kernel would, so that
// the checker, the data checks and the leak check see the damage.
//
// `cow.policy fixed` is our correction of it (wp_page_copy_large), and
// `cow.reuse whole` a companion to v6.18's per-page reuse of large folios
// (wp_page_reuse_run).
#include "fault/wp_copy.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <variant>
#include <vector>

#include "phys/frame_copy.h"
#include "fmt/format.h"
#include "mm/memcontrol.h"
#include "mm/memory.h"
#include "mm/rmap.h"
#include "mm/swapfile.h"
#include "mm/debug.h"
#include "sync/sched.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {


// vma_alloc_folio for a large write-fault folio, with the direct-reclaim
// accounting (fault injection is the allocator's own `page_alloc` site).
Folio* vma_alloc_folio(gfp_t gfp, unsigned order, Vma* vma) {
  Mm* mm = vma->vm_mm;
  if (gfp & __GFP_DIRECT_RECLAIM) mm->stats->count(Event::cow_direct_reclaim);
  return mm->phys->folio_alloc(gfp, order);
}

}  // namespace

// The new entry: young; an unshare keeps the old entry's soft-dirty and
// uffd-wp bits read-only, a write makes it dirty and, where the VMA allows,
// writable.
static pte_t wp_copy_entry(VmFault* vmf, Folio* new_folio) {
  Vma* vma = vmf->vma;
  pte_t entry = pfn_pte(folio_pfn(new_folio), vma->vm_page_prot);
  if (vmf->flags & FAULT_FLAG_UNSHARE) {
    if (pte_soft_dirty(vmf->orig_pte)) entry = pte_mksoft_dirty(entry);
    if (pte_uffd_wp(vmf->orig_pte)) entry = pte_mkuffd_wp(entry);
    return entry;
  }
  return maybe_mkwrite(pte_mkdirty(entry), vma);
}

void wp_install_new_folio(VmFault* vmf, Folio* new_folio, pte_t* pte, uint64_t addr, unsigned nr) {
  Vma* vma = vmf->vma;
  pte_t entry = wp_copy_entry(vmf, new_folio);
  VM_BUG_ON((vmf->flags & FAULT_FLAG_UNSHARE) && pte_write(entry), "unshare produced a writable PTE");
  folio_ref_add(new_folio, static_cast<int>(nr) - 1);  // one reference per PTE
  folio_add_new_anon_rmap(new_folio, vma, addr, RMAP_EXCLUSIVE, RmapLevel::kPte);
  folio_add_lru(new_folio);
  set_ptes(vma->vm_mm, addr, pte, entry, nr);
}

void count_wp_copy(const VmFault* vmf, unsigned order) {
  Mm* mm = vmf->vma->vm_mm;
  const bool unshare = vmf->flags & FAULT_FLAG_UNSHARE;
  mm->stats->count(unshare ? Event::fault_unshare : Event::fault_wp_copy);
  mm->stats->count_order(order, unshare ? OrderStat::unshare : OrderStat::copy);
}

void count_wp_copy_bytes(Mm* mm, const Folio* new_folio, unsigned nr) {
  const uint64_t bytes = static_cast<uint64_t>(nr) * PAGE_SIZE;
  mm->stats->count_copied(folio_order(new_folio), bytes);
  mm->stats->count(Event::cow_bytes, bytes);
  unsigned zero = 0;
  for (unsigned i = 0; i < nr; i++) zero += frame_is_zero(mm->phys->page_address(folio_page(new_folio, i))) ? 1 : 0;
  if (zero) mm->stats->count(Event::cow_zero_subpages, zero);
}

void wp_copy_before_revalidate(Mm* mm) {
  mm->stats->count(Event::cow_notifier);
  wp_copy_window(mm, WpCopyPoint::kBeforeRevalidate);
}

void wp_copy_window(Mm* mm, WpCopyPoint point) {
  // Labels: wp_page_copy's entry with the PTL dropped, and after the copy
  // before the PTL is retaken to re-validate the entries.
  sched::point(point == WpCopyPoint::kEnter ? "wp_copy.enter" : "wp_copy.before_revalidate",
               sched::Op::kLabel, {mm, sched::ObjKind::kLabel, static_cast<uint64_t>(mm->mm_id)});
}

// ============================================================================
// cow.policy rfc: the posting
// ============================================================================

namespace rfc {
namespace {

// thp_wp_suitable_orders: no order above the old folio's.
uint64_t thp_wp_suitable_orders(const Folio* old_folio, uint64_t orders) {
  const unsigned max_order = folio_order(old_folio);
  unsigned order = orders ? highest_order(orders) : 0;
  while (orders) {
    if (order <= max_order) break;
    order = next_order(&orders, order);
  }
  return orders;
}

// pte_range_readonly: "no PTE of the range is writable", read locklessly.
// Flaw (a): none, swap, migration and marker entries all pass, except that
// on x86 a soft-dirty swap entry reads as writable (_PAGE_SWP_SOFT_DIRTY is
// the _PAGE_RW bit).
bool pte_range_readonly(const pte_t* pte, unsigned nr) {
  for (unsigned i = 0; i < nr; i++)
    if (pte_write(ptep_get(pte + i))) return false;
  return true;
}

// alloc_wp_folio: the largest order the posting allows, or the order-0
// folio_prealloc(); nullptr on OOM, RetryFault to retry the fault.
std::variant<Folio*, RetryFault> alloc_wp_folio(VmFault* vmf, bool pfn_is_zero) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  // userfaultfd needs per-page fault fidelity; a zero-page CoW or one with
  // no struct page is order 0 (the posting's copy_folio_from_user() branch
  // is therefore unreachable).
  if (!userfaultfd_armed(vma) && !pfn_is_zero && vmf->page) {
    uint64_t orders = thp_vma_allowable_orders(vma, vma->vm_flags, TvaType::kPagefault, BIT(PMD_ORDER) - 1);
    orders = thp_vma_suitable_orders(vma, vmf->address, orders);
    orders = thp_wp_suitable_orders(page_folio(vmf->page), orders);
    if (orders) {
      // The highest order whose aligned range is entirely read-only (read
      // without the lock, as under RCU: the copy rechecks under it).
      unsigned order = highest_order(orders);
      {
        PteTableReadSection rcu(mm);
        pmd_t pmdval;
        pte_t* pte = pte_offset_map(mm, vmf->pmd, vmf->address & PMD_MASK, &pmdval);
        if (!pte) return RetryFault{};
        while (orders) {
          uint64_t addr = round_down(vmf->address, PAGE_SIZE << order);
          if (pte_range_readonly(pte + pte_index(addr), 1u << order)) break;
          order = next_order(&orders, order);
        }
      }
      const gfp_t gfp = vma_thp_gfp_mask(vma);
      while (orders) {
        Folio* folio = vma_alloc_folio(gfp, order, vma);
        if (folio) {
          if (!mem_cgroup_charge(folio, mm->phys)) return folio;  // not zeroed: the copy fills it
          mm->stats->count_mthp(order, MthpStat::wp_fault_fallback_charge);
          folio_put(folio);
        }
        mm->stats->count_mthp(order, MthpStat::wp_fault_fallback);
        order = next_order(&orders, order);
      }
    }
  }
  return folio_prealloc(mm, vmf->address, pfn_is_zero);
}

// The kernel's copy_user_large_folio(dst, src, offset, ...) of the posting's
// patch 4/7, copying page `offset + i` of src to page i of dst. Flaw (c):
// offset comes from the faulting page moved back by its distance to the
// aligned start, which lands outside src whenever src is not mapped
// naturally aligned and whole there. Past src's end the kernel copies the
// next frames' contents (whatever folio or free memory they hold), and so
// does the model; below its start the unsigned offset wraps to a struct page
// far outside the memmap, an oops in the kernel, which the model records
// before copying the frames just below src instead. Each page is copied with
// copy_mc_user_highpage (copy_subpage): 0, or -EHWPOISON at the first
// machine check.
int copy_user_large_folio(Folio* dst, Folio* src, long offset, Mm* mm) {
  PhysMem* phys = mm->phys;
  const long nr = folio_nr_pages(dst);
  const long src_pfn = static_cast<long>(folio_pfn(src));
  if (offset < 0)
    mm->kernel->vm_warn(fmt::format(
        "rfc: copy_user_large_folio: source offset {} wraps below the old folio (unsigned int offset: the kernel reads "
        "a struct page outside the memmap and oopses)\n{}",
        offset, dump_folio(src)));
  for (long i = 0; i < nr; i++) {
    const long pfn = src_pfn + offset + i;
    void* to = phys->page_address(folio_page(dst, i));
    if (pfn < 0 || !phys->pfn_valid(static_cast<pfn_t>(pfn))) {
      mm->kernel->vm_warn(fmt::format("rfc: copy_user_large_folio: source pfn {:#x} is outside RAM (an oops)", pfn));
      std::memset(to, 0, PAGE_SIZE);
      continue;
    }
    if (copy_mc_user_highpage(phys, to, phys->pfn_address(static_cast<pfn_t>(pfn)))) return -EHWPOISON;
  }
  return 0;
}

// The posting's folio_remove_rmap_ptes(old_folio, old_page, nr, vma), with
// old_page computed as in the copy. The kernel's __folio_rmap_sanity_checks
// (CONFIG_DEBUG_VM) warns when the pages are not the folio's; the kernel then
// decrements the _mapcount of whatever struct pages those are and the
// folio's large mapcount by nr, whichever of them the replaced entries
// mapped. The model records each such finding and removes the mappings the
// replaced entries had, no more: mapcounts that went wrong would make its
// own later bookkeeping (a split, the rmap walk of a process's exit) read
// freed memory or abort, where the kernel's corruption only shows later.
void remove_rmap_ptes(Folio* old_folio, long first_pfn, unsigned nr, Vma* vma, const std::vector<Page*>& mapped) {
  Mm* mm = vma->vm_mm;
  const long folio_first = static_cast<long>(folio_pfn(old_folio));
  const long folio_end = folio_first + folio_nr_pages(old_folio);
  if (first_pfn < folio_first || first_pfn + nr > folio_end)
    mm->kernel->vm_warn(fmt::format(
        "rfc: __folio_rmap_sanity_checks: folio_remove_rmap_ptes of pages {}..{} of a folio of {} pages "
        "(page_folio(page) != folio): the kernel corrupts the mapcounts of struct pages it does not own\n{}",
        first_pfn - folio_first, first_pfn - folio_first + nr - 1, folio_nr_pages(old_folio), dump_folio(old_folio)));
  else if (mapped.size() != nr)
    mm->kernel->vm_warn(fmt::format(
        "rfc: folio_remove_rmap_ptes of {} pages of the old folio, {} of which the replaced entries mapped: the kernel's "
        "mapcounts of the others go wrong\n{}",
        nr, mapped.size(), dump_folio(old_folio)));
  for (Page* p : mapped) folio_remove_rmap_pte(old_folio, p, vma);
}

// ptep_clear_flush_range (patch 2/7) clears every entry of the range,
// whatever it is (flaw (a)). An entry mapping another folio, or a swap or
// migration entry, is lost in the kernel with its mapcount and reference:
// that folio stays mapped after every process has exited, its anon_vma
// freed under it. The model records that and releases the entry as a zap
// would (the folio's reference is put by the caller after the PTL). The
// rss counters stay as the posting leaves them (it counts the new folio's
// pages as the ones they replace), so that the checker sees its accounting.
void lose_entry(VmFault* vmf, pte_t* pte, uint64_t addr, std::vector<Folio*>* put_after) {
  Mm* mm = vmf->vma->vm_mm;
  mm->kernel->vm_warn(fmt::format(
      "rfc: ptep_clear_flush_range clears the entry at {:#x} ({:#x}), which maps no page of the old folio: the kernel "
      "loses it with its mapcount and reference (the folio outlives every process)",
      addr, ptep_get(pte).v));
  long rss[NR_MM_COUNTERS];
  for (int c = 0; c < NR_MM_COUNTERS; c++) rss[c] = mm->get_mm_counter(static_cast<MmCounter>(c));
  if (Folio* f = zap_one_pte(vmf->vma, pte, addr)) put_after->push_back(f);
  for (int c = 0; c < NR_MM_COUNTERS; c++)
    add_mm_counter(mm, static_cast<MmCounter>(c), rss[c] - mm->get_mm_counter(static_cast<MmCounter>(c)));
}

// The posting's folio_put_refs(old_folio, nr): one reference per PTE it
// believes it replaced. `held` is how many of the replaced PTEs really mapped
// the old folio. Dropping more would let the model free a folio that is
// still mapped and then corrupt its allocator: the excess is recorded (the
// kernel's use-after-free) and kept.
void put_old_refs(Folio* old_folio, unsigned nr, unsigned held, Mm* mm) {
  if (held < nr)
    mm->kernel->vm_warn(fmt::format(
        "rfc: wp_page_copy drops {} references of the old folio for {} PTEs, {} of which mapped it: the kernel's "
        "refcount underflows and the folio is freed while still mapped\n{}",
        nr, nr, held, dump_folio(old_folio)));
  if (held) folio_put_refs(old_folio, static_cast<int>(held));
}

}  // namespace

vm_fault_t wp_page_copy(VmFault* vmf) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  Page* const old_page = vmf->page;
  Folio* const old_folio = old_page ? page_folio(old_page) : nullptr;

  if (vm_fault_t ret = vmf_anon_prepare(vmf)) {
    if (old_folio) folio_put(old_folio);
    return ret;
  }
  const bool pfn_is_zero = is_zero_pfn(phys, pte_pfn(vmf->orig_pte));
  const std::variant<Folio*, RetryFault> alloc = alloc_wp_folio(vmf, pfn_is_zero);
  // Flaw (d): the reference do_wp_page() took on the old folio is never dropped.
  if (std::holds_alternative<RetryFault>(alloc)) return 0;
  Folio* new_folio = std::get<Folio*>(alloc);
  if (!new_folio) {
    if (old_folio) folio_put(old_folio);
    return VM_FAULT_OOM;
  }
  const unsigned nr = static_cast<unsigned>(folio_nr_pages(new_folio));
  const unsigned new_order = folio_order(new_folio);
  const uint64_t addr = round_down(vmf->address, nr * PAGE_SIZE);
  // Flaw (c): old_page -= (address - addr) >> PAGE_SHIFT. As a pfn, so that
  // the model never forms a pointer outside its memmap.
  const long old_pfn = old_page ? static_cast<long>(phys->page_to_pfn(old_page)) -
                                      static_cast<long>((vmf->address - addr) >> PAGE_SHIFT)
                                : -1;
  if (!pfn_is_zero) {
    const int err =
        nr == 1  // __wp_page_copy_user: the page, or the user address without one
            ? copy_mc_user_highpage(phys, phys->page_address(&new_folio->page), phys->pfn_address(pte_pfn(vmf->orig_pte)))
            : copy_user_large_folio(new_folio, old_folio, old_pfn - static_cast<long>(folio_pfn(old_folio)), mm);
    if (err) {  // a machine check is not retried
      folio_put(new_folio);
      if (old_folio) folio_put(old_folio);
      return VM_FAULT_HWPOISON;
    }
    count_wp_copy_bytes(mm, new_folio, nr);
  }
  folio_set_uptodate(new_folio);

  wp_copy_before_revalidate(mm);
  bool copied = false;
  unsigned held = 0;             // replaced PTEs that mapped the old folio
  std::vector<Page*> mapped;     // the old folio's pages they mapped
  std::vector<Folio*> lost;      // other folios whose entries the range lost
  vmf->pte = pte_offset_map_lock(mm, vmf->pmd, addr, &vmf->ptl);
  if (vmf->pte) {
    vmf->ptl->assert_held();
    // Flaw (b): for nr > 1 the re-check is pte_range_readonly() again, with
    // no pte_same() on the faulting entry or any other.
    const bool unchanged = nr == 1 ? ptep_get(vmf->pte) == vmf->orig_pte : pte_range_readonly(vmf->pte, nr);
    if (unchanged) {
      if (old_folio) {
        if (!folio_test_anon(old_folio)) {
          add_mm_counter(mm, mm_counter_file(old_folio), -static_cast<long>(nr));
          add_mm_counter(mm, MM_ANONPAGES, nr);
        }
      } else {
        inc_mm_counter(mm, MM_ANONPAGES);
      }
      // ptep_clear_flush_range (patch 2/7): clear every entry, whatever it is
      // (flaw (a): swap entries and other folios' pages lose their entries;
      // lose_entry), one flush if any was accessible.
      bool accessible = false;
      for (unsigned i = 0; i < nr; i++) {
        const pte_t old = ptep_get(vmf->pte + i);
        accessible |= pte_present(old);
        Page* p = pte_present(old) && !pte_special(old) && phys->pfn_valid(pte_pfn(old)) ? phys->pfn_to_page(pte_pfn(old)) : nullptr;
        if (old_folio && p && page_folio(p) == old_folio) {
          mapped.push_back(p);
          held++;
        } else if (!pte_none(old) && !(pte_present(old) && is_zero_pfn(phys, pte_pfn(old)))) {
          lose_entry(vmf, vmf->pte + i, addr + i * PAGE_SIZE, &lost);
          continue;
        }
        entry_xchg(vmf->pte + i, pte_t{0});
      }
      if (accessible) flush_tlb_range(vma, addr, addr + nr * PAGE_SIZE);
      // Flaw (e): an unshare gets the large copy too, every entry with the
      // faulting entry's soft-dirty and uffd-wp bits.
      mm->stats->count_mthp(new_order, MthpStat::wp_fault_alloc);
      wp_install_new_folio(vmf, new_folio, vmf->pte, addr, nr);
      // Flaw (f): no PageAnonExclusive and no pin check on the pages replaced.
      if (old_folio) remove_rmap_ptes(old_folio, old_pfn, nr, vma, mapped);
      new_folio = nullptr;
      copied = true;
    }
    vmf->ptl->unlock();
  }
  if (new_folio) folio_put(new_folio);
  for (Folio* f : lost) {  // as the mmu_gather of a zap releases them
    if (folio_test_anon(f)) free_swap_cache(f);
    folio_put(f);
  }
  if (old_folio) {
    if (copied) put_old_refs(old_folio, nr, held, mm);
    folio_put(old_folio);  // the fault's own reference
  }
  if (copied)
    count_wp_copy(vmf, new_order);
  else
    mm->stats->count(Event::fault_retry);
  return 0;
}

}  // namespace rfc

// ============================================================================
// cow.policy fixed: the correction
// ============================================================================

namespace {

// The run a large copy replaces, as read under the PTE lock.
struct WpRun {
  uint64_t addr = 0;  // naturally aligned start
  unsigned order = 0;
  bool zero = false;  // every entry maps the shared zero page: a fill, no copy
  std::array<pte_t, 1u << kCowMaxOrderLimit> snap{};
  unsigned nr() const { return 1u << order; }
  // The sub-run of order `o` around the fault (o <= order).
  void shrink(unsigned o, uint64_t address) {
    uint64_t a = round_down(address, PAGE_SIZE << o);
    std::copy_n(snap.begin() + ((a - addr) >> PAGE_SHIFT), 1u << o, snap.begin());
    addr = a;
    order = o;
  }
};

// The orders a fixed CoW may copy at vmf: page-fault THP orders of the VMA
// (the per-size `enabled` controls and VM_HUGEPAGE/NOHUGEPAGE, never the PMD
// order), naturally aligned inside the VMA, at most the old folio's order
// and cow.max_order; none for an unshare, a userfaultfd-armed VMA, a PFN map
// and an old folio that is not anonymous or may be pinned. No old folio: the
// faulting entry maps the shared zero page, or nothing may be copied.
uint64_t wp_copy_orders(VmFault* vmf, Folio* old_folio) {
  Vma* vma = vmf->vma;
  if ((vmf->flags & FAULT_FLAG_UNSHARE) || userfaultfd_armed(vma) || (vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP)))
    return 0;
  unsigned cap = vma->vm_mm->kernel->settings.cow_max_order.load(std::memory_order_relaxed);
  if (!old_folio) {
    if (vmf->page || !is_zero_pfn(vma->vm_mm->phys, pte_pfn(vmf->orig_pte))) return 0;
  } else {
    // The model has no KSM: an anonymous folio is never a KSM folio.
    if (!folio_test_anon(old_folio) || folio_maybe_dma_pinned(old_folio)) return 0;
    cap = std::min(cap, folio_order(old_folio));
  }
  uint64_t orders = thp_vma_allowable_orders(vma, vma->vm_flags, TvaType::kPagefault, BIT(PMD_ORDER) - 1);
  orders = thp_vma_suitable_orders(vma, vmf->address, orders);
  return orders & (BIT(cap + 1) - 1);
}

// Whether the PTEs from pte (nr of them, at addr) may be replaced by one new
// folio, under the PTE lock: every one present, read-only, without uffd-wp,
// and either the shared zero page (no old_folio) or the consecutive pages of
// the old folio with equal write and soft-dirty bits (folio_pte_batch), none
// of them PageAnonExclusive; the faulting entry still vmf->orig_pte.
bool wp_run_replaceable(VmFault* vmf, Folio* old_folio, pte_t* pte, uint64_t addr, unsigned nr) {
  PhysMem* phys = vmf->mm()->phys;
  table_page_of(phys, pte)->pt.ptl.assert_held();
  if (!(ptep_get(pte + ((vmf->address - addr) >> PAGE_SHIFT)) == vmf->orig_pte)) return false;
  pte_t first = ptep_get(pte);
  if (!pte_present(first) || pte_write(first) || pte_uffd_wp(first)) return false;
  if (!old_folio) {
    for (unsigned i = 0; i < nr; i++) {
      pte_t e = ptep_get(pte + i);
      if (!pte_present(e) || !is_zero_pfn(phys, pte_pfn(e)) || pte_write(e) || pte_uffd_wp(e) ||
          pte_soft_dirty(e) != pte_soft_dirty(first))
        return false;
    }
    return true;
  }
  Page* page = vm_normal_page(vmf->vma, addr, first);
  if (!page || page_folio(page) != old_folio) return false;
  pte_t batch = first;
  if (folio_pte_batch_flags(old_folio, vmf->vma, pte, &batch, nr, FPB_RESPECT_WRITE | FPB_RESPECT_SOFT_DIRTY) != nr)
    return false;
  for (unsigned i = 0; i < nr; i++)
    if (PageAnonExclusive(page + i)) return false;
  return true;
}

// Under the PTE lock: the largest allowed order whose aligned range around
// the fault is replaceable, its entries snapshotted into *run. AnonExclusive
// pages (and everything else that disqualifies a range) shrink the run to the
// largest aligned sub-range around the fault without them. false: none.
bool wp_run_snapshot(VmFault* vmf, Folio* old_folio, uint64_t orders, WpRun* run) {
  Mm* mm = vmf->mm();
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, vmf->pmd, vmf->address, &ptl);
  if (!pte) return false;
  ptl->assert_held();
  pte_t* table = pte - pte_index(vmf->address);
  bool found = false;
  for (unsigned order = highest_order(orders); orders && !found; order = next_order(&orders, order)) {
    const uint64_t addr = round_down(vmf->address, PAGE_SIZE << order);
    if (!wp_run_replaceable(vmf, old_folio, table + pte_index(addr), addr, 1u << order)) continue;
    run->addr = addr;
    run->order = order;
    run->zero = !old_folio;
    for (unsigned i = 0; i < run->nr(); i++) run->snap[i] = ptep_get(table + pte_index(addr) + i);
    found = true;
  }
  ptl->unlock();
  return found;
}

// A folio of the run's order or, after an allocation or charge failure
// (counted), of the next allowed order, shrinking the run; never direct
// reclaim or compaction, whatever transparent_hugepage/defrag says. nullptr:
// no large folio, the order-0 path takes over.
Folio* wp_alloc_run_folio(VmFault* vmf, uint64_t orders, WpRun* run) {
  Mm* mm = vmf->mm();
  orders &= BIT(run->order + 1) - 1;
  for (unsigned order = run->order; orders; order = next_order(&orders, order)) {
    if (!(orders & BIT(order))) continue;
    Folio* folio = vma_alloc_folio(GFP_TRANSHUGE_LIGHT, order, vmf->vma);
    if (folio && !mem_cgroup_charge(folio, mm->phys)) {
      run->shrink(order, vmf->address);
      return folio;
    }
    if (folio) {
      mm->stats->count_mthp(order, MthpStat::wp_fault_fallback_charge);
      folio_put(folio);
    }
    mm->stats->count_mthp(order, MthpStat::wp_fault_fallback);
  }
  return nullptr;
}

// The old pages, one per snapshotted PTE (indexed per PTE, never by assuming
// where the old folio starts), or zeroes for a zero-page run. 0, or
// -EHWPOISON when a page's copy_mc_user_highpage meets a machine check.
int wp_copy_run(VmFault* vmf, Folio* new_folio, const WpRun& run) {
  Mm* mm = vmf->mm();
  PhysMem* phys = mm->phys;
  if (run.zero) {
    folio_zero_user(new_folio, vmf->address, run.addr, mm->stats);
    return 0;
  }
  for (unsigned i = 0; i < run.nr(); i++)
    if (copy_mc_user_highpage(phys, phys->page_address(folio_page(new_folio, i)), phys->pfn_address(pte_pfn(run.snap[i]))))
      return -EHWPOISON;
  count_wp_copy_bytes(mm, new_folio, run.nr());
  return 0;
}

// Under the PTE lock: every entry as snapshotted, but for the accessed bit,
// which hardware sets on read-only entries.
bool wp_run_unchanged(const pte_t* pte, const WpRun& run) {
  for (unsigned i = 0; i < run.nr(); i++)
    if ((ptep_get(pte + i).v & ~_PAGE_ACCESSED) != (run.snap[i].v & ~_PAGE_ACCESSED)) return false;
  return true;
}

}  // namespace

bool wp_page_copy_large(VmFault* vmf, vm_fault_t* ret) {
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  PhysMem* phys = mm->phys;
  Folio* old_folio = vmf->page ? page_folio(vmf->page) : nullptr;
  const uint64_t orders = wp_copy_orders(vmf, old_folio);
  if (!orders) return false;
  if (vm_fault_t r = vmf_anon_prepare(vmf)) {
    if (old_folio) folio_put(old_folio);
    *ret = r;
    return true;
  }
  WpRun run;
  if (!wp_run_snapshot(vmf, old_folio, orders, &run)) return false;
  Folio* new_folio = wp_alloc_run_folio(vmf, orders, &run);
  if (!new_folio) return false;
  const unsigned nr = run.nr();
  if (wp_copy_run(vmf, new_folio, run)) {
    // As the kernel's copies of large folios (hugetlb_wp, the posting's
    // wp_page_copy): a machine check is VM_FAULT_HWPOISON, and the fault is
    // not retried, at this order or a smaller one.
    folio_put(new_folio);
    if (old_folio) folio_put(old_folio);
    *ret = VM_FAULT_HWPOISON;
    return true;
  }
  folio_set_uptodate(new_folio);

  *ret = 0;
  wp_copy_before_revalidate(mm);
  // Raced with another fault, a zap, reclaim or a fork: back out, refault.
  auto back_out = [&] {
    folio_put(new_folio);
    if (old_folio) folio_put(old_folio);
    mm->stats->count(Event::fault_retry);
    return true;
  };
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, vmf->pmd, run.addr, &ptl);
  if (!pte) return back_out();
  ptl->assert_held();
  if (!wp_run_unchanged(pte, run)) {
    ptl->unlock();
    return back_out();
  }
  if (run.zero) add_mm_counter(mm, MM_ANONPAGES, nr);  // zero-page entries are not rss
  clear_flush_ptes(vma, run.addr, pte, nr);            // one clear and one flush for the run
  mm->stats->count_mthp(run.order, MthpStat::wp_fault_alloc);
  wp_install_new_folio(vmf, new_folio, pte, run.addr, nr);
  if (old_folio) {
    // The verified run only: nr consecutive pages of the old folio. The
    // folio may now be queued for deferred split, as __folio_remove_rmap
    // decides under CONFIG_PAGE_MAPCOUNT. Never its last reference: the
    // fault holds one.
    folio_remove_rmap_ptes(old_folio, phys->pfn_to_page(pte_pfn(run.snap[0])), static_cast<int>(nr), vma);
    folio_put_refs(old_folio, static_cast<int>(nr));
  }
  ptl->unlock();
  if (old_folio) {
    free_swap_cache(old_folio);  // as the order-0 copy does
    folio_put(old_folio);
  }
  count_wp_copy(vmf, run.order);
  return true;
}

// ============================================================================
// cow.reuse whole
// ============================================================================

namespace {

// The PTE at a (within the table of vmf->pte) maps page `idx` of folio,
// present, read-only and without uffd-wp.
bool pte_in_reuse_run(VmFault* vmf, Folio* folio, uint64_t a, long idx) {
  if (idx < 0 || idx >= folio_nr_pages(folio)) return false;
  pte_t e = ptep_get(vmf->pte + ((static_cast<int64_t>(a) - static_cast<int64_t>(vmf->address)) >> PAGE_SHIFT));
  return pte_present(e) && !pte_special(e) && !pte_write(e) && !pte_uffd_wp(e) &&
         pte_pfn(e) == folio_pfn(folio) + static_cast<pfn_t>(idx);
}

}  // namespace

bool wp_page_reuse_run(VmFault* vmf, Folio* folio) {
  vmf->ptl->assert_held();
  Vma* vma = vmf->vma;
  Mm* mm = vma->vm_mm;
  if (!folio_test_large(folio) || !(vma->vm_flags & VM_WRITE) || vma_soft_dirty_enabled(vma)) return false;
  // Mapped by this mm alone, and every reference is one of its mappings: no
  // pin, no GUP reference, no swap cache.
  const int mapcount = folio_large_mapcount(folio);
  if (folio_maybe_mapped_shared(folio) || folio_mm_id_mapcount(folio, mm->mm_id) != mapcount ||
      folio_ref_count(folio) != mapcount)
    return false;
  // The run: consecutive entries around the fault, inside the VMA and the
  // page table, mapping consecutive pages of the folio.
  const long idx = folio_page_idx(folio, vmf->page);
  const uint64_t lo = std::max(vma->vm_start, vmf->address & PMD_MASK);
  const uint64_t hi = std::min(vma->vm_end, (vmf->address & PMD_MASK) + PMD_SIZE);
  uint64_t start = vmf->address, end = vmf->address + PAGE_SIZE;
  while (start > lo && pte_in_reuse_run(vmf, folio, start - PAGE_SIZE, idx - static_cast<long>((vmf->address - start) >> PAGE_SHIFT) - 1))
    start -= PAGE_SIZE;
  while (end < hi && pte_in_reuse_run(vmf, folio, end, idx + static_cast<long>((end - vmf->address) >> PAGE_SHIFT)))
    end += PAGE_SIZE;
  if (end - start == PAGE_SIZE) return false;
  pte_t* first = vmf->pte - ((vmf->address - start) >> PAGE_SHIFT);
  const unsigned nr = static_cast<unsigned>((end - start) >> PAGE_SHIFT);
  Page* first_page = vmf->page - ((vmf->address - start) >> PAGE_SHIFT);
  for (unsigned i = 0; i < nr; i++) {
    SetPageAnonExclusive(first_page + i);
    pte_t e = ptep_get(first + i);
    // The faulting entry as wp_page_reuse() makes it; the others only writable.
    entry_set(first + i, first + i == vmf->pte ? maybe_mkwrite(pte_mkdirty(pte_mkyoung(e)), vma) : pte_mkwrite_novma(e));
  }
  mm->stats->count(VmStat::pgreuse);
  mm->stats->count(Event::fault_wp_reuse);
  mm->stats->count_order(folio_order(folio), OrderStat::reuse);
  mm->stats->count(Event::cow_reuse_pages, nr);
  return true;
}

}  // namespace mmlab
