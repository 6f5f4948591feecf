// What the host backend knows about one process's memory that the host
// kernel does not say: the ranges the test mapped (each byte once, so that
// `expect P rss` counts a page once however the ranges were moved, shrunk
// or mapped over) and, per page, why its state on this host may differ from
// an upstream kernel's because the host lacks a capability (host/probe.h).
// An expectation that reads such a page is skipped with the probe's reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace mmlab {

// Why a page may differ from upstream (bits; 0 = no reason).
enum HostTaint : uint8_t {
  kTaintZeroPte = 1,     // a read fault mapped a fresh page where upstream maps the shared zero page
  kTaintZeroPmd = 2,     // ... a THP where upstream maps the huge zero folio
  kTaintZeroMapped = 4,  // whether it is mapped at all may differ: mapped by such a fault's folio
                         // beside the range read (upstream: nothing), or swapped out or freed
                         // since (upstream's zero page stays)
  kTaintSoftDirty = 8,   // present when clear-soft-dirty write-protected nothing here; the
                         // write fault upstream takes next does not happen
  kTaintSwapKind = 16,   // part of a large folio swapped out to the other kind of device than
                         // the test asked for (split where it would go whole, or the reverse)
  kTaintZeroFolio = 32,  // in a folio that such a read fault made large (an mTHP), or that a
                         // collapse over such pages made: its size and how it is mapped still
                         // differ after a write (upstream: the write copies the zero page at
                         // order 0, and a collapse finds zero pages, not written ones)
};
constexpr uint8_t kTaintZero = kTaintZeroPte | kTaintZeroPmd | kTaintZeroMapped;
// Any zero-page stand-in, written since or not.
constexpr uint8_t kTaintStandIn = kTaintZero | kTaintZeroFolio;

// What a range is, as far as the taints go: private anonymous memory (not
// hugetlb) is where a read fault maps the zero page; hugetlb is where
// clear-soft-dirty changes nothing on any kernel.
enum class HostRangeKind : uint8_t { kAnonPrivate, kHugetlb, kOther };

class HostPages {
 public:
  struct Range {
    uint64_t end;
    HostRangeKind kind;
  };
  struct Taint {
    uint64_t end;
    uint8_t bits;  // never 0
  };

  // A new mapping: replaces whatever the test had mapped there (MAP_FIXED).
  void map(uint64_t start, uint64_t len, HostRangeKind kind);
  void unmap(uint64_t start, uint64_t len);
  // A successful mremap that returned new_start (== old_start: in place).
  void remap(uint64_t old_start, uint64_t old_len, uint64_t new_start, uint64_t new_len);

  // On whole pages: [start, start + len) rounded out to pages.
  void set(uint64_t start, uint64_t len, uint8_t bits);
  void clear(uint64_t start, uint64_t len, uint8_t bits);
  // Adds `bits` where a page already has any of `if_any`.
  void add_where(uint64_t start, uint64_t len, uint8_t if_any, uint8_t bits);
  uint8_t at(uint64_t addr) const;
  uint8_t in(uint64_t start, uint64_t len) const;  // OR over the pages of the range
  uint8_t any() const;                             // OR over every page
  const std::map<uint64_t, Taint>& taints() const { return taint_; }

  // The parts of [start, start + len) the test has mapped, as [from, to);
  // only those of `kind` if given.
  std::vector<std::pair<uint64_t, uint64_t>> pieces(uint64_t start, uint64_t len,
                                                    std::optional<HostRangeKind> kind = std::nullopt) const;
  const std::map<uint64_t, Range>& ranges() const { return ranges_; }

 private:
  // fn(old bits) -> new bits on every page of [start, end) (page aligned).
  template <class F>
  void apply(uint64_t start, uint64_t end, F fn);
  void split_at(uint64_t addr);

  std::map<uint64_t, Range> ranges_;  // by start; disjoint
  std::map<uint64_t, Taint> taint_;   // by start; disjoint, page aligned
};

}  // namespace mmlab
