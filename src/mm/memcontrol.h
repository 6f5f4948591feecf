// The memory-cgroup charge (include/linux/memcontrol.h). The model has no
// memory cgroups: a charge succeeds unless the fault injector's `charge`
// site fails it, which stands in for a cgroup at its limit. Called where the
// kernel charges a new folio of user memory: alloc_anon_folio, the PMD THP
// fault, the write-protect copy, the collapse folio and swap-in.
#pragma once

#include <cerrno>

#include "phys/fault_inject.h"
#include "phys/phys.h"

namespace mmlab {

// 0, or -ENOMEM when the charge fails. The caller puts the folio.
inline int mem_cgroup_charge(Folio* folio, PhysMem* phys) {
  return phys->should_fail(FaultSite::charge, folio_order(folio)) ? -ENOMEM : 0;
}

}  // namespace mmlab
