// The helpers mm/hugetlb.c keeps static, shared here by the files the model
// splits it into (mm/hugetlb*.cpp, fs/hugetlbfs/inode.c's
// mm/hugetlbfs_inode.cpp, fault/hugetlb.cpp). Not for other users:
// the rest of mm reaches hugetlb through mm/hugetlb.h.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "mm/file.h"
#include "mm/hugetlb.h"
#include "sync/rwsem.h"
#include "mm/mm.h"
#include "pgtable/pgtable.h"

namespace mmlab {

class Stats;

HugetlbState* hugetlb_state(Kernel* k);
unsigned hstate_index(unsigned order);
Hstate* hstate_file(const File* f);
Hstate* hstate_vma(const Vma* vma);
bool is_hugetlb_file(const File* f);
uint64_t vma_hugecache_offset(const Hstate* h, const Vma* vma, uint64_t addr);
bool folio_test_hugetlb_restore_reserve(const Folio* f);
void folio_set_hugetlb_restore_reserve(Folio* f);
void folio_clear_hugetlb_restore_reserve(Folio* f);
Folio* dequeue_hugetlb_folio(HugetlbState* hs, Hstate* h) REQUIRES(hs->lock);
void free_folios(Kernel* k, std::vector<Folio*>& v);
Folio* alloc_surplus_hugetlb_folio(Kernel* k, HugetlbState* hs, Hstate* h);
void return_unused_surplus_pages(HugetlbState* hs, Hstate* h, long unused, std::vector<Folio*>* to_free) REQUIRES(hs->lock);
[[nodiscard]] int hugetlb_acct_memory(Kernel* k, HugetlbState* hs, Hstate* h, long delta);
Mutex& hugetlb_fault_mutex(HugetlbState* hs, const File* f, uint64_t idx);
Folio* filemap_lock_hugetlb_folio(File* f, const Hstate* h, uint64_t idx);
[[nodiscard]] int hugetlb_add_to_page_cache(Folio* folio, File* f, const Hstate* h, uint64_t idx);
void folio_zero_huge(Folio* folio, Stats* st);
// ---- the huge "pte": a PMD entry (2 MiB) or a PUD entry (1 GiB) ----
//
// Both levels use the x86 leaf format, so values are handled as pmd_t.

struct HPte {
  pmd_t* pmd = nullptr;
  pud_t* pud = nullptr;
  explicit operator bool() const { return pmd || pud; }
};
pmd_t hget(HPte e);
void hset(HPte e, pmd_t v);
pmd_t hclear(HPte e);
SpinLock* huge_pte_lock(Mm* mm, HPte e);
HPte huge_pte_alloc(Mm* mm, uint64_t addr, const Hstate* h);
Folio* hpte_folio(PhysMem* phys, pmd_t v);
pmd_t make_huge_pte(const Vma* vma, Folio* folio, bool try_mkwrite);
void hugetlb_add_file_rmap(Folio* f, const Vma* vma);
void hugetlb_remove_rmap(Folio* f, const Vma* vma);
void hugetlb_add_new_anon_rmap(Folio* f, Vma* vma, uint64_t addr);
void hugetlb_count_add(HugetlbState* hs, Mm* mm, long n);
[[nodiscard]] long unmap_ref_private(Vma* vma, Folio* folio, uint64_t address);
void release_resv_map(HugetlbState* hs, HugetlbResvMap* m, std::vector<Folio*>* to_free) REQUIRES(hs->lock);
HugetlbVmaInfo* vma_info(HugetlbState* hs, const Vma* vma, std::vector<Folio*>* to_free) REQUIRES(hs->lock);
bool vma_is_resv_owner(HugetlbState* hs, const Vma* vma, std::vector<Folio*>* to_free) REQUIRES(hs->lock);
// The hugetlb VMA lock (hugetlb_vma_lock_read/write) of a private owner's
// VMA, resv_map->rw_sema: a fault holds it for read from before it looks at
// the leaf until it is done, a zap for write over the unmap and the
// reservation restore, so a fault of an index sees the page or the restored
// reservation, never the gap between. Other VMAs (fork children, which have
// no reservation to restore, and shared mappings) take nothing. The map is
// kept alive while held. Conditional locking is beyond the analysis, hence
// the opt-out in the implementation.
class HugetlbVmaLock {
 public:
  HugetlbVmaLock(HugetlbState* hs, const Vma* vma, RwSemHold::Mode mode);
  void lock() { hold_.lock(); }      // again, after unlock()
  void unlock() { hold_.unlock(); }  // idempotent

 private:
  std::shared_ptr<HugetlbResvMap> map_;  // kept alive while held; declared first, released last
  RwSemHold hold_;
};
// unmap_hugepage_range under i_mmap_rwsem (truncation, hole punching):
// the hugetlb VMA lock only tried. false, with *busy set to that lock's
// map, if it was held and nothing was unmapped.
bool unmap_hugepage_range_trylock(Vma* vma, uint64_t start, uint64_t end, std::shared_ptr<HugetlbResvMap>* busy);
bool hugetlb_vma_maps_pfn(Vma* vma, uint64_t addr, pfn_t pfn);
// hugetlb_walk / huge_pte_offset: the entry for addr, or none if the table
// above is missing.
HPte hugetlb_walk(Mm* mm, uint64_t addr, const Hstate* h);
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
ResvCtx ctx_of(const Vma* vma);
ResvCtx ctx_of(File* f);
[[nodiscard]] long vma_needs_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free) REQUIRES(hs->lock);
void vma_add_reservation(HugetlbState* hs, const ResvCtx& c, uint64_t idx, std::vector<Folio*>* to_free) REQUIRES(hs->lock);
Folio* alloc_hugetlb_folio(Kernel* k, HugetlbState* hs, const ResvCtx& c, uint64_t idx, bool cow_from_owner, int* err);
void restore_reserve_on_error(Kernel* k, HugetlbState* hs, const ResvCtx& c, uint64_t idx, Folio* folio);
[[nodiscard]] int hugetlb_reserve_pages(Kernel* k, File* f, uint64_t from, uint64_t to, Vma* vma, vm_flags_t vm_flags);

}  // namespace mmlab
