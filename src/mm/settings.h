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

// The model's variants: the values of each `tune` key, registered here and
// nowhere else, in order (the enum's order, and the order the parser's
// messages, `mmlab variants`, the bench's tables and plots list them), each
// with its meaning. A value is added by one line here plus its behaviour;
// settings.cpp's table of keys (kTuneKeys) turns each list into the key's
// parser, printer and help.
//
// gup.walk: which posting of the follow_page_mask() chain runs.
#define MMLAB_GUP_WALK_VALUES(X)                                                                               \
  X(kV65, "v6.5", "before gup-unify-hugetlb-speed-up-thp: hugetlb's own walk, a THP found again per page")     \
  X(kLegacy, "legacy", "v6.18: one follow_page_mask() descent per page")                                       \
  X(kWalk, "walk", "gup-batch-follow-page-mask v5 patches 1-7: one descent and PTE lock per page table")       \
  X(kBatch, "batch", "v5 patch 8: also one folio reference per run of PTEs of one folio")                      \
  X(kBatchRo, "batch-ro", "batch extended to read-only FOLL_PIN runs, cut before the first page to unshare")
// gup.fast: GUP-fast PTE handling.
#define MMLAB_GUP_FAST_VALUES(X)                                                 \
  X(kLegacy, "legacy", "v6.18: one speculative folio reference per PTE")          \
  X(kBatch, "batch", "one speculative reference per run of PTEs of one folio")
// cow.policy: the order of the folio a write-protect fault copies into
// (docs/VARIANTS.md).
#define MMLAB_COW_POLICY_VALUES(X)                                                                       \
  X(kBase, "base", "v6.18: order 0, one 4K page per CoW fault")                                           \
  X(kRfc, "rfc", "\"mm: memory: add mTHP support for wp\" as posted, its flaws included")                 \
  X(kFixed, "fixed", "that posting with its flaws corrected (cow.max_order caps the order)")
// cow.reuse: how much a reusing write fault makes writable.
#define MMLAB_COW_REUSE_VALUES(X)                                 \
  X(kPage, "page", "v6.18: the faulting page")                     \
  X(kWhole, "whole", "the folio's whole read-only run")

// zero_page: whether a read fault of anonymous memory may map the shared
// zero page (mm_forbids_zeropage()).
#define MMLAB_ZERO_PAGE_VALUES(X)                                                                          \
  X(kOn, "on", "upstream: a read fault maps the shared zero page (the huge zero page where use_zero_page allows)") \
  X(kOff, "off", "mm_forbids_zeropage(): read faults allocate, as on kernels booted with a vendor option such as pvm_no_zero_page=1")

#define MMLAB_ENUM_VALUE(e, name, help) e,
enum class GupWalk : uint8_t { MMLAB_GUP_WALK_VALUES(MMLAB_ENUM_VALUE) };
enum class GupFast : uint8_t { MMLAB_GUP_FAST_VALUES(MMLAB_ENUM_VALUE) };
enum class CowPolicy : uint8_t { MMLAB_COW_POLICY_VALUES(MMLAB_ENUM_VALUE) };
enum class CowReuse : uint8_t { MMLAB_COW_REUSE_VALUES(MMLAB_ENUM_VALUE) };
enum class ZeroPage : uint8_t { MMLAB_ZERO_PAGE_VALUES(MMLAB_ENUM_VALUE) };
#undef MMLAB_ENUM_VALUE
// cow.max_order: the largest order `fixed` copies (a model-only sweep axis,
// never proposed as ABI); the PMD order is never a CoW order.
inline constexpr unsigned kCowMaxOrderLimit = 8;
// transparent_hugepage/defrag.
enum class ThpDefrag : uint8_t { kAlways, kDefer, kDeferMadvise, kMadvise, kNever };

struct Settings {
  Settings();

  // transparent_hugepage/
  std::atomic<ThpEnabled> thp_enabled{ThpEnabled::kMadvise};
  // hugepages-<N>kB/enabled as the kernel's three bitmaps over anon orders.
  std::atomic<uint64_t> huge_anon_orders_always{0};
  std::atomic<uint64_t> huge_anon_orders_inherit{1ull << 9};  // PMD order inherits
  std::atomic<uint64_t> huge_anon_orders_madvise{0};
  std::atomic<bool> use_zero_page{true};
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

  // tune keys
  std::atomic<GupWalk> gup_walk{GupWalk::kLegacy};
  std::atomic<GupFast> gup_fast{GupFast::kLegacy};
  std::atomic<CowPolicy> cow_policy{CowPolicy::kBase};
  std::atomic<unsigned> cow_max_order{kCowMaxOrderLimit};
  std::atomic<CowReuse> cow_reuse{CowReuse::kPage};
  std::atomic<ZeroPage> zero_page{ZeroPage::kOn};
  // khugepaged.mthp: "khugepaged: add mTHP collapse support" v18 (docs/VARIANTS.md).
  std::atomic<bool> khugepaged_mthp{false};
  // tlb.geometry (docs/TLB.md); a write rebuilds the Kernel's TLB model.
  std::atomic<TlbGeometry> tlb_geometry{TlbGeometry::kOff};
  TlbState* tlb = nullptr;  // the Kernel's, set when it is made

  ThpOrderMode order_mode(unsigned order) const;
  void set_order_mode(unsigned order, ThpOrderMode m);
};

// Orders that anonymous THP supports (THP_ORDERS_ALL_ANON): 2..PMD_ORDER.
inline constexpr uint64_t THP_ORDERS_ALL_ANON = ((1ull << (PMD_ORDER + 1)) - 1) & ~3ull;
inline constexpr uint64_t BIT(unsigned n) { return 1ull << n; }

// The sysfs/tune interface, by path as on a real system. Errors are
// -EINVAL (bad value) or -ENOENT (no such path).
[[nodiscard]] int settings_write(Settings& s, const std::string& path, const std::string& value);
[[nodiscard]] int settings_read(const Settings& s, const std::string& path, std::string* out);
[[nodiscard]] int tune_write(Settings& s, const std::string& key, const std::string& value);
[[nodiscard]] int tune_read(const Settings& s, const std::string& key, std::string* out);
// Every settable path and its allowed values, for help texts and parsers.
std::vector<std::string> settings_paths();
std::vector<std::string> tune_keys();

const char* gup_walk_name(GupWalk w);
const char* gup_fast_name(GupFast f);
const char* cow_policy_name(CowPolicy p);

}  // namespace mmlab
