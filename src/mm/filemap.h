// The file system calls on the model's files (memfd, hugetlbfs, ext4-class
// files): fds index the Kernel's FileTable. Each returns what the system call
// returns (a count, an fd, 0 or -errno). The System's file API calls these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mm/file.h"
#include "pgtable/entry.h"
#include "mm/mm.h"
#include "mmlab/types.h"

namespace mmlab {

struct Kernel;
struct Folio;

// memfd_create (MFD_HUGETLB when hugetlb_shift is set or fs is hugetlbfs),
// or O_TMPFILE on an ext4-class file system: a file of size bytes, fully
// allocated. Returns the fd.
[[nodiscard]] int memfd_create(Kernel* k, uint64_t size, FsClass fs, unsigned hugetlb_shift, const std::string& name);
// A linked shmem file on a tmpfs mounted with huge=`huge` (a ShmemHuge
// value), fully allocated. Returns the fd.
[[nodiscard]] int tmpfs_create_file(Kernel* k, uint64_t size, uint8_t huge, bool noswap, const std::string& name);
[[nodiscard]] long ksys_pread64(Kernel* k, int fd, uint64_t off, void* buf, uint64_t len);
[[nodiscard]] long ksys_pwrite64(Kernel* k, int fd, uint64_t off, const void* buf, uint64_t len);
[[nodiscard]] int close_fd(Kernel* k, int fd);
// posix_fadvise(POSIX_FADV_DONTNEED) of a whole regular file: its clean,
// unmapped, unreferenced folios leave the page cache (a later access reads
// the disk again: the model's disk reads zeros, as its files are written).
[[nodiscard]] int invalidate_mapping_pages(Kernel* k, int fd);
// System::file_reopen_read_only: fd's file is open O_RDONLY only from now on.
[[nodiscard]] int file_reopen_read_only(Kernel* k, int fd);
// mmap(2) of fd at byte offset off (MAP_ANONYMOUS ignores fd).
[[nodiscard]] long ksys_mmap_pgoff(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off);


// ---- for mm/mmap.c and mm/vma.c ----
// ->mmap of `file` for a new VMA (file->f_op->mmap_prepare): shmem,
// ext4-class and hugetlbfs checks; 0 or -errno.
[[nodiscard]] int file_mmap_prepare(File* file, Vma* vma);
// shmem_zero_setup: the shmem file behind a MAP_SHARED|MAP_ANONYMOUS mapping (mm/shmem.cpp).
std::shared_ptr<File> shmem_zero_setup(Kernel* k, uint64_t len);
std::shared_ptr<File> file_get(Kernel* k, int fd);  // nullptr if no such fd
// vma_wants_writenotify()'s file part: the file has ->page_mkwrite or its
// mapping can write back (ext4/xfs/btrfs; not shmem or hugetlbfs).
bool vma_fs_can_writeback(const Vma* vma);

// ---- the page cache, for the faults on file VMAs (fault/filemap.cpp) ----
// DIV_ROUND_UP(i_size, PAGE_SIZE): the first page index past EOF.
uint64_t file_end_index(const File* f);
// The cached folio containing page `index` and its first page's index; the
// caller holds f->lock.
Folio* lookup_locked(File* f, uint64_t index, uint64_t* start) REQUIRES(f->lock);
// shmem_get_folio(SGP_CACHE) / filemap_fault's lookup: the folio for page
// `index`, referenced and locked, created if the page is a hole, read back
// if shmem swapped it out (*major set when that read did I/O). -EINVAL past
// EOF, -ENOMEM, -EIO (a failed swap read), or -EAGAIN if the folio left the
// cache meanwhile.
[[nodiscard]] int file_get_folio_locked(File* f, uint64_t index, Folio** foliop, uint64_t* start,
                                        bool* major = nullptr, const Vma* vma = nullptr, uint64_t addr = 0);
// filemap_fault's page-cache miss in a file of the ext4 class and the mmap
// read-around it starts (do_sync_mmap_readahead, mm/readahead.c): false if
// page `index` is cached (or past EOF), else the window of ra_pages around
// it is read into the page cache (pages already cached are left alone) and
// true: the fault is major. ra_pages 1: the device's read_ahead_kb is 0,
// and only the page itself is read.
constexpr uint64_t VM_READAHEAD_PAGES = (128 * 1024) >> PAGE_SHIFT;
bool filemap_read_around(File* f, uint64_t index, uint64_t ra_pages);
// shmem_get_folio_gfp's huge orders for a fault at addr of vma on the hole
// at `index`: a new folio of the highest order shmem_allowable_huge_orders
// allows whose aligned block fits the VMA and holds nothing yet, zeroed,
// uptodate and in the page cache; referenced (the caller's), *start its
// first index. nullptr: none (the caller allocates an order-0 folio).
// shmem's per-superblock shrinker (shmem_unused_huge_shrink): each file on
// the shrinklist whose large folio at i_size reaches past the end (and past
// fallocend) is split, and the pages past the end leave the page cache.
// Returns the folios split. shmem_shrinklist_add queues f.
long shmem_unused_huge_shrink(Kernel* k);
void shmem_shrinklist_add(File* f);
// shmem_fallocend: end (in pages), or what fallocate allocated if further.
uint64_t shmem_fallocend(const File* f, uint64_t end);
// vma nullptr: shmem_fallocate's allocation (no VMA to fit; write_end the
// fallocate's end, which within_size counts as the coming i_size).
Folio* shmem_alloc_and_add_large_folio(File* f, const Vma* vma, uint64_t addr, uint64_t index, uint64_t* start,
                                       uint64_t write_end = 0);
// filemap_remove_folio (delete_from_page_cache): a locked, unmapped folio
// leaves f's page cache, which drops its references.
void filemap_remove_folio(File* f, Folio* folio);

// ---- shmem (mm/shmem.cpp) ----
// shmem_allowable_huge_orders (v6.18) for the collapse paths: the orders of
// the page cache of f at `index` that shmem's THP controls allow (the
// caller has checked vma_thp_disabled). Every model file lives on the
// internal mount (memfd, shared anonymous memory: no tmpfs mounts), whose
// huge= is shmem_enabled's last mount value. A mapping of an unlinked shmem
// file (a memfd, shared anonymous memory) is "anonymous shmem" and follows
// the per-size controls too; shmem_huge_force (MADV_COLLAPSE) makes
// shmem_enabled's own answer the PMD order unless it is deny.
bool shmem_file_unlinked(const File* f);
uint64_t shmem_allowable_huge_orders(const File* f, const Vma* vma, uint64_t index, bool shmem_huge_force,
                                     uint64_t write_end = 0);
// shmem_hpage_pmd_enabled: some shmem control allows PMD THPs.
struct Settings;
bool shmem_hpage_pmd_enabled(const Settings& s);
// shmem_writeout: a locked, unmapped, isolated shmem folio goes to swap:
// slots allocated (the swap cache holds the folio), the file keeps the swap
// entry in place of the folio (holding one swap count per page), and the
// write starts. A large folio that crosses i_size, or gets no contiguous
// slots (a swap file, a full device), is split to order 0 first: the folio
// goes on as its first page and the others, referenced, join *list (page
// reclaim's folio_list). 0, or -ENOMEM (no swap space, or the split failed:
// redirtied, to be kept).
[[nodiscard]] int shmem_writeout(Folio* folio, std::vector<Folio*>* list);
// shmem_swapin_folio: page `index` of f, swapped out as entry, back into the
// page cache, locked and referenced. *major (if given) is set when the
// folio had left the swap cache and was read. -EAGAIN: the entry changed
// meanwhile (look again); -EIO: the read failed.
[[nodiscard]] int shmem_swapin_folio(File* f, uint64_t index, swp_entry_t entry, Folio** foliop, bool* major);
// shmem_undo_range / shmem_truncate_range over bytes [lstart, lend]
// (UINT64_MAX: to the end): pages and swap entries go, partial pages are zeroed.
void shmem_undo_range(File* f, uint64_t lstart, uint64_t lend);
// ftruncate of a shmem file (shmem_setattr), hole punching (shmem_fallocate).
[[nodiscard]] int shmem_setattr_size(File* f, uint64_t newsize);
[[nodiscard]] int shmem_fallocate_punch(File* f, uint64_t offset, uint64_t len);
// The swap entries of a file being destroyed (shmem_evict_inode).
void shmem_evict_swap(File* f);

// ---- truncation (mm/truncate.cpp) ----
// truncate_inode_folio: a locked page-cache folio leaves the cache (unmapped first if a fault mapped it again).
void truncate_inode_folio(File* f, Folio* folio);
// Every cached folio of pages [start, end) through truncate_inode_folio.
void truncate_inode_folios(File* f, uint64_t start, uint64_t end);
// The byte range [lstart, lend] (lend UINT64_MAX: to the end) of a
// truncation or hole punch as whole pages [start, end), which go, and the
// byte counts of the partial pages at either edge, which are zeroed.
struct TruncateRange {
  uint64_t start, end, partial_start, partial_end;
};
TruncateRange truncate_range(uint64_t lstart, uint64_t lend);
// The end of a partial page's truncation: zeroes bytes [from, to) of the
// folio's page `page` if the folio is still f's and uptodate (a fallocated
// shmem page never written is zeros already), then unlocks and puts the
// folio (locked and referenced by the caller).
void truncate_partial_zero(File* f, Folio* folio, uint64_t page, uint64_t from, uint64_t to);
// Zeroes the partial pages of r with zero(f, index, from, to): the page
// cache's truncate_inode_partial_folio, or shmem's, which also reads a
// swapped-out page back first. A range inside one page is zeroed once.
void truncate_partial_pages(File* f, TruncateRange r, void (*zero)(File*, uint64_t index, uint64_t from, uint64_t to));
// truncate_inode_pages_range over bytes [lstart, lend] (UINT64_MAX: to the end).
void truncate_inode_pages_range(File* f, uint64_t lstart, uint64_t lend);
// truncate_pagecache (a file shrunk to newsize), truncate_pagecache_range (a hole).
void truncate_pagecache(File* f, uint64_t newsize);
void truncate_pagecache_range(File* f, uint64_t lstart, uint64_t lend);
// do_truncate / do_sys_ftruncate: 0 or -errno (-EINVAL for a negative length).
[[nodiscard]] int do_truncate(File* f, int64_t length);
[[nodiscard]] int do_sys_ftruncate(Kernel* k, int fd, int64_t length);
// vfs_fallocate / ksys_fallocate: FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
// only (the model's files are allocated whole); 0 or -errno.
[[nodiscard]] int vfs_fallocate(File* f, int mode, int64_t offset, int64_t len);
[[nodiscard]] int ksys_fallocate(Kernel* k, int fd, int mode, int64_t offset, int64_t len);
// Does the VMA's file have ->page_mkwrite (ext4-class files)?
bool vma_has_page_mkwrite(const Vma* vma);

}  // namespace mmlab
