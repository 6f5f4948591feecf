// Event counters, /proc/vmstat items and the per-size mTHP statistics.
//
// Every counter is per simulated CPU (one writer at a time, see
// sync/cpu.h) and summed on read, as the kernel's vm_event_states and
// mthp_stats are. Counters are declared here, in one list each, and counted
// where the kernel counts them, under the kernel's names.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mmlab/types.h"
#include "sync/cpu.h"

namespace mmlab {

// /proc/vmstat events and gauges, kernel names.
#define MMLAB_VMSTAT_ITEMS(X)                                                          \
  X(pgfault) X(pgmajfault) X(pgreuse) X(cow_ksm) X(pgalloc_normal) X(pgalloc_movable) \
  X(pgfree) X(thp_fault_alloc) X(thp_fault_fallback) X(thp_fault_fallback_charge)     \
  X(thp_split_page) X(thp_split_page_failed) X(thp_deferred_split_page)              \
  X(thp_split_pmd) X(thp_split_pud) X(thp_zero_page_alloc) X(thp_zero_page_alloc_failed) \
  X(thp_collapse_alloc) X(thp_collapse_alloc_failed) X(thp_scan_exceed_none_pte)       \
  X(thp_scan_exceed_swap_pte) X(thp_scan_exceed_share_pte) X(nr_foll_pin_acquired)      \
  X(nr_foll_pin_released) X(pswpin) X(pswpout) X(thp_swpout) X(thp_swpout_fallback)   \
  X(thp_migration_success) X(thp_migration_fail) X(pgmigrate_success) X(pgmigrate_fail) \
  X(numa_pte_updates) X(nr_anon_transparent_hugepages) X(nr_page_table_pages)         \
  X(tlb_flush_range) X(tlb_flush_one) X(nr_tlb_remote_flush) X(nr_tlb_remote_flush_received) \
  X(nr_tlb_local_flush_all) X(nr_tlb_local_flush_one) X(pgdeactivate) X(pglazyfree) X(pglazyfreed) \
  X(thp_underused_split_page) X(thp_file_mapped) X(thp_file_alloc) X(thp_file_fallback) \
  X(swpin_zero) X(swpout_zero) X(unevictable_pgs_culled) X(unevictable_pgs_scanned)  \
  X(unevictable_pgs_rescued)

enum class VmStat : uint16_t {
#define X(n) n,
  MMLAB_VMSTAT_ITEMS(X)
#undef X
  kNr
};

// mTHP statistics, one set per order (hugepages-<N>kB/stats/<name>).
#define MMLAB_MTHP_ITEMS(X)                                                              \
  X(anon_fault_alloc) X(anon_fault_fallback) X(anon_fault_fallback_charge) X(zswpout)   \
  X(swpin) X(swpin_fallback) X(swpin_fallback_charge) X(swpout) X(swpout_fallback)      \
  X(shmem_alloc) X(shmem_fallback) X(shmem_fallback_charge) X(split) X(split_failed)    \
  X(split_deferred) X(nr_anon) X(nr_anon_partially_mapped)                              \
  X(wp_fault_alloc) X(wp_fault_fallback) X(wp_fault_fallback_charge)                   \
  X(collapse_alloc) X(collapse_alloc_failed) X(collapse_exceed_none_pte)                \
  X(collapse_exceed_swap_pte) X(collapse_exceed_shared_pte)

enum class MthpStat : uint16_t {
#define X(n) n,
  MMLAB_MTHP_ITEMS(X)
#undef X
  kNr
};

// The model's own event counters (scenario-language.md, "Event counters"),
// named with dots. Each entry: enumerator, printed name, meaning.
#define MMLAB_EVENT_ITEMS(X)                                                                      \
  X(gup_descents, "gup.descents", "follow_page_mask() calls (each starts a walk at the top level)") \
  X(gup_pte_lock, "gup.pte_lock", "split PTE lock acquisitions by the GUP slow path")              \
  X(gup_pmd_lock, "gup.pmd_lock", "PMD/PUD lock acquisitions by the GUP slow path")                \
  X(gup_grab, "gup.grab", "try_grab_folio() calls made by GUP (one per committed run)")           \
  X(gup_grab_ref, "gup.grab_ref", "those of them that take references (FOLL_GET or FOLL_PIN; MADV_POPULATE_* takes none)") \
  X(gup_mark_accessed, "gup.mark_accessed", "folio_mark_accessed() calls made by GUP")            \
  X(gup_cache_flush, "gup.cache_flush", "pages passed through the cache-flush helpers by GUP")    \
  X(gup_fast_speculative, "gup.fast_speculative", "speculative references taken by GUP-fast")     \
  X(gup_fast_fallback, "gup.fast_fallback", "GUP-fast calls that fell back to the slow path")     \
  X(fault_anon, "fault.anon", "anonymous faults on an empty entry (do_anonymous_page, PMD THP)")   \
  X(fault_zero, "fault.zero", "read faults that mapped the zero page or the huge zero folio")     \
  X(fault_wp_copy, "fault.wp_copy", "write faults that copied (wp_page_copy)")                    \
  X(fault_wp_reuse, "fault.wp_reuse", "write faults that reused the page (wp_page_reuse)")        \
  X(fault_unshare, "fault.unshare", "FAULT_FLAG_UNSHARE faults")                                  \
  X(fault_hugetlb_cow_nopage, "fault.hugetlb_cow_nopage",                                          \
    "hugetlb CoW faults that found no free huge page outside the owner's reserve (SIGBUS)")          \
  X(fault_retry, "fault.retry", "faults that backed out because the entry changed (returned 0)")  \
  X(fault_exception, "fault.exception", "page-fault exceptions a CPU access took (the program's or copy_to_user's; the retries of one exception are not more)") \
  X(fault_vma_lock, "fault.vma_lock", "faults handled under the per-VMA lock")                    \
  X(fault_mmap_lock, "fault.mmap_lock", "faults that fell back to mmap_lock")                     \
  X(pte_lock, "pgtable.pte_lock", "split PTE lock acquisitions (all paths)")                      \
  X(pmd_lock, "pgtable.pmd_lock", "split PMD lock acquisitions (all paths)")                      \
  X(pgtable_alloc, "pgtable.alloc", "page-table pages allocated")                                 \
  X(pgtable_free, "pgtable.free", "page-table pages freed")                                       \
  X(pgtable_reclaim, "pgtable.reclaim", "PTE tables a whole-table MADV_DONTNEED emptied and freed (PT_RECLAIM)") \
  X(guard_install, "madvise.guard_install", "MADV_GUARD_INSTALL ranges of one VMA given their guard markers") \
  X(guard_zap, "madvise.guard_zap", "MADV_GUARD_INSTALL ranges zapped first (something was mapped there)") \
  X(free_pcp, "free.pcp", "folios freed to a per-CPU list")                                          \
  X(free_zone_lock, "free.zone_lock", "folios freed under zone->lock (orders 4-8, and any order the per-CPU lists refuse)") \
  X(rmap_update, "rmap.update", "mapcount updates of one folio run (an add, dup or remove of its PTEs or its PMD)") \
  X(pte_set, "pgtable.pte_set", "PTEs written by set_ptes() (one per entry: faults, CoW, fork's child entries, migration)") \
  X(pte_clear, "pgtable.pte_clear", "PTEs cleared by get_and_clear_full_ptes() (one per entry: zap, migration, collapse)") \
  X(pte_first_use, "mmu.pte_first_use", "PTEs a user load or store translated through for the first time since they were installed (a walk nothing cached; on a shadow-paging hypervisor, a shadow fill)") \
  X(pte_first_use_kernel, "mmu.pte_first_use_kernel", "PTEs the kernel's copy_to_user translated through for the first time since they were installed (with PTI, another page-table root than the program's)") \
  X(pte_modify, "pgtable.pte_modify", "PTEs changed in place by ptep_modify_prot_start/commit (mprotect)") \
  X(pte_wrprotect, "pgtable.pte_wrprotect", "PTEs write-protected in place by wrprotect_ptes() (fork's copy of a private writable run)") \
  X(lru_add, "lru.add", "folios added to the LRU (folio_add_lru)")                                  \
  X(mm_syscall, "mm.syscall", "memory-management system calls entered (mmap, munmap, mprotect, mremap, madvise, mlock*, fork, process_vm_readv)") \
  X(mremap_pmd_move, "mremap.pmd_move", "PTE tables mremap moved whole to a new PMD entry (move_normal_pmd)") \
  X(fork_mm, "fork.mm", "address spaces dup_mm() duplicated (one per fork)")                         \
  X(fork_vmas, "fork.vmas", "VMAs dup_mmap() duplicated into a child")                              \
  X(user_written, "user.bytes_written", "bytes the CPU model stored for a process (its own work, not the kernel's)") \
  X(user_calls, "user.accesses", "CPU-access requests of a process (a scenario's read or write of a range: one loop each)") \
  X(user_read, "user.bytes_read", "bytes the CPU model loaded for a process (its own work, not the kernel's)") \
  X(pte_batch, "pgtable.pte_batch", "folio_pte_batch() calls that returned more than one entry")  \
  X(alloc_zone_lock, "alloc.zone_lock", "zone->lock acquisitions by the page allocator")          \
  X(alloc_pcp, "alloc.pcp", "allocations served from a per-CPU list")                             \
  X(fork_pte_batches, "fork.pte_batches", "batched copy_present_ptes() runs (n > 1)")             \
  X(fork_copied_pages, "fork.copied_pages", "pages copied eagerly at fork (maybe pinned)")        \
  X(zap_pte_batches, "zap.pte_batches", "batched zap_present_ptes() runs (n > 1)")                \
  X(tlb_flush, "tlb.flush", "TLB flushes issued (one per flushed range)")                         \
  X(tlb_flush_full, "tlb.flush_full", "flush_tlb_mm_range() calls that flush the whole address space (TLB_FLUSH_ALL or over the ceiling)") \
  X(tlb_flush_ranged, "tlb.flush_range", "flush_tlb_mm_range() calls that flush 2 to tlb_single_page_flush_ceiling entries") \
  X(tlb_flush_single, "tlb.flush_single", "flush_tlb_mm_range() calls that flush one entry of their stride") \
  X(tlb_flush_entries, "tlb.flush_entries", "entries flushed one by one (INVLPG each) by the flushes of 1 to tlb_single_page_flush_ceiling entries") \
  X(tlb_ipi, "tlb.ipi", "TLB-shootdown IPIs received by other CPUs (with a tlb.geometry)")        \
  X(tlb_lookup, "tlb.lookup", "user loads and stores looked up in the TLB model (one per translated entry; with a tlb.geometry)") \
  X(tlb_l1_miss, "tlb.l1_miss", "lookups that missed the L1 dTLB")                                 \
  X(tlb_l2_miss, "tlb.l2_miss", "lookups that missed the L2 TLB too (a page walk)")                \
  X(tlb_contpte_fold, "tlb.contpte_fold", "arm64 contiguous-PTE blocks folded (tlb.geometry arm64)") \
  X(tlb_contpte_unfold, "tlb.contpte_unfold", "arm64 contiguous-PTE blocks unfolded (tlb.geometry arm64)") \
  X(copy_bytes, "bytes.copied", "bytes copied by CoW and fork")                                   \
  X(cow_bytes, "cow.bytes_copied", "bytes copied by write-protect faults (wp_page_copy, write and unshare)") \
  X(cow_zero_subpages, "cow.zero_subpages_copied", "pages write-protect faults copied whose bytes were all zero (the model's figure: the kernel copies them unexamined)") \
  X(cow_reuse_pages, "cow.reuse_pages", "PTEs made writable in place by reusing write faults")      \
  X(cow_notifier, "cow.notifier_ranges", "MMU-notifier invalidations by write-protect copies (one per copy)") \
  X(cow_direct_reclaim, "cow.alloc_direct_reclaim",                                                \
    "large-folio allocations by write-protect faults whose gfp allows direct reclaim and compaction (vma_thp_gfp_mask; the model's allocator does neither)") \
  X(zero_bytes, "bytes.zeroed", "bytes zeroed for new folios")                                     \
  X(collapse_scan_pmd, "collapse.scan_pmd", "PMD ranges examined by hpage_collapse_scan_pmd()")    \
  X(collapse_ptes_scanned, "collapse.ptes_scanned", "PTEs read by the collapse scan")              \
  X(collapse_attempt, "collapse.attempt", "collapse_huge_page() calls (one per target range)")     \
  X(collapse_success, "collapse.success", "ranges collapsed into a new folio")                     \
  X(collapse_isolated, "collapse.folios_isolated", "folios a collapse locked and isolated from the LRU (each later put back or freed)") \
  X(collapse_copied, "collapse.bytes_copied", "bytes copied into collapsed folios")                \
  X(collapse_zeroed, "collapse.bytes_zeroed", "bytes zeroed for none/zero-page slots of collapsed folios") \
  X(collapse_zero_subpages, "collapse.zero_subpages_copied", "pages collapses copied whose bytes were all zero (the model's figure: the kernel copies them unexamined)") \
  X(collapse_flush, "collapse.pmd_flush", "pmdp_collapse_flush() calls (PMD cleared, TLB flushed)") \
  X(collapse_table_sync, "collapse.table_sync", "tlb_remove_table_sync_one() waits for lockless walkers") \
  X(khugepaged_wake, "khugepaged.wakes", "khugepaged_do_scan() runs (wakes of the khugepaged thread)") \
  X(vm_warn, "debug.vm_warn", "VM_WARN_ON* checks on a folio of this System that fired (debug builds; the model went on)") \
  X(inject_page_alloc, "inject.page_alloc", "page allocations failed by fault injection (should_fail_alloc_page)") \
  X(inject_charge, "inject.charge", "memory-cgroup charges failed by fault injection (mem_cgroup_charge)") \
  X(inject_pgtable_alloc, "inject.pgtable_alloc", "page-table page allocations failed by fault injection") \
  X(inject_folio_trylock, "inject.folio_trylock", "folio_trylock() calls failed by fault injection") \
  X(inject_copy_mc, "inject.copy_mc", "machine checks injected into copy_mc_user_highpage() (-EHWPOISON)") \
  X(inject_swapin, "inject.swapin", "swap-in reads failed by fault injection (I/O error)") \
  X(inject_hugetlb_resv, "inject.hugetlb_resv", "hugetlb reservations failed by fault injection") \
  X(inject_fault_retry, "inject.fault_retry", "faults made to drop their lock and return VM_FAULT_RETRY by fault injection")

enum class Event : uint16_t {
#define X(e, n, d) e,
  MMLAB_EVENT_ITEMS(X)
#undef X
  kNr
};

// The model's per-order counters, `<name>.order<N>` (event counters:
// `counters reset` zeroes them). For the cow.* items N is the order of the
// folio the fault copied into (copy, unshare) or reused a page of (reuse);
// the data.* items count bytes moved into a folio of order N, apart by
// order because a 4K page is zeroed or copied in cache and a 2M folio
// streams (the cost model's per-order terms).
#define MMLAB_ORDER_ITEMS(X)                                                                  \
  X(copy, "cow.copy", "write faults that copied into a new folio of this order")             \
  X(unshare, "cow.unshare", "unshare faults that copied into a new folio of this order")     \
  X(reuse, "cow.reuse", "write faults that made a page of a folio of this order writable in place") \
  X(zeroed, "data.zeroed", "bytes zeroed in new folios of this order (fault, allocation with __GFP_ZERO, hugetlb)") \
  X(copied, "data.copied", "bytes copied into folios of this order (CoW, fork, migration, collapse)")

enum class OrderStat : uint16_t {
#define X(n, name, d) n,
  MMLAB_ORDER_ITEMS(X)
#undef X
  kNr
};

inline constexpr unsigned kMthpOrders = PMD_ORDER + 1;  // orders 0..9; order 0 is never counted

// Time spent moving bytes, by mechanism, for the benchmarks' per-mechanism
// tables; measured only while enabled (System::set_data_timing), in TSC
// ticks converted to ns on read.
enum class DataTime : uint8_t {
  kZero,  // zeroing new folios (folio_zero_user, hugetlb, __GFP_ZERO)
  kCopy,  // kernel-side copies (CoW, fork's eager copies, migration, swap I/O)
  kUser,  // the CPU model's loads and stores, device access, file read/write
  kNr
};

const char* vmstat_name(VmStat s);
const char* mthp_stat_name(MthpStat s);
const char* event_name(Event e);
const char* event_description(Event e);
const char* order_stat_name(OrderStat c);     // "cow.copy"
const char* order_stat_description(OrderStat c);
bool vmstat_from_name(std::string_view name, VmStat* out);
bool mthp_stat_from_name(std::string_view name, MthpStat* out);
bool event_from_name(std::string_view name, Event* out);
// "cow.copy.order4" -> (copy, 4); false if not such a name.
bool order_stat_from_name(std::string_view name, OrderStat* out, unsigned* order);
// Every `<name>.order<N>` name, in order.
std::vector<std::string> order_stat_names();

class Stats {
 public:
  Stats() = default;
  ~Stats();
  Stats(const Stats&) = delete;
  Stats& operator=(const Stats&) = delete;
  void count(Event e, uint64_t n = 1) {
    add(cpu_block().events[idx(e)], n);
    tally(idx(e), static_cast<int64_t>(n));
  }
  void count(VmStat s, uint64_t n = 1) {
    add(cpu_block().vmstat[idx(s)], n);
    tally(kTallyVmStat + idx(s), static_cast<int64_t>(n));
  }
  void uncount(VmStat s, uint64_t n = 1) {
    add(cpu_block().vmstat[idx(s)], -static_cast<int64_t>(n));
    tally(kTallyVmStat + idx(s), -static_cast<int64_t>(n));
  }
  void count_order(unsigned order, OrderStat s, uint64_t n = 1) {
    if (order >= kMthpOrders) return;
    add(cpu_block().per_order[order][idx(s)], static_cast<int64_t>(n));
    tally(kTallyOrder + order * idx(OrderStat::kNr) + idx(s), static_cast<int64_t>(n));
  }

  // A thread's own tally of the events, vmstat items and per-order items it
  // counts, beside the per-CPU sums, while one is open on it (EventTally in
  // the API): what one operation did. One slot per item, in the order
  // events, vmstat items, per-order items; the thread's tally counts in
  // whatever Stats the thread counts in.
  static constexpr size_t kTallyVmStat = static_cast<size_t>(Event::kNr);
  static constexpr size_t kTallyOrder = kTallyVmStat + static_cast<size_t>(VmStat::kNr);
  static constexpr size_t kTallySlots = kTallyOrder + kMthpOrders * static_cast<size_t>(OrderStat::kNr);
  // The slot of a counter name (event, vmstat item or `<item>.order<N>`),
  // or -1.
  static int tally_slot(std::string_view name);
  // Opens `slots` (kTallySlots of them) on this thread, or closes with
  // nullptr; returns the one it replaces.
  static int64_t* set_thread_tally(int64_t* slots) {
    int64_t* old = thread_tally_;
    thread_tally_ = slots;
    return old;
  }
  // Bytes zeroed or copied into a folio of `order`: the total event and the
  // per-order one.
  void count_zeroed(unsigned order, uint64_t bytes) {
    count(Event::zero_bytes, bytes);
    count_order(order, OrderStat::zeroed, bytes);
  }
  void count_copied(unsigned order, uint64_t bytes) {
    count(Event::copy_bytes, bytes);
    count_order(order, OrderStat::copied, bytes);
  }
  void count_mthp(unsigned order, MthpStat s, int64_t n = 1) {
    if (order == 0 || order >= kMthpOrders) return;  // order 0 is never counted
    add(cpu_block().mthp[order][idx(s)], n);
  }

  uint64_t read(Event e) const;
  int64_t read(VmStat s) const;
  int64_t read_mthp(unsigned order, MthpStat s) const;
  uint64_t read_order(unsigned order, OrderStat s) const;
  // Zero the model's event counters (the scenario's `counters reset`);
  // kernel statistics are never reset, as in the kernel.
  void reset_events();

  void set_data_timing(bool on) { data_timing_.store(on, std::memory_order_relaxed); }
  bool data_timing() const { return data_timing_.load(std::memory_order_relaxed); }
  void add_data_ticks(DataTime t, uint64_t ticks) { add(cpu_block().data_ticks[idx(t)], static_cast<int64_t>(ticks)); }
  uint64_t read_data_ns(DataTime t) const;
  void reset_data_time();

 private:
  struct alignas(64) CpuBlock {
    std::array<int64_t, static_cast<size_t>(Event::kNr)> events{};
    std::array<int64_t, static_cast<size_t>(VmStat::kNr)> vmstat{};
    std::array<std::array<int64_t, static_cast<size_t>(MthpStat::kNr)>, kMthpOrders> mthp{};
    std::array<std::array<int64_t, static_cast<size_t>(OrderStat::kNr)>, kMthpOrders> per_order{};
    std::array<int64_t, static_cast<size_t>(DataTime::kNr)> data_ticks{};
  };
  template <typename E>
  static constexpr size_t idx(E e) { return static_cast<size_t>(e); }
  CpuBlock& cpu_block() {
    CpuBlock* b = cpus_[this_cpu().id].load(std::memory_order_acquire);
    return b ? *b : first_count();
  }
  CpuBlock& first_count();
  // f(block) for every CPU that has counted.
  template <typename F>
  void for_each_block(F f) const {
    for (const auto& p : cpus_)
      if (CpuBlock* b = p.load(std::memory_order_acquire)) f(*b);
  }
  // Only this thread reads its tally, after its operation: a plain add.
  static void tally(size_t slot, int64_t n) {
    if (int64_t* t = thread_tally_) t[slot] += n;
  }
  static inline thread_local int64_t* thread_tally_ = nullptr;
  void add(int64_t& slot, int64_t n) {
    std::atomic_ref<int64_t> r(slot);
    if (this_cpu().exclusive)
      r.store(r.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    else
      r.fetch_add(n, std::memory_order_relaxed);
  }
  // A CPU's block is made on its first count. A System is made for every
  // run of a race test, and a block for each of the NR_CPUS CPUs (225 KiB,
  // zeroed, then freed) was most of such a run's time under the sanitizers,
  // whose allocators map and unmap a block that size each time. The first
  // count on a CPU may meet a reader, or another thread on a shared CPU: a
  // compare-exchange publishes the zeroed block.
  std::array<std::atomic<CpuBlock*>, NR_CPUS> cpus_{};
  std::atomic<bool> data_timing_{false};
};

// The TSC, and its rate measured once against the steady clock.
uint64_t tsc_now();
double tsc_ns_per_tick();

}  // namespace mmlab
