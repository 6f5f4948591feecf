// struct mm_struct, struct vm_area_struct and struct anon_vma: the model's
// include/linux/mm_types.h, the type definitions alone. They sit in the
// page-table layer because the table code reads mm->pgd,
// mm->page_table_lock and vma->vm_mm, as the kernel's arch code does; the
// functions over them are in src/mm/ (mm/mm.h).
//
// Locking (see sync/lock_order.h for the whole hierarchy):
//   mmap_lock      rw_semaphore; read for faults and GUP, write for layout changes.
//   vma_tree_lock  stands in for RCU over the maple tree: taken shared for a
//                  lockless VMA lookup (lock_vma_under_rcu), exclusive to change
//                  the tree (only while mmap_lock is held for write).
//   VMA lock       per VMA: faults read-lock it instead of taking mmap_lock;
//                  vma_start_write() (mmap_lock held for write) excludes them
//                  until mmap_write_unlock().
//   page_table_lock  PGD/PUD entries and PUD leaves.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "pgtable/entry.h"
#include "phys/phys.h"
#include "stats/stats.h"
#include "sync/annotations.h"
#include "sync/rwsem.h"
#include "sync/spinlock.h"

namespace mmlab {

struct Kernel;
struct File;
struct Mm;
struct DeferredTables;  // pgtable/pgtable.h

// arm64's contiguous-PTE entry points (arch/arm64/mm/contpte.c) wrap the
// table code from the TLB layer above it: set_ptes and the operations that
// clear, write-protect or change the write bit of entries call them first
// while `tlb.geometry arm64` is selected (as arm64's pgtable.h routes them).
struct ContPteOps {
  // Replaces set_ptes: unfolds what the set breaks, sets, folds what it completes.
  void (*set_ptes)(Mm* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr);
  // Before nr entries are cleared (get_and_clear_full_ptes, ptep_get_and_clear).
  void (*clear)(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr);
  // Before nr entries lose their write bit (wrprotect_ptes, ptep_set_wrprotect).
  void (*wrprotect)(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr);
  // Before one entry is rewritten as `entry` (ptep_set_access_flags).
  void (*set_access_flags)(Mm* mm, uint64_t addr, pte_t* ptep, pte_t entry);
};

// What the table code sees of the System's TLB model (tlb/tlb.h's TlbState
// derives from it): the contpte wrappers while they are installed.
struct TlbHooks {
  std::atomic<const ContPteOps*> contpte{nullptr};
};

// The TLB model's view of an address space, which mm hands it: the
// address-space id and x86's mm->context.tlb_gen, and mm_cpumask.
struct MmTlbContext {
  uint64_t ctx_id = 0;               // unique in its System, never reused; 0: none
  std::atomic<uint64_t> tlb_gen{1};  // bumped by every flush (inc_mm_tlb_gen)
  std::atomic<uint64_t> cpumask{0};  // one bit per simulated CPU (NR_CPUS <= 64)
};

// vm_flags (include/linux/mm.h values).
using vm_flags_t = uint64_t;
inline constexpr vm_flags_t VM_NONE = 0;
inline constexpr vm_flags_t VM_READ = 0x1, VM_WRITE = 0x2, VM_EXEC = 0x4, VM_SHARED = 0x8;
inline constexpr vm_flags_t VM_MAYREAD = 0x10, VM_MAYWRITE = 0x20, VM_MAYEXEC = 0x40, VM_MAYSHARE = 0x80;
inline constexpr vm_flags_t VM_GROWSDOWN = 0x100, VM_UFFD_MISSING = 0x200, VM_PFNMAP = 0x400;
inline constexpr vm_flags_t VM_UFFD_WP = 0x1000, VM_LOCKED = 0x2000, VM_IO = 0x4000;
inline constexpr vm_flags_t VM_DONTCOPY = 0x20000, VM_DONTEXPAND = 0x40000, VM_LOCKONFAULT = 0x80000;
// VM_LOCKED_MASK: the bits mlock sets and munlock, fork and MREMAP_DONTUNMAP clear.
inline constexpr vm_flags_t VM_LOCKED_MASK = VM_LOCKED | VM_LOCKONFAULT;
inline constexpr vm_flags_t VM_ACCOUNT = 0x100000, VM_NORESERVE = 0x200000, VM_HUGETLB = 0x400000;
inline constexpr vm_flags_t VM_WIPEONFORK = 0x2000000, VM_DONTDUMP = 0x4000000;
inline constexpr vm_flags_t VM_SOFTDIRTY = 0x8000000, VM_MIXEDMAP = 0x10000000;
inline constexpr vm_flags_t VM_HUGEPAGE = 0x20000000, VM_NOHUGEPAGE = 0x40000000;
inline constexpr vm_flags_t VM_MERGEABLE = 0x80000000;
// VM_SEALED (mseal(2), 64-bit only): the VMA's extent and protection are
// fixed until the process exits.
inline constexpr vm_flags_t VM_SEALED = 1ull << 42;
inline constexpr vm_flags_t VM_ACCESS_FLAGS = VM_READ | VM_WRITE | VM_EXEC;

inline bool is_cow_mapping(vm_flags_t f) { return (f & (VM_SHARED | VM_MAYWRITE)) == VM_MAYWRITE; }
// __VM_UFFD_FLAGS as far as the model has them (no minor faults).
inline constexpr vm_flags_t VM_UFFD_FLAGS = VM_UFFD_MISSING | VM_UFFD_WP;

// mm->flags bits (MMF_*).
inline constexpr unsigned MMF_HAS_PINNED = 0;
inline constexpr unsigned MMF_HUGE_ZERO_PAGE = 1;
inline constexpr unsigned MMF_DISABLE_THP = 2;  // MMF_DISABLE_THP_COMPLETELY: PR_SET_THP_DISABLE without flags
inline constexpr unsigned MMF_VM_HUGEPAGE = 3;  // registered with khugepaged (it has an mm_slot)
inline constexpr unsigned MMF_DISABLE_THP_EXCEPT_ADVISED = 4;  // PR_SET_THP_DISABLE, PR_THP_DISABLE_EXCEPT_ADVISED

enum MmCounter : uint8_t { MM_FILEPAGES = 0, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES, NR_MM_COUNTERS };

// Orders VMAs and anon_vmas by their creation id (`cid`, from the
// Kernel's counter), not by host address: an rmap walk then visits them in
// the same order in every run, which a replayed schedule needs (issue 34
// §4). Equal ids (objects made outside a Kernel, in tests) fall back to
// the address, so that two of them are never taken for one.
struct ByCid {
  template <typename T>
  bool operator()(const T* a, const T* b) const {
    return a->cid != b->cid ? a->cid < b->cid : a < b;
  }
};

// struct anon_vma: the reverse map root of anonymous folios (folio->mapping).
// Each VMA that may map its folios is on its list (the anon_vma_chain,
// simplified to a set: a fork child's VMAs join the parent's anon_vmas).
struct AnonVma {
  RwSemaphore rwsem{LockClass::kRmapLock};
  std::set<struct Vma*, ByCid> vmas GUARDED_BY(rwsem);
  std::atomic<int> refcount{1};
  AnonVma* root = this;
  uint64_t cid = 0;  // creation id (Kernel::next_cid)
};

struct Vma {
  Mm* vm_mm = nullptr;
  uint64_t vm_start = 0;  // written under mmap_lock (write) + VMA write lock
  uint64_t vm_end = 0;
  vm_flags_t vm_flags = 0;
  pgprot_t vm_page_prot{0};
  uint64_t vm_pgoff = 0;  // file offset in pages, or linear page index for anon
  std::shared_ptr<File> vm_file;
  AnonVma* anon_vma = nullptr;          // set once by anon_vma_prepare (page_table_lock)
  std::set<AnonVma*, ByCid> anon_vma_chain;  // every anon_vma this VMA is linked into
  uint64_t cid = 0;  // creation id (Kernel::next_cid): orders rmap lists, names the VMA at a point
  // Per-VMA lock: readers count; write-locked while vm_lock_seq == mm->mm_lock_seq.
  std::atomic<int> vm_refcnt{0};
  std::atomic<uint64_t> vm_lock_seq{~0ull};

  bool is_anonymous() const { return !vm_file && !(vm_flags & VM_SHARED); }
  uint64_t pages() const { return (vm_end - vm_start) >> PAGE_SHIFT; }
};

// vm_flags of a VMA others can reach: written under the mmap and VMA write
// locks (vm_flags_reset), read by rmap walks of other mms that hold
// neither (vma_flags). The kernel's accesses are plain and its readers
// tolerate a stale value; relaxed atomics say the same to ThreadSanitizer.
inline vm_flags_t vma_flags(const Vma* vma) {
  return std::atomic_ref<vm_flags_t>(const_cast<Vma*>(vma)->vm_flags).load(std::memory_order_relaxed);
}
inline void vm_flags_reset(Vma* vma, vm_flags_t flags) {
  std::atomic_ref<vm_flags_t>(vma->vm_flags).store(flags, std::memory_order_relaxed);
}

// vm_page_prot likewise: vma_set_page_prot() writes it under the mmap and
// VMA write locks (WRITE_ONCE in the kernel), and an rmap walk of another
// mm reads it (READ_ONCE: remove_migration_pte).
inline pgprot_t vma_page_prot(const Vma* vma) {
  return std::atomic_ref<pgprot_t>(const_cast<Vma*>(vma)->vm_page_prot).load(std::memory_order_relaxed);
}
inline void vma_page_prot_set(Vma* vma, pgprot_t prot) {
  std::atomic_ref<pgprot_t>(vma->vm_page_prot).store(prot, std::memory_order_relaxed);
}

inline uint64_t linear_page_index(const Vma* vma, uint64_t addr) {
  return ((addr - vma->vm_start) >> PAGE_SHIFT) + vma->vm_pgoff;
}
inline bool vma_is_anonymous(const Vma* vma) { return !vma->vm_file; }
// include/linux/userfaultfd_k.h: a VMA registered with userfaultfd.
inline bool userfaultfd_armed(const Vma* vma) { return vma->vm_flags & VM_UFFD_FLAGS; }
inline bool userfaultfd_missing(const Vma* vma) { return vma->vm_flags & VM_UFFD_MISSING; }

// A sequence count (seqcount_t), used for write_protect_seq. Each read and
// write is a schedule point (sync/sched.h), named by the owner's id.
class SeqCount {
 public:
  uint64_t raw_read() const {
    sched::point("raw_read_seqcount", sched::Op::kRead, sched_object());
    return seq_.load(std::memory_order_acquire);
  }
  bool read_retry(uint64_t start) const {
    sched::point("read_seqcount_retry", sched::Op::kRead, sched_object());
    std::atomic_thread_fence(std::memory_order_acquire);
    return seq_.load(std::memory_order_relaxed) != start;
  }
  void write_begin() {
    sched::point("write_seqcount_begin", sched::Op::kRmw, sched_object());
    seq_.fetch_add(1, std::memory_order_acq_rel);
  }
  void write_end() {
    sched::point("write_seqcount_end", sched::Op::kRmw, sched_object());
    seq_.fetch_add(1, std::memory_order_acq_rel);
  }

  uint64_t id = 0;  // the owning mm's id: the object's name at a point

 private:
  sched::Object sched_object() const { return {this, sched::ObjKind::kSeqCount, id}; }
  std::atomic<uint64_t> seq_{0};
};

struct Mm {
  // Allocates the PGD (pgd_alloc; pgd stays null on failure). mm_alloc()
  // (mm/mm.h) is the way to make one.
  Mm(Kernel* kernel, PhysMem* phys, Stats* stats, DeferredTables* deferred_tables, int id);
  ~Mm();
  Mm(const Mm&) = delete;
  Mm& operator=(const Mm&) = delete;

  Kernel* const kernel;
  PhysMem* const phys;
  Stats* const stats;
  DeferredTables* const deferred_tables;  // the Kernel's, shared by all its mms
  TlbHooks* tlb = nullptr;  // the System's TLB model (tlb/tlb.h), set by mm_alloc; nullptr: none
  MmTlbContext tlb_ctx;
  const int mm_id;  // nonzero; used by the MM-ID mapcount slots

  RwSemaphore mmap_lock{LockClass::kMmapLock};
  SpinLock page_table_lock{};
  pgd_t* pgd = nullptr;  // the PGD table frame (allocated at creation)

  // VMAs by start address. Changed with mmap_lock held for write and
  // vma_tree_lock exclusive; read with either held.
  std::map<uint64_t, std::unique_ptr<Vma>> vmas;
  mutable RwSemaphore vma_tree_lock;
  std::atomic<uint64_t> mm_lock_seq{0};  // bumped by mmap_write_unlock: ends every VMA write lock

  // mm_users: 1 while the process lives; 0 from the start of its teardown
  // (mmput), which is what khugepaged's hpage_collapse_test_exit() looks at.
  std::atomic<int> mm_users{1};
  std::atomic<long> rss_stat[NR_MM_COUNTERS] = {};
  std::atomic<long> pgtables_bytes{0};  // page-table pages of this mm (incl. deposited ones)
  std::atomic<uint64_t> flags{0};
  SeqCount write_protect_seq;
  uint64_t mmap_base = MMAP_BASE;
  uint64_t task_size = TASK_SIZE;
  std::atomic<uint64_t> hiwater_rss{0};
  std::atomic<uint64_t> total_vm{0};
  // VM_LOCKED, and VM_LOCKONFAULT, that every new VMA gets after
  // mlockall(MCL_FUTURE[|MCL_ONFAULT]); under mmap_lock. Not inherited by fork
  // (mm_init keeps only VM_INIT_DEF_MASK, which holds no lock bit).
  vm_flags_t def_flags = 0;

  long get_mm_counter(MmCounter c) const { return rss_stat[c].load(std::memory_order_relaxed); }
  void add_mm_counter(MmCounter c, long n) { rss_stat[c].fetch_add(n, std::memory_order_relaxed); }
  // MMF_HAS_PINNED is read by fork without the writer's locks (GUP-fast
  // sets it): its tests and sets are schedule points, named by mm id.
  bool test_flag(unsigned bit) const {
    if (bit == MMF_HAS_PINNED) sched::point("mm_flags_test", sched::Op::kRead, flags_object());
    return flags.load(std::memory_order_acquire) & (1ull << bit);
  }
  void set_flag(unsigned bit) {
    if (bit == MMF_HAS_PINNED) sched::point("mm_flags_set", sched::Op::kRmw, flags_object());
    flags.fetch_or(1ull << bit, std::memory_order_acq_rel);
  }
  sched::Object flags_object() const {
    return {&flags, sched::ObjKind::kMmFlags, static_cast<uint64_t>(mm_id)};
  }
  void clear_flag(unsigned bit) { flags.fetch_and(~(1ull << bit), std::memory_order_acq_rel); }
  bool test_and_set_flag(unsigned bit) { return flags.fetch_or(1ull << bit, std::memory_order_acq_rel) & (1ull << bit); }
};

inline void inc_mm_counter(Mm* mm, MmCounter c) { mm->add_mm_counter(c, 1); }
inline void dec_mm_counter(Mm* mm, MmCounter c) { mm->add_mm_counter(c, -1); }
inline void add_mm_counter(Mm* mm, MmCounter c, long n) { mm->add_mm_counter(c, n); }

}  // namespace mmlab
