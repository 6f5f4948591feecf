// File-backed and shared memory: the page cache of the model's files
// (mm/filemap.c, mm/shmem.c), their system calls (memfd_create + fallocate,
// pread, pwrite, close, mmap of an fd), the ->mmap checks of shmem,
// ext4-class files and hugetlbfs. Shared anonymous memory
// (shmem_zero_setup) is in mm/shmem.cpp, the faults on file VMAs
// (mm/memory.c's do_fault family) in fault/filemap.cpp.
//
// The file systems modelled, and where they differ:
//   shmem (memfd, tmpfs; also MAP_SHARED|MAP_ANONYMOUS): PG_swapbacked folios
//     (MM_SHMEMPAGES). create_file is memfd_create + ftruncate + fallocate:
//     the folios exist, zeroed, dirty and !uptodate (shmem_fallocate); the
//     first fault or write makes a folio uptodate, so fault-around (which
//     maps only uptodate folios) skips untouched fallocated pages, as in the
//     kernel. Holes (shared anonymous memory, pages past an old EOF) are
//     filled on fault (shmem_fault, SGP_CACHE). No ->page_mkwrite, no
//     writeback: shared writable mappings are mapped writable at once.
//   ext4, xfs, btrfs: folios not swapbacked (MM_FILEPAGES). create_file
//     leaves the whole file in the page cache, uptodate and clean (as if it
//     had been written and synced). ->page_mkwrite marks the folio dirty, and
//     shared writable mappings are write-notify (vma_wants_writenotify): the
//     first write to each page faults.
//   hugetlbfs: the hugetlb code (mm/hugetlbfs_inode.cpp) creates the file, fills
//     it (hugetlb_fallocate), checks and reserves its mappings
//     (hugetlb_file_mmap) and handles its faults; this file registers it and
//     reads it. pwrite is -EINVAL (hugetlbfs has no write_iter).
#include <algorithm>
#include <cstring>
#include <vector>
#include "mm/filemap.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/mmdebug.h"
#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/kernel.h"
#include "mm/mmap.h"
#include "mm/rmap.h"
#include "mm/swap.h"
#include "phys/frame_copy.h"
#include "trace/trace.h"

namespace mmlab {

namespace {

constexpr uint64_t kMaxLfsFilesize = static_cast<uint64_t>(INT64_MAX);

PhysMem* phys_of(const File* f) { return f->kernel->phys.get(); }

}  // namespace

uint64_t file_end_index(const File* f) { return (i_size_read(f) + PAGE_SIZE - 1) >> PAGE_SHIFT; }

Folio* lookup_locked(File* f, uint64_t index, uint64_t* start) REQUIRES(f->lock) {
  f->lock.assert_held();
  auto it = f->pages.upper_bound(index);
  if (it == f->pages.begin()) return nullptr;
  --it;
  if (index >= it->first + static_cast<uint64_t>(folio_nr_pages(it->second))) return nullptr;
  *start = it->first;
  return it->second;
}

namespace {

// filemap_get_folio: the cached folio containing `index`, with a reference.
Folio* filemap_get_folio(File* f, uint64_t index, uint64_t* start) {
  MutexGuard g(&f->lock);
  Folio* folio = lookup_locked(f, index, start);
  if (folio) folio_get(folio);
  return folio;
}

// A new order-0 folio for f's page cache, zeroed (the model never hands out
// stale frames: shmem clears on first use, a regular file reads zeros from
// a hole or from the zeroed file the model pretends was written).
Folio* filemap_alloc_folio(File* f) {
  Folio* folio = phys_of(f)->folio_alloc(GFP_HIGHUSER_MOVABLE | __GFP_ZERO, 0);
  if (folio && file_is_shmem(f)) folio_set_swapbacked(folio);
  return folio;
}

// __filemap_add_folio + folio_add_lru: insert a new folio at `index`. The
// cache takes folio_nr_pages references; the caller keeps its own. If the
// slot is taken (a racing fault filled it), the caller's folio is released
// and the cached one is returned, referenced, instead.
Folio* filemap_add_folio(File* f, Folio* folio, uint64_t index, uint64_t* start) {
  {
    MutexGuard g(&f->lock);
    if (Folio* cur = lookup_locked(f, index, start)) {
      folio_get(cur);
      folio_put(folio);
      return cur;
    }
    aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
    folio->page.index = index;
    folio_ref_add(folio, static_cast<int>(folio_nr_pages(folio)));
    folio_add_lru(folio);
    f->pages.emplace(index, folio);
    *start = index;
    MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index, folio_order(folio));
  }
  return folio;
}

// Fill [0, size) of a new file's page cache: memfd's fallocate for shmem,
// an already written (and synced) file for the ext4 class.
int file_populate(File* f, uint64_t size) {
  const uint64_t end = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
  for (uint64_t index = 0; index < end; index++) {
    if (file_is_shmem(f)) {
      // shmem_fallocate -> shmem_get_folio(SGP_FALLOC): a large folio where
      // the mount's huge= (or shmem_enabled, for the internal mount) allows
      // one without a VMA, even one reaching past the coming i_size; the
      // loop goes on after it.
      uint64_t start;
      f->fallocend = end;  // set before the allocation, as shmem_fallocate does
      if (Folio* large = shmem_alloc_and_add_large_folio(f, nullptr, 0, index, &start, size)) {
        folio_clear_uptodate(large);  // fallocated: cleared on first use
        folio_set_dirty(large);
        index = start + static_cast<uint64_t>(folio_nr_pages(large)) - 1;
        folio_put(large);
        continue;
      }
    }
    Folio* folio = filemap_alloc_folio(f);
    if (!folio) return -ENOMEM;  // the destructor releases what was added
    if (file_is_shmem(f)) {
      // shmem_fallocate: left !uptodate (cleared on first use) but dirty, so
      // reclaim would swap it rather than drop it.
      folio_set_dirty(folio);
    } else {
      folio_set_uptodate(folio);
    }
    uint64_t start;
    Folio* cached = filemap_add_folio(f, folio, index, &start);
    folio_put(cached);  // the allocation's reference: only the cache's remain
  }
  return 0;
}

}  // namespace

void filemap_remove_folio(File* f, Folio* folio) {
  const uint64_t index = folio->page.index;
  {
    MutexGuard g(&f->lock);
    auto it = f->pages.find(index);
    if (it == f->pages.end() || it->second != folio) return;
    f->pages.erase(it);
    aref(folio->page.mapping).store(0, std::memory_order_release);
  }
  MM_TRACE("mm_filemap_delete_from_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index,
           folio_order(folio));
  folio_put_refs(folio, static_cast<int>(folio_nr_pages(folio)));  // the caller holds its own
}

namespace {

// shmem_get_folio's lookup of a swapped-out page: read it back if the file
// holds a swap entry at index (*foliop locked); 1 if there is none.
int shmem_lookup_swapped(File* f, uint64_t index, Folio** foliop, uint64_t* start, bool* major) {
  if (!file_is_shmem(f)) return 1;
  swp_entry_t entry{};
  {
    MutexGuard g(&f->lock);
    auto it = f->swapped.find(index);
    if (it == f->swapped.end()) return 1;
    entry = it->second;
  }
  int err = shmem_swapin_folio(f, index, entry, foliop, major);
  if (!err) *start = (*foliop)->page.index;  // a large folio comes back whole
  return err;
}

// pread's and pwrite's lookup (SGP_READ, SGP_WRITE): the cached folio at
// index, or the page read back from swap, referenced and unlocked; nullptr
// for a hole. -EIO if the swap read failed.
int filemap_get_or_swapin(File* f, uint64_t index, Folio** foliop, uint64_t* start) {
  for (;;) {
    Folio* folio = filemap_get_folio(f, index, start);
    if (!folio) {
      const int r = shmem_lookup_swapped(f, index, &folio, start, nullptr);
      if (r == -EAGAIN) continue;  // the entry changed meanwhile: look again
      if (r < 0) return r;
      if (r == 0) folio_unlock(folio);
    }
    *foliop = folio;
    return 0;
  }
}

}  // namespace

// The backing device's read-ahead window (bdi->ra_pages): read_ahead_kb
// 128, the default of a block device, and of the loop device the host
// backend mounts its ext4 on.

bool filemap_read_around(File* f, uint64_t index, uint64_t ra_pages) {
  VM_BUG_ON(file_is_shmem(f) || f->fs == FsClass::kHugetlbfs, "read-around of a file without a disk");
  uint64_t end = 0;
  {
    MutexGuard g(&f->lock);
    uint64_t start;
    if (lookup_locked(f, index, &start)) return false;
    end = file_end_index(f);
  }
  if (index >= end) return false;
  // The mmap read-around: ra_pages from ra_pages / 2 before the fault, as
  // order-0 folios (the host's ext4 read them back order 0, large folios
  // notwithstanding), none past the page holding EOF. Not modelled: the
  // PG_readahead mark at ra_pages / 4 before the window's end (fault-around
  // skips that folio, and a fault on it reads the next window ahead), and
  // mmap_miss, which stops the read-around after 100 misses more than hits.
  const uint64_t first = index > ra_pages / 2 ? index - ra_pages / 2 : 0;
  const uint64_t last = std::min(first + ra_pages, end);
  for (uint64_t i = first; i < last; i++) {
    {
      MutexGuard g(&f->lock);
      uint64_t start;
      if (lookup_locked(f, i, &start)) continue;
    }
    Folio* nf = filemap_alloc_folio(f);
    if (!nf) break;  // readahead is best effort: the fault allocates its own page
    // The disk holds what the page cache last held clean: zeros, the
    // model's written-and-synced contents (nothing writes a dirty folio of
    // this class back, so only clean folios are ever dropped), or a hole.
    folio_set_uptodate(nf);
    uint64_t start;
    folio_put(filemap_add_folio(f, nf, i, &start));  // the cache's references remain
  }
  return true;
}

int file_get_folio_locked(File* f, uint64_t index, Folio** foliop, uint64_t* start, bool* major, const Vma* vma,
                          uint64_t addr) {
  if (index >= file_end_index(f)) return -EINVAL;
  Folio* folio = filemap_get_folio(f, index, start);
  if (!folio) {
    int r = shmem_lookup_swapped(f, index, &folio, start, major);
    if (r <= 0) {
      if (r) return r;
      // Perhaps the file shrank meanwhile.
      if (index >= file_end_index(f)) {
        folio_unlock(folio);
        folio_put(folio);
        return -EINVAL;
      }
      *foliop = folio;
      return 0;
    }
  }
  // A shmem fault on a hole: a large folio where the THP controls allow one.
  if (!folio && vma && file_is_shmem(f)) folio = shmem_alloc_and_add_large_folio(f, vma, addr, index, start);
  if (!folio) {
    Folio* nf = filemap_alloc_folio(f);
    if (!nf) return -ENOMEM;
    if (!file_is_shmem(f)) folio_set_uptodate(nf);  // a hole reads as zeros
    folio = filemap_add_folio(f, nf, index, start);
  }
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f)) {
    folio_unlock(folio);
    folio_put(folio);
    return -EAGAIN;
  }
  // Perhaps the file shrank since we checked (a racing truncation).
  if (index >= file_end_index(f)) {
    folio_unlock(folio);
    folio_put(folio);
    return -EINVAL;
  }
  // shmem: a fallocated folio is cleared (it is zero already) and becomes
  // uptodate on first use.
  if (!folio_test_uptodate(folio)) folio_set_uptodate(folio);
  *foliop = folio;
  return 0;
}

namespace {

// Register a new file in the System's table: the lowest free fd from 3 up.
int file_install(Kernel* k, std::shared_ptr<File> f, const std::string& name) {
  FileTable* t = k->files.get();
  MutexGuard g(&t->lock);
  int fd = 3;
  while (t->files.count(fd)) fd++;
  f->id = t->next_id++;
  f->name = name.empty() ? "memfd:" + std::to_string(f->id) : name;
  t->files.emplace(fd, std::move(f));
  return fd;
}

}  // namespace

bool vma_has_page_mkwrite(const Vma* vma) { return vma->vm_file && file_needs_dirty_tracking(vma->vm_file.get()); }

// ---- mmap ----

bool vma_fs_can_writeback(const Vma* vma) { return vma_has_page_mkwrite(vma); }

int file_mmap_prepare(File* file, Vma* vma) {
  switch (file->fs) {
    case FsClass::kHugetlbfs:
      // hugetlbfs_file_mmap (the hugetlb layer): VM_HUGETLB|VM_DONTEXPAND,
      // alignment, reservations, i_size growth of writable mappings.
      return hugetlb_file_mmap(file, vma);
    case FsClass::kShmem:  // shmem_mmap: no seals modelled
    case FsClass::kExt4:   // ext4_file_mmap, xfs_file_mmap, btrfs_file_mmap: no DAX
    case FsClass::kXfs:
    case FsClass::kBtrfs:
      return 0;
  }
  return -ENODEV;
}

std::shared_ptr<File> file_get(Kernel* k, int fd) {
  FileTable* t = k->files.get();
  MutexGuard g(&t->lock);
  auto it = t->files.find(fd);
  return it == t->files.end() ? nullptr : it->second;
}

// ---- system calls ----

int memfd_create(Kernel* k, uint64_t size, FsClass fs, unsigned hugetlb_shift, const std::string& name) {
  if (size > kMaxLfsFilesize) return -EFBIG;
  std::shared_ptr<File> f;
  if (hugetlb_shift || fs == FsClass::kHugetlbfs) {
    // memfd_create(MFD_HUGETLB | size log) on hugetlbfs.
    if (fs != FsClass::kShmem && fs != FsClass::kHugetlbfs) return -EINVAL;
    unsigned shift = hugetlb_shift ? hugetlb_shift : PMD_SHIFT;
    if (shift != PMD_SHIFT && shift != PUD_SHIFT) return -EINVAL;
    // ftruncate on hugetlbfs takes whole huge pages only.
    if (size & ((1ull << shift) - 1)) return -EINVAL;
    int err = 0;
    f = hugetlb_file_setup(k, size, shift, &err);
    if (!f) return err ? err : -ENOMEM;
    // fallocate: the pages come from the pool now (-ENOSPC if it is short).
    if ((err = hugetlb_fallocate(f.get(), 0, size))) return err;
  } else {
    f = std::make_shared<File>();
    f->kernel = k;
    f->cid = k->next_cid.fetch_add(1, std::memory_order_relaxed);
    f->fs = fs;
    f->size = size;
    if (int err = file_populate(f.get(), size)) return err;  // f's destructor frees the partial cache
  }
  return file_install(k, std::move(f), name);
}

int tmpfs_create_file(Kernel* k, uint64_t size, uint8_t huge, bool noswap, const std::string& name) {
  if (size > kMaxLfsFilesize) return -EFBIG;
  auto f = std::make_shared<File>();
  f->kernel = k;
  f->cid = k->next_cid.fetch_add(1, std::memory_order_relaxed);
  f->fs = FsClass::kShmem;
  f->tmpfs = true;
  f->tmpfs_huge = huge;
  // __shmem_get_inode() on a noswap mount: mapping_set_unevictable().
  f->unevictable = noswap;
  f->size = size;
  if (int err = file_populate(f.get(), size)) return err;
  return file_install(k, std::move(f), name);
}

long ksys_pread64(Kernel* k, int fd, uint64_t off, void* buf, uint64_t len) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (off > kMaxLfsFilesize) return -EINVAL;
  const uint64_t size = i_size_read(f.get());
  if (off >= size || !len) return 0;
  len = std::min(len, size - off);
  PhysMem* phys = phys_of(f.get());
  auto* out = static_cast<uint8_t*>(buf);
  for (uint64_t done = 0; done < len;) {
    const uint64_t pos = off + done;
    const uint64_t index = pos >> PAGE_SHIFT;
    const uint64_t in_page = pos & ~PAGE_MASK;
    const uint64_t n = std::min(len - done, PAGE_SIZE - in_page);
    uint64_t start = 0;
    Folio* folio = nullptr;
    if (int err = filemap_get_or_swapin(f.get(), index, &folio, &start)) {
      if (!done) return err;
      len = done;  // a short read up to the page that failed
      break;
    }
    // shmem (SGP_READ) reads a fallocated, never-used folio as a hole.
    if (folio && file_is_shmem(f.get()) && !folio_test_uptodate(folio)) {
      folio_put(folio);
      folio = nullptr;
    }
    if (folio) {
      const auto* src = static_cast<const uint8_t*>(phys->page_address(folio_page(folio, static_cast<long>(index - start))));
      user_memcpy(phys, out + done, src + in_page, n);
      folio_put(folio);
    } else {
      std::memset(out + done, 0, n);  // the caller's buffer
    }
    done += n;
  }
  return static_cast<long>(len);
}

long ksys_pwrite64(Kernel* k, int fd, uint64_t off, const void* buf, uint64_t len) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (f->read_only_fd) return -EBADF;  // not FMODE_WRITE
  if (f->fs == FsClass::kHugetlbfs) return -EINVAL;  // hugetlbfs has no write_iter
  if (off > kMaxLfsFilesize) return -EINVAL;
  if (!len) return 0;
  if (len > kMaxLfsFilesize - off) return -EFBIG;
  PhysMem* phys = phys_of(f.get());
  const auto* in = static_cast<const uint8_t*>(buf);
  uint64_t done = 0;
  while (done < len) {
    const uint64_t pos = off + done;
    const uint64_t index = pos >> PAGE_SHIFT;
    const uint64_t in_page = pos & ~PAGE_MASK;
    const uint64_t n = std::min(len - done, PAGE_SIZE - in_page);
    // write_begin: find or create the folio (past EOF too) and lock it.
    uint64_t start = 0;
    Folio* folio = nullptr;
    if (int err = filemap_get_or_swapin(f.get(), index, &folio, &start)) {
      if (!done) return err;
      break;
    }
    if (!folio) {
      Folio* nf = filemap_alloc_folio(f.get());
      if (!nf) break;
      folio = filemap_add_folio(f.get(), nf, index, &start);
    }
    folio_lock(folio);
    auto* dst = static_cast<uint8_t*>(phys->page_address(folio_page(folio, static_cast<long>(index - start))));
    user_memcpy(phys, dst + in_page, in + done, n);
    // write_end: the folio is uptodate (the rest of a new page is zero) and dirty.
    folio_set_uptodate(folio);
    folio_set_dirty(folio);
    folio_unlock(folio);
    folio_put(folio);
    done += n;
    {
      MutexGuard g(&f->lock);
      if (pos + n > i_size_read(f.get())) i_size_write(f.get(), pos + n);
    }
  }
  if (!done) return -ENOMEM;
  return static_cast<long>(done);
}

int invalidate_mapping_pages(Kernel* k, int fd) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  if (file_is_shmem(f.get()) || f->fs == FsClass::kHugetlbfs) return -EINVAL;
  // mapping_try_invalidate: a clean folio nobody maps or holds leaves the
  // page cache; a dirty, mapped, pinned or locked one stays.
  std::vector<Folio*> victims;
  {
    MutexGuard g(&f->lock);
    for (auto& [index, folio] : f->pages)
      if (!folio_mapped(folio) && !folio_test_dirty(folio) && !folio_test_writeback(folio) &&
          !folio_test_locked(folio) && folio_ref_count(folio) == static_cast<int>(folio_nr_pages(folio))) {
        folio_get(folio);
        victims.push_back(folio);
      }
  }
  for (Folio* folio : victims) {
    filemap_remove_folio(f.get(), folio);
    folio_put(folio);
  }
  return 0;
}

int file_reopen_read_only(Kernel* k, int fd) {
  std::shared_ptr<File> f = file_get(k, fd);
  if (!f) return -EBADF;
  ReadGuard g(&f->i_mmap_rwsem);
  if (!f->i_mmap.empty()) return -EBUSY;  // a mapping's struct file would stay open for write
  f->read_only_fd = true;
  return 0;
}

int close_fd(Kernel* k, int fd) {
  FileTable* t = k->files.get();
  std::shared_ptr<File> f;
  {
    MutexGuard g(&t->lock);
    auto it = t->files.find(fd);
    if (it == t->files.end()) return -EBADF;
    f = std::move(it->second);
    t->files.erase(it);
  }
  f.reset();  // the last reference (no mapping left) frees the page cache, outside the table lock
  return 0;
}

long ksys_mmap_pgoff(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off) {
  if (off & ~PAGE_MASK) return -EINVAL;  // sys_mmap: offset in bytes, page aligned
  if (flags & MAP_ANONYMOUS) return do_mmap(mm, addr, len, prot, flags, off >> PAGE_SHIFT);  // fd ignored
  std::shared_ptr<File> f = file_get(mm->kernel, fd);
  if (!f) return -EBADF;
  return do_mmap_file(mm, std::move(f), addr, len, prot, flags, off >> PAGE_SHIFT);
}

}  // namespace mmlab
