#include "sync/cpu.h"

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
std::bitset<NR_CPUS> g_cpu_used GUARDED_BY(g_cpu_mutex);  // bit kSharedCpu is never set

struct ThreadCpu {
  CpuSlot slot;
  ThreadCpu() {
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
    if (!slot.exclusive) return;
    MutexGuard g(&g_cpu_mutex);
    g_cpu_used[slot.id] = false;
  }
};

}  // namespace

const CpuSlot& this_cpu() {
  thread_local ThreadCpu t;
  return t.slot;
}

}  // namespace mmlab
