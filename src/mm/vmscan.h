// The madvise-driven reclaim of mm/vmscan.c and mm/madvise.c (MADV_COLD,
// MADV_PAGEOUT). Defined in mm/vmscan.cpp.
#pragma once

#include <cstdint>

#include "pgtable/mm_types.h"

namespace mmlab {

// MADV_COLD (madvise_cold: deactivate) or MADV_PAGEOUT (madvise_pageout:
// reclaim to swap, discard lazy-free folios) of [start, end) in vma, which
// passed can_madv_lru_vma(). Large folios the range covers only in part are
// split first; folios another process may map are left alone.
enum class ColdOrPageout : uint8_t { kCold, kPageout };

void madvise_cold_or_pageout_range(Vma* vma, uint64_t start, uint64_t end, ColdOrPageout what);

}  // namespace mmlab
