// Entry encodings, table allocation and the batch helpers.
#include <gtest/gtest.h>

#include "fault/fault.h"
#include "pgtable/pagewalk.h"
#include "pgtable/pgtable.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

TEST(EntryTest, X86BitLayout) {
  EXPECT_EQ(_PAGE_PRESENT, 1ull);
  EXPECT_EQ(_PAGE_RW, 2ull);
  EXPECT_EQ(_PAGE_USER, 4ull);
  EXPECT_EQ(_PAGE_ACCESSED, 0x20ull);
  EXPECT_EQ(_PAGE_DIRTY, 0x40ull);
  EXPECT_EQ(_PAGE_PSE, 0x80ull);
  EXPECT_EQ(_PAGE_NX, 1ull << 63);
  pte_t e = pfn_pte(0x12345, pgprot_t{_PAGE_PRESENT | _PAGE_USER});
  EXPECT_TRUE(pte_present(e));
  EXPECT_EQ(pte_pfn(e), 0x12345u);
  EXPECT_FALSE(pte_write(e));
  e = pte_mkdirty(pte_mkwrite_novma(e));
  EXPECT_TRUE(pte_write(e) && pte_dirty(e) && pte_soft_dirty(e));
  EXPECT_FALSE(pte_special(e));
  EXPECT_TRUE(pte_special(pte_mkspecial(e)));
  pte_t none{0};
  EXPECT_TRUE(pte_none(none));
  EXPECT_FALSE(pte_present(none));
}

TEST(EntryTest, ProtnoneIsPresentButNotHardwarePresent) {
  pte_t e = pfn_pte(7, pgprot_t{_PAGE_PROTNONE | _PAGE_ACCESSED});
  EXPECT_TRUE(pte_present(e));
  EXPECT_TRUE(pte_protnone(e));
  EXPECT_FALSE(is_swap_pte(e));
}

TEST(EntryTest, SwapEntriesRoundTrip) {
  for (unsigned type : {0u, 5u, SWP_MIGRATION_WRITE, SWP_PTE_MARKER}) {
    for (uint64_t off : {0ull, 1ull, 0x123456789ull}) {
      pte_t e = swp_entry_to_pte(swp_entry(type, off));
      if (type == 0 && off == 0)
        continue; // that would be pte_none
      EXPECT_FALSE(pte_present(e));
      EXPECT_TRUE(is_swap_pte(e));
      swp_entry_t back = pte_to_swp_entry(e);
      EXPECT_EQ(swp_type(back), type);
      EXPECT_EQ(swp_offset(back), off);
      pte_t x = pte_swp_mkexclusive(e);
      EXPECT_TRUE(pte_swp_exclusive(x));
      EXPECT_EQ(swp_offset(pte_to_swp_entry(x)), off);
    }
  }
  EXPECT_TRUE(is_migration_entry(swp_entry(SWP_MIGRATION_READ, 1)));
  EXPECT_TRUE(non_swap_entry(swp_entry(SWP_PTE_MARKER, 1)));
  EXPECT_FALSE(non_swap_entry(swp_entry(3, 1)));
}

TEST(EntryTest, PmdLeafAndTable) {
  pmd_t leaf = pfn_pmd(512, pgprot_t{_PAGE_PRESENT | _PAGE_USER});
  EXPECT_TRUE(pmd_leaf(leaf));
  EXPECT_TRUE(
      pmd_present(pmd_mkinvalid(leaf))); // a splitting PMD is still "present"
  pmd_t table = mk_table_pmd(99);
  EXPECT_FALSE(pmd_leaf(table));
  EXPECT_FALSE(pmd_bad(table));
  EXPECT_EQ(pmd_pfn(table), 99u);
}

class PgtableTest : public MmTest {};

TEST_F(PgtableTest, TablesAreCountedAndFreed) {
  Mm *mm = p->mm();
  long base = p->pgtables_bytes();
  EXPECT_EQ(base, static_cast<long>(PAGE_SIZE)); // the PGD
  uint64_t a = map_aligned(PMD_SIZE * 2);
  ASSERT_TRUE(p->fill(a, 1, 1).ok());
  ASSERT_TRUE(p->fill(a + PMD_SIZE, 1, 1).ok());
  // PUD table, PMD table and two PTE tables.
  EXPECT_EQ(p->pgtables_bytes(), base + 4 * static_cast<long>(PAGE_SIZE));
  ASSERT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  EXPECT_EQ(p->pgtables_bytes(), base);
  (void)mm;
}

TEST_F(PgtableTest, FolioPteBatchStopsAtBitsAndFolioEnd) {
  enable_order_kb(64);
  uint64_t a = map_aligned(128 * 1024, 64 * 1024);
  ASSERT_TRUE(p->fill(a, 1, 128 * 1024).ok()); // two 64K folios
  Mm *mm = p->mm();
  {
    ReadGuard guard(&mm->mmap_lock);
    pmd_t *pmd = mm_find_pmd(mm, a);
    ASSERT_TRUE(pmd);
    pte_t *pte = pte_offset(mm->phys, pmdp_get(pmd), a);
    Folio *f = page_folio(mm->phys->pfn_to_page(pte_pfn(ptep_get(pte))));
    ASSERT_EQ(folio_order(f), 4u);
    EXPECT_EQ(folio_pte_batch(f, pte, ptep_get(pte), 32),
              16u); // never crosses the folio
    EXPECT_EQ(folio_pte_batch(f, pte, ptep_get(pte), 5),
              5u); // never beyond max_nr
    // Write-protect one entry: without FPB_RESPECT_WRITE it still batches; with
    // it, it stops.
    wrprotect_ptes(mm, a + 6 * PAGE_SIZE, pte + 6, 1);
    EXPECT_EQ(folio_pte_batch(f, pte, ptep_get(pte), 16), 16u);
    pte_t first = ptep_get(pte);
    EXPECT_EQ(
        folio_pte_batch_flags(f, nullptr, pte, &first, 16, FPB_RESPECT_WRITE),
        6u);
    // Merging reports a writable batch when any entry is writable.
    pte_t ro = pte_wrprotect(ptep_get(pte + 6));
    EXPECT_EQ(
        folio_pte_batch_flags(f, nullptr, pte + 6, &ro, 10, FPB_MERGE_WRITE),
        10u);
    EXPECT_TRUE(pte_write(ro));
  }
  // Put the bit back so the checker sees a consistent, exclusive page.
  ASSERT_TRUE(p->fill(a + 6 * PAGE_SIZE, 1, 1).ok());
}

// Each walk step checks the table it steps into: its level and its owner
// (debug builds), recorded when the table was allocated.
class PgtableWalkCheckTest : public PgtableTest {
protected:
  // A written page and the tables that lead to it.
  uint64_t a = 0;
  Page *pmd_table = nullptr, *pte_table = nullptr;
  void SetUp() override {
    PgtableTest::SetUp();
    a = map_aligned(PAGE_SIZE);
    ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
    Mm *mm = p->mm();
    ReadGuard guard(&mm->mmap_lock);
    pmd_t *pmd = mm_find_pmd(mm, a);
    ASSERT_TRUE(pmd);
    pmd_table = table_page_of(mm->phys, pmd);
    pte_table = mm->phys->pfn_to_page(pmd_pfn(pmdp_get(pmd)));
  }
  // Walks to the PTE table of a, as a fault or GUP does.
  static void walk(Mm *mm, uint64_t addr) {
    ReadGuard guard(&mm->mmap_lock);
    pmd_t *pmd = mm_find_pmd(mm, addr);
    pmd_t v;
    if (pmd) (void)pte_offset_map(mm, pmd, addr, &v);
  }
  static void set_level(Page *t, uint64_t level) { aref(t->private_).store(level); }
  static void set_owner(Page *t, const Mm *mm) { aref(t->mapping).store(reinterpret_cast<uint64_t>(mm)); }
};

#if defined(MMLAB_DEBUG_VM)

// The frame store is not inherited by a fork (MADV_DONTFORK): a death
// test's child runs the test again from the start instead.
#define THREADSAFE_DEATH_TESTS() GTEST_FLAG_SET(death_test_style, "threadsafe")

TEST_F(PgtableWalkCheckTest, TablesKnowTheirLevelAndMm) {
  EXPECT_EQ(pgtable_level(pmd_table), TableLevel::kPmd);
  EXPECT_EQ(pgtable_level(pte_table), TableLevel::kPte);
  EXPECT_EQ(pgtable_mm(pmd_table), p->mm());
  EXPECT_EQ(pgtable_mm(pte_table), p->mm());
  EXPECT_EQ(pgtable_level(table_page_of(p->mm()->phys, p->mm()->pgd)), TableLevel::kPgd);
}

TEST_F(PgtableWalkCheckTest, ATableOfAnotherLevelIsABug) {
  THREADSAFE_DEATH_TESTS();
  Mm *mm = p->mm();
  set_level(pmd_table, static_cast<uint64_t>(TableLevel::kPte));
  EXPECT_DEATH(walk(mm, a), "VM_BUG_ON_PAGE.*a table of another level");
  EXPECT_DEATH(walk_page_range(mm, a, a + PAGE_SIZE, PageWalkOps{}), "a table of another level");
  set_level(pmd_table, static_cast<uint64_t>(TableLevel::kPmd));
  set_level(pte_table, static_cast<uint64_t>(TableLevel::kPmd));
  EXPECT_DEATH(walk(mm, a), "VM_BUG_ON_PAGE.*a table of another level");
  set_level(pte_table, static_cast<uint64_t>(TableLevel::kPte));
  walk(mm, a);  // and back to a table of the right level
}

TEST_F(PgtableWalkCheckTest, AnotherMmsTableIsABug) {
  THREADSAFE_DEATH_TESTS();
  Process *q = sys->new_process("other");
  ASSERT_TRUE(q);
  set_owner(pte_table, q->mm());
  EXPECT_DEATH(walk(p->mm(), a), "VM_BUG_ON_PAGE.*another mm's table");
  set_owner(pte_table, p->mm());
  walk(p->mm(), a);
}

// Under cow.policy rfc the finding is recorded in the System and the walk
// goes on, as every VM_BUG_ON on an object of the System is.
TEST_F(PgtableWalkCheckTest, UnderRfcAWrongLevelIsRecorded) {
  ASSERT_EQ(sys->tune("cow.policy", "rfc"), 0);
  set_level(pmd_table, static_cast<uint64_t>(TableLevel::kPud));
  walk(p->mm(), a);
  set_level(pmd_table, static_cast<uint64_t>(TableLevel::kPmd));
  const std::vector<std::string> w = sys->warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("a table of another level"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("table page: pfn:"), std::string::npos) << w[0];
}

#else

// Release builds record nothing in a table page: the bookkeeping costs no
// store, and the checks compile to nothing.
TEST_F(PgtableWalkCheckTest, ReleaseBuildsRecordNothing) {
  EXPECT_EQ(static_cast<uint64_t>(pgtable_level(pte_table)), 0u);
  EXPECT_EQ(pgtable_mm(pte_table), nullptr);
  set_level(pte_table, static_cast<uint64_t>(TableLevel::kPmd));
  walk(p->mm(), a);
  set_level(pte_table, 0);
}

#endif

} // namespace
} // namespace mmlab::test
