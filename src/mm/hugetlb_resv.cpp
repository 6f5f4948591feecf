// mm/hugetlb.c, reservations: the per-VMA reserve state (vm_private_data),
// the vma_needs/commit/add/del_reservation transactions, alloc_hugetlb_folio,
// hugetlb_reserve_pages, and the hugetlb VMA operations (vm_ops: open, close,
// may_split, pagesize) with mremap's clear_vma_resv_huge_pages.
//
// Reservations follow the kernel's resv_map scheme:
//   - shared mappings (VM_MAYSHARE) and fallocate use the file's region map:
//     an index is in it once reserved or instantiated; a fault on an index in
//     the map consumes the global reservation (resv_huge_pages--), one outside
//     it needs an unreserved free page and adds the index. Evicting the file
//     gives back (regions - pages instantiated).
//   - a private mapping reserves its whole range at mmap for its creator
//     (HPAGE_RESV_OWNER); faults consume per index; unmapping an owner's anon
//     page restores its reservation (folio flag HPG_restore_reserve, counted
//     again when the folio is freed); closing the VMA gives back what is left.
//     Other mappers (fork children) have no reservation: a CoW needs an
//     unreserved page, and when the owner cannot get one it unmaps the page
//     from them (unmap_ref_private), marking them HPAGE_RESV_UNMAPPED so their
//     next fault there gets SIGBUS.
//   - mremap moves a private mapping's reserve map with it (the new VMA
//     shares it; the source lets go of it). Moving only part of a private
//     mapping loses the reservations of the part left behind for good, as
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"

namespace mmlab {

// ---- per-VMA reserve state (vm_private_data) ----

void release_resv_map(HugetlbState* hs, HugetlbResvMap* m, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  long n = static_cast<long>(m->reserved.size());
  m->reserved.clear();
  if (n) return_unused_surplus_pages(hs, m->h, n, to_free);
}
namespace {

// Drop a VMA's entry (kref_put of its reserve map: the last user gives back
// what is left).
void drop_vma_info(HugetlbState* hs, std::map<uint64_t, HugetlbVmaInfo>::iterator it,
                   std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  std::shared_ptr<HugetlbResvMap> m = std::move(it->second.resv);
  hs->vmas.erase(it);
  if (!m || --m->refs > 0) return;
  release_resv_map(hs, m.get(), to_free);
  if (m->file && m->file->hstate) {
    auto& v = m->file->hstate->private_maps;
    v.erase(std::remove(v.begin(), v.end(), m), v.end());
  }
}
}  // namespace

// The vm_private_data of a private hugetlb VMA, created on first use. A VMA
// made by a split that nobody announced (hugetlb_vm_op_open) takes the
// reserve map and flags of the VMA it came from: an entry of the same mm and
// file whose range covers it. nullptr for shared mappings.
HugetlbVmaInfo* vma_info(HugetlbState* hs, const Vma* vma, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  if (vma->vm_flags & VM_MAYSHARE) return nullptr;
  const File* file = vma->vm_file.get();
  const Hstate* h = hstate_file(file);
  const int id = vma->vm_mm->mm_id;
  const uint64_t from = vma_hugecache_offset(h, vma, vma->vm_start);
  const uint64_t to = vma_hugecache_offset(h, vma, vma->vm_end);
  auto it = hs->vmas.find(vma->cid);
  if (it != hs->vmas.end()) {
    if (it->second.mm_id == id && it->second.file == file) {
      it->second.from = from;
      it->second.to = to;
      return &it->second;
    }
    drop_vma_info(hs, it, to_free);  // a freed VMA's entry
  }
  HugetlbVmaInfo vi;
  vi.mm_id = id;
  vi.file = file;
  vi.from = from;
  vi.to = to;
  for (auto& [v, e] : hs->vmas) {
    if (e.mm_id != id || e.file != file) continue;
    if (e.resv && e.resv->from <= from && to <= e.resv->to) {
      vi.resv = e.resv;
      vi.unmapped = e.unmapped;
      break;
    }
    if (!e.resv && e.unmapped && e.from <= from && to <= e.to) vi.unmapped = true;
  }
  if (vi.resv) vi.resv->refs++;
  HugetlbVmaInfo& slot = hs->vmas[vma->cid];
  slot = std::move(vi);
  return &slot;
}

bool vma_is_resv_owner(HugetlbState* hs, const Vma* vma, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  HugetlbVmaInfo* vi = vma_info(hs, vma, to_free);
  return vi && vi->resv;
}

// ---- the hugetlb VMA lock ----

namespace {
std::shared_ptr<HugetlbResvMap> owner_map(HugetlbState* hs, const Vma* vma) {
  if (!is_vm_hugetlb_page(vma) || !is_hugetlb_file(vma->vm_file.get()) || (vma->vm_flags & VM_MAYSHARE)) return nullptr;
  std::vector<Folio*> to_free;
  std::shared_ptr<HugetlbResvMap> m;
  {
    SpinGuard g(&hs->lock);
    if (HugetlbVmaInfo* vi = vma_info(hs, vma, &to_free)) m = vi->resv;
  }
  if (Kernel* k = hs->kernel.load(std::memory_order_relaxed)) free_folios(k, to_free);
  return m;
}
}  // namespace

HugetlbVmaLock::HugetlbVmaLock(HugetlbState* hs, const Vma* vma, RwSemHold::Mode mode)
    : map_(owner_map(hs, vma)), hold_(map_ ? &map_->rw_sema : nullptr, mode) {}

ResvCtx ctx_of(const Vma* vma) {
  File* f = vma->vm_file.get();
  return ResvCtx{f, f->hstate.get(), f->hstate->h, vma};
}
ResvCtx ctx_of(File* f) { return ResvCtx{f, f->hstate.get(), f->hstate->h, nullptr}; }
namespace {

HugetlbResvMap* ctx_resv(HugetlbState* hs, const ResvCtx& c, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  HugetlbVmaInfo* vi = vma_info(hs, c.vma, to_free);
  return vi ? vi->resv.get() : nullptr;
}
}  // namespace

// 1: idx needs a reservation of its own; 0: one is held for it.
long vma_needs_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  if (c.shared()) return c.fs->regions.count(idx) ? 0 : 1;
  HugetlbResvMap* m = ctx_resv(hs, c, to_free);
  if (!m) return 1;
  return m->reserved.count(idx) ? 0 : 1;
}
namespace {

// The allocation for idx went through: shared maps record the index,
// private ones mark the reservation consumed.
void vma_commit_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  if (c.shared()) {
    c.fs->regions.insert(idx);
    return;
  }
  if (HugetlbResvMap* m = ctx_resv(hs, c, to_free)) m->reserved.erase(idx);
}
}  // namespace

// Put a reservation back in the map (error paths, unmapping an owner's page).
void vma_add_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  if (c.shared()) {
    c.fs->regions.insert(idx);
    return;
  }
  HugetlbResvMap* m = ctx_resv(hs, c, to_free);
  if (m && idx >= m->from && idx < m->to) m->reserved.insert(idx);
}
namespace {

void vma_del_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  if (c.shared()) {
    c.fs->regions.erase(idx);
    return;
  }
  if (HugetlbResvMap* m = ctx_resv(hs, c, to_free)) m->reserved.erase(idx);
}
}  // namespace

// alloc_hugetlb_folio: a folio for idx, consuming the reservation held for
// it if any (folio flagged HPG_restore_reserve until it is mapped). Without
// one, a free page not promised to anyone, else a surplus page. cow_from_owner
// (MAP_CHG_ENFORCED): a private owner's CoW of its own anon page, which must
// not use its reserve map. nullptr with *err = -ENOSPC when there is no page.
Folio* alloc_hugetlb_folio(Kernel* k, HugetlbState* hs, const ResvCtx& c, uint64_t idx, bool cow_from_owner,
                           int* err) {
  enum { MAP_CHG_REUSE = 0, MAP_CHG_NEEDED = 1, MAP_CHG_ENFORCED = 2 };
  Hstate* h = c.h;
  std::vector<Folio*> to_free;
  hs->lock.lock();
  int map_chg = cow_from_owner ? MAP_CHG_ENFORCED : (vma_needs_reservation(hs, c, idx, &to_free) ? MAP_CHG_NEEDED : MAP_CHG_REUSE);
  long gbl_chg = map_chg ? 1 : 0;
  Folio* folio = nullptr;
  // dequeue_hugetlb_folio_vma: a page that was not reserved needs a free page
  // beyond the reserved ones.
  if (!(gbl_chg && h->free_huge_pages - h->resv_huge_pages <= 0)) folio = dequeue_hugetlb_folio(hs, h);
  if (!folio) {
    hs->lock.unlock();
    folio = alloc_surplus_hugetlb_folio(k, hs, h);  // alloc_buddy_hugetlb_folio_with_mpol
    hs->lock.lock();
    if (!folio) {
      hs->lock.unlock();
      free_folios(k, to_free);
      *err = -ENOSPC;
      return nullptr;
    }
  }
  if (!gbl_chg) {
    folio_set_hugetlb_restore_reserve(folio);
    h->resv_huge_pages--;
  }
  if (map_chg != MAP_CHG_ENFORCED) {
    // A shared reservation made for idx while we allocated (hugetlb_reserve_pages
    // counted idx as needing one) is one too many: give it back.
    if (map_chg == MAP_CHG_NEEDED && c.shared() && c.fs->regions.count(idx))
      return_unused_surplus_pages(hs, h, 1, &to_free);
    vma_commit_reservation(hs, c, idx, &to_free);
  }
  hs->lock.unlock();
  free_folios(k, to_free);
  *err = 0;
  return folio;
}

// restore_reserve_on_error: a folio from alloc_hugetlb_folio is dropped
// without being mapped; make the reserve map agree with what freeing it will
// do to the global count.
void restore_reserve_on_error(Kernel* k, HugetlbState* hs, const ResvCtx& c, uint64_t idx, Folio* folio) {
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    long rc = vma_needs_reservation(hs, c, idx, &to_free);
    if (folio_test_hugetlb_restore_reserve(folio)) {
      if (rc) vma_add_reservation(hs, c, idx, &to_free);
    } else if (!rc) {
      vma_del_reservation(hs, c, idx, &to_free);
    }
  }
  free_folios(k, to_free);
}

// hugetlb_reserve_pages: reserve the huge pages [from, to) of f for a new
// mapping (vma nullptr: the file itself). 0 or -ENOMEM.
int hugetlb_reserve_pages(Kernel* k, File* f, uint64_t from, uint64_t to, Vma* vma, vm_flags_t vm_flags)
    {
  if (vm_flags & VM_NORESERVE) return 0;
  HugetlbState* hs = hugetlb_state(k);
  HugetlbFileState* fs = f->hstate.get();
  Hstate* h = fs->h;
  const bool shared = !vma || (vma->vm_flags & VM_MAYSHARE);
  long chg = 0;
  if (shared) {
    SpinGuard g(&hs->lock);
    for (uint64_t i = from; i < to; i++) chg += fs->regions.count(i) ? 0 : 1;
  } else {
    chg = static_cast<long>(to - from);
  }
  // The site `hugetlb_resv`: the pool cannot cover the reservation, as when
  // hugetlb_acct_memory (or the subpool, or the cgroup) refuses it.
  if (k->phys->should_fail(FaultSite::hugetlb_resv, h->order)) return -ENOMEM;
  if (hugetlb_acct_memory(k, hs, h, chg) < 0) return -ENOMEM;
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    if (shared) {
      long add = 0;
      for (uint64_t i = from; i < to; i++) add += fs->regions.insert(i).second ? 1 : 0;
      if (chg > add) return_unused_surplus_pages(hs, h, chg - add, &to_free);  // raced with a fault
    } else {
      auto m = std::make_shared<HugetlbResvMap>();
      m->h = h;
      m->mm_id = vma->vm_mm->mm_id;
      m->file = f;
      m->from = from;
      m->to = to;
      for (uint64_t i = from; i < to; i++) m->reserved.insert(m->reserved.end(), i);
      m->refs = 1;
      fs->private_maps.push_back(m);
      auto it = hs->vmas.find(vma->cid);
      if (it != hs->vmas.end()) drop_vma_info(hs, it, &to_free);  // a freed VMA's stale entry
      HugetlbVmaInfo& vi = hs->vmas[vma->cid];
      vi.mm_id = m->mm_id;
      vi.file = f;
      vi.from = from;
      vi.to = to;
      vi.resv = std::move(m);
      vi.unmapped = false;
    }
  }
  free_folios(k, to_free);
  return 0;
}

uint64_t vma_kernel_pagesize(const Vma* vma) {
  if (is_vm_hugetlb_page(vma) && is_hugetlb_file(vma->vm_file.get())) return hstate_vma(vma)->size();
  return PAGE_SIZE;
}

int hugetlb_split_check(Vma* vma, uint64_t addr) {
  if (!is_vm_hugetlb_page(vma)) return 0;
  return (addr & (vma_kernel_pagesize(vma) - 1)) ? -EINVAL : 0;
}

// ---- VMA life cycle ----

void hugetlb_vm_op_open(const Vma* src, Vma* dst) {
  if (!is_vm_hugetlb_page(src) || !is_hugetlb_file(src->vm_file.get()) || (src->vm_flags & VM_MAYSHARE)) return;
  HugetlbState* hs = hugetlb_state(src->vm_mm->kernel);
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    HugetlbVmaInfo* si = vma_info(hs, src, &to_free);
    HugetlbVmaInfo copy = *si;
    auto it = hs->vmas.find(dst->cid);
    if (it != hs->vmas.end()) drop_vma_info(hs, it, &to_free);
    if (copy.resv) copy.resv->refs++;
    const Hstate* h = hstate_vma(dst);
    copy.mm_id = dst->vm_mm->mm_id;
    copy.from = vma_hugecache_offset(h, dst, dst->vm_start);
    copy.to = vma_hugecache_offset(h, dst, dst->vm_end);
    hs->vmas[dst->cid] = std::move(copy);
  }
  free_folios(src->vm_mm->kernel, to_free);
}

void hugetlb_vm_op_close(Vma* vma) {
  if (!is_vm_hugetlb_page(vma) || !is_hugetlb_file(vma->vm_file.get()) || (vma->vm_flags & VM_MAYSHARE)) return;
  Mm* mm = vma->vm_mm;
  HugetlbState* hs = hugetlb_state(mm->kernel);
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    HugetlbVmaInfo* vi = vma_info(hs, vma, &to_free);
    if (vi->resv) {
      // Pieces of the same mapping that were never looked at take their
      // share of the reserve map before this one lets go of it.
      for (auto& [start, v] : mm->vmas) {
        Vma* sib = v.get();
        if (sib != vma && sib->vm_file == vma->vm_file && is_vm_hugetlb_page(sib) && !(sib->vm_flags & VM_MAYSHARE))
          vma_info(hs, sib, &to_free);
      }
      HugetlbResvMap* m = vi->resv.get();
      long n = 0;
      for (auto r = m->reserved.lower_bound(vi->from); r != m->reserved.end() && *r < vi->to;) {
        r = m->reserved.erase(r);
        n++;
      }
      if (n) return_unused_surplus_pages(hs, m->h, n, &to_free);
    }
    drop_vma_info(hs, hs->vmas.find(vma->cid), &to_free);
  }
  free_folios(mm->kernel, to_free);
}

// clear_vma_resv_huge_pages, for mremap (fixup_hugetlb_reservations): the
// source VMA of a move lets go of its reserve map, which lives on in the
// new VMA (vm_ops->open shared it), and its HPAGE_RESV_* flags
// (hugetlb_dup_vma_private). The kernel calls this on the whole source VMA,
// so when only part of a private mapping moved, the unconsumed reservations
// of the part left behind stay in a map whose remaining user never covers
// them: nobody gives them back, and the global count keeps them
// (HugePages_Rsvd) for good. The model forgets them the same way.
void clear_vma_resv_huge_pages(Vma* vma, const Vma* new_vma) {
  if (!is_vm_hugetlb_page(vma) || !is_hugetlb_file(vma->vm_file.get()) || (vma->vm_flags & VM_MAYSHARE)) return;
  HugetlbState* hs = hugetlb_state(vma->vm_mm->kernel);
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    HugetlbVmaInfo* vi = vma_info(hs, vma, &to_free);
    if (std::shared_ptr<HugetlbResvMap> m = std::move(vi->resv)) {
      const HugetlbVmaInfo* ni = vma_info(hs, new_vma, &to_free);
      for (auto r = m->reserved.lower_bound(vi->from); r != m->reserved.end() && *r < vi->to;) {
        if (ni->resv == m && *r >= ni->from && *r < ni->to) {
          ++r;
        } else {
          r = m->reserved.erase(r);  // leaked: resv_huge_pages keeps it
          m->h->resv_forgotten++;
        }
      }
      if (--m->refs == 0) release_resv_map(hs, m.get(), &to_free);
    }
    vi->unmapped = false;
  }
  free_folios(vma->vm_mm->kernel, to_free);
}

// ---- the invariant checker's audit ----

namespace {

std::string fmt_hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

// In-use hugetlb folios flagged HPG_restore_reserve, per pool. Pool folios
// are naturally aligned, so only their possible head frames are looked at.
std::array<long, 2> count_restore_reserve_folios(Kernel* k) {
  std::array<long, 2> n{};
  PhysMem* phys = k->phys.get();
  const uint64_t step = 1ull << PMD_ORDER;
  for (pfn_t pfn = 0; pfn + step <= phys->nr_frames(); pfn += step) {
    if (phys->page_is_free(pfn)) continue;
    Page* p = phys->pfn_to_page(pfn);
    Folio* f = page_folio(p);
    if (&f->page != p || !folio_test_hugetlb(f) || folio_ref_count(f) <= 0) continue;
    if (folio_test_hugetlb_restore_reserve(f)) n[hstate_index(folio_order(f))]++;
  }
  return n;
}
}  // namespace

std::string hugetlb_resv_audit(Kernel* k, const std::vector<Mm*>& live) {
  HugetlbState* hs = hugetlb_state(k);
  const std::array<long, 2> flagged = count_restore_reserve_folios(k);
  SpinGuard g(&hs->lock);
  // The reserve maps that live private hugetlb VMAs use (a split piece
  // nobody looked at yet shares its sibling's map, which is found through
  // the sibling).
  std::set<const HugetlbResvMap*> live_maps;
  std::set<uint64_t> live_vmas;  // creation ids
  for (Mm* mm : live) {
    for (auto& [start, v] : mm->vmas) {
      live_vmas.insert(v->cid);
      auto it = hs->vmas.find(v->cid);
      if (it == hs->vmas.end() || it->second.mm_id != mm->mm_id || it->second.file != v->vm_file.get()) continue;
      const HugetlbResvMap* m = it->second.resv.get();
      if (!m) continue;
      live_maps.insert(m);
      // A reserved index maps no private page: the fault that allocates
      // one consumes the reservation. It may map the file's page-cache
      // folio (read-only): a read fault of a page the hugetlbfs file has
      // cached maps that folio and keeps the reservation for the CoW to
      // come (hugetlb_no_page()).
      const Hstate* h = m->h;
      for (auto r = m->reserved.lower_bound(it->second.from); r != m->reserved.end() && *r < it->second.to; ++r) {
        const uint64_t addr = v->vm_start + ((*r - (v->vm_pgoff >> h->order)) << h->shift());
        HPte e = hugetlb_walk(mm, addr, h);
        if (!e) continue;
        const pmd_t leaf = hget(e);
        if (pmd_none(leaf) || !pmd_present(leaf)) continue;
        const Folio* folio = page_folio(mm->phys->pfn_to_page(pmd_pfn(leaf)));
        if (!folio_test_anon(folio)) continue;
        return "huge-page index " + std::to_string(*r) + " of a private mapping (mm " + std::to_string(mm->mm_id) +
               ") holds a reservation and maps a private page at " + fmt_hex(addr);
      }
    }
  }
  std::array<long, 2> outstanding{};
  for (const HugetlbResvMap* m : live_maps) outstanding[hstate_index(m->h->order)] += static_cast<long>(m->reserved.size());
  for (auto& [vma, vi] : hs->vmas) {
    const HugetlbResvMap* m = vi.resv.get();
    if (!m || m->reserved.empty() || live_maps.count(m)) continue;
    return "a reserve map (mm " + std::to_string(m->mm_id) + ", huge-page indices " + std::to_string(m->from) + "-" +
           std::to_string(m->to) + ") that no live VMA uses still holds " + std::to_string(m->reserved.size()) +
           " reservations" + (live_vmas.count(vma) ? "" : " (its VMA was freed without hugetlb_vm_op_close)");
  }
  for (const HugetlbFileState* fs : hs->files) {
    const long resv = static_cast<long>(fs->regions.size()) - fs->cached;
    if (resv < 0) return "a hugetlbfs file has " + std::to_string(fs->cached) + " cached folios but only " +
                         std::to_string(fs->regions.size()) + " indices in its region map";
    outstanding[hstate_index(fs->h->order)] += resv;
  }
  for (unsigned i = 0; i < hs->hstates.size(); i++) {
    const Hstate& h = hs->hstates[i];
    const long want = outstanding[i] - flagged[i] + h.resv_forgotten;
    if (h.resv_huge_pages != want)
      return std::to_string(h.size() / 1024) + "kB: resv_huge_pages " + std::to_string(h.resv_huge_pages) +
             " != outstanding reservations " + std::to_string(want) + " (reserve maps and hugetlbfs files " +
             std::to_string(outstanding[i]) + ", in-use folios to restore one when freed " + std::to_string(flagged[i]) +
             ", forgotten by partial mremap " + std::to_string(h.resv_forgotten) + ")";
  }
  return "";
}

}  // namespace mmlab
