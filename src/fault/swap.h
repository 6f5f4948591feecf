// Swap (mm/swapfile.c, mm/swap_state.c, mm/vmscan.c's pageout path, and
// do_swap_page of mm/memory.c): an in-memory swap device, the swap cache,
// swap-in faults, and the deferred-split shrinker that splits folios.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "phys/page.h"

namespace mmlab {

// State of the swap devices of one Kernel (filled in by the swap layer).
struct SwapState {
  std::mutex lock;
};

}  // namespace mmlab
