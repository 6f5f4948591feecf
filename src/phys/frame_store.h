// The frame store: the host memory behind a System's simulated RAM (the
// frames' bytes and the memmap), kept across Systems by a process-wide pool.
//
// Touching host memory for the first time is the expensive part of a short
// test on a paravirtualised host (a host page fault per 4 KiB, several
// microseconds each), so a process that builds many Systems (mmlab run, diff,
// the unit tests, bench) hands each new System a store an earlier System
// released. What a System can observe is reset on release: the memmap of
// every block the System used goes back to all-zero bytes, exactly the state
// of a fresh mapping. Frame bytes are not scrubbed: the model zeroes what the
// kernel zeroes (__GFP_ZERO, folio_zero_user, page tables, the zero page),
// and every other allocation is overwritten whole (copy, swap-in, migration)
// before anything maps it, as in the kernel. Debug builds (MMLAB_DEBUG_VM)
// poison every frame the allocator gets back (page_alloc.cpp), so a path
// that would read a frame it never initialised reads 0xaa, not the bytes of
// an earlier test.
//
// Concurrency: the pool is shared by every thread (one mutex); a store
// belongs to one System at a time. Memory is bounded by the number of stores:
// live ones (one per System) plus at most max_idle() idle ones.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "mmlab/types.h"
#include "sync/mutex.h"

namespace mmlab {

class PhysMem;
struct Page;

// HostThp (mmlab/types.h) is what a System asks of the host's THP for its
// frame store (recorded in reports). The default gives no advice: on a
// paravirtualised host the first touch of guest memory costs the same per
// byte whatever the page size, and a host huge page touches 2 MiB where a
// test may use 4 KiB (the unit tests take
// 3.6 s on host 4 KiB pages and 9.8 s with MADV_HUGEPAGE on this project's
// machine; recycled memory is as fast either way). Benchmarks advise it
// before their warm-up round, and the scenario runner's stores (a System
// made under a ScopedStoreUse hint: run, diff) get it, since their 1 GiB
// tests' passes over GiBs of frames miss the host TLB on 4 KiB pages.
const char* host_thp_name(HostThp h);

// The memmap reservation is aligned to kMemmapAlign and its first word is the
// owning PhysMem*, so PhysMem::of() needs nothing but a Page's address.
inline constexpr uint64_t kMemmapAlign = 1ull << 36;
inline constexpr uint64_t kMemmapOffset = PAGE_SIZE;  // pfn 0's Page is at base + kMemmapOffset
inline constexpr uint64_t kStoreBlockPages = 1ull << MAX_PAGE_ORDER;  // memmap reset granularity

class FrameStore {
 public:
  ~FrameStore();
  FrameStore(const FrameStore&) = delete;
  FrameStore& operator=(const FrameStore&) = delete;

  uint64_t capacity() const { return capacity_; }  // bytes of frames mapped
  uint8_t* data() const { return data_; }
  Page* memmap() const { return memmap_; }
  void set_owner(PhysMem* pm);  // the back pointer PhysMem::of() reads

  // Every memmap write happens inside a MAX_PAGE_ORDER block that the
  // allocator took off its free lists whole; it marks the block here.
  void mark_block_used(uint64_t pfn) {
    const uint64_t b = pfn / kStoreBlockPages;
    std::atomic_ref<uint64_t> w(used_blocks_[b / 64]);
    const uint64_t bit = 1ull << (b % 64);
    if (!(w.load(std::memory_order_relaxed) & bit)) w.fetch_or(bit, std::memory_order_relaxed);
    std::atomic_ref<uint64_t> z(pristine_[b / 64]);
    if (z.load(std::memory_order_relaxed) & bit) z.fetch_and(~bit, std::memory_order_relaxed);
    if (any_pending_zero()) drop_pending_zero(b);  // a block freed back untouched, taken again
  }

  // Zero-fill that is free for memory never written. A block whose frame
  // bytes no System ever wrote since the host mapped them is all zero
  // ("pristine"). alloc_contig_pages takes blocks whole for one folio (a
  // 1 GiB hugetlb page): take_block_whole() marks the block used and, if it
  // was pristine, "pending zero". The folio's first zeroing skips the
  // memset when every block it covers is pending (take_zero), which spares
  // the host's first touch of memory the test may never write; a zero or a
  // copy into a block clears its pending bit, so only the first use of a
  // folio straight from pristine memory is skipped. Host first-touch faults
  // then happen where the test writes, not where the model zeroes.
  void take_block_whole(uint64_t pfn);
  // Whether [p, p + len) is whole blocks, all pending zero; clears the
  // pending bit of every block the range overlaps either way (the caller is
  // about to write it). zeroing: the caller skips its memset on true (counted).
  bool take_zero(const void* p, uint64_t len, bool zeroing = true);
  void forget_zero(const void* p, uint64_t len) { (void)take_zero(p, len, false); }
  // Any block of any store pending zero (the fast path of copies and zeroing).
  static bool any_pending_zero() { return pending_zero_blocks_.load(std::memory_order_relaxed) != 0; }
  uint64_t zero_skipped_bytes() const { return zero_skipped_.load(std::memory_order_relaxed); }
  // Tests: as after a fresh mapping, every block pristine (the bytes are
  // not cleared: only for a store whose frames a test has just zeroed).
  bool block_pristine(uint64_t pfn) const;

  uint64_t uses() const { return uses_; }  // Systems served, this one included
  // Host memory the store may hold: every block any System used (frames and
  // memmap) and the populated prefix.
  uint64_t resident_bound() const;
  bool thp_advised() const { return thp_advised_; }
  uint64_t populated_bytes() const { return populated_; }

  // Host residency of the store's frame bytes (from /proc/self/smaps):
  // resident bytes and how many of them are in host huge pages.
  struct Residency {
    uint64_t rss = 0, anon_huge = 0;
    bool known = false;
  };
  Residency residency() const;

 private:
  friend class FrameStorePool;
  FrameStore() = default;
  bool map(uint64_t capacity);
  void advise(HostThp h);
  void populate(uint64_t bytes);
  // Back to the state of a fresh mapping for everything a System can see.
  void reset(uint64_t nr_frames);
  void drop_pending_zero(uint64_t block);

  uint64_t capacity_ = 0;
  uint8_t* data_ = nullptr;
  void* memmap_region_ = nullptr;  // [PhysMem* back pointer][pad][memmap]
  uint64_t memmap_region_len_ = 0;
  Page* memmap_ = nullptr;
  std::vector<uint64_t> used_blocks_;  // bitmap over MAX_PAGE_ORDER blocks; atomic_ref access
  std::vector<uint64_t> ever_used_;    // the same, over every System served
  std::vector<uint64_t> pristine_;     // blocks whose frame bytes were never written; atomic_ref access
  std::vector<uint64_t> pending_zero_;  // blocks taken whole while pristine, not yet zeroed or copied into
  std::atomic<uint64_t> zero_skipped_{0};
  static std::atomic<uint64_t> pending_zero_blocks_;  // set bits of every store's pending_zero_
  uint64_t ever_used_count_ = 0;
  uint64_t uses_ = 0;
  uint64_t populated_ = 0;  // prefix populated with MADV_POPULATE_WRITE
  HostThp advice_ = HostThp::kDefault;  // the last advice given
  bool thp_advised_ = false;            // MADV_HUGEPAGE is in force
};

// Whether acquire() populates the store's first ram_bytes (benchmarks).
enum class Prefault : uint8_t { kNo, kYes };

class FrameStorePool {
 public:
  static FrameStorePool& instance();

  // A store of at least ram_bytes, recycled where one is idle; its memmap
  // reads as zero bytes. prefault: populate the first ram_bytes (once per
  // store). nullptr (and *err = -ENOMEM) when the host refuses the mapping.
  // The caller owns the store until it calls release().
  FrameStore* acquire(uint64_t ram_bytes, HostThp thp, Prefault prefault, int* err);
  // nr_frames_used: the frames the System used (the start of the store).
  void release(FrameStore* s, uint64_t nr_frames_used);

  // Idle stores kept for reuse: at most max_idle (at least 1) of them,
  // holding at most idle_budget bytes of host memory between them (by
  // resident_bound(); default three quarters of the host's available memory
  // when the pool was first used: a run's stores are what it needs again
  // next, and unmapping one means touching fresh memory for the next test).
  // The least recently released go first.
  void set_max_idle(unsigned n);
  unsigned max_idle() const;
  void set_idle_budget(uint64_t bytes);
  void drain();  // unmap every idle store
  // Whether the scenario runner's stores (a System made under a
  // ScopedStoreUse hint) get MADV_HUGEPAGE; off by default. run and diff
  // turn it on when no side is the host backend: the host runner forks its
  // scenario processes from this one, and a process whose mm MADV_HUGEPAGE
  // registered with khugepaged passes the registration to its children
  // (khugepaged_fork), so khugepaged would scan, and collapse, memory the
  // scenario expects it never to see.
  void set_runner_hugepages(bool on) { runner_hugepages_.store(on, std::memory_order_relaxed); }

  struct Counters {
    uint64_t created = 0, recycled = 0, unmapped = 0;
    unsigned live = 0, idle = 0;
  };
  Counters counters() const;

  // Whether the host's THP would back a MADV_HUGEPAGE store ("always" or "madvise").
  static bool host_thp_enabled();

 private:
  FrameStorePool();
  // What exceeds the limits, to unmap outside the lock.
  std::vector<FrameStore*> trim_locked() REQUIRES(lock_);
  mutable Mutex lock_;
  std::atomic<bool> runner_hugepages_{false};
  std::vector<FrameStore*> idle_ GUARDED_BY(lock_);  // most recently released last
  unsigned max_idle_ GUARDED_BY(lock_) = 4;
  uint64_t idle_budget_ GUARDED_BY(lock_) = 0;
  Counters counters_ GUARDED_BY(lock_);
};

// Host memory a System with ram_bytes of RAM may come to use: its frames
// and their memmap.
inline uint64_t frame_store_footprint(uint64_t ram_bytes) { return ram_bytes + ram_bytes / PAGE_SIZE * 64; }
// Host memory a System takes when it is made, before anything runs on it:
// the free lists write the head Page of every MAX_PAGE_ORDER block, which
// touches a host page of the memmap per 4 MiB of RAM, with the host's page
// tables and the store's bookkeeping for it. Measured at 9.2 KiB per block
// (2.3 GiB per TiB, `mmlab run --ram 256G`: 596 MiB); 10 KiB is counted.
inline uint64_t frame_store_cost_at_create(uint64_t ram_bytes) { return (ram_bytes / (kStoreBlockPages * PAGE_SIZE) + 1) * 10240; }

// The host's MemAvailable (/proc/meminfo), or 0 if unknown.
uint64_t host_available_memory();

}  // namespace mmlab
