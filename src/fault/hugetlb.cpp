// mm/hugetlb.c, the fault path: hugetlb_fault, hugetlb_no_page and
// hugetlb_wp (CoW and unshare of PMD and PUD leaves, reuse by mapcount,
// unmap_ref_private when the reservation owner cannot get a page).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/vma.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"
#include "tlb/tlb.h"
#include "sync/sched.h"

namespace mmlab {

namespace {

vm_fault_t vmf_error(int err) { return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS; }

// ---- faults ----

struct HugeFault {
  Kernel* k;
  HugetlbState* hs;
  Vma* vma;
  Mm* mm;
  File* file;
  Hstate* h;
  uint64_t address;       // huge-page aligned
  uint64_t real_address;  // as faulted
  fault_flags_t flags;
  uint64_t idx;           // huge-page index in the file (vmf->pgoff)
  Mutex* fm;              // the fault mutex, held throughout
  HugetlbVmaLock* vl;     // the hugetlb VMA lock for read, inside the fault mutex
  HPte pte;
  pmd_t orig;
  SpinLock* ptl = nullptr;
};

bool hugetlb_pte_stable(HugeFault* f) {
  SpinLock* ptl = huge_pte_lock(f->mm, f->pte);
  ptl->assert_held();
  bool same = hget(f->pte) == f->orig;
  ptl->unlock();
  return same;
}

// After unmap_ref_private: the fault mutex and the hugetlb VMA lock again,
// with old_folio (anon, reached only through page tables, where it is only
// ever tried) still locked. The one inversion of sync/lock_order.h's tree:
// the checker is not shown the folio lock while the two are taken, as the
// kernel's lockdep never sees PG_locked.
void hugetlb_wp_retake_locks(HugeFault* f, Folio* old_folio) ACQUIRE(f->fm) NO_THREAD_SAFETY_ANALYSIS {
  VM_BUG_ON_FOLIO(!folio_test_locked(old_folio) || !folio_test_anon(old_folio), old_folio,
                  "hugetlb_wp retakes its locks over a locked anon folio");
  lockdep_release(old_folio);
  f->fm->lock();
  f->vl->lock();
  lockdep_acquire(old_folio, LockClass::kFolioLock, 0, LockdepTry::kTry);
}

// hugetlb_wp: a write (or unshare) fault on a read-only leaf. PTL held on
// entry and on return; the fault mutex is held (dropped around
// unmap_ref_private).
vm_fault_t hugetlb_wp(HugeFault* f) REQUIRES(f->fm, f->ptl) {
  f->fm->assert_held();
  f->ptl->assert_held();
  Vma* vma = f->vma;
  Mm* mm = f->mm;
  const bool unshare = f->flags & FAULT_FLAG_UNSHARE;
  const pmd_t pte = hget(f->pte);

  if (vma->vm_flags & VM_MAYSHARE) {  // shared mappings never CoW
    hset(f->pte, pmd_mkwrite_novma(pmd_mkdirty(pte)));
    return 0;
  }
  Folio* old_folio = hpte_folio(mm->phys, pte);
  for (;;) {  // retry_avoidcopy
    // Reuse on mapcount, not refcount: an extra reference (vmsplice, FOLL_GET)
    // does not force a copy, unlike small and THP anon folios.
    if (folio_mapcount(old_folio) == 1 && folio_test_anon(old_folio)) {
      if (!PageAnonExclusive(&old_folio->page)) {
        if (vma->anon_vma) folio_move_anon_rmap(old_folio, vma);
        SetPageAnonExclusive(&old_folio->page);
      }
      if (!unshare && (vma->vm_flags & VM_WRITE)) hset(f->pte, pmd_mkwrite_novma(pmd_mkdirty(hget(f->pte))));
      mm->stats->count(unshare ? Event::fault_unshare : Event::fault_wp_reuse);
      return 0;
    }
    VM_BUG_ON_FOLIO(folio_test_anon(old_folio) && PageAnonExclusive(&old_folio->page), old_folio,
                     "hugetlb CoW of an exclusive anon folio");
    // The owner CoWing its own anon page must not use its reserve map: that
    // reservation is what the old page consumed.
    bool cow_from_owner = false;
    std::vector<Folio*> to_free;
    {
      SpinGuard g(&f->hs->lock);
      cow_from_owner = folio_test_anon(old_folio) && vma_is_resv_owner(f->hs, vma, &to_free);
    }
    free_folios(f->k, to_free);
    folio_get(old_folio);
    f->ptl->unlock();
    const ResvCtx c = ctx_of(vma);
    int err = 0;
    Folio* new_folio = alloc_hugetlb_folio(f->k, f->hs, c, f->idx, cow_from_owner, &err);
    if (!new_folio) {
      if (cow_from_owner) {
        folio_put(old_folio);
        f->vl->unlock();
        f->fm->unlock();
        long n = unmap_ref_private(vma, old_folio, f->address);
        hugetlb_wp_retake_locks(f, old_folio);
        f->ptl = huge_pte_lock(mm, f->pte);
        f->ptl->assert_held();
        if (n > 0 && hget(f->pte) == pte) continue;
        // Nothing could be unmapped (the model's guard against a loop when
        // no rmap reaches the other mappers): fail like a non-owner.
        return n > 0 ? 0 : VM_FAULT_SIGBUS;
      }
      // Not the reservation's owner (a child after fork): the kernel
      // promises it no page, and an empty pool is SIGBUS.
      if (err == -ENOSPC) mm->stats->count(Event::fault_hugetlb_cow_nopage);
      folio_put(old_folio);
      f->ptl = huge_pte_lock(mm, f->pte);
      f->ptl->assert_held();
      return vmf_error(err);
    }
    vm_fault_t ret = __vmf_anon_prepare(f->vma, f->flags);
    // A machine check in the copy fails the fault (SIGBUS); the new folio
    // and its reservation go back below, the old mapping stays.
    if (!ret && copy_user_large_folio(new_folio, old_folio, mm->stats)) ret = VM_FAULT_HWPOISON_LARGE;
    if (!ret) {
      folio_set_uptodate(new_folio);
      f->ptl = huge_pte_lock(mm, f->pte);
      f->ptl->assert_held();
      if (hget(f->pte) == pte) {
        pmd_t newpte = make_huge_pte(vma, new_folio, !unshare);
        if (pmd_uffd_wp(pte)) newpte = pmd_mkuffd_wp(newpte);
        // Break CoW or unshare: the old entry goes (and is flushed) first.
        hclear(f->pte);
        flush_hugetlb_tlb_range(vma, f->h->shift(), f->address, f->address + f->h->size());
        hugetlb_remove_rmap(old_folio, vma);
        hugetlb_add_new_anon_rmap(new_folio, vma, f->address);
        hset(f->pte, newpte);
        mm->stats->count(unshare ? Event::fault_unshare : Event::fault_wp_copy);
        new_folio = old_folio;  // the old entry's reference is dropped below
      } else {
        mm->stats->count(Event::fault_retry);
      }
      f->ptl->unlock();
    }
    if (new_folio != old_folio) restore_reserve_on_error(f->k, f->hs, c, f->idx, new_folio);
    folio_put(new_folio);
    folio_put(old_folio);
    f->ptl = huge_pte_lock(mm, f->pte);  // the caller expects it held
    f->ptl->assert_held();
    return ret;
  }
}

// hugetlb_no_page: fault on an empty entry. Releases the fault mutex.
vm_fault_t hugetlb_no_page(HugeFault* f) RELEASE(f->fm) {
  Vma* vma = f->vma;
  Mm* mm = f->mm;
  const ResvCtx c = ctx_of(vma);
  vm_fault_t ret = VM_FAULT_SIGBUS;
  bool new_anon = false;
  bool folio_locked = true;
  Folio* folio = nullptr;
  auto out = [&]() RELEASE(f->fm) {
    f->vl->unlock();
    f->fm->unlock();
    return ret;
  };
  // The owner unmapped this page from us for want of pages (HPAGE_RESV_UNMAPPED).
  {
    bool unmapped = false;
    std::vector<Folio*> to_free;
    {
      SpinGuard g(&f->hs->lock);
      HugetlbVmaInfo* vi = vma_info(f->hs, vma, &to_free);
      unmapped = vi && vi->unmapped;
    }
    free_folios(f->k, to_free);
    if (unmapped) return out();
  }

  folio = filemap_lock_hugetlb_folio(f->file, f->h, f->idx);
  if (!folio) {
    if (f->idx >= (i_size_read(f->file) >> f->h->shift())) return out();  // beyond EOF
    if (!(vma->vm_flags & VM_MAYSHARE)) {
      if (vm_fault_t r = __vmf_anon_prepare(f->vma, f->flags)) {
        ret = r;
        return out();
      }
    }
    int err = 0;
    folio = alloc_hugetlb_folio(f->k, f->hs, c, f->idx, /*cow_from_owner=*/false, &err);
    if (!folio) {
      ret = hugetlb_pte_stable(f) ? vmf_error(err) : 0;
      return out();
    }
    folio_zero_huge(folio, mm->stats);
    folio_set_uptodate(folio);
    if (vma->vm_flags & VM_MAYSHARE) {
      if (hugetlb_add_to_page_cache(folio, f->file, f->h, f->idx)) {
        restore_reserve_on_error(f->k, f->hs, c, f->idx, folio);
        folio_put(folio);
        ret = VM_FAULT_SIGBUS;
        return out();
      }
    } else {
      new_anon = true;
      folio_lock(folio);
    }
  }

  f->ptl = huge_pte_lock(mm, f->pte);
  f->ptl->assert_held();
  ret = 0;
  if (!(hget(f->pte) == f->orig)) {  // raced: back out
    f->ptl->unlock();
    mm->stats->count(Event::fault_retry);
    if (new_anon) restore_reserve_on_error(f->k, f->hs, c, f->idx, folio);
    folio_unlock(folio);
    folio_put(folio);
    return out();
  }
  // The folio's reference (allocation or page-cache lookup) becomes the mapping's.
  if (new_anon) hugetlb_add_new_anon_rmap(folio, vma, f->address);
  else hugetlb_add_file_rmap(folio, vma);
  hset(f->pte, make_huge_pte(vma, folio, vma->vm_flags & VM_SHARED));
  hugetlb_count_add(f->hs, mm, f->h->pages_per_huge_page());
  if ((f->flags & FAULT_FLAG_WRITE) && !(vma->vm_flags & VM_SHARED)) {
    if (!new_anon) {
      folio_locked = false;
      folio_unlock(folio);
    }
    ret = hugetlb_wp(f);  // CoW the page-cache page (or take the new one) now
  }
  f->ptl->unlock();
  if (folio_locked) folio_unlock(folio);
  return out();
}
}  // namespace

// ---- fault entry ----

vm_fault_t hugetlb_fault(Vma* vma, uint64_t address, fault_flags_t flags) {
  File* file = vma->vm_file.get();
  if (!is_hugetlb_file(file)) return VM_FAULT_SIGBUS;
  Mm* mm = vma->vm_mm;
  HugeFault f{};
  f.k = mm->kernel;
  f.hs = hugetlb_state(f.k);
  f.vma = vma;
  f.mm = mm;
  f.file = file;
  f.h = hstate_file(file);
  f.address = address & ~(f.h->size() - 1);
  // A VMA cut inside a huge page (split_vma without hugetlb_split_check)
  // cannot be mapped by whole leaves.
  if (f.address < vma->vm_start || f.address + f.h->size() > vma->vm_end) return VM_FAULT_SIGBUS;
  f.real_address = address;
  f.flags = flags;
  f.idx = vma_hugecache_offset(f.h, vma, f.address);
  f.fm = &hugetlb_fault_mutex(f.hs, file, f.idx);
  f.fm->lock();
  // Before the leaf is looked at: a zap of it must be over, reservation
  // restored, or not begun.
  HugetlbVmaLock vl(f.hs, vma, RwSemHold::Mode::kRead);
  f.vl = &vl;
  f.pte = huge_pte_alloc(mm, f.address, f.h);
  if (!f.pte) {
    vl.unlock();
    f.fm->unlock();
    return VM_FAULT_OOM;
  }
  f.orig = hget(f.pte);
  if (pmd_none(f.orig)) return hugetlb_no_page(&f);

  vm_fault_t ret = 0;
  Folio* wait_folio = nullptr;
  f.ptl = huge_pte_lock(mm, f.pte);
  f.ptl->assert_held();
  if (hget(f.pte) == f.orig) {
    bool done = false;
    if (flags & (FAULT_FLAG_WRITE | FAULT_FLAG_UNSHARE)) {
      if (!pmd_write(f.orig)) {
        // hugetlb_wp decides reuse on the folio, which must not change under it.
        Folio* folio = hpte_folio(mm->phys, f.orig);
        const bool anon = folio_test_anon(folio);
        if (anon && !folio_trylock(folio)) {
          wait_folio = folio;
        } else {
          folio_get(folio);
          ret = hugetlb_wp(&f);
          if (anon) folio_unlock(folio);
          folio_put(folio);
        }
        done = true;
      } else if (flags & FAULT_FLAG_WRITE) {
        f.orig = pmd_mkdirty(f.orig);
      }
    }
    if (!done) {
      // huge_ptep_set_access_flags: young (and dirty), if not already.
      pmd_t cur = hget(f.pte);
      pmd_t want = pmd_mkyoung(cur);
      if (flags & FAULT_FLAG_WRITE) want = pmd_mkdirty(want);
      if (!(want == cur)) hset(f.pte, want);
    }
  }
  f.ptl->unlock();
  vl.unlock();
  f.fm->unlock();
  if (wait_folio) {
    // folio_wait_locked without a reference: only the flag is read.
    sched::wait_until("hugetlb_fault", {wait_folio, sched::ObjKind::kFolioLock, folio_pfn(wait_folio)},
                      [wait_folio] { return !folio_test_locked(wait_folio); });
  }
  return ret;
}

}  // namespace mmlab
