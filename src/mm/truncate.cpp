// mm/truncate.c: taking pages out of a file's page cache when the file
// shrinks (ftruncate) or gets a hole (fallocate(FALLOC_FL_PUNCH_HOLE),
// MADV_REMOVE), for the ext4 class; shmem's own versions
// (shmem_setattr, shmem_fallocate, shmem_undo_range) are in mm/shmem.cpp and
// share truncate_inode_folio. The system calls' entry points (fs/open.c's
// do_sys_ftruncate and vfs_fallocate) are here too, and send each file
// class to its file system.
//
// The order is the kernel's: the range is unmapped from every process first
// (unmap_mapping_range over i_mmap), then the folios leave the page cache
// and go back to the allocator (unless a GUP pin still holds one), then, for
// a truncation, the range is unmapped once more, for private copies a fault
// made meanwhile. A truncation removes a private mapping's CoW copies past
// EOF too (even_cows), since a later access there must be SIGBUS; a punched
// hole keeps them: the private copy is the process's own data.
//
// hugetlbfs files go to fs/hugetlbfs/inode.c's own versions
// (hugetlbfs_setattr_size, hugetlbfs_punch_hole in mm/hugetlbfs_inode.cpp),
// which unmap private copies in a hole too and give back reservations.
//
// Not modelled: i_rwsem (the model serialises nothing between a truncation
// and a concurrent write() or fallocate of the same file), and large folios
// in the page cache (the model's shmem and ext4-class files hold order-0
// folios, so no folio straddles the edge of a range).
#include <algorithm>
#include <vector>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/memory.h"
#include "phys/frame_copy.h"

namespace mmlab {

namespace {

constexpr int64_t kMaxLfsFilesize = INT64_MAX;
constexpr int FALLOC_FL_KEEP_SIZE = 0x01, FALLOC_FL_PUNCH_HOLE = 0x02;

// truncate_inode_partial_folio for an order-0 folio: zero [from, to) of page
// `index` if it is cached (a page not in the cache is a hole already).
void truncate_inode_partial_folio(File* f, uint64_t index, uint64_t from, uint64_t to) {
  Folio* folio;
  uint64_t start = 0;
  {
    MutexGuard g(&f->lock);
    folio = lookup_locked(f, index, &start);
    if (folio) folio_get(folio);
  }
  if (!folio) return;
  folio_lock(folio);
  truncate_partial_zero(f, folio, index - start, from, to);
}

}  // namespace

void truncate_partial_zero(File* f, Folio* folio, uint64_t page, uint64_t from, uint64_t to) {
  // Truncated meanwhile: nothing of it stays in the file. Not uptodate: a
  // fallocated shmem page never written, all zeros already.
  if (folio_test_uptodate(folio) &&
      aref(folio->page.mapping).load(std::memory_order_acquire) == reinterpret_cast<uint64_t>(f)) {
    PhysMem* phys = f->kernel->phys.get();
    auto* p = static_cast<uint8_t*>(phys->page_address(folio_page(folio, static_cast<long>(page))));
    user_memset(phys, p + from, 0, to - from);
    folio_set_dirty(folio);
  }
  folio_unlock(folio);
  folio_put(folio);
}

void truncate_inode_folio(File* f, Folio* folio) {
  VM_BUG_ON_FOLIO(!folio_test_locked(folio), folio, "truncate_inode_folio on an unlocked folio");
  // A fault may have mapped it again since the range was unmapped.
  if (folio_mapped(folio))
    unmap_mapping_range(f, folio->page.index << PAGE_SHIFT, static_cast<uint64_t>(folio_nr_pages(folio)) << PAGE_SHIFT,
                        /*even_cows=*/false);
  folio_clear_dirty(folio);  // folio_cancel_dirty: nothing to write back
  filemap_remove_folio(f, folio);
}

void truncate_inode_folios(File* f, uint64_t start, uint64_t end) {
  // find_lock_entries over [start, end), a folio at a time.
  for (uint64_t index = start; index < end;) {
    Folio* folio = nullptr;
    {
      MutexGuard g(&f->lock);
      auto it = f->pages.lower_bound(index);
      if (it == f->pages.end() || it->first >= end) break;
      index = it->first;
      folio = it->second;
      folio_get(folio);
    }
    folio_lock(folio);
    // A large folio reaching past end (whose split failed) stays.
    if (aref(folio->page.mapping).load(std::memory_order_acquire) == reinterpret_cast<uint64_t>(f) &&
        folio->page.index == index && (end == UINT64_MAX || index + static_cast<uint64_t>(folio_nr_pages(folio)) <= end))
      truncate_inode_folio(f, folio);
    folio_unlock(folio);
    folio_put(folio);  // the last reference, unless a pin holds the folio
    index++;
  }
}

TruncateRange truncate_range(uint64_t lstart, uint64_t lend) {
  TruncateRange r;
  r.start = (lstart + PAGE_SIZE - 1) >> PAGE_SHIFT;
  r.end = lend == UINT64_MAX ? UINT64_MAX : (lend + 1) >> PAGE_SHIFT;
  r.partial_start = lstart & (PAGE_SIZE - 1);
  r.partial_end = lend == UINT64_MAX ? 0 : (lend + 1) & (PAGE_SIZE - 1);
  return r;
}

void truncate_partial_pages(File* f, TruncateRange r, void (*zero)(File*, uint64_t index, uint64_t from, uint64_t to)) {
  if (r.partial_start) {
    uint64_t top = PAGE_SIZE;
    if (r.start > r.end) {  // the range lies inside one page
      top = r.partial_end;
      r.partial_end = 0;
    }
    zero(f, r.start - 1, r.partial_start, top);
  }
  if (r.partial_end) zero(f, r.end, 0, r.partial_end);
}

void truncate_inode_pages_range(File* f, uint64_t lstart, uint64_t lend) {
  const TruncateRange r = truncate_range(lstart, lend);
  truncate_inode_folios(f, r.start, r.end);
  truncate_partial_pages(f, r, truncate_inode_partial_folio);
}

void truncate_pagecache(File* f, uint64_t newsize) {
  const uint64_t holebegin = round_up(newsize, PAGE_SIZE);
  unmap_mapping_range(f, holebegin, 0, /*even_cows=*/true);
  truncate_inode_pages_range(f, newsize, UINT64_MAX);
  unmap_mapping_range(f, holebegin, 0, /*even_cows=*/true);
}

void truncate_pagecache_range(File* f, uint64_t lstart, uint64_t lend) {
  const uint64_t unmap_start = round_up(lstart, PAGE_SIZE);
  const uint64_t unmap_end = round_down(lend + 1, PAGE_SIZE);  // exclusive
  if (unmap_end > unmap_start) unmap_mapping_range(f, unmap_start, unmap_end - unmap_start, /*even_cows=*/false);
  truncate_inode_pages_range(f, lstart, lend);
}

// ---- the system calls (fs/open.c) ----

int do_truncate(File* f, int64_t length) {
  if (length < 0) return -EINVAL;
  switch (f->fs) {
    case FsClass::kHugetlbfs:
      return hugetlbfs_setattr_size(f, static_cast<uint64_t>(length));
    case FsClass::kShmem:
      return shmem_setattr_size(f, static_cast<uint64_t>(length));
    case FsClass::kExt4:
    case FsClass::kXfs:
    case FsClass::kBtrfs: {
      // ext4_setattr -> truncate_setsize: the new size first, then the page
      // cache past it (the partial page's tail zeroed).
      const uint64_t oldsize = i_size_read(f);
      {
        MutexGuard g(&f->lock);
        i_size_write(f, static_cast<uint64_t>(length));
      }
      if (static_cast<uint64_t>(length) < oldsize) truncate_pagecache(f, static_cast<uint64_t>(length));
      return 0;
    }
  }
  return -EINVAL;
}

int do_sys_ftruncate(Kernel* k, int fd, int64_t length) {
  if (length < 0) return -EINVAL;
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (f->read_only_fd) return -EINVAL;  // do_ftruncate: not FMODE_WRITE
  return do_truncate(f.get(), length);
}

int vfs_fallocate(File* f, int mode, int64_t offset, int64_t len) {
  if (offset < 0 || len <= 0) return -EINVAL;
  if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) return -EOPNOTSUPP;  // the model's modes
  // Punch hole must have keep size set.
  if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) return -EOPNOTSUPP;
  if (offset > kMaxLfsFilesize - len) return -EFBIG;
  if (!(mode & FALLOC_FL_PUNCH_HOLE)) return -EOPNOTSUPP;  // only punching is modelled (files are allocated whole)
  const auto off = static_cast<uint64_t>(offset), n = static_cast<uint64_t>(len);
  switch (f->fs) {
    case FsClass::kHugetlbfs:
      return hugetlbfs_punch_hole(f, off, n);
    case FsClass::kShmem:
      return shmem_fallocate_punch(f, off, n);
    case FsClass::kExt4:
    case FsClass::kXfs:
    case FsClass::kBtrfs: {
      // ext4_punch_hole: nothing past EOF; the range clipped to the page
      // holding EOF; whole pages leave the page cache, the partial ones are
      // zeroed (ext4_zero_partial_blocks), private copies stay.
      const uint64_t size = i_size_read(f);
      if (off >= size) return 0;
      const uint64_t end = std::min(off + n, round_up(size, PAGE_SIZE));
      truncate_pagecache_range(f, off, end - 1);
      return 0;
    }
  }
  return -EOPNOTSUPP;
}

int ksys_fallocate(Kernel* k, int fd, int mode, int64_t offset, int64_t len) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (f->read_only_fd) return -EBADF;  // vfs_fallocate: not FMODE_WRITE
  return vfs_fallocate(f.get(), mode, offset, len);
}

}  // namespace mmlab
