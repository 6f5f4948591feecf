// The values of each variant `tune` key, registered here and nowhere else.
// Included only where a value is acted on or named (settings.cpp's parsers,
// the GUP and fault paths), so adding a value rebuilds those files alone.
#pragma once

#include <cstdint>

#include "mm/settings.h"

namespace mmlab {

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

const char* gup_walk_name(GupWalk w);
const char* gup_fast_name(GupFast f);
const char* cow_policy_name(CowPolicy p);

}  // namespace mmlab
