// What the host kernel shows of another process's mappings: /proc/PID/pagemap
// entries, PAGEMAP_SCAN categories (v6.7+) and /proc/kpageflags. These are
// the host backend's stand-ins for the model's PageInfo.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mmlab::host {

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
constexpr uint64_t kPmPresent = 1ull << 63, kPmSwap = 1ull << 62, kPmSoftDirty = 1ull << 55,
                   kPmGuardRegion = 1ull << 58,  // v6.14
                   kPmPfnMask = (1ull << 55) - 1;

struct HostPageInfo {
  bool present = false, swapped = false;
  bool guard = false;  // PM_GUARD_REGION: a guard marker (kernels before 6.14 never say so)
  uint64_t pfn = 0;
  bool huge = false;        // PAGE_IS_HUGE: mapped by a PMD/PUD leaf (THP or hugetlb)
  bool hugetlb = false;     // KPF_HUGE
  bool zero = false;        // KPF_ZERO_PAGE: the zero page or the huge zero folio
  bool anon = false;        // KPF_ANON
  bool swapbacked = false;  // KPF_SWAPBACKED (anon or shmem)
  int order = -1;           // from the compound head/tail run in kpageflags; -1 if not present
};

// The page of `pid` at `addr`. 0 or -errno (*why says what could not be read).
[[nodiscard]] int host_page_info(int pid, uint64_t addr, HostPageInfo* out, std::string* why);

// Raw pagemap entries of [addr, addr + npages pages).
[[nodiscard]] int pagemap_entries(int pid, uint64_t addr, uint64_t npages, std::vector<uint64_t>* out);

// Which pages of [addr, addr + npages pages) a leaf above the PTE level
// maps (PAGEMAP_SCAN's PAGE_IS_HUGE: a PMD-mapped THP or hugetlb). 0 or -errno.
[[nodiscard]] int pagemap_huge(int pid, uint64_t addr, uint64_t npages, std::vector<bool>* out);

// Which pages of [addr, addr + npages pages) are present and part of a
// large folio (an mTHP or THP, not hugetlb). 0 or -errno.
[[nodiscard]] int pagemap_large_folio(int pid, uint64_t addr, uint64_t npages, std::vector<bool>* out);

// /proc/kpageflags of [pfn, pfn + n).
[[nodiscard]] int kpageflags(uint64_t pfn, uint64_t n, std::vector<uint64_t>* out);

// Resident pages of [addr, addr + len) as the mm's rss counters count them:
// anon, file and shmem pages mapped there (hugetlb and the zero page are not
// counted). Adds to the three counters (in bytes).
[[nodiscard]] int host_rss(int pid, uint64_t addr, uint64_t len, uint64_t* anon, uint64_t* file, uint64_t* shmem);

}  // namespace mmlab::host
