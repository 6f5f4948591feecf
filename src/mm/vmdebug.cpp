// dump_page() and the VM_BUG_ON / VM_WARN_ON reports.
#include "mm/vmdebug.h"

#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>

#include "fmt/format.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "phys/phys.h"

namespace mmlab {

std::string dump_folio(const Folio* f) {
  if (!f) return "(no folio)";
  const Page* head = &f->page;
  PhysMem* phys = PhysMem::of(head);
  std::string s = fmt::format("page: refcount:{} mapcount:{} mapping:{:#x} index:{:#x} pfn:{:#x}\n",
                              folio_ref_count(f), folio_mapcount(f), head->mapping, head->index,
                              phys->page_to_pfn(head));
  if (folio_test_large(f)) {
    s += fmt::format("head: order:{} large_mapcount:{} entire_mapcount:{} nr_pages_mapped:{} pincount:{} maybe_shared:{}\n",
                     folio_order(f), folio_large_mapcount(f), folio_entire_mapcount(f),
                     folio_page(f, 1)->f1.nr_pages_mapped, folio_pincount(f), folio_maybe_mapped_shared(f) ? 1 : 0);
  }
  static const char* names[] = {"locked", "referenced", "uptodate", "dirty", "lru", "head", "active",
                                "workingset", "swapbacked", "swapcache", "reserved", "unevictable", "mlocked",
                                "idle", "anon", "anon_exclusive", "large_rmappable", "partially_mapped",
                                "maybe_shared", "hugetlb", "buddy", "table", "pcp", "deferred_list",
                                "dropbehind", "huge_zero", "mapcount_lock"};
  std::string fl;
  for (unsigned b = 0; b < sizeof(names) / sizeof(names[0]); b++)
    if (head->flags & (1ull << b)) fl += (fl.empty() ? "" : "|") + std::string(names[b]);
  s += fmt::format("flags: {:#x}({})", head->flags & ~PG_ORDER_MASK, fl);
  if (folio_test_anon(f)) {
    long excl = 0;
    for (long i = 0; i < folio_nr_pages(f); i++) excl += PageAnonExclusive(folio_page(f, i));
    s += fmt::format(" anon_exclusive_pages:{}/{}", excl, folio_nr_pages(f));
  }
  return s;
}

namespace {
std::atomic<uint64_t> g_vm_warn_count{0};

// Under `cow.policy rfc`: record the finding in the folio's System (true), or not.
bool vm_record(const char* what, const char* cond, const char* msg, const Folio* f, const char* file, int line) {
  Kernel* k = f ? kernel_of(&f->page) : nullptr;
  if (!k || !k->vm_warn_records()) return false;
  k->vm_warn(fmt::format("{}({}) at {}:{}: {}\n{}", what, cond, file, line, msg, dump_folio(f)));
  return true;
}
}  // namespace

void vm_bug(const char* cond, const char* msg, const Folio* f, const char* file, int line) {
  const char* what = f ? "VM_BUG_ON_FOLIO" : "VM_BUG_ON";
  if (vm_record(what, cond, msg, f, file, line)) return;
  std::fprintf(stderr, "%s(%s) at %s:%d: %s\n%s\n", what, cond, file, line, msg, dump_folio(f).c_str());
  std::abort();
}

namespace {
void report_warn(Kernel* k, const char* what, const char* cond, const char* msg, const Folio* f, const char* file,
                 int line) {
  g_vm_warn_count.fetch_add(1, std::memory_order_relaxed);
  if (k) k->stats->count(Event::vm_warn);
  std::fprintf(stderr, "WARNING: %s(%s) at %s:%d: %s\n%s\n", what, cond, file, line, msg,
               f ? dump_folio(f).c_str() : "");
}
}  // namespace

void vm_warn(const char* cond, const char* msg, const Folio* f, const char* file, int line) {
  if (vm_record("VM_WARN_ON_FOLIO", cond, msg, f, file, line)) return;  // a violation, reported as such
  report_warn(f ? kernel_of(&f->page) : nullptr, "VM_WARN_ON_FOLIO", cond, msg, f, file, line);
}

void vm_warn_once(const void* site, const char* cond, const char* msg, const Folio* f, const Mm* mm,
                  const char* file, int line) {
  Kernel* k = f ? kernel_of(&f->page) : mm ? mm->kernel : nullptr;
  assert(k && "a VM_WARN_ON_ONCE* site names its folio or mm");
  if (!k->vm_warn_once_first(site)) return;
  const char* what = f ? "VM_WARN_ON_ONCE_FOLIO" : "VM_WARN_ON_ONCE_MM";
  if (vm_record(what, cond, msg, f, file, line)) return;
  report_warn(k, what, cond, msg, f, file, line);
}

uint64_t vm_warn_count() { return g_vm_warn_count.load(std::memory_order_relaxed); }

}  // namespace mmlab
