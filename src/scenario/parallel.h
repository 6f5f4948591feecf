// Running independent tests on several threads (`mmlab run -j`, `mmlab diff
// -j`), each test with a System of its own, and reporting them in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace mmlab {

struct ScenarioFileAst;
struct TestCase;

// The bytes a test maps and creates: the sum of its (and its file's
// prelude's) `mmap` and `file` SIZEs. A proxy for the host memory its
// System may touch: the corpus's tests map under 100 MiB or 1 GiB and more
// (1 GiB hugetlb pages, the 2 GiB mremap tests).
uint64_t test_mapped_bytes(const ScenarioFileAst& f, const TestCase& tc);
// Tests that map at least this much run one at a time beside the others
// (run_ordered's weight): two 1 GiB hugetlb CoW tests at once held 4 GiB
// of frames between them, and with the memory of the stores that served
// them kept warm, `mmlab diff -j 2` over the corpus peaked at 12 GiB.
inline constexpr uint64_t kLargeTestBytes = 256ull << 20;

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
//
// weight (optional): the host memory test i may touch; tests run together
// only while their weights add up to at most `budget` (a test runs alone
// whatever its weight). A thread takes the first test in order that fits,
// so the others keep running while a heavy one waits for room.
void run_ordered(size_t n, int width, const std::function<void(size_t)>& run, const std::function<void(size_t)>& emit,
                 unsigned stores_per_run = 1, const std::function<uint64_t(size_t)>& weight = {}, uint64_t budget = 0);

}  // namespace mmlab
