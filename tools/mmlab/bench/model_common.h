// What the suites that time the model itself (fault, fork, data, collapse,
// corpus) share: the folio-size cases, a System set up for one, a native
// buffer for the reference passes, and timing helpers.
//
// Every System here gets a frame store recycled from a discarded warm-up
// round of the same case (host THP advised), and every timed region counts
// the host faults it took: a row where the host had to provide memory is
// marked, since its time would be the host's first touch, not the model.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "report/statistics.h"
#include "mmlab/system.h"

namespace mmlab::cli {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct FolioCase {
  const char* name;
  const char* sysfs_dir;  // hugepages-<N>kB to set to always, or nullptr for base pages
};
inline constexpr FolioCase kCases[] = {{"4K", nullptr}, {"64K", "hugepages-64kB"}, {"2M", "hugepages-2048kB"}};

// Whether a case also times the data work (zeroing, copies) inside the
// model: a separate run, since the timing itself costs.
enum class DataTiming { kOff, kOn };

// Host memory a benchmark System takes when `touched` bytes of its RAM are
// used: the frames and their memmap (system_host_memory()), the page tables
// that map them (1/64, generously), and slack.
inline uint64_t model_host_need(uint64_t touched) { return system_host_memory(touched).at_most + touched / 64 + (64ull << 20); }

// A System of `ram` (rounded up to 4 MiB) whose anonymous faults take the case's folio size.
std::unique_ptr<System> bench_system(uint64_t ram, const FolioCase& c, int* err);

// A native buffer for the reference passes, touched before any timed pass.
class NativeBuffer {
 public:
  explicit NativeBuffer(uint64_t len);
  ~NativeBuffer();
  NativeBuffer(const NativeBuffer&) = delete;
  NativeBuffer& operator=(const NativeBuffer&) = delete;
  uint8_t* data() const { return p_; }
  uint64_t size() const { return len_; }

 private:
  uint64_t len_;
  uint8_t* p_;
};

// The native verifying pass: memcmp against a block of the byte, as the
// model's plain path does. The offset of the first other byte, or -1.
int64_t native_find_not(const uint8_t* p, uint8_t byte, uint64_t len);

// What the host gave the frame store (how the report says which backing it had).
std::string store_text(const FrameStoreInfo& fs);

}  // namespace mmlab::cli
