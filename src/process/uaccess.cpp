// The process's CPU: loads and stores through the page tables
// (arch/x86/mm/fault.c's do_user_addr_fault for the fault side).
//
// The walk is lockless, like the hardware walker. The accessed and dirty bits
// are set with an atomic compare-and-exchange on the entry, as the walker
// does, and only on the entry it translated through. While bytes move, the
// folio is held by a speculative reference (so a concurrent zap cannot free
// and reuse the frame under the copy) and the VMA read lock or mmap_lock is
// held: layout changes and fork write-lock the VMA, which stands in for the
// TLB shootdown that stops a real CPU from writing through a stale entry.
#include "fault/fault.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "phys/frame_copy.h"
#include "process/process_internal.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

enum class Access : uint8_t { kRead, kWrite };
// Who makes the access: the program, or the kernel on its behalf
// (copy_to_user). With PTI they translate through different page-table
// roots, so each mode uses an entry for the first time on its own.
enum class CpuMode : uint8_t { kUser, kKernel };

// x86's access_error(): may this VMA be accessed this way at all?
bool access_error(const Vma* vma, Access a) {
  if (a == Access::kWrite) return !(vma->vm_flags & VM_WRITE);
  return !(vma->vm_flags & (VM_READ | VM_EXEC | VM_WRITE));
}

// One translation: the frame and a reference keeping it alive, and how many
// bytes from the address on the same leaf entry maps (the rest of the page,
// or of a PMD/PUD leaf: one folio, contiguous frames).
// Left uninitialised (a batch of them is declared per attempt): cpu_translate
// sets every field before its caller reads one.
struct Translation {
  pfn_t pfn;
  Folio* held;  // nullptr for the zero page (never freed)
  uint64_t span;
};

template <typename T>
bool entry_permits(T e, Access a) {
  if (!(e.v & _PAGE_PRESENT) || !(e.v & _PAGE_USER)) return false;
  return a == Access::kRead || (e.v & _PAGE_RW);
}

// Set A (and D) on the entry the walk used; false if it changed meanwhile.
template <typename T>
bool mark_young_dirty(T* ep, T seen, Access a) {
  uint64_t bits = _PAGE_ACCESSED | (a == Access::kWrite ? _PAGE_DIRTY : 0);
  if ((seen.v & bits) == bits) return entry_get(ep) == seen;
  return entry_cmpxchg(ep, seen, T{seen.v | bits});
}

bool hold_frame(PhysMem* phys, pfn_t pfn, Translation* t) {
  t->pfn = pfn;
  if (phys->is_zero_pfn(pfn)) return true;
  Folio* f = page_folio(phys->pfn_to_page(pfn));
  if (!folio_ref_try_add(f, 1)) return false;
  // The page must still belong to that folio (it may have been split).
  if (!folio_contains_page(f, phys->pfn_to_page(pfn))) {
    folio_put(f);
    return false;
  }
  t->held = f;
  return true;
}

// The TLB model's lookup (tlb/tlb.h): one predicted branch while
// `tlb.geometry` is off.
inline void tlb_lookup(Mm* mm, uint64_t addr, TlbSize size, const pte_t* ptep) {
  if (tlb_state(mm)->geometry.load(std::memory_order_relaxed) != TlbGeometry::kOff) [[unlikely]]
    tlb_user_access(mm, addr, size, ptep);
}

// Returns true with the frame held, false if a fault is needed.
bool cpu_translate(Mm* mm, uint64_t addr, Access a, CpuMode mode, Translation* t) {
  PhysMem* phys = mm->phys;
  // The hardware walker's tables are freed only after a TLB shootdown; the
  // model's stand-in for that, for a PTE table PT_RECLAIM frees under
  // mmap_lock read, is this section (the CPU's own VMA lock does not keep
  // out a zap under the same read lock).
  PteTableReadSection rcu(mm);
  t->held = nullptr;
  t->span = PAGE_SIZE - (addr & ~PAGE_MASK);
  for (int attempt = 0; attempt < 8; attempt++) {
    pgd_t g = pgdp_get(pgd_offset(mm, addr));
    if (!pgd_present(g)) return false;
    pud_t* pudp = pud_offset(phys, g, addr);
    pud_t u = pudp_get(pudp);
    if (!pud_present(u)) return false;
    if (pud_leaf(u)) {
      if (!entry_permits(u, a)) return false;
      if (!hold_frame(phys, pud_pfn(u) + ((addr & ~PUD_MASK) >> PAGE_SHIFT), t)) continue;
      if (mark_young_dirty(pudp, u, a)) {
        t->span = PUD_SIZE - (addr & ~PUD_MASK);
        tlb_lookup(mm, addr, kTlb1G, nullptr);
        return true;
      }
    } else {
      pmd_t* pmdp = pmd_offset(phys, u, addr);
      pmd_t m = pmdp_get(pmdp);
      if (!(m.v & _PAGE_PRESENT)) return false;
      if (pmd_leaf(m)) {
        if (!entry_permits(m, a)) return false;
        if (!hold_frame(phys, pmd_pfn(m) + ((addr & ~PMD_MASK) >> PAGE_SHIFT), t)) continue;
        if (mark_young_dirty(pmdp, m, a)) {
          t->span = PMD_SIZE - (addr & ~PMD_MASK);
          tlb_lookup(mm, addr, kTlb2M, nullptr);
          return true;
        }
      } else {
        pte_t* ptep = pte_offset(phys, m, addr);
        pte_t p = ptep_get(ptep);
        if (!entry_permits(p, a)) return false;
        if (!hold_frame(phys, pte_pfn(p), t)) continue;
        if (mark_young_dirty(ptep, p, a)) {
          if (pte_first_use(phys, m, ptep, mode == CpuMode::kKernel))
            mm->stats->count(mode == CpuMode::kKernel ? Event::pte_first_use_kernel : Event::pte_first_use);
          tlb_lookup(mm, addr, kTlb4K, ptep);
          return true;
        }
      }
    }
    if (t->held) folio_put(t->held);  // the entry changed under us: walk again
    t->held = nullptr;
  }
  return false;
}

Signal fault_signal(vm_fault_t ret) {
  if (ret & VM_FAULT_OOM) return Signal::kSigkill;
  if (ret & (VM_FAULT_SIGBUS | VM_FAULT_HWPOISON | VM_FAULT_HWPOISON_LARGE)) return Signal::kSigbus;
  return Signal::kSigsegv;
}

// Pages translated before any of their bytes move: a locked instruction (a
// reference taken or dropped) waits for every store before it to complete,
// so moving page by page would serialise the stores of each page; a batch
// moves back to back, like a CPU's string store.
constexpr int kTranslateBatch = 16;

// Access up to len bytes at addr, as far as a batch of leaf entries of one
// VMA maps them; `op` moves the bytes given the frame address, the offset
// from addr and the length, and *moved says how far it got. Opt-out (here
// and in unlock below): mmap_lock or the VMA's read lock, as mmap_locked
// says, which the analysis cannot follow.
template <typename Op>
AccessResult access_chunk(Mm* mm, uint64_t addr, uint64_t len, Access a, CpuMode mode, Op&& op, uint64_t* moved) NO_THREAD_SAFETY_ANALYSIS {
  Stats* st = mm->stats;
  // FAULT_FLAG_DEFAULT, as do_user_addr_fault starts: the fault may drop its
  // lock and ask for a retry (VM_FAULT_RETRY), after which the handler takes
  // mmap_lock again and repeats it with FAULT_FLAG_TRIED.
  fault_flags_t flags = FAULT_FLAG_ALLOW_RETRY | FAULT_FLAG_KILLABLE | FAULT_FLAG_INTERRUPTIBLE | FAULT_FLAG_USER |
                        (a == Access::kWrite ? FAULT_FLAG_WRITE : 0);
  Vma* vma = lock_vma_under_rcu(mm, addr);
  bool mmap_locked = false;
  if (!vma) {
    mmap_read_lock(mm);
    mmap_locked = true;
    vma = vma_lookup(mm, addr);
  }
  // Which lock is held, the VMA's or mmap_lock, is data (mmap_locked): the
  // analysis cannot follow it.
  auto unlock = [&]() NO_THREAD_SAFETY_ANALYSIS {
    if (mmap_locked) mmap_read_unlock(mm);
    else vma_end_read(vma);
  };
  if (!vma) {
    unlock();
    return {Signal::kSigsegv, addr};
  }
  if (access_error(vma, a)) {
    unlock();
    return {Signal::kSigsegv, addr};
  }
  bool retrying = false;  // the fault in hand is a retry within the same exception
  for (int faults = 0;; faults++) {
    Translation t[kTranslateBatch];
    uint64_t lens[kTranslateBatch];
    int n = 0;
    uint64_t done = 0;
    while (n < kTranslateBatch && done < len && addr + done < vma->vm_end && cpu_translate(mm, addr + done, a, mode, &t[n])) {
      lens[n] = std::min(len - done, t[n].span);
      done += lens[n++];
    }
    if (n) {
      {
        // One choice of the data path for the whole batch (UserDataBatch).
        const UserDataBatch batch(mm->phys);
        for (int i = 0, off = 0; i < n; off += static_cast<int>(lens[i]), i++) {
          const uint64_t at = addr + static_cast<uint64_t>(off);
          op(batch, static_cast<uint8_t*>(mm->phys->pfn_address(t[i].pfn)) + (at & ~PAGE_MASK), static_cast<uint64_t>(off),
             lens[i]);
        }
      }
      for (int i = 0; i < n; i++)
        if (t[i].held) folio_put(t[i].held);
      *moved = done;
      unlock();
      return {};
    }
    if (!retrying) st->count(Event::fault_exception);
    vm_fault_t ret = handle_mm_fault(vma, addr, flags | (mmap_locked ? 0 : FAULT_FLAG_VMA_LOCK));
    st->count(mmap_locked ? Event::fault_mmap_lock : Event::fault_vma_lock);
    retrying = ret & VM_FAULT_RETRY;
    if (ret & VM_FAULT_RETRY) {
      // The fault dropped its lock (the per-VMA lock was not enough, or it
      // would have had to wait): take mmap_lock and find the VMA again
      // (lock_mm_and_find_vma); a retry under mmap_lock is FAULT_FLAG_TRIED,
      // and so is one after a major fault under the per-VMA lock (its I/O
      // is done: the retry must not drop the lock for it again).
      if (mmap_locked || (ret & VM_FAULT_MAJOR)) flags |= FAULT_FLAG_TRIED;
      mmap_read_lock(mm);
      mmap_locked = true;
      vma = vma_lookup(mm, addr);
      if (!vma || access_error(vma, a)) {
        unlock();
        return {Signal::kSigsegv, addr};
      }
      continue;
    }
    flags &= ~FAULT_FLAG_TRIED;  // the next fault is a new one
    if (ret & VM_FAULT_ERROR) {
      unlock();
      return {fault_signal(ret), addr};
    }
    if (faults > 100000) {  // a fault that never makes progress is a model bug
      unlock();
      return {Signal::kSigbus, addr};
    }
  }
}

template <typename Op>
AccessResult access_range(Mm* mm, uint64_t addr, uint64_t len, Access a, Op&& op, CpuMode mode = CpuMode::kUser) {
  if (addr + len < addr || addr + len > TASK_SIZE) return {Signal::kSigsegv, addr};
  uint64_t done = 0;
  mm->stats->count(Event::user_calls);
  while (done < len) {
    uint64_t chunk = 0;
    AccessResult r = access_chunk(
        mm, addr + done, len - done, a, mode,
        [&](const UserDataBatch& b, uint8_t* frame, uint64_t off, uint64_t n) { op(b, frame, done + off, n); },
        &chunk);
    mm->stats->count(a == Access::kWrite ? Event::user_written : Event::user_read, chunk);
    if (!r.ok()) return r;
    done += chunk;
  }
  return {};
}

}  // namespace

AccessResult user_read(Mm* mm, uint64_t addr, void* buf, uint64_t len) {
  auto* out = static_cast<uint8_t*>(buf);
  return access_range(mm, addr, len, Access::kRead,
                      [&](const UserDataBatch& b, uint8_t* frame, uint64_t off, uint64_t n) { b.copy(out + off, frame, n); });
}

AccessResult user_write(Mm* mm, uint64_t addr, const void* buf, uint64_t len) {
  auto* in = static_cast<const uint8_t*>(buf);
  return access_range(mm, addr, len, Access::kWrite,
                      [&](const UserDataBatch& b, uint8_t* frame, uint64_t off, uint64_t n) { b.copy(frame, in + off, n); });
}

AccessResult copy_to_user(Mm* mm, uint64_t addr, const void* buf, uint64_t len) {
  auto* in = static_cast<const uint8_t*>(buf);
  return access_range(
      mm, addr, len, Access::kWrite,
      [&](const UserDataBatch& b, uint8_t* frame, uint64_t off, uint64_t n) { b.copy(frame, in + off, n); }, CpuMode::kKernel);
}

AccessResult user_fill(Mm* mm, uint64_t addr, uint8_t byte, uint64_t len) {
  return access_range(mm, addr, len, Access::kWrite,
                      [&](const UserDataBatch& b, uint8_t* frame, uint64_t, uint64_t n) { b.set(frame, byte, n); });
}

// The whole range is loaded (and faulted in) even after a mismatch, as the
// selftests' loops do; the first mismatch is what is reported.
AccessResult user_read_expect(Mm* mm, uint64_t addr, uint8_t byte, uint64_t len, int64_t* first_mismatch,
                              uint8_t* found) {
  *first_mismatch = -1;
  return access_range(mm, addr, len, Access::kRead, [&](const UserDataBatch& b, uint8_t* frame, uint64_t off, uint64_t n) {
    if (*first_mismatch >= 0) return;
    const int64_t bad = b.find_not(frame, byte, n, found);
    if (bad >= 0) *first_mismatch = static_cast<int64_t>(off) + bad;
  });
}

}  // namespace mmlab
