// The frame store and its process-wide pool (see frame_store.h).
#include "phys/frame_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "phys/page.h"
#include "phys/store_use.h"
#include "sync/sched.h"

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
constexpr int kHostMadvDontfork = 10;
constexpr uint64_t kStoreAlign = PMD_SIZE;  // lets the host back the store with its own THPs
constexpr uint64_t kBlockBytes = kStoreBlockPages * PAGE_SIZE;

// Never inherited by a fork of this process: the host backend forks the
// runner for every process of a scenario, and copying the page tables of a
// touched multi-GiB store into each child (and zapping them at its exit)
// costs more than the scenario itself. No child ever reads the model.
void* host_map(uint64_t len, int prot) {
  void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (madvise(p, len, kHostMadvDontfork) != 0) {
    munmap(p, len);
    return nullptr;
  }
  return p;
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

uint64_t memmap_bytes(uint64_t capacity) { return round_up((capacity >> PAGE_SHIFT) * sizeof(Page), PAGE_SIZE); }

constinit thread_local StoreUse tl_store_use = StoreUse::kAny;

// The stores that have served a StoreUse::kLarge System: their host memory
// is GiBs, kept warm for the next large test, and no small test is given
// one. Only the pool touches it, under its lock (a side table, so that the
// widely included frame_store.h stays as it is).
std::vector<const FrameStore*>& large_stores() {
  static std::vector<const FrameStore*>* v = new std::vector<const FrameStore*>;  // never destroyed, as the pool
  return *v;
}
bool is_large(const FrameStore* s) {
  const auto& v = large_stores();
  return std::find(v.begin(), v.end(), s) != v.end();
}
void forget_large(const FrameStore* s) {
  auto& v = large_stores();
  v.erase(std::remove(v.begin(), v.end(), s), v.end());
}

}  // namespace

ScopedStoreUse::ScopedStoreUse(StoreUse u) : prev_(tl_store_use) { tl_store_use = u; }
ScopedStoreUse::~ScopedStoreUse() { tl_store_use = prev_; }
StoreUse current_store_use() { return tl_store_use; }

const char* host_thp_name(HostThp h) {
  switch (h) {
    case HostThp::kDefault: return "default";
    case HostThp::kHugepage: return "hugepage";
    case HostThp::kNohugepage: return "nohugepage";
  }
  return "?";
}

// ---- FrameStore ---------------------------------------------------------------

bool FrameStore::map(uint64_t capacity) {
  void* d = host_map_aligned(capacity, kStoreAlign, PROT_READ | PROT_WRITE);
  if (!d) return false;
  // The memmap window is reserved PROT_NONE and only the part in use made
  // writable, so the large alignment costs only address space.
  const uint64_t len = kMemmapOffset + memmap_bytes(capacity);
  void* base = host_map_aligned(len, kMemmapAlign, PROT_NONE);
  if (!base || mprotect(base, len, PROT_READ | PROT_WRITE) != 0) {
    if (base) munmap(base, len);
    munmap(d, capacity);
    return false;
  }
  capacity_ = capacity;
  data_ = static_cast<uint8_t*>(d);
  memmap_region_ = base;
  memmap_region_len_ = len;
  memmap_ = reinterpret_cast<Page*>(static_cast<uint8_t*>(base) + kMemmapOffset);
  used_blocks_.assign((capacity / kBlockBytes + 63) / 64, 0);
  ever_used_.assign(used_blocks_.size(), 0);
  pristine_.assign(used_blocks_.size(), ~0ull);
  pending_zero_.assign(used_blocks_.size(), 0);
  // A schedule point names an entry by (table pfn, index) and a memmap word
  // by pfn, never by host address (sched::kByAddress).
  sched::register_memory(data_, capacity, PAGE_SIZE, true);
  sched::register_memory(memmap_, memmap_bytes(capacity), sizeof(Page), false);
  return true;
}

std::atomic<uint64_t> FrameStore::pending_zero_blocks_{0};

void FrameStore::take_block_whole(uint64_t pfn) {
  const uint64_t b = pfn / kStoreBlockPages, bit = 1ull << (b % 64);
  const bool pristine = std::atomic_ref<uint64_t>(pristine_[b / 64]).load(std::memory_order_relaxed) & bit;
  mark_block_used(pfn);  // clears pristine
  std::atomic_ref<uint64_t> pz(pending_zero_[b / 64]);
  if (pristine && !(pz.fetch_or(bit, std::memory_order_relaxed) & bit)) pending_zero_blocks_.fetch_add(1, std::memory_order_relaxed);
}

void FrameStore::drop_pending_zero(uint64_t b) {
  const uint64_t bit = 1ull << (b % 64);
  std::atomic_ref<uint64_t> pz(pending_zero_[b / 64]);
  if (pz.load(std::memory_order_relaxed) & bit && pz.fetch_and(~bit, std::memory_order_relaxed) & bit)
    pending_zero_blocks_.fetch_sub(1, std::memory_order_relaxed);
}

bool FrameStore::take_zero(const void* p, uint64_t len, bool zeroing) {
  const auto* c = static_cast<const uint8_t*>(p);
  if (c < data_ || c >= data_ + capacity_ || len == 0) return false;  // not frame bytes (a swap device's data)
  const uint64_t off = static_cast<uint64_t>(c - data_), end = std::min(off + len, capacity_);
  bool all = off % kBlockBytes == 0 && end % kBlockBytes == 0;
  for (uint64_t b = off / kBlockBytes; b < (end + kBlockBytes - 1) / kBlockBytes; b++) {
    const uint64_t bit = 1ull << (b % 64);
    std::atomic_ref<uint64_t> pz(pending_zero_[b / 64]);
    if (pz.load(std::memory_order_relaxed) & bit && pz.fetch_and(~bit, std::memory_order_relaxed) & bit) {
      pending_zero_blocks_.fetch_sub(1, std::memory_order_relaxed);
    } else {
      all = false;
    }
  }
  if (all && zeroing) zero_skipped_.fetch_add(end - off, std::memory_order_relaxed);
  return all;
}

bool FrameStore::block_pristine(uint64_t pfn) const {
  const uint64_t b = pfn / kStoreBlockPages;
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(pristine_[b / 64])).load(std::memory_order_relaxed) & (1ull << (b % 64));
}

FrameStore::~FrameStore() {
  for (size_t w = 0; w < pending_zero_.size(); w++)
    pending_zero_blocks_.fetch_sub(static_cast<uint64_t>(__builtin_popcountll(pending_zero_[w])), std::memory_order_relaxed);
  if (data_) {
    sched::unregister_memory(data_);
    sched::unregister_memory(memmap_);
  }
  if (memmap_region_) munmap(memmap_region_, memmap_region_len_);
  if (data_) munmap(data_, capacity_);
}

void FrameStore::set_owner(PhysMem* pm) { *static_cast<PhysMem**>(memmap_region_) = pm; }

// Advice first, so that populating already gets (or avoids) host huge pages.
// It applies to host pages faulted from now on; failure (a host without THP)
// only loses the advice.
// The host has no advice that undoes either: a store asked for the default
// keeps what it was given before (the pool prefers stores whose advice matches).
void FrameStore::advise(HostThp h) {
  if (h == advice_ || h == HostThp::kDefault) return;
  if (h == HostThp::kHugepage && madvise(data_, capacity_, kHostMadvHugepage) == 0) thp_advised_ = true;
  if (h == HostThp::kNohugepage && madvise(data_, capacity_, kHostMadvNohugepage) == 0) thp_advised_ = false;
  advice_ = h;
}

void FrameStore::populate(uint64_t bytes) {
  if (bytes <= populated_) return;
  uint8_t* from = data_ + populated_;
  const uint64_t len = bytes - populated_;
  if (madvise(from, len, kHostMadvPopulateWrite) != 0) {
    // Hosts older than 5.14: touch each page by hand.
    for (uint64_t off = 0; off < len; off += PAGE_SIZE) *reinterpret_cast<volatile uint8_t*>(from + off) = 0;
  }
  populated_ = bytes;
}

// Every block the last System took off the free lists gets an all-zero
// memmap again; the others were written only at their head (the free-list
// entry the zone's initialisation made), which is cleared too.
void FrameStore::reset(uint64_t nr_frames) {
  const uint64_t blocks = nr_frames / kStoreBlockPages;
  for (uint64_t b = 0; b < blocks; b++) {
    Page* first = memmap_ + b * kStoreBlockPages;
    const bool used = used_blocks_[b / 64] & (1ull << (b % 64));
    if (!used) {
      std::memset(static_cast<void*>(first), 0, sizeof(Page));
      continue;
    }
    std::memset(static_cast<void*>(first), 0, kStoreBlockPages * sizeof(Page));
  }
  // A folio taken whole and never written (a hugetlb pool page no process
  // faulted) leaves its blocks as the host gave them: pristine again.
  for (size_t w = 0; w < pending_zero_.size(); w++) {
    if (!pending_zero_[w]) continue;
    pending_zero_blocks_.fetch_sub(static_cast<uint64_t>(__builtin_popcountll(pending_zero_[w])), std::memory_order_relaxed);
    pristine_[w] |= pending_zero_[w];
    pending_zero_[w] = 0;
  }
  for (size_t w = 0; w < used_blocks_.size(); w++) {
    ever_used_count_ += static_cast<uint64_t>(__builtin_popcountll(used_blocks_[w] & ~ever_used_[w]));
    ever_used_[w] |= used_blocks_[w];
    used_blocks_[w] = 0;
  }
  set_owner(nullptr);
}

uint64_t FrameStore::resident_bound() const {
  const uint64_t blocks = ever_used_count_ * (kBlockBytes + kStoreBlockPages * sizeof(Page));
  return std::max(blocks, populated_ + memmap_bytes(populated_));
}

FrameStore::Residency FrameStore::residency() const {
  Residency r;
  std::ifstream in("/proc/self/smaps");
  const uintptr_t start = reinterpret_cast<uintptr_t>(data_), end = start + capacity_;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < 17) {
      inside = lo >= start && hi <= end;
      continue;
    }
    if (!inside) continue;
    unsigned long kb = 0;
    if (std::sscanf(line.c_str(), "Rss: %lu kB", &kb) == 1) r.rss += kb << 10, r.known = true;
    if (std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1) r.anon_huge += kb << 10;
  }
  return r;
}

// ---- the pool -------------------------------------------------------------------

FrameStorePool& FrameStorePool::instance() {
  static FrameStorePool* pool = new FrameStorePool;  // never destroyed: Systems may outlive static destructors
  return *pool;
}

FrameStorePool::FrameStorePool() {
  const uint64_t avail = host_available_memory();
  idle_budget_ = avail ? avail / 4 * 3 : 4ull << 30;
}

uint64_t host_available_memory() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    unsigned long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lu kB", &kb) == 1) return static_cast<uint64_t>(kb) << 10;
  }
  return 0;
}

bool FrameStorePool::host_thp_enabled() {
  static const bool enabled = [] {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(in, s);
    return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
  }();
  return enabled;
}

FrameStore* FrameStorePool::acquire(uint64_t ram_bytes, HostThp thp, Prefault prefault, int* err) {
  FrameStore* s = nullptr;
  const StoreUse use = current_store_use();
  {
    MutexGuard g(&lock_);
    // The smallest idle store that is large enough, one with the same advice
    // first; the most recently released among equals (its memory is warm).
    // A large use takes a store that served one before, if one is idle; a
    // small use never does (a new store costs a small test little).
    auto better = [&](FrameStore* c) {
      if (!s) return true;
      if (use == StoreUse::kLarge && is_large(c) != is_large(s)) return is_large(c);
      const bool cm = c->advice_ == thp, sm = s->advice_ == thp;
      if (cm != sm) return cm;
      return c->capacity() < s->capacity();
    };
    for (size_t i = idle_.size(); i-- > 0;)
      if (idle_[i]->capacity() >= ram_bytes && !(use == StoreUse::kSmall && is_large(idle_[i])) && better(idle_[i]))
        s = idle_[i];
    if (s) {
      idle_.erase(std::find(idle_.begin(), idle_.end(), s));
      counters_.recycled++;
      counters_.idle--;
    }
    counters_.live++;
  }
  if (!s) {
    s = new FrameStore;
    if (!s->map(ram_bytes)) {
      delete s;
      MutexGuard g(&lock_);
      counters_.live--;
      if (err) *err = -ENOMEM;
      return nullptr;
    }
    MutexGuard g(&lock_);
    counters_.created++;
  }
  if (use == StoreUse::kLarge) {
    MutexGuard g(&lock_);
    if (!is_large(s)) large_stores().push_back(s);
  }
  s->uses_++;
  // The scenario runner's stores (run and diff say what a test will use)
  // ask for host huge pages, unless a host side runs in this process
  // (set_runner_hugepages): a replay's first touch of a 1 GiB hugetlb test
  // is then one host fault per 2 MiB instead of per 4 KiB, and its later
  // passes miss the host TLB less (`run -j 2` of cow, gup_longterm and
  // khugepaged: 24.6 s wall, 6.2 s user against 55.2 s and 13.3 s, back to
  // back under load; docs/NOTES.md). Unit tests and benchmarks (kAny) keep
  // choosing for themselves.
  if (thp == HostThp::kDefault && use != StoreUse::kAny && runner_hugepages_.load(std::memory_order_relaxed))
    thp = HostThp::kHugepage;
  s->advise(thp);
  if (prefault == Prefault::kYes) s->populate(ram_bytes);
  if (err) *err = 0;
  return s;
}

void FrameStorePool::release(FrameStore* s, uint64_t nr_frames_used) {
  if (!s) return;
  s->reset(nr_frames_used);
  std::vector<FrameStore*> evict;
  {
    MutexGuard g(&lock_);
    counters_.live--;
    idle_.push_back(s);
    counters_.idle++;
    evict = trim_locked();
  }
  for (FrameStore* e : evict) delete e;
}

std::vector<FrameStore*> FrameStorePool::trim_locked() {
  std::vector<FrameStore*> evict;
  uint64_t bytes = 0;
  for (FrameStore* s : idle_) bytes += s->resident_bound();
  // The most recently released store always stays: the next System wants
  // it. The least recently released go first, a large test's store last
  // (it is the one whose memory costs most to touch again).
  while (idle_.size() > 1 && (idle_.size() > max_idle_ || bytes > idle_budget_)) {
    auto victim = std::find_if(idle_.begin(), idle_.end() - 1, [](FrameStore* c) { return !is_large(c); });
    if (victim == idle_.end() - 1) victim = idle_.begin();
    bytes -= (*victim)->resident_bound();
    forget_large(*victim);
    evict.push_back(*victim);
    idle_.erase(victim);
    counters_.idle--;
    counters_.unmapped++;
  }
  return evict;
}

void FrameStorePool::set_max_idle(unsigned n) {
  std::vector<FrameStore*> evict;
  {
    MutexGuard g(&lock_);
    max_idle_ = std::max(1u, n);
    evict = trim_locked();
  }
  for (FrameStore* s : evict) delete s;
}

void FrameStorePool::set_idle_budget(uint64_t bytes) {
  std::vector<FrameStore*> evict;
  {
    MutexGuard g(&lock_);
    idle_budget_ = bytes;
    evict = trim_locked();
  }
  for (FrameStore* s : evict) delete s;
}

unsigned FrameStorePool::max_idle() const {
  MutexGuard g(&lock_);
  return max_idle_;
}

void FrameStorePool::drain() {
  std::vector<FrameStore*> evict;
  {
    MutexGuard g(&lock_);
    evict.swap(idle_);
    for (FrameStore* s : evict) forget_large(s);
    counters_.unmapped += evict.size();
    counters_.idle = 0;
  }
  for (FrameStore* s : evict) delete s;
}

FrameStorePool::Counters FrameStorePool::counters() const {
  MutexGuard g(&lock_);
  return counters_;
}

}  // namespace mmlab
