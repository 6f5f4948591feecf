// include/linux/mmdebug.h: cheap checks that run in debug builds
// (MMLAB_DEBUG_VM) and compile to nothing otherwise, for every layer from
// phys up.
//
//   VM_BUG_ON / VM_BUG_ON_PAGE /    the state is corrupt: dump the object as
//   VM_BUG_ON_FOLIO / VM_BUG_ON_MM  dump_page() does and abort.
//   VM_WARN_ON_FOLIO /              the kernel warns and goes on: print the
//   VM_WARN_ON_ONCE_PAGE /          report, count it in vm_warn_count() and
//   VM_WARN_ON_ONCE_FOLIO /         in the System's `debug.vm_warn` counter
//   VM_WARN_ON_ONCE_MM              (the object's System), and continue. The
//                                   unit tests fail on any. The _ONCE forms
//                                   report a site the first time it fires in
//                                   each System, as the kernel does once per
//                                   boot: a process that runs many Systems
//                                   (mmlab run, the unit tests) sees every
//                                   System's first.
//
// There is no VM_WARN_ON without an object: a warning must be counted in the
// System it happened in.
//
// The objects' types live in higher layers, so this header names them
// without their definitions, as the kernel's mmdebug.h declares struct page
// and mm_struct. What a report prints about an object and which System it
// belongs to are told by a VmDebugReporter that mm/ installs (mm/debug.cpp).
// Under `cow.policy rfc` that reporter records every check on an object of
// its System (either kind) as a violation instead (not counted as a
// warning), and the model goes on, as a kernel with panic_on_warn=0 does: the
// posting's flaws must be reported, not crash the model (the scenario runner
// fails the test with them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sync/sched.h"

namespace mmlab {

#if defined(MMLAB_DEBUG_VM)
inline constexpr bool kDebugVm = true;
#else
inline constexpr bool kDebugVm = false;
#endif

struct Page;   // phys/page.h
struct Folio;  // phys/page.h
struct Mm;     // pgtable/mm_types.h

// What a check names: the object it dumps and whose System it counts in.
enum class VmDebugObj : uint8_t { kNone, kPage, kFolio, kMm };
struct VmDebugRef {
  VmDebugObj kind;
  const void* obj;
};
inline VmDebugRef vm_debug_ref(std::nullptr_t) { return {VmDebugObj::kNone, nullptr}; }
inline VmDebugRef vm_debug_ref(const Page* p) { return {VmDebugObj::kPage, p}; }
inline VmDebugRef vm_debug_ref(const Folio* f) { return {VmDebugObj::kFolio, f}; }
inline VmDebugRef vm_debug_ref(const Mm* mm) { return {VmDebugObj::kMm, mm}; }

// What the layer that knows the objects tells the reports. `sys` is that
// layer's System (its Kernel), opaque here. Each function may be called from
// any thread.
struct VmDebugReporter {
  // dump_page()/dump_mm()-style text about the object; "" if none.
  std::string (*describe)(VmDebugRef ref);
  // The System the object belongs to, or nullptr.
  void* (*system_of)(VmDebugRef ref);
  // Record `report` in sys instead of failing or warning (true), or not.
  bool (*record)(void* sys, const std::string& report);
  // Count one warning in sys.
  void (*count_warn)(void* sys);
  // Whether `site` fires in sys for the first time (and remember it did).
  bool (*once_first)(void* sys, const void* site);
};
// Installs r for every later report (idempotent; r outlives the process).
// Without one, a report names its object by address only, counts in
// vm_warn_count() alone and never records.
void vm_debug_set_reporter(const VmDebugReporter* r);

// The VM_BUG_ON* report: aborts, or returns after recording the finding.
[[gnu::cold]] void vm_bug(const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file,
                          int line);
// The VM_WARN_ON* report: counts, prints and returns (or records).
[[gnu::cold]] void vm_warn(const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file,
                           int line);
// The _ONCE forms: `site` is the call site's own static object; the report is
// made only if the object's System has not had it yet.
[[gnu::cold]] void vm_warn_once(const void* site, const char* what, const char* cond, const char* msg, VmDebugRef ref,
                                const char* file, int line);
// VM_WARN_ON* reports of this process so far, every System's.
uint64_t vm_warn_count();

}  // namespace mmlab

#if defined(MMLAB_DEBUG_VM)
// The condition is evaluated without schedule points (sched::Unscheduled):
// a debug build takes the same steps as a release build, so that a
// schedule found in one replays in the other.
#define MMLAB_VM_CHECK(fn, what, cond, obj, msg)                                                          \
  do {                                                                                                    \
    bool vm_cond_;                                                                                        \
    {                                                                                                     \
      ::mmlab::sched::Unscheduled vm_unscheduled_;                                                        \
      vm_cond_ = !!(cond);                                                                                \
    }                                                                                                     \
    if (__builtin_expect(vm_cond_, 0))                                                                    \
      ::mmlab::fn(what, #cond, msg, ::mmlab::vm_debug_ref(obj), __FILE__, __LINE__);                      \
  } while (0)
#define MMLAB_VM_CHECK_ONCE(what, cond, obj, msg)                                                         \
  do {                                                                                                    \
    static const char vm_warn_site_ = 0;                                                                  \
    bool vm_cond_;                                                                                        \
    {                                                                                                     \
      ::mmlab::sched::Unscheduled vm_unscheduled_;                                                        \
      vm_cond_ = !!(cond);                                                                                \
    }                                                                                                     \
    if (__builtin_expect(vm_cond_, 0))                                                                    \
      ::mmlab::vm_warn_once(&vm_warn_site_, what, #cond, msg, ::mmlab::vm_debug_ref(obj), __FILE__, __LINE__); \
  } while (0)
#else
// The condition and the object are type-checked, never evaluated.
#define MMLAB_VM_CHECK(fn, what, cond, obj, msg) \
  do {                                           \
    (void)sizeof(!!(cond));                      \
    (void)sizeof(::mmlab::vm_debug_ref(obj));    \
  } while (0)
#define MMLAB_VM_CHECK_ONCE(what, cond, obj, msg) MMLAB_VM_CHECK(vm_warn_once, what, cond, obj, msg)
#endif

#define VM_BUG_ON(cond, msg) MMLAB_VM_CHECK(vm_bug, "VM_BUG_ON", cond, nullptr, msg)
#define VM_BUG_ON_PAGE(cond, page, msg) MMLAB_VM_CHECK(vm_bug, "VM_BUG_ON_PAGE", cond, page, msg)
#define VM_BUG_ON_FOLIO(cond, folio, msg) MMLAB_VM_CHECK(vm_bug, "VM_BUG_ON_FOLIO", cond, folio, msg)
#define VM_BUG_ON_MM(cond, mm, msg) MMLAB_VM_CHECK(vm_bug, "VM_BUG_ON_MM", cond, mm, msg)
#define VM_WARN_ON_FOLIO(cond, folio, msg) MMLAB_VM_CHECK(vm_warn, "VM_WARN_ON_FOLIO", cond, folio, msg)
#define VM_WARN_ON_ONCE_PAGE(cond, page, msg) MMLAB_VM_CHECK_ONCE("VM_WARN_ON_ONCE_PAGE", cond, page, msg)
#define VM_WARN_ON_ONCE_FOLIO(cond, folio, msg) MMLAB_VM_CHECK_ONCE("VM_WARN_ON_ONCE_FOLIO", cond, folio, msg)
#define VM_WARN_ON_ONCE_MM(cond, mm, msg) MMLAB_VM_CHECK_ONCE("VM_WARN_ON_ONCE_MM", cond, mm, msg)
