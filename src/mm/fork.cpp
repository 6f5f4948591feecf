// fork(): duplicating an address space (kernel/fork.c's dup_mmap and
// anon_vma_fork, mm/memory.c's copy_page_range family with
// copy_nonpresent_pte for swap and migration entries and markers,
// mm/huge_memory.c's copy_huge_pmd).
//
// Locking, outermost first (sync/lock_order.h):
//   parent mmap_lock (write)      for the whole copy; every parent VMA is also
//                                 write-locked (vma_start_write) before it is
//                                 looked at, so no per-VMA fault runs in it
//   child mmap_lock (write)       nested; the child mm is unreachable until
//                                 fork returns, so a trylock that cannot fail
//                                 stands in for mmap_write_lock_nested()
//   anon_vma rwsem                while a child VMA is linked into them
//   child PMD lock                copy_huge_pmd, with the parent's PMD lock
//                                 nested inside (kSingleDepthNesting)
//   child PTE lock                copy_pte_range, with the parent's PTE lock
//                                 nested inside (kSingleDepthNesting)
// Allocation never happens under a PTL: copy_pte_range drops both PTLs to
// allocate its "prealloc" page and restarts at the same address.
//
// For a CoW mapping the parent's write_protect_seq is odd for the whole copy
// of the VMA, so GUP-fast (FOLL_PIN) backs off while PTEs are being
// write-protected and AnonExclusive cleared.
//
// Model choices:
//   - anon_vma_fork: the child VMA is linked into every anon_vma of the parent
//     VMA (anon_vma_clone) and uses the parent VMA's anon_vma for its own new
//     pages, instead of getting a fresh anon_vma chained below it. Every folio
//     the child can map is then found from the anon_vma its folio->mapping
//     names; the kernel's per-child anon_vma only narrows rmap walks.
//   - No userfaultfd context exists, so UFFD_FEATURE_EVENT_FORK cannot be set:
//     the child VMA loses VM_UFFD_* as dup_userfaultfd() does without it.
#include <atomic>
#include <string>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/filemap.h"
#include "mm/fork.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/khugepaged_hooks.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "mm/vma.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"
#include "sync/sched.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// MMF_INIT_MASK: the mm flags a child inherits (mmf_init_flags). Of the
// model's flags only the THP opt-outs are inherited; MMF_HAS_PINNED,
// MMF_HUGE_ZERO_PAGE and MMF_VM_HUGEPAGE describe what this mm did and start
// clear (khugepaged_fork registers the child itself).
constexpr uint64_t MMF_INIT_MASK = (1ull << MMF_DISABLE_THP) | (1ull << MMF_DISABLE_THP_EXCEPT_ADVISED);

// pmdp_set_wrprotect: an atomic clear of the write bit (x86 clear_bit), like wrprotect_ptes.
void pmdp_set_wrprotect(pmd_t* pmdp) { entry_clear_bits(pmdp, _PAGE_RW); }

// Models mm_get_huge_zero_folio() for the child: one reference per mm that
// maps the huge zero folio, recorded by MMF_HUGE_ZERO_PAGE. The parent holds
// a reference, so this never allocates.
void mm_get_huge_zero_folio_for(Mm* mm) {
  if (mm->test_flag(MMF_HUGE_ZERO_PAGE)) return;
  Folio* f = mm->phys->mm_get_huge_zero_folio();
  VM_BUG_ON(!f, "huge zero folio vanished while the parent maps it");
  if (!f) return;
  if (mm->flags.fetch_or(1ull << MMF_HUGE_ZERO_PAGE) & (1ull << MMF_HUGE_ZERO_PAGE)) mm->phys->mm_put_huge_zero_folio();
}

// anon_vma_fork (the model's choice, see the file comment): link dst into
// every anon_vma of src and share src's anon_vma for dst's new folios.
void anon_vma_fork(Vma* dst, const Vma* src) {
  if (!src->anon_vma) return;  // the parent has no anonymous pages here
  anon_vma_clone(dst, src);
  VM_BUG_ON(dst->anon_vma != src->anon_vma, "anon_vma_clone did not give the child an anon_vma");
}

// ---- PTE level (mm/memory.c) ----

// copy_present_page: the child gets its own copy of a page the parent may
// have DMA-pinned; the parent's PTE is left as it is (exclusive, writable if
// it was). Needs the preallocated page; -EAGAIN without one, -EHWPOISON
// when the copy meets a machine check (the prealloc stays for the caller to
// free, and the fork fails).
int copy_present_page(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, uint64_t addr, long* rss,
                      Folio** prealloc, Page* page) {
  Folio* new_folio = *prealloc;
  if (!new_folio) return -EAGAIN;
  Mm* dst_mm = dst_vma->vm_mm;
  PhysMem* phys = dst_mm->phys;
  if (copy_mc_user_highpage(phys, phys->page_address(&new_folio->page), phys->page_address(page))) return -EHWPOISON;
  src_vma->vm_mm->stats->count_copied(0, PAGE_SIZE);
  src_vma->vm_mm->stats->count(Event::fork_copied_pages);
  *prealloc = nullptr;
  folio_set_uptodate(new_folio);
  folio_add_new_anon_rmap(new_folio, dst_vma, addr, RMAP_EXCLUSIVE, RmapLevel::kPte);
  folio_add_lru(new_folio);
  rss[MM_ANONPAGES]++;

  pte_t pte = pfn_pte(phys->page_to_pfn(&new_folio->page), dst_vma->vm_page_prot);
  pte = maybe_mkwrite(pte_mkdirty(pte), dst_vma);
  if (userfaultfd_wp(dst_vma) && pte_uffd_wp(ptep_get(src_pte))) pte = pte_mkuffd_wp(pte);  // userfaultfd_pte_wp
  set_pte_at(dst_mm, addr, dst_pte, pte);
  return 0;
}

// __copy_present_ptes: install nr child PTEs that map what the parent's map.
void __copy_present_ptes(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, pte_t pte, uint64_t addr,
                         unsigned nr) {
  // A CoW mapping is write-protected in both processes.
  if (is_cow_mapping(src_vma->vm_flags) && pte_write(pte)) {
    // Label: the child's rmap is taken (PageAnonExclusive cleared), the
    // parent's entries still writable, write_protect_seq odd: GUP-fast's
    // window against fork (57efa1fe5957).
    sched::point("fork.before_wrprotect", sched::Op::kLabel, entry_object(src_pte));
    wrprotect_ptes(src_vma->vm_mm, addr, src_pte, nr);
    pte = pte_wrprotect(pte);
  }
  // A shared mapping's dirtiness stays with the parent's entries.
  if (src_vma->vm_flags & VM_SHARED) pte = pte_mkclean(pte);
  pte = pte_mkold(pte);
  if (!userfaultfd_wp(dst_vma)) pte = pte_clear_uffd_wp(pte);
  set_ptes(dst_vma->vm_mm, addr, dst_pte, pte, nr);
}

// copy_present_ptes: copy the present PTE at src_pte and, for a large folio,
// the PTEs after it that map consecutive pages of the same folio (at most
// max_nr). Returns the number copied (>= 1), or -EAGAIN if a preallocated
// page is needed to copy a maybe-pinned page for the child.
int copy_present_ptes(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, pte_t pte, uint64_t addr,
                      unsigned max_nr, long* rss, Folio** prealloc) {
  Page* page = vm_normal_page(src_vma, addr, pte);
  if (!page) {  // the zero page, a PFN map: the entry alone is copied
    __copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, pte, addr, 1);
    return 1;
  }
  Folio* folio = page_folio(page);

  // A likely copy (prealloc in hand) is not worth batching.
  if (!*prealloc && folio_test_large(folio) && max_nr != 1) {
    fpb_t flags = FPB_MERGE_WRITE;
    if (!(src_vma->vm_flags & VM_SHARED)) flags |= FPB_RESPECT_DIRTY;
    if (vma_soft_dirty_enabled(src_vma)) flags |= FPB_RESPECT_SOFT_DIRTY;
    unsigned nr = folio_pte_batch_flags(folio, src_vma, src_pte, &pte, max_nr, flags);
    folio_ref_add(folio, static_cast<int>(nr));
    if (folio_test_anon(folio)) {
      if (folio_try_dup_anon_rmap_ptes(folio, page, static_cast<int>(nr), dst_vma, src_vma)) {
        folio_ref_add(folio, -static_cast<int>(nr));  // folio_ref_sub
        return -EAGAIN;
      }
      rss[MM_ANONPAGES] += nr;
      VM_WARN_ON_FOLIO(PageAnonExclusive(page), folio, "shared with the child but still AnonExclusive");
    } else {
      folio_dup_file_rmap_ptes(folio, page, static_cast<int>(nr), dst_vma);
      rss[mm_counter_file(folio)] += nr;
    }
    if (nr > 1) src_vma->vm_mm->stats->count(Event::fork_pte_batches);
    __copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, pte, addr, nr);
    return static_cast<int>(nr);
  }

  folio_get(folio);
  if (folio_test_anon(folio)) {
    // A page the parent may have pinned is copied for the child now, so the
    // pinned page can never be replaced under the pin by a later CoW.
    if (folio_try_dup_anon_rmap_ptes(folio, page, 1, dst_vma, src_vma)) {
      folio_put(folio);
      int err = copy_present_page(dst_vma, src_vma, dst_pte, src_pte, addr, rss, prealloc, page);
      return err ? err : 1;
    }
    rss[MM_ANONPAGES]++;
    VM_WARN_ON_FOLIO(PageAnonExclusive(page), folio, "shared with the child but still AnonExclusive");
  } else {
    folio_dup_file_rmap_ptes(folio, page, 1, dst_vma);
    rss[mm_counter_file(folio)]++;
  }
  __copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, pte, addr, 1);
  return 1;
}

// copy_nonpresent_pte. Both PTLs are held (destination, then source).
int copy_nonpresent_pte(Vma* dst_vma, Vma* src_vma, pte_t* dst_pte, pte_t* src_pte, uint64_t addr) {
  Mm* dst_mm = dst_vma->vm_mm;
  Mm* src_mm = src_vma->vm_mm;
  const pte_t orig = ptep_get(src_pte);
  pte_t pte = orig;
  swp_entry_t entry = pte_to_swp_entry(orig);
  if (!non_swap_entry(entry)) {
    if (swap_duplicate(src_mm->kernel, entry) < 0) return -ENOMEM;
    // The swap entry is shared now: neither side may map it exclusive.
    if (pte_swp_exclusive(orig)) {
      pte = pte_swp_clear_exclusive(orig);
      entry_set(src_pte, pte);
    }
    inc_mm_counter(dst_mm, MM_SWAPENTS);
  } else if (is_migration_entry(entry)) {
    Folio* folio = page_folio(src_mm->phys->pfn_to_page(swp_offset_pfn(entry)));
    inc_mm_counter(dst_mm, mm_counter(folio));
    if (!is_readable_migration_entry(entry) && is_cow_mapping(dst_vma->vm_flags)) {
      // Parent and child must both map it read-only; a previously exclusive
      // entry is shared now.
      pte = swp_entry_to_pte(make_migration_entry(SWP_MIGRATION_READ, swp_offset(entry)));
      if (pte_swp_soft_dirty(orig)) pte = pte_swp_mksoft_dirty(pte);
      if (pte_swp_uffd_wp(orig)) pte = pte_swp_mkuffd_wp(pte);
      entry_set(src_pte, pte);
    }
  } else if (is_pte_marker_entry(entry)) {
    // copy_pte_marker: poison and guard markers are inherited; uffd-wp only
    // where the child VMA is registered for it.
    uint64_t marker = swp_offset(entry) & (PTE_MARKER_POISONED | PTE_MARKER_GUARD);
    if ((swp_offset(entry) & PTE_MARKER_UFFD_WP) && (dst_vma->vm_flags & VM_UFFD_WP)) marker |= PTE_MARKER_UFFD_WP;
    if (marker) set_pte_at(dst_mm, addr, dst_pte, swp_entry_to_pte(swp_entry(SWP_PTE_MARKER, marker)));
    return 0;
  }
  if (!(dst_vma->vm_flags & VM_UFFD_WP)) pte = pte_swp_clear_uffd_wp(pte);
  entry_set(dst_pte, pte);
  return 0;
}

// copy_pte_range: both PTLs held (child's, then the parent's nested) while
// entries are copied; they are dropped to allocate a page for an eager copy,
// and the copy restarts at the same address. 0, -ENOMEM, or -EHWPOISON
// (a machine check copying a maybe-pinned page).
int copy_pte_range(Vma* dst_vma, Vma* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr, uint64_t end) {
  Mm* dst_mm = dst_vma->vm_mm;
  Mm* src_mm = src_vma->vm_mm;
  Folio* prealloc = nullptr;
  int ret = 0;

  for (;;) {
    long rss[NR_MM_COUNTERS] = {};
    // pte_alloc_map_lock on the child.
    if (!pte_alloc(dst_mm, dst_pmd)) {
      ret = -ENOMEM;
      break;
    }
    SpinLock* dst_ptl;
    pte_t* dst_pte = pte_offset_map_lock(dst_mm, dst_pmd, addr, &dst_ptl);
    if (!dst_pte) {
      ret = -ENOMEM;
      break;
    }
    dst_ptl->assert_held();
    // The parent's table is stable: its mmap_lock is held for write and the
    // VMA has an anon_vma, which keeps collapse from retracting it.
    SpinLock* src_ptl;
    pte_t* src_pte = pte_offset_map_lock(src_mm, src_pmd, addr, &src_ptl, kSingleDepthNesting);
    if (!src_pte) {
      dst_ptl->unlock();
      ret = 0;
      break;
    }
    src_ptl->assert_held();

    unsigned nr;
    do {
      nr = 1;
      pte_t ptent = ptep_get(src_pte);
      if (pte_none(ptent)) continue;
      if (!pte_present(ptent)) {
        // Swap, migration and marker entries: the swap layer accounts the
        // child's rss for what it copies.
        ret = copy_nonpresent_pte(dst_vma, src_vma, dst_pte, src_pte, addr);
        if (ret) break;
        continue;
      }
      unsigned max_nr = static_cast<unsigned>((end - addr) >> PAGE_SHIFT);
      ret = copy_present_ptes(dst_vma, src_vma, dst_pte, src_pte, ptent, addr, max_nr, rss, &prealloc);
      if (ret == -EAGAIN || ret == -EHWPOISON) break;
      if (prealloc) {
        // Allocated for an entry that no longer needed it: not kept for a
        // later address (the kernel frees it to follow the mempolicy).
        folio_put(prealloc);
        prealloc = nullptr;
      }
      nr = static_cast<unsigned>(ret);
    } while (dst_pte += nr, src_pte += nr, addr += nr * PAGE_SIZE, addr != end);

    src_ptl->unlock();
    for (int c = 0; c < NR_MM_COUNTERS; c++)
      if (rss[c]) add_mm_counter(dst_mm, static_cast<MmCounter>(c), rss[c]);
    dst_ptl->unlock();

    if (ret == -EAGAIN) {
      // folio_prealloc(src_mm, src_vma, addr, false)
      prealloc = src_mm->phys->folio_alloc(GFP_HIGHUSER_MOVABLE, 0);
      if (!prealloc) return -ENOMEM;
    } else if (ret < 0) {
      break;  // -ENOMEM from copy_nonpresent_pte, -EHWPOISON
    }
    ret = 0;
    if (addr == end) break;
  }
  if (prealloc) folio_put(prealloc);
  return ret < 0 ? ret : 0;
}

// ---- PMD level (mm/huge_memory.c) ----

}  // namespace

// copy_huge_pmd: copy a PMD leaf. 0 when done (or skipped: the child of a
// file VMA refaults), -ENOMEM, or -EAGAIN when the caller must copy at PTE
// level (the leaf went away, or the source PMD was split because its THP may
// be pinned).
int copy_huge_pmd(Vma* dst_vma, Vma* src_vma, pmd_t* dst_pmd, pmd_t* src_pmd, uint64_t addr) {
  Mm* dst_mm = dst_vma->vm_mm;
  Mm* src_mm = src_vma->vm_mm;
  PhysMem* phys = src_mm->phys;
  pmd_t pmd = pmdp_get(src_pmd);

  if (pmd_present(pmd) && pmd_special(pmd) && !phys->is_huge_zero_pfn(pmd_pfn(pmd))) {
    // A PFN-map leaf: copied as it is (never writable in a CoW mapping).
    SpinLock* dst_ptl = pmd_lock(dst_mm, dst_pmd);
    dst_ptl->assert_held();
    SpinLock* src_ptl = pmd_lockptr(src_mm, src_pmd);
    src_ptl->lock(LockClass::kPmdLock, kSingleDepthNesting);
    VM_WARN_ON_ONCE_MM(is_cow_mapping(src_vma->vm_flags) && pmd_write(pmd), src_vma->vm_mm,
                       "writable PFN-map PMD in a CoW mapping");
    entry_set(dst_pmd, pmd_mkold(pmd));
    src_ptl->unlock();
    dst_ptl->unlock();
    return 0;
  }

  // File THPs are not copied: the child refaults them.
  if (!vma_is_anonymous(dst_vma)) return 0;

  Page* pgtable = pte_alloc_one(dst_mm);  // the child's deposit, before the locks
  if (!pgtable) return -ENOMEM;

  SpinLock* dst_ptl = pmd_lock(dst_mm, dst_pmd);
  dst_ptl->assert_held();
  SpinLock* src_ptl = pmd_lockptr(src_mm, src_pmd);
  src_ptl->lock(LockClass::kPmdLock, kSingleDepthNesting);

  pmd = pmdp_get(src_pmd);
  if (!pmd_trans_huge(pmd)) {
    src_ptl->unlock();
    dst_ptl->unlock();
    pgtable_free(dst_mm, pgtable);
    return -EAGAIN;
  }

  if (phys->is_huge_zero_pfn(pmd_pfn(pmd))) {
    mm_get_huge_zero_folio_for(dst_mm);
  } else {
    Page* src_page = phys->pfn_to_page(pmd_pfn(pmd));
    Folio* src_folio = page_folio(src_page);
    VM_BUG_ON_FOLIO(src_page != &src_folio->page, src_folio, "PMD leaf does not map a folio head");
    folio_get(src_folio);
    if (folio_try_dup_anon_rmap_pmd(src_folio, src_page, dst_vma, src_vma)) {
      // Maybe pinned: split the parent's PMD and copy at PTE level, where
      // the pinned pages are copied for the child.
      folio_put(src_folio);
      src_ptl->unlock();
      dst_ptl->unlock();
      pgtable_free(dst_mm, pgtable);
      split_huge_pmd(src_vma, src_pmd, addr);
      return -EAGAIN;
    }
    add_mm_counter(dst_mm, MM_ANONPAGES, HPAGE_PMD_NR);
  }
  pgtable_trans_huge_deposit(dst_mm, dst_pmd, pgtable);
  pmdp_set_wrprotect(src_pmd);
  if (!userfaultfd_wp(dst_vma)) pmd = pmd_clear_uffd_wp(pmd);
  pmd = pmd_mkold(pmd_wrprotect(pmd));
  entry_set(dst_pmd, pmd);
  src_ptl->unlock();
  dst_ptl->unlock();
  return 0;
}

namespace {

int copy_pmd_range(Vma* dst_vma, Vma* src_vma, pud_t* dst_pud, pud_t src_pudval, uint64_t addr, uint64_t end) {
  Mm* dst_mm = dst_vma->vm_mm;
  pmd_t* dst_pmd = pmd_alloc(dst_mm, dst_pud, addr);
  if (!dst_pmd) return -ENOMEM;
  pmd_t* src_pmd = pmd_offset(src_vma->vm_mm->phys, src_pudval, addr);
  for (uint64_t next; addr != end; dst_pmd++, src_pmd++, addr = next) {
    next = pmd_addr_end(addr, end);
    if (pmd_trans_huge(pmdp_get(src_pmd))) {
      VM_BUG_ON(next - addr != PMD_SIZE, "PMD leaf only partly inside its VMA");
      int err = copy_huge_pmd(dst_vma, src_vma, dst_pmd, src_pmd, addr);
      if (err == -ENOMEM) return -ENOMEM;
      if (!err) continue;
      // -EAGAIN: copy whatever the PMD holds now at PTE level.
    }
    pmd_t v = pmdp_get(src_pmd);
    if (pmd_none(v) || pmd_bad(v)) continue;  // pmd_none_or_clear_bad
    if (int err = copy_pte_range(dst_vma, src_vma, dst_pmd, src_pmd, addr, next)) return err;
  }
  return 0;
}

int copy_pud_range(Vma* dst_vma, Vma* src_vma, pgd_t src_pgdval, uint64_t addr, uint64_t end) {
  Mm* dst_mm = dst_vma->vm_mm;
  pud_t* dst_pud = pud_alloc(dst_mm, addr);
  if (!dst_pud) return -ENOMEM;
  pud_t* src_pud = pud_offset(src_vma->vm_mm->phys, src_pgdval, addr);
  for (uint64_t next; addr != end; dst_pud++, src_pud++, addr = next) {
    next = pud_addr_end(addr, end);
    pud_t v = pudp_get(src_pud);
    // PUD leaves exist only in hugetlb VMAs, which copy_hugetlb_page_range copies.
    VM_BUG_ON(pud_leaf(v), "PUD leaf outside a hugetlb VMA");
    if (!pud_present(v) || pud_leaf(v)) continue;
    if (int err = copy_pmd_range(dst_vma, src_vma, dst_pud, v, addr, next)) return err;
  }
  return 0;
}

// vma_needs_copy: page tables a fault can rebuild are left to the fault.
bool vma_needs_copy(const Vma* dst_vma, const Vma* src_vma) {
  if (userfaultfd_wp(dst_vma)) return true;  // uffd-wp bits live only in the page tables
  if (src_vma->vm_flags & (VM_PFNMAP | VM_MIXEDMAP)) return true;
  if (src_vma->anon_vma) return true;  // anonymous pages exist only in the page tables
  return false;
}

}  // namespace

int copy_page_range(Vma* dst_vma, Vma* src_vma) {
  if (!vma_needs_copy(dst_vma, src_vma)) return 0;
  if (is_vm_hugetlb_page(src_vma)) return copy_hugetlb_page_range(dst_vma, src_vma);

  Mm* src_mm = src_vma->vm_mm;
  // Only a CoW mapping loses write permission in the parent; GUP-fast's
  // FOLL_PIN path reads write_protect_seq to stay out of the way meanwhile.
  const bool is_cow = is_cow_mapping(src_vma->vm_flags);
  if (is_cow) {
    VM_BUG_ON(!vma_is_write_locked(src_vma), "copy_page_range on a VMA that is not write-locked");
    src_mm->write_protect_seq.write_begin();
  }
  int ret = 0;
  for (uint64_t addr = src_vma->vm_start, end = src_vma->vm_end, next; addr != end; addr = next) {
    next = pgd_addr_end(addr, end);
    pgd_t g = pgdp_get(pgd_offset(src_mm, addr));
    if (!pgd_present(g)) continue;
    ret = copy_pud_range(dst_vma, src_vma, g, addr, next);
    if (ret) break;
  }
  if (is_cow) src_mm->write_protect_seq.write_end();
  return ret;
}

// dup_mmap: copy oldmm's VMAs (and, through copy_page_range, their page
// tables) into the new, empty mm. 0, or -ENOMEM or -EHWPOISON with mm partly
// built (the caller tears it down with mmput).
int dup_mmap(Mm* mm, Mm* oldmm) {
  mmap_write_lock(oldmm);
  // mmap_write_lock_nested(mm, SINGLE_DEPTH_NESTING): nobody else can reach
  // mm yet, so the trylock always succeeds (and records no order edge).
  if (!mm->mmap_lock.down_write_trylock()) {
    VM_BUG_ON(true, "new mm already locked");
    mmap_write_unlock(oldmm);
    return -EINTR;
  }
  mm->flags.store(oldmm->flags.load(std::memory_order_relaxed) & MMF_INIT_MASK, std::memory_order_relaxed);
  khugepaged_fork(mm, oldmm);
  mm->mmap_base = oldmm->mmap_base;
  mm->task_size = oldmm->task_size;
  uint64_t total_vm = oldmm->total_vm.load(std::memory_order_relaxed);

  int retval = 0;
  for (auto& kv : oldmm->vmas) {
    Vma* mpnt = kv.second.get();
    mmap_assert_write_locked(mpnt->vm_mm);
    vma_start_write(mpnt);
    if (mpnt->vm_flags & VM_DONTCOPY) {
      total_vm -= mpnt->pages();  // vm_stat_account(mm, flags, -pages)
      continue;
    }
    oldmm->stats->count(Event::fork_vmas);
    std::unique_ptr<Vma> tmp = vm_area_dup(mpnt);
    tmp->vm_mm = mm;
    // dup_userfaultfd() without UFFD_FEATURE_EVENT_FORK.
    if (tmp->vm_flags & VM_UFFD_FLAGS) {
      tmp->vm_flags &= ~VM_UFFD_FLAGS;
      vma_set_page_prot(tmp.get());
    }
    // VM_WIPEONFORK: the child starts with empty memory here, and gets an
    // anon_vma at its first fault.
    if (!(tmp->vm_flags & VM_WIPEONFORK)) anon_vma_fork(tmp.get(), mpnt);
    tmp->vm_flags &= ~VM_LOCKED_MASK;  // mlock() is not inherited
    // vma_link puts a file VMA's twin on the file's i_mmap
    // (vma_interval_tree_insert_after in the kernel).
    Vma* dst = vma_link(mm, std::move(tmp));
    if (!(dst->vm_flags & VM_WIPEONFORK)) retval = copy_page_range(dst, mpnt);
    if (retval) break;
  }
  mm->total_vm.store(total_vm, std::memory_order_relaxed);

  mmap_write_unlock(mm);
  // flush_tlb_mm(oldmm): the parent's write-protected entries.
  flush_tlb_mm(oldmm);
  mmap_write_unlock(oldmm);
  return retval;
}

// copy_mm -> dup_mm (kernel/fork.c): a new Mm with a copy of oldmm;
// nullptr with *err set (the half-built child torn down by mmput()).
std::unique_ptr<Mm> dup_mm(Mm* oldmm, int* err) {
  *err = 0;
  oldmm->stats->count(Event::fork_mm);
  auto mm = mm_alloc(oldmm->kernel);
  if (!mm) {
    *err = -ENOMEM;
    return nullptr;
  }
  if (int ret = dup_mmap(mm.get(), oldmm)) {
    mmput(mm.get());
    *err = ret;
    return nullptr;
  }
  return mm;
}

}  // namespace mmlab
