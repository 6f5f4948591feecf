// The GUP slow path (mm/gup.c) in every posting of the batching series.
//
// `tune gup.walk` selects the posting at the points where they differ:
//   v6.5     before gup-unify-hugetlb-speed-up-thp: with a pages array, a
//            PMD-mapped THP is walked one subpage per follow_page_mask() call.
//   legacy   v6.18: one page per follow_page_mask() call; a huge leaf reports
//            its page_mask and __get_user_pages() grabs the rest with a second
//            try_grab_folio().
//   walk     gup-batch-follow-page-mask v5, patches 1-7: follow_page_pte()
//            walks to the end of the page table, the VMA or the request under
//            one PTE lock; huge leaves report their full count (patch 6).
//   batch    v5 patches 1-8: gup_pte_batch_len() commits a same-folio run
//            with one try_grab_folio(); read-only runs under FOLL_WRITE or
//            FOLL_PIN stay one page at a time, as posted.
//   batch-ro ours, answering the review of patch 8: read-only FOLL_PIN runs
//            are batched too; the run ends at the first page that would need
//            unsharing, so what is pinned and when an unshare fault happens
//            do not change.
// The helper names (gup_fill_pages, gup_flush_pages, gup_grab_folio_pages,
// gup_lookup_pte, gup_pte_batch_len) are the v5 posting's.
#include "gup/gup.h"
#include "mm/variants.h"

#include <algorithm>
#include <vector>

#include "fault/fault.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/migrate.h"
#include "mm/mm.h"
#include "mm/debug.h"
#include "pgtable/pgtable.h"
#include "sync/sched.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

// vm_fault_to_errno (include/linux/mm.h): the errno GUP returns for a
// failed fault.
int vm_fault_to_errno(vm_fault_t ret, unsigned foll_flags) {
  if (ret & VM_FAULT_OOM) return -ENOMEM;
  if (ret & (VM_FAULT_HWPOISON | VM_FAULT_HWPOISON_LARGE)) return (foll_flags & FOLL_HWPOISON) ? -EHWPOISON : -EFAULT;
  if (ret & (VM_FAULT_SIGBUS | VM_FAULT_SIGSEGV)) return -EFAULT;
  return 0;
}

Stats* stats_of(const Vma* vma) { return vma->vm_mm->stats; }
bool walks_many(GupWalk w) { return w == GupWalk::kWalk || w == GupWalk::kBatch || w == GupWalk::kBatchRo; }

bool is_zero_folio(const Folio* f) { return PhysMem::of(&f->page)->zero_page() == &f->page; }

}  // namespace

// ---- references and pins ----

void gup_pin_referenced_folio(Folio* folio, int refs, Stats* stats) {
  if (folio_has_pincount(folio)) {
    sched::point("gup_pin_referenced_folio", sched::Op::kRmw, {folio, sched::ObjKind::kPincount, sched::kByAddress});
    aref(folio_page(folio, 1)->f1.pincount).fetch_add(refs, std::memory_order_acq_rel);
  } else
    folio_ref_add(folio, refs * (GUP_PIN_COUNTING_BIAS - 1));
  stats->count(VmStat::nr_foll_pin_acquired, static_cast<uint64_t>(refs));
}

int try_grab_folio(Folio* folio, int refs, unsigned flags) {
  if (folio_ref_count(folio) <= 0) return -ENOMEM;  // WARN_ON_ONCE in the kernel
  if (flags & FOLL_GET) {
    folio_ref_add(folio, refs);
  } else if (flags & FOLL_PIN) {
    // The shared zero page is never accounted: unpinning it is a no-op too.
    if (is_zero_folio(folio)) return 0;
    folio_ref_add(folio, refs);
    gup_pin_referenced_folio(folio, refs, kernel_of(&folio->page)->stats.get());
  }
  return 0;
}

void gup_put_folio(Folio* folio, int refs, unsigned flags) {
  if (flags & FOLL_PIN) {
    if (is_zero_folio(folio)) return;
    kernel_of(&folio->page)->stats->count(VmStat::nr_foll_pin_released, static_cast<uint64_t>(refs));
    if (folio_has_pincount(folio)) {
      sched::point("gup_put_folio", sched::Op::kRmw, {folio, sched::ObjKind::kPincount, sched::kByAddress});
      int left = aref(folio_page(folio, 1)->f1.pincount).fetch_sub(refs, std::memory_order_acq_rel) - refs;
      VM_WARN_ON_ONCE_FOLIO(left < 0, folio, "pincount underflow");
    } else {
      refs *= GUP_PIN_COUNTING_BIAS;
    }
  }
  folio_put_refs(folio, refs);
}

void put_page(Page* page) { folio_put(page_folio(page)); }
void unpin_user_page(Page* page) { gup_put_folio(page_folio(page), 1, FOLL_PIN); }

// Consecutive entries of one folio are released together (gup_folio_next).
void unpin_user_pages(Page** pages, long npages) {
  if (npages <= 0) return;  // an error value: WARN in the kernel
  for (long i = 0; i < npages;) {
    if (!pages[i]) {
      i++;
      continue;
    }
    Folio* folio = page_folio(pages[i]);
    long nr = 1;
    while (i + nr < npages && pages[i + nr] && page_folio(pages[i + nr]) == folio) nr++;
    gup_put_folio(folio, static_cast<int>(nr), FOLL_PIN);
    i += nr;
  }
}

void unpin_user_pages_dirty_lock(Page** pages, long npages, bool make_dirty) {
  if (!make_dirty) {
    unpin_user_pages(pages, npages);
    return;
  }
  for (long i = 0; i < npages;) {
    Folio* folio = page_folio(pages[i]);
    long nr = 1;
    while (i + nr < npages && page_folio(pages[i + nr]) == folio) nr++;
    if (!folio_test_dirty(folio)) {
      folio_lock(folio);
      folio_set_dirty(folio);
      folio_unlock(folio);
    }
    gup_put_folio(folio, static_cast<int>(nr), FOLL_PIN);
    i += nr;
  }
}

// ---- the rules ----

// gup_must_unshare (mm/internal.h): asked only for a read-only entry.
bool gup_must_unshare(Vma* vma, unsigned flags, Page* page) {
  if ((flags & (FOLL_WRITE | FOLL_PIN)) != FOLL_PIN) return false;
  Folio* folio = page_folio(page);
  if (!folio_test_anon(folio)) {
    if (!(flags & FOLL_LONGTERM)) return false;
    if (!vma) return true;  // GUP-fast: let the slow path decide
    return is_cow_mapping(vma->vm_flags);
  }
  std::atomic_thread_fence(std::memory_order_acquire);  // pairs with folio_try_share_anon_rmap_*
  return !PageAnonExclusive(page);
}

namespace {

// can_follow_write_common: a FOLL_FORCE write into a private read-only
// mapping follows the entry once the CoW made the page exclusive.
bool can_follow_write_common(Page* page, Vma* vma, unsigned flags) {
  if (!(flags & FOLL_FORCE)) return false;
  if (vma->vm_flags & (VM_MAYSHARE | VM_SHARED)) return false;
  if (!(vma->vm_flags & VM_MAYWRITE)) return false;
  if (vma->vm_flags & VM_WRITE) return false;  // a writable VMA just takes a write fault
  return page && folio_test_anon(page_folio(page)) && PageAnonExclusive(page);
}

bool can_follow_write_pte(pte_t pte, Page* page, Vma* vma, unsigned flags) {
  if (pte_write(pte)) return true;
  if (!can_follow_write_common(page, vma, flags)) return false;
  if (pte_needs_soft_dirty_wp(vma, pte)) return false;
  return !pte_uffd_wp(pte);
}

bool can_follow_write_pmd(pmd_t pmd, Page* page, Vma* vma, unsigned flags) {
  if (pmd_write(pmd)) return true;
  if (!can_follow_write_common(page, vma, flags)) return false;
  if (pmd_needs_soft_dirty_wp(vma, pmd)) return false;
  return !pmd_uffd_wp(pmd);
}

bool can_follow_write_pud(pud_t pud, Page* page, Vma* vma, unsigned flags) {
  return pud_write(pud) || can_follow_write_common(page, vma, flags);
}

bool gup_can_follow_protnone(Vma* vma, unsigned flags) {
  if (!(flags & FOLL_HONOR_NUMA_FAULT)) return true;
  return !(vma->vm_flags & VM_ACCESS_FLAGS);  // only inaccessible VMAs
}

// vma_needs_dirty_tracking: a shared mapping of a file system with writeback.
bool vma_needs_dirty_tracking(const Vma* vma) {
  return (vma->vm_flags & VM_SHARED) && vma->vm_file && file_needs_dirty_tracking(vma->vm_file.get());
}

bool writable_file_mapping_allowed(const Vma* vma, unsigned gup_flags) {
  if ((gup_flags & (FOLL_PIN | FOLL_LONGTERM)) != (FOLL_PIN | FOLL_LONGTERM)) return true;
  return !vma_needs_dirty_tracking(vma);
}

int check_vma_flags(Vma* vma, unsigned gup_flags) {
  vm_flags_t vm_flags = vma->vm_flags;
  bool write = gup_flags & FOLL_WRITE;
  bool vma_anon = vma_is_anonymous(vma);
  if (vm_flags & (VM_IO | VM_PFNMAP)) return -EFAULT;
  if ((gup_flags & FOLL_ANON) && !vma_anon) return -EFAULT;
  if ((gup_flags & FOLL_SPLIT_PMD) && is_vm_hugetlb_page(vma)) return -EOPNOTSUPP;
  if (write) {
    if (!vma_anon && !writable_file_mapping_allowed(vma, gup_flags)) return -EFAULT;
    if (!(vm_flags & VM_WRITE)) {
      if (!(gup_flags & FOLL_FORCE)) return -EFAULT;
      if (!is_cow_mapping(vm_flags)) return -EFAULT;  // FOLL_FORCE writes only in CoW mappings
    }
  } else if (!(vm_flags & VM_READ)) {
    if (!(gup_flags & FOLL_FORCE)) return -EFAULT;
    if (!(vm_flags & VM_MAYREAD)) return -EFAULT;
  }
  return 0;
}

// no_page_table: with FOLL_DUMP, a hole where the kernel would have faulted
// in anonymous or unbacked memory.
long no_page_table(Vma* vma, unsigned flags, uint64_t address) {
  if (!(flags & FOLL_DUMP)) return 0;
  if (is_vm_hugetlb_page(vma)) {
    File* f = vma->vm_file.get();
    if (!f || (vma->vm_flags & VM_MAYSHARE) == 0) return -EFAULT;  // private: the page cache has no page
    uint64_t idx = round_down(linear_page_index(vma, address), 1ull << f->hugetlb_order);
    MutexGuard g(&f->lock);
    return f->pages.count(idx) ? 0 : -EFAULT;
  }
  if (vma_is_anonymous(vma)) return -EFAULT;
  return 0;  // a file mapping: fault it in
}

// ---- the v5 helpers ----

// gup_fill_pages (patch 1): store nr consecutive subpages and flush caches.
void gup_fill_pages(Vma* vma, Page* page, long nr, Page** pages) {
  if (!pages) return;
  for (long i = 0; i < nr; i++) pages[i] = page + i;  // flush_anon_page/flush_dcache_page: no-ops on x86
  stats_of(vma)->count(Event::gup_cache_flush, static_cast<uint64_t>(nr));
}

// gup_flush_pages (patch 3): the flushes for pages already stored, after the PTL is dropped.
void gup_flush_pages(Vma* vma, Page** pages, long nr) {
  if (!pages) return;
  stats_of(vma)->count(Event::gup_cache_flush, static_cast<uint64_t>(nr));
}

int counted_grab(Vma* vma, Folio* folio, int refs, unsigned flags) {
  stats_of(vma)->count(Event::gup_grab);
  // Without FOLL_GET or FOLL_PIN try_grab_folio() touches no counter: the
  // cost model prices only the grabs that do (a populate walk has none).
  if (flags & (FOLL_GET | FOLL_PIN)) stats_of(vma)->count(Event::gup_grab_ref);
  return try_grab_folio(folio, refs, flags);
}

void gup_mark_accessed(Vma* vma, Folio* folio) {
  stats_of(vma)->count(Event::gup_mark_accessed);
  folio_mark_accessed(folio);
}

// gup_grab_folio_pages (patch 3, with patch 8's run length): grab nr, make
// accessible for FOLL_PIN, FOLL_TOUCH marking, store the pages under the PTL.
long gup_grab_folio_pages(Vma* vma, Folio* folio, Page* page, long nr, bool dirty, unsigned flags, Page** pages) {
  if (int ret = counted_grab(vma, folio, static_cast<int>(nr), flags)) return ret;
  // FOLL_PIN: arch_make_folio_accessible() always succeeds on x86.
  if (flags & FOLL_TOUCH) {
    if ((flags & FOLL_WRITE) && !dirty && !folio_test_dirty(folio)) folio_set_dirty(folio);
    gup_mark_accessed(vma, folio);
  }
  if (pages)
    for (long i = 0; i < nr; i++) pages[i] = page + i;
  return 0;
}

// follow_pfn_pte: a PFN map without struct pages.
long follow_pfn_pte(Vma*, uint64_t, pte_t*, unsigned flags) {
  if (flags & FOLL_GET) return -EFAULT;
  return -EEXIST;
}

// gup_lookup_pte (patch 4): resolve one present PTE to its page. Returns 0
// with *pagep == nullptr when the caller should fault, or a negative errno.
long gup_lookup_pte(Vma* vma, uint64_t address, pte_t* ptep, pte_t pte, unsigned flags, Page** pagep) {
  PhysMem* phys = vma->vm_mm->phys;
  *pagep = nullptr;
  if (!pte_present(pte)) return 0;
  if (pte_protnone(pte) && !gup_can_follow_protnone(vma, flags)) return 0;
  Page* page = vm_normal_page(vma, address, pte);
  if ((flags & FOLL_WRITE) && !can_follow_write_pte(pte, page, vma, flags)) return 0;
  if (!page) {
    if (flags & FOLL_DUMP) return -EFAULT;  // the zero page is a hole in a core dump
    if (!phys->is_zero_pfn(pte_pfn(pte))) return follow_pfn_pte(vma, address, ptep, flags);
    page = phys->pfn_to_page(pte_pfn(pte));
  }
  if (!pte_write(pte) && gup_must_unshare(vma, flags, page)) return -EMLINK;
  *pagep = page;
  return 0;
}

// gup_pte_batch_len (patch 8), and batch-ro's extension of it.
long gup_pte_batch_len(Vma* vma, uint64_t address, uint64_t walk_end, Folio* folio, pte_t* ptep, pte_t* batch_pte,
                       unsigned flags, GupWalk w) {
  if (!folio_test_large(folio)) return 1;
  bool ro = !pte_write(*batch_pte);
  bool ro_pin = ro && (flags & FOLL_PIN) && !(flags & FOLL_WRITE);
  if (ro && (flags & (FOLL_WRITE | FOLL_PIN)) && !(w == GupWalk::kBatchRo && ro_pin)) return 1;
  long max = static_cast<long>((walk_end - address) >> PAGE_SHIFT);
  if (max <= 1) return 1;
  long n = folio_pte_batch_flags(folio, vma, ptep, batch_pte, static_cast<unsigned>(max),
                                 FPB_RESPECT_WRITE | FPB_MERGE_YOUNG_DIRTY);
  if (ro_pin) {
    // End the run before the first page an R/O pin would have to unshare:
    // that page gets its own lookup, -EMLINK and unshare fault, as before.
    Page* first = vma->vm_mm->phys->pfn_to_page(pte_pfn(*batch_pte));
    for (long i = 1; i < n; i++)
      if (gup_must_unshare(vma, flags, first + i)) return i;
  }
  return n;
}

// ---- follow_page_mask and the level walkers ----
//
// Returns the number of pages stored in pages[] (or walked, when pages is
// null), 0 for "no mapping, fault it", or -errno (-EMLINK: unshare). The
// legacy and v6.5 forms return at most 1 and report a huge leaf's extent
// through *page_mask.

struct FollowCtx {
  Vma* vma;
  uint64_t end;             // walk/batch: end of the request
  unsigned flags;
  Page** pages;             // may be null
  unsigned long* page_mask;  // legacy, v6.5
  GupWalk walk;
};

long follow_page_pte(FollowCtx& c, uint64_t address, pmd_t* pmd) {
  Vma* vma = c.vma;
  Mm* mm = vma->vm_mm;
  SpinLock* ptl;
  pte_t* ptep = pte_offset_map_lock(mm, pmd, address, &ptl);
  if (!ptep) return no_page_table(vma, c.flags, address);
  ptl->assert_held();
  stats_of(vma)->count(Event::gup_pte_lock);
  uint64_t walk_end = walks_many(c.walk) ? std::min(pmd_addr_end(address, c.end), vma->vm_end) : address + PAGE_SIZE;
  bool need_no_page_table = false;
  long nr = 0, ret = 0;
  uint64_t base = address, fail_addr = address;
  for (; address < walk_end; address += PAGE_SIZE, ptep++) {
    pte_t pte = ptep_get(ptep);
    Page* page;
    ret = gup_lookup_pte(vma, address, ptep, pte, c.flags, &page);
    if (ret || !page) {
      // no_page_table() may consult the page cache: not under the PTE lock.
      if (!ret && pte_none(pte)) need_no_page_table = true;
      fail_addr = address;
      break;
    }
    Folio* folio = page_folio(page);
    pte_t batch_pte = pte;
    long batch = 1;
    if (c.walk == GupWalk::kBatch || c.walk == GupWalk::kBatchRo)
      batch = gup_pte_batch_len(vma, address, walk_end, folio, ptep, &batch_pte, c.flags, c.walk);
    ret = gup_grab_folio_pages(vma, folio, page, batch, pte_dirty(batch_pte), c.flags, c.pages ? c.pages + nr : nullptr);
    if (ret) break;
    nr += batch;
    ptep += batch - 1;
    address += (batch - 1) * PAGE_SIZE;
  }
  ptl->unlock();
  if (nr) {
    gup_flush_pages(vma, c.pages, nr);
    return nr;  // a failure after the first PTE is a short read
  }
  (void)base;
  if (need_no_page_table) return no_page_table(vma, c.flags, fail_addr);
  return ret;
}

// follow_huge_pmd (PMD lock held): THP and hugetlb PMD leaves alike.
long follow_huge_pmd(FollowCtx& c, uint64_t addr, pmd_t* pmd, Page** headp, long* nrp) {
  Vma* vma = c.vma;
  pmd_lockptr(vma->vm_mm, pmd)->assert_held();
  PhysMem* phys = vma->vm_mm->phys;
  pmd_t pmdval = pmdp_get(pmd);
  Page* head = phys->pfn_to_page(pmd_pfn(pmdval));
  bool huge_zero = phys->is_huge_zero_pfn(pmd_pfn(pmdval));
  if ((c.flags & FOLL_WRITE) && !can_follow_write_pmd(pmdval, huge_zero ? nullptr : head, vma, c.flags)) return 0;
  if ((c.flags & FOLL_DUMP) && huge_zero) return -EFAULT;
  if (pmd_protnone(pmdval) && !gup_can_follow_protnone(vma, c.flags)) return 0;
  if (!pmd_write(pmdval) && gup_must_unshare(vma, c.flags, head)) return -EMLINK;
  Folio* folio = page_folio(head);
  long off = static_cast<long>((addr & ~PMD_MASK) >> PAGE_SHIFT);
  long nr = 1;
  if (walks_many(c.walk)) nr = std::min<long>(HPAGE_PMD_NR - off, static_cast<long>((c.end - addr) >> PAGE_SHIFT));
  if (int ret = counted_grab(vma, folio, static_cast<int>(nr), c.flags)) return ret;
  if (!folio_test_hugetlb(folio) && (c.flags & FOLL_TOUCH)) {
    // touch_pmd: the PMD's young (and dirty) bits; the folio flags stay.
    pmd_t e = pmd_mkyoung(pmdval);
    if (c.flags & FOLL_WRITE) e = pmd_mkdirty(e);
    if (!(e == pmdval)) entry_set(pmd, e);
  }
  if (!walks_many(c.walk)) {
    bool v65_thp = c.walk == GupWalk::kV65 && c.pages && !folio_test_hugetlb(folio);
    *c.page_mask = v65_thp ? 0 : HPAGE_PMD_NR - 1;
  }
  *headp = head + off;
  *nrp = nr;
  return nr;
}

long follow_huge_pud(FollowCtx& c, uint64_t addr, pud_t* pud, Page** headp, long* nrp) {
  Vma* vma = c.vma;
  PhysMem* phys = vma->vm_mm->phys;
  pud_t pudval = pudp_get(pud);
  if (!pud_present(pudval)) return 0;
  Page* head = phys->pfn_to_page(pud_pfn(pudval));
  if ((c.flags & FOLL_WRITE) && !can_follow_write_pud(pudval, head, vma, c.flags)) return 0;
  if (!pud_write(pudval) && gup_must_unshare(vma, c.flags, head)) return -EMLINK;
  long off = static_cast<long>((addr & ~PUD_MASK) >> PAGE_SHIFT);
  long nr = 1;
  if (walks_many(c.walk)) nr = std::min<long>(HPAGE_PUD_NR - off, static_cast<long>((c.end - addr) >> PAGE_SHIFT));
  if (int ret = counted_grab(vma, page_folio(head), static_cast<int>(nr), c.flags)) return ret;
  if (!walks_many(c.walk)) *c.page_mask = HPAGE_PUD_NR - 1;
  *headp = head + off;
  *nrp = nr;
  return nr;
}

long follow_pmd_mask(FollowCtx& c, uint64_t address, pud_t pudval) {
  Vma* vma = c.vma;
  Mm* mm = vma->vm_mm;
  pmd_t* pmd = pmd_offset(mm->phys, pudval, address);
  pmd_t pmdval = pmdp_get(pmd);
  if (pmd_none(pmdval) || !pmd_present(pmdval)) return no_page_table(vma, c.flags, address);
  if (!pmd_leaf(pmdval)) return follow_page_pte(c, address, pmd);
  if (pmd_protnone(pmdval) && !gup_can_follow_protnone(vma, c.flags)) return no_page_table(vma, c.flags, address);
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  stats_of(vma)->count(Event::gup_pmd_lock);
  pmdval = pmdp_get(pmd);
  if (!(pmdval.v & _PAGE_PRESENT) && !pmd_protnone(pmdval)) {
    ptl->unlock();
    return no_page_table(vma, c.flags, address);
  }
  if (!pmd_leaf(pmdval)) {
    ptl->unlock();
    return follow_page_pte(c, address, pmd);
  }
  if (!is_vm_hugetlb_page(vma) && (c.flags & FOLL_SPLIT_PMD)) {
    ptl->unlock();
    split_huge_pmd(vma, pmd, address);
    return pte_alloc(mm, pmd) ? follow_page_pte(c, address, pmd) : -ENOMEM;
  }
  Page* page = nullptr;
  long nr = 0;
  long ret = follow_huge_pmd(c, address, pmd, &page, &nr);
  ptl->unlock();
  if (ret > 0) gup_fill_pages(vma, page, nr, c.pages);  // after the unlock (patch 5)
  return ret;
}

long follow_pud_mask(FollowCtx& c, uint64_t address, pgd_t pgdval) {
  Vma* vma = c.vma;
  Mm* mm = vma->vm_mm;
  pud_t* pud = pud_offset(mm->phys, pgdval, address);
  pud_t pudval = pudp_get(pud);
  if (!pud_present(pudval)) return no_page_table(vma, c.flags, address);
  if (pud_leaf(pudval)) {
    SpinLock* ptl = pud_lock(mm, pud);
    ptl->assert_held();
    stats_of(vma)->count(Event::gup_pmd_lock);
    Page* page = nullptr;
    long nr = 0;
    long ret = follow_huge_pud(c, address, pud, &page, &nr);
    ptl->unlock();
    if (ret > 0) gup_fill_pages(vma, page, nr, c.pages);
    if (ret) return ret;
    return no_page_table(vma, c.flags, address);
  }
  return follow_pmd_mask(c, address, pudval);
}

long follow_page_mask(FollowCtx& c, uint64_t address) {
  Vma* vma = c.vma;
  stats_of(vma)->count(Event::gup_descents);
  if (c.page_mask) *c.page_mask = 0;
  // vma_pgtable_walk_begin: the hugetlb VMA lock is not modelled (no PMD sharing).
  pgd_t pgdval = pgdp_get(pgd_offset(vma->vm_mm, address));
  if (!pgd_present(pgdval)) return no_page_table(vma, c.flags, address);
  return follow_pud_mask(c, address, pgdval);  // P4D is folded
}

// faultin_page: returns 0 (re-follow), -EBUSY/-EAGAIN (the lock was dropped), or an error.
int faultin_page(Vma* vma, uint64_t address, unsigned flags, bool unshare, int* locked) {
  if (flags & FOLL_NOFAULT) return -EFAULT;
  fault_flags_t ff = 0;
  if (flags & FOLL_WRITE) ff |= FAULT_FLAG_WRITE;
  if (flags & FOLL_REMOTE) ff |= FAULT_FLAG_REMOTE;
  if (flags & FOLL_UNLOCKABLE) ff |= FAULT_FLAG_ALLOW_RETRY | FAULT_FLAG_KILLABLE;
  if (flags & FOLL_NOWAIT) ff |= FAULT_FLAG_ALLOW_RETRY | FAULT_FLAG_RETRY_NOWAIT;
  if (flags & FOLL_TRIED) ff |= FAULT_FLAG_TRIED;
  if (unshare) {
    ff |= FAULT_FLAG_UNSHARE;
    VM_BUG_ON(ff & FAULT_FLAG_WRITE, "unshare fault with FOLL_WRITE");
    MM_TRACE("gup_unshare", "address={:#x} gup_flags={:#x}", address, flags);
  }
  vm_fault_t ret = handle_mm_fault(vma, address, ff);
  if (ret & VM_FAULT_COMPLETED) {
    *locked = 0;
    return -EAGAIN;
  }
  if (ret & VM_FAULT_ERROR) return vm_fault_to_errno(ret, flags);
  if (ret & VM_FAULT_RETRY) {
    if (!(ff & FAULT_FLAG_RETRY_NOWAIT)) *locked = 0;
    return -EBUSY;
  }
  return 0;
}

// revert.gup-force=drop-write: whether the write fault just taken broke
// CoW, i.e. left a private anonymous copy mapped at address (what the
// fault's VM_FAULT_WRITE told the loop before 19be0eaffa3a; v6.18 has no
// such bit, so the model looks, under the PTL, right after the fault). A
// copy zapped before the fault re-took the PTL (wp_page_copy's window) is
// no copy: the kernel's fault returned 0 then.
bool fault_broke_cow(Vma* vma, uint64_t address) {
  Mm* mm = vma->vm_mm;
  pmd_t* pmd = mm_find_pmd(mm, address);
  if (!pmd) return false;
  SpinLock* ptl;
  pte_t* ptep = pte_offset_map_lock(mm, pmd, address, &ptl);
  if (!ptep) return false;
  ptl->assert_held();
  const pte_t pte = ptep_get(ptep);
  Page* page = pte_present(pte) ? vm_normal_page(vma, address, pte) : nullptr;
  const bool broke = page && folio_test_anon(page_folio(page)) && PageAnonExclusive(page);
  ptl->unlock();
  return broke;
}

// GUP walks under mmap_lock (held by the caller, checked in debug builds).
Vma* gup_vma_lookup(Mm* mm, uint64_t addr) {
  mmap_assert_locked(mm);
  return vma_lookup(mm, addr);
}

// __get_user_pages: the per-call loop over follow_page_mask().
long __get_user_pages(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages, int* locked) {
  if (!nr_pages) return 0;
  start &= PAGE_MASK;
  long i = 0, ret = 0;
  Vma* vma = nullptr;
  GupWalk walk = mm->kernel->settings.gup_walk.load(std::memory_order_relaxed);
  // revert.gup-force=drop-write (before 19be0eaffa3a, the Dirty COW fix):
  // once a write fault has broken CoW in a VMA without VM_WRITE, the page is
  // looked up again as if for a read, trusting that the entry it finds is
  // still the private copy. The kernel did so when the fault returned
  // VM_FAULT_WRITE (fault_broke_cow).
  const bool drop_write = mm->kernel->settings.reverted(Revert::kGupForceDropWrite);
  do {
    unsigned foll_flags = gup_flags;  // per page, as the pre-fix loop had it
    if (!vma || start >= vma->vm_end) {
      vma = gup_vma_lookup(mm, start);
      if (gup_flags & FOLL_MADV_POPULATE) {
        if (!vma) {
          ret = -ENOMEM;
          break;
        }
        if (check_vma_flags(vma, gup_flags)) {
          ret = -EINVAL;
          break;
        }
      } else {
        if (!vma) {  // GUP never expands a stack; no gate area on the model
          ret = -EFAULT;
          break;
        }
        ret = check_vma_flags(vma, gup_flags);
        if (ret) break;
      }
    }
  retry:
    unsigned long page_mask = 0;
    FollowCtx c{vma, start + static_cast<uint64_t>(nr_pages) * PAGE_SIZE, foll_flags, pages ? pages + i : nullptr,
                &page_mask, walk};
    long nr = follow_page_mask(c, start);
    if (nr == 0 || nr == -EMLINK) {
      ret = faultin_page(vma, start, foll_flags, nr == -EMLINK, locked);
      if (ret == 0) {
        if (drop_write && nr == 0 && (foll_flags & FOLL_WRITE) && !(vma->vm_flags & VM_WRITE) &&
            fault_broke_cow(vma, start))
          foll_flags &= ~FOLL_WRITE;
        // Label: the fault is done, mmap_lock still held, the retry's
        // follow_page_mask to come (Dirty COW's window, 19be0eaffa3a).
        sched::point("gup.after_faultin", sched::Op::kLabel, {vma, sched::ObjKind::kVma, vma->cid});
        goto retry;
      }
      if (ret == -EBUSY || ret == -EAGAIN) ret = 0;
      break;
    }
    if (nr == -EEXIST) {
      if (pages) {  // no struct page to hand back
        ret = nr;
        break;
      }
      nr = 1;
    } else if (nr < 0) {
      ret = nr;
      break;
    }
    if (!walks_many(walk)) {
      // legacy/v6.5: one page came back; a huge leaf reports how far it reaches.
      long page_increm = 1 + static_cast<long>(~(start >> PAGE_SHIFT) & page_mask);
      page_increm = std::min(page_increm, nr_pages);
      if (pages && page_increm > 1) {
        Folio* folio = page_folio(pages[i]);
        if (counted_grab(vma, folio, static_cast<int>(page_increm - 1), gup_flags)) {
          gup_put_folio(folio, 1, gup_flags);
          ret = -EFAULT;
          break;
        }
        gup_fill_pages(vma, pages[i] + 1, page_increm - 1, pages + i + 1);
      }
      nr = page_increm;
    }
    VM_BUG_ON(nr > nr_pages, "GUP took more pages than asked for");
    i += nr;
    start += static_cast<uint64_t>(nr) * PAGE_SIZE;
    nr_pages -= nr;
  } while (nr_pages);
  return i ? i : ret;
}

}  // namespace

// __get_user_pages_locked: the mmap_lock state machine. Whether mmap_lock
// is held is the value of *locked (a fault may drop it), which the analysis
// cannot follow.
static long __get_user_pages_locked(Mm* mm, uint64_t start, long nr_pages, Page** pages, int* locked,
                                    unsigned flags) NO_THREAD_SAFETY_ANALYSIS {
  if (!nr_pages) return 0;
  MM_TRACE_SLICE("gup_call", "start={:#x} nr_pages={} gup_flags={:#x}", start, nr_pages, flags);
  bool must_unlock = false;
  if (!*locked) {
    mmap_read_lock(mm);
    must_unlock = true;
    *locked = 1;
  }
  if (flags & FOLL_PIN) mm->set_flag(MMF_HAS_PINNED);
  if (pages && !(flags & FOLL_PIN)) flags |= FOLL_GET;
  long pages_done = 0;
  for (;;) {
    long ret = __get_user_pages(mm, start, nr_pages, flags, pages, locked);
    if (!(flags & FOLL_UNLOCKABLE)) {
      pages_done = ret;
      break;
    }
    if (ret > 0) {
      nr_pages -= ret;
      pages_done += ret;
      if (!nr_pages) break;
    }
    if (*locked) {
      if (!pages_done) pages_done = ret;
      break;
    }
    // A fault dropped mmap_lock: retake it and fault the next page with
    // FOLL_TRIED, as often as the fault drops it again.
    if (pages && ret > 0) pages += ret;
    if (ret > 0) start += static_cast<uint64_t>(ret) * PAGE_SIZE;
    must_unlock = true;
    do {
      mmap_read_lock(mm);
      *locked = 1;
      ret = __get_user_pages(mm, start, 1, flags | FOLL_TRIED, pages, locked);
      VM_BUG_ON(!*locked && ret != 0, "GUP dropped mmap_lock and returned pages");
    } while (!*locked);
    if (ret != 1) {
      if (!pages_done) pages_done = ret;
      break;
    }
    nr_pages--;
    pages_done++;
    if (!nr_pages) break;
    if (pages) pages++;
    start += PAGE_SIZE;
  }
  if (must_unlock && *locked) {
    mmap_read_unlock(mm);
    *locked = 0;
  }
  if (pages_done == 0 && !(flags & FOLL_NOWAIT)) pages_done = -EFAULT;  // WARN in the kernel
  MM_TRACE("gup_return", "start={:#x} ret={}", start, pages_done);
  return pages_done;
}

// ---- FOLL_LONGTERM: migrate what may not be pinned long-term ----

static bool folio_is_longterm_pinnable(const Folio* folio) {
  PhysMem* phys = PhysMem::of(&folio->page);
  if (is_zero_folio(folio)) return true;
  return phys->page_zonenum(&folio->page) != ZONE_MOVABLE;
}

// check_and_migrate_movable_pages: 0 (keep every pin), -EAGAIN (all pins
// dropped and the folios moved: pin again), or -ENOMEM/-EBUSY (nothing held).
static long check_and_migrate_movable_pages(long nr_pages, Page** pages) {
  std::vector<Folio*> movable;
  Folio* prev = nullptr;
  for (long i = 0; i < nr_pages; i++) {  // the per-page pass every long-term pin pays
    Folio* folio = page_folio(pages[i]);
    if (folio == prev) continue;
    prev = folio;
    if (folio_is_longterm_pinnable(folio)) continue;
    if (std::find(movable.begin(), movable.end(), folio) == movable.end()) movable.push_back(folio);
  }
  if (movable.empty()) return 0;
  for (Folio* f : movable) folio_get(f);  // isolation reference
  unpin_user_pages(pages, nr_pages);
  for (long i = 0; i < nr_pages; i++) pages[i] = nullptr;
  long ret = -EAGAIN;
  for (Folio* f : movable) {
    if (ret == -EAGAIN && migrate_longterm_unpinnable_folio(f)) ret = -ENOMEM;
    folio_put(f);
  }
  return ret;
}

long __gup_longterm_locked(Mm* mm, uint64_t start, long nr_pages, Page** pages, int* locked, unsigned gup_flags) {
  if (!(gup_flags & FOLL_LONGTERM)) return __get_user_pages_locked(mm, start, nr_pages, pages, locked, gup_flags);
  long rc, pinned;
  do {
    // memalloc_pin_save(): faults in this scope avoid ZONE_MOVABLE (modelled
    // by migrating afterwards; see docs/NOTES.md).
    pinned = __get_user_pages_locked(mm, start, nr_pages, pages, locked, gup_flags);
    if (pinned <= 0) {
      rc = pinned;
      break;
    }
    rc = check_and_migrate_movable_pages(pinned, pages);
  } while (rc == -EAGAIN);
  return rc ? rc : pinned;
}

// ---- entry points ----

static bool is_valid_gup_args(Page** pages, int* locked, unsigned* gup_flags_p, unsigned to_set) {
  unsigned gup_flags = *gup_flags_p;
  if (gup_flags & INTERNAL_GUP_FLAGS) return false;
  gup_flags |= to_set;
  if (locked) {
    if (*locked != 1) return false;
    gup_flags |= FOLL_UNLOCKABLE;
  }
  if ((gup_flags & (FOLL_PIN | FOLL_GET)) == (FOLL_PIN | FOLL_GET)) return false;
  if ((gup_flags & FOLL_LONGTERM) && !(gup_flags & FOLL_PIN)) return false;
  if (!pages && (gup_flags & (FOLL_PIN | FOLL_GET))) return false;
  if ((gup_flags & FOLL_LONGTERM) && (gup_flags & FOLL_PCI_P2PDMA)) return false;
  *gup_flags_p = gup_flags;
  return true;
}

long get_user_pages_remote(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages, int* locked) {
  int local = 1;
  if (!is_valid_gup_args(pages, locked, &gup_flags, FOLL_TOUCH | FOLL_REMOTE)) return -EINVAL;
  return __get_user_pages_locked(mm, start, nr_pages, pages, locked ? locked : &local, gup_flags);
}

long pin_user_pages_remote(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages, int* locked) {
  int local = 1;
  if (!is_valid_gup_args(pages, locked, &gup_flags, FOLL_PIN | FOLL_TOUCH | FOLL_REMOTE)) return 0;
  return __gup_longterm_locked(mm, start, nr_pages, pages, locked ? locked : &local, gup_flags);
}

long get_user_pages(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages) {
  int locked = 1;
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_TOUCH)) return -EINVAL;
  return __get_user_pages_locked(mm, start, nr_pages, pages, &locked, gup_flags);
}

long pin_user_pages(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages) {
  int locked = 1;
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_PIN)) return 0;  // no FOLL_TOUCH
  return __gup_longterm_locked(mm, start, nr_pages, pages, &locked, gup_flags);
}

long get_user_pages_unlocked(Mm* mm, uint64_t start, long nr_pages, Page** pages, unsigned gup_flags) {
  int locked = 0;
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_TOUCH | FOLL_UNLOCKABLE)) return -EINVAL;
  return __get_user_pages_locked(mm, start, nr_pages, pages, &locked, gup_flags);
}

long pin_user_pages_unlocked(Mm* mm, uint64_t start, long nr_pages, Page** pages, unsigned gup_flags) {
  int locked = 0;
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_PIN | FOLL_TOUCH | FOLL_UNLOCKABLE)) return 0;
  return __gup_longterm_locked(mm, start, nr_pages, pages, &locked, gup_flags);
}

long get_user_pages_fast_only(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages) {
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_GET | FOLL_FAST_ONLY)) return -EINVAL;
  return gup_fast_fallback(mm, start, nr_pages, gup_flags, pages);
}

long get_user_pages_fast(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages) {
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_GET)) return -EINVAL;
  return gup_fast_fallback(mm, start, nr_pages, gup_flags, pages);
}

long pin_user_pages_fast(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages) {
  if (!is_valid_gup_args(pages, nullptr, &gup_flags, FOLL_PIN)) return -EINVAL;
  return gup_fast_fallback(mm, start, nr_pages, gup_flags, pages);
}

Page* get_dump_page(Mm* mm, uint64_t addr) {
  int locked = 0;
  Page* page = nullptr;
  long ret = __get_user_pages_locked(mm, addr, 1, &page, &locked, FOLL_FORCE | FOLL_DUMP | FOLL_GET);
  return ret == 1 ? page : nullptr;
}

// faultin_page_range (MADV_POPULATE_READ/WRITE): pages == NULL.
// Opt-out: a fault may drop and retake the caller's mmap_lock.
long faultin_page_range(Mm* mm, uint64_t start, uint64_t end, bool write) NO_THREAD_SAFETY_ANALYSIS {
  mmap_assert_locked(mm);
  unsigned flags = FOLL_TOUCH | FOLL_HWPOISON | FOLL_UNLOCKABLE | FOLL_MADV_POPULATE | (write ? FOLL_WRITE : 0);
  int locked = 1;  // the caller (madvise) holds mmap_lock for read
  long nr_pages = static_cast<long>((end - start) >> PAGE_SHIFT);
  while (nr_pages > 0) {
    long ret = __get_user_pages_locked(mm, start, nr_pages, nullptr, &locked, flags);
    // A fault dropped the caller's mmap_lock (madvise_populate retakes it):
    // hand it back held.
    if (!locked) {
      mmap_read_lock(mm);
      locked = 1;
    }
    if (ret < 0) return ret;
    start += static_cast<uint64_t>(ret) * PAGE_SIZE;
    nr_pages -= ret;
  }
  return 0;
}

const GupHooks kGupHooks = {.faultin_page_range = faultin_page_range};

}  // namespace mmlab
