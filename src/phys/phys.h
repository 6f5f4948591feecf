// Simulated physical memory: the frame store (host memory for the frames and
// the memmap, recycled across Systems: phys/frame_store.h), the memmap (one
// Page per frame), the zones and the page
// allocator (mm/page_alloc.c), the shared zero page (mm/memory.c's
// ZERO_PAGE) and the huge zero folio (mm/huge_memory.c).
//
// Locking: zone->lock guards each zone's buddy free lists; each simulated
// CPU's per-CPU lists (orders 0..3 and pageblock_order, as the kernel's
// pcp lists) have a lock of their own, so the common allocation path takes
// no shared lock; pcp refill and drain take zone->lock once per batch.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "phys/fault_inject.h"
#include "phys/frame_store.h"
#include "phys/page.h"
#include "stats/stats.h"
#include "sync/annotations.h"
#include "sync/cpu.h"
#include "sync/mutex.h"
#include "sync/spinlock.h"

namespace mmlab {

struct PhysConfig {
  uint64_t ram_bytes = 4ull << 30;  // simulated RAM
  uint64_t movable_bytes = 0;       // share of RAM given to ZONE_MOVABLE (top of the store)
  bool prefault = false;            // touch the whole store at creation (once per store; benchmarks)
  HostThp host_thp = HostThp::kDefault;
};

enum ZoneType : uint8_t { ZONE_NORMAL = 0, ZONE_MOVABLE = 1, MAX_NR_ZONES = 2 };
const char* zone_name(ZoneType z);

// gfp_t: the subset of the kernel's allocation flags the model honours.
using gfp_t = unsigned;
inline constexpr gfp_t __GFP_MOVABLE = 1u << 0;   // may come from ZONE_MOVABLE
inline constexpr gfp_t __GFP_ZERO = 1u << 1;      // clear the frames
inline constexpr gfp_t __GFP_NOWARN = 1u << 2;
inline constexpr gfp_t __GFP_PINNABLE = 1u << 3;  // memalloc_pin scope: avoid ZONE_MOVABLE
// The reclaim bits are carried for callers that model vma_thp_gfp_mask();
// the allocator has no reclaim or compaction and ignores them, so the
// model's GFP_TRANSHUGE leaves __GFP_DIRECT_RECLAIM out.
inline constexpr gfp_t __GFP_DIRECT_RECLAIM = 1u << 4;
inline constexpr gfp_t __GFP_KSWAPD_RECLAIM = 1u << 5;
inline constexpr gfp_t __GFP_NORETRY = 1u << 6;
inline constexpr gfp_t GFP_KERNEL = 0;
inline constexpr gfp_t GFP_HIGHUSER_MOVABLE = __GFP_MOVABLE;
inline constexpr gfp_t GFP_TRANSHUGE_LIGHT = __GFP_MOVABLE | __GFP_NOWARN;
inline constexpr gfp_t GFP_TRANSHUGE = GFP_TRANSHUGE_LIGHT;
inline constexpr gfp_t GFP_PGTABLE_USER = __GFP_ZERO;

// Orders that have per-CPU lists (the kernel's pcp orders: <= PAGE_ALLOC_COSTLY_ORDER and the THP order).
inline constexpr bool pcp_allowed_order(unsigned order) { return order <= 3 || order == pageblock_order; }

// Called by folio_put_refs() on the last reference, before the frames go back
// to the allocator; returns true if the callee took the folio (hugetlb pools,
// deferred-split queue removal is done here too). Set by the System.
using FolioFreeHook = std::function<bool(Folio*)>;

class PhysMem {
 public:
  // The simulated kernel this memory belongs to (set by the System; opaque here).
  void* owner = nullptr;

  // The largest RAM create() accepts: a multiple of the largest buddy block
  // whose memmap fits one kMemmapAlign window after the back pointer.
  static uint64_t max_ram_bytes();
  // Returns nullptr and sets *err (-ENOMEM, -EINVAL) if the host cannot give the reservation.
  static std::unique_ptr<PhysMem> create(const PhysConfig& cfg, Stats* stats, int* err);
  ~PhysMem();
  PhysMem(const PhysMem&) = delete;
  PhysMem& operator=(const PhysMem&) = delete;

  // ---- addressing (the memmap is never freed while PhysMem lives) ----
  uint64_t nr_frames() const { return nr_frames_; }
  Page* pfn_to_page(pfn_t pfn) const { return memmap_ + pfn; }
  pfn_t page_to_pfn(const Page* p) const { return static_cast<pfn_t>(p - memmap_); }
  bool pfn_valid(pfn_t pfn) const { return pfn < nr_frames_; }
  void* page_address(const Page* p) const { return store_ + page_to_pfn(p) * PAGE_SIZE; }
  void* pfn_address(pfn_t pfn) const { return store_ + pfn * PAGE_SIZE; }
  const FrameStore& frame_store() const { return *frame_store_; }
  ZoneType page_zonenum(const Page* p) const {
    return page_to_pfn(p) >= movable_start_pfn_ ? ZONE_MOVABLE : ZONE_NORMAL;
  }
  // The PhysMem that owns a Page, found from the Page's address alone
  // (the memmap reservation is aligned and starts with a back pointer).
  static PhysMem* of(const Page* p);

  // ---- allocation (mm/page_alloc.c) ----
  // 2^order frames, refcount 1, not yet a folio; nullptr when no memory.
  Page* alloc_pages(gfp_t gfp, unsigned order);
  // A folio of 2^order pages: head/tail links, order, refcount 1, no mappings.
  // Orders above MAX_PAGE_ORDER use contiguous allocation (alloc_contig_range).
  Folio* folio_alloc(gfp_t gfp, unsigned order);
  // Returns frames to the allocator (refcount already 0; flags are reset here).
  void free_pages(Page* p, unsigned order);
  void free_folio(Folio* f);  // called on the last reference (via the hook)
  void set_folio_free_hook(FolioFreeHook h) { free_hook_ = std::move(h); }
  const FolioFreeHook& folio_free_hook() const { return free_hook_; }
  // Give every per-CPU list back to the buddy lists (drain_all_pages).
  void drain_all_pages();

  // ---- fault injection (phys/fault_inject.h): the System's one injector ----
  FaultInjector& fault_injector() { return fault_inject_; }
  bool should_fail(FaultSite s, unsigned order = 0) { return fault_inject_.should_fail(s, order); }

  // ---- the zero pages ----
  Page* zero_page() const { return zero_page_; }
  pfn_t zero_pfn() const { return zero_pfn_; }
  bool is_zero_pfn(pfn_t pfn) const { return pfn == zero_pfn_; }
  // Lazily allocated huge zero folio; each mm that maps it takes one reference
  // (MMF_HUGE_ZERO_PAGE) and drops it at exit. nullptr on allocation failure.
  Folio* mm_get_huge_zero_folio();
  void mm_put_huge_zero_folio();
  Folio* huge_zero_folio() const { return huge_zero_.load(std::memory_order_acquire); }
  bool is_huge_zero_pfn(pfn_t pfn) const;

  // ---- moving frame bytes (phys/frame_copy.h) ----
  // While one simulated thread alone has moved user bytes in this System, it
  // moves them with plain memcpy/memset/memcmp; the first access by a second
  // thread switches the System, for good, to relaxed atomic word accesses,
  // so that racing user threads stay well defined. data_begin_plain() says
  // which path the calling thread takes; when true, the plain move must be
  // closed by data_end_plain(), with no lock taken in between (a switching
  // thread waits for it).
  bool data_begin_plain();
  void data_end_plain() { data_in_plain_.store(false, std::memory_order_release); }
  bool data_shared() const { return data_owner_.load(std::memory_order_relaxed) == kDataShared; }

  // ---- accounting ----
  uint64_t nr_free_pages() const;                  // buddy + pcp
  uint64_t nr_free_pages(ZoneType z) const;
  uint64_t zone_pages(ZoneType z) const;
  uint64_t nr_reserved_pages() const { return 1; }  // the zero page
  const PhysConfig& config() const { return cfg_; }
  Stats* stats() const { return stats_; }

  // Walk every pfn in [start, end) that heads a free block (buddy or pcp): the checker's view.
  bool page_is_free(pfn_t pfn) const;

 private:
  PhysMem() = default;

  // An intrusive doubly-linked list of free blocks through Page::lru (Page
  // addresses, 0-terminated at both ends). Protected by the lock of the
  // structure that contains it.
  struct PageList {
    uint64_t head = 0;
    uint64_t tail = 0;
  };
  struct FreeArea {
    PageList list;         // heads of free blocks of this order (PG_buddy, private_ = order)
    uint64_t nr_free = 0;  // blocks on list
  };
  struct Zone {
    SpinLock lock{};  // zone->lock: the free lists and the PG_buddy state of this zone's pages
    ZoneType id = ZONE_NORMAL;
    pfn_t start_pfn = 0, end_pfn = 0;  // immutable after create(); MAX_PAGE_ORDER-aligned
    std::array<FreeArea, MAX_PAGE_ORDER + 1> free_area GUARDED_BY(lock);
    std::atomic<int64_t> free_pages{0};  // pages on free_area; written under lock, read anywhere
  };
  struct PcpList {
    PageList list;  // PG_pcp blocks (private_ = order); hot end is the head
    int count = 0;  // blocks on list
  };
  static constexpr int kPcpLists = 5;  // orders 0,1,2,3 and pageblock_order
  struct alignas(64) PerCpuPages {
    SpinLock lock{};  // never held together with zone->lock (batches move through local lists)
    std::array<PcpList, kPcpLists> lists GUARDED_BY(lock);
    int count GUARDED_BY(lock) = 0;  // pages held
  };
  enum class PrepCompound : uint8_t { kNo, kYes };

  static int pcp_index(unsigned order) { return order == pageblock_order ? 4 : static_cast<int>(order); }
  static unsigned pcp_batch(unsigned order);
  static unsigned pcp_high(unsigned order);

  // List primitives; the caller holds the lock that protects the list.
  static void list_add(PageList& l, Page* p);
  static void list_add_tail(PageList& l, Page* p);
  static void list_del(PageList& l, Page* p);
  static Page* list_pop(PageList& l);
  static Page* list_pop_tail(PageList& l);
  static void list_splice(PageList& dst, PageList& src);

  void init_zone(Zone& z, ZoneType id, pfn_t start, pfn_t end);
  void init_zero_page();
  void count(Event e, uint64_t n = 1) {
    if (stats_) stats_->count(e, n);
  }
  void count(VmStat s, uint64_t n = 1) {
    if (stats_) stats_->count(s, n);
  }

  int gfp_zonelist(gfp_t gfp, ZoneType (&zl)[MAX_NR_ZONES]) const;
  Page* alloc_pages_internal(gfp_t gfp, unsigned order, PrepCompound compound);
  bool should_fail_alloc_page(gfp_t gfp, unsigned order);
  Page* get_page_from_freelist(gfp_t gfp, unsigned order);
  Page* rmqueue(Zone& z, unsigned order);
  Page* rmqueue_buddy(Zone& z, unsigned order) REQUIRES(z.lock);
  void expand(Zone& z, Page* p, unsigned low, unsigned high) REQUIRES(z.lock);
  void free_one_block(Zone& z, Page* p, unsigned order) REQUIRES(z.lock);
  void del_page_from_free_list(Zone& z, Page* p, unsigned order) REQUIRES(z.lock);
  void add_to_free_list(Zone& z, Page* p, unsigned order) REQUIRES(z.lock);
  unsigned rmqueue_bulk(Zone& z, unsigned order, unsigned count, PageList& out);
  void free_pcppages_bulk(Zone& z, PageList& blocks);
  Page* rmqueue_pcp(Zone& z, unsigned order);
  void free_pcp(Zone& z, Page* p, unsigned order);
  void drain_pages_zone(Zone& z, int cpu);
  Page* alloc_contig_pages(gfp_t gfp, unsigned order);
  bool contig_range_free(Zone& z, pfn_t start, uint64_t nr) REQUIRES(z.lock);
  void free_contig_range(Page* p, unsigned order);
  void prep_new_page(Page* p, unsigned order, gfp_t gfp, PrepCompound compound);
  bool free_pages_prepare(Page* p, unsigned order);
  Zone& zone_of(const Page* p) { return zones_[page_zonenum(p)]; }
  PerCpuPages& this_cpu_pcp(const Zone& z) { return pcp_[z.id][this_cpu().id]; }

  PhysConfig cfg_;
  Stats* stats_ = nullptr;
  FaultInjector fault_inject_;
  uint64_t nr_frames_ = 0;
  pfn_t movable_start_pfn_ = 0;
  FrameStore* frame_store_ = nullptr;  // from FrameStorePool, returned by ~PhysMem
  uint8_t* store_ = nullptr;           // frame_store_->data()
  Page* memmap_ = nullptr;             // frame_store_->memmap()
  std::array<Zone, MAX_NR_ZONES> zones_;
  std::unique_ptr<PerCpuPages[]> pcp_[MAX_NR_ZONES];
  Page* zero_page_ = nullptr;
  pfn_t zero_pfn_ = 0;
  Mutex huge_zero_mutex_;
  std::atomic<Folio*> huge_zero_{nullptr};
  long huge_zero_users_ GUARDED_BY(huge_zero_mutex_) = 0;
  FolioFreeHook free_hook_;
  static constexpr int kDataNoOwner = -1, kDataShared = -2;
  void data_share();
  void data_wait_plain();
  std::atomic<int> data_owner_{kDataNoOwner};  // CPU id of the one thread moving bytes, or kDataShared
  std::atomic<bool> data_in_plain_{false};     // the owner is inside a plain move
};

inline PhysMem* PhysMem::of(const Page* p) {
  return *reinterpret_cast<PhysMem* const*>(reinterpret_cast<uintptr_t>(p) & ~(kMemmapAlign - 1));
}

inline PhysMem* page_phys(const Page* p) { return PhysMem::of(p); }
inline void* folio_address(const Folio* f) { return PhysMem::of(&f->page)->page_address(&f->page); }
inline pfn_t page_to_pfn(const Page* p) { return PhysMem::of(p)->page_to_pfn(p); }
inline pfn_t folio_pfn(const Folio* f) { return page_to_pfn(&f->page); }

}  // namespace mmlab
