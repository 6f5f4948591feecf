// arm64's contiguous PTEs with 4K pages (arch/arm64/mm/contpte.c and the
// wrappers of arch/arm64/include/asm/pgtable.h): 16 entries that map one
// folio's 16 aligned, contiguous pages with one protection may carry the
// contiguous bit, and the TLB then caches them as one 64K entry.
//
// The model's entries are x86's, so the contiguous bit is kept beside them:
// TlbState::contpte_folded holds each folded block's first PTE address and
// the pfn it maps. A record whose entries were rewritten behind the
// wrappers' back (a path that writes entries directly) no longer matches
// and is dropped when next read.
#include "tlb/tlb.h"

#include "phys/phys.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

constexpr uint64_t kContMask = CONT_PTES - 1;
constexpr uint64_t kIgnoreBits = _PAGE_ACCESSED | _PAGE_DIRTY;

unsigned block_index(uint64_t addr) { return static_cast<unsigned>((addr >> PAGE_SHIFT) & kContMask); }
const pte_t* block_first(const pte_t* ptep, uint64_t addr) { return ptep - block_index(addr); }
uintptr_t block_key(const pte_t* ptep, uint64_t addr) { return reinterpret_cast<uintptr_t>(block_first(ptep, addr)); }

// contpte_is_consistent over the block: every entry present, not special,
// mapping pfn0 + i with the first one's bits (access and dirty aside).
bool block_consistent(const pte_t* first, pfn_t pfn0) {
  const pte_t p0 = ptep_get(const_cast<pte_t*>(first));
  if (!pte_present(p0) || pte_special(p0) || pte_pfn(p0) != pfn0) return false;
  for (unsigned i = 1; i < CONT_PTES; i++) {
    const pte_t p = ptep_get(const_cast<pte_t*>(first + i));
    if (!pte_present(p) || (p.v & ~kIgnoreBits) != ((p0.v & ~kIgnoreBits) + i * PAGE_SIZE)) return false;
  }
  return true;
}

void record_fold(TlbState* t, uintptr_t key, pfn_t pfn) {
  SpinGuard g(&t->contpte_lock);
  t->contpte_folded[key] = pfn;
}

bool erase_fold(TlbState* t, uintptr_t key) {
  SpinGuard g(&t->contpte_lock);
  return t->contpte_folded.erase(key) != 0;
}

// contpte_convert: repainting a block (with or without the contiguous bit)
// flushes its 16 entries first.
void contpte_convert(Mm* mm, uint64_t addr) {
  const uint64_t start = addr & CONT_PTE_MASK;
  flush_tlb_mm_range(mm, start, start + CONT_PTE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
}

// contpte_try_unfold: a folded block that is about to be broken loses the
// contiguous bit on all its entries.
void contpte_try_unfold(Mm* mm, uint64_t addr, const pte_t* ptep) {
  TlbState* t = tlb_state(mm);
  if (!erase_fold(t, block_key(ptep, addr))) return;
  mm->stats->count(Event::tlb_contpte_unfold);
  MM_TRACE("contpte_unfold", "address={:#x}", addr & CONT_PTE_MASK);
  contpte_convert(mm, addr);
}

// contpte_try_unfold_partial: the blocks the range [addr, addr + nr pages)
// covers only in part.
void contpte_try_unfold_partial(Mm* mm, uint64_t addr, const pte_t* ptep, unsigned nr) {
  const uint64_t end = addr + nr * PAGE_SIZE;
  if (addr & ~CONT_PTE_MASK) contpte_try_unfold(mm, addr, ptep);
  if (end & ~CONT_PTE_MASK) {
    const uint64_t last = end - PAGE_SIZE;
    if ((last & CONT_PTE_MASK) != (addr & CONT_PTE_MASK) || !(addr & ~CONT_PTE_MASK))
      contpte_try_unfold(mm, last, ptep + (nr - 1));
  }
}

// __contpte_try_fold: the block the entry just set completes folds if it
// maps 16 pages of one folio in order with one protection.
void contpte_try_fold(Mm* mm, uint64_t addr, const pte_t* ptep, pte_t pte) {
  // Only the last entry of a block, mapping the last page of an aligned
  // group (the core code fills ranges from low to high).
  if (block_index(addr) != kContMask) return;
  if ((pte_pfn(pte) & kContMask) != kContMask || !pte_present(pte) || pte_special(pte)) return;
  const pfn_t pfn0 = pte_pfn(pte) - kContMask;
  PhysMem* phys = mm->phys;
  if (phys->is_zero_pfn(pfn0)) return;
  Folio* folio = page_folio(phys->pfn_to_page(pfn0));
  const pfn_t fstart = folio_pfn(folio);
  if (fstart > pfn0 || fstart + folio_nr_pages(folio) < pfn0 + CONT_PTES) return;
  const pte_t* first = block_first(ptep, addr);
  if (!block_consistent(first, pfn0)) return;
  record_fold(tlb_state(mm), reinterpret_cast<uintptr_t>(first), pfn0);
  mm->stats->count(Event::tlb_contpte_fold);
  MM_TRACE("contpte_fold", "address={:#x} pfn={:#x} via=try_fold", addr & CONT_PTE_MASK, pfn0);
  contpte_convert(mm, addr);
}

// set_ptes: one entry unfolds its block, is set, then may complete and
// re-fold it; several (of one folio, one protection, onto entries that were
// not present: contpte_set_ptes) are set with the contiguous bit on every
// whole aligned block whose pages are aligned too, with nothing to flush.
// Each wrapper checks first that the entries lie in a PTE table of mm
// (assert_table_of). arm64's wrappers check nothing there: a table of
// another level or mm is corrupt state, so the model's is a VM_BUG_ON.
void contpte_set_ptes(Mm* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr) {
  assert_table_of(mm, ptep, TableLevel::kPte);
  if (nr == 1) {
    contpte_try_unfold(mm, addr, ptep);
    __set_ptes(ptep, pte, 1);
    contpte_try_fold(mm, addr, ptep, pte);
    return;
  }
  __set_ptes(ptep, pte, nr);
  if (!pte_present(pte) || pte_special(pte)) return;
  TlbState* t = tlb_state(mm);
  const uint64_t end = addr + nr * PAGE_SIZE;
  pfn_t pfn = pte_pfn(pte);
  for (uint64_t a = addr; a < end; pfn += (CONT_PTE_SIZE - (a & ~CONT_PTE_MASK)) >> PAGE_SHIFT, a = (a & CONT_PTE_MASK) + CONT_PTE_SIZE) {
    const uint64_t next = std::min(end, (a & CONT_PTE_MASK) + CONT_PTE_SIZE);
    if (((a | next | (pfn << PAGE_SHIFT)) & ~CONT_PTE_MASK) != 0) continue;
    record_fold(t, reinterpret_cast<uintptr_t>(ptep + ((a - addr) >> PAGE_SHIFT)), pfn);
    mm->stats->count(Event::tlb_contpte_fold);
    MM_TRACE("contpte_fold", "address={:#x} pfn={:#x} via=set_ptes", a, pfn);
  }
}

// get_and_clear_full_ptes / ptep_get_and_clear: one entry unfolds its block;
// a range unfolds only the blocks it covers in part, and whole blocks are
// cleared folded (no repaint, no flush of their own).
void contpte_clear(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  assert_table_of(mm, ptep, TableLevel::kPte);
  if (nr == 1) {
    contpte_try_unfold(mm, addr, ptep);
    return;
  }
  contpte_try_unfold_partial(mm, addr, ptep, nr);
  TlbState* t = tlb_state(mm);
  const uint64_t end = addr + nr * PAGE_SIZE;
  for (uint64_t a = (addr + CONT_PTE_SIZE - 1) & CONT_PTE_MASK; a + CONT_PTE_SIZE <= end; a += CONT_PTE_SIZE)
    erase_fold(t, reinterpret_cast<uintptr_t>(ptep + ((a - addr) >> PAGE_SHIFT)));
}

// ptep_set_wrprotect unfolds; wrprotect_ptes of a range keeps its whole
// blocks folded (all 16 lose the write bit together).
void contpte_wrprotect(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  assert_table_of(mm, ptep, TableLevel::kPte);
  if (nr == 1) contpte_try_unfold(mm, addr, ptep);
  else contpte_try_unfold_partial(mm, addr, ptep, nr);
}

// contpte_ptep_set_access_flags: a write-bit change unfolds; access and
// dirty updates keep the block folded.
void contpte_set_access_flags(Mm* mm, uint64_t addr, pte_t* ptep, pte_t entry) {
  assert_table_of(mm, ptep, TableLevel::kPte);
  const pte_t cur = ptep_get(ptep);
  if (pte_write(cur) != pte_write(entry)) contpte_try_unfold(mm, addr, ptep);
}

}  // namespace

const ContPteOps kContPteOps = {contpte_set_ptes, contpte_clear, contpte_wrprotect, contpte_set_access_flags};

bool contpte_block_folded(Mm* mm, uint64_t addr, const pte_t* ptep) {
  TlbState* t = tlb_state(mm);
  const uintptr_t key = block_key(ptep, addr);
  pfn_t pfn0;
  {
    SpinGuard g(&t->contpte_lock);
    auto it = t->contpte_folded.find(key);
    if (it == t->contpte_folded.end()) return false;
    pfn0 = it->second;
  }
  if (block_consistent(block_first(ptep, addr), pfn0)) return true;
  erase_fold(t, key);  // rewritten behind the wrappers (or its table reused)
  return false;
}

void contpte_forget_all(TlbState* t) {
  SpinGuard g(&t->contpte_lock);
  t->contpte_folded.clear();
}

}  // namespace mmlab
