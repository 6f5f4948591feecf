#include "stats/stats.h"

#include <x86intrin.h>

#include <chrono>

#include <cstring>

namespace mmlab {
namespace {

const char* const kVmstatNames[] = {
#define X(n) #n,
    MMLAB_VMSTAT_ITEMS(X)
#undef X
};
const char* const kMthpNames[] = {
#define X(n) #n,
    MMLAB_MTHP_ITEMS(X)
#undef X
};
const char* const kEventNames[] = {
#define X(e, n, d) n,
    MMLAB_EVENT_ITEMS(X)
#undef X
};
const char* const kEventDescriptions[] = {
#define X(e, n, d) d,
    MMLAB_EVENT_ITEMS(X)
#undef X
};

template <typename E, size_t N>
bool lookup(const char* const (&names)[N], std::string_view name, E* out) {
  for (size_t i = 0; i < N; i++) {
    if (name == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

const char* const kOrderNames[] = {
#define X(n, name, d) name,
    MMLAB_ORDER_ITEMS(X)
#undef X
};

const char* const kOrderDescriptions[] = {
#define X(n, name, d) d,
    MMLAB_ORDER_ITEMS(X)
#undef X
};

int64_t load(const int64_t& v) { return std::atomic_ref<int64_t>(const_cast<int64_t&>(v)).load(std::memory_order_relaxed); }

}  // namespace

const char* vmstat_name(VmStat s) { return kVmstatNames[static_cast<size_t>(s)]; }
const char* mthp_stat_name(MthpStat s) { return kMthpNames[static_cast<size_t>(s)]; }
const char* event_name(Event e) { return kEventNames[static_cast<size_t>(e)]; }
const char* event_description(Event e) { return kEventDescriptions[static_cast<size_t>(e)]; }
const char* order_stat_name(OrderStat c) { return kOrderNames[static_cast<size_t>(c)]; }
const char* order_stat_description(OrderStat c) { return kOrderDescriptions[static_cast<size_t>(c)]; }
bool vmstat_from_name(std::string_view n, VmStat* out) { return lookup(kVmstatNames, n, out); }
bool mthp_stat_from_name(std::string_view n, MthpStat* out) { return lookup(kMthpNames, n, out); }
bool event_from_name(std::string_view n, Event* out) { return lookup(kEventNames, n, out); }

bool order_stat_from_name(std::string_view n, OrderStat* out, unsigned* order) {
  constexpr std::string_view kOrder = ".order";
  auto dot = n.rfind(kOrder);
  if (dot == std::string_view::npos) return false;
  std::string_view digits = n.substr(dot + kOrder.size());
  if (digits.size() != 1 || digits[0] < '0' || digits[0] > '9') return false;
  if (!lookup(kOrderNames, n.substr(0, dot), out)) return false;
  *order = static_cast<unsigned>(digits[0] - '0');
  return *order < kMthpOrders;
}

std::vector<std::string> order_stat_names() {
  std::vector<std::string> v;
  for (const char* item : kOrderNames)
    for (unsigned o = 0; o < kMthpOrders; o++) v.push_back(std::string(item) + ".order" + std::to_string(o));
  return v;
}

Stats::~Stats() {
  for (auto& p : cpus_) delete p.load(std::memory_order_relaxed);
}

Stats::CpuBlock& Stats::first_count() {
  std::atomic<CpuBlock*>& slot = cpus_[this_cpu().id];
  auto* fresh = new CpuBlock();
  CpuBlock* seen = nullptr;
  if (slot.compare_exchange_strong(seen, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) return *fresh;
  delete fresh;  // another thread on this CPU made it first
  return *seen;
}

int Stats::tally_slot(std::string_view name) {
  Event e;
  if (event_from_name(name, &e)) return static_cast<int>(idx(e));
  VmStat v;
  if (vmstat_from_name(name, &v)) return static_cast<int>(kTallyVmStat + idx(v));
  OrderStat c;
  unsigned order;
  if (order_stat_from_name(name, &c, &order) && order < kMthpOrders)
    return static_cast<int>(kTallyOrder + order * idx(OrderStat::kNr) + idx(c));
  return -1;
}

uint64_t Stats::read(Event e) const {
  int64_t sum = 0;
  for_each_block([&](const CpuBlock& c) { sum += load(c.events[idx(e)]); });
  return static_cast<uint64_t>(sum);
}

int64_t Stats::read(VmStat s) const {
  int64_t sum = 0;
  for_each_block([&](const CpuBlock& c) { sum += load(c.vmstat[idx(s)]); });
  return sum;
}

int64_t Stats::read_mthp(unsigned order, MthpStat s) const {
  if (order >= kMthpOrders) return 0;
  int64_t sum = 0;
  for_each_block([&](const CpuBlock& c) { sum += load(c.mthp[order][idx(s)]); });
  return sum;
}

uint64_t Stats::read_order(unsigned order, OrderStat s) const {
  if (order >= kMthpOrders) return 0;
  int64_t sum = 0;
  for_each_block([&](const CpuBlock& c) { sum += load(c.per_order[order][idx(s)]); });
  return static_cast<uint64_t>(sum);
}

uint64_t Stats::read_data_ns(DataTime t) const {
  int64_t sum = 0;
  for_each_block([&](const CpuBlock& c) { sum += load(c.data_ticks[idx(t)]); });
  return static_cast<uint64_t>(static_cast<double>(sum) * tsc_ns_per_tick());
}

void Stats::reset_data_time() {
  for_each_block([](CpuBlock& c) {
    for (auto& v : c.data_ticks) std::atomic_ref<int64_t>(v).store(0, std::memory_order_relaxed);
  });
}

uint64_t tsc_now() { return __rdtsc(); }

double tsc_ns_per_tick() {
  static const double rate = [] {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = __rdtsc();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20)) {
    }
    const uint64_t c1 = __rdtsc();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return c1 > c0 ? ns / static_cast<double>(c1 - c0) : 1.0;
  }();
  return rate;
}

void Stats::reset_events() {
  for_each_block([](CpuBlock& c) {
    for (auto& v : c.events) std::atomic_ref<int64_t>(v).store(0, std::memory_order_relaxed);
    for (auto& per_order : c.per_order)
      for (auto& v : per_order) std::atomic_ref<int64_t>(v).store(0, std::memory_order_relaxed);
  });
}

}  // namespace mmlab
