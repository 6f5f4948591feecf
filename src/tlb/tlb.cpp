// The per-CPU TLBs: lookups and fills on user accesses, invalidation, and
// the address-space switch (arch/x86/mm/tlb.c's switch_mm_irqs_off,
// choose_new_asid, enter_lazy_tlb).
#include "tlb/tlb.h"

#include "tlb/tlb_internal.h"

namespace mmlab {
namespace {

// An entry's tag: the vpn of its size, the size and the ASID slot; bit 63
// marks it valid.
constexpr uint64_t kTagValid = 1ull << 63;
uint64_t make_tag(uint64_t addr, TlbSize s, int asid) {
  return kTagValid | ((addr >> kTlbSizeShift[s]) << 6) | (static_cast<uint64_t>(s) << 3) | static_cast<uint64_t>(asid);
}
int tag_asid(uint64_t tag) { return static_cast<int>(tag & 7); }

TlbEntry* set_of(TlbArray& a, uint64_t addr, TlbSize s) {
  uint64_t vpn = addr >> kTlbSizeShift[s];
  return &a.e[(vpn % a.sets) * a.g.ways];
}

bool level_holds(const TlbLevel& l, TlbSize s) {
  for (int i = 0; i < l.nr_arrays; i++)
    if (l.arrays[i].g.sizes & tlb_size_bit(s)) return true;
  return false;
}

// The size a level keeps a translation of size s as: s, or the largest
// smaller size it holds (AMD's L2 smashes a 1G page into 2M entries).
TlbSize level_size(const TlbLevel& l, TlbSize s) {
  for (int i = s; i >= 0; i--)
    if (level_holds(l, static_cast<TlbSize>(i))) return static_cast<TlbSize>(i);
  return kTlb4K;
}

bool level_lookup(TlbLevel& l, uint64_t addr, TlbSize want, int asid, uint64_t now) {
  const TlbSize s = level_size(l, want);
  const uint64_t tag = make_tag(addr, s, asid);
  for (int i = 0; i < l.nr_arrays; i++) {
    TlbArray& a = l.arrays[i];
    if (!(a.g.sizes & tlb_size_bit(s))) continue;
    TlbEntry* set = set_of(a, addr, s);
    for (unsigned w = 0; w < a.g.ways; w++)
      if (set[w].tag == tag) {
        set[w].lru = now;
        return true;
      }
  }
  return false;
}

void level_fill(TlbLevel& l, uint64_t addr, TlbSize want, int asid, uint64_t now) {
  const TlbSize s = level_size(l, want);
  for (int i = 0; i < l.nr_arrays; i++) {
    TlbArray& a = l.arrays[i];
    if (!(a.g.sizes & tlb_size_bit(s))) continue;
    TlbEntry* set = set_of(a, addr, s);
    TlbEntry* victim = &set[0];
    for (unsigned w = 0; w < a.g.ways; w++) {
      if (!set[w].tag) {
        victim = &set[w];
        break;
      }
      if (set[w].lru < victim->lru) victim = &set[w];
    }
    victim->tag = make_tag(addr, s, asid);
    victim->lru = now;
    return;
  }
}

void build_level(TlbLevel& l, const TlbLevelGeom& g) {
  l.nr_arrays = g.nr_arrays;
  for (int i = 0; i < g.nr_arrays; i++) {
    TlbArray& a = l.arrays[i];
    a.g = g.arrays[i];
    a.sets = a.g.entries / a.g.ways;
    a.e = std::make_unique<TlbEntry[]>(a.g.entries);
  }
}

void clear_level(TlbLevel& l) {
  for (auto& a : l.arrays) a = TlbArray{};
  l.nr_arrays = 0;
}

// AMD's PTE coalescing: the aligned group of four PTEs around ptep is
// present, maps four contiguous frames in order from an aligned one, with
// the same attributes (the accessed and dirty bits aside).
bool ptes_coalesce(const pte_t* ptep, uint64_t addr) {
  const unsigned idx = static_cast<unsigned>((addr >> PAGE_SHIFT) & 3);
  const pte_t* first = ptep - idx;
  const pte_t p0 = ptep_get(const_cast<pte_t*>(first));
  if (!pte_present(p0) || (pte_pfn(p0) & 3)) return false;
  constexpr uint64_t ignore = _PAGE_ACCESSED | _PAGE_DIRTY;
  for (unsigned i = 1; i < 4; i++) {
    const pte_t p = ptep_get(const_cast<pte_t*>(first + i));
    if (!pte_present(p) || ((p.v & ~ignore) != ((p0.v & ~ignore) + i * PAGE_SIZE))) return false;
  }
  return true;
}

// Every entry of an ASID slot that covers addr, whatever its size: fn(entry).
template <typename Fn>
void for_each_covering(TlbCpu& c, int asid, uint64_t addr, Fn&& fn) REQUIRES(c.lock) {
  for (TlbLevel* l : {&c.l1, &c.l2})
    for (int i = 0; i < l->nr_arrays; i++) {
      TlbArray& a = l->arrays[i];
      for (int s = 0; s < kNrTlbSizes; s++) {
        if (!(a.g.sizes & (1u << s))) continue;
        const uint64_t tag = make_tag(addr, static_cast<TlbSize>(s), asid);
        TlbEntry* set = set_of(a, addr, static_cast<TlbSize>(s));
        for (unsigned w = 0; w < a.g.ways; w++)
          if (set[w].tag == tag) fn(set[w]);
      }
    }
}

}  // namespace

// INVLPG of one address.
void tlb_invalidate_addr(TlbCpu& c, int asid, uint64_t addr) {
  for_each_covering(c, asid, addr, [](TlbEntry& e) { e.tag = 0; });
}

// The non-global entries of one ASID (a CR3 write or INVPCID single-context).
void tlb_invalidate_asid(TlbCpu& c, int asid) {
  for (TlbLevel* l : {&c.l1, &c.l2})
    for (int i = 0; i < l->nr_arrays; i++) {
      TlbArray& a = l->arrays[i];
      for (unsigned j = 0; j < a.g.entries; j++)
        if (a.e[j].tag && tag_asid(a.e[j].tag) == asid) a.e[j].tag = 0;
    }
}

TlbState::TlbState() : cpus(std::make_unique<TlbCpu[]>(NR_CPUS)) {}
TlbState::~TlbState() = default;

void tlb_set_geometry(TlbState* t, TlbGeometry g) {
  const TlbGeometryDesc* d = tlb_geometry_desc(g);
  for (int cpu = 0; cpu < NR_CPUS; cpu++) {
    TlbCpu& c = t->cpus[cpu];
    SpinGuard guard(&c.lock, LockClass::kTlbLock);
    clear_level(c.l1);
    clear_level(c.l2);
    if (d) {
      build_level(c.l1, d->l1);
      build_level(c.l2, d->l2);
    }
  }
  t->contpte.store(d && d->contpte ? &kContPteOps : nullptr, std::memory_order_release);
  if (!(d && d->contpte)) contpte_forget_all(t);
  t->geometry.store(g, std::memory_order_release);
}

void init_new_context(TlbState* t, Mm* mm) {
  mm->tlb = t;
  mm->tlb_ctx.ctx_id = t->next_ctx_id.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// choose_new_asid: the slot that already holds this context (flushed only if
// it fell behind), else the next slot round robin, flushed.
void choose_new_asid(TlbCpu& c, const MmTlbContext* ctx, uint64_t next_tlb_gen, int* new_asid, bool* need_flush)
    REQUIRES(c.lock) {
  for (int asid = 0; asid < TLB_NR_DYN_ASIDS; asid++) {
    if (c.ctxs[asid].ctx_id != ctx->ctx_id) continue;
    *new_asid = asid;
    *need_flush = c.ctxs[asid].tlb_gen < next_tlb_gen;
    return;
  }
  *new_asid = c.next_asid++;
  if (*new_asid >= TLB_NR_DYN_ASIDS) {
    *new_asid = 0;
    c.next_asid = 1;
  }
  *need_flush = true;
}

void switch_mm_locked(TlbCpu& c, int cpu, MmTlbContext* next) REQUIRES(c.lock) {
  const bool was_lazy = tlb_cpu_lazy(c, cpu);
  c.is_lazy = false;
  c.occupant = cpu_release_count(cpu);
  int new_asid;
  bool need_flush;
  uint64_t next_tlb_gen;
  if (c.loaded_ctx == next->ctx_id) {
    // The same mm: a lazy CPU catches up with the flushes it was not sent.
    if (!was_lazy) return;
    next_tlb_gen = next->tlb_gen.load(std::memory_order_acquire);
    if (c.ctxs[c.loaded_asid].tlb_gen == next_tlb_gen) return;
    new_asid = c.loaded_asid;
    need_flush = true;
  } else {
    // Start receiving IPIs, then read tlb_gen; the previous mm keeps this
    // CPU in its cpumask until a flush finds it gone (flush_tlb_func).
    next->cpumask.fetch_or(1ull << cpu, std::memory_order_acq_rel);
    next_tlb_gen = next->tlb_gen.load(std::memory_order_acquire);
    choose_new_asid(c, next, next_tlb_gen, &new_asid, &need_flush);
  }
  if (need_flush) {
    c.ctxs[new_asid] = {next->ctx_id, next_tlb_gen};
    tlb_invalidate_asid(c, new_asid);
  }
  c.loaded_ctx = next->ctx_id;
  c.loaded_asid = new_asid;
}

}  // namespace

void switch_mm_irqs_off(TlbState* t, int cpu, MmTlbContext* ctx) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  switch_mm_locked(c, cpu, ctx);
}

void enter_lazy_tlb(TlbState* t, int cpu) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  if (c.loaded_ctx) c.is_lazy = true;
}

uint64_t tlb_loaded_ctx(TlbState* t, int cpu, bool* lazy) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  if (lazy) *lazy = tlb_cpu_lazy(c, cpu);
  return c.loaded_ctx;
}

void tlb_user_access(Mm* mm, uint64_t addr, TlbSize size, const pte_t* ptep) {
  TlbState* t = tlb_state(mm);
  const TlbGeometryDesc* d = tlb_geometry_desc(t->geometry.load(std::memory_order_acquire));
  if (!d) return;
  // The entry this translation fills: a folded arm64 block or an AMD
  // coalesced group covers more than its page.
  TlbSize fill = size;
  bool coalesced = false;
  // The lockless walk's PTE table (kept from being freed by the walk's
  // epoch) belongs to mm; the hardware walker checks nothing, so the
  // model's check is a VM_BUG_ON (assert_table_of).
  if (ptep) assert_table_of(mm, ptep, TableLevel::kPte);
  if (size == kTlb4K && ptep) {
    if (d->contpte && contpte_block_folded(mm, addr, ptep)) fill = kTlb64K;
    else if (d->coalesce_4k && ptes_coalesce(ptep, addr)) coalesced = true;
  }
  const int cpu = smp_processor_id();
  TlbCpu& c = t->cpus[cpu];
  Stats* st = mm->stats;
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  if (c.loaded_ctx != mm->tlb_ctx.ctx_id || tlb_cpu_lazy(c, cpu)) switch_mm_locked(c, cpu, &mm->tlb_ctx);
  const int asid = c.loaded_asid;
  const uint64_t now = ++c.clock;
  c.counters.lookups.fetch_add(1, std::memory_order_relaxed);
  st->count(Event::tlb_lookup);
  auto lookup = [&](TlbLevel& l) {
    if (coalesced && level_lookup(l, addr, kTlb16K, asid, now)) return true;
    return level_lookup(l, addr, fill, asid, now);
  };
  if (lookup(c.l1)) return;
  c.counters.l1_miss.fetch_add(1, std::memory_order_relaxed);
  st->count(Event::tlb_l1_miss);
  if (coalesced) fill = kTlb16K;
  if (!lookup(c.l2)) {
    c.counters.l2_miss.fetch_add(1, std::memory_order_relaxed);
    st->count(Event::tlb_l2_miss);
    level_fill(c.l2, addr, fill, asid, now);
  }
  level_fill(c.l1, addr, fill, asid, now);
}

bool tlb_holds(TlbState* t, int cpu, const MmTlbContext* ctx, uint64_t addr) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  bool found = false;
  for (int asid = 0; asid < TLB_NR_DYN_ASIDS; asid++)
    if (c.ctxs[asid].ctx_id == ctx->ctx_id) for_each_covering(c, asid, addr, [&](TlbEntry&) { found = true; });
  return found;
}

TlbReach tlb_reach(TlbState* t, int level) {
  TlbReach r;
  if (!tlb_enabled(t)) return r;
  for (int cpu = 0; cpu < NR_CPUS; cpu++)
    for (int s = 0; s < kNrTlbSizes; s++) {
      const uint64_t n = tlb_count_entries(t, cpu, level, static_cast<TlbSize>(s));
      r.entries += n;
      r.bytes += n << kTlbSizeShift[s];
    }
  return r;
}

unsigned tlb_count_entries(TlbState* t, int cpu, int level, TlbSize size) {
  TlbCpu& c = t->cpus[cpu];
  SpinGuard g(&c.lock, LockClass::kTlbLock);
  TlbLevel& l = level == 1 ? c.l1 : c.l2;
  unsigned n = 0;
  for (int i = 0; i < l.nr_arrays; i++)
    for (unsigned j = 0; j < l.arrays[i].g.entries; j++) {
      const uint64_t tag = l.arrays[i].e[j].tag;
      if (tag && ((tag >> 3) & 7) == size) n++;
    }
  return n;
}

}  // namespace mmlab
