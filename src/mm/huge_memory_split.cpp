// Splitting a large anonymous folio into order-0 folios, and the
// deferred-split shrinker: the split code of mm/huge_memory.c
// (__folio_split, __split_unmapped_folio, deferred_split_scan,
// thp_underused). Its rmap halves are where the kernel has them:
// unmap_folio -> try_to_migrate in mm/rmap.cpp, remap_page ->
// remove_migration_ptes (with try_to_map_unused_to_zeropage) in
// mm/migrate.cpp.
//
// The protocol is the kernel's: with the folio locked and the anon_vma
// write-locked, every mapping is replaced by a migration entry (a PMD mapping
// is split into PTEs first), the refcount is frozen at the expected value
// (the caller's reference plus the swap cache's), the metadata is rewritten
// into order-0 folios, and the migration entries are turned back into PTEs of
// the new folios. Any unexpected reference (a pin, a GET) makes the freeze
// fail, and the folio is mapped again unsplit.
//
// Model notes:
//  - Only anonymous folios are split here (file and shmem folios return
//    -EINVAL), and only to order 0.
//  - A PMD mapping is split into PTEs (split_huge_pmd) and those are then
//    replaced, where the kernel's split_huge_pmd_locked(freeze=true) writes
//    migration entries directly; the end state is the same.
//  - The anon_vma's VMAs are a set ordered by creation id, not the kernel's
//    interval tree in fork order, so remap_page() (remove_migration_ptes in
//    mm/migrate.cpp) repeats its walk until a pass finds no migration entry
//    left (a concurrent fork may have copied one into a child VMA visited
//    earlier).
//  - folio_get_anon_vma() has no RCU: the anon_vma of a folio that is still
//    mapped is assumed to stay alive while its reference is taken.
//  - deferred_split_scan() scans the whole queue in one call; a folio that is
//    not partially mapped (a PMD THP queued for the underused-THP shrinker) is
//    split only if thp_underused() says so, else dropped from the queue, as
//    in the kernel (with the default max_ptes_none of 511 it never is
//    underused; with shrink_underused 0 no such folio is queued at all).
//    Such a split counts thp_underused_split_page.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "mm/swapfile.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"

namespace mmlab {

bool can_split_folio(Folio* folio, int caller_pins, int* pextra_pins) {
  int extra;
  if (folio_test_anon(folio)) extra = folio_test_swapcache(folio) ? static_cast<int>(folio_nr_pages(folio)) : 0;
  else extra = static_cast<int>(folio_nr_pages(folio));  // the page cache's references
  if (pextra_pins) *pextra_pins = extra;
  return folio_mapcount(folio) == folio_ref_count(folio) - extra - caller_pins;
}

namespace {

bool page_is_zero(PhysMem* phys, Page* page) {
  uint8_t found = 0;
  return user_find_not(phys, phys->page_address(page), 0, PAGE_SIZE, &found) < 0;
}

// unmap_folio: try_to_migrate over the locked anon_vma.
void unmap_folio(Folio* folio, AnonVma* av) REQUIRES(av->rwsem) { try_to_migrate(folio, av); }

// remap_page: put back every mapping unmap_folio() took away.
void remap_page(AnonVma* av, pfn_t fpfn, uint64_t index, uint64_t nr, bool map_unused_to_zeropage)
    REQUIRES(av->rwsem) {
  remove_migration_ptes(av, fpfn, index, nr, nullptr, map_unused_to_zeropage);
}

// __split_unmapped_folio to order 0 for a frozen, unmapped anonymous folio:
// every page becomes a folio of its own with the head's flags, anon_vma,
// linear index and swap entry, keeping its own AnonExclusive bit. The new
// folios are unfrozen with the references they are expected to hold (the
// swap cache's) plus one the splitter drops when done; the head keeps its
// one as the caller's.
void split_unmapped_folio(Kernel* k, Folio* folio, long nr, unsigned order) {
  Page* head = &folio->page;
  constexpr uint64_t kInherit = (1ull << PG_referenced) | (1ull << PG_swapbacked) | (1ull << PG_swapcache) |
                                (1ull << PG_mlocked) | (1ull << PG_uptodate) | (1ull << PG_active) |
                                (1ull << PG_workingset) | (1ull << PG_locked) | (1ull << PG_unevictable) |
                                (1ull << PG_dirty) | (1ull << PG_anon) | (1ull << PG_lru);
  const uint64_t head_flags = aref(head->flags).load(std::memory_order_acquire) & kInherit;
  const uint64_t mapping = aref(head->mapping).load(std::memory_order_acquire);
  const uint64_t index = head->index;
  const bool swapcache = folio_test_swapcache(folio);
  const uint64_t swap = aref(head->private_).load(std::memory_order_acquire);
  if (folio_test_anon(folio)) k->stats->count_mthp(order, MthpStat::nr_anon, -1);

  for (long i = 1; i < nr; i++) {
    Page* p = head + i;
    VM_BUG_ON_FOLIO(page_mapcount(p) != 0, folio, "splitting a folio with a page still mapped");
    const uint64_t own = aref(p->flags).load(std::memory_order_acquire) & (1ull << PG_anon_exclusive);
    // Page 1's mapcounts and MM-ID slots, page 2's deferred-list link: gone.
    aref(p->lru.next).store(0, std::memory_order_relaxed);
    aref(p->lru.prev).store(0, std::memory_order_relaxed);
    aref(p->mapping).store(mapping, std::memory_order_relaxed);
    aref(p->index).store(index + static_cast<uint64_t>(i), std::memory_order_relaxed);
    aref(p->private_).store(swapcache ? swap + static_cast<uint64_t>(i) : 0, std::memory_order_relaxed);
    aref(p->refcount).store(0, std::memory_order_relaxed);
    aref(p->flags).store(head_flags | own, std::memory_order_release);
    // Last: a lockless walker that reads the page as its own folio finds it
    // complete (and frozen until unfrozen below).
    aref(p->compound_head).store(0, std::memory_order_release);
  }
  aref(head->flags).fetch_and(~((1ull << PG_head) | PG_ORDER_MASK), std::memory_order_acq_rel);
  if (swapcache) swap_cache_split_folio(folio, nr);

  // Unfreeze the new folios, the head last.
  const int expected = 1 + (swapcache ? 1 : 0);
  for (long i = 1; i < nr; i++) page_ref_unfreeze(&head[i], expected);
  page_ref_unfreeze(head, expected);
}

// free_folio_and_swap_cache.
void free_folio_and_swap_cache(Folio* folio) {
  free_swap_cache(folio);
  folio_put(folio);
}

// __folio_split(folio, 0, ...) with the anon_vma write-locked.
int split_anon_folio_locked(Kernel* k, Folio* folio, AnonVma* av, std::vector<Folio*>* list) REQUIRES(av->rwsem) {
  int extra_pins;
  // Racy check before unmap_folio() splits PMD mappings for nothing.
  if (!can_split_folio(folio, 1, &extra_pins)) return -EAGAIN;
  const pfn_t fpfn = folio_pfn(folio);
  const uint64_t index = folio->page.index;
  const long nr = folio_nr_pages(folio);
  const unsigned order = folio_order(folio);

  unmap_folio(folio, av);
  // Label: every mapping is a migration entry, the refcount not frozen yet.
  sched::point("split.unmapped", sched::Op::kLabel, refcount_object(folio));

  bool frozen;
  {
    // Keeps deferred_split_scan() from taking a reference meanwhile.
    MutexGuard g(&k->split_queue_lock);
    frozen = folio_ref_freeze(folio, 1 + extra_pins);
    Page* p1 = folio_page(folio, 1);
    if (frozen && order > 1 && test_bit(PG_deferred_list, p1)) {
      k->split_queue.erase(folio);
      clear_bit(PG_deferred_list, p1);
      if (test_and_clear_bit(PG_partially_mapped, p1)) k->stats->count_mthp(order, MthpStat::nr_anon_partially_mapped, -1);
    }
  }
  if (!frozen) {
    remap_page(av, fpfn, index, static_cast<uint64_t>(nr), /*map_unused_to_zeropage=*/false);
    return -EAGAIN;
  }

  split_unmapped_folio(k, folio, nr, order);
  remap_page(av, fpfn, index, static_cast<uint64_t>(nr), /*map_unused_to_zeropage=*/true);

  // Every new folio but the caller's: onto the caller's list (page reclaim)
  // or left where its mappings are; unmapped ones are freed.
  for (long i = 1; i < nr; i++) {
    auto* nf = reinterpret_cast<Folio*>(folio_page(folio, i));
    if (list) {
      folio_get(nf);
      list->push_back(nf);
    }
    // Locked on the head's behalf (the flag was inherited): no lockdep record.
    clear_bit(PG_locked, &nf->page);
    free_folio_and_swap_cache(nf);
  }
  return 0;
}

// __folio_split(folio, 0, ...) of a locked shmem page-cache folio: every
// mapping goes (try_to_unmap: page-cache pages are refaulted, not remapped,
// after a split), the refcount is frozen at the page cache's references
// plus the caller's with the page-cache lock held, and the order-0 folios
// take the folio's place in the page cache, each holding the cache's
// reference; the caller keeps its reference (and the lock) on the first.
int split_shmem_folio_locked(Kernel* k, Folio* folio) {
  auto* f = reinterpret_cast<File*>(aref(folio->page.mapping).load(std::memory_order_acquire));
  if (!f) return -EBUSY;  // truncated meanwhile
  int extra_pins;
  if (!can_split_folio(folio, 1, &extra_pins)) return -EAGAIN;
  const long nr = folio_nr_pages(folio);
  const unsigned order = folio_order(folio);
  const uint64_t index = folio->page.index;
  try_to_unmap(folio, TTU_IGNORE_MLOCK);
  std::vector<Folio*> dropped;  // past the end: out of the page cache, freed
  {
    MutexGuard g(&f->lock);
    if (folio_mapped(folio) || !folio_ref_freeze(folio, 1 + extra_pins))
      return -EAGAIN;  // nothing to put back: page-cache folios refault
    // Pages at or past EOF (for shmem: past what fallocate allocated too)
    // leave the page cache (__folio_split's end).
    uint64_t end = file_end_index(f);
    if (file_is_shmem(f)) end = shmem_fallocend(f, end);
    split_unmapped_folio(k, folio, nr, order);
    // Each order-0 folio holds the cache's reference; the first also the caller's.
    folio_ref_add(folio, 1);
    f->pages.erase(index);
    for (long i = 0; i < nr; i++) {
      auto* nf = reinterpret_cast<Folio*>(folio_page(folio, i));
      if (i && index + static_cast<uint64_t>(i) >= end) {
        aref(nf->page.mapping).store(0, std::memory_order_release);
        dropped.push_back(nf);
        continue;
      }
      f->pages.emplace(index + static_cast<uint64_t>(i), nf);
    }
  }
  for (long i = 1; i < nr; i++) {
    // Locked on the head's behalf (the flag was inherited): no lockdep record.
    clear_bit(PG_locked, folio_page(folio, i));
  }
  for (Folio* nf : dropped) folio_put(nf);  // the cache's reference: freed
  return 0;
}

// thp_underused: more than max_ptes_none zero-filled pages.
bool thp_underused(Kernel* k, Folio* folio) {
  const int max_ptes_none = k->settings.max_ptes_none.load(std::memory_order_relaxed);
  if (max_ptes_none == static_cast<int>(HPAGE_PMD_NR) - 1) return false;
  PhysMem* phys = k->phys.get();
  int zero = 0, filled = 0;
  for (long i = 0; i < folio_nr_pages(folio); i++) {
    if (page_is_zero(phys, folio_page(folio, i))) {
      if (++zero > max_ptes_none) return true;
    } else if (++filled >= static_cast<int>(HPAGE_PMD_NR) - max_ptes_none) {
      return false;
    }
  }
  return false;
}

}  // namespace

int split_folio_to_list(Folio* folio, std::vector<Folio*>* list) {
  VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio, "split_folio of an unlocked folio");
  if (!folio_test_large(folio)) return -EINVAL;
  // hugetlb folios are not split, the huge zero folio never is; among
  // page-cache folios only shmem's are ever large in the model.
  if (folio_test_hugetlb(folio) || folio_test_huge_zero(folio)) return -EINVAL;
  // A page-cache folio of a regular file is large only after a read-only
  // file collapse (tune mm.read_only_thp_for_fs).
  if (!folio_test_anon(folio) && !folio_test_swapbacked(folio) && !aref(folio->page.mapping).load(std::memory_order_acquire))
    return -EINVAL;
  if (folio_test_writeback(folio)) return -EBUSY;  // __folio_split: the device still reads it
  Kernel* k = kernel_of(&folio->page);
  if (!folio_test_anon(folio)) {
    MM_TRACE("mm_split_folio", "pfn={:#x} order={}", folio_pfn(folio), folio_order(folio));
    const unsigned forder = folio_order(folio);
    const long nr = folio_nr_pages(folio);
    const int r = split_shmem_folio_locked(k, folio);
    if (forder == PMD_ORDER) k->stats->count(r ? VmStat::thp_split_page_failed : VmStat::thp_split_page);
    k->stats->count_mthp(forder, r ? MthpStat::split_failed : MthpStat::split);
    if (!r && list)  // page reclaim: the new folios, referenced, after the caller's
      for (long i = 1; i < nr; i++) {
        auto* nf = reinterpret_cast<Folio*>(folio_page(folio, i));
        folio_get(nf);
        list->push_back(nf);
      }
    return r;
  }
  MM_TRACE("mm_split_folio", "pfn={:#x} order={}", folio_pfn(folio), folio_order(folio));
  const unsigned order = folio_order(folio);
  int ret;
  // folio_get_anon_vma: the caller holds no mmap_lock that would keep the
  // anon_vma alive, so take a reference first.
  AnonVma* av = folio_anon_vma(folio);
  if (!av || !folio_mapped(folio)) {
    ret = -EBUSY;
  } else {
    get_anon_vma(av);
    {
      WriteGuard rmap(&av->rwsem);
      ret = split_anon_folio_locked(k, folio, av, list);
    }
    put_anon_vma(av);
  }
  if (order == PMD_ORDER) k->stats->count(ret ? VmStat::thp_split_page_failed : VmStat::thp_split_page);
  k->stats->count_mthp(order, ret ? MthpStat::split_failed : MthpStat::split);
  return ret;
}

long deferred_split_scan(Kernel* k) {
  // Take a reference on every queued folio so that none is freed under us.
  std::vector<Folio*> batch;
  {
    MutexGuard g(&k->split_queue_lock);
    for (auto it = k->split_queue.begin(); it != k->split_queue.end();) {
      Folio* folio = *it;
      if (folio_ref_try_add(folio, 1)) {
        batch.push_back(folio);
        ++it;
        continue;
      }
      // We lost the race with folio_put(): it is being freed.
      Page* p1 = folio_page(folio, 1);
      if (test_and_clear_bit(PG_partially_mapped, p1))
        k->stats->count_mthp(folio_order(folio), MthpStat::nr_anon_partially_mapped, -1);
      clear_bit(PG_deferred_list, p1);
      it = k->split_queue.erase(it);
    }
  }
  long split = 0;
  for (Folio* folio : batch) {
    bool did_split = false;
    bool candidate = folio_test_partially_mapped(folio);
    // Not partially mapped: a THP queued for the underused shrinker. An
    // mlocked one is left alone (its zero pages could not be remapped).
    const bool underused = !candidate && !folio_test_mlocked(folio) && thp_underused(k, folio);
    candidate |= underused;
    if (candidate && folio_trylock(folio)) {
      if (!split_folio(folio)) {
        did_split = true;
        split++;
        if (underused) k->stats->count(VmStat::thp_underused_split_page);
      }
      folio_unlock_swap(folio);
    }
    // split_folio() dequeued it on success; a folio that is not partially
    // mapped is considered used and leaves the queue; the rest stay queued.
    if (!did_split && !folio_test_partially_mapped(folio)) folio_unqueue_deferred_split(folio);
    folio_put(folio);
  }
  return split;
}

// The model's shrinkers: the deferred-split one, and (standing in for LRU
// reclaim of clean swap-cache folios) a pass over the swap cache for folios
// whose slots no swap PTE uses any more.
}  // namespace mmlab
