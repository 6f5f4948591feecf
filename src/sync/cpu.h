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

const CpuSlot& this_cpu();
// How many threads have given up CPU id `id` (exited) so far: a CPU whose
// count moved since it last ran an mm has gone idle (the TLB model treats it
// as lazy, as the kernel's idle task is).
uint64_t cpu_release_count(int id);
inline int smp_processor_id() { return this_cpu().id; }

}  // namespace mmlab
