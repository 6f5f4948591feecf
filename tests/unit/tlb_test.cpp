// The TLB model (src/tlb/, docs/TLB.md): x86's flush rules
// (tlb_single_page_flush_ceiling at the page and the PMD stride,
// TLB_FLUSH_ALL, ptep_clear_flush of an inaccessible entry), the IPI targets
// of v6.18 x86 (lazy CPUs, page-table freeing), arm64's contpte fold and
// unfold rules, 16K/32K folios never folding, and misses per level with
// each geometry. Other simulated CPUs are driven through the layer's
// switch_mm_irqs_off/enter_lazy_tlb; this thread's CPU through user
// accesses.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "mm/mm.h"
#include "pgtable/pgtable.h"
#include "test_util.h"
#include "tlb/tlb.h"

namespace mmlab::test {
namespace {

class TlbTest : public MmTest {
 protected:
  void SetUp() override {
    MmTest::SetUp();
    set("transparent_hugepage/enabled", "never");
    set("transparent_hugepage/hugepages-2048kB/enabled", "never");
  }
  void geometry(const char* g) { ASSERT_EQ(sys->tune("tlb.geometry", g), 0) << g; }
  TlbState* tlb() { return &sys->kernel()->tlb; }
  Mm* mm() { return p->mm(); }
  int64_t c(const char* name) { return sys->counter(name); }
  int64_t vm(VmStat s) { return sys->kernel()->stats->read(s); }
  int here() { return smp_processor_id(); }
  int other(int k) { return (here() + k) % NR_CPUS; }
  bool held(uint64_t addr) { return tlb_holds(tlb(), here(), &mm()->tlb_ctx, addr); }
  bool in_mask(int cpu) { return mm()->tlb_ctx.cpumask.load() & (1ull << cpu); }
  Vma* vma_at(uint64_t addr) NO_THREAD_SAFETY_ANALYSIS {
    mmap_read_lock(mm());
    Vma* v = vma_lookup(mm(), addr);
    mmap_read_unlock(mm());
    return v;
  }
  pte_t* pte_ptr(uint64_t addr) {
    pmd_t* pmd = mm_find_pmd(mm(), addr);
    if (!pmd) return nullptr;
    pmd_t v = pmdp_get(pmd);
    if (pmd_none(v) || pmd_leaf(v)) return nullptr;
    return pte_offset(sys->kernel()->phys.get(), v, addr);
  }
  bool folded(uint64_t addr) { return contpte_block_folded(mm(), addr, pte_ptr(addr)); }
  // A 64K-aligned private region of len written with `byte` (one access
  // per page: every page gets its TLB lookup).
  uint64_t written(uint64_t len, uint8_t byte = 1) {
    uint64_t a = map_aligned(len, k64K);
    EXPECT_TRUE(p->fill(a, byte, len).ok());
    return a;
  }
};

// ---- x86's flush rules ----

// System::tlb_occupancy: nothing without a geometry; with one, the entries
// a user access filled, at the size of the translation (a 2M THP's one
// entry covers 2M, 4K pages 4K each), summed over the CPUs.
TEST_F(TlbTest, OccupancyCountsEntriesAndTheirReach) {
  set("transparent_hugepage/hugepages-2048kB/enabled", "always");
  const uint64_t thp = map_aligned(p, PMD_SIZE);
  const long small = p->mmap(0, 8 * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(small, 0);
  ASSERT_TRUE(p->fill(thp, 1, PMD_SIZE).ok());
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(small), 1, 8 * PAGE_SIZE).ok());
  const System::TlbOccupancy off = sys->tlb_occupancy();
  EXPECT_EQ(off.l1_entries + off.l2_entries + off.l1_bytes + off.l2_bytes, 0u);

  geometry("x86-intel");
  uint8_t b;
  ASSERT_TRUE(p->read(thp + PAGE_SIZE, &b, 1).ok());
  for (int i = 0; i < 8; i++) ASSERT_TRUE(p->read(static_cast<uint64_t>(small) + i * PAGE_SIZE, &b, 1).ok());
  const System::TlbOccupancy on = sys->tlb_occupancy();
  // One 2M entry and eight 4K entries, in L1 or L2 (Skylake fills both).
  EXPECT_GE(on.l1_entries + on.l2_entries, 9u);
  EXPECT_EQ(on.l1_bytes % PAGE_SIZE, 0u);
  EXPECT_GE(on.l1_bytes + on.l2_bytes, PMD_SIZE + 8 * PAGE_SIZE);
  EXPECT_EQ(on.l1_entries, tlb_reach(tlb(), 1).entries);
  EXPECT_EQ(on.l2_bytes, tlb_reach(tlb(), 2).bytes);
  uint64_t counted = 0;
  for (int cpu = 0; cpu < NR_CPUS; cpu++) counted += tlb_count_entries(tlb(), cpu, 1, kTlb2M);
  EXPECT_EQ(counted, 1u);  // the THP's one entry, on this thread's CPU

  // A full flush empties this mm's entries from every level.
  flush_tlb_mm(mm());
  const System::TlbOccupancy flushed = sys->tlb_occupancy();
  EXPECT_EQ(flushed.l1_entries + flushed.l2_entries, 0u);
}

TEST_F(TlbTest, CeilingOf33EntriesAtThePageStride) {
  geometry("x86-intel");
  const uint64_t a = written(64 * PAGE_SIZE);
  ASSERT_TRUE(held(a) && held(a + 40 * PAGE_SIZE));
  const int64_t range = c("tlb.flush_range"), full = c("tlb.flush_full");
  flush_tlb_mm_range(mm(), a, a + 33 * PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_range"), range + 1);
  EXPECT_EQ(c("tlb.flush_full"), full);
  EXPECT_FALSE(held(a));
  EXPECT_FALSE(held(a + 32 * PAGE_SIZE));
  EXPECT_TRUE(held(a + 33 * PAGE_SIZE)) << "33 entries: a ranged flush leaves the rest";
  flush_tlb_mm_range(mm(), a + 33 * PAGE_SIZE, a + 67 * PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_full"), full + 1) << "34 entries: over the ceiling";
  EXPECT_FALSE(held(a + 40 * PAGE_SIZE));
  EXPECT_EQ(vm(VmStat::nr_tlb_local_flush_one), 33);
  EXPECT_EQ(vm(VmStat::nr_tlb_local_flush_all), 1);
}

TEST_F(TlbTest, CeilingAtThePmdStrideAndOneEntry) {
  geometry("x86-intel");
  const uint64_t a = 1ull << 40;
  const int64_t range = c("tlb.flush_range"), full = c("tlb.flush_full"), single = c("tlb.flush_single");
  flush_tlb_mm_range(mm(), a, a + 33 * PMD_SIZE, PMD_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_range"), range + 1) << "33 PMD entries are within the ceiling";
  flush_tlb_mm_range(mm(), a, a + 34 * PMD_SIZE, PMD_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_full"), full + 1);
  // The same 2M at the page stride is 512 entries: a full flush.
  flush_tlb_mm_range(mm(), a, a + PMD_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_full"), full + 2);
  Vma* v = vma_at(written(PAGE_SIZE));
  flush_pmd_tlb_range(v, a, a + PMD_SIZE);
  EXPECT_EQ(c("tlb.flush_single"), single + 1);
}

TEST_F(TlbTest, FlushAllAndFlushTlbMmAreFull) {
  geometry("x86-amd");
  const uint64_t a = written(4 * PAGE_SIZE);
  ASSERT_TRUE(held(a));
  const int64_t full = c("tlb.flush_full");
  flush_tlb_mm_range(mm(), a, TLB_FLUSH_ALL, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_full"), full + 1);
  EXPECT_FALSE(held(a));
  ASSERT_TRUE(p->fill(a, 2, PAGE_SIZE).ok());
  ASSERT_TRUE(held(a));
  flush_tlb_mm(mm());
  EXPECT_EQ(c("tlb.flush_full"), full + 2);
  EXPECT_FALSE(held(a));
}

TEST_F(TlbTest, PtepClearFlushFlushesOnlyAnAccessibleEntry) {
  geometry("x86-intel");
  Vma* v = vma_at(written(PAGE_SIZE));
  // No page there: a stand-alone entry, in the page's PTE table (half a
  // table away), as the flush's entry must be.
  const uint64_t addr = (v->vm_start & PMD_MASK) | ((v->vm_start + PMD_SIZE / 2) & ~PMD_MASK);
  pte_t* slot = pte_ptr(v->vm_start) - pte_index(v->vm_start) + pte_index(addr);
  ASSERT_TRUE(pte_none(ptep_get(slot)));
  const int64_t flushes = c("tlb.flush");
  entry_set(slot, pte_t{_PAGE_PROTNONE | _PAGE_USER | (1234ull << PAGE_SHIFT)});  // PROT_NONE: not accessible
  EXPECT_EQ(ptep_clear_flush(v, addr, slot).v & _PAGE_PROTNONE, _PAGE_PROTNONE);
  EXPECT_EQ(c("tlb.flush"), flushes) << "an inaccessible entry cannot be cached";
  entry_set(slot, pte_t{_PAGE_PRESENT | _PAGE_USER | (1234ull << PAGE_SHIFT)});
  ptep_clear_flush(v, addr, slot);
  EXPECT_EQ(c("tlb.flush"), flushes + 1);
  EXPECT_EQ(c("tlb.flush_single"), 1);
  EXPECT_TRUE(pte_none(ptep_get(slot)));
}

#if defined(MMLAB_DEBUG_VM)
// The TLB layer checks the table of the entries it is handed (debug
// builds): a flush of a PMD entry as if it were a PTE, or the reverse, is a
// bug caught before anything is cleared. The frame store is not inherited
// by a fork (MADV_DONTFORK): the death test's child runs the test again.
TEST_F(TlbTest, AnEntryOfAnotherLevelIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Vma* v = vma_at(written(PAGE_SIZE));
  const uint64_t a = v->vm_start;
  pmd_t* pmd = mm_find_pmd(mm(), a);
  ASSERT_TRUE(pmd);
  EXPECT_DEATH(ptep_clear_flush(v, a, reinterpret_cast<pte_t*>(pmd)), "VM_BUG_ON_PAGE.*a table of another level");
  EXPECT_DEATH(pmdp_collapse_flush(v, a & PMD_MASK, reinterpret_cast<pmd_t*>(pte_ptr(a))),
               "VM_BUG_ON_PAGE.*a table of another level");
  EXPECT_FALSE(pte_none(ptep_get(pte_ptr(a))));
}
#endif

// ---- IPIs ----

TEST_F(TlbTest, IpisGoToCpusRunningTheMmAndNotLazy) {
  geometry("x86-intel");
  const uint64_t a = written(PAGE_SIZE);  // this CPU runs the mm
  Process* q = sys->new_process("other");
  ASSERT_TRUE(q);
  const int c1 = other(1), c2 = other(2), lazy = other(3), away = other(4);
  for (int cpu : {c1, c2, lazy, away}) switch_mm_irqs_off(tlb(), cpu, &mm()->tlb_ctx);
  enter_lazy_tlb(tlb(), lazy);
  switch_mm_irqs_off(tlb(), away, &q->mm()->tlb_ctx);  // left in the mask, runs another mm
  ASSERT_TRUE(in_mask(away));
  const int64_t ipis = c("tlb.ipi"), sent = vm(VmStat::nr_tlb_remote_flush);
  flush_tlb_mm_range(mm(), a, a + PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.ipi"), ipis + 2) << "the two CPUs running the mm, not the lazy one nor the one that left";
  EXPECT_EQ(vm(VmStat::nr_tlb_remote_flush), sent + 1);
  EXPECT_EQ(vm(VmStat::nr_tlb_remote_flush_received), 2);
  EXPECT_EQ(tlb()->cpus[c1].counters.ipis_received.load(), 1u);
  EXPECT_EQ(tlb()->cpus[lazy].counters.ipis_received.load(), 0u);
  EXPECT_TRUE(in_mask(away)) << "no IPI reached it, so it stays in the cpumask";
  // A lazy CPU that comes back catches up by itself: no IPI then either.
  switch_mm_irqs_off(tlb(), lazy, &mm()->tlb_ctx);
  EXPECT_EQ(c("tlb.ipi"), ipis + 2);
}

TEST_F(TlbTest, FreedPageTablesSendIpisToTheWholeCpumask) {
  geometry("x86-intel");
  const uint64_t a = written(PAGE_SIZE);
  Process* q = sys->new_process("other");
  ASSERT_TRUE(q);
  const int c1 = other(1), lazy = other(2), away = other(3);
  for (int cpu : {c1, lazy, away}) switch_mm_irqs_off(tlb(), cpu, &mm()->tlb_ctx);
  enter_lazy_tlb(tlb(), lazy);
  switch_mm_irqs_off(tlb(), away, &q->mm()->tlb_ctx);
  const int64_t ipis = c("tlb.ipi");
  flush_tlb_mm_range(mm(), a, a + PMD_SIZE, PAGE_SHIFT, /*freed_tables=*/true);
  EXPECT_EQ(c("tlb.ipi"), ipis + 3) << "every CPU in the cpumask, the lazy one too";
  EXPECT_FALSE(in_mask(away)) << "the IPI found it running another mm and took it out";
  bool is_lazy = true;
  EXPECT_EQ(tlb_loaded_ctx(tlb(), lazy, &is_lazy), 0u) << "the lazy CPU switched to init_mm";
  EXPECT_FALSE(is_lazy);
  // munmap of the last page frees its page table: the gather's one flush
  // carries freed_tables.
  switch_mm_irqs_off(tlb(), away, &mm()->tlb_ctx);
  enter_lazy_tlb(tlb(), away);
  const int64_t before = c("tlb.ipi"), flushes = c("tlb.flush");
  ASSERT_EQ(p->munmap(a, PAGE_SIZE), 0);
  EXPECT_EQ(c("tlb.flush"), flushes + 1) << "one mmu_gather flush for the zap and the table";
  EXPECT_EQ(c("tlb.ipi"), before + 3) << "c1, the lazy CPU, and the one the first flush sent to init_mm";
  EXPECT_EQ(mm()->tlb_ctx.cpumask.load() & (1ull << lazy), 0u) << "that one is out of the cpumask now";
}

TEST_F(TlbTest, OffCountsFlushesButTracksNoCpu) {
  const uint64_t a = written(PAGE_SIZE);
  EXPECT_EQ(mm()->tlb_ctx.cpumask.load(), 0u);
  flush_tlb_mm_range(mm(), a, a + PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.flush_single"), 1);
  EXPECT_EQ(c("tlb.lookup"), 0);
  EXPECT_EQ(c("tlb.ipi"), 0);
}

// A thread that ran the mm and exited leaves its CPU idle, which is lazy:
// no IPI for a flush, one when page tables are freed.
TEST_F(TlbTest, ACpuWhoseThreadExitedIsLazy) {
  geometry("x86-intel");
  const uint64_t a = written(PAGE_SIZE);
  int cpu = -1;
  std::thread t([&] {
    uint8_t b;
    EXPECT_TRUE(p->read(a, &b, 1).ok());
    cpu = smp_processor_id();
  });
  t.join();
  ASSERT_NE(cpu, here());
  ASSERT_TRUE(in_mask(cpu));
  bool lazy = false;
  EXPECT_EQ(tlb_loaded_ctx(tlb(), cpu, &lazy), mm()->tlb_ctx.ctx_id);
  EXPECT_TRUE(lazy);
  const int64_t ipis = c("tlb.ipi");
  flush_tlb_mm_range(mm(), a, a + PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  EXPECT_EQ(c("tlb.ipi"), ipis);
  flush_tlb_mm_range(mm(), a, a + PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/true);
  EXPECT_EQ(c("tlb.ipi"), ipis + 1);
}

// Threads of one process on their own simulated CPUs read while this one
// zaps and refaults: every zap's flush sends IPIs to the CPUs running the
// mm (TSan: fills, flushes and switches of the per-CPU TLBs race cleanly).
TEST_F(TlbTest, ConcurrentReadersReceiveTheZapsIpis) {
  geometry("x86-amd");
  const uint64_t a = written(16 * PAGE_SIZE);
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; t++)
    readers.emplace_back([&] {
      uint8_t buf[64];
      bool counted = false;
      while (!stop.load()) {
        EXPECT_TRUE(p->read(a, buf, sizeof(buf)).ok());
        if (!counted) started.fetch_add(1);
        counted = true;
      }
    });
  while (started.load() < 2) std::this_thread::yield();
  const int64_t ipis = c("tlb.ipi");
  for (int i = 0; i < 50; i++) {
    ASSERT_EQ(p->madvise(a, 4 * PAGE_SIZE, MADV_DONTNEED), 0);
    ASSERT_TRUE(p->fill(a, 1, 4 * PAGE_SIZE).ok());
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_GE(c("tlb.ipi"), ipis + 2) << "the readers' CPUs run the mm and are not lazy";
  EXPECT_GT(c("tlb.l1_miss"), 0);
}

// ---- misses per geometry and level ----

TEST_F(TlbTest, IntelMissesPerLevel) {
  geometry("x86-intel");
  const uint64_t a = written(PAGE_SIZE);
  EXPECT_EQ(c("tlb.lookup"), 1);
  EXPECT_EQ(c("tlb.l1_miss"), 1);
  EXPECT_EQ(c("tlb.l2_miss"), 1);
  ASSERT_TRUE(p->fill(a, 2, PAGE_SIZE).ok());
  EXPECT_EQ(c("tlb.l1_miss"), 1) << "a hit";
  // 65 pages: Skylake's 4-way, 64-entry 4K dTLB evicts the first page of
  // its set; the 1536-entry STLB still has it.
  const uint64_t b = written(65 * PAGE_SIZE);
  const int64_t l1 = c("tlb.l1_miss"), l2 = c("tlb.l2_miss");
  ASSERT_TRUE(p->fill(b, 3, PAGE_SIZE).ok());
  EXPECT_EQ(c("tlb.l1_miss"), l1 + 1);
  EXPECT_EQ(c("tlb.l2_miss"), l2) << "an STLB hit";
  EXPECT_EQ(tlb()->cpus[here()].counters.l1_miss.load(), static_cast<uint64_t>(l1 + 1));
  EXPECT_EQ(tlb_count_entries(tlb(), here(), 1, kTlb4K), 64u);
}

TEST_F(TlbTest, AmdCoalescesFourContiguousPtes) {
  geometry("x86-amd");
  enable_order_kb(16);
  written(k64K);  // four 16K folios
  EXPECT_EQ(c("tlb.lookup"), 16);
  EXPECT_EQ(c("tlb.l1_miss"), 4) << "one 16K entry per aligned group of four";
  EXPECT_EQ(tlb_count_entries(tlb(), here(), 1, kTlb16K), 4u);
}

TEST_F(TlbTest, AmdDoesNotCoalesceDifferentAttributes) {
  geometry("x86-amd");
  enable_order_kb(16);
  const uint64_t a = written(4 * PAGE_SIZE);  // one 16K folio
  // One page of the group read-only: the four PTEs differ, each is its own entry.
  ASSERT_EQ(p->mprotect(a + 2 * PAGE_SIZE, PAGE_SIZE, PROT_READ), 0);
  flush_tlb_mm(mm());
  const int64_t misses = c("tlb.l1_miss");
  uint8_t b;
  for (int i = 0; i < 4; i++) ASSERT_TRUE(p->read(a + i * PAGE_SIZE, &b, 1).ok());
  EXPECT_EQ(c("tlb.l1_miss"), misses + 4);
  EXPECT_EQ(tlb_count_entries(tlb(), here(), 1, kTlb16K), 0u);
  // The same again once the attributes agree: one 16K entry.
  ASSERT_EQ(p->mprotect(a + 2 * PAGE_SIZE, PAGE_SIZE, RW), 0);
  ASSERT_TRUE(p->fill(a + 2 * PAGE_SIZE, 1, 1).ok());  // writable and dirty again, like its neighbours
  flush_tlb_mm(mm());
  for (int i = 0; i < 4; i++) ASSERT_TRUE(p->read(a + i * PAGE_SIZE, &b, 1).ok());
  EXPECT_EQ(c("tlb.l1_miss"), misses + 5);
  EXPECT_EQ(tlb_count_entries(tlb(), here(), 1, kTlb16K), 1u);
}

TEST_F(TlbTest, Arm64FoldedBlockIsOneEntry) {
  geometry("arm64");
  enable_order_kb(64);
  const uint64_t a = written(k64K);
  EXPECT_EQ(c("tlb.contpte_fold"), 1);
  EXPECT_TRUE(folded(a));
  EXPECT_EQ(c("tlb.lookup"), 16);
  EXPECT_EQ(c("tlb.l1_miss"), 1);
  EXPECT_EQ(tlb_count_entries(tlb(), here(), 1, kTlb64K), 1u);
}

// ---- arm64 contpte ----

TEST_F(TlbTest, ContpteAccessYoungAndWholeBlockWrprotectKeepItFolded) NO_THREAD_SAFETY_ANALYSIS {
  geometry("arm64");
  enable_order_kb(64);
  const uint64_t a = written(k64K);
  ASSERT_TRUE(folded(a));
  uint8_t b;
  ASSERT_TRUE(p->read(a + 5 * PAGE_SIZE, &b, 1).ok());  // hardware A/D
  pte_t* pte = pte_ptr(a);
  clear_young_dirty_ptes(mm(), a, pte, CONT_PTES, CYDP_CLEAR_YOUNG);
  EXPECT_TRUE(folded(a));
  // An access/dirty update of one entry (ptep_set_access_flags, no write change).
  ptep_set_access_flags(mm(), a + PAGE_SIZE, pte + 1, pte_mkyoung(ptep_get(pte + 1)));
  EXPECT_TRUE(folded(a));
  // fork write-protects the parent's run of 16 as one: still folded, and
  // the child's set_ptes of the whole block folds there too.
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  EXPECT_TRUE(folded(a));
  EXPECT_FALSE(pte_write(ptep_get(pte)));
  EXPECT_EQ(c("tlb.contpte_unfold"), 0);
  EXPECT_EQ(c("tlb.contpte_fold"), 2);
  child->exit();
}

TEST_F(TlbTest, ContpteSinglePteOperationsUnfoldAndASetRefolds) NO_THREAD_SAFETY_ANALYSIS {
  geometry("arm64");
  enable_order_kb(64);
  const uint64_t a = written(k64K);
  pte_t* pte = pte_ptr(a);
  ASSERT_TRUE(folded(a));
  // ptep_set_wrprotect of one entry unfolds, and the unfold flushes the block.
  int64_t flushes = c("tlb.flush_range");
  wrprotect_ptes(mm(), a + 3 * PAGE_SIZE, pte + 3, 1);
  EXPECT_EQ(c("tlb.contpte_unfold"), 1);
  EXPECT_FALSE(folded(a));
  EXPECT_EQ(c("tlb.flush_range"), flushes + 1);
  // The rest follow to read-only; a single-PTE set of the block's last
  // entry completes it again (contpte_try_fold), and the fold flushes.
  wrprotect_ptes(mm(), a, pte, 3);
  wrprotect_ptes(mm(), a + 4 * PAGE_SIZE, pte + 4, 12);
  EXPECT_FALSE(folded(a));
  flushes = c("tlb.flush_range");
  set_pte_at(mm(), a + 15 * PAGE_SIZE, pte + 15, ptep_get(pte + 15));
  EXPECT_EQ(c("tlb.contpte_fold"), 2);
  EXPECT_TRUE(folded(a));
  EXPECT_EQ(c("tlb.flush_range"), flushes + 1);
  // A set of any other single entry unfolds; one that is not the last
  // entry does not re-fold.
  set_pte_at(mm(), a + 7 * PAGE_SIZE, pte + 7, ptep_get(pte + 7));
  EXPECT_EQ(c("tlb.contpte_unfold"), 2);
  EXPECT_FALSE(folded(a));
  set_pte_at(mm(), a + 15 * PAGE_SIZE, pte + 15, ptep_get(pte + 15));
  ASSERT_TRUE(folded(a));
  // A write-bit change through ptep_set_access_flags unfolds.
  ptep_set_access_flags(mm(), a + 2 * PAGE_SIZE, pte + 2, pte_mkwrite_novma(ptep_get(pte + 2)));
  EXPECT_EQ(c("tlb.contpte_unfold"), 3);
  EXPECT_FALSE(folded(a));
  // Writable again everywhere (what the folio had), for the checker.
  for (unsigned i = 0; i < CONT_PTES; i++) entry_set(pte + i, pte_mkwrite_novma(ptep_get(pte + i)));
}

TEST_F(TlbTest, ContpteClearOfOnePteUnfoldsAndOfTheWholeBlockDoesNot) {
  geometry("arm64");
  enable_order_kb(64);
  const uint64_t a = written(2 * k64K);
  ASSERT_TRUE(folded(a) && folded(a + k64K));
  ASSERT_EQ(p->madvise(a + PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED), 0);  // ptep_get_and_clear of one
  EXPECT_EQ(c("tlb.contpte_unfold"), 1);
  EXPECT_FALSE(folded(a));
  ASSERT_EQ(p->munmap(a + k64K, k64K), 0);  // the whole second block
  EXPECT_EQ(c("tlb.contpte_unfold"), 1) << "a whole-block clear stays folded to the end";
}

TEST_F(TlbTest, Contpte16KAnd32KFoliosNeverFold) {
  geometry("arm64");
  for (unsigned kb : {16u, 32u}) {
    set("transparent_hugepage/hugepages-16kB/enabled", kb == 16 ? "always" : "never");
    set("transparent_hugepage/hugepages-32kB/enabled", kb == 32 ? "always" : "never");
    const int64_t misses = c("tlb.l1_miss");
    const uint64_t a = written(k64K);
    EXPECT_EQ(order_at(a), kb == 16 ? 2 : 3);
    EXPECT_FALSE(folded(a)) << kb << "K";
    EXPECT_EQ(c("tlb.l1_miss"), misses + 16) << kb << "K folios: sixteen 4K entries, no reach gained";
  }
  EXPECT_EQ(c("tlb.contpte_fold"), 0);
}

TEST_F(TlbTest, LeavingArm64ForgetsTheBlocks) {
  geometry("arm64");
  enable_order_kb(64);
  const uint64_t a = written(k64K);
  ASSERT_TRUE(folded(a));
  geometry("x86-intel");
  EXPECT_FALSE(folded(a));
  EXPECT_EQ(contpte_ops(mm()), nullptr);
  std::string v;
  ASSERT_EQ(sys->tune_read("tlb.geometry", &v), 0);
  EXPECT_EQ(v, "x86-intel");
  EXPECT_EQ(sys->tune("tlb.geometry", "sparc"), -EINVAL);
}

}  // namespace
}  // namespace mmlab::test
