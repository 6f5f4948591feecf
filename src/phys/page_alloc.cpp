// The page allocator (mm/page_alloc.c): a buddy allocator per zone, per-CPU
// lists in front of it for the orders the kernel keeps on pcp lists, and
// contiguous allocation of gigantic ranges (alloc_contig_pages()).
//
// Locking: zone->lock guards a zone's free_area lists and the PG_buddy state
// of its pages; each CPU's PerCpuPages has its own lock. The two are never
// held together: a refill pulls a batch out of the buddy lists onto a local
// list under zone->lock, then splices it under the pcp lock; a give-back does
// the reverse. So the allocator imposes no order between the two classes.
//
// Page fields of free pages are written with relaxed atomic stores: a
// lockless GUP-fast walker may read flags, compound_head, refcount or the
// mapcounts of any Page at any time (the memmap is type-stable).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "base/mmdebug.h"
#include "phys/frame_copy.h"
#include "phys/phys.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

constexpr uint8_t kPagePoison = kDebugVm ? 0xaa : 0;  // PAGE_POISON in debug builds

inline Page* to_page(uint64_t v) { return reinterpret_cast<Page*>(v); }
inline uint64_t to_u64(Page* p) { return reinterpret_cast<uint64_t>(p); }

template <typename T>
inline T ld(T& x) {
  return aref(x).load(std::memory_order_relaxed);
}
template <typename T>
inline void st(T& x, std::type_identity_t<T> v) {
  aref(x).store(v, std::memory_order_relaxed);
}

// Every field of one Page back to "unused", except compound_head, which a
// new folio's tails point at the head. The refcount of a page whose count
// already dropped to zero cannot be raised by a speculative reference
// (folio_ref_try_add fails on zero), so plain stores are enough here.
void reset_page(Page* p, uint64_t compound_head) {
  st(p->flags, uint64_t{0});
  st(p->compound_head, compound_head);
  st(p->lru.next, uint64_t{0});  // also f1 (page[1]) and the table-page fields
  st(p->lru.prev, uint64_t{0});
  st(p->mapping, uint64_t{0});   // also the MM-ID slots (page[1])
  st(p->index, uint64_t{0});     // also the MM-ID mapcounts (page[1])
  st(p->private_, uint64_t{0});
  st(p->mapcount, int32_t{0});
  st(p->refcount, int32_t{0});
}

// zone->lock holder that counts each acquisition (alloc.zone_lock).
class SCOPED_CAPABILITY ZoneLockGuard {
 public:
  ZoneLockGuard(SpinLock* l, Stats* stats) ACQUIRE(l) : l_(l) {
    l_->lock(LockClass::kZoneLock);
    if (stats) stats->count(Event::alloc_zone_lock);
  }
  ~ZoneLockGuard() RELEASE() { l_->unlock(); }
  ZoneLockGuard(const ZoneLockGuard&) = delete;
  ZoneLockGuard& operator=(const ZoneLockGuard&) = delete;

 private:
  SpinLock* l_;
};

// pcp->batch for a zone of a few GiB (the kernel's zone_batchsize() gives 63).
constexpr unsigned kPcpBaseBatch = 63;

}  // namespace

// ---- per-CPU list sizing ------------------------------------------------------

// Blocks moved per refill or give-back. As nr_pcp_alloc(): the page batch
// scaled down by order, but at least two blocks for high orders.
unsigned PhysMem::pcp_batch(unsigned order) {
  if (order == 0) return kPcpBaseBatch;
  const unsigned b = kPcpBaseBatch >> order;
  return b < 2 ? 2 : b;
}

// Blocks a list may hold before a batch goes back to the buddy lists. For
// the THP order it is kept small (two batches, 8 MiB): the kernel's
// free_high heuristic drains high-order frees early, and small simulated
// machines must not lose their memory to idle per-CPU lists.
unsigned PhysMem::pcp_high(unsigned order) {
  return order == pageblock_order ? 2 * pcp_batch(order) : 6 * pcp_batch(order);
}

// ---- intrusive lists --------------------------------------------------------

void PhysMem::list_add(PageList& l, Page* p) {
  st(p->lru.prev, uint64_t{0});
  st(p->lru.next, l.head);
  if (l.head)
    st(to_page(l.head)->lru.prev, to_u64(p));
  else
    l.tail = to_u64(p);
  l.head = to_u64(p);
}

void PhysMem::list_add_tail(PageList& l, Page* p) {
  st(p->lru.next, uint64_t{0});
  st(p->lru.prev, l.tail);
  if (l.tail)
    st(to_page(l.tail)->lru.next, to_u64(p));
  else
    l.head = to_u64(p);
  l.tail = to_u64(p);
}

void PhysMem::list_del(PageList& l, Page* p) {
  const uint64_t next = ld(p->lru.next), prev = ld(p->lru.prev);
  if (prev)
    st(to_page(prev)->lru.next, next);
  else
    l.head = next;
  if (next)
    st(to_page(next)->lru.prev, prev);
  else
    l.tail = prev;
  st(p->lru.next, uint64_t{0});
  st(p->lru.prev, uint64_t{0});
}

Page* PhysMem::list_pop(PageList& l) {
  if (!l.head) return nullptr;
  Page* p = to_page(l.head);
  list_del(l, p);
  return p;
}

Page* PhysMem::list_pop_tail(PageList& l) {
  if (!l.tail) return nullptr;
  Page* p = to_page(l.tail);
  list_del(l, p);
  return p;
}

// Moves all of src to the head of dst.
void PhysMem::list_splice(PageList& dst, PageList& src) {
  if (!src.head) return;
  if (dst.head) {
    st(to_page(src.tail)->lru.next, dst.head);
    st(to_page(dst.head)->lru.prev, src.tail);
  } else {
    dst.tail = src.tail;
  }
  dst.head = src.head;
  src = PageList{};
}

// ---- the buddy lists --------------------------------------------------------

// p heads a free block of 2^order pages: mark it and link it.
void PhysMem::add_to_free_list(Zone& z, Page* p, unsigned order) {
  st(p->private_, uint64_t{order});
  set_bit(PG_buddy, p);
  FreeArea& area = z.free_area[order];
  list_add(area.list, p);
  area.nr_free++;
  z.free_pages.fetch_add(int64_t{1} << order, std::memory_order_relaxed);
}

void PhysMem::del_page_from_free_list(Zone& z, Page* p, unsigned order) {
  FreeArea& area = z.free_area[order];
  list_del(area.list, p);
  area.nr_free--;
  clear_bit(PG_buddy, p);
  st(p->private_, uint64_t{0});
  z.free_pages.fetch_sub(int64_t{1} << order, std::memory_order_relaxed);
}

// Models expand(): p heads a block of order high just taken off the lists;
// give back the upper halves until a block of order low is left at p.
void PhysMem::expand(Zone& z, Page* p, unsigned low, unsigned high) {
  while (high > low) {
    high--;
    add_to_free_list(z, p + (1ull << high), high);
  }
}

// Models __rmqueue_smallest(): the smallest free block that fits, split down.
Page* PhysMem::rmqueue_buddy(Zone& z, unsigned order) {
  for (unsigned cur = order; cur <= MAX_PAGE_ORDER; cur++) {
    PageList& l = z.free_area[cur].list;
    if (!l.head) continue;
    Page* p = to_page(l.head);
    del_page_from_free_list(z, p, cur);
    if (cur == MAX_PAGE_ORDER) frame_store_->mark_block_used(page_to_pfn(p));
    expand(z, p, order, cur);
    return p;
  }
  return nullptr;
}

// Models __free_one_page(): merge with the buddy while it is a free block of
// the same order in the same zone, then link the merged block.
void PhysMem::free_one_block(Zone& z, Page* p, unsigned order) {
  pfn_t pfn = page_to_pfn(p);
  while (order < MAX_PAGE_ORDER) {
    const pfn_t buddy_pfn = pfn ^ (1ull << order);
    if (buddy_pfn < z.start_pfn || buddy_pfn >= z.end_pfn) break;
    Page* buddy = pfn_to_page(buddy_pfn);
    // PG_buddy is only set under this zone's lock, and only on free block
    // heads, so private_ is stable once it is seen.
    if (!PageBuddy(buddy) || ld(buddy->private_) != order) break;
    del_page_from_free_list(z, buddy, order);
    pfn &= buddy_pfn;
    order++;
  }
  add_to_free_list(z, pfn_to_page(pfn), order);
}

// ---- per-CPU lists ----------------------------------------------------------

// Models rmqueue_bulk(): up to count blocks of one order under one zone->lock,
// already marked as pcp pages, onto out. Returns the number taken. Each block
// goes to the tail, so the list is in the order the buddy lists gave them:
// ascending frames out of a split block, and the CPU's prefetchers see a
// process that faults upwards touch its frames upwards.
unsigned PhysMem::rmqueue_bulk(Zone& z, unsigned order, unsigned count, PageList& out) {
  unsigned n = 0;
  ZoneLockGuard g(&z.lock, stats_);
  for (; n < count; n++) {
    Page* p = rmqueue_buddy(z, order);
    if (!p) break;
    st(p->private_, uint64_t{order});
    set_bit(PG_pcp, p);
    list_add_tail(out, p);
  }
  return n;
}

// Models free_pcppages_bulk(): return pcp blocks (each PG_pcp, private_ =
// order) to the buddy lists under one zone->lock.
void PhysMem::free_pcppages_bulk(Zone& z, PageList& blocks) {
  if (!blocks.head) return;
  ZoneLockGuard g(&z.lock, stats_);
  while (Page* p = list_pop(blocks)) {
    const unsigned order = static_cast<unsigned>(ld(p->private_));
    clear_bit(PG_pcp, p);
    st(p->private_, uint64_t{0});
    free_one_block(z, p, order);
  }
}

// Models rmqueue_pcplist(): the hot end of this CPU's list, refilled with a
// batch from the buddy lists when empty.
Page* PhysMem::rmqueue_pcp(Zone& z, unsigned order) {
  PerCpuPages& pcp = this_cpu_pcp(z);
  const int i = pcp_index(order);
  Page* p = nullptr;
  {
    SpinGuard g(&pcp.lock, LockClass::kPcpLock);
    PcpList& l = pcp.lists[i];
    if ((p = list_pop(l.list))) {
      l.count--;
      pcp.count -= 1 << order;
    }
  }
  if (!p) {
    PageList batch;
    const unsigned n = rmqueue_bulk(z, order, pcp_batch(order), batch);
    if (n == 0) return nullptr;
    p = list_pop(batch);
    if (n > 1) {
      SpinGuard g(&pcp.lock, LockClass::kPcpLock);
      PcpList& l = pcp.lists[i];
      list_splice(l.list, batch);
      l.count += static_cast<int>(n - 1);
      pcp.count += static_cast<int>(n - 1) << order;
    }
  }
  clear_bit(PG_pcp, p);
  st(p->private_, uint64_t{0});
  count(Event::alloc_pcp);
  return p;
}

// Models free_frozen_page_commit(): onto the hot end of this CPU's list; past
// the high mark a batch of the coldest blocks goes back to the buddy lists.
void PhysMem::free_pcp(Zone& z, Page* p, unsigned order) {
  PerCpuPages& pcp = this_cpu_pcp(z);
  const int i = pcp_index(order);
  st(p->private_, uint64_t{order});
  set_bit(PG_pcp, p);
  PageList give_back;
  {
    SpinGuard g(&pcp.lock, LockClass::kPcpLock);
    PcpList& l = pcp.lists[i];
    list_add(l.list, p);
    l.count++;
    pcp.count += 1 << order;
    if (static_cast<unsigned>(l.count) > pcp_high(order)) {
      for (unsigned n = pcp_batch(order); n > 0; n--) {
        list_add(give_back, list_pop_tail(l.list));
        l.count--;
        pcp.count -= 1 << order;
      }
    }
  }
  free_pcppages_bulk(z, give_back);
}

// Models drain_pages_zone(): one CPU's lists of one zone back to the buddy.
void PhysMem::drain_pages_zone(Zone& z, int cpu) {
  PerCpuPages& pcp = pcp_[z.id][cpu];
  PageList all;
  {
    SpinGuard g(&pcp.lock, LockClass::kPcpLock);
    if (pcp.count == 0) return;
    for (PcpList& l : pcp.lists) {
      list_splice(all, l.list);
      l.count = 0;
    }
    pcp.count = 0;
  }
  free_pcppages_bulk(z, all);
}

void PhysMem::drain_all_pages() {
  for (Zone& z : zones_)
    for (int cpu = 0; cpu < NR_CPUS; cpu++) drain_pages_zone(z, cpu);
}

// ---- allocation -------------------------------------------------------------

// The zonelist for gfp, highest zone first: movable allocations may use
// ZONE_MOVABLE and fall back to ZONE_NORMAL; pinnable ones (memalloc_pin
// scope) and everything else stay in ZONE_NORMAL.
int PhysMem::gfp_zonelist(gfp_t gfp, ZoneType (&zl)[MAX_NR_ZONES]) const {
  int n = 0;
  if ((gfp & __GFP_MOVABLE) && !(gfp & __GFP_PINNABLE) && zone_pages(ZONE_MOVABLE)) zl[n++] = ZONE_MOVABLE;
  zl[n++] = ZONE_NORMAL;
  return n;
}

// Models rmqueue(): pcp orders through this CPU's lists, others from the buddy.
Page* PhysMem::rmqueue(Zone& z, unsigned order) {
  if (pcp_allowed_order(order)) return rmqueue_pcp(z, order);
  ZoneLockGuard g(&z.lock, stats_);
  return rmqueue_buddy(z, order);
}

Page* PhysMem::get_page_from_freelist(gfp_t gfp, unsigned order) {
  ZoneType zl[MAX_NR_ZONES];
  const int n = gfp_zonelist(gfp, zl);
  for (int i = 0; i < n; i++) {
    if (Page* p = rmqueue(zones_[zl[i]], order)) return p;
  }
  return nullptr;
}

// Models prep_new_page(): every page of the block starts clean, tails of a
// compound block point at the head, and the head's refcount becomes 1 last,
// after the metadata a speculative walker re-checks.
void PhysMem::prep_new_page(Page* p, unsigned order, gfp_t gfp, PrepCompound compound) {
  const uint64_t nr = 1ull << order;
  const bool large = compound == PrepCompound::kYes && order > 0;
  const uint64_t tail_link = large ? (to_u64(p) | 1) : 0;
  reset_page(p, 0);
  for (uint64_t i = 1; i < nr; i++) reset_page(p + i, tail_link);
  if (gfp & __GFP_ZERO) {
    zero_frames(this, page_address(p), nr * PAGE_SIZE);
    if (stats_) stats_->count_zeroed(order, nr * PAGE_SIZE);
  }
  if (large) st(p->flags, (1ull << PG_head) | (uint64_t{order} << PG_ORDER_SHIFT));
  aref(p->refcount).store(1, std::memory_order_release);
}

Page* PhysMem::alloc_pages_internal(gfp_t gfp, unsigned order, PrepCompound compound) {
  if (order > MAX_FOLIO_ORDER) return nullptr;
  if (should_fail_alloc_page(gfp, order)) return nullptr;
  Page* p;
  if (order > MAX_PAGE_ORDER) {
    p = alloc_contig_pages(gfp, order);
  } else {
    p = get_page_from_freelist(gfp, order);
    if (!p) {
      // The slow path's last resort before failing (there is no reclaim to
      // try): other CPUs' lists may hold the memory.
      drain_all_pages();
      p = get_page_from_freelist(gfp, order);
    }
  }
  if (!p) return nullptr;
  prep_new_page(p, order, gfp, compound);
  count(page_zonenum(p) == ZONE_MOVABLE ? VmStat::pgalloc_movable : VmStat::pgalloc_normal, 1ull << order);
  MM_TRACE("mm_page_alloc", "pfn={:#x} order={} gfp_flags={:#x}", page_to_pfn(p), order, static_cast<uint64_t>(gfp));
  return p;
}

// fail_page_alloc's check: every allocation of the page allocator, by order
// (the site `page_alloc`; the model has no __GFP_NOFAIL caller).
bool PhysMem::should_fail_alloc_page(gfp_t gfp, unsigned order) {
  (void)gfp;
  return should_fail(FaultSite::page_alloc, order);
}

Page* PhysMem::alloc_pages(gfp_t gfp, unsigned order) { return alloc_pages_internal(gfp, order, PrepCompound::kNo); }

Folio* PhysMem::folio_alloc(gfp_t gfp, unsigned order) {
  return reinterpret_cast<Folio*>(alloc_pages_internal(gfp, order, PrepCompound::kYes));
}

// ---- contiguous (gigantic) allocation ------------------------------------------

// Every MAX_PAGE_ORDER block of [start, start + nr) is a whole free buddy block.
bool PhysMem::contig_range_free(Zone& z, pfn_t start, uint64_t nr) {
  (void)z;  // the caller's zone lock makes the PG_buddy state stable
  for (pfn_t pfn = start; pfn < start + nr; pfn += 1ull << MAX_PAGE_ORDER) {
    Page* head = pfn_to_page(pfn);
    if (!PageBuddy(head) || ld(head->private_) != MAX_PAGE_ORDER) return false;
  }
  return true;
}

// Models alloc_contig_pages() without migration: the model takes a naturally
// aligned range only where every max-order block is already free.
Page* PhysMem::alloc_contig_pages(gfp_t gfp, unsigned order) {
  const uint64_t nr = 1ull << order;
  drain_all_pages();  // pcp pages would keep their max-order blocks split
  ZoneType zl[MAX_NR_ZONES];
  const int n = gfp_zonelist(gfp, zl);
  for (int i = 0; i < n; i++) {
    Zone& z = zones_[zl[i]];
    ZoneLockGuard g(&z.lock, stats_);
    for (pfn_t start = round_up(z.start_pfn, nr); start + nr <= z.end_pfn; start += nr) {
      if (!contig_range_free(z, start, nr)) continue;
      for (pfn_t pfn = start; pfn < start + nr; pfn += 1ull << MAX_PAGE_ORDER) {
        del_page_from_free_list(z, pfn_to_page(pfn), MAX_PAGE_ORDER);
        frame_store_->take_block_whole(pfn);  // its first zeroing may be free (frame_store.h)
      }
      return pfn_to_page(start);
    }
  }
  return nullptr;
}

// Models free_contig_range(): each max-order block back to the buddy lists.
void PhysMem::free_contig_range(Page* p, unsigned order) {
  Zone& z = zone_of(p);
  ZoneLockGuard g(&z.lock, stats_);
  for (uint64_t off = 0; off < (1ull << order); off += 1ull << MAX_PAGE_ORDER)
    free_one_block(z, p + off, MAX_PAGE_ORDER);
}

// ---- freeing ----------------------------------------------------------------

namespace {

// page_bad_reason(), for the block at p: why it must not be freed, or
// nullptr; *bad is the page at fault.
const char* page_bad_reason(Page* p, unsigned order, Page** bad) {
  *bad = p;
  if (ld(p->refcount) != 0) return "freeing a page with a nonzero refcount";
  if (PageTail(p)) return "freeing a tail page";
  if (test_bit(PG_head, p)) {
    const Folio* f = reinterpret_cast<const Folio*>(p);
    if (folio_order(f) != order) return "freeing a folio with the wrong order";
    Page* p1 = p + 1;
    if (ld(p1->f1.large_mapcount) != 0) return "freeing a mapped folio (large mapcount)";
    if (ld(p1->f1.entire_mapcount) != 0) return "freeing a mapped folio (entire mapcount)";
    if (ld(p1->f1.nr_pages_mapped) != 0) return "freeing a mapped folio (nr_pages_mapped)";
    if (ld(p1->f1.pincount) != 0) return "freeing a pinned folio";
  }
  for (uint64_t i = 0; i < (1ull << order); i++) {
    *bad = p + i;
    if (ld(p[i].mapcount) != 0) return "freeing a mapped page";
  }
  return nullptr;
}

}  // namespace

// Models free_pages_prepare(): the checks (debug builds), then every page of
// the block back to "unused". Returns false if the block must not be freed:
// a bad page is reported as the kernel's bad_page() reports it and left
// unfreed. The model's report is a VM_BUG_ON_PAGE (it aborts, or under
// cow.policy rfc records the finding and returns): a page the model frees
// wrongly is corrupt state.
bool PhysMem::free_pages_prepare(Page* p, unsigned order) {
  // Never freed, whatever the caller thinks: the zero page.
  if (PageReserved(p)) {
    VM_BUG_ON_PAGE(PageReserved(p), p, "freeing a PG_reserved page");
    return false;
  }
  // A double free would corrupt the free lists: refuse it.
  const bool double_free = test_bit(PG_buddy, p) || test_bit(PG_pcp, p);
  if (double_free) {
    VM_BUG_ON_PAGE(double_free, p, "double free");
    return false;
  }
  if (kDebugVm) {
    Page* bad = nullptr;
    if (const char* reason = page_bad_reason(p, order, &bad)) {
      VM_BUG_ON_PAGE(reason, bad, reason);
      return false;
    }
    // CONFIG_PAGE_POISONING: a frame is handed out again only through a
    // path that zeroes or overwrites it; one that does not reads the poison,
    // never another test's bytes from the recycled frame store. The poison
    // is a write: a block still pending zero (frame_store.h) is no longer
    // zero, and must not become pristine again when the store is reset.
    if (FrameStore::any_pending_zero()) frame_store_->forget_zero(page_address(p), PAGE_SIZE << order);
    poison_frames(page_address(p), kPagePoison, PAGE_SIZE << order);
  }
  for (uint64_t i = 0; i < (1ull << order); i++) reset_page(p + i, 0);
  return true;
}

void PhysMem::free_pages(Page* p, unsigned order) {
  if (!p || order > MAX_FOLIO_ORDER) return;
  if (!free_pages_prepare(p, order)) return;
  count(VmStat::pgfree, 1ull << order);
  MM_TRACE("mm_page_free", "pfn={:#x} order={}", page_to_pfn(p), order);
  if (order > MAX_PAGE_ORDER) {
    free_contig_range(p, order);
  } else if (pcp_allowed_order(order)) {
    count(Event::free_pcp);
    free_pcp(zone_of(p), p, order);
  } else {
    count(Event::free_zone_lock);
    Zone& z = zone_of(p);
    ZoneLockGuard g(&z.lock, stats_);
    free_one_block(z, p, order);
  }
}

void PhysMem::free_folio(Folio* f) { free_pages(&f->page, folio_order(f)); }

}  // namespace mmlab
