// Running independent tests on several threads (`mmlab run -j`, `mmlab diff
// -j`), each test with a System of its own, and reporting them in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace mmlab {

// How many tests may run at once: `jobs` (0: the number of CPUs), but no
// more than fit `budget` bytes (0: the host's available memory) when each
// needs `bytes_per_test` (its frame store). At least 1. *why says what cut
// the width, if anything did.
[[nodiscard]] int parallel_width(int jobs, uint64_t bytes_per_test, uint64_t budget, std::string* why);

// Runs run(i) for every i in [0, n) on `width` threads and calls emit(i) on
// the calling thread, in order, as soon as run(0..i) have returned. With
// width 1 everything runs on the calling thread. An exception from run()
// is rethrown here once the threads have stopped. Meanwhile the frame-store
// pool keeps stores_per_run idle stores per thread (a test's Systems).
void run_ordered(size_t n, int width, const std::function<void(size_t)>& run, const std::function<void(size_t)>& emit,
                 unsigned stores_per_run = 1);

}  // namespace mmlab
