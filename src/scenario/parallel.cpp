// Tests in parallel, reported in order (see parallel.h).
#include "scenario/parallel.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "phys/frame_store.h"
#include "scenario/ast.h"

namespace mmlab {

uint64_t test_touch_estimate(const std::vector<const Stmt*>& stmts) {
  uint64_t bytes = 0;
  for (const Stmt* st : stmts) {
    if (const auto* w = st->as<stmt::Write>()) bytes += w->size;
    if (const auto* m = st->as<stmt::Mmap>(); m && (m->hugetlb_shift || (m->map_flags & MAP_POPULATE))) bytes += m->size;
    if (const auto* x = st->as<stmt::File>(); x && x->hugetlb_shift) bytes += x->size;
  }
  return bytes;
}

uint64_t test_touch_estimate(const ScenarioFileAst& f, const TestCase& tc) {
  std::vector<const Stmt*> stmts;
  for (const Stmt& st : f.prelude) stmts.push_back(&st);
  for (const Stmt& st : tc.stmts) stmts.push_back(&st);
  return test_touch_estimate(stmts);
}

int parallel_width(int jobs, uint64_t bytes_per_test, uint64_t budget, std::string* why) {
  if (jobs <= 0) jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  if (!budget) budget = host_available_memory();
  if (why) why->clear();
  if (!budget || !bytes_per_test) return jobs;
  const uint64_t fit = std::max<uint64_t>(1, budget / bytes_per_test);
  if (fit >= static_cast<uint64_t>(jobs)) return jobs;
  if (why)
    *why = fmt::format("{} test(s) at a time: each may use {} MiB of frame store, {} MiB available", fit,
                       bytes_per_test >> 20, budget >> 20);
  return static_cast<int>(fit);
}

void run_ordered(size_t n, int width, const std::function<void(size_t)>& run, const std::function<void(size_t)>& emit,
                 unsigned stores_per_run, const std::function<uint64_t(size_t)>& weight, uint64_t budget) {
  // Each thread's Systems keep their frame stores warm for its next test.
  FrameStorePool& pool = FrameStorePool::instance();
  const unsigned idle_before = pool.max_idle();
  // One more: the store large tests keep to themselves (phys/store_use.h).
  pool.set_max_idle(std::max(idle_before, static_cast<unsigned>(std::max(width, 1)) * stores_per_run + 1));
  struct Restore {
    FrameStorePool& pool;
    unsigned idle;
    ~Restore() { pool.set_max_idle(idle); }
  } restore{pool, idle_before};
  if (width <= 1 || n <= 1) {
    for (size_t i = 0; i < n; i++) {
      run(i);
      emit(i);
    }
    return;
  }
  // std::mutex for std::condition_variable; the runner's own, outside the model.
  std::mutex m;
  std::condition_variable cv;
  std::vector<char> done(n, 0);     // guarded by m
  std::vector<char> claimed(n, 0);  // guarded by m
  size_t first_unclaimed = 0;       // guarded by m
  uint64_t running_weight = 0;      // guarded by m
  unsigned running = 0;             // guarded by m
  std::exception_ptr error;         // guarded by m
  std::atomic<bool> stop{false};
  auto weight_of = [&](size_t i) -> uint64_t { return weight ? weight(i) : 0; };
  // The first unclaimed test that fits beside the running ones; n when every
  // test is claimed, SIZE_MAX when none fits yet. Under m.
  auto pick = [&]() -> size_t {
    while (first_unclaimed < n && claimed[first_unclaimed]) first_unclaimed++;
    if (first_unclaimed == n) return n;
    for (size_t i = first_unclaimed; i < n; i++)
      if (!claimed[i] && (running == 0 || running_weight + weight_of(i) <= budget)) return i;
    return SIZE_MAX;
  };
  auto worker = [&] {
    for (;;) {
      size_t i;
      uint64_t w;
      {
        std::unique_lock<std::mutex> g(m);
        cv.wait(g, [&] { return stop.load() || pick() != SIZE_MAX; });
        i = pick();
        if (i >= n || stop.load()) return;
        claimed[i] = 1;
        w = weight_of(i);
        running_weight += w;
        running++;
      }
      std::exception_ptr e;
      try {
        run(i);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> g(m);
      done[i] = 1;
      running_weight -= w;
      running--;
      if (e && !error) error = e;
      if (e) stop = true;
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  const size_t nthreads = std::min(n, static_cast<size_t>(width));
  for (size_t t = 0; t < nthreads; t++) threads.emplace_back(worker);
  std::exception_ptr failed;
  for (size_t i = 0; i < n; i++) {
    {
      std::unique_lock<std::mutex> g(m);
      cv.wait(g, [&] { return done[i] || error; });
      if (error) {
        failed = error;
        break;
      }
    }
    emit(i);
  }
  {
    std::lock_guard<std::mutex> g(m);
    stop = true;
    cv.notify_all();
  }
  for (auto& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace mmlab
