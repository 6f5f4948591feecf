// Reading the host's page tables from outside: pagemap (present, swap, PFN),
// PAGEMAP_SCAN (whether a leaf is huge: the only interface that says PMD vs
// PTE mapping per address) and kpageflags (folio size from the run of
// compound head/tail pages, anon/shmem/hugetlb/zero).
#include "host/pagemap.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "mmlab/types.h"

namespace mmlab::host {
namespace {

// kpageflags bits (include/uapi/linux/kernel-page-flags.h).
constexpr unsigned KPF_ANON = 12, KPF_SWAPBACKED = 14, KPF_COMPOUND_HEAD = 15, KPF_COMPOUND_TAIL = 16, KPF_HUGE = 17,
                   KPF_ZERO_PAGE = 24;
// PAGEMAP_SCAN (include/uapi/linux/fs.h, v6.7); the build host's headers may predate it.
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
      category_anyof_mask, return_mask;
};
struct PageRegion {
  uint64_t start, end, categories;
};
constexpr uint64_t PAGE_IS_PRESENT = 1ull << 3, PAGE_IS_SWAPPED = 1ull << 4, PAGE_IS_HUGE = 1ull << 6;
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);

bool bit(uint64_t v, unsigned b) { return (v >> b) & 1; }

// Bytes read (fewer past the end of the file), or -errno.
long pread_file(const std::string& path, uint64_t off, void* buf, size_t len) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t r = pread(fd, buf, len, static_cast<off_t>(off));
  long ret = r < 0 ? -errno : r;
  close(fd);
  return ret;
}

// PAGEMAP_SCAN over [start, end): regions of pages with equal categories
// (those in `mask`) into *out. The walk may stop early when the vector is
// full; *walk_end says where. 0 or -errno.
int pagemap_scan(int pid, uint64_t start, uint64_t end, uint64_t mask, std::vector<PageRegion>* out,
                 uint64_t* walk_end) {
  int fd = open(("/proc/" + std::to_string(pid) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  out->assign(64, PageRegion{});
  PmScanArg arg = {};
  arg.size = sizeof(arg);
  arg.start = start;
  arg.end = end;
  arg.vec = reinterpret_cast<uint64_t>(out->data());
  arg.vec_len = out->size();
  arg.return_mask = mask;
  long n = ioctl(fd, kPagemapScan, &arg);
  int err = n < 0 ? -errno : 0;
  close(fd);
  if (err) return err;
  out->resize(static_cast<size_t>(n));
  *walk_end = arg.walk_end;
  return 0;
}

// The categories of the page at addr, from PAGEMAP_SCAN. 0 or -errno.
int pagemap_scan_categories(int pid, uint64_t addr, uint64_t* cats) {
  std::vector<PageRegion> regions;
  uint64_t walk_end = 0;
  uint64_t start = addr & PAGE_MASK;
  if (int err = pagemap_scan(pid, start, start + PAGE_SIZE, PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_HUGE, &regions,
                             &walk_end))
    return err;
  *cats = regions.empty() ? 0 : regions[0].categories;
  return 0;
}

// Order of the folio containing pfn: the head is the last non-tail frame
// at or below it, the folio ends at the next frame that is not a tail.
int folio_order(uint64_t pfn, uint64_t flags, int* order) {
  if (!bit(flags, KPF_COMPOUND_HEAD) && !bit(flags, KPF_COMPOUND_TAIL)) {
    *order = 0;
    return 0;
  }
  constexpr uint64_t kChunk = 512, kMaxPages = 1ull << 18;  // up to a 1G folio
  uint64_t head = pfn;
  std::vector<uint64_t> f;
  while (head > 0 && pfn - head < kMaxPages) {
    uint64_t from = head >= kChunk ? head - kChunk : 0;
    if (int err = kpageflags(from, head - from + 1, &f)) return err;
    size_t i = f.size() - 1;
    while (i > 0 && bit(f[i], KPF_COMPOUND_TAIL)) i--;
    if (!bit(f[i], KPF_COMPOUND_TAIL) || from == 0) {
      head = from + i;
      break;
    }
    head = from;
  }
  uint64_t end = pfn + 1;
  for (bool more = true; more && end - head < kMaxPages;) {
    if (kpageflags(end, kChunk, &f)) break;  // past the last frame
    size_t i = 0;
    while (i < f.size() && bit(f[i], KPF_COMPOUND_TAIL)) i++;
    end += i;
    more = i == f.size();
  }
  uint64_t n = end - head;
  int o = 0;
  while ((1ull << o) < n) o++;
  *order = o;
  return 0;
}

}  // namespace

int pagemap_entries(int pid, uint64_t addr, uint64_t npages, std::vector<uint64_t>* out) {
  out->assign(npages, 0);
  long r = pread_file("/proc/" + std::to_string(pid) + "/pagemap", (addr >> PAGE_SHIFT) * 8, out->data(), npages * 8);
  return r < 0 ? static_cast<int>(r) : static_cast<uint64_t>(r) == npages * 8 ? 0 : -EIO;
}

int pagemap_huge(int pid, uint64_t addr, uint64_t npages, std::vector<bool>* out) {
  out->assign(npages, false);
  const uint64_t end = addr + npages * PAGE_SIZE;
  for (uint64_t at = addr; at < end;) {
    std::vector<PageRegion> regions;
    uint64_t walk_end = end;
    if (int err = pagemap_scan(pid, at, end, PAGE_IS_HUGE, &regions, &walk_end)) return err;
    for (auto& r : regions)
      if (r.categories & PAGE_IS_HUGE)
        for (uint64_t a = std::max(r.start, at); a < std::min(r.end, end); a += PAGE_SIZE) (*out)[(a - addr) >> PAGE_SHIFT] = true;
    if (walk_end <= at) break;  // no progress: the rest is unmapped
    at = walk_end;
  }
  return 0;
}

int pagemap_large_folio(int pid, uint64_t addr, uint64_t npages, std::vector<bool>* out) {
  out->assign(npages, false);
  std::vector<uint64_t> pm, f;
  if (int err = pagemap_entries(pid, addr, npages, &pm)) return err;
  for (uint64_t i = 0; i < npages; i++) {
    if (!(pm[i] & kPmPresent)) continue;
    if (int err = kpageflags(pm[i] & kPmPfnMask, 1, &f)) return err;
    (*out)[i] = !bit(f[0], KPF_HUGE) && (bit(f[0], KPF_COMPOUND_HEAD) || bit(f[0], KPF_COMPOUND_TAIL));
  }
  return 0;
}

int kpageflags(uint64_t pfn, uint64_t n, std::vector<uint64_t>* out) {
  out->assign(n, 0);
  long r = pread_file("/proc/kpageflags", pfn * 8, out->data(), n * 8);
  if (r < 0) return static_cast<int>(r);
  out->resize(static_cast<uint64_t>(r) / 8);  // the last frames of memory
  return out->empty() ? -EIO : 0;
}

int host_page_info(int pid, uint64_t addr, HostPageInfo* out, std::string* why) {
  *out = HostPageInfo{};
  std::vector<uint64_t> pm;
  if (int err = pagemap_entries(pid, addr, 1, &pm)) {
    *why = "cannot read /proc/" + std::to_string(pid) + "/pagemap";
    return err;
  }
  out->present = pm[0] & kPmPresent;
  out->swapped = pm[0] & kPmSwap;
  out->guard = pm[0] & kPmGuardRegion;
  if (!out->present) return 0;
  out->pfn = pm[0] & kPmPfnMask;
  uint64_t cats = 0;
  if (int err = pagemap_scan_categories(pid, addr, &cats)) {
    *why = "PAGEMAP_SCAN is not available (Linux 6.7 or later)";
    return err;
  }
  out->huge = cats & PAGE_IS_HUGE;
  std::vector<uint64_t> f;
  if (int err = kpageflags(out->pfn, 1, &f)) {
    *why = "cannot read /proc/kpageflags";
    return err;
  }
  out->hugetlb = bit(f[0], KPF_HUGE);
  out->zero = bit(f[0], KPF_ZERO_PAGE);
  out->anon = bit(f[0], KPF_ANON);
  out->swapbacked = bit(f[0], KPF_SWAPBACKED);
  if (int err = folio_order(out->pfn, f[0], &out->order)) {
    *why = "cannot read /proc/kpageflags";
    return err;
  }
  return 0;
}

int host_rss(int pid, uint64_t addr, uint64_t len, uint64_t* anon, uint64_t* file, uint64_t* shmem) {
  constexpr uint64_t kChunk = 4096;
  for (uint64_t a = addr; a < addr + len; a += kChunk * PAGE_SIZE) {
    uint64_t n = std::min(kChunk, (addr + len - a) >> PAGE_SHIFT);
    std::vector<uint64_t> pm;
    if (int err = pagemap_entries(pid, a, n, &pm)) return err;
    for (uint64_t e : pm) {
      if (!(e & kPmPresent)) continue;
      std::vector<uint64_t> f;
      if (int err = kpageflags(e & kPmPfnMask, 1, &f)) return err;
      if (bit(f[0], KPF_HUGE) || bit(f[0], KPF_ZERO_PAGE)) continue;
      if (bit(f[0], KPF_ANON))
        *anon += PAGE_SIZE;
      else if (bit(f[0], KPF_SWAPBACKED))
        *shmem += PAGE_SIZE;
      else
        *file += PAGE_SIZE;
    }
  }
  return 0;
}

}  // namespace mmlab::host
