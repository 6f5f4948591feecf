// Moving bytes in and out of frames: the CPU model's loads and stores,
// device access through GUP handles, file read/write (user_*), the
// kernel-side copies (copy_frames: CoW, fork's eager copies, swap I/O,
// migration) and zeroing new folios (zero_frames), and the user-folio
// helpers of mm/memory.c built on them (folio_zero_user,
// copy_user_large_folio: phys/frame_copy.cpp).
//
// Two paths (PhysMem::data_begin_plain() picks one per move):
// - plain: memcpy/memset and a memcmp-class scan, vectorised, at memory
//   bandwidth. Taken while a single simulated thread has moved bytes in the
//   System (every scenario run, every single-threaded test and benchmark):
//   then nothing can touch the bytes concurrently.
// - atomic: relaxed atomic 8-byte words (bytes at unaligned edges), so that
//   user threads racing on the same memory, or a device writing through a
//   pin while the kernel copies the page, are well defined and
//   ThreadSanitizer-clean, as such races are on real hardware. Taken for
//   good once a second thread has moved bytes in the System. Holding the
//   folio lock or the PTL is not enough for the plain path: the source of a
//   copy can still be written by another thread (a page-cache page written
//   through a MAP_SHARED mapping while do_cow_fault copies it; a page a
//   device pinned).
// Zeroing a new folio (folio_zero_user, __GFP_ZERO) is always plain: nothing
// else can reach a folio before it is mapped.
//
// With Stats::data_timing() on (benchmarks), each move's TSC ticks are added
// to its mechanism's DataTime.
#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "mmlab/types.h"
#include "phys/phys.h"
#include "stats/stats.h"

namespace mmlab {

// The word loops over frame bytes are left out of AddressSanitizer: the
// frame store is one mapping of the host's that ASan never poisons, so each
// check passed by construction, and the checks were most of what the fuzz
// build spent moving bytes. Where a frame's address comes from is still
// checked: the page structures and the store's bounds are ordinary memory.
#define MMLAB_FRAME_BYTES __attribute__((no_sanitize("address")))

namespace user_copy_detail {

inline bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; }
// The __atomic builtins rather than std::atomic_ref: its members are
// functions of their own, which the sanitizer attribute above keeps from
// being inlined into these loops (a call per word).
MMLAB_FRAME_BYTES inline uint64_t load64(const uint8_t* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
}
MMLAB_FRAME_BYTES inline uint8_t load8(const uint8_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
MMLAB_FRAME_BYTES inline void store64(uint8_t* p, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED);
}
MMLAB_FRAME_BYTES inline void store8(uint8_t* p, uint8_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

MMLAB_FRAME_BYTES inline void atomic_memcpy(uint8_t* d, const uint8_t* s, uint64_t len) {
  uint64_t i = 0;
  if (aligned8(d) && aligned8(s)) {
    // Four words at a time, written out: the compiler does not unroll a
    // loop of atomics.
    for (; i + 32 <= len; i += 32) {
      const uint64_t a = load64(s + i), b = load64(s + i + 8), c = load64(s + i + 16), e = load64(s + i + 24);
      store64(d + i, a);
      store64(d + i + 8, b);
      store64(d + i + 16, c);
      store64(d + i + 24, e);
    }
    for (; i + 8 <= len; i += 8) store64(d + i, load64(s + i));
  }
  for (; i < len; i++) store8(d + i, load8(s + i));
}

MMLAB_FRAME_BYTES inline void atomic_memset(uint8_t* d, uint8_t byte, uint64_t len) {
  uint64_t i = 0;
  const uint64_t word = 0x0101010101010101ull * byte;
  if (aligned8(d)) {
    // Four words at a time, written out, as atomic_memcpy: one word per
    // iteration spent as much on the loop as on the stores.
    for (; i + 32 <= len; i += 32) {
      store64(d + i, word);
      store64(d + i + 8, word);
      store64(d + i + 16, word);
      store64(d + i + 24, word);
    }
    for (; i + 8 <= len; i += 8) store64(d + i, word);
  }
  for (; i < len; i++) store8(d + i, byte);
}

// Offset of the first byte of [p, p+len) that is not `byte` (the byte read
// in *found), or -1.
MMLAB_FRAME_BYTES inline int64_t atomic_find_not(const uint8_t* p, uint8_t byte, uint64_t len, uint8_t* found) {
  uint64_t i = 0;
  const uint64_t word = 0x0101010101010101ull * byte;
  auto one = [&](uint64_t at) {
    const uint8_t v = load8(p + at);
    if (v == byte) return false;
    *found = v;
    return true;
  };
  for (; i < len && !aligned8(p + i); i++)
    if (one(i)) return static_cast<int64_t>(i);
  // A line (eight words) per branch, written out because the compiler does
  // not unroll a loop of atomic loads; the words of a line that differs are
  // then looked at one by one below.
  for (; i + 64 <= len; i += 64) {
    const uint8_t* l = p + i;
    const uint64_t x = ((load64(l) ^ word) | (load64(l + 8) ^ word)) | ((load64(l + 16) ^ word) | (load64(l + 24) ^ word)) |
                       ((load64(l + 32) ^ word) | (load64(l + 40) ^ word)) | ((load64(l + 48) ^ word) | (load64(l + 56) ^ word));
    if (x) break;
  }
  for (; i + 8 <= len; i += 8) {
    const uint64_t x = load64(p + i) ^ word;
    if (!x) continue;
    const unsigned k = static_cast<unsigned>(__builtin_ctzll(x)) / 8;  // little-endian: lowest byte first
    *found = static_cast<uint8_t>(byte ^ (x >> (8 * k)));
    return static_cast<int64_t>(i + k);
  }
  for (; i < len; i++)
    if (one(i)) return static_cast<int64_t>(i);
  return -1;
}

// The plain scan: memcmp against a block of `byte` (one per thread, kept
// for the next call with the same byte), which stays in L1.
inline int64_t plain_find_not(const uint8_t* p, uint8_t byte, uint64_t len) {
  constexpr uint64_t kBlock = 4096;
  struct Pattern {
    alignas(64) uint8_t bytes[kBlock];
    int byte = -1;
  };
  thread_local Pattern pat;
  if (pat.byte != byte) {
    std::memset(pat.bytes, byte, kBlock);
    pat.byte = byte;
  }
  for (uint64_t off = 0; off < len; off += kBlock) {
    const uint64_t n = std::min(kBlock, len - off);
    if (std::memcmp(p + off, pat.bytes, n) == 0) continue;
    for (uint64_t i = 0; i < n; i++)
      if (p[off + i] != byte) return static_cast<int64_t>(off + i);
  }
  return -1;
}

}  // namespace user_copy_detail

// Times one move for Stats::data_timing().
class DataTimeScope {
 public:
  DataTimeScope(PhysMem* phys, DataTime what)
      : st_(phys->stats()), what_(what), t0_(st_ && st_->data_timing() ? tsc_now() : 0) {}
  ~DataTimeScope() {
    if (!t0_) return;
    // Stores retire into the store buffer long before they reach memory:
    // wait for them, so that their cost is the move's and not whatever
    // locked instruction comes next.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    st_->add_data_ticks(what_, tsc_now() - t0_);
  }
  DataTimeScope(const DataTimeScope&) = delete;
  DataTimeScope& operator=(const DataTimeScope&) = delete;

 private:
  Stats* st_;
  DataTime what_;
  uint64_t t0_;
};

namespace user_copy_detail {

inline void move(PhysMem* phys, void* dst, const void* src, uint64_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (phys->data_begin_plain()) {
    std::memcpy(d, s, len);
    phys->data_end_plain();
    return;
  }
  atomic_memcpy(d, s, len);
}

}  // namespace user_copy_detail

// User data between a frame of `phys` and any memory (a frame or the caller's buffer).
inline void user_memcpy(PhysMem* phys, void* dst, const void* src, uint64_t len) {
  DataTimeScope t(phys, DataTime::kUser);
  user_copy_detail::move(phys, dst, src, len);
}

inline void user_memset(PhysMem* phys, void* dst, uint8_t byte, uint64_t len) {
  DataTimeScope t(phys, DataTime::kUser);
  auto* d = static_cast<uint8_t*>(dst);
  if (phys->data_begin_plain()) {
    std::memset(d, byte, len);
    phys->data_end_plain();
    return;
  }
  user_copy_detail::atomic_memset(d, byte, len);
}

// Verification: the offset of the first byte of [src, src+len) that is not
// `byte` (and that byte in *found), or -1.
inline int64_t user_find_not(PhysMem* phys, const void* src, uint8_t byte, uint64_t len, uint8_t* found) {
  DataTimeScope t(phys, DataTime::kUser);
  const auto* s = static_cast<const uint8_t*>(src);
  if (phys->data_begin_plain()) {
    const int64_t bad = user_copy_detail::plain_find_not(s, byte, len);
    if (bad >= 0) *found = s[bad];
    phys->data_end_plain();
    return bad;
  }
  return user_copy_detail::atomic_find_not(s, byte, len, found);
}

// A batch of user moves under one choice of path: the CPU model moves the
// pages of a batch of translations back to back. data_begin_plain() is a
// seq_cst store, which waits for every store before it to leave the store
// buffer; taken once per 4 KiB page (user_memset per page) it made a fill
// wait for each page's stores before the next page's began. While plain()
// is true the batch must take no lock (data_begin_plain's rule).
class UserDataBatch {
 public:
  explicit UserDataBatch(PhysMem* phys) : phys_(phys), time_(phys, DataTime::kUser), plain_(phys->data_begin_plain()) {}
  ~UserDataBatch() {
    if (plain_) phys_->data_end_plain();
  }
  UserDataBatch(const UserDataBatch&) = delete;
  UserDataBatch& operator=(const UserDataBatch&) = delete;

  void copy(void* dst, const void* src, uint64_t len) const {
    if (plain_) std::memcpy(dst, src, len);
    else user_copy_detail::atomic_memcpy(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), len);
  }
  void set(void* dst, uint8_t byte, uint64_t len) const {
    if (plain_) std::memset(dst, byte, len);
    else user_copy_detail::atomic_memset(static_cast<uint8_t*>(dst), byte, len);
  }
  // The offset of the first byte of [src, src+len) that is not `byte` (that byte in *found), or -1.
  int64_t find_not(const void* src, uint8_t byte, uint64_t len, uint8_t* found) const {
    const auto* s = static_cast<const uint8_t*>(src);
    if (!plain_) return user_copy_detail::atomic_find_not(s, byte, len, found);
    const int64_t bad = user_copy_detail::plain_find_not(s, byte, len);
    if (bad >= 0) *found = s[bad];
    return bad;
  }

 private:
  PhysMem* phys_;
  DataTimeScope time_;  // constructed before the path is chosen, ended after it is closed
  bool plain_;
};

// A kernel-side copy into a new, private folio (or the swap device) from a
// frame another thread may still write.
inline void copy_frames(PhysMem* phys, void* dst, const void* src, uint64_t len) {
  if (FrameStore::any_pending_zero()) const_cast<FrameStore&>(phys->frame_store()).forget_zero(dst, len);
  DataTimeScope t(phys, DataTime::kCopy);
  user_copy_detail::move(phys, dst, src, len);
}

namespace user_copy_detail {

// Zeroes with non-temporal stores: no read for ownership, and the lines do
// not displace the cache (what will be touched next is elsewhere).
MMLAB_FRAME_BYTES inline void stream_zero(uint8_t* d, uint64_t len) {
  if (!aligned8(d) || len % 64) {
    std::memset(d, 0, len);
    return;
  }
  const __m128i z = _mm_setzero_si128();
  for (uint64_t i = 0; i < len; i += 64) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), z);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), z);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), z);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), z);
  }
  _mm_sfence();
}

}  // namespace user_copy_detail

// CONFIG_PAGE_POISONING: the poison written over a block as it is freed
// (debug builds). Hidden from ThreadSanitizer: nothing may touch a frame
// being freed, and recording the write made TSan fault in shadow memory for
// every byte freed (freeing a 4 GiB hugetlb pool took 30 s); the next
// owner's accesses are still checked against each other.
// The stores are this function's own: a call would be instrumented.
__attribute__((no_sanitize("thread"))) MMLAB_FRAME_BYTES inline void poison_frames(void* dst, uint8_t poison, uint64_t len) {
  const __m128i v = _mm_set1_epi8(static_cast<char>(poison));
  auto* d = static_cast<__m128i*>(dst);  // page-aligned, whole pages
  for (uint64_t i = 0; i < len / sizeof(__m128i); i += 4) {
    _mm_stream_si128(d + i, v);
    _mm_stream_si128(d + i + 1, v);
    _mm_stream_si128(d + i + 2, v);
    _mm_stream_si128(d + i + 3, v);
  }
  _mm_sfence();
}

// Whether a page frame holds only zero bytes: read right after a copy wrote
// it, so it is in cache, and a page with data usually stops at its first
// word (the waste figures: copied pages that were all zero).
MMLAB_FRAME_BYTES inline bool frame_is_zero(const void* frame) {
  const uint64_t* w = static_cast<const uint64_t*>(frame);
  for (uint64_t i = 0; i < PAGE_SIZE / sizeof(uint64_t); i += 8)
    if (w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7]) return false;
  return true;
}

// Zeroing a new folio's frames: nothing else can reach them yet.
inline void zero_frames(PhysMem* phys, void* dst, uint64_t len) {
  DataTimeScope t(phys, DataTime::kZero);
  std::memset(dst, 0, len);
}

// folio_zero_user: all nr pages of a new folio whose frames start at base,
// the page the fault will touch (target; -1 for none) last and through the
// cache, the others with non-temporal stores.
inline void zero_folio_frames(PhysMem* phys, uint8_t* base, long nr, long target) {
  // Memory the host never gave us written is zero already (frame_store.h).
  if (FrameStore::any_pending_zero() &&
      const_cast<FrameStore&>(phys->frame_store()).take_zero(base, static_cast<uint64_t>(nr) * PAGE_SIZE))
    return;
  DataTimeScope t(phys, DataTime::kZero);
  if (nr == 1) {
    std::memset(base, 0, PAGE_SIZE);
    return;
  }
  if (target < 0 || target >= nr) {
    user_copy_detail::stream_zero(base, static_cast<uint64_t>(nr) * PAGE_SIZE);
    return;
  }
  user_copy_detail::stream_zero(base, static_cast<uint64_t>(target) * PAGE_SIZE);
  user_copy_detail::stream_zero(base + static_cast<uint64_t>(target + 1) * PAGE_SIZE,
                                static_cast<uint64_t>(nr - target - 1) * PAGE_SIZE);
  std::memset(base + static_cast<uint64_t>(target) * PAGE_SIZE, 0, PAGE_SIZE);
}

// folio_zero_user: zero a new folio whose first page maps folio_addr, the
// page of fault_addr last (through the cache), counting the bytes in st.
void folio_zero_user(Folio* folio, uint64_t fault_addr, uint64_t folio_addr, Stats* st);

// copy_user_large_folio: src's pages into the new folio dst of the same
// size, counting the bytes in st. 0, or -EHWPOISON when a page's copy meets
// a machine check (the injector's `copy_mc` site), dst then partly written.
[[nodiscard]] int copy_user_large_folio(Folio* dst, Folio* src, Stats* st);

// copy_user_highpage: the destination is a new, private frame.
inline void copy_user_page(PhysMem* phys, void* dst, const void* src) { copy_frames(phys, dst, src, PAGE_SIZE); }

// copy_mc_user_highpage: the copy that survives a machine check on the
// source (the model's only machine checks are the fault injector's `copy_mc`
// site): 0, or -EHWPOISON with the destination partly written.
inline int copy_mc_user_highpage(PhysMem* phys, void* dst, const void* src) {
  if (phys->should_fail(FaultSite::copy_mc)) return -EHWPOISON;
  copy_user_page(phys, dst, src);
  return 0;
}

}  // namespace mmlab
