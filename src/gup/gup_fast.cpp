// GUP-fast (mm/gup.c's gup_fast_*): a lockless walk that takes speculative
// references and re-checks, falling back to the slow path for anything that
// needs a fault, an unshare or a VMA.
//
// `tune gup.fast`: `legacy` takes one speculative reference per PTE (v6.18);
// `batch` takes one per run of PTEs mapping consecutive pages of one folio,
// with the same re-checks over the whole run (the GUP-fast batching the
// seed's reviewer asked for).
#include "fault/fault.h"
#include "mm/variants.h"
#include "gup/gup.h"
#include "mm/file.h"
#include "mm/kernel.h"
#include "pgtable/pgtable.h"
#include "sync/sched.h"

namespace mmlab {
namespace {

// try_grab_folio_fast: a speculative reference on a folio that may be freed
// or split under us; nullptr if it was (or if it may not be pinned long-term).
Folio* try_grab_folio_fast(Mm* mm, Page* page, int refs, unsigned flags) {
  mm->stats->count(Event::gup_fast_speculative);
  if ((flags & FOLL_PIN) && mm->phys->zero_page() == page) return page_folio(page);
  for (;;) {
    Folio* folio = page_folio(page);
    // Label: the folio is read, not yet referenced (a split may move the
    // page to another folio here: c24d37322548's window).
    sched::point("gup_fast.folio_read", sched::Op::kLabel, refcount_object(folio));
    if (!folio_ref_try_add(folio, refs)) return nullptr;
    // The page may have been split off meanwhile: it must still be in that
    // folio. revert.gup-fast-folio-recheck (before c24d37322548) trusts the
    // head read before the reference, which a split may have made a folio
    // of its own that page is no part of.
    if (mm->kernel->settings.reverted(Revert::kGupFastFolioRecheck) || page_folio(page) == folio) {
      if (!(flags & FOLL_PIN)) return folio;
      if ((flags & FOLL_LONGTERM) && mm->phys->page_zonenum(&folio->page) == ZONE_MOVABLE) {
        folio_put_refs(folio, refs);
        return nullptr;  // the slow path migrates it
      }
      gup_pin_referenced_folio(folio, refs, mm->stats);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with folio_try_share_anon_rmap_*
      return folio;
    }
    folio_put_refs(folio, refs);
  }
}

// gup_fast_folio_allowed: without a VMA, refuse what a writable long-term
// pin must not take (file folios other than shmem/hugetlb).
bool gup_fast_folio_allowed(Folio* folio, unsigned flags) {
  if ((flags & (FOLL_PIN | FOLL_LONGTERM | FOLL_WRITE)) != (FOLL_PIN | FOLL_LONGTERM | FOLL_WRITE)) return true;
  if (folio_test_anon(folio) || folio_test_hugetlb(folio)) return true;
  auto* file = reinterpret_cast<File*>(aref(folio->page.mapping).load(std::memory_order_acquire));
  if (!file) return false;  // truncated
  return !file_needs_dirty_tracking(file);
}

bool pte_access_permitted(pte_t pte, bool write) {
  if (!(pte.v & _PAGE_PRESENT) || !(pte.v & _PAGE_USER)) return false;
  return !write || pte_write(pte);
}

struct FastCtx {
  Mm* mm;
  unsigned flags;
  Page** pages;
  long nr = 0;
  GupFast mode;  // gup.fast: one reference per PTE, or per same-folio run
};

void undo(FastCtx& c, Folio* folio, int refs) { gup_put_folio(folio, refs, c.flags); }

// gup_fast_pte_range: false as soon as one entry cannot be taken.
bool gup_fast_pte_range(FastCtx& c, pmd_t pmd, pmd_t* pmdp, uint64_t addr, uint64_t end) {
  PhysMem* phys = c.mm->phys;
  pte_t* ptep = pte_offset(phys, pmd, addr);
  bool write = c.flags & FOLL_WRITE;
  while (addr < end) {
    pte_t pte = ptep_get(ptep);
    if (pte_protnone(pte) || !pte_access_permitted(pte, write) || pte_special(pte)) return false;
    Page* page = phys->pfn_to_page(pte_pfn(pte));
    int refs = 1;
    if (c.mode == GupFast::kBatch) {
      // One speculative reference for the run of PTEs that, as read now,
      // map consecutive pages of this page's folio with identical bits.
      Folio* guess = page_folio(page);
      if (folio_test_large(guess)) {
        long room = std::min<long>(static_cast<long>((end - addr) >> PAGE_SHIFT),
                                   folio_nr_pages(guess) - folio_page_idx(guess, page));
        while (refs < room && ptep_get(ptep + refs).v == pte.v + static_cast<uint64_t>(refs) * PAGE_SIZE) refs++;
      }
    }
    // Label: the entry is read, nothing referenced yet (fork's and a
    // collapse's windows against GUP-fast open here).
    sched::point("gup_fast.pte_read", sched::Op::kLabel, entry_object(ptep));
    Folio* folio = try_grab_folio_fast(c.mm, page, refs, c.flags);
    if (!folio) return false;
    // Re-check: the table and every entry of the run are unchanged.
    // revert.gup-fast-pmd-recheck (before 70cbc3cc78a9) re-reads the PTE
    // only: a collapse that cleared the PMD and copied the table leaves the
    // old table's entries as they were.
    bool same = c.mm->kernel->settings.reverted(Revert::kGupFastPmdRecheck) || pmdp_get(pmdp) == pmd;
    for (int i = 0; same && i < refs; i++)
      same = ptep_get(ptep + i).v == pte.v + static_cast<uint64_t>(i) * PAGE_SIZE;
    // (Under revert.gup-fast-folio-recheck the folio may not contain the
    // page at all: that is the bug, so it is not checked here either.)
    const bool contained = c.mm->kernel->settings.reverted(Revert::kGupFastFolioRecheck) ||
                           folio_contains_page(folio, page + refs - 1);
    if (!same || !contained || !gup_fast_folio_allowed(folio, c.flags)) {
      undo(c, folio, refs);
      return false;
    }
    if (!pte_write(pte)) {
      for (int i = 0; i < refs; i++) {
        if (gup_must_unshare(nullptr, c.flags, page + i)) {
          undo(c, folio, refs);
          return false;
        }
      }
    }
    if (!folio_test_referenced(folio)) folio_set_referenced(folio);
    for (int i = 0; i < refs; i++) c.pages[c.nr + i] = page + i;
    c.nr += refs;
    ptep += refs;
    addr += static_cast<uint64_t>(refs) * PAGE_SIZE;
  }
  return true;
}

template <typename T>
bool gup_fast_leaf(FastCtx& c, T* ep, T orig, pfn_t head_pfn, uint64_t leaf_size, uint64_t addr, uint64_t end) {
  PhysMem* phys = c.mm->phys;
  bool write = c.flags & FOLL_WRITE;
  if (!(orig.v & _PAGE_PRESENT) || !(orig.v & _PAGE_USER) || (write && !(orig.v & _PAGE_RW))) return false;
  if (orig.v & _PAGE_SPECIAL) return false;
  Page* head = phys->pfn_to_page(head_pfn);
  Page* page = head + ((addr & (leaf_size - 1)) >> PAGE_SHIFT);
  int refs = static_cast<int>((end - addr) >> PAGE_SHIFT);
  sched::point("gup_fast.pte_read", sched::Op::kLabel, entry_object(ep));
  Folio* folio = try_grab_folio_fast(c.mm, page, refs, c.flags);
  if (!folio) return false;
  if (!(entry_get(ep) == orig) || !gup_fast_folio_allowed(folio, c.flags)) {
    undo(c, folio, refs);
    return false;
  }
  if (!(orig.v & _PAGE_RW) && gup_must_unshare(nullptr, c.flags, head)) {
    undo(c, folio, refs);
    return false;
  }
  if (!folio_test_referenced(folio)) folio_set_referenced(folio);
  for (int i = 0; i < refs; i++) c.pages[c.nr + i] = page + i;
  c.nr += refs;
  return true;
}

bool gup_fast_pmd_range(FastCtx& c, pud_t pud, uint64_t addr, uint64_t end) {
  pmd_t* pmdp = pmd_offset(c.mm->phys, pud, addr);
  for (uint64_t next; addr != end; pmdp++, addr = next) {
    next = pmd_addr_end(addr, end);
    pmd_t pmd = pmdp_get(pmdp);
    if (!pmd_present(pmd) || pmd_none(pmd)) return false;
    if (pmd_leaf(pmd)) {
      if (pmd_protnone(pmd)) return false;
      if (!gup_fast_leaf(c, pmdp, pmd, pmd_pfn(pmd), PMD_SIZE, addr, next)) return false;
    } else if (!gup_fast_pte_range(c, pmd, pmdp, addr, next)) {
      return false;
    }
  }
  return true;
}

void gup_fast_pgd_range(FastCtx& c, uint64_t addr, uint64_t end) {
  for (uint64_t next; addr != end; addr = next) {
    next = pgd_addr_end(addr, end);
    pgd_t pgd = pgdp_get(pgd_offset(c.mm, addr));
    if (!pgd_present(pgd)) return;
    pud_t* pudp = pud_offset(c.mm->phys, pgd, addr);
    for (uint64_t pnext; addr != next; pudp++, addr = pnext) {
      pnext = pud_addr_end(addr, next);
      pud_t pud = pudp_get(pudp);
      if (!pud_present(pud)) return;
      if (pud_leaf(pud)) {
        if (!gup_fast_leaf(c, pudp, pud, pud_pfn(pud), PUD_SIZE, addr, pnext)) return;
      } else if (!gup_fast_pmd_range(c, pud, addr, pnext)) {
        return;
      }
    }
  }
}

long gup_fast(Mm* mm, uint64_t start, uint64_t end, unsigned gup_flags, Page** pages) {
  uint64_t seq = 0;
  // revert.gup-fast-wp-seq (before 57efa1fe5957): a pin does not look at
  // fork's write_protect_seq, so it may pin a page fork has just shared.
  const bool check_seq = (gup_flags & FOLL_PIN) && !mm->kernel->settings.reverted(Revert::kGupFastWpSeq);
  if (check_seq) {
    seq = mm->write_protect_seq.raw_read();
    if (seq & 1) return 0;  // a fork is write-protecting this mm
  }
  FastCtx c{mm, gup_flags, pages, 0, mm->kernel->settings.gup_fast.load(std::memory_order_relaxed)};
  lockless_walk_begin(mm);  // local_irq_save(): tables are not freed under us
  gup_fast_pgd_range(c, start, end);
  lockless_walk_end(mm);
  if (check_seq && mm->write_protect_seq.read_retry(seq)) {
    // A fork may have shared pages we pinned: give them all back.
    unpin_user_pages(pages, c.nr);
    return 0;
  }
  return c.nr;
}

}  // namespace

long gup_fast_fallback(Mm* mm, uint64_t start, long nr_pages, unsigned gup_flags, Page** pages) {
  constexpr unsigned allowed = FOLL_WRITE | FOLL_LONGTERM | FOLL_FORCE | FOLL_PIN | FOLL_GET | FOLL_FAST_ONLY |
                               FOLL_NOFAULT | FOLL_PCI_P2PDMA | FOLL_HONOR_NUMA_FAULT;
  if (gup_flags & ~allowed) return -EINVAL;
  if (gup_flags & FOLL_PIN) mm->set_flag(MMF_HAS_PINNED);
  start &= PAGE_MASK;
  uint64_t len = static_cast<uint64_t>(nr_pages) << PAGE_SHIFT;
  if (nr_pages < 0 || start + len < start) return -EOVERFLOW;
  if (start + len > TASK_SIZE) return -EFAULT;
  long nr_pinned = gup_fast(mm, start, start + len, gup_flags, pages);
  if (nr_pinned == nr_pages || (gup_flags & FOLL_FAST_ONLY)) return nr_pinned;
  mm->stats->count(Event::gup_fast_fallback);
  int locked = 0;
  long ret = __gup_longterm_locked(mm, start + static_cast<uint64_t>(nr_pinned) * PAGE_SIZE, nr_pages - nr_pinned,
                                   pages + nr_pinned, &locked, gup_flags | FOLL_TOUCH | FOLL_UNLOCKABLE);
  if (ret < 0) return nr_pinned ? nr_pinned : ret;
  return ret + nr_pinned;
}

}  // namespace mmlab
