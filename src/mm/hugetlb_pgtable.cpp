// mm/hugetlb.c, the page-table operations on PMD (2 MiB) and PUD (1 GiB)
// leaves: the huge "pte" helpers (huge_pte_lock, hugetlb_walk,
// huge_pte_alloc), the rmap of hugetlb folios, mm->hugetlb_usage, and zap
// (__unmap_hugepage_range, unmap_ref_private), fork
// (copy_hugetlb_page_range), mprotect (hugetlb_change_protection) and mremap
// (move_hugetlb_page_tables).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/kernel.h"
#include "mm/mmap.h"
#include "mm/rmap.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"
#include "sync/sched.h"
#include "tlb/tlb.h"

namespace mmlab {

pmd_t hget(HPte e) { return e.pmd ? pmdp_get(e.pmd) : pmd_t{pudp_get(e.pud).v}; }
void hset(HPte e, pmd_t v) {
  if (e.pmd) entry_set(e.pmd, v);
  else entry_set(e.pud, pud_t{v.v});
}
pmd_t hclear(HPte e) { return e.pmd ? entry_xchg(e.pmd, pmd_t{0}) : pmd_t{entry_xchg(e.pud, pud_t{0}).v}; }

// huge_pte_lock: the PMD split lock for 2 MiB leaves, mm->page_table_lock
// (pud_lock) for 1 GiB leaves.
SpinLock* huge_pte_lock(Mm* mm, HPte e) { return e.pmd ? pmd_lock(mm, e.pmd) : pud_lock(mm, e.pud); }
namespace {

// The same lock taken as the inner of two (fork: source under destination).
SpinLock* huge_pte_lock_nested(Mm* mm, HPte e) {
  SpinLock* l = e.pmd ? pmd_lockptr(mm, e.pmd) : pud_lockptr(mm, e.pud);
  spin_lock_returned(l, e.pmd ? LockClass::kPmdLock : LockClass::kPageTableLock, kSingleDepthNesting);
  if (e.pmd) mm->stats->count(Event::pmd_lock);
  return l;
}

// hugetlb_mask_last_page: skip to the last huge page the missing table covers.
uint64_t hugetlb_mask_last_page(const Hstate* h) {
  return h->order == PUD_ORDER ? PGDIR_SIZE - PUD_SIZE : PUD_SIZE - PMD_SIZE;
}
}  // namespace


HPte hugetlb_walk(Mm* mm, uint64_t addr, const Hstate* h) {
  if (h->order == PUD_ORDER) return HPte{nullptr, mm_find_pud(mm, addr)};
  return HPte{mm_find_pmd(mm, addr), nullptr};
}

// huge_pte_alloc: allocate the tables down to the leaf level. A table where a
// leaf must go (left by an earlier small mapping) fails like an allocation.
HPte huge_pte_alloc(Mm* mm, uint64_t addr, const Hstate* h) {
  pud_t* pud = pud_alloc(mm, addr);
  if (!pud) return {};
  if (h->order == PUD_ORDER) {
    pud_t v = pudp_get(pud);
    if (!pud_none(v) && !pud_leaf(v)) return {};
    return HPte{nullptr, pud};
  }
  pmd_t* pmd = pmd_alloc(mm, pud, addr);
  if (!pmd) return {};
  pmd_t v = pmdp_get(pmd);
  if (!pmd_none(v) && !pmd_leaf(v)) return {};
  return HPte{pmd, nullptr};
}

Folio* hpte_folio(PhysMem* phys, pmd_t v) { return page_folio(phys->pfn_to_page(pmd_pfn(v))); }

// make_huge_pte: a leaf for folio, writable (and dirty) only if asked and the
// VMA allows writes; always young.
pmd_t make_huge_pte(const Vma* vma, Folio* folio, bool try_mkwrite) {
  pmd_t e = pfn_pmd(folio_pfn(folio), vma->vm_page_prot);
  if (try_mkwrite && (vma->vm_flags & VM_WRITE)) e = pmd_mkwrite_novma(pmd_mkdirty(e));
  else e = pmd_wrprotect(e);
  return pmd_mkyoung(e);
}

namespace {

// ---- rmap of hugetlb folios: entire mappings only ----
//
// The kernel keeps only _entire_mapcount and _large_mapcount for hugetlb
// folios (hugetlb_add_file_rmap and friends). The model also keeps the MM-ID
// slots through mm/rmap.cpp's large-mapcount helpers (the invariant checker
// and folio_maybe_mapped_shared() expect them on every large folio), but not
// its entire-mapping helpers, which count NR_ANON_THPS and mTHP statistics
// that hugetlb folios are not part of.

void hugetlb_mapcount_inc(Folio* f, const Vma* vma) {
  aref(folio_page(f, 1)->f1.entire_mapcount).fetch_add(1, std::memory_order_acq_rel);
  folio_add_large_mapcount(f, 1, vma);
}

void hugetlb_mapcount_dec(Folio* f, const Vma* vma) {
  int32_t entire = aref(folio_page(f, 1)->f1.entire_mapcount).fetch_sub(1, std::memory_order_acq_rel) - 1;
  VM_BUG_ON_FOLIO(entire < 0, f, "hugetlb entire mapcount underflow");
  folio_sub_large_mapcount(f, 1, vma);
}
}  // namespace

void hugetlb_add_file_rmap(Folio* f, const Vma* vma) {
  VM_WARN_ON_FOLIO(!folio_test_hugetlb(f), f, "hugetlb rmap on a non-hugetlb folio");
  VM_WARN_ON_FOLIO(folio_test_anon(f), f, "hugetlb file rmap on an anon folio");
  hugetlb_mapcount_inc(f, vma);
}

void hugetlb_remove_rmap(Folio* f, const Vma* vma) {
  VM_WARN_ON_FOLIO(!folio_test_hugetlb(f), f, "hugetlb rmap on a non-hugetlb folio");
  hugetlb_mapcount_dec(f, vma);
}

// hugetlb_add_new_anon_rmap: a brand-new private folio, exclusive (head only).
void hugetlb_add_new_anon_rmap(Folio* f, Vma* vma, uint64_t addr) {
  VM_WARN_ON_FOLIO(!folio_test_hugetlb(f), f, "hugetlb rmap on a non-hugetlb folio");
  VM_BUG_ON_FOLIO(folio_mapped(f), f, "new hugetlb anon folio already mapped");
  hugetlb_mapcount_inc(f, vma);
  folio_clear_hugetlb_restore_reserve(f);
  aref(f->page.mapping).store(reinterpret_cast<uint64_t>(vma->anon_vma), std::memory_order_release);
  f->page.index = linear_page_index(vma, addr);
  folio_set_anon(f);
  SetPageAnonExclusive(&f->page);
}
namespace {

// hugetlb_try_dup_anon_rmap: fork shares an anon folio with the child, unless
// it is exclusive and may be DMA-pinned (the child then gets a copy).
int hugetlb_try_dup_anon_rmap(Folio* f, Vma* dst_vma, Vma* src_vma) {
  if (PageAnonExclusive(&f->page)) {
    // folio_needs_cow_for_dma(): fork holds write_protect_seq.
    if (is_cow_mapping(src_vma->vm_flags) && src_vma->vm_mm->test_flag(MMF_HAS_PINNED) &&
        folio_maybe_dma_pinned(f))
      return -EBUSY;
    ClearPageAnonExclusive(&f->page);
  }
  hugetlb_mapcount_inc(f, dst_vma);
  return 0;
}
}  // namespace

// ---- mm->hugetlb_usage ----

void hugetlb_count_add(HugetlbState* hs, Mm* mm, long n) {
  SpinGuard g(&hs->lock);
  long& v = hs->usage[mm->mm_id];
  v += n;
  if (v == 0) hs->usage.erase(mm->mm_id);
}

namespace {

// ---- unmapping ----

void hugetlb_count_sub(HugetlbState* hs, Mm* mm, long n) { hugetlb_count_add(hs, mm, -n); }

// __unmap_hugepage_range: clear the leaves of [start, end) (huge-page
// aligned). With ref_folio, only that folio's entry, and the VMA is marked
// HPAGE_RESV_UNMAPPED (unmap_ref_private). Returns the entries cleared.
long __unmap_hugepage_range(Vma* vma, uint64_t start, uint64_t end, Folio* ref_folio) {
  Mm* mm = vma->vm_mm;
  Kernel* k = mm->kernel;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = hstate_vma(vma);
  const uint64_t sz = h->size();
  const uint64_t last_addr_mask = hugetlb_mask_last_page(h);
  const ResvCtx c = ctx_of(vma);
  long n = 0;
  for (uint64_t addr = start; addr < end; addr += sz) {
    HPte pte = hugetlb_walk(mm, addr, h);
    if (!pte) {
      addr |= last_addr_mask;
      continue;
    }
    SpinLock* ptl = huge_pte_lock(mm, pte);
    ptl->assert_held();
    pmd_t v = hget(pte);
    if (pmd_none(v)) {
      ptl->unlock();
      continue;
    }
    Folio* folio = hpte_folio(mm->phys, v);
    std::vector<Folio*> to_free;
    if (ref_folio) {
      if (folio != ref_folio) {
        ptl->unlock();
        continue;
      }
      // Future faults in this VMA fail rather than look like lost data.
      SpinGuard g(&hs->lock);
      if (HugetlbVmaInfo* vi = vma_info(hs, vma, &to_free)) vi->unmapped = true;
    }
    v = hclear(pte);
    flush_hugetlb_tlb_range(vma, hstate_vma(vma)->shift(), addr, addr + sz);
    if (pmd_dirty(v)) folio_set_dirty(folio);
    hugetlb_count_sub(hs, mm, h->pages_per_huge_page());
    hugetlb_remove_rmap(folio, vma);
    ptl->unlock();
    // Label: the leaf is cleared and the PTL dropped, the reservation not
    // yet restored (__unmap_hugepage_range).
    sched::point("hugetlb_zap.after_unmap", sched::Op::kLabel, {vma, sched::ObjKind::kVma, vma->cid});
    // Restore the reservation of an owner's anonymous page, so that the
    // page cannot be stolen before the owner faults it in again.
    {
      SpinGuard g(&hs->lock);
      if (!h->surplus_huge_pages && folio_test_anon(folio) && vma_is_resv_owner(hs, vma, &to_free)) {
        folio_set_hugetlb_restore_reserve(folio);
        uint64_t idx = vma_hugecache_offset(h, vma, addr);
        if (vma_needs_reservation(hs, c, idx, &to_free)) vma_add_reservation(hs, c, idx, &to_free);
      }
    }
    free_folios(k, to_free);
    folio_put(folio);  // the mapping's reference, after the TLB flush
    n++;
    if (ref_folio) break;
  }
  return n;
}
}  // namespace

// unmap_ref_private: the reservation owner cannot CoW for want of a page;
// take the page away from the other private mappers of that file range
// (fork children), who will get SIGBUS if they touch it again. The kernel
// finds them on the file's i_mmap; the model keeps no file rmap, so they
// come from the one rmap walk over the folio's anon_vma (every private
// mapper that may map an anonymous folio is on it; a page-cache folio has
// none). Returns how many mappings were removed.
long unmap_ref_private(Vma* vma, Folio* folio, uint64_t address) {
  Kernel* k = vma->vm_mm->kernel;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = hstate_vma(vma);
  File* file = vma->vm_file.get();
  const uint64_t haddr = address & ~(h->size() - 1);
  const uint64_t pgoff = ((haddr - vma->vm_start) >> PAGE_SHIFT) + vma->vm_pgoff;
  auto try_unmap = [&](Vma* iter) -> long {
    if (iter == vma || iter->vm_file.get() != file || !is_vm_hugetlb_page(iter)) return 0;
    if (iter->vm_flags & VM_MAYSHARE) return 0;  // shared VMAs have their own reserves
    if (pgoff < iter->vm_pgoff || pgoff >= iter->vm_pgoff + iter->pages()) return 0;
    bool owner;
    std::vector<Folio*> to_free;
    {
      SpinGuard g(&hs->lock);
      owner = vma_is_resv_owner(hs, iter, &to_free);
    }
    free_folios(k, to_free);
    if (owner) return 0;
    uint64_t a = iter->vm_start + ((pgoff - iter->vm_pgoff) << PAGE_SHIFT);
    return __unmap_hugepage_range(iter, a, a + h->size(), folio);
  };
  long n = 0;
  rmap_walk(folio, {.rmap_one = [&](Vma* iter) {
                      n += try_unmap(iter);
                      return true;
                    }});
  return n;
}

// ---- zap, fork, mprotect ----

void unmap_hugepage_range(Vma* vma, uint64_t start, uint64_t end) {
  if (!is_hugetlb_file(vma->vm_file.get())) return;
  Mm* mm = vma->vm_mm;
  const uint64_t sz = vma_kernel_pagesize(vma);
  // Only whole huge pages: callers that round to PAGE_SIZE must not lose data.
  const uint64_t s = round_up(std::max(start, vma->vm_start), sz);
  const uint64_t e = round_down(std::min(end, vma->vm_end), sz);
  if (s < e) {
    // __hugetlb_zap_begin/end: the hugetlb VMA lock for write over the unmap
    // and the reservations it restores. revert.hugetlb-zap-vma-lock (before
    // the model's d3c00a0) zaps under the mmap_lock for read alone, so a
    // fault of the index may come between the unmap and the restore.
    std::optional<HugetlbVmaLock> vl;
    if (!mm->kernel->settings.reverted(Revert::kHugetlbZapVmaLock))
      vl.emplace(hugetlb_state(mm->kernel), vma, RwSemHold::Mode::kWrite);
    __unmap_hugepage_range(vma, s, e, nullptr);
  }
}

// For hugetlb_vmdelete_list and hugetlb_unmap_file_folio, which hold
// i_mmap_rwsem for write: the hugetlb VMA lock comes before it in the lock
// order, so it is only tried here (hugetlb_vma_trylock_write). A VMA whose
// lock is held (a fault in progress) is left alone and *busy names its
// lock, for a caller that must wait for it. The kernel's shared mappings'
// vma_lock is not modelled (mm/hugetlb.h): they take nothing.
bool unmap_hugepage_range_trylock(Vma* vma, uint64_t start, uint64_t end, std::shared_ptr<HugetlbResvMap>* busy) {
  if (!is_hugetlb_file(vma->vm_file.get())) return true;
  const uint64_t sz = vma_kernel_pagesize(vma);
  const uint64_t s = round_up(std::max(start, vma->vm_start), sz);
  const uint64_t e = round_down(std::min(end, vma->vm_end), sz);
  if (s >= e) return true;
  HugetlbState* hs = hugetlb_state(vma->vm_mm->kernel);
  std::shared_ptr<HugetlbResvMap> m;
  {
    std::vector<Folio*> to_free;
    {
      SpinGuard g(&hs->lock);
      if (!(vma->vm_flags & VM_MAYSHARE))
        if (HugetlbVmaInfo* vi = vma_info(hs, vma, &to_free)) m = vi->resv;
    }
    free_folios(vma->vm_mm->kernel, to_free);
  }
  if (!m) {
    __unmap_hugepage_range(vma, s, e, nullptr);
    return true;
  }
  if (!m->rw_sema.down_write_trylock()) {
    if (busy) *busy = std::move(m);
    return false;
  }
  __unmap_hugepage_range(vma, s, e, nullptr);
  m->rw_sema.up_write();
  return true;
}

// hugetlb_vma_maps_pfn: whether vma's leaf at addr maps the folio at pfn.
bool hugetlb_vma_maps_pfn(Vma* vma, uint64_t addr, pfn_t pfn) {
  Mm* mm = vma->vm_mm;
  const Hstate* h = hstate_vma(vma);
  HPte pte = hugetlb_walk(mm, addr, h);
  if (!pte) return false;
  const pmd_t v = hget(pte);
  return pmd_present(v) && !pmd_none(v) && pmd_pfn(v) == pfn;
}

int copy_hugetlb_page_range(Vma* dst_vma, Vma* src_vma) {
  File* file = src_vma->vm_file.get();
  if (!is_hugetlb_file(file)) return 0;
  Mm* src = src_vma->vm_mm;
  Mm* dst = dst_vma->vm_mm;
  Kernel* k = src->kernel;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = hstate_file(file);
  const uint64_t sz = h->size();
  const uint64_t last_addr_mask = hugetlb_mask_last_page(h);
  const bool cow = is_cow_mapping(src_vma->vm_flags);
  const ResvCtx dst_ctx = ctx_of(dst_vma);
  int ret = 0;
  if (cow) src->write_protect_seq.write_begin();
  for (uint64_t addr = src_vma->vm_start; addr < src_vma->vm_end; addr += sz) {
    HPte src_pte = hugetlb_walk(src, addr, h);
    if (!src_pte) {
      addr |= last_addr_mask;
      continue;
    }
    if (pmd_none(hget(src_pte))) continue;
    HPte dst_pte = huge_pte_alloc(dst, addr, h);
    if (!dst_pte) {
      ret = -ENOMEM;
      break;
    }
    SpinLock* dst_ptl = huge_pte_lock(dst, dst_pte);
    dst_ptl->assert_held();
    SpinLock* src_ptl = huge_pte_lock_nested(src, src_pte);
    src_ptl->assert_held();
    pmd_t entry = hget(src_pte);
    bool stop = false;
    while (!pmd_none(entry)) {  // "again"
      Folio* folio = hpte_folio(src->phys, entry);
      folio_get(folio);  // the child's mapping
      if (!folio_test_anon(folio)) {
        hugetlb_add_file_rmap(folio, dst_vma);
      } else if (hugetlb_try_dup_anon_rmap(folio, dst_vma, src_vma)) {
        // Maybe pinned: the child gets its own copy now (it has no
        // reservation, so this needs a page nobody reserved).
        const pmd_t src_old = entry;
        src_ptl->unlock();
        dst_ptl->unlock();
        int err = 0;
        Folio* new_folio = nullptr;
        if (!dst_vma->anon_vma && anon_vma_prepare(dst_vma)) err = -ENOMEM;
        else new_folio = alloc_hugetlb_folio(k, hs, dst_ctx, vma_hugecache_offset(h, dst_vma, addr), /*cow_from_owner=*/false, &err);
        if (!new_folio) {
          folio_put(folio);
          ret = err;
          stop = true;
          dst_ptl = src_ptl = nullptr;
          break;
        }
        const int copied = copy_user_large_folio(new_folio, folio, src->stats);
        folio_put(folio);
        if (copied) {  // a machine check: the fork fails with -EHWPOISON
          folio_put(new_folio);
          ret = copied;
          stop = true;
          dst_ptl = src_ptl = nullptr;
          break;
        }
        dst_ptl = huge_pte_lock(dst, dst_pte);
        dst_ptl->assert_held();
        src_ptl = huge_pte_lock_nested(src, src_pte);
        src_ptl->assert_held();
        entry = hget(src_pte);
        if (!(entry == src_old)) {  // the source changed meanwhile: start over
          restore_reserve_on_error(k, hs, dst_ctx, vma_hugecache_offset(h, dst_vma, addr), new_folio);
          folio_put(new_folio);
          continue;
        }
        // hugetlb_install_folio
        folio_set_uptodate(new_folio);
        hugetlb_add_new_anon_rmap(new_folio, dst_vma, addr);
        hset(dst_pte, make_huge_pte(dst_vma, new_folio, /*try_mkwrite=*/true));
        hugetlb_count_add(hs, dst, h->pages_per_huge_page());
        src->stats->count(Event::fork_copied_pages, static_cast<uint64_t>(h->pages_per_huge_page()));
        break;
      }
      if (cow) {
        // Both sides read-only: the next write fault decides reuse or copy.
        hset(src_pte, pmd_wrprotect(hget(src_pte)));
        entry = pmd_wrprotect(entry);
      }
      if (!(dst_vma->vm_flags & VM_UFFD_WP)) entry = pmd_clear_uffd_wp(entry);
      hset(dst_pte, entry);
      hugetlb_count_add(hs, dst, h->pages_per_huge_page());
      break;
    }
    if (src_ptl) {  // both still held unless a failed copy dropped them
      src_ptl->assert_held();
      src_ptl->unlock();
      dst_ptl->assert_held();
      dst_ptl->unlock();
    }
    if (stop) break;
  }
  if (cow) {
    flush_hugetlb_tlb_range(src_vma, hstate_vma(src_vma)->shift(), src_vma->vm_start, src_vma->vm_end);
    src->write_protect_seq.write_end();
  }
  return ret;
}

// move_huge_pte: both entries' locks held (destination, then source
// nested); the leaf moves as it is, without the soft-dirty bit move_ptes
// sets, and loses uffd-wp as move_ptes' entries do.
static void move_huge_pte(Mm* mm, HPte src, HPte dst) {
  SpinLock* dst_ptl = huge_pte_lock(mm, dst);
  dst_ptl->assert_held();
  SpinLock* src_lockp = src.pmd ? pmd_lockptr(mm, src.pmd) : pud_lockptr(mm, src.pud);
  SpinLock* src_ptl = src_lockp != dst_ptl ? huge_pte_lock_nested(mm, src) : nullptr;
  pmd_t pte = hclear(src);
  if (pmd_present(pte)) pte = pmd_clear_uffd_wp(pte);
  hset(dst, pte);
  if (src_ptl) {
    src_ptl->assert_held();
    src_ptl->unlock();
  }
  dst_ptl->unlock();
}

uint64_t move_hugetlb_page_tables(Vma* vma, Vma* new_vma, uint64_t old_addr, uint64_t new_addr, uint64_t len) {
  (void)new_vma;
  Mm* mm = vma->vm_mm;
  const Hstate* h = hstate_vma(vma);
  const uint64_t sz = h->size();
  const uint64_t last_addr_mask = hugetlb_mask_last_page(h);
  const uint64_t old_end = old_addr + len;
  for (; old_addr < old_end; old_addr += sz, new_addr += sz) {
    HPte src = hugetlb_walk(mm, old_addr, h);
    if (!src) {
      old_addr |= last_addr_mask;
      new_addr |= last_addr_mask;
      continue;
    }
    if (pmd_none(hget(src))) continue;
    // (huge_pmd_unshare: PMD sharing is not modelled.)
    HPte dst = huge_pte_alloc(mm, new_addr, h);
    if (!dst) break;
    move_huge_pte(mm, src, dst);
  }
  flush_hugetlb_tlb_range(vma, hstate_vma(vma)->shift(), old_end - len, old_end);
  return len + old_addr - old_end;
}

long hugetlb_change_protection(Vma* vma, uint64_t start, uint64_t end, pgprot_t newprot) {
  if (!is_hugetlb_file(vma->vm_file.get())) return 0;
  Mm* mm = vma->vm_mm;
  Hstate* h = hstate_vma(vma);
  const uint64_t sz = h->size();
  const uint64_t last_addr_mask = hugetlb_mask_last_page(h);
  long pages = 0;
  bool flush = false;
  for (uint64_t addr = round_down(start, sz); addr < end; addr += sz) {
    HPte pte = hugetlb_walk(mm, addr, h);
    if (!pte) {
      addr |= last_addr_mask;
      continue;
    }
    SpinLock* ptl = huge_pte_lock(mm, pte);
    ptl->assert_held();
    pmd_t old = hget(pte);
    if (!pmd_none(old)) {
      // huge_ptep_modify_prot_start/commit: keep A/D set meanwhile by the CPU.
      pmd_t cur = hclear(pte);
      pmd_t nv = pmd_modify(cur, newprot);
      hset(pte, nv);
      if (pmd_write(cur) && !pmd_write(nv)) flush = true;
      if (!(nv == cur)) pages++;
    }
    ptl->unlock();
  }
  if (flush) flush_hugetlb_tlb_range(vma, hstate_vma(vma)->shift(), start, end);
  return pages << h->order;
}

}  // namespace mmlab
