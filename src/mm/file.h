// Files and the page cache (mm/filemap.c, mm/shmem.c, fs/hugetlbfs): an
// in-memory file whose page cache holds folios that can be large, mapped
// MAP_SHARED or MAP_PRIVATE, and the file-system class that decides where
// the kernel's rules differ (dirty tracking for writeback).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "mmlab/system.h"
#include "phys/page.h"
#include "sync/rwsem.h"

namespace mmlab {

struct Kernel;
struct Vma;
struct HugetlbFileState;  // fault/hugetlb.h

// struct address_space + struct inode, reduced to what the model needs.
struct File {
  Kernel* kernel = nullptr;
  int id = -1;
  std::string name;
  uint64_t size = 0;           // i_size in bytes
  FsClass fs = FsClass::kShmem;
  unsigned hugetlb_order = 0;  // hugetlbfs: PMD_ORDER or PUD_ORDER; 0 otherwise
  bool anon_shared = false;    // shmem_zero_setup: MAP_SHARED|MAP_ANONYMOUS backing

  // The page cache: folio start index -> folio (each holds one reference per
  // page it caches, as the kernel's page cache does). Protected by lock.
  std::mutex lock;
  std::map<uint64_t, Folio*> pages;
  // i_mmap: the VMAs that map this file (the file rmap). Protected by i_mmap_rwsem.
  RwSemaphore i_mmap_rwsem{LockClass::kRmapLock};
  std::set<Vma*> i_mmap;

  std::unique_ptr<HugetlbFileState> hstate;  // hugetlbfs reservations

  File();
  ~File();
};

// Does a shared mapping of this file need dirty tracking for writeback
// (vma_needs_dirty_tracking)? shmem and hugetlbfs do not; ext4/xfs/btrfs do.
inline bool file_needs_dirty_tracking(const File* f) {
  return f->fs == FsClass::kExt4 || f->fs == FsClass::kXfs || f->fs == FsClass::kBtrfs;
}

// The System's files (fds are indices), owned by the Kernel.
struct FileTable {
  std::mutex lock;
  std::map<int, std::shared_ptr<File>> files;  // protected by lock
  int next_id = 0;                              // protected by lock
};

}  // namespace mmlab
