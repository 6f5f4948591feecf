// The sysfs tree under /sys/kernel/mm/ that the model honours, and the
// model's `tune` keys (variants with no sysfs file). Read on fault and GUP
// paths at the point where the kernel's code reads the knob; written between
// operations (atomics, so a concurrent reader sees one value or the other).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "mmlab/tune.h"
#include "mmlab/types.h"
#include "tlb/tlb.h"

namespace mmlab {

enum class ThpEnabled : uint8_t { kAlways, kMadvise, kNever };
enum class ThpOrderMode : uint8_t { kNever, kAlways, kInherit, kMadvise };
// transparent_hugepage/shmem_enabled (mm/shmem.c's SHMEM_HUGE_*): the first
// four are also the values of a tmpfs mount's huge= option; deny and force
// exist only in sysfs.
enum class ShmemHuge : uint8_t { kNever, kAlways, kWithinSize, kAdvise, kDeny, kForce };
// hugepages-<N>kB/shmem_enabled.
enum class ShmemOrderMode : uint8_t { kNever, kAlways, kInherit, kWithinSize, kAdvise };

// The model's variants (the `tune` keys with a list of values): their enums
// and value lists live in mm/variants.h, which only the code that acts on a
// value includes, so that adding a value rebuilds those files and not every
// includer of the Settings.
enum class GupWalk : uint8_t;
enum class GupFast : uint8_t;
enum class CowPolicy : uint8_t;
enum class CowReuse : uint8_t;
enum class ZeroPage : uint8_t;
// cow.max_order: the largest order `fixed` copies (a model-only sweep axis,
// never proposed as ABI); the PMD order is never a CoW order.
inline constexpr unsigned kCowMaxOrderLimit = 8;
// transparent_hugepage/defrag.
enum class ThpDefrag : uint8_t { kAlways, kDefer, kDeferMadvise, kMadvise, kNever };

// The revert switches (issue 34, docs/RACES.md): each `tune revert.*` key
// restores the code as it was before one fix, as a branch at the fix's
// site, so that the explorer can show the interleaving the fix closed.
// Registered here and nowhere else, one record each:
//   X(enumerator, key, value that turns it on, commit, subject, what it restores)
// A key's values are `off` (the default: the fix is in) and that value.
// While any is on, VM_WARNs are recorded (Kernel::vm_warn_records), as under
// `cow.policy rfc`: a revert is expected to break invariants.
#define MMLAB_REVERTS(X)                                                                                            \
  X(kGupFastWpSeq, "revert.gup-fast-wp-seq", "on", "57efa1fe5957",                                                   \
    "mm/gup: prevent gup_fast from racing with COW during fork",                                                     \
    "gup_fast ignores mm->write_protect_seq, so a pin may land between fork's anon-rmap dup and its wrprotect")      \
  X(kGupFastPmdRecheck, "revert.gup-fast-pmd-recheck", "on", "70cbc3cc78a9",                                         \
    "mm: gup: fix the fast GUP race against THP collapse",                                                          \
    "gup_fast_pte_range re-checks the PTE only, not the PMD it was read through")                                    \
  X(kCollapseSync, "revert.collapse-sync", "on", "2ba99c5e0881",                                                     \
    "mm/khugepaged: fix GUP-fast interaction by sending IPI",                                                        \
    "collapse_huge_page does not wait for lockless walkers after pmdp_collapse_flush (a flush that sends no IPI)")  \
  X(kGupFastFolioRecheck, "revert.gup-fast-folio-recheck", "on", "c24d37322548",                                     \
    "mm/gup: fix try_grab_compound_head() race with split_huge_page()",                                              \
    "try_grab_folio_fast does not re-check page_folio() after taking the reference")                                \
  X(kGupForceDropWrite, "revert.gup-force", "drop-write", "19be0eaffa3a",                                           \
    "mm: remove gup_flags FOLL_WRITE games from __get_user_pages()",                                                 \
    "after a write fault in a VMA without VM_WRITE, __get_user_pages retries the page without FOLL_WRITE (Dirty COW)") \
  X(kHugetlbZapVmaLock, "revert.hugetlb-zap-vma-lock", "on", "d3c00a0",                                              \
    "hugetlb: model the hugetlb VMA lock of private owners (the model's own fix)",                                   \
    "the hugetlb zap runs without the hugetlb VMA lock for write between the unmap and the reservation restore")    \
  X(kMprotectMigrationEntry, "revert.mprotect-migration-entry", "on", "ef1e3dd",                                     \
    "mprotect: downgrade writable migration entries, as change_pte_range does (the model's own fix)",               \
    "change_pte_range leaves writable migration entries writable")

#define MMLAB_REVERT_ENUM(e, key, value, commit, subject, restores) e,
enum class Revert : uint8_t { MMLAB_REVERTS(MMLAB_REVERT_ENUM) kCount };
#undef MMLAB_REVERT_ENUM

struct RevertInfo {
  const char* key;
  const char* value;  // the `tune` value that turns it on
  const char* commit;
  const char* subject;
  const char* restores;
};
const RevertInfo& revert_info(Revert r);

struct Settings {
  Settings();

  // transparent_hugepage/
  std::atomic<ThpEnabled> thp_enabled{ThpEnabled::kMadvise};
  // hugepages-<N>kB/enabled as the kernel's three bitmaps over anon orders.
  std::atomic<uint64_t> huge_anon_orders_always{0};
  std::atomic<uint64_t> huge_anon_orders_inherit{1ull << 9};  // PMD order inherits
  std::atomic<uint64_t> huge_anon_orders_madvise{0};
  std::atomic<bool> use_zero_page{true};
  // shmem_enabled: shmem_huge, and the huge= of the internal mount behind
  // memfd and shared anonymous memory (shm_mnt), which a store of
  // deny or force leaves as it was.
  std::atomic<ShmemHuge> shmem_huge{ShmemHuge::kNever};
  std::atomic<ShmemHuge> shm_mnt_huge{ShmemHuge::kNever};
  // hugepages-<N>kB/shmem_enabled as the kernel's four bitmaps over the
  // page-cache orders (1..PMD_ORDER); they govern shared anonymous memory.
  std::atomic<uint64_t> huge_shmem_orders_always{0};
  std::atomic<uint64_t> huge_shmem_orders_inherit{1ull << 9};  // PMD order inherits
  std::atomic<uint64_t> huge_shmem_orders_within_size{0};
  std::atomic<uint64_t> huge_shmem_orders_madvise{0};
  // shrink_underused: queue fully mapped PMD THPs for the underused-THP
  // shrinker (split_underused_thp).
  std::atomic<bool> shrink_underused{true};
  std::atomic<ThpDefrag> thp_defrag{ThpDefrag::kMadvise};
  // transparent_hugepage/khugepaged/ (mm/khugepaged.c's defaults)
  std::atomic<int> max_ptes_none{511};
  std::atomic<int> max_ptes_swap{64};
  std::atomic<int> max_ptes_shared{256};
  std::atomic<int> pages_to_scan{4096};
  std::atomic<bool> khugepaged_defrag{true};  // khugepaged/defrag: GFP_TRANSHUGE rather than _LIGHT
  std::atomic<unsigned> scan_sleep_millisecs{10000};
  std::atomic<unsigned> alloc_sleep_millisecs{60000};
  // hugepages/hugepages-<N>kB/nr_hugepages (the pools themselves live in the hugetlb code)
  std::atomic<long> nr_hugepages_2m{0};
  std::atomic<long> nr_hugepages_1g{0};

  // tune keys; the variants' defaults (the v6.18 behaviour) are set by
  // Settings() where their values are known.
  std::atomic<GupWalk> gup_walk;
  std::atomic<GupFast> gup_fast;
  std::atomic<CowPolicy> cow_policy;
  std::atomic<unsigned> cow_max_order{kCowMaxOrderLimit};
  std::atomic<CowReuse> cow_reuse;
  std::atomic<ZeroPage> zero_page;
  // khugepaged.mthp: "khugepaged: add mTHP collapse support" v18 (docs/VARIANTS.md).
  std::atomic<bool> khugepaged_mthp{false};
  // CONFIG_READ_ONLY_THP_FOR_FS: khugepaged and MADV_COLLAPSE may collapse
  // the page cache of a regular file nobody has open for write
  // (file_thp_enabled). Off, as on this project's machines.
  std::atomic<bool> read_only_thp_for_fs{false};
  std::atomic<bool> read_ahead_off{false};  // tune mm.read_ahead_kb 0
  // tlb.geometry (docs/TLB.md); a write rebuilds the Kernel's TLB model.
  std::atomic<TlbGeometry> tlb_geometry{TlbGeometry::kOff};
  TlbState* tlb = nullptr;  // the Kernel's, set when it is made
  // The revert switches on, one bit per Revert.
  std::atomic<uint32_t> reverts{0};
  bool reverted(Revert r) const {
    return reverts.load(std::memory_order_relaxed) & (1u << static_cast<unsigned>(r));
  }

  ThpOrderMode order_mode(unsigned order) const;
  void set_order_mode(unsigned order, ThpOrderMode m);
  ShmemOrderMode shmem_order_mode(unsigned order) const;
  void set_shmem_order_mode(unsigned order, ShmemOrderMode m);
};

// Orders that anonymous THP supports (THP_ORDERS_ALL_ANON): 2..PMD_ORDER.
inline constexpr uint64_t THP_ORDERS_ALL_ANON = ((1ull << (PMD_ORDER + 1)) - 1) & ~3ull;
inline constexpr uint64_t BIT(unsigned n) { return 1ull << n; }
// Orders the page cache of shmem supports (THP_ORDERS_ALL_FILE_DEFAULT): 1..PMD_ORDER.
inline constexpr uint64_t THP_ORDERS_ALL_FILE_DEFAULT = ((1ull << (PMD_ORDER + 1)) - 1) & ~1ull;

// The sysfs/tune interface, by path as on a real system. Errors are
// -EINVAL (bad value) or -ENOENT (no such path).
[[nodiscard]] int settings_write(Settings& s, const std::string& path, const std::string& value);
[[nodiscard]] int settings_read(const Settings& s, const std::string& path, std::string* out);
[[nodiscard]] int tune_write(Settings& s, const std::string& key, const std::string& value);
[[nodiscard]] int tune_read(const Settings& s, const std::string& key, std::string* out);
// Every settable path and its allowed values, for help texts and parsers.
std::vector<std::string> settings_paths();
std::vector<std::string> tune_keys();

}  // namespace mmlab
