// dump_page() and the VM_BUG_ON report.
#include "mm/vmdebug.h"

#include <cstdio>
#include <cstdlib>

#include "fmt/format.h"
#include "mm/kernel.h"
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

void vm_bug(const char* cond, const char* msg, const Folio* f, const char* file, int line) {
  Kernel* k = f ? kernel_of(&f->page) : nullptr;
  if (k && k->vm_warn_records()) {
    k->vm_warn(fmt::format("VM_WARN_ON_FOLIO({}) at {}:{}: {}\n{}", cond, file, line, msg, dump_folio(f)));
    return;
  }
  std::fprintf(stderr, "VM_WARN_ON_FOLIO(%s) at %s:%d: %s\n%s\n", cond, file, line, msg, dump_folio(f).c_str());
  std::abort();
}

}  // namespace mmlab
