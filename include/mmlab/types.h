// Constants and small types of the modelled machine: x86-64, 4 KiB pages,
// four-level page tables. Names are the kernel's.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mmlab {

inline constexpr unsigned PAGE_SHIFT = 12;
inline constexpr uint64_t PAGE_SIZE = 1ull << PAGE_SHIFT;
inline constexpr uint64_t PAGE_MASK = ~(PAGE_SIZE - 1);
inline constexpr unsigned PMD_SHIFT = 21;
inline constexpr uint64_t PMD_SIZE = 1ull << PMD_SHIFT;
inline constexpr uint64_t PMD_MASK = ~(PMD_SIZE - 1);
inline constexpr unsigned PUD_SHIFT = 30;
inline constexpr uint64_t PUD_SIZE = 1ull << PUD_SHIFT;
inline constexpr uint64_t PUD_MASK = ~(PUD_SIZE - 1);
inline constexpr unsigned PGDIR_SHIFT = 39;  // four levels; P4D is folded into the PGD
inline constexpr uint64_t PGDIR_SIZE = 1ull << PGDIR_SHIFT;
inline constexpr unsigned PTRS_PER_TABLE = 512;
inline constexpr unsigned PTRS_PER_PTE = 512;
inline constexpr unsigned PTRS_PER_PMD = 512;
inline constexpr unsigned PTRS_PER_PUD = 512;
inline constexpr unsigned PTRS_PER_PGD = 512;

inline constexpr unsigned PMD_ORDER = PMD_SHIFT - PAGE_SHIFT;  // 9
inline constexpr unsigned PUD_ORDER = PUD_SHIFT - PAGE_SHIFT;  // 18
inline constexpr unsigned HPAGE_PMD_NR = 1u << PMD_ORDER;
inline constexpr unsigned HPAGE_PUD_NR = 1u << PUD_ORDER;
inline constexpr unsigned MAX_PAGE_ORDER = 10;     // buddy allocator limit (4 MiB)
inline constexpr unsigned MAX_FOLIO_ORDER = PUD_ORDER;
inline constexpr unsigned pageblock_order = PMD_ORDER;

// User address space (47-bit, as TASK_SIZE_MAX on four-level x86-64).
inline constexpr uint64_t TASK_SIZE = (1ull << 47) - PAGE_SIZE;
inline constexpr uint64_t mmap_min_addr = 0x10000;
inline constexpr uint64_t MMAP_BASE = 0x7f0000000000ull;  // top-down allocation starts below this

// mmap/mprotect protections and flags (uapi values).
inline constexpr int PROT_NONE = 0x0, PROT_READ = 0x1, PROT_WRITE = 0x2, PROT_EXEC = 0x4;
inline constexpr int MAP_SHARED = 0x01, MAP_PRIVATE = 0x02, MAP_SHARED_VALIDATE = 0x03;
inline constexpr int MAP_TYPE = 0x0f;
inline constexpr int MAP_FIXED = 0x10, MAP_ANONYMOUS = 0x20, MAP_NORESERVE = 0x4000;
inline constexpr int MAP_POPULATE = 0x8000, MAP_HUGETLB = 0x40000, MAP_FIXED_NOREPLACE = 0x100000;
inline constexpr int MAP_HUGE_SHIFT = 26;
inline constexpr int MAP_HUGE_2MB = 21 << MAP_HUGE_SHIFT, MAP_HUGE_1GB = 30 << MAP_HUGE_SHIFT;
inline constexpr int MREMAP_MAYMOVE = 1, MREMAP_FIXED = 2, MREMAP_DONTUNMAP = 4;

// madvise advice (uapi values).
inline constexpr int MADV_NORMAL = 0, MADV_DONTNEED = 4, MADV_FREE = 8, MADV_REMOVE = 9;
inline constexpr int MADV_DONTFORK = 10, MADV_DOFORK = 11, MADV_HUGEPAGE = 14, MADV_NOHUGEPAGE = 15;
inline constexpr int MADV_WIPEONFORK = 18, MADV_KEEPONFORK = 19, MADV_COLD = 20, MADV_PAGEOUT = 21;
inline constexpr int MADV_POPULATE_READ = 22, MADV_POPULATE_WRITE = 23, MADV_DONTNEED_LOCKED = 24, MADV_COLLAPSE = 25;
inline constexpr int MADV_GUARD_INSTALL = 102, MADV_GUARD_REMOVE = 103;

// mmap's MAP_LOCKED, mlock2's flag and mlockall's (uapi values).
inline constexpr int MAP_LOCKED = 0x2000;
inline constexpr int MLOCK_ONFAULT = 0x01;
inline constexpr int MCL_CURRENT = 1, MCL_FUTURE = 2, MCL_ONFAULT = 4;

// Signals a model CPU access can end with.
// kSigkill stands for the OOM killer (VM_FAULT_OOM on a user access).
enum class Signal : uint8_t { kNone = 0, kSigkill = 9, kSigsegv = 11, kSigbus = 7 };
const char* signal_name(Signal s);

// Result of a user access: the signal (if any) and where it hit.
struct [[nodiscard]] AccessResult {
  Signal sig = Signal::kNone;
  uint64_t fault_addr = 0;
  bool ok() const { return sig == Signal::kNone; }
};

using pfn_t = uint64_t;

const char* errno_name(int err);  // "EFAULT" for EFAULT (positive or negative)
int errno_from_name(const char* name);  // 0 if unknown

constexpr uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
constexpr uint64_t round_down(uint64_t x, uint64_t a) { return x & ~(a - 1); }
constexpr bool is_aligned(uint64_t x, uint64_t a) { return (x & (a - 1)) == 0; }

// What kind of file system a file behaves as (scenario `fs=CLASS`): shmem
// (memfd/tmpfs, the default), hugetlbfs, or one that tracks dirty pages for
// writeback (ext4, xfs, btrfs), which matters for writable long-term pins.
enum class FsClass : uint8_t { kShmem, kHugetlbfs, kExt4, kXfs, kBtrfs };
// What a swap device is (scenario `swap SIZE blkdev|file|zram`): the kernel
// allocates swap for a large folio whole only on a block device (SWP_BLKDEV);
// on a swap file the folio is split first. Both write asynchronously (the
// folio stays in the swap cache until a later reclaim frees it). zram is a
// block device with SWP_SYNCHRONOUS_IO: the folio is written and freed in
// one pass, and a swap-in of an entry nobody else uses bypasses the swap
// cache, with mTHP swap-in (alloc_swap_folio()).
enum class SwapKind : uint8_t { kBlkdev, kFile, kZram };
const char* fs_class_name(FsClass c);
bool fs_class_from_name(const std::string& name, FsClass* out);

// What a System asks of the host's THP for the memory behind its frames
// (SystemConfig::host_thp): no advice (the host's default), MADV_HUGEPAGE or
// MADV_NOHUGEPAGE. src/phys/frame_store.h says why the default is no advice.
enum class HostThp : uint8_t { kDefault, kHugepage, kNohugepage };

// How this library was built (compiler, flags, sanitizer) and from which commit.
const char* build_description();
const char* build_commit();
bool build_is_instrumented();  // a debug or sanitizer build: no timings reported

// What one khugepaged wake did (for a wake cost function).
struct KhugepagedWakeStats {
  uint64_t progress = 0;      // khugepaged_do_scan's progress (pages and VMAs)
  uint64_t ptes_scanned = 0;
  uint64_t collapsed = 0;     // ranges collapsed
  uint64_t bytes_copied = 0;
};

// Host time spent in collapse_huge_page() so far (measured: not deterministic).
struct CollapseTiming {
  uint64_t attempts = 0;       // collapse_huge_page() calls (khugepaged and MADV_COLLAPSE)
  uint64_t collapsed = 0;      // of which collapsed
  uint64_t write_locked = 0;   // of which took mmap_lock for write
  uint64_t total_ns = 0;       // inside collapse_huge_page()
  uint64_t mmap_write_ns = 0;  // holding mmap_lock for write
  uint64_t mmap_write_max_ns = 0;  // the longest single hold of it (what one blocked fault waits at most)
  uint64_t copy_ns = 0;        // copying (__collapse_huge_page_copy)
};

// Host time of the khugepaged thread's wakes so far (measured): the thread's
// CPU time inside them, and their wall time (the part a paced thread charges
// to the virtual clock).
struct KhugepagedTiming {
  uint64_t cpu_ns = 0;
  uint64_t busy_ns = 0;
};

}  // namespace mmlab
