// The page-table and folio views the public API gives (Process::pagetable_dump,
// page_info, folio_dump): mm/ptdump.c's walk of one address space, with the
// per-page flags fs/proc/page.c (kpageflags) and pagemap report.
#include <algorithm>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "mm/mm.h"
#include "mm/debug.h"
#include "pgtable/pagewalk.h"
#include "pgtable/pgtable.h"
#include "process/process_internal.h"

namespace mmlab {

std::vector<PteDumpEntry> ptdump_entries(Mm* mm, uint64_t start, uint64_t end) {
  std::vector<PteDumpEntry> out;
  PhysMem* phys = mm->phys;
  end = std::min(end, TASK_SIZE);
  auto order_of = [&](pfn_t pfn) {
    if (phys->is_zero_pfn(pfn) || !phys->pfn_valid(pfn)) return -1;
    return static_cast<int>(folio_order(page_folio(phys->pfn_to_page(pfn))));
  };
  PageWalkOps ops;
  ops.pud_leaf = [&](uint64_t a, pud_t* p) {
    pud_t v = pudp_get(p);
    out.push_back({a, 3, pud_pfn(v), v.v, order_of(pud_pfn(v)), false});
  };
  ops.pmd_leaf = [&](uint64_t a, pmd_t* p) {
    pmd_t v = pmdp_get(p);
    out.push_back({a, 2, pmd_pfn(v), v.v, order_of(pmd_pfn(v)), false});
  };
  ops.pte_entry = [&](uint64_t a, pte_t* p) {
    pte_t v = ptep_get(p);
    bool swap = !pte_present(v);
    out.push_back({a, 1, swap ? 0 : pte_pfn(v), v.v, swap ? -1 : order_of(pte_pfn(v)), swap});
  };
  walk_page_range(mm, start, end, ops);
  return out;
}

namespace {

// What page_info() says of addr, which the leaf entry e maps.
PageInfo page_info_of_entry(PhysMem* phys, const PteDumpEntry& e, uint64_t addr) {
  PageInfo info;
  info.level = e.swap ? 0 : e.level;
  info.swap = e.swap;
  info.guard = e.swap && e.level == 1 && is_guard_pte_marker(pte_t{e.bits});
  if (e.swap) return info;
  uint64_t leaf = e.level == 3 ? PUD_SIZE : e.level == 2 ? PMD_SIZE : PAGE_SIZE;
  info.pfn = e.pfn + (((addr & PAGE_MASK) - e.addr) >> PAGE_SHIFT) * (leaf > PAGE_SIZE ? 1 : 0);
  info.writable = e.bits & _PAGE_RW;
  info.dirty = e.bits & _PAGE_DIRTY;
  info.young = e.bits & _PAGE_ACCESSED;
  info.soft_dirty = e.bits & _PAGE_SOFT_DIRTY;
  info.uffd_wp = e.bits & _PAGE_UFFD_WP;
  if (phys->pfn_valid(info.pfn)) {
    Page* page = phys->pfn_to_page(info.pfn);
    Folio* folio = page_folio(page);
    info.zero = phys->is_zero_pfn(info.pfn) || phys->is_huge_zero_pfn(info.pfn);
    info.order = static_cast<int>(folio_order(folio));
    info.anon = folio_test_anon(folio);
    Page* excl = e.level > 1 ? &folio->page : page;
    info.anon_exclusive = info.anon && PageAnonExclusive(excl);
    info.maybe_pinned = !info.zero && folio_maybe_dma_pinned(folio);
    info.refcount = folio_ref_count(folio);
    info.mapcount = folio_mapcount(folio);
    info.pincount = folio_pincount(folio);
    info.folio_dirty = folio_test_dirty(folio);
    info.referenced = folio_test_referenced(folio);
    info.active = folio_test_active(folio);
    info.lru = folio_test_lru(folio);
  }
  return info;
}

}  // namespace

PageInfo page_info_at(Mm* mm, uint64_t addr) {
  PageInfo info;
  mmap_read_lock(mm);
  auto entries = ptdump_entries(mm, addr & PAGE_MASK, (addr & PAGE_MASK) + PAGE_SIZE);
  if (!entries.empty()) info = page_info_of_entry(mm->phys, entries.front(), addr);
  mmap_read_unlock(mm);
  return info;
}

// The same as page_info_at(e.addr) for every entry e of one walk, under one
// hold of mmap_lock.
std::vector<std::pair<PteDumpEntry, PageInfo>> leaf_infos_of(Mm* mm) {
  std::vector<std::pair<PteDumpEntry, PageInfo>> out;
  mmap_read_lock(mm);
  std::vector<PteDumpEntry> entries = ptdump_entries(mm, 0, ~0ull);
  out.reserve(entries.size());
  for (const PteDumpEntry& e : entries) out.emplace_back(e, page_info_of_entry(mm->phys, e, e.addr));
  mmap_read_unlock(mm);
  return out;
}

std::string folio_dump_at(Mm* mm, uint64_t addr) {
  PhysMem* phys = mm->phys;
  std::string out;
  mmap_read_lock(mm);
  auto entries = ptdump_entries(mm, addr & PAGE_MASK, (addr & PAGE_MASK) + PAGE_SIZE);
  if (!entries.empty() && !entries.front().swap) {
    const PteDumpEntry& e = entries.front();
    const pfn_t pfn = e.pfn + (e.level > 1 ? ((addr & PAGE_MASK) - e.addr) >> PAGE_SHIFT : 0);
    if (phys->pfn_valid(pfn)) {
      Page* page = phys->pfn_to_page(pfn);
      Folio* folio = page_folio(page);
      out = fmt::format("page {:#x} is page {} of its folio\n{}", pfn, pfn - phys->page_to_pfn(&folio->page), dump_folio(folio));
      // The mapping is a host pointer: name its kind, so that a run prints the same text each time.
      const size_t at = out.find("mapping:0x");
      const size_t end = at == std::string::npos ? at : out.find(' ', at);
      if (end != std::string::npos)
        out.replace(at, end - at, folio->page.mapping == 0 ? "mapping:none" : folio_test_anon(folio) ? "mapping:anon" : "mapping:file");
    }
  }
  mmap_read_unlock(mm);
  return out;
}

std::string ptdump_text(Mm* mm, uint64_t start, uint64_t end) {
  std::string s = "address          level  pfn       bits                    order\n";
  for (auto& e : ptdump_entries(mm, start, end)) {
    std::string bits;
    auto add = [&](bool on, const char* n) {
      if (on) bits += bits.empty() ? n : std::string("|") + n;
    };
    if (e.swap && e.level == 1 && is_guard_pte_marker(pte_t{e.bits})) {
      add(true, "guard");  // a PTE marker, not a swap slot
    } else if (e.swap) {
      add(true, "swap");
      add(e.bits & _PAGE_SWP_EXCLUSIVE, "exclusive");
    } else {
      add(e.bits & _PAGE_RW, "write");
      add(e.bits & _PAGE_DIRTY, "dirty");
      add(e.bits & _PAGE_ACCESSED, "young");
      add(e.bits & _PAGE_SPECIAL, "special");
      add(e.bits & _PAGE_SOFT_DIRTY, "soft-dirty");
      add(e.bits & _PAGE_UFFD_WP, "uffd-wp");
      add(!(e.bits & _PAGE_PRESENT), "protnone");
    }
    static const char* lv[] = {"", "pte", "pmd", "pud"};
    s += fmt::format("{:016x} {:<6} {:<9x} {:<23} {}\n", e.addr, lv[e.level], e.pfn, bits,
                     e.folio_order < 0 ? std::string("-") : std::to_string(e.folio_order));
  }
  return s;
}

}  // namespace mmlab
