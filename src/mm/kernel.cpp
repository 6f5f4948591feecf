#include "mm/kernel.h"

#include "mm/hugetlb.h"
#include "mm/swapfile.h"
#include "mm/file.h"

namespace mmlab {

Kernel::Kernel()
    : files(std::make_unique<FileTable>()), swap(std::make_unique<SwapState>()), hugetlb(std::make_unique<HugetlbState>()) {
  settings.tlb = &tlb;
}

Kernel::~Kernel() = default;

}  // namespace mmlab
