// The reclaim of mm/vmscan.c that MADV_PAGEOUT drives (reclaim_pages,
// declared in the kernel's mm/internal.h). Defined in mm/vmscan.cpp; the
// madvise walk that isolates the folios is in mm/madvise.cpp.
#pragma once

#include <vector>

#include "phys/page.h"

namespace mmlab {

struct Kernel;

// reclaim_pages: shrink_folio_list over folios the caller isolated from the
// LRU (each holding an isolation reference): swapped out or, lazy-free,
// discarded, and freed; or put back. A large folio split on the way appends
// its other parts to the list.
void reclaim_pages(Kernel* k, std::vector<Folio*>* folio_list);

}  // namespace mmlab
