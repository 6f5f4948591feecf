// mmap, munmap and address-space teardown (mm/mmap.c, mm/vma.c's
// __mmap_region and do_vmi_munmap, arch/x86/kernel/sys_x86_64.c's top-down
// allocator, mm/huge_memory.c's THP alignment of large anonymous mappings).
//
// File mappings (mm/mmap.c's do_mmap file branch, f_op->get_unmapped_area
// and ->mmap for shmem, ext4-class files and hugetlbfs) and shared anonymous
// memory (shmem_zero_setup) go through the same path; the file layer
// (fault/filemap.cpp) supplies the files.
#include <algorithm>
#include <iterator>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "base/mmdebug.h"
#include "mm/anon_vma.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/gup_hooks.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/khugepaged_hooks.h"
#include "mm/memory.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/mseal.h"
#include "mm/vma.h"
#include "tlb/tlb.h"

namespace mmlab {
namespace {

// uapi mmap flags the public header does not name.
constexpr int MAP_GROWSDOWN = 0x0100;
constexpr int MAP_NONBLOCK = 0x10000;
constexpr int MAP_STACK = 0x20000;
constexpr int MAP_DENYWRITE = 0x0800, MAP_EXECUTABLE = 0x1000, MAP_UNINITIALIZED = 0x4000000;
constexpr int MAP_HUGE_MASK = 0x3f;
// LEGACY_MAP_MASK: the flags MAP_SHARED_VALIDATE accepts (no MAP_SYNC: no DAX).
constexpr int LEGACY_MAP_MASK = MAP_SHARED | MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS | MAP_DENYWRITE |
                                MAP_EXECUTABLE | MAP_UNINITIALIZED | MAP_GROWSDOWN | MAP_LOCKED | MAP_NORESERVE |
                                MAP_POPULATE | MAP_NONBLOCK | MAP_STACK | MAP_HUGETLB;

// The gap kept below a VM_GROWSDOWN VMA (stack_guard_gap, 256 pages).
constexpr uint64_t stack_guard_gap = 256ull << PAGE_SHIFT;

uint64_t vm_start_gap(const Vma* vma) {
  if (!(vma->vm_flags & VM_GROWSDOWN)) return vma->vm_start;
  return vma->vm_start > stack_guard_gap ? vma->vm_start - stack_guard_gap : 0;
}
uint64_t vm_end_gap(const Vma* vma) { return vma->vm_end; }  // no VM_GROWSUP on x86

// calc_vm_flag_bits: MAP_GROWSDOWN, MAP_LOCKED, and MAP_STACK, which asks for
// no THP (v6.7+).
vm_flags_t calc_vm_flag_bits(int flags) {
  return ((flags & MAP_GROWSDOWN) ? VM_GROWSDOWN : 0) | ((flags & MAP_LOCKED) ? VM_LOCKED : 0) |
         ((flags & MAP_STACK) ? VM_NOHUGEPAGE : 0);
}

// round_hint_to_min: a hint below mmap_min_addr moves up to it.
uint64_t round_hint_to_min(uint64_t hint) {
  hint &= PAGE_MASK;
  if (hint && hint < mmap_min_addr) return round_up(mmap_min_addr, PAGE_SIZE);
  return hint;
}

// unmapped_area_topdown: the highest len-byte gap inside [low, high).
long unmapped_area_topdown(Mm* mm, uint64_t len, uint64_t low, uint64_t high) {
  if (high < low || high - low < len) return -ENOMEM;
  uint64_t gap_end = high;
  auto it = mm->vmas.lower_bound(high);  // the first VMA starting at or above high
  for (;;) {
    const Vma* below = (it == mm->vmas.begin()) ? nullptr : std::prev(it)->second.get();
    uint64_t gap_start = below ? std::max(vm_end_gap(below), low) : low;
    if (gap_end > gap_start && gap_end - gap_start >= len) return static_cast<long>(gap_end - len);
    if (!below) return -ENOMEM;
    gap_end = std::min(gap_end, vm_start_gap(below));
    if (gap_end <= low) return -ENOMEM;
    --it;
  }
}

// unmapped_area: the lowest len-byte gap inside [low, high).
long unmapped_area(Mm* mm, uint64_t len, uint64_t low, uint64_t high) {
  if (high < low || high - low < len) return -ENOMEM;
  uint64_t gap_start = low;
  auto it = mm->vmas.upper_bound(low);
  if (it != mm->vmas.begin()) gap_start = std::max(low, vm_end_gap(std::prev(it)->second.get()));
  for (;; ++it) {
    uint64_t gap_end = (it == mm->vmas.end()) ? high : std::min(high, vm_start_gap(it->second.get()));
    if (gap_end > gap_start && gap_end - gap_start >= len) return static_cast<long>(gap_start);
    if (it == mm->vmas.end() || gap_end >= high) return -ENOMEM;
    gap_start = std::max(gap_start, vm_end_gap(it->second.get()));
  }
}

// arch_get_unmapped_area_topdown (x86): MAP_FIXED returns addr unchecked; a
// hint is taken when the range is free; else the highest gap below
// mmap_base, falling back to a bottom-up search from the legacy base.
long arch_get_unmapped_area_topdown(Mm* mm, uint64_t addr, uint64_t len, int flags)
    REQUIRES_SHARED(mm->mmap_lock) {
  if (len > mm->task_size) return -ENOMEM;
  if (flags & MAP_FIXED) return static_cast<long>(addr);
  if (addr) {
    addr &= PAGE_MASK;
    if (addr <= mm->task_size - len) {  // mmap_address_hint_valid
      Vma* vma = find_vma(mm, addr);
      if (!vma || addr + len <= vm_start_gap(vma)) return static_cast<long>(addr);
    }
  }
  long ret = unmapped_area_topdown(mm, len, PAGE_SIZE, mm->mmap_base);
  if (ret >= 0) return ret;
  // arch_get_unmapped_area: bottom-up from mmap_legacy_base (TASK_UNMAPPED_BASE).
  return unmapped_area(mm, len, round_up(mm->task_size / 3, PAGE_SIZE), mm->task_size);
}

// thp_get_unmapped_area_vmflags (__thp_get_unmapped_area): when [off, off+len)
// of the file (off 0 for anonymous memory) covers a PMD-aligned PMD, search
// with a PMD of padding and return the address inside the gap found that is
// congruent to off modulo PMD_SIZE; with a top-down layout an already
// aligned result moves up one PMD.
long thp_get_unmapped_area(Mm* mm, uint64_t addr, uint64_t len, int flags, uint64_t off = 0)
    REQUIRES_SHARED(mm->mmap_lock) {
  uint64_t off_end = off + len;
  uint64_t off_align = round_up(off, PMD_SIZE);
  uint64_t len_pad = len + PMD_SIZE;
  if (off_end > off_align && off_end - off_align >= PMD_SIZE && len_pad > len && off + len_pad > off) {
    long ret = arch_get_unmapped_area_topdown(mm, addr, len_pad, flags);
    if (ret >= 0) {
      uint64_t r = static_cast<uint64_t>(ret);
      if (r == addr) return ret;
      uint64_t off_sub = (off - r) & (PMD_SIZE - 1);
      if (!off_sub) return static_cast<long>(r + PMD_SIZE);
      return static_cast<long>(r + off_sub);
    }
  }
  return arch_get_unmapped_area_topdown(mm, addr, len, flags);
}

// The end of __get_unmapped_area: the checks every get_area result passes.
long check_unmapped_area(Mm* mm, long ret, uint64_t len) {
  if (ret < 0) return ret;
  uint64_t a = static_cast<uint64_t>(ret);
  if (a > mm->task_size - len) return -ENOMEM;
  if (a & ~PAGE_MASK) return -EINVAL;
  // security_mmap_addr (cap_mmap_addr): the model's processes lack CAP_SYS_RAWIO.
  if (a < mmap_min_addr) return -EPERM;
  return ret;
}

// __get_unmapped_area for a file mapping: the file's get_unmapped_area.
//   hugetlbfs: hugetlb_get_unmapped_area (the hugetlb layer: length and
//     MAP_FIXED address must be huge-page aligned, the result is aligned);
//   shmem: shmem_get_unmapped_area, plain placement while shmem THP is "never";
//   ext4, xfs: thp_get_unmapped_area (PMD alignment congruent to the offset);
//   btrfs: no get_unmapped_area of its own (mm_get_unmapped_area).
long file_get_unmapped_area(Mm* mm, const File* file, uint64_t addr, uint64_t len, uint64_t pgoff, int flags)
    REQUIRES_SHARED(mm->mmap_lock) {
  if (len > mm->task_size) return -ENOMEM;
  long ret;
  switch (file->fs) {
    case FsClass::kHugetlbfs:
      return hugetlb_get_unmapped_area(mm, const_cast<File*>(file), addr, len, pgoff, flags);
    case FsClass::kExt4:
    case FsClass::kXfs:
      ret = thp_get_unmapped_area(mm, addr, len, flags, pgoff << PAGE_SHIFT);
      break;
    case FsClass::kShmem:
    case FsClass::kBtrfs:
    default:
      ret = arch_get_unmapped_area_topdown(mm, addr, len, flags);
      break;
  }
  return check_unmapped_area(mm, ret, len);
}

}  // namespace

long get_unmapped_area(Mm* mm, uint64_t addr, uint64_t len, uint64_t pgoff, int flags, vm_flags_t vm_flags) {
  (void)pgoff;     // always 0 for anonymous memory
  (void)vm_flags;  // only VM_SHADOW_STACK would matter (stack_guard_placement)
  if (len > mm->task_size) return -ENOMEM;
  long ret;
  if (flags & MAP_SHARED) {
    // shmem_get_unmapped_area (shmem_zero_setup gives the mapping a shmem
    // file): plain placement while shmem THP is "never" (not modelled).
    ret = arch_get_unmapped_area_topdown(mm, addr, len, flags);
  } else if (!addr && is_aligned(len, PMD_SIZE)) {
    // Larger anonymous mappings are THP aligned (only without a hint).
    ret = thp_get_unmapped_area(mm, addr, len, flags);
  } else {
    ret = arch_get_unmapped_area_topdown(mm, addr, len, flags);
  }
  return check_unmapped_area(mm, ret, len);
}

// ---- munmap (do_vmi_munmap, do_vmi_align_munmap, vms_complete_munmap_vmas) ----

int do_vmi_munmap(Mm* mm, uint64_t start, uint64_t len, MunmapZap zap) {
  if ((start & ~PAGE_MASK) || start > mm->task_size || len > mm->task_size - start) return -EINVAL;
  const uint64_t end = start + round_up(len, PAGE_SIZE);
  if (end == start) return -EINVAL;
  Vma* vma = find_vma_intersection(mm, start, end);
  if (!vma) return 0;
  // A sealed VMA anywhere in the range refuses the whole unmap, before any
  // split (vms_gather_munmap_vmas checks each VMA before it detaches it and
  // puts the detached ones back on failure).
  for (Vma* v = vma; v && v->vm_start < end; v = vma_next(mm, v))
    if (vma_is_sealed(v)) return -EPERM;

  // Split the VMAs straddling either end, so [start, end) is whole VMAs.
  if (vma->vm_start < start) {
    if (int err = split_vma(mm, vma, start, /*new_below=*/false)) return err;
  }
  if (Vma* last = vma_lookup(mm, end - 1); last && last->vm_end > end) {
    if (int err = split_vma(mm, last, end, /*new_below=*/false)) return err;
  }

  // Gather and detach.
  std::vector<Vma*> victims;
  for (auto it = mm->vmas.lower_bound(start); it != mm->vmas.end() && it->second->vm_start < end; ++it)
    victims.push_back(it->second.get());
  VM_BUG_ON(victims.empty(), "munmap found nothing after the split");
  Vma* prev = vma_prev(mm, victims.front());
  Vma* next = vma_next(mm, victims.back());
  const uint64_t floor = prev ? prev->vm_end : 0;       // FIRST_USER_ADDRESS
  const uint64_t ceiling = next ? next->vm_start : 0;   // USER_PGTABLES_CEILING: the top

  uint64_t pages = 0;
  for (Vma* v : victims) {
    mmap_assert_write_locked(v->vm_mm);
    vma_start_write(v);
    pages += v->pages();
  }
  std::vector<std::unique_ptr<Vma>> gone;
  {
    WriteGuard tree(&mm->vma_tree_lock);
    for (Vma* v : victims) gone.push_back(std::move(mm->vmas.extract(v->vm_start).mapped()));
  }
  mm->total_vm.fetch_sub(pages, std::memory_order_relaxed);

  // unmap_region: zap, unlink the rmap, free the page tables no VMA needs,
  // under one mmu_gather: one flush at the end.
  MmuGather tlb;
  tlb_gather_mmu(&tlb, mm);
  if (zap == MunmapZap::kZap)
    for (auto& v : gone) zap_vma_range(v.get(), v->vm_start, v->vm_end);
  for (auto& v : gone) {
    if (is_vm_hugetlb_page(v.get())) hugetlb_vm_op_close(v.get());  // vm_ops->close
    unlink_file_vma(v.get());
    unlink_anon_vmas(v.get());
  }
  free_pgtables(mm, start, end, floor, ceiling);
  tlb_finish_mmu(&tlb);
  return 0;
}

int do_munmap(Mm* mm, uint64_t start, uint64_t len) {
  mmap_write_lock(mm);
  int ret = do_vmi_munmap(mm, start, len);
  mmap_write_unlock(mm);
  return ret;
}

// ---- mmap ----

namespace {

// file_mmap_ok: the file range [pgoff, pgoff + len) must be addressable
// (MAX_LFS_FILESIZE: LLONG_MAX for every file system modelled).
bool file_mmap_ok(uint64_t pgoff, uint64_t len) {
  constexpr uint64_t maxsize = static_cast<uint64_t>(INT64_MAX);
  if (len > maxsize) return false;
  if (pgoff > (maxsize >> PAGE_SHIFT)) return false;
  if (maxsize - len < (pgoff << PAGE_SHIFT)) return false;
  return true;
}

// __mmap_region at a chosen address: a file mapping (file set), shared
// anonymous memory (a shmem file from shmem_zero_setup) or private anonymous.
long mmap_region(Mm* mm, uint64_t addr, uint64_t len, vm_flags_t vm_flags, uint64_t pgoff,
                 const std::shared_ptr<File>& file) REQUIRES(mm->mmap_lock) {
  // accountable_mapping: private writable memory is charged (VM_ACCOUNT);
  // hugetlbfs does its own reservations.
  bool hugetlb_file = file && file->fs == FsClass::kHugetlbfs;
  if (!hugetlb_file && (vm_flags & (VM_NORESERVE | VM_SHARED | VM_WRITE)) == VM_WRITE) vm_flags |= VM_ACCOUNT;
  // New (or expanded) VMAs are soft-dirty (__mmap_complete).
  vm_flags |= VM_SOFTDIRTY;

  auto nv = std::make_unique<Vma>();
  nv->vm_mm = mm;
  nv->cid = mm->kernel->next_cid.fetch_add(1, std::memory_order_relaxed);
  nv->vm_start = addr;
  nv->vm_end = addr + len;
  nv->vm_flags = vm_flags;
  nv->vm_pgoff = pgoff;
  if (file) {
    // ->mmap_prepare: before anything is unmapped, so a refusal leaves a
    // MAP_FIXED target as it was (vms_abort_munmap_vmas).
    nv->vm_file = file;
    int err = file_mmap_prepare(file.get(), nv.get());
    if (err) return err;
  }
  // MAP_FIXED over existing mappings: they go first.
  if (find_vma_intersection(mm, addr, addr + len)) {
    int err = do_vmi_munmap(mm, addr, len);
    if (err) {
      if (is_vm_hugetlb_page(nv.get())) hugetlb_vm_op_close(nv.get());  // give the reservation back
      return err;
    }
  }
  if (!file && (vm_flags & VM_SHARED)) {
    // Shared anonymous memory is a shmem file of the mapping's size.
    nv->vm_file = shmem_zero_setup(mm->kernel, len);
    if (!nv->vm_file) return -ENOMEM;
  }
  nv->vm_page_prot = vm_get_page_prot(nv->vm_flags);
  Vma* vma = vma_link(mm, std::move(nv));
  mm->total_vm.fetch_add(len >> PAGE_SHIFT, std::memory_order_relaxed);
  // __mmap_complete: VMAs that can never be locked lose the lock bits
  // (MAP_LOCKED or mlockall(MCL_FUTURE) on hugetlb; the caller still
  // populates them), before a merge compares flags.
  if ((vma->vm_flags & VM_LOCKED) && ((vma->vm_flags & VM_SPECIAL) || is_vm_hugetlb_page(vma)))
    vm_flags_reset(vma, vma->vm_flags & ~VM_LOCKED_MASK);
  vma = vma_merge_neighbours(mm, vma);
  vma_set_page_prot(vma);  // write-notify for soft-dirty or file dirty tracking
  // __mmap_new_vma (a merge registered in vma_merge_neighbours already).
  mm_khugepaged_enter_vma(vma, vma->vm_flags);
  return static_cast<long>(addr);
}

// do_mmap with mmap_lock held for write. *populate receives the length to
// populate after the lock is dropped.
long do_mmap_locked(Mm* mm, const std::shared_ptr<File>& file, uint64_t addr, uint64_t len, int prot, int flags,
                    uint64_t pgoff, uint64_t* populate, bool fmode_read_only) REQUIRES(mm->mmap_lock) {
  mmap_assert_write_locked(mm);
  *populate = 0;
  if (!len) return -EINVAL;
  if (flags & MAP_FIXED_NOREPLACE) flags |= MAP_FIXED;
  if (!(flags & MAP_FIXED)) addr = round_hint_to_min(addr);
  len = round_up(len, PAGE_SIZE);
  if (!len) return -ENOMEM;  // the rounding overflowed
  if (pgoff + (len >> PAGE_SHIFT) < pgoff) return -EOVERFLOW;

  vm_flags_t vm_flags =
      calc_vm_prot_bits(prot) | calc_vm_flag_bits(flags) | mm->def_flags | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC;

  long got = file ? file_get_unmapped_area(mm, file.get(), addr, len, pgoff, flags)
                  : get_unmapped_area(mm, addr, len, pgoff, flags, vm_flags);
  if (got < 0) return got;
  addr = static_cast<uint64_t>(got);

  if ((flags & MAP_FIXED_NOREPLACE) && find_vma_intersection(mm, addr, addr + len)) return -EEXIST;

  if (file) {
    if (!file_mmap_ok(pgoff, len)) return -EOVERFLOW;
    // Every file of the model is open for reading, on a file system
    // mounted exec (no -EPERM or VM_MAYEXEC drop); an fd opened O_RDONLY
    // refuses a shared writable mapping and makes a shared one read-only
    // for good (no VM_MAYWRITE, and not VM_SHARED).
    switch (flags & MAP_TYPE) {
      case MAP_SHARED:
        flags &= LEGACY_MAP_MASK;  // plain MAP_SHARED ignores unknown flags
        [[fallthrough]];
      case MAP_SHARED_VALIDATE:
        if (flags & ~LEGACY_MAP_MASK) return -EOPNOTSUPP;
        if ((prot & PROT_WRITE) && (file->read_only_fd || fmode_read_only)) return -EACCES;
        vm_flags |= VM_SHARED | VM_MAYSHARE;
        if (file->read_only_fd || fmode_read_only) vm_flags &= ~(VM_MAYWRITE | VM_SHARED);
        [[fallthrough]];
      case MAP_PRIVATE:
        if (vm_flags & VM_GROWSDOWN) return -EINVAL;
        break;
      default:
        return -EINVAL;
    }
  } else {
    switch (flags & MAP_TYPE) {
      case MAP_SHARED:
        if (vm_flags & VM_GROWSDOWN) return -EINVAL;
        pgoff = 0;  // ignored for shared anonymous memory
        vm_flags |= VM_SHARED | VM_MAYSHARE;
        break;
      case MAP_PRIVATE:
        pgoff = addr >> PAGE_SHIFT;  // the linear index anon_vma reuse relies on
        break;
      default:  // includes MAP_SHARED_VALIDATE, which anonymous memory rejects
        // MAP_DROPPABLE (v6.12+) is not modelled and fails here like an
        // unknown type, where the kernel maps it.
        return -EINVAL;
    }
  }
  if (flags & MAP_NORESERVE) {
    // Honoured under the default overcommit heuristic; hugetlbfs applies
    // strict accounting unless MAP_NORESERVE.
    vm_flags |= VM_NORESERVE;
  }

  long ret = mmap_region(mm, addr, len, vm_flags, pgoff, file);
  if (ret >= 0 && ((vm_flags & VM_LOCKED) || (flags & (MAP_POPULATE | MAP_NONBLOCK)) == MAP_POPULATE))
    *populate = len;
  return ret;
}

}  // namespace

// populate_vma_page_range, the part the model needs: fault [start, end)
// of vma in, writing private writable memory so that it CoWs now.
long populate_vma_page_range(Mm* mm, Vma* vma, uint64_t start, uint64_t end) REQUIRES_SHARED(mm->mmap_lock) {
  const vm_flags_t f = vma->vm_flags;
  // VM_LOCKONFAULT: pages are locked as they fault, none is faulted now.
  if (f & VM_LOCKONFAULT) return 0;
  // Without FOLL_FORCE (only for accessible VMAs) GUP refuses PROT_NONE.
  if (!(f & VM_ACCESS_FLAGS)) return -EFAULT;
  // The kernel's FOLL_FORCE lets it read exec-only or write-only memory;
  // faultin_page_range does not, so such VMAs are left unpopulated.
  if (!(f & VM_READ) && (f & (VM_WRITE | VM_SHARED)) != VM_WRITE) return 0;
  return mm_faultin_page_range(mm, start, end, (f & (VM_WRITE | VM_SHARED)) == VM_WRITE);
}

long __mm_populate(Mm* mm, uint64_t start, uint64_t len, bool ignore_errors) {
  const uint64_t end = start + len;
  long ret = 0;
  mmap_read_lock(mm);
  for (uint64_t nstart = start; nstart < end;) {
    Vma* vma = find_vma(mm, nstart);
    if (!vma || vma->vm_start >= end) break;
    const uint64_t nend = std::min(end, vma->vm_end);
    nstart = std::max(nstart, vma->vm_start);
    if (!(vma->vm_flags & (VM_IO | VM_PFNMAP))) ret = populate_vma_page_range(mm, vma, nstart, nend);
    if (ret < 0 && !ignore_errors) break;
    ret = 0;  // ignored: on to the next VMA
    nstart = nend;
  }
  mmap_read_unlock(mm);
  return ret;
}

void mm_populate(Mm* mm, uint64_t start, uint64_t len) { (void)__mm_populate(mm, start, len, true); }

long do_mmap_file(Mm* mm, std::shared_ptr<File> file, uint64_t addr, uint64_t len, int prot, int flags,
                  uint64_t pgoff, bool read_only) {
  if (file) {
    // ksys_mmap_pgoff: a hugetlbfs file maps whole huge pages; MAP_HUGETLB
    // with any other file is refused.
    if (file->fs == FsClass::kHugetlbfs) {
      const uint64_t hsize = PAGE_SIZE << (file->hugetlb_order ? file->hugetlb_order : PMD_ORDER);
      len = round_up(len, hsize);
    } else if (flags & MAP_HUGETLB) {
      return -EINVAL;
    }
  }
  uint64_t populate = 0;
  mmap_write_lock(mm);
  long ret = do_mmap_locked(mm, file, addr, len, prot, flags, pgoff, &populate, read_only);
  mmap_write_unlock(mm);
  file.reset();  // a refused mapping's file (MAP_HUGETLB's) goes now, outside mmap_lock
  if (ret >= 0 && populate) mm_populate(mm, static_cast<uint64_t>(ret), populate);
  return ret;
}

long do_mmap(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, uint64_t pgoff) {
  // ksys_mmap_pgoff: without MAP_ANONYMOUS there must be a file descriptor
  // (Process::mmap_file resolves one).
  if (!(flags & MAP_ANONYMOUS)) return -EBADF;
  std::shared_ptr<File> file;
  if (flags & MAP_HUGETLB) {
    // hstate_sizelog: 0 is the default size (2 MiB); else 2 MiB or 1 GiB.
    unsigned log = static_cast<unsigned>(flags >> MAP_HUGE_SHIFT) & MAP_HUGE_MASK;
    unsigned shift = log ? log : PMD_SHIFT;
    if (shift != PMD_SHIFT && shift != PUD_SHIFT) return -EINVAL;
    if (!len) return -EINVAL;
    uint64_t hlen = round_up(len, 1ull << shift);
    if (hlen < len) return -ENOMEM;
    int err = 0;
    file = hugetlb_file_setup(mm->kernel, hlen, shift, &err);
    if (!file) return err ? err : -ENOMEM;
    len = hlen;
  }
  return do_mmap_file(mm, std::move(file), addr, len, prot, flags, pgoff);
}

// ---- exit_mmap ----

void exit_mmap(Mm* mm) {
  mmap_write_lock(mm);
  for (auto& kv : mm->vmas) {
    mmap_assert_write_locked(kv.second->vm_mm);
    vma_start_write(kv.second.get());
  }
  // tlb_gather_mmu_fullmm: the whole address space is flushed once.
  MmuGather tlb;
  tlb_gather_mmu(&tlb, mm);
  tlb.fullmm = true;
  for (auto& kv : mm->vmas) zap_vma_range(kv.second.get(), kv.second->vm_start, kv.second->vm_end);
  for (auto& kv : mm->vmas) {
    if (is_vm_hugetlb_page(kv.second.get())) hugetlb_vm_op_close(kv.second.get());  // vm_ops->close
    unlink_file_vma(kv.second.get());
    unlink_anon_vmas(kv.second.get());
  }
  free_pgtables(mm, 0, mm->task_size, 0, 0);
  tlb_finish_mmu(&tlb);
  std::map<uint64_t, std::unique_ptr<Vma>> gone;
  {
    WriteGuard tree(&mm->vma_tree_lock);
    gone.swap(mm->vmas);
  }
  mm->total_vm.store(0, std::memory_order_relaxed);
  mmap_write_unlock(mm);
}

}  // namespace mmlab
