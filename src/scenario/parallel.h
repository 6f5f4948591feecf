// Running independent tests on several threads (`mmlab run -j`, `mmlab diff
// -j`), each test with a System of its own, and reporting them in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mmlab {

struct ScenarioFileAst;
struct TestCase;
struct Stmt;

// The host memory a test's System may touch, estimated from its statements
// (the file's prelude first): the bytes it writes, and what it maps from
// hugetlb or with MAP_POPULATE (a fault there fills a whole huge page). The
// corpus's tests come out under 64 MiB, or at 1 GiB and more (1 GiB
// hugetlb pages; khugepaged's compound-extreme, 512 THPs written whole).
uint64_t test_touch_estimate(const std::vector<const Stmt*>& stmts);
uint64_t test_touch_estimate(const ScenarioFileAst& f, const TestCase& tc);
// Tests estimated at this or more are large: `mmlab diff` runs them one at a
// time beside the small ones (run_ordered's weight), and their Systems take
// the pool's large store (phys/store_use.h). Two 1 GiB hugetlb CoW tests at
// once held 4 GiB of frames between them, and with the memory of every store
// that served one kept warm, `mmlab diff -j 2` over the corpus peaked at
// 12 GiB.
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
