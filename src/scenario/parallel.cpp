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

namespace mmlab {

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
                 unsigned stores_per_run) {
  // Each thread's Systems keep their frame stores warm for its next test.
  FrameStorePool& pool = FrameStorePool::instance();
  const unsigned idle_before = pool.max_idle();
  pool.set_max_idle(std::max(idle_before, static_cast<unsigned>(std::max(width, 1)) * stores_per_run));
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
  std::vector<char> done(n, 0);  // guarded by m
  std::exception_ptr error;      // guarded by m
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto worker = [&] {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= n || stop.load()) return;
      std::exception_ptr e;
      try {
        run(i);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> g(m);
      done[i] = 1;
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
  stop = true;
  for (auto& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace mmlab
