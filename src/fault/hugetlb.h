// hugetlb (mm/hugetlb.c, fs/hugetlbfs): the pools of 2 MiB and 1 GiB pages,
// reservations, hugetlb faults and CoW, and the PMD/PUD-level zap and fork
// of hugetlb mappings.
//
// Model decisions (see fault/hugetlb.cpp for the code):
//   - One pool (struct hstate) per size, one NUMA node. A free pool folio is
//     PG_hugetlb with refcount 1: the reference is the pool's (the kernel
//     keeps free huge pages frozen at 0; the invariant checker counts a
//     PG_hugetlb folio with references as held by the pool). Allocating from
//     the pool hands that reference to the caller; free_huge_folio() (the
//     folio-free hook) takes it back.
//   - hugetlb_lock, the resv_map locks and the per-VMA flags are one lock,
//     HugetlbState::lock. The fault mutex table is kept. The hugetlb VMA lock
//     (hugetlb_vma_lock / resv_map->rw_sema) is not modelled: the model has
//     no PMD sharing and no truncation of mapped files, and faults hold the
//     VMA read lock or mmap_lock, which excludes unmapping.
//   - vm_private_data (the private resv_map and the HPAGE_RESV_* flags) lives
//     here, keyed by Vma* and validated by mm id and file, since struct Vma has
//     no private field.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "phys/page.h"
#include "sync/annotations.h"
#include "sync/spinlock.h"

namespace mmlab {

struct Kernel;
struct File;
struct Vma;
struct HugetlbFileState;

// struct hstate: one pool of huge pages of one size. Counters and the free
// list are protected by HugetlbState::lock (hugetlb_lock).
struct Hstate {
  unsigned order = 0;
  long max_huge_pages = 0;            // persistent pages asked for (nr_hugepages written)
  long nr_huge_pages = 0;             // every pool page, persistent and surplus
  long free_huge_pages = 0;
  long resv_huge_pages = 0;
  long surplus_huge_pages = 0;
  long nr_overcommit_huge_pages = 0;  // surplus pages may be allocated up to this many
  std::vector<Folio*> freelist;       // hugepage_freelists; the back is the hot end

  uint64_t size() const { return PAGE_SIZE << order; }
  unsigned shift() const { return PAGE_SHIFT + order; }
  long pages_per_huge_page() const { return 1l << order; }
  bool gigantic() const { return order > MAX_PAGE_ORDER; }
};

// The reserve map of a MAP_PRIVATE mapping's creator (HPAGE_RESV_OWNER),
// shared by the VMAs a split makes of it. The kernel records the consumed
// indices; this records its complement within [from, to): the huge-page file
// indices whose reservation is still held.
struct HugetlbResvMap {
  Hstate* h = nullptr;
  int mm_id = 0;
  const File* file = nullptr;
  uint64_t from = 0, to = 0;    // huge-page index range of the original mmap
  std::set<uint64_t> reserved;  // indices with an unconsumed reservation
  int refs = 0;                 // VMAs using it (kref)
};

// vm_private_data of one private hugetlb VMA.
struct HugetlbVmaInfo {
  int mm_id = 0;
  const File* file = nullptr;
  uint64_t from = 0, to = 0;               // huge-page index range when last seen
  std::shared_ptr<HugetlbResvMap> resv;    // set: HPAGE_RESV_OWNER
  bool unmapped = false;                   // HPAGE_RESV_UNMAPPED
};

// The hugetlb state of one Kernel.
struct HugetlbState {
  HugetlbState();
  ~HugetlbState();
  HugetlbState(const HugetlbState&) = delete;
  HugetlbState& operator=(const HugetlbState&) = delete;

  SpinLock lock{};           // hugetlb_lock; also every reserve map and the VMA infos
  std::atomic<Kernel*> kernel{nullptr};  // set on first use (the Kernel constructs us without itself)
  // hstates[0]: 2 MiB (PMD_ORDER), hstates[1]: 1 GiB (PUD_ORDER). Fields under lock.
  std::array<Hstate, 2> hstates;
  std::map<const Vma*, HugetlbVmaInfo> vmas GUARDED_BY(lock);
  std::map<int, long> usage GUARDED_BY(lock);  // mm id -> mm->hugetlb_usage (base pages)
  std::set<HugetlbFileState*> files GUARDED_BY(lock);
  // hugetlb_fault_mutex_table: serializes faults on one (file, index).
  static constexpr unsigned kFaultMutexes = 64;
  std::array<std::mutex, kFaultMutexes> fault_mutex;
};

// Per-file state of a hugetlbfs file (the inode's resv_map and the private
// reserve maps of the mappings of this file). Under HugetlbState::lock.
struct HugetlbFileState {
  HugetlbFileState(Kernel* k, File* f, Hstate* hs) : kernel(k), file(f), h(hs) {}
  ~HugetlbFileState();  // evicts the page cache and gives back every reservation
  HugetlbFileState(const HugetlbFileState&) = delete;
  HugetlbFileState& operator=(const HugetlbFileState&) = delete;

  Kernel* kernel;  // nullptr once the Kernel's HugetlbState is gone (teardown)
  File* file;
  Hstate* h;
  // The inode resv_map of shared mappings: huge-page indices that hold a
  // reservation or were instantiated in the page cache.
  std::set<uint64_t> regions;
  long cached = 0;  // folios instantiated in the page cache (each is in regions)
  std::vector<std::shared_ptr<HugetlbResvMap>> private_maps;
};

}  // namespace mmlab
