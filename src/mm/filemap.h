// The file system calls on the model's files (memfd, hugetlbfs, ext4-class
// files): fds index the Kernel's FileTable. Each returns what the system call
// returns (a count, an fd, 0 or -errno). The System's file API calls these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mm/file.h"
#include "mm/mm.h"
#include "mmlab/types.h"

namespace mmlab {

struct Kernel;
struct Folio;

// memfd_create (MFD_HUGETLB when hugetlb_shift is set or fs is hugetlbfs),
// or O_TMPFILE on an ext4-class file system: a file of size bytes, fully
// allocated. Returns the fd.
[[nodiscard]] int memfd_create(Kernel* k, uint64_t size, FsClass fs, unsigned hugetlb_shift, const std::string& name);
[[nodiscard]] long ksys_pread64(Kernel* k, int fd, uint64_t off, void* buf, uint64_t len);
[[nodiscard]] long ksys_pwrite64(Kernel* k, int fd, uint64_t off, const void* buf, uint64_t len);
[[nodiscard]] int close_fd(Kernel* k, int fd);
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
// `index`, referenced and locked, created if the page is a hole. -EINVAL
// past EOF, -ENOMEM, or -EAGAIN if the folio left the cache meanwhile.
[[nodiscard]] int file_get_folio_locked(File* f, uint64_t index, Folio** foliop, uint64_t* start);
// Does the VMA's file have ->page_mkwrite (ext4-class files)?
bool vma_has_page_mkwrite(const Vma* vma);

}  // namespace mmlab
