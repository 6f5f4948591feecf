// mm/shmem.c: the shmem file behind shared anonymous memory. The rest of
// shmem (its page cache, fallocate, reads and writes) shares the code of
// mm/filemap.cpp, which says where shmem differs.
#include <memory>

#include "mm/file.h"
#include "mm/filemap.h"

namespace mmlab {

std::shared_ptr<File> shmem_zero_setup(Kernel* k, uint64_t len) {
  // shmem_kernel_file_setup("dev/zero", size): an unlinked shmem file of the
  // mapping's size whose pages appear on first fault.
  auto f = std::make_shared<File>();
  f->kernel = k;
  f->fs = FsClass::kShmem;
  f->anon_shared = true;
  f->name = "dev/zero";
  f->size = len;
  return f;
}

}  // namespace mmlab
