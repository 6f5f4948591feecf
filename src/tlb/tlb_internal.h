// The TLB files' shared helpers (tlb.cpp defines them).
#pragma once

#include "tlb/tlb.h"

namespace mmlab {

// INVLPG of one address: every entry of the ASID slot covering addr.
void tlb_invalidate_addr(TlbCpu& c, int asid, uint64_t addr) REQUIRES(c.lock);
// Every entry of the ASID slot (a CR3 write with the flush bit).
void tlb_invalidate_asid(TlbCpu& c, int asid) REQUIRES(c.lock);
// cpu_tlbstate_shared.is_lazy: entered lazy mode, or its thread exited
// since it loaded the mm (the CPU went idle, and idle is lazy).
inline bool tlb_cpu_lazy(const TlbCpu& c, int cpu) REQUIRES(c.lock) {
  return c.is_lazy || (c.loaded_ctx && c.occupant != cpu_release_count(cpu));
}

}  // namespace mmlab
