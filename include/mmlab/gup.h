// get_user_pages for users of the public API (the CLI, the scenario
// interpreter): call a kernel entry point on a process and hold what it
// returned until released, as a driver would.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mmlab/system.h"

namespace mmlab {

struct Page;

// FOLL_* values of v6.18 that callers may pass (internal flags are refused
// by the entry points exactly as is_valid_gup_args() refuses them).
namespace foll {
inline constexpr unsigned WRITE = 1u << 0, GET = 1u << 1, DUMP = 1u << 2, FORCE = 1u << 3, NOWAIT = 1u << 4;
inline constexpr unsigned NOFAULT = 1u << 5, HWPOISON = 1u << 6, ANON = 1u << 7, LONGTERM = 1u << 8;
inline constexpr unsigned SPLIT_PMD = 1u << 9, PCI_P2PDMA = 1u << 10, INTERRUPTIBLE = 1u << 11;
inline constexpr unsigned HONOR_NUMA_FAULT = 1u << 12;
inline constexpr unsigned TOUCH = 1u << 16, PIN = 1u << 19;  // internal: for -F testing only
}  // namespace foll

// The kernel entry point a caller uses (GUP's semantics depend on it).
enum class GupEntry : uint8_t {
  kGetUserPages,         // caller holds mmap_lock (taken here for it); adds FOLL_TOUCH
  kGetUserPagesFast,
  kGetUserPagesFastOnly,
  kGetUserPagesUnlocked,
  kPinUserPages,         // caller holds mmap_lock; no FOLL_TOUCH; invalid arguments -> 0
  kPinUserPagesFast,
  kPinUserPagesUnlocked,
  // The remote entry points (process_vm_readv, ptrace, uprobes): the caller
  // holds the target mm's mmap_lock for read and passes `locked`, so GUP
  // may drop the lock to wait for a fault (FOLL_UNLOCKABLE) and says so.
  kGetUserPagesRemote,   // adds FOLL_TOUCH | FOLL_REMOTE; invalid arguments -> -EINVAL
  kPinUserPagesRemote,   // adds FOLL_TOUCH | FOLL_REMOTE; invalid arguments -> 0
};
bool gup_entry_is_pin(GupEntry e);
const char* gup_entry_name(GupEntry e);

// Whether a caller releasing pages wrote to them (GupPages::release).
enum class Dirty : bool { kNo, kYes };

// What one GUP call holds: release exactly as taken (put_page per page for
// the get entry points, unpin_user_pages batched per folio for pin).
class GupPages {
 public:
  GupPages() = default;
  ~GupPages() { release(); }
  GupPages(const GupPages&) = delete;
  GupPages& operator=(const GupPages&) = delete;
  GupPages(GupPages&& o) noexcept { *this = std::move(o); }
  GupPages& operator=(GupPages&& o) noexcept;

  long count() const { return count_; }
  bool pinned() const { return pin_; }
  // Release; with Dirty::kYes, unpin_user_pages_dirty_lock (pins) or mark
  // dirty then put (what a driver that wrote through the pages does).
  void release(Dirty dirty = Dirty::kNo);
  // Device access through the held pages (offsets from the first page).
  // Returns 0, or -EFAULT beyond what is held.
  int read(uint64_t off, void* buf, uint64_t len) const;
  int write(uint64_t off, const void* buf, uint64_t len) const;
  int fill(uint64_t off, uint8_t byte, uint64_t len) const;  // write len copies of byte
  // Read and report the first byte that differs from `byte` (offset from
  // off, or -1 in *first_mismatch; the byte read in *found).
  int read_expect(uint64_t off, uint8_t byte, uint64_t len, int64_t* first_mismatch, uint8_t* found) const;
  uint64_t pfn(long i) const;
  // gup_test's untimed check: every folio maybe-DMA-pinned (and long-term pinnable).
  bool all_maybe_dma_pinned() const;
  bool all_longterm_pinnable() const;
  // Add the references this handle holds, per folio (head pfn), as the
  // invariant checker counts them: one per page for FOLL_GET;
  // GUP_PIN_COUNTING_BIAS per page for a pin of a small folio; nothing for a
  // pin of a large folio (the checker counts those references from the
  // pincount) or of the zero page.
  void add_refs(std::map<uint64_t, long>* refs) const;

 private:
  friend long gup(Process* p, GupEntry e, uint64_t start, long nr_pages, unsigned foll_flags, GupPages* out, long capacity);
  std::vector<Page*> pages_;
  long count_ = 0;
  bool pin_ = false;
};

// Call entry point `e` on p's address space; the pages obtained are held in
// *out (released first if it held any). Returns the entry point's value.
// `capacity`: the length of the pages array to allocate, when the caller
// knows the call cannot return more than nr_pages would allow (-1: nr_pages;
// see gup_reachable_pages).
long gup(Process* p, GupEntry e, uint64_t start, long nr_pages, unsigned foll_flags, GupPages* out, long capacity = -1);

// The most pages a GUP call from `start` asking for nr_pages can return in
// p's address space as it is now: the pages from start's to the end of the
// run of VMAs that follow one another without a gap from the one holding
// start, at most nr_pages (0: no VMA holds start). Every page GUP hands back
// lies in such a run, so while no other thread changes the address space
// this sizes the pages array of a count taken from untrusted input.
long gup_reachable_pages(Process* p, uint64_t start, long nr_pages);

// process_vm_readv(2) of one range (mm/process_vm_access.c): `reader`
// copies `len` bytes of `target` at `remote` into its own memory at
// `local`, 16 pages at a time (PVM_MAX_PP_ARRAY_COUNT), each chunk pinned
// with pin_user_pages_remote(), copied (copy_to_user: it faults the
// reader's pages) and unpinned. Returns the bytes copied, or -EFAULT if the
// first chunk could not be pinned or copied (-ESRCH: a process has exited).
long process_vm_readv(Process* reader, uint64_t local, Process* target, uint64_t remote, uint64_t len);

// get_dump_page over [start, start+len): pages returned and holes.
void dump_range(Process* p, uint64_t start, uint64_t len, long* pages, long* holes);

}  // namespace mmlab

namespace mmlab {

// mm/gup_test.c: the debugfs ioctls behind the gup_test tool.
enum class GupTestCmd : uint8_t {
  GUP_FAST_BENCHMARK = 1,
  PIN_FAST_BENCHMARK = 2,
  PIN_LONGTERM_BENCHMARK = 3,
  GUP_BASIC_TEST = 4,
  PIN_BASIC_TEST = 5,
  DUMP_USER_PAGES_TEST = 6,
};
const char* gup_test_cmd_name(GupTestCmd c);
inline constexpr unsigned GUP_TEST_FLAG_DUMP_PAGES_USE_PIN = 0x1;

// struct gup_test.
struct GupTestArgs {
  double get_delta_usec = 0;  // out (fractional: the model's calls are short)
  double put_delta_usec = 0;  // out
  uint64_t addr = 0;
  uint64_t size = 0;          // in: bytes requested; out: bytes covered
  unsigned nr_pages_per_call = 1;
  unsigned gup_flags = 0;
  unsigned test_flags = 0;
  unsigned which_pages[8] = {};  // 1-based page indices for the dump test
  long check_failures = 0;    // out: pages that failed the untimed pinned-page check
  std::string dump_log;       // out: what the dump test writes to the kernel log
  // Model additions, filled outside the timed region (the kernel's struct
  // has neither: its tool can only say "truncated"):
  long stop_ret = 0;  // out: the return of the GUP call that ended the loop short (-errno or 0), else 0
  std::map<uint64_t, uint64_t> folios_by_size;  // out: distinct folios obtained, by folio size in bytes (0: pages that are the zero page)
};

// The ioctl handler: 0, or -errno (-EINVAL for a bad range, -ENOMEM).
int gup_test_ioctl(Process* p, GupTestCmd cmd, GupTestArgs* args);

// The physical floor of a GUP request: the least work any GUP must do for it,
// a plain loop that reads each leaf entry and stores the page in pages[] (no
// locks, no references, no checks). Returns the microseconds it took, or -1
// if some page is not mapped.
double gup_physical_floor_us(Process* p, uint64_t start, long nr_pages);

}  // namespace mmlab
