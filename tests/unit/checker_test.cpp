// The invariant checker (check/checker.cpp) and the /proc views
// (process/proc_views.cpp): the checker passes in normal states and proves
// that exit frees everything; each invariant fires on a deliberate
// corruption (white-box, undone before the fixture's own final check); and
// smaps/status report the kernel's numbers.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process/process_internal.h"
#include "fault/fault.h"
#include "fmt/format.h"
#include "mm/rmap.h"
#include "pgtable/pgtable.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

constexpr uint64_t KiB = 1024;

class CheckerTest : public MmTest {
 protected:
  PhysMem* phys() { return sys->kernel()->phys.get(); }

  // The PTE slot for addr (nullptr if no PTE table covers it).
  pte_t* pte_ptr(Process* q, uint64_t addr) {
    pmd_t* pmd = mm_find_pmd(q->mm(), addr);
    if (!pmd) return nullptr;
    pmd_t v = pmdp_get(pmd);
    if (pmd_none(v) || pmd_leaf(v)) return nullptr;
    return pte_offset(phys(), v, addr);
  }
  pte_t* pte_ptr(uint64_t addr) { return pte_ptr(p, addr); }
  pmd_t* pmd_ptr(uint64_t addr) { return mm_find_pmd(p->mm(), addr); }

  Page* page_at(Process* q, uint64_t addr) {
    PteDumpEntry e = entry_at(q, addr);
    EXPECT_NE(e.level, 0) << "nothing mapped at " << std::hex << addr;
    uint64_t pfn = e.pfn + (e.level == 2 ? ((addr & ~PMD_MASK) >> PAGE_SHIFT) : 0);
    return phys()->pfn_to_page(pfn);
  }
  Page* page_at(uint64_t addr) { return page_at(p, addr); }
  Folio* folio_at(uint64_t addr) { return page_folio(page_at(addr)); }

  static bool has(const CheckReport& r, const std::string& invariant) {
    for (auto& v : r.violations)
      if (v.invariant == invariant) return true;
    return false;
  }
  // Checks that `invariant` is reported, and returns the report for more.
  CheckReport expect_violation(const std::string& invariant) {
    CheckReport r = sys->check();
    EXPECT_TRUE(has(r, invariant)) << "expected \"" << invariant << "\", got:\n" << r.to_string();
    return r;
  }
  void expect_ok() {
    CheckReport r = sys->check();
    EXPECT_TRUE(r.ok()) << r.to_string();
  }

  // Base pages only: no THP of any size.
  void no_thp() {
    set("transparent_hugepage/enabled", "never");
    enable_order_kb(2048, "never");
  }
  uint64_t map_anon(Process* q, uint64_t len) {
    long a = q->mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    EXPECT_GT(a, 0);
    return static_cast<uint64_t>(a);
  }
  uint64_t map_anon(uint64_t len) { return map_anon(p, len); }

  // A 2 MiB-aligned address inside a 4 MiB mapping, advised MADV_HUGEPAGE.
  uint64_t map_huge_madvised() {
    uint64_t raw = map_anon(2 * PMD_SIZE);
    uint64_t a = round_up(raw, PMD_SIZE);
    EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
    return a;
  }

  // One VMA's field from smaps, in kB (-1 if absent).
  static long smaps_kb(const std::string& smaps, uint64_t vma_start, const std::string& field) {
    std::istringstream in(smaps);
    std::string line, head = fmt::format("{:08x}-", vma_start);
    bool in_vma = false;
    while (std::getline(in, line)) {
      if (line.find('-') != std::string::npos && line.find(':') != std::string::npos &&
          line.find(" kB") == std::string::npos && line.rfind("VmFlags", 0) != 0 && line.rfind("THPeligible", 0) != 0) {
        in_vma = line.rfind(head, 0) == 0;
        continue;
      }
      if (in_vma && line.rfind(field + ":", 0) == 0) return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
    }
    return -1;
  }
};

// ---- (a) normal states pass, and exit frees everything ----

TEST_F(CheckerTest, BasePagesOkAndEverythingFreeAfterExit) {
  no_thp();
  uint64_t a = map_anon(64 * KiB);
  ASSERT_TRUE(p->fill(a, 0x11, 64 * KiB).ok());
  uint64_t b = map_anon(16 * KiB);
  uint8_t buf[16];
  ASSERT_TRUE(p->read(b, buf, sizeof(buf)).ok());  // the zero page
  EXPECT_EQ(entry_at(b).pfn, phys()->zero_pfn());
  expect_ok();
  EXPECT_LT(sys->nr_free_pages(), sys->nr_total_pages() - 1);
  p->exit();
  expect_ok();
  EXPECT_EQ(sys->nr_free_pages(), sys->nr_total_pages() - 1);  // only the zero page
}

TEST_F(CheckerTest, MthpOkAlsoPartiallyUnmapped) {
  set("transparent_hugepage/enabled", "never");
  enable_order_kb(64, "always");
  uint64_t a = map_aligned(256 * KiB, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 0x22, 256 * KiB).ok());
  ASSERT_EQ(order_at(a), 4);
  expect_ok();
  // Unmapping part of a 64K folio queues it for deferred split.
  ASSERT_EQ(p->munmap(a + 16 * KiB, 16 * KiB), 0);
  EXPECT_EQ(sys->mthp_stat(4, "nr_anon_partially_mapped"), 1);
  expect_ok();
  p->exit();
  expect_ok();
  EXPECT_EQ(sys->nr_free_pages(), sys->nr_total_pages() - 1);
}

TEST_F(CheckerTest, PmdThpOkAlsoSplit) {
  set("transparent_hugepage/enabled", "always");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 0x33, PMD_SIZE).ok());
  ASSERT_EQ(entry_at(a).level, 2);
  ASSERT_EQ(order_at(a), 9);
  expect_ok();
  // A hole in the middle splits the PMD mapping; the folio stays whole.
  ASSERT_EQ(p->munmap(a + 64 * KiB, PAGE_SIZE), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  expect_ok();
  p->exit();
  expect_ok();
  EXPECT_EQ(sys->nr_free_pages(), sys->nr_total_pages() - 1);
}

TEST_F(CheckerTest, HugeZeroPmdOk) {
  uint64_t a = map_huge_madvised();
  uint8_t c;
  ASSERT_TRUE(p->read(a + 12345, &c, 1).ok());
  PteDumpEntry e = entry_at(a);
  ASSERT_EQ(e.level, 2);
  ASSERT_TRUE(phys()->is_huge_zero_pfn(e.pfn));
  expect_ok();
  std::string s = p->smaps();
  EXPECT_EQ(smaps_kb(s, a, "Rss"), 0) << s;  // zero pages are not resident
  EXPECT_EQ(smaps_kb(s, a, "AnonHugePages"), 0) << s;
  // A write replaces the huge zero PMD with a THP.
  ASSERT_TRUE(p->fill(a, 0x44, 1).ok());
  expect_ok();
  p->exit();
  expect_ok();
  // The huge zero folio stays with its global holder.
  EXPECT_EQ(sys->nr_free_pages(), sys->nr_total_pages() - 1 - HPAGE_PMD_NR);
}

TEST_F(CheckerTest, TwoProcessesOk) {
  no_thp();
  Process* q = sys->new_process("second");
  ASSERT_TRUE(q);
  uint64_t a = map_anon(32 * KiB), b = map_anon(q, 32 * KiB);
  ASSERT_TRUE(p->fill(a, 1, 32 * KiB).ok());
  ASSERT_TRUE(q->fill(b, 2, 32 * KiB).ok());
  expect_ok();
  q->exit();
  expect_ok();
}

// ---- (b) each invariant fires on a deliberate corruption ----

TEST_F(CheckerTest, ExtraReferenceIsReported) {
  no_thp();
  uint64_t a = map_anon(PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  Folio* f = folio_at(a);
  folio_ref_inc(f);
  expect_violation("folio_ref_count(folio) != expected (refcount floor)");
  // A holder the caller declares makes the count exact again.
  CheckReport r = check_system(*sys, [f](const Folio* g) { return g == f ? 1l : 0l; });
  EXPECT_TRUE(r.ok()) << r.to_string();
  folio_ref_add(f, -1);
  expect_ok();
}

TEST_F(CheckerTest, RefcountBelowMappingsIsReported) {
  set("transparent_hugepage/enabled", "never");
  enable_order_kb(64, "always");
  uint64_t a = map_aligned(64 * KiB, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 1, 64 * KiB).ok());
  Folio* f = folio_at(a);
  ASSERT_EQ(folio_ref_count(f), 16);
  folio_ref_add(f, -1);
  expect_violation("folio_ref_count(folio) < mappings (refcount floor)");
  folio_ref_add(f, 1);
  expect_ok();
}

TEST_F(CheckerTest, WritablePteOnNonExclusivePageIsReported) {
  no_thp();
  uint64_t a = map_anon(PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  Page* page = page_at(a);
  ASSERT_TRUE(PageAnonExclusive(page));
  ClearPageAnonExclusive(page);
  expect_violation("writable PTE maps !PageAnonExclusive anon page");
  SetPageAnonExclusive(page);
  expect_ok();
}

// Shared anon is read-only: a read-only !AnonExclusive page is legal until
// its PTE becomes writable.
TEST_F(CheckerTest, WritablePteOnSharedPageIsReported) {
  no_thp();
  uint64_t a = map_anon(PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  ASSERT_EQ(p->mprotect(a, PAGE_SIZE, PROT_READ), 0);
  pte_t* pte = pte_ptr(a);
  ASSERT_TRUE(pte);
  ASSERT_FALSE(pte_write(ptep_get(pte)));
  Page* page = page_at(a);
  ClearPageAnonExclusive(page);
  expect_ok();
  entry_or(pte, _PAGE_RW);
  CheckReport r = expect_violation("writable PTE maps !PageAnonExclusive anon page");
  EXPECT_NE(r.violations.front().where.find("CoW mapping"), std::string::npos) << r.to_string();
  entry_set(pte, pte_wrprotect(ptep_get(pte)));
  SetPageAnonExclusive(page);
  expect_ok();
}

TEST_F(CheckerTest, WritableZeroPageIsReported) {
  no_thp();
  uint64_t a = map_anon(PAGE_SIZE);
  uint8_t c;
  ASSERT_TRUE(p->read(a, &c, 1).ok());
  pte_t* pte = pte_ptr(a);
  ASSERT_TRUE(pte);
  ASSERT_TRUE(phys()->is_zero_pfn(pte_pfn(ptep_get(pte))));
  entry_or(pte, _PAGE_RW);
  expect_violation("zero page mapped writable");
  entry_set(pte, pte_wrprotect(ptep_get(pte)));
  entry_set(pte, pte_t{ptep_get(pte).v & ~_PAGE_SPECIAL});
  expect_violation("zero-page PTE not special");
  entry_set(pte, pte_mkspecial(ptep_get(pte)));
  expect_ok();
}

TEST_F(CheckerTest, WritableHugeZeroPmdIsReported) {
  uint64_t a = map_huge_madvised();
  uint8_t c;
  ASSERT_TRUE(p->read(a, &c, 1).ok());
  pmd_t* pmd = pmd_ptr(a);
  ASSERT_TRUE(pmd && pmd_leaf(pmdp_get(pmd)));
  entry_or(pmd, _PAGE_RW);
  CheckReport r = expect_violation("zero page mapped writable");
  EXPECT_NE(r.to_string().find("PMD"), std::string::npos);
  entry_set(pmd, pmd_wrprotect(pmdp_get(pmd)));
  expect_ok();
}

TEST_F(CheckerTest, ExclusivePageMappedTwiceIsReported) {
  no_thp();
  uint64_t a = map_anon(2 * PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());  // the second page stays unmapped
  pte_t* first = pte_ptr(a);
  pte_t* second = pte_ptr(a + PAGE_SIZE);
  ASSERT_TRUE(first && second && pte_none(ptep_get(second)));
  entry_set(second, pte_wrprotect(ptep_get(first)));
  CheckReport r = expect_violation("PageAnonExclusive on a page mapped more than once");
  EXPECT_TRUE(has(r, "folio_mapcount mismatch")) << r.to_string();
  EXPECT_TRUE(has(r, "rss counter mismatch")) << r.to_string();
  EXPECT_TRUE(has(r, "folio_ref_count(folio) < mappings (refcount floor)")) << r.to_string();
  entry_set(second, pte_t{0});
  expect_ok();
}

TEST_F(CheckerTest, MapcountCorruptionIsReported) {
  set("transparent_hugepage/enabled", "never");
  enable_order_kb(64, "always");
  uint64_t a = map_aligned(64 * KiB, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 1, 64 * KiB).ok());
  Folio* f = folio_at(a);
  Page* p1 = folio_page(f, 1);
  aref(p1->f1.large_mapcount).fetch_add(1);
  expect_violation("folio_large_mapcount mismatch");
  aref(p1->f1.large_mapcount).fetch_sub(1);
  aref(folio_page(f, 3)->mapcount).fetch_add(1);
  expect_violation("page mapcount mismatch");
  aref(folio_page(f, 3)->mapcount).fetch_sub(1);
  aref(p1->f1.nr_pages_mapped).fetch_sub(1);
  expect_violation("folio nr_pages_mapped mismatch");
  aref(p1->f1.nr_pages_mapped).fetch_add(1);
  aref(p1->mm_id_mapcount[0]).fetch_add(1);
  expect_violation("MM-ID slot mapcount mismatch");
  aref(p1->mm_id_mapcount[0]).fetch_sub(1);
  expect_ok();
  // Maybe mapped shared: a slot may count fewer mappings than its mm has
  // (some added before it took the slot), never more.
  set_bit(PG_maybe_shared, p1);
  aref(p1->mm_id_mapcount[0]).fetch_add(1);
  expect_violation("MM-ID slot mapcount mismatch");
  aref(p1->mm_id_mapcount[0]).fetch_sub(2);
  expect_ok();
  aref(p1->mm_id_mapcount[0]).fetch_add(1);
  clear_bit(PG_maybe_shared, p1);
  expect_ok();

  // A small folio's own mapcount.
  enable_order_kb(64, "never");
  uint64_t b = map_anon(PAGE_SIZE);
  ASSERT_TRUE(p->fill(b, 1, PAGE_SIZE).ok());
  Folio* s = folio_at(b);
  ASSERT_FALSE(folio_test_large(s));
  aref(s->page.mapcount).fetch_add(1);
  expect_violation("folio_mapcount mismatch");
  aref(s->page.mapcount).fetch_sub(1);
  expect_ok();
}

// A page of p's 64K folio also mapped (read-only) by q, while the folio says
// it is mapped exclusively by p.
TEST_F(CheckerTest, MappedInTwoMmsWithoutMaybeSharedIsReported) {
  set("transparent_hugepage/enabled", "never");
  enable_order_kb(64, "always");
  uint64_t a = map_aligned(64 * KiB, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 1, 64 * KiB).ok());
  Process* q = sys->new_process("other");
  uint64_t b = map_anon(q, PAGE_SIZE);
  uint8_t c;
  ASSERT_TRUE(q->read(b, &c, 1).ok());  // a zero-page PTE gives q a PTE table
  pte_t* qpte = pte_ptr(q, b);
  ASSERT_TRUE(qpte);
  pte_t saved = ptep_get(qpte);
  entry_set(qpte, pte_wrprotect(ptep_get(pte_ptr(a))));
  CheckReport r = expect_violation("maybe_mapped_shared clear but mapped in two mms");
  EXPECT_TRUE(has(r, "PageAnonExclusive on a page mapped more than once")) << r.to_string();
  entry_set(qpte, saved);
  expect_ok();
}

TEST_F(CheckerTest, PinsExceedingReferencesAreReported) {
  set("transparent_hugepage/enabled", "never");
  enable_order_kb(64, "always");
  uint64_t a = map_aligned(64 * KiB, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 1, 64 * KiB).ok());
  Folio* f = folio_at(a);
  aref(folio_page(f, 1)->f1.pincount).store(100);
  expect_violation("pins exceed references");
  aref(folio_page(f, 1)->f1.pincount).store(0);
  expect_ok();
}

TEST_F(CheckerTest, RssAndPageTableAccountingAreChecked) {
  no_thp();
  uint64_t a = map_anon(PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  Mm* mm = p->mm();
  add_mm_counter(mm, MM_ANONPAGES, 1);
  expect_violation("rss counter mismatch");
  add_mm_counter(mm, MM_ANONPAGES, -1);
  mm->pgtables_bytes += PAGE_SIZE;
  expect_violation("mm->pgtables_bytes mismatch");
  mm->pgtables_bytes -= PAGE_SIZE;
  expect_ok();
  // A table page allocated to the mm but linked nowhere.
  Page* t = pte_alloc_one(mm);
  ASSERT_TRUE(t);
  CheckReport r = expect_violation("page-table page leaked");
  EXPECT_TRUE(has(r, "mm->pgtables_bytes mismatch")) << r.to_string();
  pgtable_free(mm, t);
  expect_ok();
  // A linked table that lost its page type.
  Page* pte_table = table_page_of(phys(), pte_ptr(a));
  clear_bit(PG_table, pte_table);
  expect_violation("page-table page without PG_table");
  set_bit(PG_table, pte_table);
  expect_ok();
}

// The PTE table deposited under a PMD leaf for its split.
TEST_F(CheckerTest, MissingDepositedTableIsReported) {
  set("transparent_hugepage/enabled", "always");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PMD_SIZE).ok());
  pmd_t* pmd = pmd_ptr(a);
  ASSERT_TRUE(pmd && pmd_leaf(pmdp_get(pmd)));
  SpinLock* ptl = pmd_lock(p->mm(), pmd);  // deposit and withdraw run under it
  ptl->assert_held();
  Page* t = pgtable_trans_huge_withdraw(p->mm(), pmd);
  ptl->unlock();
  CheckReport r = expect_violation("deposited page tables != PMD leaves");
  EXPECT_TRUE(has(r, "page-table page leaked")) << r.to_string();
  EXPECT_TRUE(has(r, "mm->pgtables_bytes mismatch")) << r.to_string();
  ptl = pmd_lock(p->mm(), pmd);
  ptl->assert_held();
  pgtable_trans_huge_deposit(p->mm(), pmd, t);
  ptl->unlock();
  expect_ok();
}

TEST_F(CheckerTest, PteToFreedFrameIsReported) {
  no_thp();
  uint64_t a = map_anon(2 * PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  pte_t* second = pte_ptr(a + PAGE_SIZE);
  ASSERT_TRUE(second && pte_none(ptep_get(second)));
  Page* freed = phys()->alloc_pages(GFP_KERNEL, 0);
  ASSERT_TRUE(freed);
  ASSERT_TRUE(folio_ref_sub_and_test(reinterpret_cast<Folio*>(freed), 1));
  phys()->free_pages(freed, 0);
  pfn_t pfn = phys()->page_to_pfn(freed);
  ASSERT_TRUE(phys()->page_is_free(pfn));
  entry_set(second, pfn_pte(pfn, pgprot_t{_PAGE_PRESENT | _PAGE_USER}));
  expect_violation("PTE maps a freed frame");
  entry_set(second, pte_t{0});
  expect_ok();
}

// The flag outlives the partial mapping that set it (a split whose freeze
// failed remaps every page and keeps it: DeferredSplitRaceTest), so a fully
// mapped flagged folio is fine; a flagged folio off the queue is not.
TEST_F(CheckerTest, PartiallyMappedFlagOffTheSplitQueueIsReported) {
  set("transparent_hugepage/enabled", "never");
  enable_order_kb(64, "always");
  uint64_t a = map_aligned(64 * KiB, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 1, 64 * KiB).ok());
  Folio* f = folio_at(a);
  set_bit(PG_partially_mapped, folio_page(f, 1));
  CheckReport r = expect_violation("deferred list: partially mapped folio not on the split queue");
  EXPECT_FALSE(has(r, "without partial mapping")) << r.to_string();
  clear_bit(PG_partially_mapped, folio_page(f, 1));
  expect_ok();
}

TEST_F(CheckerTest, LeakAfterExitIsReportedAndClearedByThePut) {
  no_thp();
  uint64_t a = map_anon(PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  Folio* f = folio_at(a);
  folio_ref_inc(f);  // a reference nobody will drop
  p->exit();
  CheckReport r = expect_violation("frame leaked");
  EXPECT_NE(r.to_string().find(fmt::format("pfn {:#x}", folio_pfn(f))), std::string::npos) << r.to_string();
  // Declared as held, it is accounted for.
  CheckReport held = check_system(*sys, [f](const Folio* g) { return g == f ? 1l : 0l; });
  EXPECT_TRUE(held.ok()) << held.to_string();
  folio_put(f);
  expect_ok();
  EXPECT_EQ(sys->nr_free_pages(), sys->nr_total_pages() - 1);
}

TEST_F(CheckerTest, ManyLeaksAreCappedWithATotal) {
  no_thp();
  constexpr int kPages = 30;
  uint64_t a = map_anon(kPages * PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, kPages * PAGE_SIZE).ok());
  std::vector<Folio*> leaked;
  for (int i = 0; i < kPages; i++) {
    leaked.push_back(folio_at(a + i * PAGE_SIZE));
    folio_ref_inc(leaked.back());
  }
  p->exit();
  CheckReport r = expect_violation("frame leaked");
  long shown = 0;
  bool summary = false, total = false;
  for (auto& v : r.violations) {
    if (v.invariant != "frame leaked") continue;
    if (v.where == "(summary)") summary = true;
    else if (v.where == "(total)") total = v.dump.find("30 frames") != std::string::npos;
    else shown++;
  }
  EXPECT_EQ(shown, 20);
  EXPECT_TRUE(summary) << r.to_string();
  EXPECT_TRUE(total) << r.to_string();
  for (Folio* f : leaked) folio_put(f);
  expect_ok();
}

// ---- (c) smaps and status ----

TEST_F(CheckerTest, SmapsAndStatusForPmdThp) {
  set("transparent_hugepage/enabled", "always");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 0x5a, PMD_SIZE).ok());
  ASSERT_EQ(entry_at(a).level, 2);
  std::string s = p->smaps();
  EXPECT_EQ(smaps_kb(s, a, "Size"), 2048) << s;
  EXPECT_EQ(smaps_kb(s, a, "Rss"), 2048) << s;
  EXPECT_EQ(smaps_kb(s, a, "Pss"), 2048) << s;
  EXPECT_EQ(smaps_kb(s, a, "Anonymous"), 2048) << s;
  EXPECT_EQ(smaps_kb(s, a, "AnonHugePages"), 2048) << s;
  EXPECT_EQ(smaps_kb(s, a, "Private_Dirty"), 2048) << s;
  EXPECT_EQ(smaps_kb(s, a, "Shared_Dirty"), 0) << s;
  EXPECT_NE(s.find("AnonHugePages:      2048 kB\n"), std::string::npos) << s;
  EXPECT_NE(s.find("THPeligible:           1\n"), std::string::npos) << s;
  std::string st = p->status_rss();
  EXPECT_NE(st.find("RssAnon:\t    2048 kB\n"), std::string::npos) << st;
  EXPECT_NE(st.find("VmRSS:\t    2048 kB\n"), std::string::npos) << st;
  // mm_pgtables_bytes() leaves out the PGD, which the model's counter has.
  EXPECT_NE(st.find(fmt::format("VmPTE:\t{:>8} kB\n", (p->pgtables_bytes() - static_cast<long>(PAGE_SIZE)) / 1024)),
            std::string::npos)
      << st;
  // Every size line the two texts print is a field `expect P smaps|status`
  // may name (proc_views.cpp keeps the list beside the printers).
  int fields = 0;
  for (auto [text, known] : {std::pair{s, &smaps_field_known}, std::pair{st, &status_field_known}}) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      const size_t colon = l.find(':');
      if (colon == std::string::npos || l.size() < 3 || l.compare(l.size() - 3, 3, " kB") != 0) continue;
      fields++;
      EXPECT_TRUE(known(l.substr(0, colon))) << l;
    }
  }
  EXPECT_GE(fields, 22 + 7);  // 22 a VMA, 7 in status
  EXPECT_FALSE(smaps_field_known("THPeligible"));
  EXPECT_FALSE(status_field_known("VmHWM"));
}

TEST_F(CheckerTest, SmapsAndStatusForSixteenBasePages) {
  no_thp();
  uint64_t a = map_anon(16 * PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 0x5a, 16 * PAGE_SIZE).ok());
  long zr = p->mmap(0, 8 * PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);  // not merged with `a`
  ASSERT_GT(zr, 0);
  uint64_t z = static_cast<uint64_t>(zr);
  uint8_t buf[8 * 4096];
  ASSERT_TRUE(p->read(z, buf, sizeof(buf)).ok());  // zero-page PTEs: not resident
  std::string s = p->smaps();
  EXPECT_EQ(smaps_kb(s, a, "Size"), 64) << s;
  EXPECT_EQ(smaps_kb(s, a, "Rss"), 64) << s;
  EXPECT_EQ(smaps_kb(s, a, "Pss"), 64) << s;
  EXPECT_EQ(smaps_kb(s, a, "Private_Dirty"), 64) << s;
  EXPECT_EQ(smaps_kb(s, a, "Anonymous"), 64) << s;
  EXPECT_EQ(smaps_kb(s, a, "AnonHugePages"), 0) << s;
  EXPECT_EQ(smaps_kb(s, z, "Rss"), 0) << s;
  EXPECT_NE(s.find(fmt::format("{:08x}-{:08x} rw-p 00000000 00:00 0 \n", a, a + 16 * PAGE_SIZE)), std::string::npos)
      << s;
  EXPECT_NE(s.find("Rss:                  64 kB\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Private_Hugetlb:       0 kB\n"), std::string::npos) << s;
  EXPECT_NE(s.find("THPeligible:           0\n"), std::string::npos) << s;
  EXPECT_NE(s.find("VmFlags: rd wr mr mw me "), std::string::npos) << s;
  std::string st = p->status_rss();
  EXPECT_NE(st.find("RssAnon:\t      64 kB\n"), std::string::npos) << st;
  EXPECT_NE(st.find("RssFile:\t       0 kB\n"), std::string::npos) << st;
  EXPECT_NE(st.find("RssShmem:\t       0 kB\n"), std::string::npos) << st;
}

// ---- Process::pss(): smaps' Pss, summed, read with the page tables locked ----

// The Pss lines of every VMA in smaps, summed (kB).
long smaps_pss_kb(const std::string& smaps) {
  std::istringstream in(smaps);
  std::string line;
  long kb = 0;
  while (std::getline(in, line))
    if (line.rfind("Pss:", 0) == 0) kb += std::strtol(line.c_str() + 4, nullptr, 10);
  return kb;
}

TEST_F(CheckerTest, PssIsTheSumOfSmapsPssLinesUnderFork) {
  no_thp();
  enable_order_kb(64);
  const uint64_t len = 256 * KiB;
  const uint64_t a = map_aligned(p, len, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 0x11, len).ok());
  EXPECT_EQ(p->pss(), static_cast<long>(len));
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  // Every page mapped twice: half each.
  EXPECT_EQ(p->pss(), static_cast<long>(len / 2));
  EXPECT_EQ(c->pss(), static_cast<long>(len / 2));
  // The child's write copies one 4K page (cow.policy base): that page is
  // the child's alone, the parent's old page is the parent's alone.
  ASSERT_TRUE(c->fill(a, 0x22, PAGE_SIZE).ok());
  EXPECT_EQ(c->pss(), static_cast<long>(PAGE_SIZE + (len - PAGE_SIZE) / 2));
  EXPECT_EQ(p->pss(), static_cast<long>(PAGE_SIZE + (len - PAGE_SIZE) / 2));
  for (Process* q : {p, c}) EXPECT_EQ(q->pss() >> 10, smaps_pss_kb(q->smaps())) << q->smaps();
  c->exit();
  EXPECT_EQ(c->pss(), 0);
  EXPECT_EQ(p->pss(), static_cast<long>(len));
  expect_ok();
}

TEST_F(CheckerTest, PssOfAPmdMappedThpSharedByFork) {
  const uint64_t a = map_huge_madvised();
  ASSERT_TRUE(p->fill(a, 0x33, PMD_SIZE).ok());
  ASSERT_EQ(entry_at(a).level, 2);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_EQ(p->pss(), static_cast<long>(PMD_SIZE / 2));
  EXPECT_EQ(c->pss(), static_cast<long>(PMD_SIZE / 2));
  for (Process* q : {p, c}) EXPECT_EQ(q->pss() >> 10, smaps_pss_kb(q->smaps())) << q->smaps();
  expect_ok();
}


// The sampler of `mmlab cow-bench` reads PSS while the children fault: the
// walk locks each table, so it sees no half-made entry (TSan checks the rest),
// and every value lies between the shared and the fully copied state.
TEST_F(CheckerTest, PssBesideRunningCowFaults) {
  no_thp();
  enable_order_kb(64);
  const uint64_t len = 2 * PMD_SIZE;
  const uint64_t a = map_aligned(p, len, 64 * KiB);
  ASSERT_TRUE(p->fill(a, 0x11, len).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    EXPECT_TRUE(c->fill(a, 0x22, len).ok());
    done = true;
  });
  long reads = 0;
  while (!done || reads == 0) {
    const long v = c->pss();
    EXPECT_GE(v, static_cast<long>(len / 2));
    EXPECT_LE(v, static_cast<long>(len));
    reads++;
  }
  writer.join();
  EXPECT_EQ(c->pss(), static_cast<long>(len));
  EXPECT_EQ(p->pss(), static_cast<long>(len));
  expect_ok();
}
}  // namespace
}  // namespace mmlab::test
