// mm/debug.c: dump_page()'s text for pages, folios and mms, and the reporter
// through which the VM_* checks of base/mmdebug.h, in every layer, describe
// them and find their System (its Kernel): counting a warning there, keeping
// a _ONCE site's first firing per System, and, under `cow.policy rfc`,
// recording a finding instead of aborting or warning.
#pragma once

#include <string>

#include "base/mmdebug.h"
#include "phys/page.h"

namespace mmlab {

std::string dump_folio(const Folio* f);  // dump_page()-style text
// A page's own fields; a page-table page's level and owner (debug builds).
std::string dump_page(const Page* p);
// Installs the reporter for the whole process; every Kernel's constructor
// calls it, so the first System made installs it.
void vm_debug_init();

}  // namespace mmlab
