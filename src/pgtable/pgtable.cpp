// Page-table pages: allocation, the walk down with allocation, the split
// locks, the batch helpers, and deferred freeing for lockless walkers.
#include "pgtable/pgtable.h"

#include <cstring>

#include "sync/cpu.h"
#include "sync/sched.h"

namespace mmlab {

DeferredTables::DeferredTables() : walkers(std::make_unique<WalkerSlot[]>(NR_CPUS)) {}

// pgd_alloc (arch/x86/mm/pgtable.c) at mm creation, pgd_free at its end.
Mm::Mm(Kernel* k, PhysMem* phys_mem, Stats* st, DeferredTables* dt, int id)
    : kernel(k), phys(phys_mem), stats(st), deferred_tables(dt), mm_id(id) {
  write_protect_seq.id = static_cast<uint64_t>(id);
  Page* t = pgtable_alloc(this, TableLevel::kPgd);
  if (t) pgd = static_cast<pgd_t*>(phys->page_address(t));
}

Mm::~Mm() {
  // exit_mmap() has run: only the PGD is left.
  if (pgd) pgtable_free(this, table_page_of(phys, pgd));
  if (test_flag(MMF_HUGE_ZERO_PAGE)) phys->mm_put_huge_zero_folio();
  pgtable_reclaim_deferred(this);
}

Page* pgtable_alloc(Mm* mm, TableLevel level) {
  if (mm->phys->should_fail(FaultSite::pgtable_alloc)) return nullptr;
  Page* p = mm->phys->alloc_pages(GFP_PGTABLE_USER, 0);
  if (!p) return nullptr;
  set_bit(PG_table, p);
  p->pt.ptl = SpinLock{};
  p->pt.nr_entries = 0;
  p->pt.free_next = 0;
  // The first-use record (pte_first_use): all clear, nothing used yet.
  p->index = level == TableLevel::kPte ? reinterpret_cast<uint64_t>(new uint64_t[2 * kFirstUseWords]()) : 0;
  if constexpr (kDebugVm) {
    // Before the table is linked: the entry that links it publishes these.
    aref(p->private_).store(static_cast<uint64_t>(level), std::memory_order_relaxed);
    aref(p->mapping).store(reinterpret_cast<uint64_t>(mm), std::memory_order_relaxed);
  }
  mm->pgtables_bytes.fetch_add(PAGE_SIZE, std::memory_order_relaxed);
  mm->stats->count(Event::pgtable_alloc);
  mm->stats->count(VmStat::nr_page_table_pages);
  return p;
}

// Every mm of a Kernel shares its PhysMem and Stats: any of them frees any table.
static void pgtable_release(Mm* mm, Page* table) {
  delete[] pte_first_use_bits(table);
  table->index = 0;
  clear_bit(PG_table, table);
  aref(table->refcount).store(0, std::memory_order_release);
  mm->stats->count(Event::pgtable_free);
  mm->stats->uncount(VmStat::nr_page_table_pages);
  mm->phys->free_pages(table, 0);
}

void pgtable_free(Mm* mm, Page* table) {
  VM_BUG_ON_PAGE(pgtable_mm(table) != mm, table, "freeing another mm's page table");
  mm->pgtables_bytes.fetch_sub(PAGE_SIZE, std::memory_order_relaxed);
  pgtable_free_deferred(mm, table);
}

// ---- deferred freeing: an epoch scheme standing in for RCU ----
//
// A lockless walker publishes the epoch it started in; a table unlinked at
// epoch E may be freed once no walker is active with an epoch <= E.

// The epochs are schedule points (sync/sched.h): a walker's begin and end
// as a shared acquire and release of the Kernel's walkers, a deferred free
// and a sync as the writes they are.
static sched::Object walkers_object(DeferredTables* k) { return {k, sched::ObjKind::kWalkers}; }

void lockless_walk_begin(Mm* mm) {
  DeferredTables* k = mm->deferred_tables;
  sched::point("lockless_walk_begin", sched::Op::kAcquireShared, walkers_object(k));
  auto& slot = k->walkers[smp_processor_id()];
  if (slot.depth++) return;  // an outer walk's epoch is older, and holds
  // seq_cst: the published epoch must be visible before we read any entry.
  slot.active_epoch.store(k->walk_epoch.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
}

void lockless_walk_end(Mm* mm) {
  sched::point("lockless_walk_end", sched::Op::kReleaseShared, walkers_object(mm->deferred_tables));
  auto& slot = mm->deferred_tables->walkers[smp_processor_id()];
  VM_BUG_ON(!slot.depth, "lockless_walk_end without a walk");
  if (--slot.depth) return;
  slot.active_epoch.store(0, std::memory_order_release);
}

static uint64_t oldest_active_walker(DeferredTables* k) {
  uint64_t oldest = ~0ull;
  for (int i = 0; i < NR_CPUS; i++) {
    uint64_t e = k->walkers[i].active_epoch.load(std::memory_order_seq_cst);
    if (e && e < oldest) oldest = e;
  }
  return oldest;
}

void pgtable_free_deferred(Mm* mm, Page* table) {
  DeferredTables* k = mm->deferred_tables;
  sched::point("pgtable_free_deferred", sched::Op::kRmw, walkers_object(k));
  uint64_t epoch = k->walk_epoch.fetch_add(1, std::memory_order_seq_cst);
  if (oldest_active_walker(k) > epoch) {  // nobody can still see it
    pgtable_release(mm, table);
  } else {
    MutexGuard g(&k->lock);
    k->tables.push_back({table, epoch});
  }
  pgtable_reclaim_deferred(mm);
}

void pgtable_reclaim_deferred(Mm* mm) {
  DeferredTables* k = mm->deferred_tables;
  std::vector<Page*> ready;
  {
    MutexGuard g(&k->lock);
    if (k->tables.empty()) return;
    uint64_t oldest = oldest_active_walker(k);
    auto& v = k->tables;
    for (size_t i = 0; i < v.size();) {
      if (v[i].epoch < oldest) {
        ready.push_back(v[i].table);
        v[i] = v.back();
        v.pop_back();
      } else {
        i++;
      }
    }
  }
  for (Page* t : ready) pgtable_release(mm, t);
}

void tlb_remove_table_sync_one(Mm* mm) {
  DeferredTables* k = mm->deferred_tables;
  // Walkers that start from now on publish a later epoch (and read the
  // entries as they are now); only those with an epoch <= this one began
  // before and may still hold what they read.
  sched::point("tlb_remove_table_sync_one", sched::Op::kRmw, walkers_object(k));
  const uint64_t epoch = k->walk_epoch.fetch_add(1, std::memory_order_seq_cst);
  if (oldest_active_walker(k) > epoch) return;  // no walker to wait for: no wait step
  sched::wait_until("tlb_remove_table_sync_one", walkers_object(k),
                    [k, epoch] { return oldest_active_walker(k) > epoch; });
}

// ---- the walk down, allocating ----

pud_t* pud_alloc(Mm* mm, uint64_t addr) {
  pgd_t* pgd = pgd_offset(mm, addr);
  pgd_t e = pgdp_get(pgd);
  if (pgd_none(e)) {
    Page* t = pgtable_alloc(mm, TableLevel::kPud);
    if (!t) return nullptr;
    SpinGuard g(&mm->page_table_lock, LockClass::kPageTableLock);
    e = pgdp_get(pgd);
    if (pgd_none(e)) {
      e = mk_table_pgd(mm->phys->page_to_pfn(t));
      entry_set(pgd, e);
      t = nullptr;
    }
    g.unlock();
    if (t) pgtable_free(mm, t);  // somebody else won the race
  }
  assert_table_page(mm, mm->phys->pfn_to_page(pgd_pfn(e)), TableLevel::kPud);
  return pud_offset(mm->phys, e, addr);
}

pmd_t* pmd_alloc(Mm* mm, pud_t* pud, uint64_t addr) {
  pud_t e = pudp_get(pud);
  if (pud_none(e)) {
    Page* t = pgtable_alloc(mm, TableLevel::kPmd);
    if (!t) return nullptr;
    SpinGuard g(&mm->page_table_lock, LockClass::kPageTableLock);
    e = pudp_get(pud);
    if (pud_none(e)) {
      e = mk_table_pud(mm->phys->page_to_pfn(t));
      entry_set(pud, e);
      t = nullptr;
    }
    g.unlock();
    if (t) pgtable_free(mm, t);
  }
  if (pud_leaf(e)) return nullptr;  // a PUD leaf has no PMD table under it
  assert_table_page(mm, mm->phys->pfn_to_page(pud_pfn(e)), TableLevel::kPmd);
  return pmd_offset(mm->phys, e, addr);
}

bool pte_alloc(Mm* mm, pmd_t* pmd) {
  if (!pmd_none(pmdp_get(pmd))) return true;
  Page* t = pte_alloc_one(mm);
  if (!t) return false;
  SpinLock* ptl = pmd_lock(mm, pmd);
  ptl->assert_held();
  if (pmd_none(pmdp_get(pmd))) {
    entry_set(pmd, mk_table_pmd(mm->phys->page_to_pfn(t)));
    t = nullptr;
  }
  ptl->unlock();
  if (t) pgtable_free(mm, t);
  return true;
}

pud_t* mm_find_pud(Mm* mm, uint64_t addr) {
  pgd_t pgd = pgdp_get(pgd_offset(mm, addr));
  if (!pgd_present(pgd)) return nullptr;
  assert_table_page(mm, mm->phys->pfn_to_page(pgd_pfn(pgd)), TableLevel::kPud);
  return pud_offset(mm->phys, pgd, addr);
}

pmd_t* mm_find_pmd(Mm* mm, uint64_t addr) {
  pud_t* pud = mm_find_pud(mm, addr);
  if (!pud) return nullptr;
  pud_t e = pudp_get(pud);
  if (!pud_present(e) || pud_leaf(e)) return nullptr;
  assert_table_page(mm, mm->phys->pfn_to_page(pud_pfn(e)), TableLevel::kPmd);
  return pmd_offset(mm->phys, e, addr);
}

// ---- locks ----

SpinLock* pmd_lock(Mm* mm, pmd_t* pmdp) {
  assert_table_of(mm, pmdp, TableLevel::kPmd);
  SpinLock* l = spin_lock_returned(pmd_lockptr(mm, pmdp), LockClass::kPmdLock);
  mm->stats->count(Event::pmd_lock);
  return l;
}

SpinLock* pud_lock(Mm* mm, pud_t* pudp) {
  return spin_lock_returned(pud_lockptr(mm, pudp), LockClass::kPageTableLock);
}

pte_t* pte_offset_map(Mm* mm, pmd_t* pmd, uint64_t addr, pmd_t* pmdvalp) {
  pmd_t v = pmdp_get(pmd);
  if (pmdvalp) *pmdvalp = v;
  if (!pmd_present(v) || pmd_leaf(v) || pmd_none(v)) return nullptr;
  assert_table_page(mm, mm->phys->pfn_to_page(pmd_pfn(v)), TableLevel::kPte);
  return pte_offset(mm->phys, v, addr);
}

bool pte_lock_if_unchanged(Mm* mm, pmd_t* pmd, pmd_t pmdval, SpinLock** ptlp, int subclass) {
  SpinLock* ptl = spin_lock_returned(pte_lockptr(mm->phys, pmdval), LockClass::kPteLock, subclass);
  mm->stats->count(Event::pte_lock);
  // The table may have been retracted or replaced while we were not holding its lock.
  if (!(pmdp_get(pmd) == pmdval)) {
    ptl->assert_held();
    ptl->unlock();
    return false;
  }
  *ptlp = ptl;
  return true;
}

pte_t* pte_offset_map_lock(Mm* mm, pmd_t* pmd, uint64_t addr, SpinLock** ptlp, int subclass) {
  // Once the lock is held and the PMD still points at the table, nothing
  // can free it: PT_RECLAIM clears the PMD under this lock too.
  PteTableReadSection rcu(mm);
  for (;;) {
    pmd_t v;
    pte_t* pte = pte_offset_map(mm, pmd, addr, &v);
    if (!pte) return nullptr;
    if (pte_lock_if_unchanged(mm, pmd, v, ptlp, subclass)) return pte;
  }
}

// ---- batch helpers ----

void __set_ptes(pte_t* ptep, pte_t pte, unsigned nr) {
  for (unsigned i = 0; i < nr; i++) {
    entry_set(ptep + i, pte);
    pte.v += PAGE_SIZE;  // next pfn, same bits
  }
}

void pte_first_use_forget(Page* table, unsigned idx, unsigned nr) {
  uint64_t* bits = pte_first_use_bits(table);
  VM_BUG_ON_PAGE(!bits || idx + nr > PTRS_PER_PTE, table, "first-use record of a PTE table out of range");
  for (unsigned i = idx; i < idx + nr; i++)
    for (unsigned mode = 0; mode < 2; mode++)
      std::atomic_ref<uint64_t>(bits[mode * kFirstUseWords + i / 64]).fetch_and(~(1ull << (i % 64)), std::memory_order_relaxed);
}

void set_ptes(Mm* mm, uint64_t addr, pte_t* ptep, pte_t pte, unsigned nr) {
  mm->stats->count(Event::pte_set, nr);
  pte_first_use_forget(table_page_of(mm->phys, ptep), pte_index(addr), nr);
  if (const ContPteOps* c = contpte_ops(mm)) [[unlikely]] {
    c->set_ptes(mm, addr, ptep, pte, nr);
    return;
  }
  __set_ptes(ptep, pte, nr);
}

void ptep_set_access_flags(Mm* mm, uint64_t addr, pte_t* ptep, pte_t entry) {
  if (const ContPteOps* c = contpte_ops(mm)) [[unlikely]] c->set_access_flags(mm, addr, ptep, entry);
  entry_set(ptep, entry);
}

pte_t get_and_clear_full_ptes(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  mm->stats->count(Event::pte_clear, nr);
  if (const ContPteOps* c = contpte_ops(mm)) [[unlikely]] c->clear(mm, addr, ptep, nr);
  pte_t first = entry_xchg(ptep, pte_t{0});
  for (unsigned i = 1; i < nr; i++) {
    pte_t e = entry_xchg(ptep + i, pte_t{0});
    first.v |= e.v & (_PAGE_DIRTY | _PAGE_ACCESSED);
  }
  return first;
}

pte_t ptep_modify_prot_start(Mm* mm, uint64_t addr, pte_t* ptep) {
  if (const ContPteOps* c = contpte_ops(mm)) [[unlikely]] c->clear(mm, addr, ptep, 1);
  mm->stats->count(Event::pte_modify);
  return entry_xchg(ptep, pte_t{0});
}

void ptep_modify_prot_commit(pte_t* ptep, pte_t old, pte_t pte) {
  pte.v |= old.v & (_PAGE_ACCESSED | _PAGE_DIRTY);
  entry_set(ptep, pte);
}

void wrprotect_ptes(Mm* mm, uint64_t addr, pte_t* ptep, unsigned nr) {
  mm->stats->count(Event::pte_wrprotect, nr);
  if (const ContPteOps* c = contpte_ops(mm)) [[unlikely]] c->wrprotect(mm, addr, ptep, nr);
  for (unsigned i = 0; i < nr; i++) entry_clear_bits(ptep + i, _PAGE_RW);
}

void clear_young_dirty_ptes(Mm*, uint64_t, pte_t* ptep, unsigned nr, cydp_t flags) {
  for (unsigned i = 0; i < nr; i++) {
    if (flags == CYDP_CLEAR_YOUNG) {
      entry_clear_bits(ptep + i, _PAGE_ACCESSED);
      continue;
    }
    pte_t e = entry_xchg(ptep + i, pte_t{0});
    if (flags & CYDP_CLEAR_YOUNG) e = pte_mkold(e);
    if (flags & CYDP_CLEAR_DIRTY) e = pte_mkclean(e);
    entry_set(ptep + i, e);
  }
}

static uint64_t fpb_mask(fpb_t flags) {
  uint64_t ignore = _PAGE_ACCESSED;
  if (!(flags & FPB_RESPECT_DIRTY)) ignore |= _PAGE_DIRTY;
  if (!(flags & FPB_RESPECT_SOFT_DIRTY)) ignore |= _PAGE_SOFT_DIRTY;
  if (!(flags & FPB_RESPECT_WRITE)) ignore |= _PAGE_RW;
  return ~ignore;
}

unsigned folio_pte_batch_flags(Folio* folio, const Vma*, pte_t* ptep, pte_t* ptentp, unsigned max_nr,
                               fpb_t flags) {
  pte_t first = *ptentp;
  PhysMem* phys = PhysMem::of(&folio->page);
  long folio_end_pfn = static_cast<long>(folio_pfn(folio) + folio_nr_pages(folio));
  long left_in_folio = folio_end_pfn - static_cast<long>(pte_pfn(first));
  (void)phys;
  unsigned limit = static_cast<unsigned>(std::min<long>(max_nr, left_in_folio));
  uint64_t mask = fpb_mask(flags);
  uint64_t expected = first.v & mask;
  bool any_write = pte_write(first), any_young = pte_young(first), any_dirty = pte_dirty(first);
  unsigned nr = 1;
  for (; nr < limit; nr++) {
    expected += PAGE_SIZE;
    pte_t e = ptep_get(ptep + nr);
    if (!pte_present(e) || (e.v & mask) != expected) break;
    any_write |= pte_write(e);
    any_young |= pte_young(e);
    any_dirty |= pte_dirty(e);
  }
  if ((flags & FPB_MERGE_WRITE) && any_write) *ptentp = pte_mkwrite_novma(*ptentp);
  if (flags & FPB_MERGE_YOUNG_DIRTY) {
    if (any_young) *ptentp = pte_mkyoung(*ptentp);
    if (any_dirty) ptentp->v |= _PAGE_DIRTY;
  }
  return nr;
}

}  // namespace mmlab
