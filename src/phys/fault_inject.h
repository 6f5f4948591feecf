// Fault injection (lib/fault-inject.c with mm/fail_page_alloc.c and
// mm/failslab.c's role): one FaultInjector per System, in its PhysMem (the
// lowest layer every failure site can see), with named sites. Each site is
// checked where the kernel's code can fail and the model's otherwise cannot:
//
//   page_alloc     alloc_pages/folio_alloc of a given order (should_fail_alloc_page)
//   charge         mem_cgroup_charge (the model has no memcg; src/mm/memcontrol.h)
//   pgtable_alloc  a page-table page (pte_alloc_one, pmd_alloc_one, ...)
//   folio_trylock  folio_trylock() reports the folio locked by someone else
//   copy_mc        copy_mc_user_highpage() meets a machine check (-EHWPOISON)
//   swapin         swap_read_folio() ends with an I/O error (the folio stays !uptodate)
//   hugetlb_resv   hugetlb_reserve_pages() cannot account the reservation
//   fault_retry    a fault that may retry (FAULT_FLAG_ALLOW_RETRY) drops its
//                  lock and returns VM_FAULT_RETRY
//
// A site is armed with an optional order filter (only calls for that order
// count), a mode (fail the next N calls, every Nth call, or each call with
// probability P) and an interval (`after N`: the first N matching calls pass).
// The probability draws from the injector's seeded generator, indexed by the
// site's call number, so a single-threaded run repeats exactly.
//
// Disarmed sites cost one relaxed load. Arming and disarming happen while the
// System is quiescent (between scenario statements, before stress threads
// start); the per-call state is atomic, so concurrent callers of an armed site
// each see a consistent decision.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "stats/stats.h"

namespace mmlab {

#define MMLAB_FAULT_SITES(X)                                                                        \
  X(page_alloc, "page_alloc", inject_page_alloc)                                                  \
  X(charge, "charge", inject_charge)                                                              \
  X(pgtable_alloc, "pgtable_alloc", inject_pgtable_alloc)                                         \
  X(folio_trylock, "folio_trylock", inject_folio_trylock)                                         \
  X(copy_mc, "copy_mc", inject_copy_mc)                                                           \
  X(swapin, "swapin", inject_swapin)                                                              \
  X(hugetlb_resv, "hugetlb_resv", inject_hugetlb_resv)                                            \
  X(fault_retry, "fault_retry", inject_fault_retry)

enum class FaultSite : uint8_t {
#define X(e, n, ev) e,
  MMLAB_FAULT_SITES(X)
#undef X
  kNr
};

inline constexpr size_t kNrFaultSites = static_cast<size_t>(FaultSite::kNr);

const char* fault_site_name(FaultSite s);
bool fault_site_from_name(std::string_view name, FaultSite* out);
// "page_alloc, charge, ..." for error messages.
std::string fault_site_names();
// The counter (`inject.<site>`) that counts the site's injected failures.
Event fault_site_event(FaultSite s);

struct FaultSpec {
  enum class Mode : uint8_t { kOff, kTimes, kEvery, kProbability };
  Mode mode = Mode::kOff;
  int order = -1;          // only calls for this order count; -1: every order
  uint64_t n = 0;          // kTimes: fail this many; kEvery: fail every n-th
  double probability = 0;  // kProbability: in [0, 1]
  uint64_t after = 0;      // the first `after` matching calls pass
};

class FaultInjector {
 public:
  // Where injected failures are counted (the System's Stats; null: not counted).
  void set_stats(Stats* stats) { stats_ = stats; }

  // Arms (or, with Mode::kOff, disarms) a site; its call number restarts.
  // Returns -EINVAL for a spec that is out of range (n == 0, P outside [0,1]).
  int set(FaultSite s, const FaultSpec& spec);
  void clear_all();
  void seed(uint64_t seed) { seed_.store(seed, std::memory_order_relaxed); }
  bool armed(FaultSite s) const { return site(s).mode.load(std::memory_order_relaxed) != FaultSpec::Mode::kOff; }

  // The check at a failure site: true when this call must fail. Counts the
  // failure in `inject.<site>`.
  bool should_fail(FaultSite s, unsigned order = 0) {
    if (!armed(s)) [[likely]] return false;
    return should_fail_slow(s, order);
  }

  // Failures injected at a site since the System was made (the counter
  // `inject.<site>` also counts them, and `counters reset` zeroes it).
  uint64_t injected(FaultSite s) const { return site(s).injected.load(std::memory_order_relaxed); }
  // Failures injected into calls made by the calling thread (any injector):
  // lets a caller tell its own injected failure from a real one.
  static uint64_t injected_on_this_thread();
  static uint64_t injected_on_this_thread(FaultSite s);

 private:
  struct Site {
    std::atomic<FaultSpec::Mode> mode{FaultSpec::Mode::kOff};
    std::atomic<int> order{-1};
    std::atomic<uint64_t> n{0};
    std::atomic<uint64_t> threshold{0};  // probability scaled to 2^64 - 1
    std::atomic<uint64_t> after{0};
    std::atomic<uint64_t> calls{0};      // matching calls since armed
    std::atomic<uint64_t> failed{0};     // failures since armed (kTimes)
    std::atomic<uint64_t> injected{0};   // failures since the System was made
  };
  bool should_fail_slow(FaultSite s, unsigned order);
  Site& site(FaultSite s) { return sites_[static_cast<size_t>(s)]; }
  const Site& site(FaultSite s) const { return sites_[static_cast<size_t>(s)]; }

  Stats* stats_ = nullptr;
  std::atomic<uint64_t> seed_{1};
  std::array<Site, kNrFaultSites> sites_;
};

}  // namespace mmlab
