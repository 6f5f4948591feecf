// The table of `mmlab bench` suites, in the order they run. A suite is a
// BenchSuite record in a file of its own (suite_*.cpp, named
// kBenchSuite_<id>) and one line here.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/suite.h"

#define MMLAB_BENCH_SUITES(X) \
  X(fault)                    \
  X(fork)                     \
  X(data)                     \
  X(gup)                      \
  X(unify)                    \
  X(fast)                     \
  X(ro_pin)                   \
  X(sweep)                    \
  X(scaling)                  \
  X(threads)                  \
  X(collapse)                 \
  X(cow)                      \
  X(corpus)

namespace mmlab::cli {

#define MMLAB_DECLARE_SUITE(id) extern const BenchSuite kBenchSuite_##id;
MMLAB_BENCH_SUITES(MMLAB_DECLARE_SUITE)
#undef MMLAB_DECLARE_SUITE

const std::vector<const BenchSuite*>& bench_suites() {
#define MMLAB_SUITE_ENTRY(id) &kBenchSuite_##id,
  static const std::vector<const BenchSuite*> table = {MMLAB_BENCH_SUITES(MMLAB_SUITE_ENTRY)};
#undef MMLAB_SUITE_ENTRY
  return table;
}

const BenchSuite* find_bench_suite(const std::string& name) {
  for (const BenchSuite* s : bench_suites())
    if (name == s->name) return s;
  return nullptr;
}

std::string bench_suite_names() {
  std::string names;
  for (const BenchSuite* s : bench_suites()) names += (names.empty() ? "" : ", ") + std::string(s->name);
  return names;
}

}  // namespace mmlab::cli
