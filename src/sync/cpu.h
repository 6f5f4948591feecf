// Simulated CPUs. Each thread that touches the model is given a CPU id of its
// own while it lives (the lowest free one), so per-CPU data (page lists,
// event counters) is written by one thread at a time, as this_cpu_* data is
// in the kernel with preemption disabled. Beyond NR_CPUS live threads, ids
// are shared and per-CPU updates fall back to atomic read-modify-writes.
#pragma once

#include <cstdint>

namespace mmlab {

inline constexpr int NR_CPUS = 64;

struct CpuSlot {
  int id;
  bool exclusive;  // no other live thread has this id
};

namespace cpu_detail {
// This thread's slot once it has one (id -1 before). Constant-initialised
// and trivially destructible, so reading it is one thread-pointer-relative
// load: the statistics and the page lists ask for it on every fault.
extern thread_local constinit CpuSlot tls_slot;
const CpuSlot& this_cpu_first();  // hands the thread its slot
}  // namespace cpu_detail

inline const CpuSlot& this_cpu() {
  if (cpu_detail::tls_slot.id >= 0) [[likely]]
    return cpu_detail::tls_slot;
  return cpu_detail::this_cpu_first();
}
// How many threads have given up CPU id `id` (exited) so far: a CPU whose
// count moved since it last ran an mm has gone idle (the TLB model treats it
// as lazy, as the kernel's idle task is).
uint64_t cpu_release_count(int id);
// Moves the calling thread to simulated CPU `id` if no other live thread
// holds it (as a replay of a recording runs each record on the CPU it was
// recorded on); the CPU it left is not released: like a real CPU it keeps
// the address space it last ran until something else runs there. Returns
// the id the thread is on afterwards.
int migrate_this_thread(int id);
inline int smp_processor_id() { return this_cpu().id; }

}  // namespace mmlab
