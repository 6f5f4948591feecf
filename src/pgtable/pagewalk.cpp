#include "pgtable/pagewalk.h"

#include "pgtable/pgtable.h"

namespace mmlab {

void walk_page_range(Mm* mm, uint64_t start, uint64_t end, const PageWalkOps& ops) {
  PhysMem* phys = mm->phys;
  if (mm->pgd) assert_table_of(mm, mm->pgd, TableLevel::kPgd);
  if (ops.table && mm->pgd) ops.table(4, 0, table_page_of(phys, mm->pgd));
  for (uint64_t ga = round_down(start, PGDIR_SIZE); ga < end && ga < TASK_SIZE + PAGE_SIZE; ga += PGDIR_SIZE) {
    pgd_t g = pgdp_get(pgd_offset(mm, ga));
    if (!pgd_present(g)) continue;
    assert_table_page(mm, phys->pfn_to_page(pgd_pfn(g)), TableLevel::kPud);
    if (ops.table) ops.table(3, ga, phys->pfn_to_page(pgd_pfn(g)));
    auto* puds = table_of<pud_t>(phys, pgd_pfn(g));
    for (unsigned i = 0; i < PTRS_PER_PUD; i++) {
      uint64_t ua = ga + i * PUD_SIZE;
      if (ua + PUD_SIZE <= start || ua >= end) continue;
      pud_t u = pudp_get(&puds[i]);
      if (pud_none(u)) continue;
      if (pud_leaf(u)) {
        if (ops.pud_leaf) ops.pud_leaf(ua, &puds[i]);
        continue;
      }
      assert_table_page(mm, phys->pfn_to_page(pud_pfn(u)), TableLevel::kPmd);
      if (ops.table) ops.table(2, ua, phys->pfn_to_page(pud_pfn(u)));
      auto* pmds = table_of<pmd_t>(phys, pud_pfn(u));
      for (unsigned j = 0; j < PTRS_PER_PMD; j++) {
        uint64_t ma = ua + j * PMD_SIZE;
        if (ma + PMD_SIZE <= start || ma >= end) continue;
        pmd_t m = pmdp_get(&pmds[j]);
        if (pmd_none(m)) continue;
        if (m.v & _PAGE_PSE) {
          if (ops.pmd_leaf) ops.pmd_leaf(ma, &pmds[j]);
          continue;
        }
        assert_table_page(mm, phys->pfn_to_page(pmd_pfn(m)), TableLevel::kPte);
        if (ops.table) ops.table(1, ma, phys->pfn_to_page(pmd_pfn(m)));
        if (!ops.pte_entry) continue;
        auto* ptes = table_of<pte_t>(phys, pmd_pfn(m));
        for (unsigned k = 0; k < PTRS_PER_PTE; k++) {
          uint64_t pa = ma + k * PAGE_SIZE;
          if (pa < start || pa >= end) continue;
          if (!pte_none(ptep_get(&ptes[k]))) ops.pte_entry(pa, &ptes[k]);
        }
      }
    }
  }
}

}  // namespace mmlab
