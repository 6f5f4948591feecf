// Files and the page cache (mm/filemap.c, mm/shmem.c, fs/hugetlbfs): an
// in-memory file whose page cache holds folios that can be large, mapped
// MAP_SHARED or MAP_PRIVATE, and the file-system class that decides where
// the kernel's rules differ (dirty tracking for writeback).
//
// Page-cache conventions (the checker and every layer rely on them):
//   - File::pages maps the index (in base pages) of a folio's first page to
//     the folio; a folio of 2^order pages covers [index, index + 2^order).
//   - A cached folio has folio->page.mapping == the File (never PG_anon),
//     page.index == its index, and the cache holds folio_nr_pages(folio)
//     references on it (as the kernel's page cache does).
//   - shmem folios (memfd/tmpfs and MAP_SHARED|MAP_ANONYMOUS) are
//     PG_swapbacked, so mm_counter_file() charges them to MM_SHMEMPAGES;
//     ext4-class folios are not (MM_FILEPAGES).
//   - When a File is destroyed (last fd closed and last mapping gone) its
//     folios leave the cache: mapping cleared, the cache's references dropped
//     (truncate_inode_pages). A folio someone still pins survives on the pin.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mmlab/types.h"
#include "pgtable/entry.h"
#include "phys/page.h"
#include "sync/mutex.h"
#include "sync/rwsem.h"

namespace mmlab {

struct Kernel;
struct Vma;
struct HugetlbFileState;  // mm/hugetlb.h

// struct address_space + struct inode, reduced to what the model needs.
struct File : std::enable_shared_from_this<File> {
  Kernel* kernel = nullptr;
  int id = -1;                 // inode number (unique per Kernel); not the fd
  uint64_t cid = 0;            // creation id (Kernel::next_cid): hashes its hugetlb fault mutexes
  std::string name;
  uint64_t size = 0;           // i_size in bytes: read with i_size_read() once the file is in use
  FsClass fs = FsClass::kShmem;
  unsigned hugetlb_order = 0;  // hugetlbfs: PMD_ORDER or PUD_ORDER; 0 otherwise
  bool anon_shared = false;    // shmem_zero_setup: MAP_SHARED|MAP_ANONYMOUS backing
  bool sysv_shm = false;       // a SysV shared memory segment (mm/shm.h): shmat maps it, shmdt unmaps it
  // shmem: a linked file on a tmpfs mounted with huge=tmpfs_huge (a
  // ShmemHuge value), not an unlinked memfd on the internal mount.
  bool tmpfs = false;
  uint8_t tmpfs_huge = 0;
  // AS_UNEVICTABLE (mapping_set_unevictable): a file on a tmpfs mounted
  // noswap, or a SysV segment under SHM_LOCK (shmem_lock; SHM_UNLOCK clears
  // it while reclaim may read it). Reclaim keeps its folios mapped and
  // resident (folio_evictable), on the unevictable LRU (PG_unevictable).
  std::atomic<bool> unevictable{false};
  // The test's fd was opened O_RDONLY (the file written and synced through
  // another fd, since closed): no struct file of this inode has
  // FMODE_WRITE, so inode_is_open_for_write() is false, MAP_SHARED loses
  // VM_MAYWRITE and a shared PROT_WRITE mapping is EACCES. Every mapping
  // is made from that one fd, so the fd's mode is the inode's.
  bool read_only_fd = false;
  // shmem: on the superblock's shrinklist (FileTable::shrinklist): a
  // PMD-mappable folio of it reaches past i_size, which
  // shmem_unused_huge_shrink splits (the pages past EOF are freed).
  std::atomic<bool> on_shrinklist{false};
  // shmem_inode_info::fallocend: the end (in pages) of what fallocate
  // allocated, which a split keeps even past i_size (shmem_fallocend).
  uint64_t fallocend = 0;

  // The page cache: folio start index -> folio (each holds one reference per
  // page it caches, as the kernel's page cache does). lock is the xarray's
  // xa_lock: nothing but leaf locks is taken while it is held.
  Mutex lock{LockClass::kPageCacheLock};
  std::map<uint64_t, Folio*> pages GUARDED_BY(lock);
  // shmem: the swap entries of pages shmem_writeout() moved to swap, one per
  // page (the xarray's value entries in the kernel); each holds one swap
  // count on its slot. An index is in pages or here, never both.
  std::map<uint64_t, swp_entry_t> swapped GUARDED_BY(lock);
  // shmem: the large swap entries among those (a large folio written out
  // whole: the kernel's multi-index xarray entry), by first index, with
  // their order. An entry that loses a page (a truncation) is dropped here,
  // as the kernel splits it; its pages stay in swapped as order 0.
  std::map<uint64_t, unsigned> swapped_order GUARDED_BY(lock);
  // i_mmap and i_mmap_rwsem: every VMA that maps this file (shared or
  // private), for the file rmap walks of shmem reclaim (try_to_unmap) and of
  // truncation (unmap_mapping_range). The kernel keeps an interval tree; a
  // set is walked whole and each VMA's range checked. A VMA joins when it is
  // linked (vma_link, split_vma) and leaves before its page tables can be
  // freed (unlink_file_vma); its range changes (split, merge, mremap's
  // expansion) with the lock held for write, as vma_prepare does, so a
  // walker reads a VMA's range whole. hugetlb's unmap_ref_private still
  // walks the folio's anon_vma, as before.
  // Ordered by the VMAs' creation ids (Vma::cid), not their addresses: the
  // walks (try_to_unmap, unmap_mapping_range, retract_page_tables) take
  // each VMA's locks in turn, and under the explorer a walk in host-address
  // order took another run's steps whenever the heap lay otherwise (a
  // second run in one process, a replay from the CLI: issue 34 item 9).
  struct ByVmaCid {
    bool operator()(const Vma* a, const Vma* b) const;  // vma.cpp
  };
  RwSemaphore i_mmap_rwsem{LockClass::kImmapLock};
  std::set<Vma*, ByVmaCid> i_mmap GUARDED_BY(i_mmap_rwsem);

  std::unique_ptr<HugetlbFileState> hstate;  // hugetlbfs reservations

  File();
  ~File();  // releases the page cache (see above)
  File(const File&) = delete;
  File& operator=(const File&) = delete;
};

// i_size_read / i_size_write: i_size changes (pwrite past EOF, hugetlbfs mmap)
// while faults read it; writers also hold file->lock.
inline uint64_t i_size_read(const File* f) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(f->size)).load(std::memory_order_acquire);
}
inline void i_size_write(File* f, uint64_t size) {
  std::atomic_ref<uint64_t>(f->size).store(size, std::memory_order_release);
}

// Does a shared mapping of this file need dirty tracking for writeback
// (vma_needs_dirty_tracking)? shmem and hugetlbfs do not; ext4/xfs/btrfs do.
// These are also the classes with ->page_mkwrite.
inline bool file_needs_dirty_tracking(const File* f) {
  return f->fs == FsClass::kExt4 || f->fs == FsClass::kXfs || f->fs == FsClass::kBtrfs;
}
// inode_is_open_for_write(): i_writecount > 0.
inline bool inode_is_open_for_write(const File* f) { return !f->read_only_fd; }
// shmem_file() / shmem_mapping(): memfd, tmpfs and shared anonymous memory.
inline bool file_is_shmem(const File* f) { return f->fs == FsClass::kShmem; }

// The page-cache folio containing page `index`, or nullptr.
Folio* filemap_lookup(File* f, uint64_t index) REQUIRES(f->lock);

// The System's files (fds are indices), owned by the Kernel.
struct FileTable {
  FileTable();
  ~FileTable();  // drops the table's references (files still mapped live on)
  Mutex lock;
  std::map<int, std::shared_ptr<File>> files GUARDED_BY(lock);  // fd -> file
  int next_id GUARDED_BY(lock) = 0;                              // inode numbers
  // shmem's per-superblock shrinklist (one list: the model's tmpfs mounts
  // and the internal one share it), in the order files joined it.
  Mutex shrinklist_lock;
  std::vector<std::weak_ptr<File>> shrinklist GUARDED_BY(shrinklist_lock);
};

}  // namespace mmlab
