// hugetlb (mm/hugetlb.c, fs/hugetlbfs): the pools of 2 MiB and 1 GiB pages,
// reservations, hugetlb faults and CoW, and the PMD/PUD-level zap and fork
// of hugetlb mappings.
#pragma once

#include <cstdint>
#include <mutex>

#include "phys/page.h"

namespace mmlab {

// The pools of one Kernel (filled in by the hugetlb layer).
struct HugetlbState {
  std::mutex lock;
};

// Per-file reservation state of a hugetlbfs file.
struct HugetlbFileState {};

}  // namespace mmlab
