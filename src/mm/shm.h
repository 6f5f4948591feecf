// ipc/shm.c: System V shared memory, the part memory management sees. A
// segment is a shmem file (a hugetlbfs one with SHM_HUGETLB) that shmat()
// maps MAP_SHARED; shmctl(SHM_LOCK) makes its mapping unevictable, IPC_RMID
// destroys it once nothing is attached. Defined in mm/shm.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "sync/mutex.h"

namespace mmlab {

struct Kernel;
struct Mm;
struct File;

// shmget flags and shmctl commands, as <sys/shm.h> and <sys/ipc.h> number them.
constexpr int kShmHugetlb = 04000;  // SHM_HUGETLB
constexpr int kShmRdonly = 010000;  // SHM_RDONLY
constexpr int kIpcRmid = 0;         // IPC_RMID
constexpr int kShmLock = 11;        // SHM_LOCK
constexpr int kShmUnlock = 12;      // SHM_UNLOCK

// struct shmid_kernel, reduced: the segment's file and its state. nattch is
// not kept: it is the number of VMAs mapping the file (shm_open and
// shm_close count VMAs, so a split VMA counts twice), read from i_mmap.
struct ShmSegment {
  uint64_t size = 0;             // shm_segsz: the size asked for
  std::shared_ptr<File> file;    // the id's reference, until IPC_RMID
  std::weak_ptr<File> dest;      // SHM_DEST: removed while attached; the attaches hold the file
  bool locked = false;           // SHM_LOCKED
};

// The IPC namespace's shm ids (ipc_ids), owned by the Kernel.
struct ShmIds {
  Mutex lock;
  std::map<int, ShmSegment> segs GUARDED_BY(lock);
  int next_idx GUARDED_BY(lock) = 0;
};

// shmget(IPC_PRIVATE, size, IPC_CREAT | 0600 | (SHM_HUGETLB)): the new id, or -errno.
[[nodiscard]] long ksys_shmget(Kernel* k, uint64_t size, int shmflg);
// shmat(shmid, NULL, shmflg) (SHM_RDONLY or 0): the address, or -errno.
[[nodiscard]] long do_shmat(Mm* mm, int shmid, int shmflg);
// shmdt(addr): 0 or -errno.
[[nodiscard]] int ksys_shmdt(Mm* mm, uint64_t addr);
// shmctl(shmid, IPC_RMID | SHM_LOCK | SHM_UNLOCK, NULL): 0 or -errno.
[[nodiscard]] int ksys_shmctl(Kernel* k, int shmid, int cmd);

}  // namespace mmlab
