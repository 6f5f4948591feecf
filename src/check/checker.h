// The whole-system invariant checker: the
// expensive audit behind System::check(), which every test runs at its end.
//
// It re-derives from the page tables of every live process what the folio
// metadata must say (mapcounts, MM-ID slots, refcounts, AnonExclusive, rss,
// page-table accounting, the deferred split queue) and, from the allocator's
// free lists, that every frame of RAM is accounted for. Each finding is a
// Violation named after the kernel's VM_WARN_ON_FOLIO site it stands for.
//
// Precondition: the system is quiescent — no system call, fault, GUP or
// reclaim in flight on any thread. The checker takes no mmap_lock or PTL (it
// would have to hold every mm's at once); it reads page tables and struct
// pages with the atomic accessors, so running it concurrently is a data-race-
// free misuse that reports transient states, never undefined behaviour.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mm/kernel.h"
#include "mm/mm.h"
#include "mmlab/check.h"
#include "phys/page.h"

namespace mmlab {

// References to a folio that no page table shows: the references (for a
// folio without a pincount, GUP_PIN_COUNTING_BIAS per pin) held by GUP
// handles, caches and the like. A layer that holds such references supplies
// this so the refcount check can demand equality and the leak check knows
// who holds an unmapped folio. Returns 0 for folios it knows nothing about.
using CheckerExtraRefs = std::function<long(const Folio*)>;

// A live address space to audit, and the process it is reported under.
struct CheckedMm {
  Mm* mm = nullptr;
  std::string name;
  int pid = 0;
};

// Audit the whole Kernel, whose live address spaces are mms (the process
// layer's System::check() names them), counting extra_refs(folio) as held
// references (may be empty).
CheckReport check_kernel(Kernel* k, const std::vector<CheckedMm>& mms, const CheckerExtraRefs& extra_refs);

}  // namespace mmlab
