// PhysMem creation and teardown: a frame store from the pool (its memmap
// window lets PhysMem::of() find the owner from a Page address), the zones'
// initial free lists, the shared zero page and the huge zero folio
// (mm/huge_memory.c: mm_get_huge_zero_folio()), and accounting.
#include "phys/phys.h"
#include "sync/sched.h"

#include <cstring>

namespace mmlab {
namespace {
constexpr uint64_t kMaxOrderBytes = PAGE_SIZE << MAX_PAGE_ORDER;
}  // namespace

const char* zone_name(ZoneType z) {
  switch (z) {
    case ZONE_NORMAL: return "Normal";
    case ZONE_MOVABLE: return "Movable";
    default: return "?";
  }
}

uint64_t PhysMem::max_ram_bytes() {
  const uint64_t frames = (kMemmapAlign - kMemmapOffset) / sizeof(Page);
  return round_down(frames << PAGE_SHIFT, kMaxOrderBytes);
}

std::unique_ptr<PhysMem> PhysMem::create(const PhysConfig& cfg, Stats* stats, int* err) {
  int dummy;
  if (!err) err = &dummy;
  *err = -EINVAL;
  if (cfg.ram_bytes == 0 || !is_aligned(cfg.ram_bytes, kMaxOrderBytes)) return nullptr;
  if (!is_aligned(cfg.movable_bytes, kMaxOrderBytes) || cfg.movable_bytes >= cfg.ram_bytes) return nullptr;
  if (cfg.ram_bytes > max_ram_bytes()) return nullptr;

  std::unique_ptr<PhysMem> pm(new PhysMem());
  pm->cfg_ = cfg;
  pm->nr_frames_ = cfg.ram_bytes >> PAGE_SHIFT;
  pm->movable_start_pfn_ = (cfg.ram_bytes - cfg.movable_bytes) >> PAGE_SHIFT;
  pm->frame_store_ = FrameStorePool::instance().acquire(cfg.ram_bytes, cfg.host_thp,
                                                         cfg.prefault ? Prefault::kYes : Prefault::kNo, err);
  if (!pm->frame_store_) return nullptr;
  pm->store_ = pm->frame_store_->data();
  pm->memmap_ = pm->frame_store_->memmap();
  pm->frame_store_->set_owner(pm.get());
  for (auto& pcp : pm->pcp_) pcp = std::make_unique<PerCpuPages[]>(NR_CPUS);
  pm->init_zone(pm->zones_[ZONE_NORMAL], ZONE_NORMAL, 0, pm->movable_start_pfn_);
  pm->init_zone(pm->zones_[ZONE_MOVABLE], ZONE_MOVABLE, pm->movable_start_pfn_, pm->nr_frames_);
  pm->init_zero_page();
  pm->fault_inject_.set_stats(stats);
  pm->stats_ = stats;  // set last: building the machine is not counted as allocator work
  *err = 0;
  return pm;
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
// no per-CPU list is left holding a refilled batch after creation, and
// cleared (a recycled frame store holds an earlier System's bytes).
void PhysMem::init_zero_page() {
  Zone& z = zones_[ZONE_NORMAL];
  Page* p;
  {
    SpinGuard g(&z.lock, LockClass::kZoneLock);
    p = rmqueue_buddy(z, 0);
  }
  prep_new_page(p, 0, 0, PrepCompound::kNo);
  std::memset(page_address(p), 0, PAGE_SIZE);
  set_bit(PG_reserved, p);
  zero_page_ = p;
  zero_pfn_ = page_to_pfn(p);
}

PhysMem::~PhysMem() {
  fault_inject_.clear_all();
  fault_inject_.set_stats(nullptr);
  stats_ = nullptr;  // the Stats may already be gone; teardown is not counted
  if (Folio* f = huge_zero_.exchange(nullptr)) {
    folio_clear_huge_zero(f);
    aref(f->page.refcount).store(0, std::memory_order_relaxed);
    free_pages(&f->page, folio_order(f));
  }
  FrameStorePool::instance().release(frame_store_, nr_frames_);
}

// ---- the huge zero folio ----------------------------------------------------

// Models mm_get_huge_zero_folio(): allocated on first use; the folio's
// refcount is one reference held by the model itself plus one per user.
Folio* PhysMem::mm_get_huge_zero_folio() {
  MutexGuard g(&huge_zero_mutex_);
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
  MutexGuard g(&huge_zero_mutex_);
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

// ---- moving frame bytes --------------------------------------------------------

// A Dekker handshake on (data_owner_, data_in_plain_): the owner announces a
// plain move, then re-reads the owner; a second thread publishes kDataShared,
// then waits out a move in progress. Whichever order they run in, either the
// owner sees the switch and takes the atomic path, or the second thread sees
// the move and waits for its release store, which orders the owner's plain
// accesses before everything the second thread does next. Every thread that
// finds the switch already made waits out a move in progress too: the owner
// may still be inside a plain move it began before the switch, and a third
// thread's atomic access to the same bytes would race with it.
bool PhysMem::data_begin_plain() {
  const CpuSlot& me = this_cpu();
  // seq_cst loads (plain moves on x86): a thread that reads kDataShared
  // must then see the owner's announced move, which the relaxed order does
  // not promise.
  int owner = data_owner_.load(std::memory_order_seq_cst);
  if (owner != me.id) {
    if (owner == kDataShared) {
      data_wait_plain();
      return false;
    }
    // A thread sharing its CPU id (beyond NR_CPUS live threads) never owns.
    if (owner != kDataNoOwner || !me.exclusive ||
        !data_owner_.compare_exchange_strong(owner, me.id, std::memory_order_relaxed)) {
      data_share();
      return false;
    }
  }
  data_in_plain_.store(true, std::memory_order_seq_cst);
  if (data_owner_.load(std::memory_order_seq_cst) == me.id) return true;
  data_end_plain();
  return false;
}

void PhysMem::data_share() {
  data_owner_.store(kDataShared, std::memory_order_seq_cst);
  data_wait_plain();
}

void PhysMem::data_wait_plain() {
  sched::wait_until(
      "data_wait_plain", {this, sched::ObjKind::kDataPath},
      [this] { return !data_in_plain_.load(std::memory_order_seq_cst); }, sched::Spin::kSpinThenYield);
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
