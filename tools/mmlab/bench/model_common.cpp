#include "bench/model_common.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "bench/suite.h"
#include "fmt/format.h"

// Host headers last: <sys/mman.h> defines PROT_*/MAP_*/MADV_* as macros, and
// include/mmlab/types.h declares the model's constants under the same names
// (with the same values).
#include <sys/mman.h>

namespace mmlab::cli {

uint64_t folio_bytes_of(const std::string& label) {
  uint64_t n = std::strtoull(label.c_str(), nullptr, 10);
  return label.find('M') != std::string::npos ? n << 20 : n << 10;
}

std::unique_ptr<System> bench_system(uint64_t ram, const FolioCase& c, int* err) {
  SystemConfig cfg;
  cfg.ram_bytes = round_up(ram, 4ull << 20);
  cfg.host_thp = HostThp::kHugepage;
  auto sys = System::create(cfg, err);
  if (!sys) return nullptr;
  if (c.sysfs_dir) sys->sysfs_write(std::string("transparent_hugepage/") + c.sysfs_dir + "/enabled", "always");
  if (c.sysfs_dir && std::string(c.sysfs_dir) != "hugepages-2048kB")
    sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "never");
  return sys;
}

NativeBuffer::NativeBuffer(uint64_t len) : len_(len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  p_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  if (p_) {
    madvise(p_, len, 14 /* MADV_HUGEPAGE, as the frame store */);
    std::memset(p_, 0x11, len);
  }
}

NativeBuffer::~NativeBuffer() {
  if (p_) munmap(p_, len_);
}

int64_t native_find_not(const uint8_t* p, uint8_t byte, uint64_t len) {
  alignas(64) static thread_local uint8_t pattern[4096];
  std::memset(pattern, byte, sizeof pattern);
  for (uint64_t off = 0; off < len; off += sizeof pattern) {
    const uint64_t n = std::min<uint64_t>(sizeof pattern, len - off);
    if (std::memcmp(p + off, pattern, n) != 0) return static_cast<int64_t>(off);
  }
  return -1;
}

std::string store_text(const FrameStoreInfo& fs) {
  return fmt::format("frame store of the last run: served {} Systems, {} MiB resident, {} MiB of it in host huge pages{}",
                     fs.uses, fs.rss >> 20, fs.anon_huge >> 20, fs.thp_advised ? " (MADV_HUGEPAGE)" : "");
}

}  // namespace mmlab::cli
