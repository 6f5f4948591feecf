// The TLB files' shared helpers (tlb.cpp defines them).
#pragma once

#include "tlb/tlb.h"

namespace mmlab {

// INVLPG of one address: every entry of the ASID slot covering addr.
void tlb_invalidate_addr(TlbCpu& c, int asid, uint64_t addr) REQUIRES(c.lock);
// Every entry of the ASID slot (a CR3 write with the flush bit).
void tlb_invalidate_asid(TlbCpu& c, int asid) REQUIRES(c.lock);

}  // namespace mmlab
