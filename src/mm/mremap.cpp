// mremap(): the VMA part (mm/mremap.c: check_mremap_params, check_prep_vma
// with align_hugetlb and resize_is_valid, shrink_vma, expand_vma, mremap_to,
// move_vma, remap_move; mm/vma.c's copy_vma). The entries move with
// move_page_tables() (mremap_pgtable.cpp), hugetlb ones with
// move_hugetlb_page_tables().
//
// A pure move (MREMAP_FIXED, old_len == new_len) may span several VMAs
// since v6.17 (remap_move): each is moved on its own, the gaps between
// them kept, and what is mapped in the target's gaps left alone. No gap at
// the start of the range; a VMA that vma_multi_allowed() refuses may only
// be moved alone, covering the whole range; a failure part-way leaves what
// moved where it went.
//
// hugetlb mappings (since v5.16): both lengths are rounded up to the huge
// page size, the old and the new address must be huge-page aligned, and a
// mapping never grows (the reservation map cannot be split); a move keeps
// the file offsets, so the moved VMA takes over the reservation map
// (clear_vma_resv_huge_pages on the source).
#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/mremap.h"
#include "mm/mseal.h"
#include "mm/vma.h"

namespace mmlab {
namespace {

// struct vma_remap_struct, trimmed to what an anonymous-only model needs.
struct RemapRequest {
  uint64_t addr;
  uint64_t old_len;
  uint64_t new_len;
  int flags;
  uint64_t new_addr;
  bool populate_expansion = false;  // a VM_LOCKED VMA grew: mm_populate the new part
};

bool implies_new_addr(const RemapRequest& r) { return r.flags & (MREMAP_FIXED | MREMAP_DONTUNMAP); }

// vrm_overlaps: do the old and the new range intersect?
bool overlaps(const RemapRequest& r) {
  return r.addr + r.old_len > r.new_addr && r.new_addr + r.new_len > r.addr;
}

// check_mremap_params: the checks that need no VMA, on page-aligned lengths.
int check_mremap_params(const Mm* mm, const RemapRequest& r) {
  if (r.flags & ~(MREMAP_FIXED | MREMAP_MAYMOVE | MREMAP_DONTUNMAP)) return -EINVAL;
  if (r.addr & ~PAGE_MASK) return -EINVAL;
  // A zero old_len duplicates a shared mapping; a zero new_len is nonsense.
  if (!r.new_len) return -EINVAL;
  if (r.new_len > mm->task_size) return -EINVAL;
  if (!implies_new_addr(r)) return 0;
  if (r.new_addr > mm->task_size - r.new_len) return -EINVAL;
  if (r.new_addr & ~PAGE_MASK) return -EINVAL;
  if (!(r.flags & MREMAP_MAYMOVE)) return -EINVAL;  // a fixed address implies a move
  if ((r.flags & MREMAP_DONTUNMAP) && r.old_len != r.new_len) return -EINVAL;
  if (overlaps(r)) return -EINVAL;
  return 0;
}

// align_hugetlb: whole huge pages, from huge-page aligned addresses (the
// new address is checked as given, even when no move was asked for), and
// no growth. false: -EINVAL.
bool align_hugetlb(RemapRequest& r, const Vma* vma) {
  const uint64_t hsize = vma_kernel_pagesize(vma);
  r.old_len = round_up(r.old_len, hsize);
  r.new_len = round_up(r.new_len, hsize);
  if (r.addr & (hsize - 1)) return false;
  if (r.new_addr & (hsize - 1)) return false;
  return r.new_len <= r.old_len;
}

// resize_is_valid: may vma's [addr, addr+old_len) become new_len long?
int resize_is_valid(const RemapRequest& r, const Vma* vma) {
  if (!r.old_len && !(vma->vm_flags & (VM_SHARED | VM_MAYSHARE))) return -EINVAL;  // no private "duplicate"
  if ((r.flags & MREMAP_DONTUNMAP) && (vma->vm_flags & (VM_DONTEXPAND | VM_PFNMAP))) return -EINVAL;
  if (r.old_len > vma->vm_end - r.addr) return -EFAULT;  // can't remap across VMA boundaries
  if (r.new_len == r.old_len) return 0;
  uint64_t pgoff = linear_page_index(vma, r.addr);
  if (pgoff + (r.new_len >> PAGE_SHIFT) < pgoff) return -EINVAL;
  if (vma->vm_flags & (VM_DONTEXPAND | VM_PFNMAP)) return -EFAULT;
  return 0;
}

// vma_expandable: is there room for vma to grow by delta in place?
bool vma_expandable(Mm* mm, Vma* vma, uint64_t delta) REQUIRES(mm->mmap_lock) {
  uint64_t end = vma->vm_end + delta;
  if (end < vma->vm_end) return false;  // overflow
  if (find_vma_intersection(mm, vma->vm_end, end)) return false;
  if (get_unmapped_area(mm, vma->vm_start, end - vma->vm_start, 0, MAP_FIXED, 0) < 0) return false;
  return true;
}

// vrm_set_new_addr: the destination (MREMAP_FIXED: new_addr itself; else a
// fresh area, new_addr a hint only with MREMAP_DONTUNMAP).
long set_new_addr(Mm* mm, RemapRequest& r, Vma* vma) REQUIRES(mm->mmap_lock) {
  int map_flags = 0;
  if (r.flags & MREMAP_FIXED) map_flags |= MAP_FIXED;
  if (vma->vm_flags & VM_MAYSHARE) map_flags |= MAP_SHARED;
  uint64_t hint = implies_new_addr(r) ? r.new_addr : 0;
  const uint64_t pgoff = linear_page_index(vma, r.addr);
  long res = is_vm_hugetlb_page(vma)
                 ? hugetlb_get_unmapped_area(mm, vma->vm_file.get(), hint, r.new_len, pgoff, map_flags)
                 : get_unmapped_area(mm, hint, r.new_len, pgoff, map_flags, vma->vm_flags);
  if (res < 0) return res;
  r.new_addr = static_cast<uint64_t>(res);
  return 0;
}

// copy_vma: a VMA like vma for [new_addr, new_addr+new_len), merged with its
// new neighbours when they are compatible. An anonymous VMA that never
// faulted takes the linear offset of its new place, to merge more often.
Vma* copy_vma(Mm* mm, Vma* vma, uint64_t new_addr, uint64_t new_len, uint64_t pgoff) REQUIRES(mm->mmap_lock) {
  if (vma->is_anonymous() && !vma->anon_vma) pgoff = new_addr >> PAGE_SHIFT;
  std::unique_ptr<Vma> nv = vm_area_dup(vma);
  if (is_vm_hugetlb_page(vma)) hugetlb_vm_op_open(vma, nv.get());  // vm_ops->open: shares the reserve map
  nv->vm_start = new_addr;
  nv->vm_end = new_addr + new_len;
  nv->vm_pgoff = pgoff;
  anon_vma_clone(nv.get(), vma);
  Vma* new_vma = vma_link(mm, std::move(nv));
  return vma_merge_neighbours(mm, new_vma);
}

// move_vma: copy the VMA, move the entries, unmap the source range (or, with
// MREMAP_DONTUNMAP, leave it mapped and empty).
long move_vma(Mm* mm, RemapRequest& r, Vma* vma) REQUIRES(mm->mmap_lock) {
  mmap_assert_write_locked(vma->vm_mm);
  vma_start_write(vma);  // no racing faults in the source

  Vma* new_vma = copy_vma(mm, vma, r.new_addr, r.new_len, linear_page_index(vma, r.addr));
  mm->total_vm.fetch_add(r.new_len >> PAGE_SHIFT, std::memory_order_relaxed);
  // The merge may have absorbed the source VMA (an unfaulted anonymous VMA
  // moved next to itself): find it again.
  vma = vma_lookup(mm, r.addr);
  VM_BUG_ON(!vma && r.old_len, "mremap source vanished");

  uint64_t moved = r.old_len ? move_page_tables(vma, r.addr, new_vma, r.new_addr, r.old_len) : 0;
  // fixup_hugetlb_reservations: the reservation map now lives on in the new
  // VMA; the source gives nothing back when it is unmapped.
  if (is_vm_hugetlb_page(vma)) clear_vma_resv_huge_pages(vma, new_vma);
  if (moved < r.old_len) {
    // Put back what moved and unmap the new area instead of the old one.
    move_page_tables(new_vma, r.new_addr, vma, r.addr, moved);
    // As the kernel's move_vma: the mremap fails with -ENOMEM either way.
    (void)do_vmi_munmap(mm, r.new_addr, r.new_len, MunmapZap::kZap);
    return -ENOMEM;
  }

  if (r.flags & MREMAP_DONTUNMAP) {
    // dontunmap_complete: the old VMA stays, unlocked and uncharged; if it
    // was moved whole, its pages all live in the new VMA now.
    mmap_assert_write_locked(vma->vm_mm);
    vma_start_write(vma);
    vm_flags_reset(vma, vma->vm_flags & ~(VM_LOCKED_MASK | VM_ACCOUNT));
    vma_set_page_prot(vma);
    if (new_vma != vma && r.addr == vma->vm_start && r.addr + r.old_len == vma->vm_end) unlink_anon_vmas(vma);
  } else if (r.old_len) {
    // The entries are gone already: remove the range and free its tables.
    // The move stands even if this fails (it can fail only to split a VMA),
    // as in the kernel's move_vma.
    (void)do_vmi_munmap(mm, r.addr, r.old_len, MunmapZap::kNoZap);
  }
  return static_cast<long>(r.new_addr);
}

// expand_vma: grow in place when [addr, addr+old_len) ends the VMA and the
// space above is free, else move (MREMAP_MAYMOVE) or fail.
long expand_vma(Mm* mm, RemapRequest& r, Vma* vma) REQUIRES(mm->mmap_lock) {
  int err = resize_is_valid(r, vma);
  if (err) return err;
  const uint64_t delta = r.new_len - r.old_len;
  if (vma->vm_end - r.addr == r.old_len && vma_expandable(mm, vma, delta)) {
    // vma_merge_extend: the VMA grows, then may merge with the next one.
    mmap_assert_write_locked(vma->vm_mm);
    vma_start_write(vma);
    auto grow = [&] {
      AnonVmaWriteLock rmap(vma->anon_vma);
      WriteGuard tree(&mm->vma_tree_lock);
      vma->vm_end += delta;
    };
    if (File* f = vma->vm_file.get()) {
      WriteGuard immap(&f->i_mmap_rwsem);  // vma_prepare: a file VMA's range changes
      grow();
    } else {
      grow();
    }
    mm->total_vm.fetch_add(delta >> PAGE_SHIFT, std::memory_order_relaxed);
    vma = vma_merge_neighbours(mm, vma);
    if (vma->vm_flags & VM_LOCKED) {
      r.populate_expansion = true;
      r.new_addr = r.addr;
    }
    return static_cast<long>(r.addr);
  }
  if (!(r.flags & MREMAP_MAYMOVE)) return -ENOMEM;
  err = static_cast<int>(set_new_addr(mm, r, vma));
  if (err) return err;
  if (vma->vm_flags & VM_LOCKED) r.populate_expansion = true;
  return move_vma(mm, r, vma);
}

// mremap_to: MREMAP_FIXED / MREMAP_DONTUNMAP.
long mremap_to(Mm* mm, RemapRequest& r, Vma* vma) REQUIRES(mm->mmap_lock) {
  if (r.flags & MREMAP_FIXED) {
    int err = do_vmi_munmap(mm, r.new_addr, r.new_len);
    if (err) return err;
    vma = vma_lookup(mm, r.addr);  // the unmap may have split it
    if (!vma) return -EFAULT;
  }
  if (r.new_len < r.old_len) {  // shrink first, then move what is left
    int err = do_vmi_munmap(mm, r.addr + r.new_len, r.old_len - r.new_len);
    if (err) return err;
    r.old_len = r.new_len;
    vma = vma_lookup(mm, r.addr);
    if (!vma) return -EFAULT;
  }
  int err = resize_is_valid(r, vma);
  if (err) return err;
  long res = set_new_addr(mm, r, vma);
  if (res) return res;
  if ((vma->vm_flags & VM_LOCKED) && r.new_len > r.old_len) r.populate_expansion = true;
  return move_vma(mm, r, vma);
}

// check_prep_vma's VMA checks, then mremap_to: one VMA of a move.
long remap_one(Mm* mm, RemapRequest& r, Vma* vma) REQUIRES(mm->mmap_lock) {
  if (!vma) return -EFAULT;
  if (vma_is_sealed(vma)) return -EPERM;
  if (is_vm_hugetlb_page(vma) && !align_hugetlb(r, vma)) return -EINVAL;
  return mremap_to(mm, r, vma);
}

// vrm_move_only: a move that resizes nothing may span VMAs.
bool move_only(const RemapRequest& r) { return (r.flags & MREMAP_FIXED) && r.old_len == r.new_len; }

// vma_multi_allowed: may this VMA be moved together with others? Not one
// with userfaultfd (telling it about the move drops mmap_lock). A file with
// a get_unmapped_area of its own might not honour MREMAP_FIXED, but the
// model's file classes are the kernel's known-good ones (shmem, hugetlbfs,
// ext4 and xfs with thp_get_unmapped_area, btrfs with none).
bool vma_multi_allowed(const Vma* vma) { return !userfaultfd_armed(vma); }

// remap_move: every VMA of [addr, addr+old_len) to new_addr, the offsets
// between them kept. The first VMA's new address is the result.
long remap_move(Mm* mm, const RemapRequest& req) REQUIRES(mm->mmap_lock) {
  const uint64_t start = req.addr, end = req.addr + req.old_len;
  uint64_t target = req.new_addr, last_end = 0, cursor = start;
  long res = -EFAULT;  // no VMA at all in the range
  bool seen_vma = false;
  // Moved pieces land outside [start, end) (check_mremap_params refused
  // an overlap), so the next VMA to move is the next one above the last.
  while (Vma* vma = find_vma_intersection(mm, cursor, end)) {
    if (!seen_vma && start < vma->vm_start) return -EFAULT;  // no gap at the start
    const uint64_t addr = std::max(vma->vm_start, start);
    const uint64_t len = std::min(end, vma->vm_end) - addr;
    const uint64_t offset = seen_vma ? vma->vm_start - last_end : 0;
    last_end = vma->vm_end;
    // A VMA that may not move with others must be the only one, gap included.
    if (!vma_multi_allowed(vma) && (seen_vma || vma->vm_end < end)) return -EFAULT;
    RemapRequest piece{addr, len, len, req.flags, target + offset};
    const long moved = remap_one(mm, piece, vma);
    if (moved < 0) return moved;  // what moved before stays moved
    if (!seen_vma) res = moved;
    seen_vma = true;
    target = static_cast<uint64_t>(moved) + piece.new_len;
    cursor = last_end;
  }
  return res;
}

long mremap_locked(Mm* mm, RemapRequest& r) REQUIRES(mm->mmap_lock) {
  if (move_only(r)) return remap_move(mm, r);
  Vma* vma = vma_lookup(mm, r.addr);
  if (!vma) return -EFAULT;
  if (vma_is_sealed(vma)) return -EPERM;  // check_prep_vma: any mremap of it, even one that changes nothing
  if (is_vm_hugetlb_page(vma) && !align_hugetlb(r, vma)) return -EINVAL;
  if (implies_new_addr(r)) return mremap_to(mm, r, vma);
  if (r.new_len == r.old_len) return static_cast<long>(r.addr);  // MREMAP_NO_RESIZE
  if (r.new_len < r.old_len) {                                   // shrink_vma: always in place
    int err = do_vmi_munmap(mm, r.addr + r.new_len, r.old_len - r.new_len);
    if (err) return err;
    return static_cast<long>(r.addr);
  }
  return expand_vma(mm, r, vma);
}

}  // namespace

long do_mremap(Mm* mm, uint64_t addr, uint64_t old_len, uint64_t new_len, int flags, uint64_t new_addr) {
  RemapRequest r{addr, round_up(old_len, PAGE_SIZE), round_up(new_len, PAGE_SIZE), flags, new_addr};
  int err = check_mremap_params(mm, r);
  if (err) return err;

  mmap_write_lock(mm);
  long ret = mremap_locked(mm, r);
  mmap_write_unlock(mm);
  if (ret >= 0 && r.populate_expansion && r.new_len > r.old_len)
    mm_populate(mm, r.new_addr + r.old_len, r.new_len - r.old_len);
  return ret;
}

}  // namespace mmlab
