// struct page and struct folio.
//
// Every frame of simulated RAM has one Page (64 bytes, as struct page on
// x86-64). The memmap is a lazily-touched host mapping: Page is an
// implicit-lifetime aggregate whose all-zero bytes mean "never used", and
// fields that are shared between threads are accessed through
// std::atomic_ref, so no constructor ever runs over the memmap. The memmap is
// never freed while its PhysMem lives (type-stable memory: a lockless GUP-fast
// walker may read any Page at any time).
//
// A Folio is the head Page of 2^order contiguous frames; like the kernel, its
// extra fields overlay the first tail pages (page[1]: mapcounts, pincount,
// MM-ID slots; page[2]: the deferred-split list link). Counts are stored as
// plain counts (number of mappings), not with the kernel's -1 bias; the
// accessors return what the kernel's helpers return.
#pragma once

#include <atomic>
#include <cstdint>

#include "mmlab/types.h"
#include "sync/spinlock.h"

namespace mmlab {

class PhysMem;

// Page::flags bits. Folio-wide flags live in the head page; PG_anon_exclusive
// is per page; PG_partially_mapped and PG_maybe_shared live in page[1].
enum PageFlag : unsigned {
  PG_locked = 0,       // folio lock (sleeping lock; see folio_lock())
  PG_referenced,
  PG_uptodate,
  PG_dirty,
  PG_lru,              // on an LRU list
  PG_head,             // head of a large folio
  PG_active,
  PG_workingset,
  PG_swapbacked,
  PG_swapcache,
  PG_reserved,         // never allocated or freed (the shared zero page)
  PG_unevictable,
  PG_mlocked,
  PG_idle,
  PG_anon,             // folio->mapping is an anon_vma (PAGE_MAPPING_ANON)
  PG_anon_exclusive,   // PageAnonExclusive (per page)
  PG_large_rmappable,
  PG_partially_mapped, // page[1]: queued on the deferred split list as partially mapped
  PG_maybe_shared,     // page[1]: MM-ID "maybe mapped shared"
  PG_hugetlb,
  PG_buddy,            // page type: free block head in the buddy allocator (private_ = order)
  PG_table,            // page type: a page-table page
  PG_pcp,              // page type: free page on a per-CPU list (private_ = order)
  PG_deferred_list,    // page[2]: linked on the deferred split queue
  PG_dropbehind,
  PG_huge_zero,        // the huge zero folio
  PG_writeback,        // swap writeback in flight (a swap-cache folio written to an asynchronous device)
  PG_mapcount_lock,    // page[1]: folio_lock_large_mapcount() bit spinlock
  PG_nr_flags,
};
inline constexpr unsigned PG_ORDER_SHIFT = 56;  // head page: folio order in bits 56..63
inline constexpr uint64_t PG_ORDER_MASK = 0xffull << PG_ORDER_SHIFT;

struct Page {
  uint64_t flags;          // PageFlag bits, folio order in the head
  uint64_t compound_head;  // tail page: address of the head Page | 1; else 0
  union {
    struct {
      uint64_t next, prev;  // buddy / per-CPU free lists (Page addresses); page[2]: deferred list
    } lru;
    struct {
      int32_t large_mapcount;   // page[1]: all mappings of the folio (PTEs + PMD/PUD entries)
      int32_t entire_mapcount;  // page[1]: PMD/PUD mappings
      int32_t nr_pages_mapped;  // page[1]: pages mapped by at least one PTE
      int32_t pincount;         // page[1]: FOLL_PIN pins, in pages
    } f1;
    struct {
      SpinLock ptl;            // split PTE lock / split PMD lock of this table
      uint32_t nr_entries;     // present + non-none entries (checker aid)
      uint64_t free_next;      // deferred (RCU-like) freeing list
    } pt;
  };
  union {
    uint64_t mapping;        // head: AnonVma* (PG_anon) or AddressSpace*
    int32_t mm_id[2];        // page[1]: MM-ID slots (0 = free)
  };
  union {
    uint64_t index;          // head: page offset in the file, or linear page index for anon
    int32_t mm_id_mapcount[2];  // page[1]: mappings accounted to each MM-ID slot
  };
  uint64_t private_;       // buddy/pcp: order; swapcache: swap entry; table page: owning level
  int32_t mapcount;        // this page's PTE mappings (CONFIG_PAGE_MAPCOUNT); small folio: all mappings
  int32_t refcount;        // head: _refcount
};
static_assert(sizeof(Page) == 64, "per-frame metadata must stay struct-page sized");

// The folio is its head page.
struct Folio {
  Page page;
};
static_assert(sizeof(Folio) == sizeof(Page));

// ---- atomic field access -------------------------------------------------

template <typename T>
inline std::atomic_ref<T> aref(T& x) {
  return std::atomic_ref<T>(x);
}

inline bool test_bit(unsigned nr, const Page* p) {
  return aref(const_cast<uint64_t&>(p->flags)).load(std::memory_order_acquire) & (1ull << nr);
}
inline void set_bit(unsigned nr, Page* p) { aref(p->flags).fetch_or(1ull << nr, std::memory_order_acq_rel); }
inline void clear_bit(unsigned nr, Page* p) { aref(p->flags).fetch_and(~(1ull << nr), std::memory_order_acq_rel); }
inline bool test_and_set_bit(unsigned nr, Page* p) {
  return aref(p->flags).fetch_or(1ull << nr, std::memory_order_acq_rel) & (1ull << nr);
}
inline bool test_and_clear_bit(unsigned nr, Page* p) {
  return aref(p->flags).fetch_and(~(1ull << nr), std::memory_order_acq_rel) & (1ull << nr);
}

// ---- page <-> folio ------------------------------------------------------

inline bool PageTail(const Page* p) {
  return aref(const_cast<uint64_t&>(p->compound_head)).load(std::memory_order_acquire) & 1;
}
inline Page* compound_head(Page* p) {
  uint64_t h = aref(p->compound_head).load(std::memory_order_acquire);
  return (h & 1) ? reinterpret_cast<Page*>(h - 1) : p;
}
inline Folio* page_folio(Page* p) { return reinterpret_cast<Folio*>(compound_head(p)); }
inline Page* folio_page(Folio* f, long n) { return &f->page + n; }
inline const Page* folio_page(const Folio* f, long n) { return &f->page + n; }

inline unsigned folio_order(const Folio* f) {
  if (!test_bit(PG_head, &f->page)) return 0;
  return static_cast<unsigned>(aref(const_cast<uint64_t&>(f->page.flags)).load(std::memory_order_relaxed) >>
                               PG_ORDER_SHIFT);
}
inline long folio_nr_pages(const Folio* f) { return 1l << folio_order(f); }
inline bool folio_test_large(const Folio* f) { return test_bit(PG_head, &f->page); }
inline long folio_page_idx(const Folio* f, const Page* p) { return p - &f->page; }
inline bool folio_contains_page(const Folio* f, const Page* p) {
  long i = folio_page_idx(f, p);
  return i >= 0 && i < folio_nr_pages(f);
}

// ---- folio flags ---------------------------------------------------------

#define MMLAB_FOLIO_FLAG(name, bit)                                                   \
  inline bool folio_test_##name(const Folio* f) { return test_bit(bit, &f->page); }  \
  inline void folio_set_##name(Folio* f) { set_bit(bit, &f->page); }                 \
  inline void folio_clear_##name(Folio* f) { clear_bit(bit, &f->page); }
MMLAB_FOLIO_FLAG(locked, PG_locked)
MMLAB_FOLIO_FLAG(referenced, PG_referenced)
MMLAB_FOLIO_FLAG(uptodate, PG_uptodate)
MMLAB_FOLIO_FLAG(dirty, PG_dirty)
MMLAB_FOLIO_FLAG(lru, PG_lru)
MMLAB_FOLIO_FLAG(active, PG_active)
MMLAB_FOLIO_FLAG(workingset, PG_workingset)
MMLAB_FOLIO_FLAG(swapbacked, PG_swapbacked)
MMLAB_FOLIO_FLAG(swapcache, PG_swapcache)
MMLAB_FOLIO_FLAG(unevictable, PG_unevictable)
MMLAB_FOLIO_FLAG(mlocked, PG_mlocked)
MMLAB_FOLIO_FLAG(idle, PG_idle)
MMLAB_FOLIO_FLAG(anon, PG_anon)
MMLAB_FOLIO_FLAG(hugetlb, PG_hugetlb)
MMLAB_FOLIO_FLAG(large_rmappable, PG_large_rmappable)
MMLAB_FOLIO_FLAG(dropbehind, PG_dropbehind)
MMLAB_FOLIO_FLAG(huge_zero, PG_huge_zero)
MMLAB_FOLIO_FLAG(writeback, PG_writeback)
#undef MMLAB_FOLIO_FLAG

inline bool folio_test_reserved(const Folio* f) { return test_bit(PG_reserved, &f->page); }
// Page[1] flags of a large folio.
inline bool folio_test_partially_mapped(const Folio* f) {
  return folio_test_large(f) && test_bit(PG_partially_mapped, folio_page(f, 1));
}
// Small folio: mapped more than once. Large: the MM-ID "maybe mapped shared" bit.
inline bool folio_maybe_mapped_shared(const Folio* f);

// PG_anon_exclusive is read by GUP-fast without locks and cleared by fork
// and try_share: each access is a schedule point (sync/sched.h), named by pfn.
inline sched::Object page_flags_object(const Page* p) { return {p, sched::ObjKind::kPageFlags, sched::kByAddress}; }
inline bool PageAnonExclusive(const Page* p) {
  sched::point("PageAnonExclusive", sched::Op::kRead, page_flags_object(p));
  return test_bit(PG_anon_exclusive, p);
}
inline void SetPageAnonExclusive(Page* p) {
  sched::point("SetPageAnonExclusive", sched::Op::kRmw, page_flags_object(p));
  set_bit(PG_anon_exclusive, p);
}
inline void ClearPageAnonExclusive(Page* p) {
  sched::point("ClearPageAnonExclusive", sched::Op::kRmw, page_flags_object(p));
  clear_bit(PG_anon_exclusive, p);
}
inline bool PageBuddy(const Page* p) { return test_bit(PG_buddy, p); }
inline bool PageTable(const Page* p) { return test_bit(PG_table, p); }
inline bool PageReserved(const Page* p) { return test_bit(PG_reserved, p); }

// ---- reference counts ----------------------------------------------------

// Every refcount access is a schedule point (sync/sched.h), the refcount
// named by the folio's pfn.
inline sched::Object refcount_object(const Folio* f) { return {f, sched::ObjKind::kRefcount, sched::kByAddress}; }
inline int folio_ref_count(const Folio* f) {
  sched::point("folio_ref_count", sched::Op::kRead, refcount_object(f));
  return aref(const_cast<int32_t&>(f->page.refcount)).load(std::memory_order_acquire);
}
inline void folio_ref_add(Folio* f, int nr) {
  sched::point("folio_ref_add", sched::Op::kRmw, refcount_object(f));
  aref(f->page.refcount).fetch_add(nr, std::memory_order_acq_rel);
}
inline void folio_ref_inc(Folio* f) { folio_ref_add(f, 1); }
inline void folio_get(Folio* f) { folio_ref_add(f, 1); }
// Returns true when the count dropped to zero.
inline bool folio_ref_sub_and_test(Folio* f, int nr) {
  sched::point("folio_ref_sub_and_test", sched::Op::kRmw, refcount_object(f));
  return aref(f->page.refcount).fetch_sub(nr, std::memory_order_acq_rel) == nr;
}
// Speculative reference for lockless walkers: fails on a folio being freed.
// One point for the whole loop; the CAS is strong, so the loop's length
// depends on other threads' writes alone (issue 34 §4).
inline bool folio_ref_try_add(Folio* f, int nr) {
  sched::point("folio_ref_try_add", sched::Op::kRmw, refcount_object(f));
  auto r = aref(f->page.refcount);
  int old = r.load(std::memory_order_relaxed);
  do {
    if (old <= 0) return false;
  } while (!r.compare_exchange_strong(old, old + nr, std::memory_order_acq_rel, std::memory_order_relaxed));
  return true;
}
// page_ref_freeze: the refcount from exactly `count` to 0, or nothing (a
// frozen folio takes no speculative reference: folio_ref_try_add fails).
inline bool page_ref_freeze(Page* p, int count) {
  sched::point("folio_ref_freeze", sched::Op::kRmw, {p, sched::ObjKind::kRefcount, sched::kByAddress});
  return aref(p->refcount).compare_exchange_strong(count, 0, std::memory_order_acq_rel);
}
inline bool folio_ref_freeze(Folio* f, int count) { return page_ref_freeze(&f->page, count); }
// page_ref_unfreeze: a frozen refcount set to `count`.
inline void page_ref_unfreeze(Page* p, int count) {
  sched::point("folio_ref_unfreeze", sched::Op::kWrite, {p, sched::ObjKind::kRefcount, sched::kByAddress});
  aref(p->refcount).store(count, std::memory_order_release);
}
inline void folio_ref_unfreeze(Folio* f, int count) { page_ref_unfreeze(&f->page, count); }
// Drops nr references and frees the folio when the last one goes (phys/folio.cpp).
void folio_put_refs(Folio* f, int nr);
inline void folio_put(Folio* f) { folio_put_refs(f, 1); }

// ---- mapcounts and pins ----------------------------------------------------

inline int folio_large_mapcount(const Folio* f) {
  return aref(const_cast<int32_t&>(folio_page(f, 1)->f1.large_mapcount)).load(std::memory_order_acquire);
}
inline int folio_entire_mapcount(const Folio* f) {
  if (!folio_test_large(f)) return 0;
  return aref(const_cast<int32_t&>(folio_page(f, 1)->f1.entire_mapcount)).load(std::memory_order_acquire);
}
inline int folio_mapcount(const Folio* f) {
  if (folio_test_large(f)) return folio_large_mapcount(f);
  return aref(const_cast<int32_t&>(f->page.mapcount)).load(std::memory_order_acquire);
}
inline bool folio_mapped(const Folio* f) { return folio_mapcount(f) > 0; }
inline bool folio_maybe_mapped_shared(const Folio* f) {
  if (!folio_test_large(f)) return folio_mapcount(f) > 1;
  return test_bit(PG_maybe_shared, folio_page(f, 1));
}
inline int page_mapcount(const Page* p) {
  return aref(const_cast<int32_t&>(p->mapcount)).load(std::memory_order_acquire);
}

inline constexpr int GUP_PIN_COUNTING_BIAS = 1024;
// On 64-bit every large folio has room for a pincount (v6.15+).
inline bool folio_has_pincount(const Folio* f) { return folio_test_large(f); }
inline int folio_pincount(const Folio* f) {
  if (!folio_has_pincount(f)) return 0;
  sched::point("folio_pincount", sched::Op::kRead, {f, sched::ObjKind::kPincount, sched::kByAddress});
  return aref(const_cast<int32_t&>(folio_page(f, 1)->f1.pincount)).load(std::memory_order_acquire);
}
// Exact for folios with a pincount; may give false positives otherwise.
inline bool folio_maybe_dma_pinned(const Folio* f) {
  if (folio_has_pincount(f)) return folio_pincount(f) > 0;
  return static_cast<unsigned>(folio_ref_count(f)) >= static_cast<unsigned>(GUP_PIN_COUNTING_BIAS);
}

// ---- folio lock (PG_locked): a sleeping lock above the page-table locks --

// May fail by fault injection (the site `folio_trylock`), as if another
// task held the lock.
bool folio_trylock(Folio* f);
void folio_lock(Folio* f);
// __folio_set_locked: lock a new folio nobody else can see yet (never fails).
void __folio_set_locked(Folio* f);
void folio_unlock(Folio* f);

}  // namespace mmlab
