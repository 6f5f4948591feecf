// VM_WARN_ON / VM_BUG_ON_FOLIO (include/linux/mmdebug.h): cheap checks that
// run in debug builds (MMLAB_DEBUG_VM) and compile to nothing otherwise. A
// failure dumps the folio as dump_page() does and aborts, except that under
// `cow.policy rfc` a VM_WARN_ON_FOLIO is recorded in the folio's System as a
// violation and the model goes on, as a kernel with panic_on_warn=0 does:
// the posting's flaws must be reported, not crash the model.
#pragma once

#include <string>

#include "phys/page.h"

namespace mmlab {

std::string dump_folio(const Folio* f);  // dump_page()-style text
// Aborts, or returns after recording the finding (see above).
void vm_bug(const char* cond, const char* msg, const Folio* f, const char* file, int line);

}  // namespace mmlab

#if defined(MMLAB_DEBUG_VM)
#define VM_WARN_ON_FOLIO(cond, folio, msg)                                            \
  do {                                                                                \
    if (__builtin_expect(!!(cond), 0)) ::mmlab::vm_bug(#cond, msg, folio, __FILE__, __LINE__); \
  } while (0)
#define VM_WARN_ON(cond, msg)                                                         \
  do {                                                                                \
    if (__builtin_expect(!!(cond), 0)) ::mmlab::vm_bug(#cond, msg, nullptr, __FILE__, __LINE__); \
  } while (0)
#else
#define VM_WARN_ON_FOLIO(cond, folio, msg) \
  do {                                     \
    (void)sizeof(!!(cond));                \
    (void)(folio);                         \
  } while (0)
#define VM_WARN_ON(cond, msg) \
  do {                        \
    (void)sizeof(!!(cond));   \
  } while (0)
#endif
