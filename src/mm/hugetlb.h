// hugetlb (mm/hugetlb.c, fs/hugetlbfs): the pools of 2 MiB and 1 GiB pages,
// reservations, hugetlb faults and CoW, and the PMD/PUD-level zap and fork
// of hugetlb mappings.
//
// Model decisions (the code: mm/hugetlb*.cpp, mm/hugetlbfs_inode.cpp,
// fault/hugetlb.cpp):
//   - One pool (struct hstate) per size, one NUMA node. A free pool folio is
//     PG_hugetlb with refcount 1: the reference is the pool's (the kernel
//     keeps free huge pages frozen at 0; the invariant checker counts a
//     PG_hugetlb folio with references as held by the pool). Allocating from
//     the pool hands that reference to the caller; free_huge_folio() (the
//     folio-free hook) takes it back.
//   - hugetlb_lock, the resv_map locks and the per-VMA flags are one lock,
//     HugetlbState::lock. The fault mutex table is kept. The hugetlb VMA lock
//     is modelled for private owners' VMAs (resv_map->rw_sema): MADV_DONTNEED
//     zaps under the mmap_lock or VMA lock for read, as a fault runs, and
//     only this lock keeps a fault of an index out of the gap between the
//     zap's unmap and its restoring the reservation. Shared mappings' vma_lock
//     (struct hugetlb_vma_lock) is not: it guards PMD sharing and truncation
//     of mapped files, neither of which the model has.
//   - vm_private_data (the private resv_map and the HPAGE_RESV_* flags) lives
//     here, keyed by Vma* and validated by mm id and file, since struct Vma has
//     no private field.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <functional>
#include <vector>

#include "mm/mm.h"
#include "phys/page.h"
#include "sync/annotations.h"
#include "sync/mutex.h"
#include "sync/rwsem.h"
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
  // Reservations that resv_huge_pages keeps for good because the kernel
  // forgets them (clear_vma_resv_huge_pages of a partly moved private
  // mapping). Not a kernel counter: hugetlb_resv_audit() needs it.
  long resv_forgotten = 0;
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
  // resv_map->rw_sema, the hugetlb VMA lock of the owner's VMAs: faults hold
  // it for read, zaps for write (mm/hugetlb_internal.h, HugetlbVmaLock).
  RwSemaphore rw_sema{LockClass::kHugetlbVmaLock};
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
  // By the VMA's creation id (Vma::cid), not its address: walked in the same
  // order in every run, and a new VMA never meets a freed one's entry.
  std::map<uint64_t, HugetlbVmaInfo> vmas GUARDED_BY(lock);
  std::map<int, long> usage GUARDED_BY(lock);  // mm id -> mm->hugetlb_usage (base pages)
  std::set<HugetlbFileState*, ByCid> files GUARDED_BY(lock);  // by the file's creation id
  // hugetlb_fault_mutex_table: serializes faults on one (file, index).
  static constexpr unsigned kFaultMutexes = 64;
  // hugetlb_wp retakes it with the old anon folio locked (sync/lock_order.h).
  struct FaultMutex {
    Mutex m{LockClass::kHugetlbFaultMutex};
  };
  std::array<FaultMutex, kFaultMutexes> fault_mutex;
};

// Per-file state of a hugetlbfs file (the inode's resv_map and the private
// reserve maps of the mappings of this file). Under HugetlbState::lock.
struct HugetlbFileState {
  HugetlbFileState(Kernel* k, File* f, Hstate* hs);  // hugetlbfs_inode.cpp
  ~HugetlbFileState();  // evicts the page cache and gives back every reservation
  HugetlbFileState(const HugetlbFileState&) = delete;
  HugetlbFileState& operator=(const HugetlbFileState&) = delete;

  Kernel* kernel;  // nullptr once the Kernel's HugetlbState is gone (teardown)
  File* file;
  Hstate* h;
  const uint64_t cid;  // the file's creation id: orders HugetlbState::files
  // The inode resv_map of shared mappings: huge-page indices that hold a
  // reservation or were instantiated in the page cache.
  std::set<uint64_t> regions;
  long cached = 0;  // folios instantiated in the page cache (each is in regions)
  std::vector<std::shared_ptr<HugetlbResvMap>> private_maps;
};

// ---- what the rest of mm calls ----
std::shared_ptr<File> hugetlb_file_setup(Kernel* k, uint64_t len, unsigned huge_shift, int* err);
void unmap_hugepage_range(Vma* vma, uint64_t start, uint64_t end);
[[nodiscard]] int copy_hugetlb_page_range(Vma* dst_vma, Vma* src_vma);
[[nodiscard]] int hugetlb_sysfs_write(Kernel* k, const std::string& path, const std::string& value);  // -ENOENT if not a hugetlb path
[[nodiscard]] int hugetlb_sysfs_read(Kernel* k, const std::string& path, std::string* out);
inline bool is_vm_hugetlb_page(const Vma* vma) { return vma_flags(vma) & VM_HUGETLB; }

// hugetlbfs_file_mmap_prepare: a new VMA maps the hugetlbfs file f (also the
// file hugetlb_file_setup made for MAP_HUGETLB). Sets VM_HUGETLB|VM_DONTEXPAND;
// start, end and vm_pgoff must be huge-page aligned (-EINVAL); reserves the
// pages of the range unless VM_NORESERVE (hugetlb_reserve_pages: -ENOMEM when
// the pool cannot back it); a writable mapping past EOF extends the file.
// Call it from file_mmap_prepare for FsClass::kHugetlbfs files, with the VMA
// that will be linked (its address is the key of its reserve map).
[[nodiscard]] int hugetlb_file_mmap(File* f, Vma* vma);
// hugetlb_get_unmapped_area: a huge-page aligned address for a mapping of f
// (len not a multiple of the huge page size, or MAP_FIXED at an unaligned
// address: -EINVAL).
[[nodiscard]] long hugetlb_get_unmapped_area(Mm* mm, File* f, uint64_t addr, uint64_t len, uint64_t pgoff, int flags)
    REQUIRES_SHARED(mm->mmap_lock);
// vm_ops->may_split (hugetlb_vm_op_split): 0, or -EINVAL if addr is not
// huge-page aligned in a hugetlb VMA. split_vma must call it first.
[[nodiscard]] int hugetlb_split_check(Vma* vma, uint64_t addr);
// vm_ops->open after vm_area_dup of a hugetlb VMA inside one mm (split,
// copy_vma): dst shares src's reserve map and flags. Not for fork (the child
// has no reservation: hugetlb_dup_vma_private).
void hugetlb_vm_op_open(const Vma* src, Vma* dst);
// vm_ops->close before a hugetlb VMA is freed (munmap, exit): gives back the
// unconsumed reservations of its range. Idempotent; safe for any VMA.
void hugetlb_vm_op_close(Vma* vma);
// mremap of a hugetlb VMA: after copy_vma (which opened new_vma on vma's
// reserve map), vma lets go of its reservations (fixup_hugetlb_reservations
// -> clear_vma_resv_huge_pages); those of vma's range that new_vma does not
// cover are lost, as in the kernel.
void clear_vma_resv_huge_pages(Vma* vma, const Vma* new_vma);
// move_hugetlb_page_tables: move the leaves of [old_addr, old_addr+len) of
// vma to new_addr (huge-page aligned; new_vma covers it). Returns the bytes
// it got through (len unless a table could not be allocated).
uint64_t move_hugetlb_page_tables(Vma* vma, Vma* new_vma, uint64_t old_addr, uint64_t new_addr, uint64_t len);
// The folio-free hook's hugetlb part (__folio_put -> free_huge_folio): true
// when the folio was a hugetlb folio and went back to its pool.
bool free_huge_folio(Kernel* k, Folio* folio);
// hugetlb_change_protection for mprotect of [start, end) of a hugetlb VMA
// (change_protection must dispatch here). Returns base pages changed.
[[nodiscard]] long hugetlb_change_protection(Vma* vma, uint64_t start, uint64_t end, pgprot_t newprot);
// hugetlbfs_fallocate: instantiate [offset, offset+len) of f in its page
// cache (zeroed). 0, -EINVAL (unaligned) or -ENOSPC (pool exhausted).
[[nodiscard]] int hugetlb_fallocate(File* f, uint64_t offset, uint64_t len);
// hugetlbfs_setattr for a new size (ftruncate): -EINVAL unless a multiple
// of the huge page size; else hugetlb_vmtruncate: i_size, every mapping
// past it unmapped (private CoW copies too), the page cache past it freed,
// and the file's reservations past it given back. 0.
[[nodiscard]] int hugetlbfs_setattr_size(File* f, uint64_t newsize);
// hugetlbfs_punch_hole (fallocate PUNCH_HOLE, MADV_REMOVE): the partial huge
// pages at either edge zeroed in the range, the whole ones unmapped from
// every mapping (private CoW copies too) and freed; each freed page's index
// leaves the region map, an index never instantiated keeps its reservation.
// offset + len must not overflow. 0.
[[nodiscard]] int hugetlbfs_punch_hole(File* f, uint64_t offset, uint64_t len);
// hugetlbfs_evict_inode (remove_inode_hugepages + hugetlb_unreserve_pages):
// drop f's page cache and its shared reservations. Done by the file's
// HugetlbFileState destructor at the latest; idempotent.
void hugetlb_evict_inode(File* f);
// mm->hugetlb_usage in base pages (/proc/PID/status HugetlbPages).
[[nodiscard]] long hugetlb_usage_pages(const Mm* mm);
// The huge page size of a hugetlb VMA (vma_kernel_pagesize), else PAGE_SIZE.
uint64_t vma_kernel_pagesize(const Vma* vma);
// The pools' own consistency (counters against the free lists, free folios'
// state, surplus <= nr, the per-mm usage of exited mms): "" or a description
// of the first inconsistency. Quiescent system.
std::string hugetlb_pool_audit(Kernel* k);
// The reservations' consistency, per pool: resv_huge_pages equals the
// reservations still outstanding — the unconsumed indices of the reserve maps
// of live private mappings (HPAGE_RESV_OWNER) plus, per hugetlbfs file, the
// indices of its region map not instantiated in its page cache — less the
// in-use folios flagged HPG_restore_reserve (an owner's page unmapped while
// another mapping still holds it: its map has the reservation back already,
// resv_huge_pages gets it when the folio is freed), plus what the kernel
// forgets by design (Hstate::resv_forgotten). Also: no reserve map that only
// freed VMAs use still holds a reservation. live: every live mm. "" or a
// description of the first inconsistency. Quiescent system (no fault, zap,
// fork or mmap in flight: their allocations hold the flag transiently).
std::string hugetlb_resv_audit(Kernel* k, const std::vector<Mm*>& live);

}  // namespace mmlab
