// The VM_BUG_ON / VM_WARN_ON reports (base/mmdebug.h).
#include "base/mmdebug.h"

#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>

#include "fmt/format.h"

namespace mmlab {

namespace {

std::atomic<const VmDebugReporter*> g_reporter{nullptr};
std::atomic<uint64_t> g_vm_warn_count{0};

const VmDebugReporter* reporter() { return g_reporter.load(std::memory_order_acquire); }

void* system_of(VmDebugRef ref) {
  const VmDebugReporter* r = reporter();
  return r && ref.obj ? r->system_of(ref) : nullptr;
}

std::string describe(VmDebugRef ref) {
  if (!ref.obj) return ref.kind == VmDebugObj::kNone ? "" : "(null)";
  if (const VmDebugReporter* r = reporter()) return r->describe(ref);
  return fmt::format("object {}", ref.obj);
}

std::string report_text(const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file,
                        int line) {
  return fmt::format("{}({}) at {}:{}: {}\n{}", what, cond, file, line, msg, describe(ref));
}

// Under `cow.policy rfc`: the finding recorded in the object's System (true), or not.
bool record(void* sys, const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file,
            int line) {
  const VmDebugReporter* r = reporter();
  return sys && r && r->record(sys, report_text(what, cond, msg, ref, file, line));
}

void report_warn(void* sys, const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file,
                 int line) {
  g_vm_warn_count.fetch_add(1, std::memory_order_relaxed);
  if (const VmDebugReporter* r = reporter(); sys && r) r->count_warn(sys);
  std::fprintf(stderr, "WARNING: %s\n", report_text(what, cond, msg, ref, file, line).c_str());
}

}  // namespace

void vm_debug_set_reporter(const VmDebugReporter* r) { g_reporter.store(r, std::memory_order_release); }

void vm_bug(const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file, int line) {
  if (record(system_of(ref), what, cond, msg, ref, file, line)) return;
  std::fprintf(stderr, "%s\n", report_text(what, cond, msg, ref, file, line).c_str());
  std::abort();
}

void vm_warn(const char* what, const char* cond, const char* msg, VmDebugRef ref, const char* file, int line) {
  void* sys = system_of(ref);
  if (record(sys, what, cond, msg, ref, file, line)) return;  // a violation, reported as such
  report_warn(sys, what, cond, msg, ref, file, line);
}

void vm_warn_once(const void* site, const char* what, const char* cond, const char* msg, VmDebugRef ref,
                  const char* file, int line) {
  assert(ref.obj && "a VM_WARN_ON_ONCE* site names its object");
  void* sys = system_of(ref);
  // Without a System to remember it in, every firing is reported.
  if (const VmDebugReporter* r = reporter(); sys && r && !r->once_first(sys, site)) return;
  if (record(sys, what, cond, msg, ref, file, line)) return;
  report_warn(sys, what, cond, msg, ref, file, line);
}

uint64_t vm_warn_count() { return g_vm_warn_count.load(std::memory_order_relaxed); }

}  // namespace mmlab
