// Unmapping (mm/memory.c's zap_pte_range family, with the swap entries,
// migration entries and markers it meets: zap_nonpresent_ptes; the PTE
// tables a whole-table MADV_DONTNEED empties, mm/pt_reclaim.c) and freeing
// page tables (free_pgtables / free_pgd_range).
#include <vector>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// What the kernel's mmu_gather does for us: references dropped after the
// TLB flush and after the PTL is released, each anonymous folio first let
// out of the swap cache if nothing maps it any more
// (free_pages_and_swap_cache): its slots may have lost their last swap PTE
// while another thread held its lock, which the zap of that PTE only tried.
struct ZapBatch {
  std::vector<std::pair<Folio*, int>> folios;
  void release() {
    for (auto& [f, nr] : folios) {
      if (folio_test_anon(f)) free_swap_cache(f);
      folio_put_refs(f, nr);
    }
    folios.clear();
  }
};

// should_zap_cows: zap anonymous (CoW) pages and swap entries too? Every
// zap but unmap_mapping_range's for a punched hole does.
bool should_zap_cows(const ZapDetails* details) { return !details || details->reclaim_pt || details->even_cows; }

// should_zap_folio
bool should_zap_folio(const ZapDetails* details, const Folio* folio) {
  return should_zap_cows(details) || !folio_test_anon(folio);
}

// zap_present_ptes: returns how many PTEs it consumed (a batch for a large folio).
unsigned zap_present_ptes(Vma* vma, pte_t* pte, pte_t ptent, uint64_t addr, unsigned max_nr, ZapBatch* batch,
                          const ZapDetails* details) {
  Mm* mm = vma->vm_mm;
  Page* page = vm_normal_page(vma, addr, ptent);
  if (!page) {  // the zero page or a PFN map: nothing to release
    ptep_get_and_clear(mm, addr, pte);
    return 1;
  }
  Folio* folio = page_folio(page);
  if (!should_zap_folio(details, folio)) return 1;
  unsigned nr = 1;
  if (folio_test_large(folio) && max_nr > 1) {
    nr = folio_pte_batch(folio, pte, ptent, max_nr);
    if (nr > 1) mm->stats->count(Event::zap_pte_batches);
  }
  ptent = get_and_clear_full_ptes(mm, addr, pte, nr);
  if (!folio_test_anon(folio)) {
    if (pte_dirty(ptent)) folio_set_dirty(folio);
    if (pte_young(ptent)) folio_mark_accessed(folio);
  }
  add_mm_counter(mm, mm_counter(folio), -static_cast<long>(nr));
  folio_remove_rmap_ptes(folio, page, static_cast<int>(nr), vma);
  batch->folios.push_back({folio, static_cast<int>(nr)});
  return nr;
}

// zap_drop_markers
bool zap_drop_markers(const ZapDetails* details) { return !details || details->drop_markers; }

// zap_nonpresent_ptes: swap entries free their slots (a batch of
// consecutive ones at once), migration entries drop the rss they stand
// for, poison markers go; a guard marker, and a file VMA's uffd-wp marker,
// stay unless the caller drops markers (*any_skipped: the table is not
// empty after all).
unsigned zap_nonpresent_ptes(Vma* vma, pte_t* pte, pte_t ptent, uint64_t addr, unsigned max_nr,
                             const ZapDetails* details, bool* any_skipped) {
  Mm* mm = vma->vm_mm;
  swp_entry_t entry = pte_to_swp_entry(ptent);
  unsigned nr = 1;
  if (is_pte_marker_entry(entry) && !zap_drop_markers(details)) {
    const uint64_t marker = swp_offset(entry);
    if ((marker & PTE_MARKER_GUARD) || ((marker & PTE_MARKER_UFFD_WP) && !vma_is_anonymous(vma))) {
      *any_skipped = true;
      return 1;
    }
  }
  if (!non_swap_entry(entry)) {
    if (!should_zap_cows(details)) {  // a private mapping's swapped-out copy stays
      *any_skipped = true;
      return 1;
    }
    nr = swap_pte_batch(pte, max_nr, ptent);
    add_mm_counter(mm, MM_SWAPENTS, -static_cast<long>(nr));
    free_swap_and_cache_nr(mm->kernel, entry, nr);
  } else if (is_migration_entry(entry)) {
    Folio* folio = page_folio(mm->phys->pfn_to_page(swp_offset_pfn(entry)));
    if (!should_zap_folio(details, folio)) {
      *any_skipped = true;
      return 1;
    }
    dec_mm_counter(mm, mm_counter(folio));
  }
  for (unsigned i = 0; i < nr; i++) ptep_get_and_clear(mm, addr + i * PAGE_SIZE, pte + i);
  return nr;
}

}  // namespace

Folio* zap_one_pte(Vma* vma, pte_t* pte, uint64_t addr) {
  const pte_t ptent = ptep_get(pte);
  if (pte_none(ptent)) return nullptr;
  if (!pte_present(ptent)) {
    bool kept = false;  // no details: markers go too, as the lost entry does
    zap_nonpresent_ptes(vma, pte, ptent, addr, 1, nullptr, &kept);
    return nullptr;
  }
  ZapBatch batch;
  zap_present_ptes(vma, pte, ptent, addr, 1, &batch, nullptr);
  return batch.folios.empty() ? nullptr : batch.folios.front().first;
}

namespace {

// ---- PT_RECLAIM (mm/pt_reclaim.c) ----

// ARCH_SUPPORTS_PT_RECLAIM: x86-64 only through v6.18, so the arm64
// geometry of the TLB model keeps its tables.
bool arch_supports_pt_reclaim(Mm* mm) {
  return tlb_state(mm)->geometry.load(std::memory_order_relaxed) != TlbGeometry::kArm64;
}

// reclaim_pt_is_enabled: the zap asked for it and covers the whole table
// (zap_pmd_range hands each table its part of the range: a part of a
// table, or two partial zaps that together empty it, keep it).
bool reclaim_pt_is_enabled(Mm* mm, uint64_t start, uint64_t end, const ZapDetails* details) {
  return details && details->reclaim_pt && end - start >= PMD_SIZE && arch_supports_pt_reclaim(mm);
}

// try_get_and_clear_pmd: with the table's lock held, unlink it if the PMD
// lock can be had without waiting (the PMD lock is above the PTE lock).
bool try_get_and_clear_pmd(Mm* mm, pmd_t* pmd, pmd_t* pmdval) {
  SpinLock* pml = pmd_lockptr(mm, pmd);
  if (!pml->try_lock(LockClass::kPmdLock)) return false;
  *pmdval = pmdp_get(pmd);
  entry_set(pmd, pmd_t{0});
  pml->unlock();
  return true;
}

// free_pte: the unlinked table goes when the flush that covers it has been
// sent to every CPU that may cache it (pte_free_tlb: freed_tables).
void free_pte(Mm* mm, uint64_t addr, pmd_t pmdval) {
  pgtable_free(mm, mm->phys->pfn_to_page(pmd_pfn(pmdval)));  // deferred for lockless walkers
  tlb_note_freed_table(mm, addr, addr + PMD_SIZE);
  mm->stats->count(Event::pgtable_reclaim);
}

// try_to_free_pte: the slow path, after the PTE lock was dropped: unlink
// the table if it is still there and still empty.
void try_to_free_pte(Mm* mm, pmd_t* pmd, uint64_t addr) {
  SpinLock* pml = pmd_lock(mm, pmd);
  pml->assert_held();
  const pmd_t pmdval = pmdp_get(pmd);
  if (pmd_none(pmdval) || pmd_leaf(pmdval)) {
    pml->unlock();
    return;
  }
  SpinLock* ptl = spin_lock_returned(pte_lockptr(mm->phys, pmdval), LockClass::kPteLock);
  ptl->assert_held();
  const pte_t* pte = pte_offset(mm->phys, pmdval, addr);
  for (unsigned i = 0; i < PTRS_PER_PTE; i++)
    if (!pte_none(ptep_get(pte + i))) {
      ptl->unlock();
      pml->unlock();
      return;
    }
  entry_set(pmd, pmd_t{0});
  ptl->unlock();
  pml->unlock();
  free_pte(mm, addr, pmdval);
}

void zap_pte_range(Vma* vma, pmd_t* pmd, uint64_t addr, uint64_t end, const ZapDetails* details) {
  Mm* mm = vma->vm_mm;
  SpinLock* ptl;
  pte_t* pte = pte_offset_map_lock(mm, pmd, addr, &ptl);
  if (!pte) return;
  ptl->assert_held();
  ZapBatch batch;
  uint64_t start = addr;
  bool flush = false;
  bool can_reclaim_pt = reclaim_pt_is_enabled(mm, start, end, details);
  while (addr < end) {
    pte_t ptent = ptep_get(pte);
    unsigned max_nr = static_cast<unsigned>((end - addr) >> PAGE_SHIFT);
    unsigned nr = 1;
    bool any_skipped = false;
    if (pte_none(ptent)) {
      // skip
    } else if (pte_present(ptent)) {
      nr = zap_present_ptes(vma, pte, ptent, addr, max_nr, &batch, details);
      flush = true;
    } else {
      nr = zap_nonpresent_ptes(vma, pte, ptent, addr, max_nr, details, &any_skipped);
    }
    if (any_skipped) can_reclaim_pt = false;
    pte += nr;
    addr += nr * PAGE_SIZE;
  }
  // The fast path: unlink the emptied table while its lock is still held.
  pmd_t pmdval{0};
  bool direct_reclaim = can_reclaim_pt && try_get_and_clear_pmd(mm, pmd, &pmdval);
  if (flush) flush_tlb_range(vma, start, end);
  ptl->unlock();
  batch.release();
  if (!can_reclaim_pt) return;
  if (direct_reclaim) free_pte(mm, start, pmdval);
  else try_to_free_pte(mm, pmd, start);
}

void zap_pmd_range(Vma* vma, pud_t pud, uint64_t addr, uint64_t end, const ZapDetails* details) {
  PhysMem* phys = vma->vm_mm->phys;
  pmd_t* pmd = pmd_offset(phys, pud, addr);
  for (uint64_t next; addr != end; pmd++, addr = next) {
    next = pmd_addr_end(addr, end);
    pmd_t v = pmdp_get(pmd);
    if (pmd_trans_huge(v)) {
      if (next - addr == PMD_SIZE && zap_huge_pmd(vma, pmd, addr)) continue;
      split_huge_pmd(vma, pmd, addr);  // partly covered: split, then zap the PTEs
    }
    if (pmd_none(pmdp_get(pmd))) continue;
    zap_pte_range(vma, pmd, addr, next, details);
  }
}

}  // namespace

void zap_vma_range(Vma* vma, uint64_t start, uint64_t end, const ZapDetails* details) {
  Mm* mm = vma->vm_mm;
  start = std::max(start, vma->vm_start);
  end = std::min(end, vma->vm_end);
  if (is_vm_hugetlb_page(vma)) {
    unmap_hugepage_range(vma, start, end);
    return;
  }
  for (uint64_t addr = start, next; addr < end; addr = next) {
    next = pud_addr_end(addr, end);
    pud_t* pud = mm_find_pud(mm, addr);
    if (!pud) continue;
    pud_t v = pudp_get(pud);
    if (!pud_present(v) || pud_leaf(v)) continue;  // PUD leaves (hugetlb 1G) arrive with hugetlb
    zap_pmd_range(vma, v, addr, next, details);
  }
}

// ---- unmap_mapping_range ----

void unmap_mapping_range(File* f, uint64_t holebegin, uint64_t holelen, bool even_cows) {
  const uint64_t first = holebegin >> PAGE_SHIFT;
  uint64_t last = UINT64_MAX;  // holelen 0: to the end
  if (holelen) {
    const uint64_t nr = (holelen + PAGE_SIZE - 1) >> PAGE_SHIFT;
    if (first + nr > first) last = first + nr - 1;
  }
  const ZapDetails details{.drop_markers = false, .reclaim_pt = false, .even_cows = even_cows};
  ReadGuard g(&f->i_mmap_rwsem);  // i_mmap_lock_read
  for (Vma* vma : f->i_mmap) {
    // unmap_mapping_range_tree: the part of [first, last] this VMA maps.
    const uint64_t vfirst = vma->vm_pgoff, vlast = vma->vm_pgoff + vma->pages() - 1;
    if (last < vfirst || first > vlast) continue;
    const uint64_t zfirst = std::max(first, vfirst), zlast = std::min(last, vlast);
    const uint64_t start = vma->vm_start + ((zfirst - vfirst) << PAGE_SHIFT);
    const uint64_t end = vma->vm_start + ((zlast - vfirst + 1) << PAGE_SHIFT);
    // zap_page_range_single: its own gather per VMA.
    MmuGather tlb;
    tlb_gather_mmu(&tlb, vma->vm_mm);
    zap_vma_range(vma, start, end, &details);
    tlb_finish_mmu(&tlb);
  }
}

// ---- free_pgtables ----
//
// A table may be freed when everything it maps lies inside [floor, ceiling)
// (no VMA there any more) and it intersects [start, end). ceiling == 0 means
// the top of the address space.

namespace {

bool span_freeable(uint64_t span_start, uint64_t span_size, uint64_t start, uint64_t end, uint64_t floor,
                   uint64_t ceiling) {
  uint64_t span_end = span_start + span_size;  // may wrap to 0 at the very top
  if (span_start < floor) return false;
  if (ceiling && (span_end == 0 || span_end > ceiling)) return false;
  return span_start < end && (span_end == 0 || span_end > start);
}

bool table_empty(const uint64_t* t) {
  for (unsigned i = 0; i < PTRS_PER_TABLE; i++)
    if (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(t[i])).load(std::memory_order_relaxed)) return false;
  return true;
}

// Whether free_pgtables freed a table this call (the mmu_gather's
// freed_tables, which sends the flush's IPIs to every CPU in the cpumask).
thread_local bool freed_tables_ = false;

void free_pte_table(Mm* mm, pmd_t* pmd) {
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  pmd_t v = pmdp_get(pmd);
  if (pmd_none(v) || pmd_leaf(v)) {
    ptl->unlock();
    return;
  }
  Page* table = mm->phys->pfn_to_page(pmd_pfn(v));
  VM_BUG_ON(!table_empty(static_cast<uint64_t*>(mm->phys->page_address(table))), "freeing a PTE table that still maps pages");
  entry_set(pmd, pmd_t{0});
  ptl->unlock();
  pgtable_free(mm, table);  // deferred: GUP-fast may still be reading it
  freed_tables_ = true;
}

}  // namespace

void free_pgtables(Mm* mm, uint64_t start, uint64_t end, uint64_t floor, uint64_t ceiling) {
  PhysMem* phys = mm->phys;
  freed_tables_ = false;
  for (uint64_t gaddr = round_down(start, PGDIR_SIZE); gaddr < end && gaddr < TASK_SIZE; gaddr += PGDIR_SIZE) {
    pgd_t* pgd = pgd_offset(mm, gaddr);
    pgd_t gv = pgdp_get(pgd);
    if (!pgd_present(gv)) continue;
    auto* puds = table_of<pud_t>(phys, pgd_pfn(gv));
    for (unsigned i = 0; i < PTRS_PER_PUD; i++) {
      uint64_t uaddr = gaddr + i * PUD_SIZE;
      pud_t uv = pudp_get(&puds[i]);
      if (!pud_present(uv) || pud_leaf(uv)) continue;
      if (!(uaddr < end && uaddr + PUD_SIZE > start)) continue;
      auto* pmds = table_of<pmd_t>(phys, pud_pfn(uv));
      for (unsigned j = 0; j < PTRS_PER_PMD; j++) {
        uint64_t maddr = uaddr + j * PMD_SIZE;
        if (span_freeable(maddr, PMD_SIZE, start, end, floor, ceiling)) free_pte_table(mm, &pmds[j]);
      }
      if (span_freeable(uaddr, PUD_SIZE, start, end, floor, ceiling) && table_empty(reinterpret_cast<uint64_t*>(pmds))) {
        SpinGuard g(&mm->page_table_lock, LockClass::kPageTableLock);
        entry_set(&puds[i], pud_t{0});
        g.unlock();
        pgtable_free(mm, phys->pfn_to_page(pud_pfn(uv)));
        freed_tables_ = true;
      }
    }
    if (span_freeable(gaddr, PGDIR_SIZE, start, end, floor, ceiling) && table_empty(reinterpret_cast<uint64_t*>(puds))) {
      SpinGuard g(&mm->page_table_lock, LockClass::kPageTableLock);
      entry_set(pgd, pgd_t{0});
      g.unlock();
      pgtable_free(mm, phys->pfn_to_page(pgd_pfn(gv)));
      freed_tables_ = true;
    }
  }
  // pte_free_tlb & co.: the gather's flush covers the freed range with
  // freed_tables set (flushed at once when no gather is open).
  if (freed_tables_) tlb_note_freed_table(mm, start, end);
  freed_tables_ = false;
}

}  // namespace mmlab
