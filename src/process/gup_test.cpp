// mm/gup_test.c: the GUP benchmark and test ioctls, run in-process. The
// loop, the timers, the release path and the untimed pinned-page check are
// the kernel module's.
#include <chrono>
#include <unordered_set>
#include <vector>

#include "fault/current.h"
#include "gup/gup.h"
#include "fmt/format.h"
#include "mm/kernel.h"
#include "mm/debug.h"
#include "pgtable/pgtable.h"
#include "mmlab/gup.h"

namespace mmlab {

const char* gup_test_cmd_name(GupTestCmd c) {
  switch (c) {
    case GupTestCmd::GUP_FAST_BENCHMARK: return "GUP_FAST_BENCHMARK";
    case GupTestCmd::PIN_FAST_BENCHMARK: return "PIN_FAST_BENCHMARK";
    case GupTestCmd::PIN_LONGTERM_BENCHMARK: return "PIN_LONGTERM_BENCHMARK";
    case GupTestCmd::GUP_BASIC_TEST: return "GUP_BASIC_TEST";
    case GupTestCmd::PIN_BASIC_TEST: return "PIN_BASIC_TEST";
    case GupTestCmd::DUMP_USER_PAGES_TEST: return "DUMP_USER_PAGES_TEST";
  }
  return "?";
}

namespace {

bool cmd_pins(GupTestCmd cmd, unsigned test_flags) {
  return cmd == GupTestCmd::PIN_FAST_BENCHMARK || cmd == GupTestCmd::PIN_LONGTERM_BENCHMARK ||
         cmd == GupTestCmd::PIN_BASIC_TEST ||
         (cmd == GupTestCmd::DUMP_USER_PAGES_TEST && (test_flags & GUP_TEST_FLAG_DUMP_PAGES_USE_PIN));
}

// Which folio sizes the calls returned (untimed): distinct folios by size;
// pages that are the shared zero page are counted under size 0.
void count_folios(Mm* mm, Page* const* pages, long nr, std::map<uint64_t, uint64_t>* by_size) {
  by_size->clear();
  std::unordered_set<const Folio*> seen;
  for (long k = 0; k < nr; k++) {
    Page* pg = pages[k];
    if (pg == mm->phys->zero_page()) {
      (*by_size)[0]++;
      continue;
    }
    const Folio* f = page_folio(pg);
    if (seen.insert(f).second) (*by_size)[static_cast<uint64_t>(folio_nr_pages(f)) * PAGE_SIZE]++;
  }
}

double usec_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// Opt-out: mmap_lock is held only for the slow entries (!fast), a condition
// the analysis cannot carry through the loop.
int gup_test_ioctl(Process* p, GupTestCmd cmd, GupTestArgs* gup) NO_THREAD_SAFETY_ANALYSIS {
  CurrentTask cur(p->task());  // the ioctl's caller
  Mm* mm = p->mm();
  if (!mm) return -ESRCH;
  if (gup->addr + gup->size < gup->addr || gup->addr + gup->size > TASK_SIZE) return -EINVAL;
  long nr_pages = static_cast<long>(gup->size / PAGE_SIZE);
  std::vector<Page*> pages(static_cast<size_t>(std::max<long>(nr_pages, 1)));
  bool fast = cmd == GupTestCmd::GUP_FAST_BENCHMARK || cmd == GupTestCmd::PIN_FAST_BENCHMARK;
  if (!fast) mmap_read_lock(mm);
  unsigned flags = gup->gup_flags;
  long i = 0;
  uint64_t addr = gup->addr, end = gup->addr + gup->size;
  auto t0 = std::chrono::steady_clock::now();
  long nr = gup->nr_pages_per_call;
  for (uint64_t next; addr < end; addr = next) {
    if (nr != static_cast<long>(gup->nr_pages_per_call)) break;  // the previous call was short
    next = addr + static_cast<uint64_t>(nr) * PAGE_SIZE;
    if (next > end || next < addr) {
      next = end;
      nr = static_cast<long>((next - addr) / PAGE_SIZE);
    }
    Page** dst = pages.data() + i;
    switch (cmd) {
      case GupTestCmd::GUP_FAST_BENCHMARK: nr = get_user_pages_fast(mm, addr, nr, flags, dst); break;
      case GupTestCmd::PIN_FAST_BENCHMARK: nr = pin_user_pages_fast(mm, addr, nr, flags, dst); break;
      case GupTestCmd::GUP_BASIC_TEST: nr = get_user_pages(mm, addr, nr, flags, dst); break;
      case GupTestCmd::PIN_BASIC_TEST: nr = pin_user_pages(mm, addr, nr, flags, dst); break;
      case GupTestCmd::PIN_LONGTERM_BENCHMARK: nr = pin_user_pages(mm, addr, nr, flags | FOLL_LONGTERM, dst); break;
      case GupTestCmd::DUMP_USER_PAGES_TEST:
        nr = (gup->test_flags & GUP_TEST_FLAG_DUMP_PAGES_USE_PIN) ? pin_user_pages(mm, addr, nr, flags, dst)
                                                                   : get_user_pages(mm, addr, nr, flags, dst);
        break;
    }
    if (nr <= 0) break;
    i += nr;
  }
  gup->get_delta_usec = usec_since(t0);
  gup->size = addr - gup->addr;
  gup->stop_ret = addr < end ? nr : 0;
  long nr_got = i;
  count_folios(mm, pages.data(), nr_got, &gup->folios_by_size);
  // The untimed check: pinned pages must look pinned (and long-term pinnable for -L).
  gup->check_failures = 0;
  if (cmd_pins(cmd, gup->test_flags)) {
    for (long k = 0; k < nr_got; k++) {
      Page* pg = pages[static_cast<size_t>(k)];
      if (pg == mm->phys->zero_page()) continue;
      bool ok = folio_maybe_dma_pinned(page_folio(pg));
      if (cmd == GupTestCmd::PIN_LONGTERM_BENCHMARK) ok = ok && mm->phys->page_zonenum(pg) != ZONE_MOVABLE;
      if (!ok) gup->check_failures++;
    }
  }
  // The dump test: out-of-range indices are dropped, each chosen page dumped.
  if (cmd == GupTestCmd::DUMP_USER_PAGES_TEST) {
    for (unsigned idx : gup->which_pages) {
      if (!idx) continue;
      if (static_cast<long>(idx) > nr_got) {
        gup->dump_log += fmt::format("ZERO_PAGE or out of range: page index {} beyond {} pages\n", idx - 1, nr_got);
        continue;
      }
      Page* pg = pages[idx - 1];
      gup->dump_log += fmt::format("---- page #{}, starting from user virt addr: {:#x}\n{}\n", idx - 1,
                                   gup->addr + static_cast<uint64_t>(idx - 1) * PAGE_SIZE, dump_folio(page_folio(pg)));
    }
  }
  t0 = std::chrono::steady_clock::now();
  if (cmd_pins(cmd, gup->test_flags)) {
    unpin_user_pages(pages.data(), nr_got);
  } else {
    for (long k = 0; k < nr_got; k++) put_page(pages[static_cast<size_t>(k)]);
  }
  gup->put_delta_usec = usec_since(t0);
  if (!fast) mmap_read_unlock(mm);
  return 0;
}

double gup_physical_floor_us(Process* p, uint64_t start, long nr_pages) {
  Mm* mm = p->mm();
  if (!mm) return -1;
  PhysMem* phys = mm->phys;
  std::vector<Page*> pages(static_cast<size_t>(std::max<long>(nr_pages, 1)));
  mmap_read_lock(mm);
  auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  long i = 0;
  uint64_t addr = start;
  while (i < nr_pages && ok) {
    pmd_t* pmd = mm_find_pmd(mm, addr);
    if (!pmd) {
      ok = false;
      break;
    }
    pmd_t pmdval = pmdp_get(pmd);
    if (pmd_leaf(pmdval)) {  // one entry covers the rest of the leaf
      Page* head = phys->pfn_to_page(pmd_pfn(pmdval));
      for (long off = static_cast<long>((addr & ~PMD_MASK) >> PAGE_SHIFT); off < HPAGE_PMD_NR && i < nr_pages; off++)
        pages[static_cast<size_t>(i++)] = head + off;
      addr = (addr & PMD_MASK) + PMD_SIZE;
      continue;
    }
    pte_t* pte = pte_offset(phys, pmdval, addr);
    for (uint64_t end = pmd_addr_end(addr, ~0ull); addr < end && i < nr_pages; addr += PAGE_SIZE, pte++) {
      pte_t e = ptep_get(pte);
      if (!pte_present(e)) {
        ok = false;
        break;
      }
      pages[static_cast<size_t>(i++)] = phys->pfn_to_page(pte_pfn(e));
    }
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  mmap_read_unlock(mm);
  return ok ? us : -1;
}

}  // namespace mmlab
