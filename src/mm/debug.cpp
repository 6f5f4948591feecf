// dump_page() and the reporter of the VM_BUG_ON / VM_WARN_ON checks
// (mm/debug.h, base/mmdebug.h).
#include "mm/debug.h"

#include "fmt/format.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "pgtable/pgtable.h"
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
                     aref(const_cast<Page*>(folio_page(f, 1))->f1.nr_pages_mapped).load(std::memory_order_relaxed), folio_pincount(f), folio_maybe_mapped_shared(f) ? 1 : 0);
  }
  static const char* names[] = {"locked", "referenced", "uptodate", "dirty", "lru", "head", "active",
                                "workingset", "swapbacked", "swapcache", "reserved", "unevictable", "mlocked",
                                "idle", "anon", "anon_exclusive", "large_rmappable", "partially_mapped",
                                "maybe_shared", "hugetlb", "buddy", "table", "pcp", "deferred_list",
                                "dropbehind", "huge_zero", "mapcount_lock"};
  // Other CPUs may change the flags meanwhile: a snapshot, read atomically.
  const uint64_t flags = aref(const_cast<Page*>(head)->flags).load(std::memory_order_relaxed);
  std::string fl;
  for (unsigned b = 0; b < sizeof(names) / sizeof(names[0]); b++)
    if (flags & (1ull << b)) fl += (fl.empty() ? "" : "|") + std::string(names[b]);
  s += fmt::format("flags: {:#x}({})", flags & ~PG_ORDER_MASK, fl);
  if (folio_test_anon(f)) {
    long excl = 0;
    for (long i = 0; i < folio_nr_pages(f); i++) excl += PageAnonExclusive(folio_page(f, i));
    s += fmt::format(" anon_exclusive_pages:{}/{}", excl, folio_nr_pages(f));
  }
  return s;
}

std::string dump_page(const Page* p) {
  const uint64_t pfn = PhysMem::of(p)->page_to_pfn(p);
  if (PageTable(p))
    return fmt::format("table page: pfn:{:#x} level:{} mm:{} refcount:{}", pfn, static_cast<int>(pgtable_level(p)),
                       static_cast<const void*>(pgtable_mm(p)), aref(p->refcount).load(std::memory_order_relaxed));
  return fmt::format("page: pfn:{:#x} flags:{:#x} compound_head:{:#x} refcount:{} mapcount:{} mapping:{:#x}", pfn,
                     aref(p->flags).load(std::memory_order_relaxed) & ~PG_ORDER_MASK,
                     aref(p->compound_head).load(std::memory_order_relaxed),
                     aref(p->refcount).load(std::memory_order_relaxed), aref(p->mapcount).load(std::memory_order_relaxed),
                     aref(p->mapping).load(std::memory_order_relaxed));
}

namespace {

std::string describe(VmDebugRef ref) {
  switch (ref.kind) {
    case VmDebugObj::kFolio:
      return dump_folio(static_cast<const Folio*>(ref.obj));
    case VmDebugObj::kPage:
      return dump_page(static_cast<const Page*>(ref.obj));
    case VmDebugObj::kMm:
      return fmt::format("mm: id:{}", static_cast<const Mm*>(ref.obj)->mm_id);
    case VmDebugObj::kNone:
      break;
  }
  return "";
}

void* system_of(VmDebugRef ref) {
  switch (ref.kind) {
    case VmDebugObj::kFolio:
      return kernel_of(&static_cast<const Folio*>(ref.obj)->page);
    case VmDebugObj::kPage:
      return kernel_of(static_cast<const Page*>(ref.obj));
    case VmDebugObj::kMm:
      return static_cast<const Mm*>(ref.obj)->kernel;
    case VmDebugObj::kNone:
      break;
  }
  return nullptr;
}

bool record(void* sys, const std::string& report) {
  Kernel* k = static_cast<Kernel*>(sys);
  if (!k->vm_warn_records()) return false;
  k->vm_warn(report);
  return true;
}

void count_warn(void* sys) { static_cast<Kernel*>(sys)->stats->count(Event::vm_warn); }

bool once_first(void* sys, const void* site) { return static_cast<Kernel*>(sys)->vm_warn_once_first(site); }

const VmDebugReporter kReporter = {describe, system_of, record, count_warn, once_first};

}  // namespace

void vm_debug_init() { vm_debug_set_reporter(&kReporter); }

}  // namespace mmlab
