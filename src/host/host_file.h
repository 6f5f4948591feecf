// The host backend's `file` statement: a memfd (shmem), a hugetlb memfd, or
// an unnamed file on a real file system of the asked-for class.
#pragma once

#include <cstdint>
#include <string>

namespace mmlab::host {

// Creates and fully allocates the file as the model does: shmem and hugetlb
// are fallocated, a disk file is written with zeros and synced (clean and
// cached). Returns the descriptor, -errno (the kernel refused), or
// kNoSuchFs with *why when the host has no file system of that class.
// read_only (a disk file): the descriptor returned is the file opened again
// O_RDONLY, the writer closed. uncached (a disk file): its page cache is
// dropped after the write (POSIX_FADV_DONTNEED), as drop_caches would.
constexpr int kNoSuchFs = -100000;
[[nodiscard]] int host_create_file(uint64_t size, const std::string& fs_class, unsigned hugetlb_shift, const std::string& name,
                     std::string* why, bool read_only = false, bool uncached = false);
// A linked file on a tmpfs mounted for the run with huge=`huge`
// (loopfs.h), fallocated as a memfd is; kNoSuchFs with *why if no such
// tmpfs can be mounted. It stays linked (an unlinked shmem file would be
// "anonymous shmem", governed by the per-size controls instead of huge=)
// until the tmpfs goes at the end of the run.
[[nodiscard]] int host_create_tmpfs_file(uint64_t size, const std::string& huge, bool noswap, const std::string& name,
                                         std::string* why);

}  // namespace mmlab::host
