// mm/migrate.c's entry points used outside mm/migrate.cpp (the kernel
// declares them in include/linux/migrate.h and swapops.h; remove_migration_ptes
// is with the rmap walk in mm/rmap.h). Defined in mm/migrate.cpp.
#pragma once

#include <cstdint>

#include "pgtable/mm_types.h"

namespace mmlab {

// migration_entry_wait: a fault met a migration entry at address (the PTE
// table under pmd). Waits until the thread that put it there (a folio split
// or a migration) unlocks the folio, without taking the lock; the fault then
// retries. Returns at once if the entry is gone or the folio is frozen.
void migration_entry_wait(Mm* mm, pmd_t* pmd, uint64_t address);

// Migrate an anonymous folio out of ZONE_MOVABLE before a long-term pin
// (migrate_pages with MR_LONGTERM_PIN). The caller holds an isolation
// reference. 0 when moved (or freed meanwhile), -ENOMEM or -EBUSY.
int migrate_longterm_unpinnable_folio(Folio* src);

}  // namespace mmlab
