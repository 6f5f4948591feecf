// The file system calls on the model's files (memfd, hugetlbfs, ext4-class
// files): fds index the Kernel's FileTable. Each returns what the system call
// returns (a count, an fd, 0 or -errno). The System's file API calls these.
#pragma once

#include <cstdint>
#include <string>

#include "mm/mm.h"
#include "mmlab/types.h"

namespace mmlab {

struct Kernel;

// memfd_create (MFD_HUGETLB when hugetlb_shift is set or fs is hugetlbfs),
// or O_TMPFILE on an ext4-class file system: a file of size bytes, fully
// allocated. Returns the fd.
int memfd_create(Kernel* k, uint64_t size, FsClass fs, unsigned hugetlb_shift, const std::string& name);
long ksys_pread64(Kernel* k, int fd, uint64_t off, void* buf, uint64_t len);
long ksys_pwrite64(Kernel* k, int fd, uint64_t off, const void* buf, uint64_t len);
int close_fd(Kernel* k, int fd);
// mmap(2) of fd at byte offset off (MAP_ANONYMOUS ignores fd).
long ksys_mmap_pgoff(Mm* mm, uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off);

}  // namespace mmlab
