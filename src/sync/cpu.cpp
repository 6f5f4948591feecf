#include "sync/cpu.h"

#include <atomic>
#include <bitset>
#include "sync/mutex.h"

namespace mmlab {
namespace {

// Ids 0..NR_CPUS-2 are handed out exclusively, lowest free first. The last id
// is never exclusive: every thread beyond NR_CPUS-1 live ones shares it, so a
// thread told `exclusive` never has its per-CPU data updated by another thread
// (handing overflow threads an exclusively owned id, or re-handing an id an
// overflow thread still uses, would let plain read-modify-writes race).
constexpr int kSharedCpu = NR_CPUS - 1;

Mutex g_cpu_mutex;
std::atomic<uint64_t> g_cpu_released[NR_CPUS];
std::bitset<NR_CPUS> g_cpu_used GUARDED_BY(g_cpu_mutex);  // bit kSharedCpu is never set

// Takes the slot when the thread first asks (into tls_slot) and gives it
// back when the thread exits.
struct ThreadCpu {
  ThreadCpu() {
    CpuSlot& slot = cpu_detail::tls_slot;
    MutexGuard g(&g_cpu_mutex);
    for (int i = 0; i < kSharedCpu; i++) {
      if (!g_cpu_used[i]) {
        g_cpu_used[i] = true;
        slot = {i, true};
        return;
      }
    }
    slot = {kSharedCpu, false};
  }
  ~ThreadCpu() {
    CpuSlot& slot = cpu_detail::tls_slot;
    if (!slot.exclusive) return;
    MutexGuard g(&g_cpu_mutex);
    g_cpu_used[slot.id] = false;
    g_cpu_released[slot.id].fetch_add(1, std::memory_order_release);
    slot = {kSharedCpu, false};  // a later thread-exit destructor's updates go atomic
  }
};

}  // namespace

namespace cpu_detail {

thread_local constinit CpuSlot tls_slot{-1, false};

const CpuSlot& this_cpu_first() {
  thread_local ThreadCpu t;
  return tls_slot;
}

}  // namespace cpu_detail

int migrate_this_thread(int id) {
  const CpuSlot& now = this_cpu();
  if (id < 0 || id >= kSharedCpu || id == now.id || !now.exclusive) return now.id;
  MutexGuard g(&g_cpu_mutex);
  if (g_cpu_used[id]) return now.id;
  g_cpu_used[now.id] = false;
  g_cpu_used[id] = true;
  cpu_detail::tls_slot = {id, true};
  return id;
}

uint64_t cpu_release_count(int id) { return g_cpu_released[id].load(std::memory_order_acquire); }

}  // namespace mmlab
