// hugetlb (mm/hugetlb.c, fs/hugetlbfs/inode.c): the pools, reservations,
// hugetlbfs files and their page cache, hugetlb faults (hugetlb_fault,
// hugetlb_no_page, hugetlb_wp with unmap_ref_private), zap, fork, mprotect
// and mremap (move_hugetlb_page_tables, clear_vma_resv_huge_pages) of PMD
// (2 MiB) and PUD (1 GiB) leaves.
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
//     in the kernel (clear_vma_resv_huge_pages).
#include <atomic>
#include "fault/hugetlb.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "fault/fault.h"
#include "mm/file.h"
#include "mm/internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/vmdebug.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"

namespace mmlab {

HugetlbState::HugetlbState() {
  hstates[0].order = PMD_ORDER;
  hstates[1].order = PUD_ORDER;
}

// Teardown: files that outlive us (the Kernel destroys its FileTable after
// us) must not reach back, and hugetlb folios freed from now on just vanish
// with the frame store.
HugetlbState::~HugetlbState() {
  {
    SpinGuard g(&lock);
    for (HugetlbFileState* fs : files) fs->kernel = nullptr;
    files.clear();
  }
  Kernel* k = kernel.load(std::memory_order_acquire);
  if (k && k->phys) {
    FolioFreeHook old = k->phys->folio_free_hook();
    k->phys->set_folio_free_hook([old](Folio* f) {
      if (folio_test_hugetlb(f)) return true;
      return old ? old(f) : false;
    });
  }
}

namespace {

// ---- small helpers ----

HugetlbState* hugetlb_state(Kernel* k) {
  HugetlbState* hs = k->hugetlb.get();
  if (!hs->kernel.load(std::memory_order_relaxed)) hs->kernel.store(k, std::memory_order_release);
  return hs;
}

unsigned hstate_index(unsigned order) { return order == PUD_ORDER ? 1 : 0; }

Hstate* hstate_file(const File* f) { return f->hstate->h; }
Hstate* hstate_vma(const Vma* vma) { return hstate_file(vma->vm_file.get()); }

bool is_hugetlb_file(const File* f) { return f && f->hstate; }

// vma_hugecache_offset: the huge-page index in the file of addr.
uint64_t vma_hugecache_offset(const Hstate* h, const Vma* vma, uint64_t addr) {
  return ((addr - vma->vm_start) >> h->shift()) + (vma->vm_pgoff >> h->order);
}

// folio->private flags of hugetlb folios (HPG_*).
constexpr uint64_t HPG_restore_reserve = 1ull << 0;

bool folio_test_hugetlb_restore_reserve(const Folio* f) {
  return aref(const_cast<uint64_t&>(f->page.private_)).load(std::memory_order_acquire) & HPG_restore_reserve;
}
void folio_set_hugetlb_restore_reserve(Folio* f) {
  aref(f->page.private_).fetch_or(HPG_restore_reserve, std::memory_order_acq_rel);
}
void folio_clear_hugetlb_restore_reserve(Folio* f) {
  aref(f->page.private_).fetch_and(~HPG_restore_reserve, std::memory_order_acq_rel);
}

void note_nr(Kernel* k, const Hstate* h) {
  auto& s = h->order == PUD_ORDER ? k->settings.nr_hugepages_1g : k->settings.nr_hugepages_2m;
  s.store(h->nr_huge_pages, std::memory_order_relaxed);
}

long persistent_huge_pages(const Hstate* h) { return h->nr_huge_pages - h->surplus_huge_pages; }

vm_fault_t vmf_error(int err) { return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS; }

// ---- the huge "pte": a PMD entry (2 MiB) or a PUD entry (1 GiB) ----
//
// Both levels use the x86 leaf format, so values are handled as pmd_t.

struct HPte {
  pmd_t* pmd = nullptr;
  pud_t* pud = nullptr;
  explicit operator bool() const { return pmd || pud; }
};

pmd_t hget(HPte e) { return e.pmd ? pmdp_get(e.pmd) : pmd_t{pudp_get(e.pud).v}; }
void hset(HPte e, pmd_t v) {
  if (e.pmd) entry_set(e.pmd, v);
  else entry_set(e.pud, pud_t{v.v});
}
pmd_t hclear(HPte e) { return e.pmd ? entry_xchg(e.pmd, pmd_t{0}) : pmd_t{entry_xchg(e.pud, pud_t{0}).v}; }

// huge_pte_lock: the PMD split lock for 2 MiB leaves, mm->page_table_lock
// (pud_lock) for 1 GiB leaves.
SpinLock* huge_pte_lock(Mm* mm, HPte e) { return e.pmd ? pmd_lock(mm, e.pmd) : pud_lock(mm, e.pud); }
// The same lock taken as the inner of two (fork: source under destination).
SpinLock* huge_pte_lock_nested(Mm* mm, HPte e) NO_THREAD_SAFETY_ANALYSIS {
  SpinLock* l = e.pmd ? pmd_lockptr(mm, e.pmd) : pud_lockptr(mm, e.pud);
  l->lock(e.pmd ? LockClass::kPmdLock : LockClass::kPageTableLock, kSingleDepthNesting);
  if (e.pmd) mm->stats->count(Event::pmd_lock);
  return l;
}

// hugetlb_walk / huge_pte_offset: the entry for addr, or none if the table
// above is missing.
HPte hugetlb_walk(Mm* mm, uint64_t addr, const Hstate* h) {
  if (h->order == PUD_ORDER) return HPte{nullptr, mm_find_pud(mm, addr)};
  return HPte{mm_find_pmd(mm, addr), nullptr};
}

// hugetlb_mask_last_page: skip to the last huge page the missing table covers.
uint64_t hugetlb_mask_last_page(const Hstate* h) {
  return h->order == PUD_ORDER ? PGDIR_SIZE - PUD_SIZE : PUD_SIZE - PMD_SIZE;
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

void hugetlb_add_file_rmap(Folio* f, const Vma* vma) {
  VM_BUG_ON_FOLIO(!folio_test_hugetlb(f), f, "hugetlb rmap on a non-hugetlb folio");
  VM_BUG_ON_FOLIO(folio_test_anon(f), f, "hugetlb file rmap on an anon folio");
  hugetlb_mapcount_inc(f, vma);
}

void hugetlb_remove_rmap(Folio* f, const Vma* vma) { hugetlb_mapcount_dec(f, vma); }

// hugetlb_add_new_anon_rmap: a brand-new private folio, exclusive (head only).
void hugetlb_add_new_anon_rmap(Folio* f, Vma* vma, uint64_t addr) {
  VM_BUG_ON_FOLIO(!folio_test_hugetlb(f), f, "hugetlb rmap on a non-hugetlb folio");
  VM_BUG_ON_FOLIO(folio_mapped(f), f, "new hugetlb anon folio already mapped");
  hugetlb_mapcount_inc(f, vma);
  folio_clear_hugetlb_restore_reserve(f);
  aref(f->page.mapping).store(reinterpret_cast<uint64_t>(vma->anon_vma), std::memory_order_release);
  f->page.index = linear_page_index(vma, addr);
  folio_set_anon(f);
  SetPageAnonExclusive(&f->page);
}

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

// ---- mm->hugetlb_usage ----

void hugetlb_count_add(HugetlbState* hs, Mm* mm, long n) {
  SpinGuard g(&hs->lock);
  long& v = hs->usage[mm->mm_id];
  v += n;
  if (v == 0) hs->usage.erase(mm->mm_id);
}

// ---- the pools ----

void enqueue_hugetlb_folio(HugetlbState* hs, Hstate* h, Folio* f) REQUIRES(hs->lock) {
  (void)hs;
  h->freelist.push_back(f);
  h->free_huge_pages++;
}

Folio* dequeue_hugetlb_folio(HugetlbState* hs, Hstate* h) REQUIRES(hs->lock) {
  (void)hs;
  if (h->freelist.empty()) return nullptr;
  Folio* f = h->freelist.back();
  h->freelist.pop_back();
  h->free_huge_pages--;
  return f;
}

// remove_pool_hugetlb_folio: a free folio leaves the pool (to be freed).
Folio* remove_pool_hugetlb_folio(HugetlbState* hs, Hstate* h, bool acct_surplus) REQUIRES(hs->lock) {
  Folio* f = dequeue_hugetlb_folio(hs, h);
  if (!f) return nullptr;
  h->nr_huge_pages--;
  if (acct_surplus) h->surplus_huge_pages--;
  return f;
}

// A fresh folio for the pool (alloc_fresh_hugetlb_folio): from the buddy
// allocator for 2 MiB, a contiguous range for 1 GiB. Refcount 1.
Folio* alloc_fresh_hugetlb_folio(Kernel* k, const Hstate* h) {
  // htlb_alloc_mask: movable unless gigantic (gigantic pages cannot migrate).
  gfp_t gfp = h->gigantic() ? __GFP_NOWARN : (__GFP_MOVABLE | __GFP_NOWARN);
  Folio* f = k->phys->folio_alloc(gfp, h->order);
  if (!f) return nullptr;
  aref(f->page.private_).store(0, std::memory_order_relaxed);
  folio_set_hugetlb(f);
  return f;
}

// __update_and_free_hugetlb_folio: the frames of a folio with refcount 0 go
// back to the page allocator.
void free_hugetlb_frames(Kernel* k, Folio* f) {
  folio_clear_hugetlb(f);
  aref(f->page.private_).store(0, std::memory_order_relaxed);
  k->phys->free_folio(f);
}

// update_and_free_hugetlb_folio for a folio taken off the free list: drop the
// pool's reference (folio_ref_freeze: wait out a speculative walker's), free.
void update_and_free_hugetlb_folio(Kernel* k, Folio* f) {
  auto r = aref(f->page.refcount);
  for (;;) {
    int one = 1;
    if (r.compare_exchange_weak(one, 0, std::memory_order_acq_rel)) break;
    std::this_thread::yield();
  }
  free_hugetlb_frames(k, f);
}

void free_folios(Kernel* k, std::vector<Folio*>& v) {
  for (Folio* f : v) update_and_free_hugetlb_folio(k, f);
  v.clear();
}

// alloc_surplus_hugetlb_folio: a page beyond the persistent pool, allowed up
// to nr_overcommit_hugepages (never gigantic). Returned in use (refcount 1).
Folio* alloc_surplus_hugetlb_folio(Kernel* k, HugetlbState* hs, Hstate* h) {
  if (h->gigantic()) return nullptr;
  {
    SpinGuard g(&hs->lock);
    if (h->surplus_huge_pages >= h->nr_overcommit_huge_pages) return nullptr;
  }
  Folio* f = alloc_fresh_hugetlb_folio(k, h);
  if (!f) return nullptr;
  SpinGuard g(&hs->lock);
  if (h->surplus_huge_pages >= h->nr_overcommit_huge_pages) {
    g.unlock();
    aref(f->page.refcount).store(0, std::memory_order_release);
    free_hugetlb_frames(k, f);
    return nullptr;
  }
  h->nr_huge_pages++;
  h->surplus_huge_pages++;
  note_nr(k, h);
  return f;
}

// return_unused_surplus_pages: drop unused reservations and free up to as
// many surplus pages (into *to_free, freed by the caller after unlocking).
void return_unused_surplus_pages(HugetlbState* hs, Hstate* h, long unused, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  h->resv_huge_pages -= unused;
  long nr = std::min(unused, h->surplus_huge_pages);
  while (nr-- > 0) {
    Folio* f = remove_pool_hugetlb_folio(hs, h, true);
    if (!f) break;
    to_free->push_back(f);
  }
  if (Kernel* k = hs->kernel.load(std::memory_order_relaxed)) note_nr(k, h);
}

// gather_surplus_pages: make delta more reservations, allocating surplus
// pages when the free pages do not cover them. 0 or -ENOMEM.
int gather_surplus_pages(Kernel* k, HugetlbState* hs, Hstate* h, long delta) NO_THREAD_SAFETY_ANALYSIS {
  std::vector<Folio*> surplus;
  hs->lock.lock();
  long needed = h->resv_huge_pages + delta - h->free_huge_pages;
  if (needed <= 0) {
    h->resv_huge_pages += delta;
    hs->lock.unlock();
    return 0;
  }
  int ret = -ENOMEM;
  bool alloc_ok = true;
  for (;;) {
    hs->lock.unlock();
    for (long i = 0; i < needed; i++) {
      Folio* f = alloc_surplus_hugetlb_folio(k, hs, h);
      if (!f) {
        alloc_ok = false;
        break;
      }
      surplus.push_back(f);
    }
    hs->lock.lock();
    needed = h->resv_huge_pages + delta - (h->free_huge_pages + static_cast<long>(surplus.size()));
    if (needed > 0) {
      if (alloc_ok) continue;
      break;
    }
    needed += static_cast<long>(surplus.size());
    h->resv_huge_pages += delta;
    ret = 0;
    // The pages needed join the free list (the pool keeps their reference).
    while (needed-- > 0 && !surplus.empty()) {
      enqueue_hugetlb_folio(hs, h, surplus.back());
      surplus.pop_back();
    }
    break;
  }
  hs->lock.unlock();
  for (Folio* f : surplus) folio_put(f);  // unneeded surplus: back to the page allocator
  return ret;
}

// hugetlb_acct_memory: change the global reservation count by delta.
int hugetlb_acct_memory(Kernel* k, HugetlbState* hs, Hstate* h, long delta) {
  if (!delta) return 0;
  std::vector<Folio*> to_free;
  if (delta > 0) {
    if (gather_surplus_pages(k, hs, h, delta) < 0) return -ENOMEM;
    SpinGuard g(&hs->lock);
    // allowed_mems_nr(): one node, every page allowed.
    if (delta > h->free_huge_pages) {
      return_unused_surplus_pages(hs, h, delta, &to_free);
      g.unlock();
      free_folios(k, to_free);
      return -ENOMEM;
    }
    return 0;
  }
  {
    SpinGuard g(&hs->lock);
    return_unused_surplus_pages(hs, h, -delta, &to_free);
  }
  free_folios(k, to_free);
  return 0;
}

// set_max_huge_pages: grow the persistent pool to count pages (stopping at
// the first allocation failure), or shrink it: free pages beyond in-use and
// reserved ones go back, and the rest of the excess becomes surplus, freed
// as it is released.
void set_max_huge_pages(Kernel* k, HugetlbState* hs, Hstate* h, long count) NO_THREAD_SAFETY_ANALYSIS {
  std::vector<Folio*> to_free;
  hs->lock.lock();
  while (h->surplus_huge_pages && count > persistent_huge_pages(h)) h->surplus_huge_pages--;  // adjust_pool_surplus(-1)
  while (count > persistent_huge_pages(h)) {
    hs->lock.unlock();
    Folio* f = alloc_fresh_hugetlb_folio(k, h);
    hs->lock.lock();
    if (!f) break;
    h->nr_huge_pages++;
    enqueue_hugetlb_folio(hs, h, f);
  }
  long min_count = h->resv_huge_pages + h->nr_huge_pages - h->free_huge_pages;
  min_count = std::max(count, min_count);
  while (min_count < persistent_huge_pages(h)) {
    Folio* f = remove_pool_hugetlb_folio(hs, h, false);
    if (!f) break;
    to_free.push_back(f);
  }
  while (count < persistent_huge_pages(h)) {  // adjust_pool_surplus(+1)
    if (h->surplus_huge_pages >= h->nr_huge_pages) break;
    h->surplus_huge_pages++;
  }
  h->max_huge_pages = persistent_huge_pages(h);
  note_nr(k, h);
  hs->lock.unlock();
  free_folios(k, to_free);
}

// ---- per-VMA reserve state (vm_private_data) ----

void release_resv_map(HugetlbState* hs, HugetlbResvMap* m, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  long n = static_cast<long>(m->reserved.size());
  m->reserved.clear();
  if (n) return_unused_surplus_pages(hs, m->h, n, to_free);
}

// Drop a VMA's entry (kref_put of its reserve map: the last user gives back
// what is left).
void drop_vma_info(HugetlbState* hs, std::map<const Vma*, HugetlbVmaInfo>::iterator it,
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
  auto it = hs->vmas.find(vma);
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
  HugetlbVmaInfo& slot = hs->vmas[vma];
  slot = std::move(vi);
  return &slot;
}

bool vma_is_resv_owner(HugetlbState* hs, const Vma* vma, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  HugetlbVmaInfo* vi = vma_info(hs, vma, to_free);
  return vi && vi->resv;
}

// ---- reservation transactions (vma_needs/commit/add/del_reservation) ----
//
// The subject of an allocation: a VMA, or a file (fallocate's pseudo VMA).

struct ResvCtx {
  File* file;
  HugetlbFileState* fs;
  Hstate* h;
  const Vma* vma;  // nullptr: shared, as fallocate's pseudo VMA
  bool shared() const { return !vma || (vma->vm_flags & VM_MAYSHARE); }
};

ResvCtx ctx_of(const Vma* vma) {
  File* f = vma->vm_file.get();
  return ResvCtx{f, f->hstate.get(), f->hstate->h, vma};
}
ResvCtx ctx_of(File* f) { return ResvCtx{f, f->hstate.get(), f->hstate->h, nullptr}; }

HugetlbResvMap* ctx_resv(HugetlbState* hs, const ResvCtx& c, std::vector<Folio*>* to_free) REQUIRES(hs->lock) {
  HugetlbVmaInfo* vi = vma_info(hs, c.vma, to_free);
  return vi ? vi->resv.get() : nullptr;
}

// 1: idx needs a reservation of its own; 0: one is held for it.
long vma_needs_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  if (c.shared()) return c.fs->regions.count(idx) ? 0 : 1;
  HugetlbResvMap* m = ctx_resv(hs, c, to_free);
  if (!m) return 1;
  return m->reserved.count(idx) ? 0 : 1;
}

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

void vma_del_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  if (c.shared()) {
    c.fs->regions.erase(idx);
    return;
  }
  if (HugetlbResvMap* m = ctx_resv(hs, c, to_free)) m->reserved.erase(idx);
}

// alloc_hugetlb_folio: a folio for idx, consuming the reservation held for
// it if any (folio flagged HPG_restore_reserve until it is mapped). Without
// one, a free page not promised to anyone, else a surplus page. cow_from_owner
// (MAP_CHG_ENFORCED): a private owner's CoW of its own anon page, which must
// not use its reserve map. nullptr with *err = -ENOSPC when there is no page.
Folio* alloc_hugetlb_folio(Kernel* k, HugetlbState* hs, const ResvCtx& c, uint64_t idx, bool cow_from_owner,
                           int* err) NO_THREAD_SAFETY_ANALYSIS {
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
    NO_THREAD_SAFETY_ANALYSIS {
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
      auto it = hs->vmas.find(vma);
      if (it != hs->vmas.end()) drop_vma_info(hs, it, &to_free);  // a freed VMA's stale entry
      HugetlbVmaInfo& vi = hs->vmas[vma];
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

// ---- the page cache of hugetlbfs files ----

std::mutex& hugetlb_fault_mutex(HugetlbState* hs, const File* f, uint64_t idx) {
  uint64_t key = (reinterpret_cast<uintptr_t>(f) >> 4) * 0x9E3779B97F4A7C15ull ^ (idx * 0xC2B2AE3D27D4EB4Full);
  return hs->fault_mutex[(key >> 32) % HugetlbState::kFaultMutexes];
}

// filemap_lock_hugetlb_folio: the page-cache folio at huge index idx,
// referenced and locked, or nullptr.
Folio* filemap_lock_hugetlb_folio(File* f, const Hstate* h, uint64_t idx) {
  Folio* folio = nullptr;
  {
    std::lock_guard<std::mutex> g(f->lock);
    auto it = f->pages.find(idx << h->order);
    if (it != f->pages.end()) {
      folio = it->second;
      folio_get(folio);
    }
  }
  if (!folio) return nullptr;
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f)) {
    folio_unlock(folio);  // removed from the cache meanwhile
    folio_put(folio);
    return nullptr;
  }
  return folio;
}

// hugetlb_add_to_page_cache: insert a new folio (locked on return). The page
// cache holds one reference per page. 0 or -EEXIST.
int hugetlb_add_to_page_cache(Folio* folio, File* f, const Hstate* h, uint64_t idx) {
  const uint64_t index = idx << h->order;
  // __folio_set_locked: nobody else can see the folio yet. Before f->lock,
  // which is a leaf lock.
  bool locked = folio_trylock(folio);
  VM_BUG_ON_FOLIO(!locked, folio, "new hugetlb folio already locked");
  (void)locked;
  folio->page.index = index;
  aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
  folio_clear_hugetlb_restore_reserve(folio);
  folio_set_dirty(folio);  // never written back: keep it from being dropped
  folio_ref_add(folio, static_cast<int>(folio_nr_pages(folio)));
  bool added = false;
  {
    std::lock_guard<std::mutex> g(f->lock);
    if (!f->pages.count(index)) {
      f->pages.emplace(index, folio);
      added = true;
    }
  }
  if (added) {
    HugetlbState* hs = f->kernel->hugetlb.get();
    SpinGuard hg(&hs->lock);
    f->hstate->cached++;
    return 0;
  }
  folio_ref_sub_and_test(folio, static_cast<int>(folio_nr_pages(folio)));  // the caller's reference remains
  aref(folio->page.mapping).store(0, std::memory_order_release);
  folio_unlock(folio);
  return -EEXIST;
}

void folio_zero_huge(Folio* folio, Stats* st) {
  const uint64_t bytes = static_cast<uint64_t>(folio_nr_pages(folio)) * PAGE_SIZE;
  zero_folio_frames(PhysMem::of(&folio->page), static_cast<uint8_t*>(folio_address(folio)), folio_nr_pages(folio), -1);
  st->count(Event::zero_bytes, bytes);
}

void copy_user_large_folio(Folio* dst, Folio* src, Stats* st) {
  const uint64_t bytes = static_cast<uint64_t>(folio_nr_pages(src)) * PAGE_SIZE;
  copy_frames(PhysMem::of(&src->page), folio_address(dst), folio_address(src), bytes);
  st->count(Event::copy_bytes, bytes);
}

// remove_inode_hugepages + hugetlb_unreserve_pages for the whole file.
void evict_hugetlb_file(File* f, HugetlbFileState* fs) {
  Kernel* k = fs->kernel;
  if (!k) return;
  HugetlbState* hs = k->hugetlb.get();
  std::vector<Folio*> folios;
  {
    std::lock_guard<std::mutex> g(f->lock);
    for (auto& [index, folio] : f->pages) folios.push_back(folio);
    f->pages.clear();
  }
  const long freed = static_cast<long>(folios.size());
  for (Folio* folio : folios) {
    VM_BUG_ON_FOLIO(folio_mapped(folio), folio, "evicting a mapped hugetlb folio");
    aref(folio->page.mapping).store(0, std::memory_order_release);
    folio_put_refs(folio, static_cast<int>(folio_nr_pages(folio)));
  }
  (void)freed;
  // Every instantiated page consumed its index's reservation; the File's
  // destructor may have dropped them already (it runs before ours).
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    long chg = static_cast<long>(fs->regions.size());
    long instantiated = fs->cached;
    fs->regions.clear();
    fs->cached = 0;
    VM_BUG_ON(chg < instantiated, "hugetlb page cache outside the reserve map");
    if (chg > instantiated) return_unused_surplus_pages(hs, fs->h, chg - instantiated, &to_free);
  }
  free_folios(k, to_free);
}

// ---- unmapping ----

void hugetlb_count_sub(HugetlbState* hs, Mm* mm, long n) { hugetlb_count_add(hs, mm, -n); }

// __unmap_hugepage_range: clear the leaves of [start, end) (huge-page
// aligned). With ref_folio, only that folio's entry, and the VMA is marked
// HPAGE_RESV_UNMAPPED (unmap_ref_private). Returns the entries cleared.
long __unmap_hugepage_range(Vma* vma, uint64_t start, uint64_t end, Folio* ref_folio) NO_THREAD_SAFETY_ANALYSIS {
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
    flush_tlb_range(vma, addr, addr + sz);
    if (pmd_dirty(v)) folio_set_dirty(folio);
    hugetlb_count_sub(hs, mm, h->pages_per_huge_page());
    hugetlb_remove_rmap(folio, vma);
    ptl->unlock();
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

// unmap_ref_private: the reservation owner cannot CoW for want of a page;
// take the page away from the other private mappers of that file range
// (fork children), who will get SIGBUS if they touch it again. The
// candidates come from the file's i_mmap; if nobody maintains it, from the
// folio's anon_vma. Returns how many mappings were removed.
long unmap_ref_private(Vma* vma, Folio* folio, uint64_t address) NO_THREAD_SAFETY_ANALYSIS {
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
  bool any = false;
  {
    WriteGuard g(&file->i_mmap_rwsem);
    for (Vma* iter : file->i_mmap) {
      if (iter != vma) any = true;
      n += try_unmap(iter);
    }
  }
  if (!any && folio_test_anon(folio)) {
    // rmap_walk_anon: every VMA that may map the folio is on its anon_vma.
    auto* av = reinterpret_cast<AnonVma*>(aref(folio->page.mapping).load(std::memory_order_acquire));
    if (av) {
      ReadGuard g(&av->rwsem);
      for (Vma* iter : av->vmas) n += try_unmap(iter);
    }
  }
  return n;
}

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
  std::mutex* fm;         // the fault mutex, held throughout
  HPte pte;
  pmd_t orig;
  SpinLock* ptl = nullptr;
};

bool hugetlb_pte_stable(HugeFault* f) NO_THREAD_SAFETY_ANALYSIS {
  SpinLock* ptl = huge_pte_lock(f->mm, f->pte);
  bool same = hget(f->pte) == f->orig;
  ptl->unlock();
  return same;
}

// hugetlb_wp: a write (or unshare) fault on a read-only leaf. PTL held on
// entry and on return; the fault mutex is held (dropped around
// unmap_ref_private).
vm_fault_t hugetlb_wp(HugeFault* f) NO_THREAD_SAFETY_ANALYSIS {
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
        f->fm->unlock();
        long n = unmap_ref_private(vma, old_folio, f->address);
        f->fm->lock();
        f->ptl = huge_pte_lock(mm, f->pte);
        if (n > 0 && hget(f->pte) == pte) continue;
        // Nothing could be unmapped (the model's guard against a loop when
        // no rmap reaches the other mappers): fail like a non-owner.
        return n > 0 ? 0 : VM_FAULT_SIGBUS;
      }
      folio_put(old_folio);
      f->ptl = huge_pte_lock(mm, f->pte);
      return vmf_error(err);
    }
    vm_fault_t ret = __vmf_anon_prepare(f->vma, f->flags);
    if (!ret) {
      copy_user_large_folio(new_folio, old_folio, mm->stats);
      folio_set_uptodate(new_folio);
      f->ptl = huge_pte_lock(mm, f->pte);
      if (hget(f->pte) == pte) {
        pmd_t newpte = make_huge_pte(vma, new_folio, !unshare);
        if (pmd_uffd_wp(pte)) newpte = pmd_mkuffd_wp(newpte);
        // Break CoW or unshare: the old entry goes (and is flushed) first.
        hclear(f->pte);
        flush_tlb_range(vma, f->address, f->address + f->h->size());
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
    return ret;
  }
}

// hugetlb_no_page: fault on an empty entry. Releases the fault mutex.
vm_fault_t hugetlb_no_page(HugeFault* f) NO_THREAD_SAFETY_ANALYSIS {
  Vma* vma = f->vma;
  Mm* mm = f->mm;
  const ResvCtx c = ctx_of(vma);
  vm_fault_t ret = VM_FAULT_SIGBUS;
  bool new_anon = false;
  bool folio_locked = true;
  Folio* folio = nullptr;
  auto out = [&]() {
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
    folio = alloc_hugetlb_folio(f->k, f->hs, c, f->idx, false, &err);
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

// ---- sysfs ----

// "hugepages/hugepages-<kB>kB/<attr>" -> the hstate and the attribute.
bool parse_hugetlb_path(HugetlbState* hs, const std::string& path, Hstate** h, std::string* attr) {
  const std::string pre = "hugepages/hugepages-";
  if (path.rfind(pre, 0) != 0) return false;
  size_t kb_end = path.find("kB/", pre.size());
  if (kb_end == std::string::npos) return false;
  std::string kb = path.substr(pre.size(), kb_end - pre.size());
  *attr = path.substr(kb_end + 3);
  for (Hstate& s : hs->hstates) {
    if (kb == std::to_string(s.size() / 1024)) {
      *h = &s;
      return true;
    }
  }
  return false;
}

// kstrtoul(buf, 10): decimal digits, one trailing newline allowed.
bool parse_count(std::string v, long* out) {
  if (!v.empty() && v.back() == '\n') v.pop_back();
  if (v.empty() || v.size() > 18) return false;
  long n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return false;
    n = n * 10 + (ch - '0');
  }
  *out = n;
  return true;
}

}  // namespace

// ---- HugetlbFileState ----

HugetlbFileState::~HugetlbFileState() {
  Kernel* k = kernel;
  if (!k) return;  // the Kernel's hugetlb state is already gone
  HugetlbState* hs = k->hugetlb.get();
  evict_hugetlb_file(file, this);
  std::vector<Folio*> to_free;
  {
    SpinGuard g(&hs->lock);
    hs->files.erase(this);
    for (auto& m : private_maps) release_resv_map(hs, m.get(), &to_free);
    private_maps.clear();
    // The VMAs mapping this file are gone (they held references to it).
    for (auto it = hs->vmas.begin(); it != hs->vmas.end();) {
      if (it->second.file == file) it = hs->vmas.erase(it);
      else ++it;
    }
  }
  free_folios(k, to_free);
}

// ---- the folio-free hook ----

bool free_huge_folio(Kernel* k, Folio* folio) NO_THREAD_SAFETY_ANALYSIS {
  if (!folio_test_hugetlb(folio)) return false;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = &hs->hstates[hstate_index(folio_order(folio))];
  VM_BUG_ON_FOLIO(folio_ref_count(folio) != 0, folio, "freeing a referenced hugetlb folio");
  VM_BUG_ON_FOLIO(folio_mapcount(folio) != 0, folio, "freeing a mapped hugetlb folio");
  const bool restore_reserve = folio_test_hugetlb_restore_reserve(folio);
  // Back to a clean pool page: no anon/page-cache identity, no state bits.
  aref(folio->page.mapping).store(0, std::memory_order_relaxed);
  folio->page.index = 0;
  aref(folio->page.private_).store(0, std::memory_order_relaxed);
  const uint64_t keep = (1ull << PG_head) | (1ull << PG_hugetlb) | PG_ORDER_MASK;
  aref(folio->page.flags).fetch_and(keep, std::memory_order_acq_rel);
  clear_bit(PG_maybe_shared, folio_page(folio, 1));

  hs->lock.lock();
  if (restore_reserve) h->resv_huge_pages++;
  if (h->surplus_huge_pages) {  // a surplus page leaves the pool
    h->nr_huge_pages--;
    h->surplus_huge_pages--;
    note_nr(k, h);
    hs->lock.unlock();
    free_hugetlb_frames(k, folio);
    return true;
  }
  aref(folio->page.refcount).store(1, std::memory_order_release);  // the pool's reference
  enqueue_hugetlb_folio(hs, h, folio);
  hs->lock.unlock();
  return true;
}

// ---- files ----

std::shared_ptr<File> hugetlb_file_setup(Kernel* k, uint64_t len, unsigned huge_shift, int* err) {
  if (huge_shift == 0) huge_shift = PMD_SHIFT;  // default_hstate
  if (huge_shift != PMD_SHIFT && huge_shift != PUD_SHIFT) {
    *err = -EINVAL;
    return nullptr;
  }
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = &hs->hstates[hstate_index(huge_shift - PAGE_SHIFT)];
  const uint64_t size = round_up(len, h->size());
  if (size < len) {
    *err = -ENOMEM;
    return nullptr;
  }
  auto f = std::make_shared<File>();
  f->kernel = k;
  f->name = "anon_hugepage";
  f->size = size;
  f->fs = FsClass::kHugetlbfs;
  f->hugetlb_order = h->order;
  f->hstate = std::make_unique<HugetlbFileState>(k, f.get(), h);
  {
    SpinGuard g(&hs->lock);
    hs->files.insert(f->hstate.get());
  }
  *err = 0;
  return f;
}

int hugetlb_file_mmap(File* f, Vma* vma) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  Hstate* h = hstate_file(f);
  // Set first, so that an unwinding do_mmap unmaps it as hugetlb.
  vma->vm_flags |= VM_HUGETLB | VM_DONTEXPAND;
  if (!is_aligned(vma->vm_start, h->size()) || !is_aligned(vma->vm_end, h->size())) return -EINVAL;
  if (vma->vm_pgoff & (static_cast<uint64_t>(h->pages_per_huge_page()) - 1)) return -EINVAL;
  const uint64_t vma_len = vma->vm_end - vma->vm_start;
  const uint64_t len = vma_len + (vma->vm_pgoff << PAGE_SHIFT);
  if (len < vma_len) return -EINVAL;
  if (hugetlb_reserve_pages(f->kernel, f, vma->vm_pgoff >> h->order, len >> h->shift(), vma, vma->vm_flags) < 0)
    return -ENOMEM;
  if (vma->vm_flags & VM_WRITE) {
    std::lock_guard<std::mutex> g(f->lock);
    if (i_size_read(f) < len) i_size_write(f, len);
  }
  return 0;
}

long hugetlb_get_unmapped_area(Mm* mm, File* f, uint64_t addr, uint64_t len, uint64_t pgoff, int flags) {
  if (!is_hugetlb_file(f)) return -EINVAL;
  const uint64_t sz = hstate_file(f)->size();
  if (len & (sz - 1)) return -EINVAL;
  if (len > mm->task_size) return -ENOMEM;
  if (flags & MAP_FIXED) return (addr & (sz - 1)) ? -EINVAL : static_cast<long>(addr);
  if (addr) {
    addr = round_up(addr, sz);
    if (addr >= mmap_min_addr && addr + len <= mm->task_size && addr + len > addr &&
        !find_vma_intersection(mm, addr, addr + len))
      return static_cast<long>(addr);
  }
  // Room for len plus the alignment slack; the aligned start is inside it.
  long r = get_unmapped_area(mm, 0, len + sz, pgoff, 0, 0);
  if (r < 0) return r;
  return static_cast<long>(round_up(static_cast<uint64_t>(r), sz));
}

int hugetlb_fallocate(File* f, uint64_t offset, uint64_t len) NO_THREAD_SAFETY_ANALYSIS {
  if (!is_hugetlb_file(f)) return -EINVAL;
  if (offset + len < offset) return -EFBIG;
  Kernel* k = f->kernel;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = hstate_file(f);
  const uint64_t start = offset >> h->shift();
  const uint64_t end = round_up(offset + len, h->size()) >> h->shift();
  const ResvCtx c = ctx_of(f);
  for (uint64_t idx = start; idx < end; idx++) {
    std::mutex& fm = hugetlb_fault_mutex(hs, f, idx);
    std::lock_guard<std::mutex> g(fm);
    {
      std::lock_guard<std::mutex> pg(f->lock);
      if (f->pages.count(idx << h->order)) continue;
    }
    int err = 0;
    Folio* folio = alloc_hugetlb_folio(k, hs, c, idx, false, &err);
    if (!folio) return -ENOSPC;
    folio_zero_huge(folio, k->stats.get());
    folio_set_uptodate(folio);
    if (hugetlb_add_to_page_cache(folio, f, h, idx)) {
      restore_reserve_on_error(k, hs, c, idx, folio);
      folio_put(folio);
      continue;
    }
    folio_unlock(folio);
    folio_put(folio);  // the page cache keeps its own references
  }
  std::lock_guard<std::mutex> g(f->lock);
  if (offset + len > i_size_read(f)) i_size_write(f, offset + len);
  return 0;
}

void hugetlb_evict_inode(File* f) {
  if (!is_hugetlb_file(f)) return;
  evict_hugetlb_file(f, f->hstate.get());
}

uint64_t vma_kernel_pagesize(const Vma* vma) {
  if (is_vm_hugetlb_page(vma) && is_hugetlb_file(vma->vm_file.get())) return hstate_vma(vma)->size();
  return PAGE_SIZE;
}

int hugetlb_split_check(Vma* vma, uint64_t addr) {
  if (!is_vm_hugetlb_page(vma)) return 0;
  return (addr & (vma_kernel_pagesize(vma) - 1)) ? -EINVAL : 0;
}

long hugetlb_usage_pages(const Mm* mm) {
  HugetlbState* hs = hugetlb_state(mm->kernel);
  SpinGuard g(&hs->lock);
  auto it = hs->usage.find(mm->mm_id);
  return it == hs->usage.end() ? 0 : it->second;
}

void hugetlb_for_each_free_folio(Kernel* k, const std::function<void(Folio*)>& fn) {
  HugetlbState* hs = hugetlb_state(k);
  SpinGuard g(&hs->lock);
  for (Hstate& h : hs->hstates)
    for (Folio* f : h.freelist) fn(f);
}

std::string hugetlb_pool_audit(Kernel* k) {
  HugetlbState* hs = hugetlb_state(k);
  SpinGuard g(&hs->lock);
  for (Hstate& h : hs->hstates) {
    const std::string name = std::to_string(h.size() / 1024) + "kB: ";
    if (h.free_huge_pages != static_cast<long>(h.freelist.size()))
      return name + "free_huge_pages " + std::to_string(h.free_huge_pages) + " != free list " +
             std::to_string(h.freelist.size());
    if (h.free_huge_pages > h.nr_huge_pages || h.surplus_huge_pages > h.nr_huge_pages || h.surplus_huge_pages < 0)
      return name + "counters out of range";
    if (h.resv_huge_pages > h.free_huge_pages)
      return name + "resv_huge_pages " + std::to_string(h.resv_huge_pages) + " > free_huge_pages " +
             std::to_string(h.free_huge_pages);
    for (Folio* f : h.freelist) {
      if (!folio_test_hugetlb(f) || folio_order(f) != h.order || folio_ref_count(f) != 1 || folio_mapped(f) ||
          folio_test_anon(f) || aref(f->page.mapping).load(std::memory_order_relaxed) != 0)
        return name + "bad free folio\n" + dump_folio(f);
    }
  }
  for (auto& [id, pages] : hs->usage)
    if (pages < 0) return "hugetlb_usage of mm " + std::to_string(id) + " is negative";
  return "";
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
    auto it = hs->vmas.find(dst);
    if (it != hs->vmas.end()) drop_vma_info(hs, it, &to_free);
    if (copy.resv) copy.resv->refs++;
    const Hstate* h = hstate_vma(dst);
    copy.mm_id = dst->vm_mm->mm_id;
    copy.from = vma_hugecache_offset(h, dst, dst->vm_start);
    copy.to = vma_hugecache_offset(h, dst, dst->vm_end);
    hs->vmas[dst] = std::move(copy);
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
    drop_vma_info(hs, hs->vmas.find(vma), &to_free);
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
        }
      }
      if (--m->refs == 0) release_resv_map(hs, m.get(), &to_free);
    }
    vi->unmapped = false;
  }
  free_folios(vma->vm_mm->kernel, to_free);
}

// ---- fault entry ----

vm_fault_t hugetlb_fault(Vma* vma, uint64_t address, fault_flags_t flags) NO_THREAD_SAFETY_ANALYSIS {
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
  f.pte = huge_pte_alloc(mm, f.address, f.h);
  if (!f.pte) {
    f.fm->unlock();
    return VM_FAULT_OOM;
  }
  f.orig = hget(f.pte);
  if (pmd_none(f.orig)) return hugetlb_no_page(&f);

  vm_fault_t ret = 0;
  Folio* wait_folio = nullptr;
  f.ptl = huge_pte_lock(mm, f.pte);
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
  f.fm->unlock();
  if (wait_folio) {
    // folio_wait_locked without a reference: only the flag is read.
    while (folio_test_locked(wait_folio)) std::this_thread::yield();
  }
  return ret;
}

// ---- zap, fork, mprotect ----

void unmap_hugepage_range(Vma* vma, uint64_t start, uint64_t end) {
  if (!is_hugetlb_file(vma->vm_file.get())) return;
  Mm* mm = vma->vm_mm;
  const uint64_t sz = vma_kernel_pagesize(vma);
  // Only whole huge pages: callers that round to PAGE_SIZE must not lose data.
  const uint64_t s = round_up(std::max(start, vma->vm_start), sz);
  const uint64_t e = round_down(std::min(end, vma->vm_end), sz);
  if (s < e) __unmap_hugepage_range(vma, s, e, nullptr);
  // Until the VMA layer calls hugetlb_vm_op_close itself (closing twice is
  // fine), the final unmap stands in for it: munmap zaps VMAs already
  // detached from the tree, exit_mmap zaps whole write-locked VMAs (no other
  // zap write-locks the VMA: MADV_DONTNEED holds it or mmap_lock for read).
  auto it = mm->vmas.find(vma->vm_start);
  const bool detached = it == mm->vmas.end() || it->second.get() != vma;
  const bool exiting = start <= vma->vm_start && end >= vma->vm_end && vma_is_write_locked(vma);
  if (detached || exiting) hugetlb_vm_op_close(vma);
}

int copy_hugetlb_page_range(Vma* dst_vma, Vma* src_vma) NO_THREAD_SAFETY_ANALYSIS {
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
    SpinLock* src_ptl = huge_pte_lock_nested(src, src_pte);
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
        else new_folio = alloc_hugetlb_folio(k, hs, dst_ctx, vma_hugecache_offset(h, dst_vma, addr), false, &err);
        if (!new_folio) {
          folio_put(folio);
          ret = err;
          stop = true;
          dst_ptl = src_ptl = nullptr;
          break;
        }
        copy_user_large_folio(new_folio, folio, src->stats);
        folio_put(folio);
        dst_ptl = huge_pte_lock(dst, dst_pte);
        src_ptl = huge_pte_lock_nested(src, src_pte);
        entry = hget(src_pte);
        if (!(entry == src_old)) {  // the source changed meanwhile: start over
          restore_reserve_on_error(k, hs, dst_ctx, vma_hugecache_offset(h, dst_vma, addr), new_folio);
          folio_put(new_folio);
          continue;
        }
        // hugetlb_install_folio
        folio_set_uptodate(new_folio);
        hugetlb_add_new_anon_rmap(new_folio, dst_vma, addr);
        hset(dst_pte, make_huge_pte(dst_vma, new_folio, true));
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
    if (src_ptl) src_ptl->unlock();
    if (dst_ptl) dst_ptl->unlock();
    if (stop) break;
  }
  if (cow) {
    flush_tlb_range(src_vma, src_vma->vm_start, src_vma->vm_end);
    src->write_protect_seq.write_end();
  }
  return ret;
}

// move_huge_pte: both entries' locks held (destination, then source
// nested); the leaf moves as it is, without the soft-dirty bit move_ptes
// sets, and loses uffd-wp as move_ptes' entries do.
static void move_huge_pte(Mm* mm, HPte src, HPte dst) NO_THREAD_SAFETY_ANALYSIS {
  SpinLock* dst_ptl = huge_pte_lock(mm, dst);
  SpinLock* src_lockp = src.pmd ? pmd_lockptr(mm, src.pmd) : pud_lockptr(mm, src.pud);
  SpinLock* src_ptl = src_lockp != dst_ptl ? huge_pte_lock_nested(mm, src) : nullptr;
  pmd_t pte = hclear(src);
  if (pmd_present(pte)) pte = pmd_clear_uffd_wp(pte);
  hset(dst, pte);
  if (src_ptl) src_ptl->unlock();
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
  flush_tlb_range(vma, old_end - len, old_end);
  return len + old_addr - old_end;
}

long hugetlb_change_protection(Vma* vma, uint64_t start, uint64_t end, pgprot_t newprot) NO_THREAD_SAFETY_ANALYSIS {
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
  if (flush) flush_tlb_range(vma, start, end);
  return pages << h->order;
}

// ---- sysfs: hugepages/hugepages-<N>kB/ ----

int hugetlb_sysfs_write(Kernel* k, const std::string& path, const std::string& value) {
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = nullptr;
  std::string attr;
  if (!parse_hugetlb_path(hs, path, &h, &attr)) return -ENOENT;
  long n = 0;
  if (attr == "nr_hugepages") {
    if (!parse_count(value, &n)) return -EINVAL;
    set_max_huge_pages(k, hs, h, n);
    return 0;
  }
  if (attr == "nr_overcommit_hugepages") {
    if (!parse_count(value, &n)) return -EINVAL;
    SpinGuard g(&hs->lock);
    h->nr_overcommit_huge_pages = n;
    return 0;
  }
  if (attr == "free_hugepages" || attr == "resv_hugepages" || attr == "surplus_hugepages") return -EACCES;
  return -ENOENT;
}

int hugetlb_sysfs_read(Kernel* k, const std::string& path, std::string* out) {
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = nullptr;
  std::string attr;
  if (!parse_hugetlb_path(hs, path, &h, &attr)) return -ENOENT;
  long v;
  {
    SpinGuard g(&hs->lock);
    if (attr == "nr_hugepages") v = h->nr_huge_pages;
    else if (attr == "free_hugepages") v = h->free_huge_pages;
    else if (attr == "resv_hugepages") v = h->resv_huge_pages;
    else if (attr == "surplus_hugepages") v = h->surplus_huge_pages;
    else if (attr == "nr_overcommit_hugepages") v = h->nr_overcommit_huge_pages;
    else return -ENOENT;
  }
  *out = std::to_string(v);
  return 0;
}

}  // namespace mmlab
