// mm/mlock.c: mlock(2), mlock2(2), munlock(2), mlockall(2), munlockall(2).
// Defined in mm/mlock.cpp. Each returns 0 or -errno, as the system call.
//
// The model runs as root: CAP_IPC_LOCK lifts RLIMIT_MEMLOCK (can_do_mlock,
// the lock_limit checks of do_mlock and mlockall), so no call fails for it.
// What locking changes is the VMAs' VM_LOCKED/VM_LOCKONFAULT, which reclaim
// (try_to_unmap), MADV_COLD/PAGEOUT (can_madv_lru_vma) and MADV_DONTNEED
// already honour; the folios' PG_mlocked and the unevictable LRU
// (mlock_folio, munlock_folio) are not modelled.
#pragma once

#include <cstdint>

#include "mm/mm.h"

namespace mmlab {

// mlock2(start, len, flags): flags 0 or MLOCK_ONFAULT (-EINVAL otherwise).
// mlock(start, len) is mlock2 with flags 0.
[[nodiscard]] int do_mlock2(Mm* mm, uint64_t start, uint64_t len, int flags);
[[nodiscard]] int do_munlock(Mm* mm, uint64_t start, uint64_t len);
// mlockall(MCL_CURRENT|MCL_FUTURE|MCL_ONFAULT); munlockall().
[[nodiscard]] int do_mlockall(Mm* mm, int flags);
[[nodiscard]] int do_munlockall(Mm* mm);

// /proc/PID/status VmLck: the pages of the VM_LOCKED VMAs (mm->locked_vm,
// which the kernel keeps as a running count), in bytes.
uint64_t mm_locked_bytes(Mm* mm);

}  // namespace mmlab
