// PLACEHOLDER until the hugetlb layer lands (owner: hugetlb layer).
#include "fault/fault.h"
#include "fault/hugetlb.h"
#include "mm/file.h"
#include "mm/internal.h"
#include "mm/kernel.h"
#include "mmlab/system.h"

namespace mmlab {

vm_fault_t hugetlb_fault(Vma*, uint64_t, fault_flags_t) { return VM_FAULT_SIGBUS; }
void unmap_hugepage_range(Vma*, uint64_t, uint64_t) {}
int copy_hugetlb_page_range(Vma*, Vma*) { return 0; }
std::shared_ptr<File> hugetlb_file_setup(Kernel*, uint64_t, unsigned, int* err) {
  *err = -EINVAL;
  return nullptr;
}
int hugetlb_sysfs_write(Kernel*, const std::string&, const std::string&) { return -ENOENT; }
int hugetlb_sysfs_read(Kernel*, const std::string&, std::string*) { return -ENOENT; }

}  // namespace mmlab
