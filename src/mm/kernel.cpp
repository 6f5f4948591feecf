#include "mm/kernel.h"

#include "mm/debug.h"
#include "mm/hugetlb.h"
#include "mm/shm.h"
#include "mm/swapfile.h"
#include "mm/file.h"
#include "mm/variants.h"

namespace mmlab {

Kernel::Kernel()
    : files(std::make_unique<FileTable>()), swap(std::make_unique<SwapState>()), hugetlb(std::make_unique<HugetlbState>()),
      shm(std::make_unique<ShmIds>()) {
  settings.tlb = &tlb;
  vm_debug_init();  // the VM_* reports find this Kernel through mm/debug.cpp
}

Kernel::~Kernel() {
  // Files go before the swap devices: a shmem file's swapped-out pages hold
  // swap slots, which its destruction frees (shmem_evict_inode). The SysV
  // segments nobody removed are files too.
  shm.reset();
  files.reset();
}

bool Kernel::vm_warn_records() const {
  // A variant with known flaws, or a revert switch: the warnings are the
  // findings, not a reason to stop.
  return settings.cow_policy.load(std::memory_order_relaxed) == CowPolicy::kRfc ||
         settings.reverts.load(std::memory_order_relaxed) != 0;
}

}  // namespace mmlab
