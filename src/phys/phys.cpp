// PhysMem creation and teardown: the frame store, the memmap reservation that
// lets PhysMem::of() find its owner from a Page address, the zones' initial
// free lists, the shared zero page and the huge zero folio
// (mm/huge_memory.c: mm_get_huge_zero_folio()), and accounting.
#include "phys/phys.h"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names.
#include <sys/mman.h>
#include <unistd.h>

namespace mmlab {
namespace {

// The host's own values (identical to the model's on x86-64 Linux).
constexpr int kHostMadvPopulateWrite = 23;
constexpr int kHostMadvHugepage = 14;
constexpr int kHostMadvNohugepage = 15;
constexpr uint64_t kStoreAlign = PMD_SIZE;  // lets the host back the store with its own THPs
constexpr uint64_t kMaxOrderBytes = PAGE_SIZE << MAX_PAGE_ORDER;

void* host_map(uint64_t len, int prot) {
  void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Maps len bytes aligned to align: over-reserve, then trim both ends.
void* host_map_aligned(uint64_t len, uint64_t align, int prot) {
  const uint64_t span = len + align;
  void* r = host_map(span, prot);
  if (!r) return nullptr;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(r);
  const uintptr_t base = round_up(lo, align);
  if (base > lo) munmap(r, base - lo);
  const uintptr_t end = base + len, hi = lo + span;
  if (hi > end) munmap(reinterpret_cast<void*>(end), hi - end);
  return reinterpret_cast<void*>(base);
}

}  // namespace

const char* host_thp_name(HostThp h) {
  switch (h) {
    case HostThp::kDefault: return "default";
    case HostThp::kHugepage: return "hugepage";
    case HostThp::kNohugepage: return "nohugepage";
  }
  return "?";
}

const char* zone_name(ZoneType z) {
  switch (z) {
    case ZONE_NORMAL: return "Normal";
    case ZONE_MOVABLE: return "Movable";
    default: return "?";
  }
}

std::unique_ptr<PhysMem> PhysMem::create(const PhysConfig& cfg, Stats* stats, int* err) {
  int dummy;
  if (!err) err = &dummy;
  *err = -EINVAL;
  if (cfg.ram_bytes == 0 || !is_aligned(cfg.ram_bytes, kMaxOrderBytes)) return nullptr;
  if (!is_aligned(cfg.movable_bytes, kMaxOrderBytes) || cfg.movable_bytes >= cfg.ram_bytes) return nullptr;
  // The memmap must fit in one kMemmapAlign window after the back pointer.
  if ((cfg.ram_bytes >> PAGE_SHIFT) > (kMemmapAlign - kMemmapOffset) / sizeof(Page)) return nullptr;

  std::unique_ptr<PhysMem> pm(new PhysMem());
  pm->cfg_ = cfg;
  pm->nr_frames_ = cfg.ram_bytes >> PAGE_SHIFT;
  pm->movable_start_pfn_ = (cfg.ram_bytes - cfg.movable_bytes) >> PAGE_SHIFT;
  *err = -ENOMEM;
  if (!pm->map_store() || !pm->map_memmap()) return nullptr;
  for (auto& pcp : pm->pcp_) pcp = std::make_unique<PerCpuPages[]>(NR_CPUS);
  pm->init_zone(pm->zones_[ZONE_NORMAL], ZONE_NORMAL, 0, pm->movable_start_pfn_);
  pm->init_zone(pm->zones_[ZONE_MOVABLE], ZONE_MOVABLE, pm->movable_start_pfn_, pm->nr_frames_);
  pm->init_zero_page();
  pm->stats_ = stats;  // set last: building the machine is not counted as allocator work
  *err = 0;
  return pm;
}

// The frame store: RAM-sized, lazily touched unless the benchmark asked for prefaulting.
bool PhysMem::map_store() {
  void* s = host_map_aligned(cfg_.ram_bytes, kStoreAlign, PROT_READ | PROT_WRITE);
  if (!s) return false;
  store_ = static_cast<uint8_t*>(s);
  store_len_ = cfg_.ram_bytes;
  // Advice first, so that prefaulting already gets (or avoids) host huge pages.
  // Failure (host without THP) only loses the advice.
  if (cfg_.host_thp == HostThp::kHugepage) madvise(store_, store_len_, kHostMadvHugepage);
  if (cfg_.host_thp == HostThp::kNohugepage) madvise(store_, store_len_, kHostMadvNohugepage);
  if (cfg_.prefault && madvise(store_, store_len_, kHostMadvPopulateWrite) != 0) {
    // Hosts older than 5.14: touch each page by hand.
    for (uint64_t off = 0; off < store_len_; off += PAGE_SIZE) *reinterpret_cast<volatile uint8_t*>(store_ + off) = 0;
  }
  return true;
}

// The memmap lives at a kMemmapAlign-aligned base (+kMemmapOffset) and the
// base word points back at this PhysMem. The window is reserved PROT_NONE and
// only the part in use is made writable, so the large alignment costs only
// address space; every PhysMem gets its own aligned window.
bool PhysMem::map_memmap() {
  const uint64_t len = kMemmapOffset + round_up(nr_frames_ * sizeof(Page), PAGE_SIZE);
  void* base = host_map_aligned(len, kMemmapAlign, PROT_NONE);
  if (!base) return false;
  if (mprotect(base, len, PROT_READ | PROT_WRITE) != 0) {
    munmap(base, len);
    return false;
  }
  memmap_region_ = base;
  memmap_region_len_ = len;
  *static_cast<PhysMem**>(base) = this;
  memmap_ = reinterpret_cast<Page*>(static_cast<uint8_t*>(base) + kMemmapOffset);
  return true;
}

// Every MAX_PAGE_ORDER-aligned block of the zone starts free. Only the block
// heads' Pages are written, so the memmap stays mostly untouched.
void PhysMem::init_zone(Zone& z, ZoneType id, pfn_t start, pfn_t end) {
  z.id = id;
  z.start_pfn = start;
  z.end_pfn = end;
  SpinGuard g(&z.lock, LockClass::kZoneLock);
  // Highest first, so the lowest block ends up at the head of the list.
  for (pfn_t pfn = end; pfn > start;) {
    pfn -= 1ull << MAX_PAGE_ORDER;
    add_to_free_list(z, pfn_to_page(pfn), MAX_PAGE_ORDER);
  }
}

// ZERO_PAGE: one reserved frame, taken from the buddy lists directly so that
// no per-CPU list is left holding a refilled batch after creation. A fresh
// anonymous host mapping reads as zeroes, so no memset is needed.
void PhysMem::init_zero_page() {
  Zone& z = zones_[ZONE_NORMAL];
  Page* p;
  {
    SpinGuard g(&z.lock, LockClass::kZoneLock);
    p = rmqueue_buddy(z, 0);
  }
  prep_new_page(p, 0, 0, PrepCompound::kNo);
  set_bit(PG_reserved, p);
  zero_page_ = p;
  zero_pfn_ = page_to_pfn(p);
}

PhysMem::~PhysMem() {
  stats_ = nullptr;  // the Stats may already be gone; teardown is not counted
  if (Folio* f = huge_zero_.exchange(nullptr)) {
    folio_clear_huge_zero(f);
    aref(f->page.refcount).store(0, std::memory_order_relaxed);
    free_pages(&f->page, folio_order(f));
  }
  if (memmap_region_) munmap(memmap_region_, memmap_region_len_);
  if (store_) munmap(store_, store_len_);
}

// ---- the huge zero folio ----------------------------------------------------

// Models mm_get_huge_zero_folio(): allocated on first use; the folio's
// refcount is one reference held by the model itself plus one per user.
Folio* PhysMem::mm_get_huge_zero_folio() {
  std::lock_guard<std::mutex> g(huge_zero_mutex_);
  Folio* f = huge_zero_.load(std::memory_order_relaxed);
  if (!f) {
    // The kernel asks for (GFP_TRANSHUGE | __GFP_ZERO) & ~__GFP_MOVABLE.
    f = folio_alloc((GFP_TRANSHUGE | __GFP_ZERO) & ~__GFP_MOVABLE, PMD_ORDER);
    if (!f) {
      count(VmStat::thp_zero_page_alloc_failed);
      return nullptr;
    }
    folio_set_huge_zero(f);
    count(VmStat::thp_zero_page_alloc);
    huge_zero_.store(f, std::memory_order_release);
  }
  huge_zero_users_++;
  folio_ref_inc(f);
  return f;
}

void PhysMem::mm_put_huge_zero_folio() {
  std::lock_guard<std::mutex> g(huge_zero_mutex_);
  Folio* f = huge_zero_.load(std::memory_order_relaxed);
  if (!f || huge_zero_users_ == 0) return;
  huge_zero_users_--;
  // Never the last reference: the global holder stays until ~PhysMem.
  folio_ref_add(f, -1);
}

bool PhysMem::is_huge_zero_pfn(pfn_t pfn) const {
  const Folio* f = huge_zero_.load(std::memory_order_acquire);
  if (!f) return false;
  const pfn_t start = page_to_pfn(&f->page);
  return pfn >= start && pfn < start + HPAGE_PMD_NR;
}

// ---- accounting -------------------------------------------------------------

uint64_t PhysMem::nr_free_pages() const { return nr_free_pages(ZONE_NORMAL) + nr_free_pages(ZONE_MOVABLE); }

uint64_t PhysMem::nr_free_pages(ZoneType z) const {
  int64_t n = zones_[z].free_pages.load(std::memory_order_relaxed);
  for (int cpu = 0; cpu < NR_CPUS; cpu++) {
    PerCpuPages& pcp = pcp_[z][cpu];
    SpinGuard g(&pcp.lock, LockClass::kPcpLock);
    n += pcp.count;
  }
  return static_cast<uint64_t>(n);
}

uint64_t PhysMem::zone_pages(ZoneType z) const { return zones_[z].end_pfn - zones_[z].start_pfn; }

// A free block of order o containing pfn has its head at pfn aligned down to
// o, marked PG_buddy or PG_pcp with private_ == o: one probe per order. Reads
// without locks (every field it reads is written atomically), so it is exact
// only when no allocation or free is in flight, which is when the checker
// calls it.
bool PhysMem::page_is_free(pfn_t pfn) const {
  if (!pfn_valid(pfn)) return false;
  constexpr uint64_t kFreeMask = (1ull << PG_buddy) | (1ull << PG_pcp);
  for (unsigned o = 0; o <= MAX_PAGE_ORDER; o++) {
    Page* head = pfn_to_page(round_down(pfn, 1ull << o));
    if (!(aref(head->flags).load(std::memory_order_acquire) & kFreeMask)) continue;
    if (aref(head->private_).load(std::memory_order_relaxed) == o) return true;
  }
  return false;
}

}  // namespace mmlab
