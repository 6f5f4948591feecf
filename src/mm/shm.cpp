// ipc/shm.c, the part memory management sees: System V shared memory
// segments as shmem (or hugetlbfs) files, attached by a MAP_SHARED mapping
// (do_shmat), detached by unmapping it (ksys_shmdt), locked against reclaim
// (shmctl SHM_LOCK: shmem_lock) and removed (IPC_RMID).
//
// The model runs as root, as the host agent does: no permission check
// fails, and SHM_LOCK is allowed whatever RLIMIT_MEMLOCK says
// (user_shm_lock: CAP_IPC_LOCK). Only IPC_PRIVATE segments exist (no keys),
// and shmat takes no address (the kernel chooses one, as with shmaddr NULL).
//
// A removed segment that is still attached keeps its id (SHM_DEST; Linux
// lets shmat attach it again) and is destroyed when the last attach goes:
// the id holds only a weak reference then, so the file goes with its last
// VMA, and the id is dropped at its next lookup.
#include "mm/shm.h"

#include <cerrno>
#include <string>
#include <vector>

#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mm/mmap.h"
#include "mm/swap.h"

namespace mmlab {

namespace {

// ipc_ids' SEQ_MULTIPLIER: an id is its index plus a sequence number times this.
constexpr int kIpcSeqMultiplier = 32768;
// The namespace's shm_ctlmax and shm_ctlall defaults (SHMMAX, SHMALL).
constexpr uint64_t kShmMax = ~0ull - (1ull << 24);

// shm_nattch: the VMAs that map the segment's file.
size_t shm_nattch(File* f) {
  ReadGuard g(&f->i_mmap_rwsem);
  return f->i_mmap.size();
}

// shm_obtain_object_check: the segment's file, or nullptr (-EINVAL: no such
// id, or a removed one whose last attach went, which shm_destroy removed).
std::shared_ptr<File> shm_obtain_object_check(ShmIds* ids, int shmid, ShmSegment** seg) REQUIRES(ids->lock) {
  auto it = ids->segs.find(shmid);
  if (it == ids->segs.end()) return nullptr;
  std::shared_ptr<File> f = it->second.file ? it->second.file : it->second.dest.lock();
  if (!f) {
    ids->segs.erase(it);
    return nullptr;
  }
  if (seg) *seg = &it->second;
  return f;
}

// newseg's file: shmem_kernel_file_setup("SYSV%08x"), or hugetlb_file_setup
// with its pages reserved now (-ENOMEM if the pool cannot cover them).
std::shared_ptr<File> shm_file_setup(Kernel* k, uint64_t size, int shmflg, int* err) {
  if (shmflg & kShmHugetlb) {
    std::shared_ptr<File> f = hugetlb_file_setup(k, size, 0, err);
    if (!f) return nullptr;
    f->name = "SYSV00000000";
    f->sysv_shm = true;
    const uint64_t huge = PAGE_SIZE << f->hugetlb_order;
    if (hugetlb_reserve_pages(k, f.get(), 0, round_up(size, huge) / huge, nullptr, 0) < 0) {
      *err = -ENOMEM;
      return nullptr;
    }
    return f;
  }
  auto f = std::make_shared<File>();
  f->kernel = k;
  f->cid = k->next_cid.fetch_add(1, std::memory_order_relaxed);
  f->fs = FsClass::kShmem;
  f->name = "SYSV00000000";
  f->sysv_shm = true;
  f->size = size;
  return f;
}

// shmem_lock: set or clear the mapping's AS_UNEVICTABLE. Unlocking rescues
// the folios on the unevictable LRU (shmem_unlock_mapping ->
// check_move_unevictable_folios); the swapped-out entries are not folios
// and are skipped.
void shmem_lock(File* f, bool lock) {
  f->unevictable.store(lock, std::memory_order_release);
  if (lock) return;
  std::vector<Folio*> folios;
  {
    MutexGuard g(&f->lock);
    for (auto& [index, folio] : f->pages) {
      folio_get(folio);
      folios.push_back(folio);
    }
  }
  check_move_unevictable_folios(folios);
  for (Folio* folio : folios) folio_put(folio);
}

}  // namespace

long ksys_shmget(Kernel* k, uint64_t size, int shmflg) {
  // newseg: SHMMIN is 1; the namespace's limits are the defaults.
  if (size < 1 || size > kShmMax) return -EINVAL;
  if (round_up(size, PAGE_SIZE) < size) return -ENOSPC;
  int err = 0;
  std::shared_ptr<File> f = shm_file_setup(k, size, shmflg, &err);
  if (!f) return err ? err : -ENOMEM;
  ShmIds* ids = k->shm.get();
  MutexGuard g(&ids->lock);
  const int idx = ids->next_idx++;
  const int id = idx + kIpcSeqMultiplier * (idx / kIpcSeqMultiplier + 1);
  ShmSegment& seg = ids->segs[id];
  seg.size = size;
  seg.file = std::move(f);
  return id;
}

long do_shmat(Mm* mm, int shmid, int shmflg) {
  ShmIds* ids = mm->kernel->shm.get();
  std::shared_ptr<File> f;
  uint64_t size = 0;
  {
    MutexGuard g(&ids->lock);
    ShmSegment* seg = nullptr;
    f = shm_obtain_object_check(ids, shmid, &seg);
    if (!f) return -EINVAL;
    size = seg->size;
  }
  // The attach's own struct file, read-only with SHM_RDONLY; the mapping
  // covers the whole segment (do_mmap of i_size).
  const bool ro = shmflg & kShmRdonly;
  const int prot = ro ? PROT_READ : PROT_READ | PROT_WRITE;
  return do_mmap_file(mm, std::move(f), 0, size, prot, MAP_SHARED, 0, ro);
}

int ksys_shmdt(Mm* mm, uint64_t addr) {
  if (addr & ~PAGE_MASK) return -EINVAL;
  // Every VMA of one segment mapped from addr on, at the offset its
  // distance from addr says (a VMA split by mprotect counts too), within
  // the segment's size: the first such VMA at or after addr picks the file.
  struct Range {
    uint64_t start, len;
  };
  std::vector<Range> ranges;
  mmap_read_lock(mm);
  const File* file = nullptr;
  uint64_t size = 0;
  for (Vma* vma = find_vma(mm, addr); vma; vma = vma_next(mm, vma)) {
    File* f = vma->vm_file.get();
    const bool ours = f && f->sysv_shm && vma->vm_start >= addr &&
                      (vma->vm_start - addr) / PAGE_SIZE == vma->vm_pgoff;
    if (!file) {
      if (!ours) break;  // the first VMA must be a segment's
      file = f;
      size = round_up(i_size_read(f), PAGE_SIZE);
    } else if (vma->vm_end - addr > size) {
      break;
    }
    if (ours && f == file) ranges.push_back({vma->vm_start, vma->vm_end - vma->vm_start});
  }
  mmap_read_unlock(mm);
  if (ranges.empty()) return -EINVAL;
  for (const Range& r : ranges) (void)do_munmap(mm, r.start, r.len);
  return 0;
}

int ksys_shmctl(Kernel* k, int shmid, int cmd) {
  ShmIds* ids = k->shm.get();
  std::shared_ptr<File> f;
  bool unlock = false;
  {
    MutexGuard g(&ids->lock);
    ShmSegment* seg = nullptr;
    f = shm_obtain_object_check(ids, shmid, &seg);
    if (!f) return -EINVAL;
    switch (cmd) {
      case kIpcRmid:
        // do_shm_rmid: destroyed now if nothing is attached, else marked
        // SHM_DEST and destroyed by the last detach.
        if (shm_nattch(f.get()) == 0) {
          ids->segs.erase(shmid);
        } else {
          seg->dest = seg->file;
          seg->file.reset();
        }
        break;
      case kShmLock:
      case kShmUnlock:
        // shmctl_do_lock: a segment removed but still attached (SHM_DEST)
        // is locked too; SHM_LOCK of a hugetlbfs segment does nothing (its
        // pages are never reclaimed).
        if (f->fs != FsClass::kShmem) break;
        if (cmd == kShmLock) {
          seg->locked = true;
          f->unevictable.store(true, std::memory_order_release);
        } else if (seg->locked) {
          seg->locked = false;
          unlock = true;
        }
        break;
      default:
        return -EINVAL;
    }
  }
  if (unlock) shmem_lock(f.get(), false);  // outside the ids' lock, as the kernel's
  return 0;
}

}  // namespace mmlab
