// What a System's frame store will be used for, as its creator knows it: a
// test that touches a few MiB or one that touches GiBs (1 GiB hugetlb pages,
// khugepaged's compound-extreme collapse). The frame-store pool keeps a large
// test's host memory warm for the next large test, and keeps small tests off
// that store, so that the one process holds one large store, not one per
// thread that ever ran a large test (mmlab diff -j 2 over the corpus held
// 12 GiB that way).
#pragma once

#include <cstdint>

namespace mmlab {

// kAny: no preference (unit tests, bench); the pool's default choice.
enum class StoreUse : uint8_t { kAny, kSmall, kLarge };

// For the Systems created on this thread while it lives (the hint reaches
// FrameStorePool::acquire without passing through SystemConfig).
class ScopedStoreUse {
 public:
  explicit ScopedStoreUse(StoreUse u);
  ~ScopedStoreUse();
  ScopedStoreUse(const ScopedStoreUse&) = delete;
  ScopedStoreUse& operator=(const ScopedStoreUse&) = delete;

 private:
  StoreUse prev_;
};
StoreUse current_store_use();

}  // namespace mmlab
