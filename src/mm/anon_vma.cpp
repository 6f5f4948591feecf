// anon_vma lifetime and the VMA <-> anon_vma links (the anon_vma part of
// mm/rmap.c: anon_vma_prepare, anon_vma_clone, unlink_anon_vmas) and the
// reuse of a neighbour's anon_vma (find_mergeable_anon_vma, mm/vma.c).
//
// An AnonVma's refcount counts the VMAs linked into it plus any reference a
// walker took with get_anon_vma(); the last put frees it. AnonVma::vmas is
// protected by the AnonVma's rwsem; a VMA's anon_vma pointer and its chain
// change either under mmap_lock held for write (split, merge, fork, unmap)
// or, in anon_vma_prepare (mmap_lock held for read), under the anon_vma's
// rwsem and then mm->page_table_lock, as in the kernel.
#include <atomic>
#include <memory>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/kernel.h"
#include "mm/mm.h"

namespace mmlab {

void get_anon_vma(AnonVma* av) { av->refcount.fetch_add(1, std::memory_order_relaxed); }

void put_anon_vma(AnonVma* av) {
  if (av->refcount.fetch_sub(1, std::memory_order_acq_rel) == 1) delete av;
}

namespace {

// anon_vma_compatible: a and b (a just below b) could share an anon_vma: they
// differ at most in access flags and soft-dirty, and their offsets line up.
bool anon_vma_compatible(const Vma* a, const Vma* b) {
  return a->vm_end == b->vm_start && a->vm_file == b->vm_file &&
         !((a->vm_flags ^ b->vm_flags) & ~(VM_ACCESS_FLAGS | VM_SOFTDIRTY)) &&
         b->vm_pgoff == a->vm_pgoff + ((b->vm_start - a->vm_start) >> PAGE_SHIFT);
}

// reusable_anon_vma: old's anon_vma, if the pair is compatible and old is not
// a fork child still linked to its parents' anon_vmas. Caller holds
// page_table_lock, under which a neighbour's anon_vma and chain are set.
AnonVma* reusable_anon_vma(const Vma* old, const Vma* a, const Vma* b) {
  old->vm_mm->page_table_lock.assert_held();
  if (!anon_vma_compatible(a, b)) return nullptr;
  if (old->anon_vma && old->anon_vma_chain.size() == 1) return old->anon_vma;
  return nullptr;
}

// find_mergeable_anon_vma: reuse an adjacent VMA's anon_vma so that the two
// can merge later (an mprotect() that makes them identical again). Next first,
// then prev, as the kernel. The neighbour holds a link, and cannot be unlinked
// while we hold mmap_lock, so the returned anon_vma stays alive.
AnonVma* find_mergeable_anon_vma(Mm* mm, Vma* vma) REQUIRES_SHARED(mm->mmap_lock) {
  SpinGuard ptl(&mm->page_table_lock, LockClass::kPageTableLock);
  Vma* next = vma_next(mm, vma);
  if (next && next->vm_start == vma->vm_end) {
    if (AnonVma* av = reusable_anon_vma(next, vma, next)) return av;
  }
  Vma* prev = vma_prev(mm, vma);
  if (prev && prev->vm_end == vma->vm_start) return reusable_anon_vma(prev, prev, vma);
  return nullptr;
}

// Link vma into av (anon_vma_chain_link). The caller holds av->rwsem.
void anon_vma_chain_link(Vma* vma, AnonVma* av) REQUIRES(av->rwsem) {
  av->rwsem.assert_write_held();
  av->vmas.insert(vma);
  vma->anon_vma_chain.insert(av);
}

}  // namespace

// __anon_vma_prepare. The caller holds mmap_lock for read (a fault under the
// per-VMA lock tries it first, or retries under it, as vmf_anon_prepare does).
int anon_vma_prepare(Vma* vma) {
  if (std::atomic_ref<AnonVma*>(vma->anon_vma).load(std::memory_order_acquire)) return 0;
  Mm* mm = vma->vm_mm;
  mmap_assert_locked(mm);

  AnonVma* av = find_mergeable_anon_vma(mm, vma);
  std::unique_ptr<AnonVma> fresh;
  if (!av) {
    fresh = std::make_unique<AnonVma>();  // refcount 1: the link made below
    fresh->cid = mm->kernel->next_cid.fetch_add(1, std::memory_order_relaxed);
    av = fresh.get();
  }

  bool linked = false;
  {
    WriteGuard rmap(&av->rwsem);
    SpinGuard ptl(&mm->page_table_lock, LockClass::kPageTableLock);
    if (!vma->anon_vma) {  // nobody raced us to it
      anon_vma_chain_link(vma, av);
      if (!fresh) get_anon_vma(av);
      std::atomic_ref<AnonVma*>(vma->anon_vma).store(av, std::memory_order_release);
      linked = true;
    }
  }
  if (fresh && linked) fresh.release();  // now owned by its refcount
  return 0;
}

void anon_vma_clone(Vma* dst, const Vma* src) {
  for (AnonVma* av : src->anon_vma_chain) {
    if (dst->anon_vma_chain.count(av)) continue;
    get_anon_vma(av);
    WriteGuard rmap(&av->rwsem);
    anon_vma_chain_link(dst, av);
  }
  if (!dst->anon_vma) dst->anon_vma = src->anon_vma;
}

void unlink_anon_vmas(Vma* vma) {
  for (AnonVma* av : vma->anon_vma_chain) {
    {
      WriteGuard rmap(&av->rwsem);
      av->vmas.erase(vma);
    }
    put_anon_vma(av);
  }
  vma->anon_vma_chain.clear();
  vma->anon_vma = nullptr;
}

}  // namespace mmlab
