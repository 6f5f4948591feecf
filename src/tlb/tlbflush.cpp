// TLB flushes with x86's rules (arch/x86/mm/tlb.c: flush_tlb_mm_range,
// flush_tlb_func, native_flush_tlb_multi, should_flush_tlb; no INVLPGB,
// no cpumask trimming), the flush helpers of mm/pgtable-generic.c, and the
// mmu_gather of zap (mm/mmu_gather.c, include/asm-generic/tlb.h).
#include "tlb/tlb.h"
#include "tlb/tlb_internal.h"
#include "trace/trace.h"

namespace mmlab {
namespace {

struct FlushTlbInfo {
  Stats* stats;  // the flushing mm's System's
  MmTlbContext* mm;
  uint64_t start, end;
  unsigned stride_shift;
  bool freed_tables;
  uint64_t new_tlb_gen;
  int initiating_cpu;
};

void count_flush_kind(Stats* st, uint64_t start, uint64_t end, unsigned stride_shift) {
  st->count(Event::tlb_flush);
  if (end == TLB_FLUSH_ALL) {
    st->count(Event::tlb_flush_full);
    st->count(VmStat::tlb_flush_range);
    return;
  }
  const uint64_t nr = (end - start) >> stride_shift;
  st->count(nr > 1 ? Event::tlb_flush_ranged : Event::tlb_flush_single);
  st->count(Event::tlb_flush_entries, nr);
  st->count(end - start > PAGE_SIZE ? VmStat::tlb_flush_range : VmStat::tlb_flush_one);
}

// flush_tlb_func on CPU `cpu` (locally, or as the IPI's handler).
void flush_tlb_func(TlbState* t, int cpu, const FlushTlbInfo& f) {
  TlbCpu& c = t->cpus[cpu];
  Stats* st = f.stats;
  const bool local = cpu == f.initiating_cpu;
  if (!local) {
    c.counters.ipis_received.fetch_add(1, std::memory_order_relaxed);
    st->count(VmStat::nr_tlb_remote_flush_received);
    st->count(Event::tlb_ipi);
  }
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  if (c.loaded_ctx != f.mm->ctx_id) {
    // The CPU was left in the mm's cpumask after it switched away.
    f.mm->cpumask.fetch_and(~(1ull << cpu), std::memory_order_acq_rel);
    return;
  }
  if (tlb_cpu_lazy(c, cpu)) {
    // Lazy and still sent the IPI (page tables were freed): switch to
    // init_mm; the mm's slot catches up when the CPU comes back.
    c.loaded_ctx = 0;
    c.is_lazy = false;
    return;
  }
  const uint64_t local_tlb_gen = c.ctxs[c.loaded_asid].tlb_gen;
  if (f.new_tlb_gen <= local_tlb_gen) return;
  const uint64_t mm_tlb_gen = f.mm->tlb_gen.load(std::memory_order_acquire);
  if (local_tlb_gen == mm_tlb_gen) return;
  if (f.end != TLB_FLUSH_ALL && f.new_tlb_gen == local_tlb_gen + 1 && f.new_tlb_gen == mm_tlb_gen) {
    const uint64_t nr = (f.end - f.start) >> f.stride_shift;
    for (uint64_t addr = f.start; addr < f.end; addr += 1ull << f.stride_shift)
      tlb_invalidate_addr(c, c.loaded_asid, addr);
    if (local) st->count(VmStat::nr_tlb_local_flush_one, static_cast<int64_t>(nr));
    MM_TRACE("tlb_flush", "pages:{} reason:{}", nr, local ? "local mm shootdown (3)" : "remote shootdown (1)");
  } else {
    tlb_invalidate_asid(c, c.loaded_asid);
    if (local) st->count(VmStat::nr_tlb_local_flush_all);
    MM_TRACE("tlb_flush", "pages:-1 reason:{}", local ? "local mm shootdown (3)" : "remote shootdown (1)");
  }
  c.ctxs[c.loaded_asid].tlb_gen = mm_tlb_gen;
}

// should_flush_tlb: a lazy CPU flushes at its next switch; one that runs the
// mm is sent the IPI.
bool should_flush_tlb(TlbState* t, int cpu, const FlushTlbInfo& f) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  if (tlb_cpu_lazy(c, cpu)) return false;
  return c.loaded_ctx == f.mm->ctx_id;
}

// native_flush_tlb_multi: with page tables freed, every CPU in the mask (lazy
// ones too, so that none walks a freed table speculatively); else only those
// should_flush_tlb picks. The local CPU runs the flush itself when it is one.
void native_flush_tlb_multi(TlbState* t, uint64_t cpumask, const FlushTlbInfo& f) {
  f.stats->count(VmStat::nr_tlb_remote_flush);
  MM_TRACE("tlb_flush", "pages:{} reason:remote ipi send (4)",
           f.end == TLB_FLUSH_ALL ? int64_t{-1} : static_cast<int64_t>((f.end - f.start) >> PAGE_SHIFT));
  for (int cpu = 0; cpu < NR_CPUS; cpu++) {
    if (!(cpumask & (1ull << cpu))) continue;
    if (f.freed_tables || should_flush_tlb(t, cpu, f)) flush_tlb_func(t, cpu, f);
  }
}

bool loaded_here(TlbState* t, int cpu, uint64_t ctx_id) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  return c.loaded_ctx == ctx_id;
}

// The gather open on this thread (zap runs one at a time per thread; a
// gather of another mm may nest, e.g. a zap that reclaims).
thread_local MmuGather* t_gather = nullptr;

MmuGather* open_gather(const Mm* mm) {
  for (MmuGather* g = t_gather; g; g = g->prev)
    if (g->mm == mm) return g;
  return nullptr;
}

}  // namespace

void flush_tlb_mm_range(Mm* mm, uint64_t start, uint64_t end, unsigned stride_shift, bool freed_tables) {
  if (end != TLB_FLUSH_ALL && ((end - start) >> stride_shift) > tlb_single_page_flush_ceiling) {
    start = 0;
    end = TLB_FLUSH_ALL;
  }
  if (MmuGather* g = open_gather(mm)) {
    // Inside a zap: widen the gather, flushed once by tlb_finish_mmu.
    if (end == TLB_FLUSH_ALL) {
      g->start = 0;
      g->end = TLB_FLUSH_ALL;
    } else {
      g->start = std::min(g->start, start);
      if (g->end != TLB_FLUSH_ALL) g->end = std::max(g->end, end);
    }
    if (stride_shift == PAGE_SHIFT) g->cleared_ptes = true;
    else if (stride_shift == PMD_SHIFT) g->cleared_pmds = true;
    else g->cleared_puds = true;
    g->freed_tables |= freed_tables;
    return;
  }
  count_flush_kind(mm->stats, start, end, stride_shift);
  TlbState* t = tlb_state(mm);
  if (!tlb_enabled(t)) return;
  const int cpu = smp_processor_id();
  MmTlbContext* ctx = &mm->tlb_ctx;
  const uint64_t new_tlb_gen = ctx->tlb_gen.fetch_add(1, std::memory_order_acq_rel) + 1;
  const FlushTlbInfo info{mm->stats, ctx, start, end, stride_shift, freed_tables, new_tlb_gen, cpu};
  const uint64_t mask = ctx->cpumask.load(std::memory_order_acquire);
  if (mask & ~(1ull << cpu)) native_flush_tlb_multi(t, mask, info);
  else if (loaded_here(t, cpu, ctx->ctx_id)) flush_tlb_func(t, cpu, info);
}

// The entries a flush is about must lie in a PTE (PMD) table of vma's mm:
// the kernel's ptep_clear_flush and clear_flush_ptes check nothing there,
// so the model's check is a VM_BUG_ON (assert_table_of, corrupt state).
pte_t ptep_clear_flush(Vma* vma, uint64_t addr, pte_t* ptep) {
  assert_table_of(vma->vm_mm, ptep, TableLevel::kPte);
  pte_t pte = ptep_get_and_clear(vma->vm_mm, addr, ptep);
  if (pte_accessible(vma->vm_mm, pte)) flush_tlb_page(vma, addr);
  return pte;
}

pte_t clear_flush_ptes(Vma* vma, uint64_t addr, pte_t* ptep, unsigned nr) {
  assert_table_of(vma->vm_mm, ptep, TableLevel::kPte);
  pte_t first = get_and_clear_full_ptes(vma->vm_mm, addr, ptep, nr);
  if (pte_accessible(vma->vm_mm, first)) flush_tlb_mm_range(vma->vm_mm, addr, addr + nr * PAGE_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  return first;
}

pmd_t pmdp_collapse_flush(Vma* vma, uint64_t address, pmd_t* pmdp) {
  // The kernel's two VM_BUG_ONs (mm/pgtable-generic.c), and the table's.
  VM_BUG_ON(address & ~PMD_MASK, "pmdp_collapse_flush of an unaligned address");
  VM_BUG_ON(pmd_trans_huge(pmdp_get(pmdp)), "pmdp_collapse_flush of a PMD leaf");
  assert_table_of(vma->vm_mm, pmdp, TableLevel::kPmd);
  pmd_lockptr(vma->vm_mm, pmdp)->assert_held();
  pmd_t old = entry_xchg(pmdp, pmd_t{0});
  flush_tlb_mm_range(vma->vm_mm, address, address + PMD_SIZE, PAGE_SHIFT, /*freed_tables=*/false);
  return old;
}

// ---- mmu_gather ----

void tlb_gather_mmu(MmuGather* tlb, Mm* mm) {
  *tlb = MmuGather{};
  tlb->mm = mm;
  tlb->prev = t_gather;
  t_gather = tlb;
}

void tlb_note_freed_table(Mm* mm, uint64_t start, uint64_t end) {
  if (MmuGather* g = open_gather(mm)) {
    g->freed_tables = true;
    g->start = std::min(g->start, start);
    if (g->end != TLB_FLUSH_ALL) g->end = std::max(g->end, end);
    return;
  }
  flush_tlb_mm_range(mm, start, end, PAGE_SHIFT, /*freed_tables=*/true);
}

// tlb_finish_mmu -> tlb_flush_mmu -> x86's tlb_flush: one flush of the
// gathered range at the stride of what was cleared (tlb_get_unmap_shift),
// with freed_tables when page tables went with it.
void tlb_finish_mmu(MmuGather* tlb) {
  t_gather = tlb->prev;
  if (!(tlb->freed_tables || tlb->cleared_ptes || tlb->cleared_pmds || tlb->cleared_puds)) return;
  if (tlb->fullmm) {
    flush_tlb_mm_range(tlb->mm, 0, TLB_FLUSH_ALL, PAGE_SHIFT, tlb->freed_tables);
    return;
  }
  unsigned shift = PAGE_SHIFT;
  if (!tlb->cleared_ptes) shift = tlb->cleared_pmds ? PMD_SHIFT : tlb->cleared_puds ? PUD_SHIFT : PAGE_SHIFT;
  flush_tlb_mm_range(tlb->mm, tlb->start, tlb->end, shift, tlb->freed_tables);
}

}  // namespace mmlab
