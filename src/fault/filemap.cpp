// PLACEHOLDER until the file/shmem layer lands (owner: file layer).
#include "fault/fault.h"
#include "mm/file.h"
#include "mm/internal.h"
#include "mm/kernel.h"

namespace mmlab {

vm_fault_t do_fault(VmFault*) { return VM_FAULT_SIGBUS; }

vm_fault_t wp_page_shared(VmFault* vmf, Folio* folio) NO_THREAD_SAFETY_ANALYSIS {
  pte_t entry = maybe_mkwrite(pte_mkdirty(pte_mkyoung(vmf->orig_pte)), vmf->vma);
  entry_set(vmf->pte, entry);
  vmf->ptl->unlock();
  if (folio) folio_set_dirty(folio);
  return 0;
}

int file_mmap_prepare(File*, Vma*) { return -ENODEV; }
std::shared_ptr<File> shmem_zero_setup(Kernel*, uint64_t) { return nullptr; }
std::shared_ptr<File> file_get(Kernel*, int) { return nullptr; }

const char* fs_class_name(FsClass c) {
  static const char* n[] = {"shmem", "hugetlbfs", "ext4", "xfs", "btrfs"};
  return n[static_cast<int>(c)];
}
bool fs_class_from_name(const std::string& name, FsClass* out) {
  for (int i = 0; i < 5; i++)
    if (name == fs_class_name(static_cast<FsClass>(i))) {
      *out = static_cast<FsClass>(i);
      return true;
    }
  return false;
}

int System::create_file(uint64_t, FsClass, unsigned, const std::string&) { return -ENOSYS; }
long System::file_pread(int, uint64_t, void*, uint64_t) { return -EBADF; }
long System::file_pwrite(int, uint64_t, const void*, uint64_t) { return -EBADF; }
int System::close_file(int) { return -EBADF; }
long Process::mmap_file(uint64_t, uint64_t, int, int, int, uint64_t) { return -EBADF; }

}  // namespace mmlab
