// The run-time lock-order checker (debug builds only). Models the part of the
// kernel's lockdep the model needs: per-thread held-lock stacks, a global
// table of observed (class, subclass) -> (class, subclass) orderings, the
// static order of sync/lock_order.h, and the self-deadlock check.
//
// Hot path: one thread_local array walk and, for an ordering already seen, one
// relaxed atomic load per held lock; the mutex is taken only the first time an
// ordering is recorded. Nothing allocates.
#include "sync/lockdep.h"

#if defined(MMLAB_DEBUG_VM)

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace mmlab {
namespace {

constexpr int kMaxSubclass = 4;  // subclasses 0..3
constexpr int kNrClasses = static_cast<int>(LockClass::kNrClasses);
constexpr int kNrKeys = kNrClasses * kMaxSubclass;
// __collapse_huge_page_isolate holds every folio of a PMD range locked (up
// to 512 folio locks) until the copy is done, which the kernel's lockdep
// never sees (PG_locked is a bit lock) but this one tracks.
constexpr int kMaxHeld = 512 + 48;

const char* class_name(LockClass c) {
  switch (c) {
    case LockClass::kGeneric: return "generic";
    case LockClass::kMmapLock: return "mmap_lock";
    case LockClass::kVmaLock: return "vma_lock";
    case LockClass::kHugetlbFaultMutex: return "hugetlb_fault_mutex";
    case LockClass::kHugetlbVmaLock: return "hugetlb_vma_lock";
    case LockClass::kFolioLock: return "folio_lock";
    case LockClass::kImmapLock: return "i_mmap_rwsem";
    case LockClass::kRmapLock: return "rmap_lock";
    case LockClass::kPageTableLock: return "page_table_lock";
    case LockClass::kPmdLock: return "pmd_lock";
    case LockClass::kPteLock: return "pte_lock";
    case LockClass::kPageCacheLock: return "i_pages_lock";
    case LockClass::kSplitQueueLock: return "split_queue_lock";
    case LockClass::kDeferredFreeLock: return "deferred_free_lock";
    case LockClass::kZoneLock: return "zone_lock";
    case LockClass::kPcpLock: return "pcp_lock";
    case LockClass::kTlbLock: return "tlb_lock";
    case LockClass::kNrClasses: break;
  }
  return "?";
}

struct HeldLock {
  const void* lock;
  LockClass cls;
  uint8_t subclass;
  LockdepTry how;
};

// The calling thread's held locks, oldest first. Thread-local: no lock.
struct HeldStack {
  std::array<HeldLock, kMaxHeld> e;
  int n = 0;
};
thread_local HeldStack t_held;

// Order edges: g_edges[a][b] is set once a lock of key b was taken (blocking)
// while one of key a was held. Set only with g_edge_mutex held, after checking
// the reverse edge under it; read without it (an edge, once set, stays set).
// A std::mutex: a Mutex would call back into the checker it protects.
std::mutex g_edge_mutex;
std::array<std::array<std::atomic<bool>, kNrKeys>, kNrKeys> g_edges{};

int key(LockClass c, int subclass) { return static_cast<int>(c) * kMaxSubclass + subclass; }

void dump_held(const HeldStack& h) {
  std::fprintf(stderr, "lockdep: locks held by this thread (oldest first):\n");
  for (int i = 0; i < h.n; i++)
    std::fprintf(stderr, "  #%d %s/%d %p%s\n", i, class_name(h.e[i].cls), h.e[i].subclass,
                 h.e[i].lock, h.e[i].how == LockdepTry::kTry ? " (trylock)" : "");
}

[[noreturn]] void report(const HeldStack& h, const char* what, const HeldLock& held, LockClass cls,
                         int subclass, const void* lock) {
  std::fprintf(stderr, "lockdep: %s: acquiring %s/%d %p while holding %s/%d %p\n", what,
               class_name(cls), subclass, lock, class_name(held.cls), held.subclass, held.lock);
  dump_held(h);
  std::fflush(stderr);
  std::abort();
}

// Records held -> new; aborts if new -> held was ever recorded.
void add_edge(const HeldStack& h, const HeldLock& held, LockClass cls, int subclass, const void* lock) {
  const int a = key(held.cls, held.subclass), b = key(cls, subclass);
  if (g_edges[a][b].load(std::memory_order_acquire)) return;
  bool inverted;
  {
    std::lock_guard<std::mutex> g(g_edge_mutex);
    inverted = g_edges[b][a].load(std::memory_order_relaxed);
    if (!inverted) g_edges[a][b].store(true, std::memory_order_release);
  }
  if (inverted)
    report(h, "lock order inversion (the reverse order was seen before)", held, cls, subclass, lock);
}

}  // namespace

void lockdep_acquire(const void* lock, LockClass cls, int subclass, LockdepTry t) {
  HeldStack& h = t_held;
  if (static_cast<int>(cls) >= kNrClasses || subclass < 0 || subclass >= kMaxSubclass) {
    std::fprintf(stderr, "lockdep: bad lock class %d / subclass %d for %p\n", static_cast<int>(cls),
                 subclass, lock);
    std::abort();
  }
  if (h.n == kMaxHeld) {
    std::fprintf(stderr, "lockdep: more than %d locks held by one thread\n", kMaxHeld);
    dump_held(h);
    std::abort();
  }
  if (t == LockdepTry::kBlocking) {
    for (int i = 0; i < h.n; i++) {
      const HeldLock& held = h.e[i];
      if (held.lock == lock) report(h, "recursive locking (self-deadlock)", held, cls, subclass, lock);
      if (cls == LockClass::kGeneric || held.cls == LockClass::kGeneric) continue;
      if (held.cls == cls && held.subclass == subclass)
        report(h, "two locks of one class and subclass (missing nesting annotation?)", held, cls,
               subclass, lock);
      if (cls < held.cls) report(h, "lock order inversion (see sync/lock_order.h)", held, cls, subclass, lock);
      add_edge(h, held, cls, subclass, lock);
    }
  }
  h.e[h.n++] = HeldLock{lock, cls, static_cast<uint8_t>(subclass), t};
}

void lockdep_release(const void* lock) {
  HeldStack& h = t_held;
  for (int i = h.n - 1; i >= 0; i--) {
    if (h.e[i].lock != lock) continue;
    for (int j = i; j + 1 < h.n; j++) h.e[j] = h.e[j + 1];
    h.n--;
    return;
  }
  std::fprintf(stderr, "lockdep: releasing %p, which this thread does not hold\n", lock);
  dump_held(h);
  std::fflush(stderr);
  std::abort();
}

void lockdep_assert_none_held_from(LockClass cls) {
  const HeldStack& h = t_held;
  for (int i = 0; i < h.n; i++) {
    const HeldLock& held = h.e[i];
    // From kGeneric means "no lock at all"; otherwise generic locks are exempt.
    bool bad = cls == LockClass::kGeneric || (held.cls != LockClass::kGeneric && held.cls >= cls);
    if (!bad) continue;
    std::fprintf(stderr, "lockdep: holding %s/%d %p where no lock of class %s or later may be held\n",
                 class_name(held.cls), held.subclass, held.lock, class_name(cls));
    dump_held(h);
    std::fflush(stderr);
    std::abort();
  }
}

bool lockdep_is_held(const void* lock) {
  const HeldStack& h = t_held;
  for (int i = 0; i < h.n; i++)
    if (h.e[i].lock == lock) return true;
  return false;
}

void lockdep_assert_held(const void* lock) {
  if (lockdep_is_held(lock)) return;
  const HeldStack& h = t_held;
  std::fprintf(stderr, "lockdep: %p is not held by this thread, which must hold it\n", lock);
  dump_held(h);
  std::fflush(stderr);
  std::abort();
}

}  // namespace mmlab

#endif  // MMLAB_DEBUG_VM
