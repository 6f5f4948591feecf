// The process layer's internal entry points (the CPU model).
#pragma once

#include "check/checker.h"
#include "mm/mm.h"
#include "mmlab/system.h"
#include "mmlab/types.h"

namespace mmlab {

AccessResult user_read(Mm* mm, uint64_t addr, void* buf, uint64_t len);
AccessResult user_write(Mm* mm, uint64_t addr, const void* buf, uint64_t len);
// The same store made by the kernel on the task's behalf (process_vm_readv's
// copy into the reader's buffer).
AccessResult copy_to_user(Mm* mm, uint64_t addr, const void* buf, uint64_t len);
AccessResult user_fill(Mm* mm, uint64_t addr, uint8_t byte, uint64_t len);
AccessResult user_read_expect(Mm* mm, uint64_t addr, uint8_t byte, uint64_t len, int64_t* first_mismatch,
                              uint8_t* found);

// /proc views (process/proc_views.cpp).
std::string proc_smaps(Mm* mm);
std::string proc_status_rss(Mm* mm);
// The sum of the smaps Pss lines, bytes; safe beside running faults.
uint64_t proc_pss(Mm* mm);
// The page-table and folio views (process/ptdump.cpp): the leaf entries of
// [start, end) (caller holds mmap_lock or the process is quiescent), the
// page at addr and its folio (each takes mmap_lock for read), and the
// entries as text.
std::vector<PteDumpEntry> ptdump_entries(Mm* mm, uint64_t start, uint64_t end);
PageInfo page_info_at(Mm* mm, uint64_t addr);
std::vector<std::pair<PteDumpEntry, PageInfo>> leaf_infos_of(Mm* mm);
std::string folio_dump_at(Mm* mm, uint64_t addr);
std::string ptdump_text(Mm* mm, uint64_t start, uint64_t end);
// clear_refs_write(CLEAR_REFS_SOFT_DIRTY), mmap_lock not held on entry.
void clear_refs_soft_dirty(Mm* mm);

// The invariant checker over sys's Kernel and the address spaces of its
// live processes (System::check, check_with_refs; tests that hold
// references the checker cannot see pass extra_refs).
CheckReport check_system(const System& sys, const CheckerExtraRefs& extra_refs);

}  // namespace mmlab
