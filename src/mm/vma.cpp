// The VMA set of an mm: lookup, the per-VMA locks, page protections, and the
// two shape changes everything else is built from, splitting a VMA and
// merging it with its neighbours (mm/vma.c, mm/mmap.c,
// include/linux/mmap_lock.h).
//
// Locking (see mm/mm.h):
//   - mm->vmas changes only with mmap_lock held for write and vma_tree_lock
//     held exclusive; vm_start/vm_end of a linked VMA change under the same
//     pair, so a lockless lookup under vma_tree_lock (shared) reads them safely.
//   - Before a VMA's range, flags or page protection change, or before it is
//     freed, it is write-locked (vma_start_write): no per-VMA reader is inside
//     it and none gets in until mmap_write_unlock.
//   - Range changes of a VMA with an anon_vma happen under that anon_vma's
//     rwsem (write), so an rmap walker computing addresses from
//     vm_start/vm_pgoff sees the old or the new layout (vma_prepare).
#include <cassert>
#include <iterator>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/kernel.h"
#include "mm/huge_mm.h"
#include "mm/hugetlb.h"
#include "mm/khugepaged_hooks.h"
#include "mm/mm.h"
#include "mm/vma.h"
#include "sync/sched.h"

namespace mmlab {

bool File::ByVmaCid::operator()(const Vma* a, const Vma* b) const { return ByCid{}(a, b); }

// ---- lookup (mm/mmap.c, mm/vma.h) ----

Vma* vma_lookup(Mm* mm, uint64_t addr) {
  mmap_assert_locked(mm);
  auto it = mm->vmas.upper_bound(addr);
  if (it == mm->vmas.begin()) return nullptr;
  Vma* vma = std::prev(it)->second.get();
  return addr < vma->vm_end ? vma : nullptr;
}

// The VMA set is stable under mmap_lock (either mode) or vma_tree_lock
// shared; the lookups below need one of them.
static void vma_tree_assert_stable(Mm* mm) {
  assert(lockdep_is_held(&mm->mmap_lock) || lockdep_is_held(&mm->vma_tree_lock));
  (void)mm;
}

Vma* find_vma(Mm* mm, uint64_t addr) {
  vma_tree_assert_stable(mm);
  auto it = mm->vmas.upper_bound(addr);
  if (it != mm->vmas.begin()) {
    Vma* below = std::prev(it)->second.get();
    if (addr < below->vm_end) return below;
  }
  return it == mm->vmas.end() ? nullptr : it->second.get();
}

Vma* find_vma_intersection(Mm* mm, uint64_t start, uint64_t end) {
  Vma* vma = find_vma(mm, start);
  return (vma && vma->vm_start < end) ? vma : nullptr;
}

Vma* vma_prev(Mm* mm, Vma* vma) {
  vma_tree_assert_stable(mm);
  auto it = mm->vmas.find(vma->vm_start);
  if (it == mm->vmas.begin() || it == mm->vmas.end()) return nullptr;
  return std::prev(it)->second.get();
}

Vma* vma_next(Mm* mm, Vma* vma) {
  vma_tree_assert_stable(mm);
  auto it = mm->vmas.upper_bound(vma->vm_start);
  return it == mm->vmas.end() ? nullptr : it->second.get();
}

// ---- per-VMA locks (include/linux/mmap_lock.h, mm/mmap_lock.c) ----
//
// The write side: vm_lock_seq == mm->mm_lock_seq while the VMA is
// write-locked. The read side: vm_refcnt counts readers. A reader raises the
// count and then re-checks the sequence; a writer publishes the sequence and
// then waits for the count to drain. Both pairs are sequentially consistent,
// so at least one side sees the other (a store-load handshake).

namespace {

// The per-VMA lock at a schedule point, named by the VMA's creation id.
sched::Object vma_lock_object(const Vma* vma) { return {vma, sched::ObjKind::kVma, vma->cid}; }

// vma_start_read: nullptr-free part of lock_vma_under_rcu. Called with
// vma_tree_lock held shared, so vma cannot be freed while we look at it.
bool vma_start_read(Mm* mm, Vma* vma) {
  sched::point("vma_start_read", sched::Op::kTryAcquireShared, vma_lock_object(vma));
  if (vma->vm_lock_seq.load(std::memory_order_acquire) == mm->mm_lock_seq.load(std::memory_order_acquire))
    return false;
  vma->vm_refcnt.fetch_add(1, std::memory_order_seq_cst);
  if (vma->vm_lock_seq.load(std::memory_order_seq_cst) == mm->mm_lock_seq.load(std::memory_order_seq_cst)) {
    vma->vm_refcnt.fetch_sub(1, std::memory_order_release);
    return false;
  }
  lockdep_acquire(vma, LockClass::kVmaLock, 0, LockdepTry::kTry);
  return true;
}

}  // namespace

Vma* lock_vma_under_rcu(Mm* mm, uint64_t addr) {
  ReadGuard tree(&mm->vma_tree_lock);
  auto it = mm->vmas.upper_bound(addr);
  if (it == mm->vmas.begin()) return nullptr;
  Vma* vma = std::prev(it)->second.get();
  if (addr >= vma->vm_end) return nullptr;
  if (!vma_start_read(mm, vma)) return nullptr;
  // The range cannot change from here on (a writer would wait for us), but it
  // may have changed between the lookup and the lock: re-check.
  if (addr < vma->vm_start || addr >= vma->vm_end) {
    vma_end_read(vma);
    return nullptr;
  }
  return vma;
}

void vma_end_read(Vma* vma) {
  sched::point("vma_end_read", sched::Op::kReleaseShared, vma_lock_object(vma));
  lockdep_release(vma);
  vma->vm_refcnt.fetch_sub(1, std::memory_order_release);
}

void vma_start_write(Vma* vma) {
  Mm* mm = vma->vm_mm;
  mmap_assert_write_locked(mm);
  sched::point("vma_start_write", sched::Op::kAcquire, vma_lock_object(vma));
  // Stable: only mmap_write_unlock changes it, and we hold mmap_lock for write.
  const uint64_t seq = mm->mm_lock_seq.load(std::memory_order_relaxed);
  if (vma->vm_lock_seq.load(std::memory_order_relaxed) == seq) return;  // already ours
  vma->vm_lock_seq.store(seq, std::memory_order_seq_cst);
  // Readers that got in before vm_lock_seq changed drain out (no release
  // announces the last one: a wait, not a block).
  if (vma->vm_refcnt.load(std::memory_order_seq_cst) == 0) return;  // no reader: no wait step
  sched::wait_until("vma_start_write", vma_lock_object(vma),
                    [vma] { return vma->vm_refcnt.load(std::memory_order_seq_cst) == 0; });
}

bool vma_is_write_locked(const Vma* vma) {
  return vma->vm_lock_seq.load(std::memory_order_acquire) ==
         vma->vm_mm->mm_lock_seq.load(std::memory_order_acquire);
}

namespace {

// vma_start_write for a VMA of the mm whose lock the caller holds: tells the
// analysis that vma->vm_mm is that mm.
void vma_start_write_mm(Mm* mm, Vma* vma) REQUIRES(mm->mmap_lock) {
  VM_BUG_ON(vma->vm_mm != mm, "VMA of another mm");
  mmap_assert_write_locked(vma->vm_mm);
  vma_start_write(vma);
}

}  // namespace

// ---- page protections (mm/mmap.c, arch/x86/mm/pgprot.c) ----

pgprot_t vm_get_page_prot(vm_flags_t flags) {
  // x86's protection_map[]: private writable mappings get PAGE_COPY
  // (read-only until a write fault), shared writable ones PAGE_SHARED.
  constexpr uint64_t base = _PAGE_PRESENT | _PAGE_USER | _PAGE_ACCESSED;
  if (!(flags & VM_ACCESS_FLAGS)) return pgprot_t{_PAGE_PROTNONE | _PAGE_ACCESSED};  // PAGE_NONE
  uint64_t v = base;
  if ((flags & (VM_SHARED | VM_WRITE)) == (VM_SHARED | VM_WRITE)) v |= _PAGE_RW;
  if (!(flags & VM_EXEC)) v |= _PAGE_NX;
  return pgprot_t{v};
}

// vma_wants_writenotify: a shared writable mapping whose pages must take a
// write fault first (soft-dirty or uffd-wp tracking, or dirty accounting of
// an ext4-class file).
bool vma_wants_writenotify(const Vma* vma) {
  vm_flags_t f = vma->vm_flags;
  if ((f & (VM_SHARED | VM_WRITE)) != (VM_SHARED | VM_WRITE)) return false;
  if (vma_soft_dirty_enabled(vma) && !(f & VM_HUGETLB)) return true;
  if (f & VM_UFFD_WP) return true;
  if (f & VM_PFNMAP) return false;
  // vm_ops_needs_writenotify / vma_fs_can_writeback: ext4-class files.
  return vma_fs_can_writeback(vma);
}

void vma_set_page_prot(Vma* vma) {
  vm_flags_t f = vma->vm_flags;
  if (vma_wants_writenotify(vma)) f &= ~VM_SHARED;
  vma_page_prot_set(vma, vm_get_page_prot(f));
}

bool vma_is_shmem(const Vma* vma) {
  // shmem files (memfd/tmpfs) and shared anonymous memory, whose VMAs get a
  // shmem file from shmem_zero_setup().
  return vma->vm_file && file_is_shmem(vma->vm_file.get());
}

// ---- creating and linking ----

std::unique_ptr<Vma> vm_area_dup(const Vma* src) {
  auto vma = std::make_unique<Vma>();
  vma->vm_mm = src->vm_mm;
  vma->cid = src->vm_mm->kernel->next_cid.fetch_add(1, std::memory_order_relaxed);
  vma->vm_start = src->vm_start;
  vma->vm_end = src->vm_end;
  vma->vm_flags = src->vm_flags;
  vma->vm_page_prot = src->vm_page_prot;
  vma->vm_pgoff = src->vm_pgoff;
  vma->vm_file = src->vm_file;
  return vma;
}

void vma_link_file(Vma* vma) {
  if (!vma->vm_file) return;
  File* f = vma->vm_file.get();
  WriteGuard g(&f->i_mmap_rwsem);
  f->i_mmap.insert(vma);
}

void unlink_file_vma(Vma* vma) {
  if (!vma->vm_file) return;
  File* f = vma->vm_file.get();
  WriteGuard g(&f->i_mmap_rwsem);
  f->i_mmap.erase(vma);
}

Vma* vma_link(Mm* mm, std::unique_ptr<Vma> vma) {
  Vma* v = vma.get();
  // fork sets vm_mm before anon_vma_fork() makes the VMA visible to rmap
  // walkers, which read it: storing it again would race with them.
  if (v->vm_mm != mm) v->vm_mm = mm;
  VM_BUG_ON(find_vma_intersection(mm, v->vm_start, v->vm_end), "vma_link over a mapped range");
  vma_start_write_mm(mm, v);
  {
    WriteGuard tree(&mm->vma_tree_lock);
    mm->vmas.emplace(v->vm_start, std::move(vma));
  }
  vma_link_file(v);  // not under the tree lock, a leaf lock
  return v;
}

// ---- split (__split_vma) ----

int split_vma(Mm* mm, Vma* vma, uint64_t addr, bool new_below) {
  VM_BUG_ON(addr <= vma->vm_start || addr >= vma->vm_end || !is_aligned(addr, PAGE_SIZE),
             "split_vma outside the VMA");
  // hugetlb VMAs split only at huge page boundaries (hugetlb_vm_op_split).
  if (is_vm_hugetlb_page(vma))
    if (int err = hugetlb_split_check(vma, addr)) return err;
  std::unique_ptr<Vma> nv = vm_area_dup(vma);
  if (is_vm_hugetlb_page(vma)) hugetlb_vm_op_open(vma, nv.get());
  if (new_below) {
    nv->vm_end = addr;
  } else {
    nv->vm_start = addr;
    nv->vm_pgoff += (addr - vma->vm_start) >> PAGE_SHIFT;
  }
  anon_vma_clone(nv.get(), vma);

  vma_start_write_mm(mm, vma);
  vma_start_write_mm(mm, nv.get());
  // A PMD leaf straddling addr becomes PTEs before the VMA boundary appears.
  vma_adjust_trans_huge(vma, addr, addr);

  auto adjust = [&] {
    AnonVmaWriteLock rmap(vma->anon_vma);
    WriteGuard tree(&mm->vma_tree_lock);
    if (new_below) {
      auto node = mm->vmas.extract(vma->vm_start);
      vma->vm_pgoff += (addr - vma->vm_start) >> PAGE_SHIFT;
      vma->vm_start = addr;
      node.key() = addr;
      mm->vmas.insert(std::move(node));
    } else {
      vma->vm_end = addr;
    }
    uint64_t key = nv->vm_start;
    mm->vmas.emplace(key, std::move(nv));
  };
  // vma_prepare: a file VMA's i_mmap_rwsem for write, then its anon_vma's;
  // the new piece joins i_mmap in the same section.
  if (File* f = vma->vm_file.get()) {
    WriteGuard immap(&f->i_mmap_rwsem);
    f->i_mmap.insert(nv.get());
    adjust();
  } else {
    adjust();
  }
  return 0;
}

// ---- merge (vma_merge_existing_range / vma_merge_new_range) ----

namespace {

// is_mergeable_vma: same flags apart from VM_SOFTDIRTY, same file.
bool is_mergeable_vma(const Vma* a, const Vma* b) {
  if ((a->vm_flags ^ b->vm_flags) & ~VM_SOFTDIRTY) return false;
  if (a->vm_file != b->vm_file) return false;
  return true;
}

// A VMA linked into more than its own anon_vma: a fork child's VMA that still
// maps folios of its parents (vma_had_uncowed_parents).
bool vma_had_uncowed_parents(const Vma* vma) {
  return vma && vma->anon_vma && vma->anon_vma_chain.size() != 1;
}

// is_mergeable_anon_vma: may src's anon pages be covered by tgt's anon_vma?
bool is_mergeable_anon_vma(const Vma* src, const Vma* tgt) {
  AnonVma* s = src->anon_vma;
  AnonVma* t = tgt->anon_vma;
  if (!t && s) return !vma_had_uncowed_parents(src);  // tgt will take src's
  if (t && !s) return !vma_had_uncowed_parents(tgt);  // src will take tgt's
  return s == t;
}

// are_anon_vmas_compatible: prev and next may end up in one VMA.
bool are_anon_vmas_compatible(const Vma* a, const Vma* b) {
  if ((!a->anon_vma || !b->anon_vma) && (a->anon_vma_chain.size() == 1 || b->anon_vma_chain.size() == 1))
    return true;
  return a->anon_vma == b->anon_vma;
}

// can_vma_merge_after/before without the anon_vma part: lo and hi adjacent,
// same flags and file, and file (or linear anon) offsets contiguous.
bool can_merge_pair(const Vma* lo, const Vma* hi) {
  if (lo->vm_end != hi->vm_start) return false;
  if (!is_mergeable_vma(lo, hi)) return false;
  if (lo->vm_pgoff + lo->pages() != hi->vm_pgoff) return false;
  // Shared anonymous VMAs without a file cannot tell whether they map the same
  // object: keep them apart until shmem_zero_setup() gives them files.
  if (!lo->vm_file && (lo->vm_flags & VM_SHARED)) return false;
  return true;
}

// Link target into every anon_vma of victim it lacks (dup_anon_vma), so the
// merged VMA stays reachable from all of them.
void merge_anon_vma_links(Vma* target, const Vma* victim) {
  if (!victim->anon_vma) return;
  anon_vma_clone(target, victim);
}

}  // namespace

Vma* vma_merge_neighbours(Mm* mm, Vma* vma) {
  if (vma->vm_flags & VM_SPECIAL) return vma;
  Vma* prev = vma_prev(mm, vma);
  Vma* next = vma_next(mm, vma);
  bool left = prev && can_merge_pair(prev, vma) && is_mergeable_anon_vma(vma, prev);
  bool right = next && can_merge_pair(vma, next) && is_mergeable_anon_vma(vma, next);
  if (left && right && !are_anon_vmas_compatible(prev, next)) right = false;
  if (!left && !right) return vma;

  // The lowest VMA survives and grows; the others go. (The kernel sometimes
  // keeps next and moves its start down instead; the resulting layout is the
  // same.)
  Vma* target = left ? prev : vma;
  std::vector<Vma*> victims;
  if (left) victims.push_back(vma);
  if (right) victims.push_back(next);
  const uint64_t new_end = victims.back()->vm_end;
  const vm_flags_t flags = vma->vm_flags;  // the flags just given to vma (VM_SOFTDIRTY included)

  vma_start_write_mm(mm, target);
  for (Vma* v : victims) {
    vma_start_write_mm(mm, v);
    merge_anon_vma_links(target, v);
  }

  std::vector<std::unique_ptr<Vma>> gone;
  auto adjust = [&] {
    AnonVmaWriteLock rmap(target->anon_vma);
    {
      WriteGuard tree(&mm->vma_tree_lock);
      for (Vma* v : victims) {
        auto node = mm->vmas.extract(v->vm_start);
        gone.push_back(std::move(node.mapped()));
      }
      target->vm_end = new_end;
    }
    vm_flags_reset(target, flags);
    vma_set_page_prot(target);
  };
  // vma_prepare: the file's i_mmap_rwsem for write across the change (the
  // victims map the same file: is_mergeable_vma); they leave i_mmap in it.
  if (File* f = target->vm_file.get()) {
    WriteGuard immap(&f->i_mmap_rwsem);
    adjust();
    for (auto& v : gone) f->i_mmap.erase(v.get());
  } else {
    adjust();
  }

  for (auto& v : gone) unlink_anon_vmas(v.get());
  // vma_merge_existing_range / vma_merge_new_range: the merged VMA may be
  // eligible where its parts were not (it may have an anon_vma now).
  mm_khugepaged_enter_vma(target, flags);
  return target;
}

// ---- vma_modify_flags (mm/vma.c): split, set, merge ----

Vma* vma_modify_flags(Mm* mm, Vma* vma, uint64_t start, uint64_t end, vm_flags_t newflags, int* err) {
  VM_BUG_ON(start < vma->vm_start || end > vma->vm_end || start >= end, "vma_modify_flags outside the VMA");
  // A split error (-ENOMEM, or -EINVAL inside a huge page) is the caller's result.
  if (start > vma->vm_start) {
    if (int e = split_vma(mm, vma, start, /*new_below=*/false)) {
      if (err) *err = e;
      return nullptr;
    }
    vma = vma_lookup(mm, start);
  }
  if (end < vma->vm_end) {
    if (int e = split_vma(mm, vma, end, /*new_below=*/false)) {
      if (err) *err = e;
      return nullptr;
    }
  }
  vma_start_write_mm(mm, vma);
  vm_flags_reset(vma, newflags);
  vma_set_page_prot(vma);
  return vma_merge_neighbours(mm, vma);
}

}  // namespace mmlab
