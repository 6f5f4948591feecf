// The fault injector's decisions (phys/fault_inject.h).
#include "phys/fault_inject.h"

#include <cerrno>
#include <cmath>

namespace mmlab {
namespace {

struct SiteInfo {
  const char* name;
  Event event;
};

constexpr std::array<SiteInfo, kNrFaultSites> kSites = {{
#define X(e, n, ev) {n, Event::ev},
    MMLAB_FAULT_SITES(X)
#undef X
}};

// splitmix64: a well-mixed value for each (seed, site, call number).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Per site: a caller tells which site failed its call, and so which
// outcome that failure can explain.
thread_local uint64_t tl_injected[kNrFaultSites] = {};

}  // namespace

uint64_t FaultInjector::injected_on_this_thread() {
  uint64_t n = 0;
  for (uint64_t c : tl_injected) n += c;
  return n;
}

uint64_t FaultInjector::injected_on_this_thread(FaultSite s) { return tl_injected[static_cast<size_t>(s)]; }

const char* fault_site_name(FaultSite s) { return kSites[static_cast<size_t>(s)].name; }

Event fault_site_event(FaultSite s) { return kSites[static_cast<size_t>(s)].event; }

bool fault_site_from_name(std::string_view name, FaultSite* out) {
  for (size_t i = 0; i < kNrFaultSites; i++) {
    if (name == kSites[i].name) {
      *out = static_cast<FaultSite>(i);
      return true;
    }
  }
  return false;
}

std::string fault_site_names() {
  std::string s;
  for (const SiteInfo& i : kSites) {
    if (!s.empty()) s += ", ";
    s += i.name;
  }
  return s;
}

int FaultInjector::set(FaultSite s, const FaultSpec& spec) {
  using Mode = FaultSpec::Mode;
  if ((spec.mode == Mode::kTimes || spec.mode == Mode::kEvery) && spec.n == 0) return -EINVAL;
  if (spec.mode == Mode::kProbability && !(spec.probability >= 0 && spec.probability <= 1)) return -EINVAL;
  Site& st = site(s);
  st.mode.store(Mode::kOff, std::memory_order_relaxed);
  st.order.store(spec.order, std::memory_order_relaxed);
  st.n.store(spec.n, std::memory_order_relaxed);
  // P == 1 must fail every call: the draw is compared with <=.
  const double scaled = std::ldexp(spec.probability, 64);
  st.threshold.store(spec.probability >= 1 ? UINT64_MAX : static_cast<uint64_t>(scaled), std::memory_order_relaxed);
  st.after.store(spec.after, std::memory_order_relaxed);
  st.calls.store(0, std::memory_order_relaxed);
  st.failed.store(0, std::memory_order_relaxed);
  st.mode.store(spec.mode, std::memory_order_release);
  return 0;
}

void FaultInjector::clear_all() {
  for (size_t i = 0; i < kNrFaultSites; i++) set(static_cast<FaultSite>(i), FaultSpec{});
}

bool FaultInjector::should_fail_slow(FaultSite s, unsigned order) {
  using Mode = FaultSpec::Mode;
  Site& st = site(s);
  const Mode mode = st.mode.load(std::memory_order_acquire);
  const int want = st.order.load(std::memory_order_relaxed);
  if (want >= 0 && static_cast<unsigned>(want) != order) return false;
  const uint64_t call = st.calls.fetch_add(1, std::memory_order_relaxed);
  const uint64_t after = st.after.load(std::memory_order_relaxed);
  if (call < after) return false;
  const uint64_t k = call - after;  // matching calls past the interval, from 0
  bool fail = false;
  switch (mode) {
    case Mode::kOff: return false;
    case Mode::kTimes: {
      // Claim one of the n failures; later callers find them taken.
      const uint64_t n = st.n.load(std::memory_order_relaxed);
      uint64_t done = st.failed.load(std::memory_order_relaxed);
      while (done < n && !st.failed.compare_exchange_strong(done, done + 1, std::memory_order_relaxed)) {
      }
      fail = done < n;
      break;
    }
    case Mode::kEvery: fail = (k + 1) % st.n.load(std::memory_order_relaxed) == 0; break;
    case Mode::kProbability: {
      const uint64_t draw = mix(seed_.load(std::memory_order_relaxed) ^ (static_cast<uint64_t>(s) << 56) ^ mix(call));
      const uint64_t t = st.threshold.load(std::memory_order_relaxed);
      fail = t != 0 && draw <= t;
      break;
    }
  }
  if (fail) {
    tl_injected[static_cast<size_t>(s)]++;
    st.injected.fetch_add(1, std::memory_order_relaxed);
    if (stats_) stats_->count(fault_site_event(s));
  }
  return fail;
}

}  // namespace mmlab
