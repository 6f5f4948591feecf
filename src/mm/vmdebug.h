// include/linux/mmdebug.h: cheap checks that run in debug builds
// (MMLAB_DEBUG_VM) and compile to nothing otherwise.
//
//   VM_BUG_ON / VM_BUG_ON_FOLIO     the state is corrupt: dump the folio as
//                                   dump_page() does and abort.
//   VM_WARN_ON_FOLIO /              the kernel warns and goes on: print the
//   VM_WARN_ON_ONCE_FOLIO /         report, count it in vm_warn_count() and
//   VM_WARN_ON_ONCE_MM              in the System's `debug.vm_warn` counter
//                                   (the folio's or the mm's System), and
//                                   continue. The unit tests fail on any.
//                                   The _ONCE forms report a site the first
//                                   time it fires in each System, as the
//                                   kernel does once per boot: a process
//                                   that runs many Systems (mmlab run, the
//                                   unit tests) sees every System's first.
//
// There is no VM_WARN_ON without a folio or an mm: a warning must be
// counted in the System it happened in.
//
// Under `cow.policy rfc` every folio check (either kind) is instead recorded
// in the folio's System as a violation (not counted as a warning) and the
// model goes on, as a kernel with panic_on_warn=0 does: the posting's flaws
// must be reported, not crash the model (the scenario runner fails the test
// with them).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "phys/page.h"

namespace mmlab {

struct Mm;

std::string dump_folio(const Folio* f);  // dump_page()-style text
// The VM_BUG_ON* report: aborts, or returns after recording the finding (see above).
void vm_bug(const char* cond, const char* msg, const Folio* f, const char* file, int line);
// The VM_WARN_ON* report: counts, prints and returns.
void vm_warn(const char* cond, const char* msg, const Folio* f, const char* file, int line);
// The _ONCE forms: `site` is the call site's own static object; the report is
// made only if the System (the folio's, else mm's) has not had it yet.
void vm_warn_once(const void* site, const char* cond, const char* msg, const Folio* f, const Mm* mm,
                  const char* file, int line);
// VM_WARN_ON* reports of this process so far, every System's.
uint64_t vm_warn_count();

}  // namespace mmlab

#if defined(MMLAB_DEBUG_VM)
#define MMLAB_VM_CHECK(fn, cond, folio, msg)                                     \
  do {                                                                           \
    if (__builtin_expect(!!(cond), 0)) ::mmlab::fn(#cond, msg, folio, __FILE__, __LINE__); \
  } while (0)
#define MMLAB_VM_CHECK_ONCE(cond, folio, mm, msg)                                \
  do {                                                                           \
    static const char vm_warn_site_ = 0;                                         \
    if (__builtin_expect(!!(cond), 0))                                           \
      ::mmlab::vm_warn_once(&vm_warn_site_, #cond, msg, folio, mm, __FILE__, __LINE__); \
  } while (0)
#else
#define MMLAB_VM_CHECK(fn, cond, folio, msg) \
  do {                                       \
    (void)sizeof(!!(cond));                  \
    (void)sizeof(folio);                     \
  } while (0)
#define MMLAB_VM_CHECK_ONCE(cond, folio, mm, msg) \
  do {                                            \
    (void)sizeof(!!(cond));                       \
    (void)sizeof(folio);                          \
    (void)sizeof(mm);                             \
  } while (0)
#endif

#define VM_BUG_ON(cond, msg) MMLAB_VM_CHECK(vm_bug, cond, static_cast<const ::mmlab::Folio*>(nullptr), msg)
#define VM_BUG_ON_FOLIO(cond, folio, msg) MMLAB_VM_CHECK(vm_bug, cond, folio, msg)
#define VM_WARN_ON_FOLIO(cond, folio, msg) MMLAB_VM_CHECK(vm_warn, cond, folio, msg)
#define VM_WARN_ON_ONCE_FOLIO(cond, folio, msg) \
  MMLAB_VM_CHECK_ONCE(cond, folio, static_cast<const ::mmlab::Mm*>(nullptr), msg)
#define VM_WARN_ON_ONCE_MM(cond, mm, msg) \
  MMLAB_VM_CHECK_ONCE(cond, static_cast<const ::mmlab::Folio*>(nullptr), mm, msg)
