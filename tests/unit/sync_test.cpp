// Tests of the synchronisation layer: SpinLock, RwSemaphore (including the
// kernel's writer-fairness rule), simulated CPU ids, the lockdep checker and
// errno/signal names. Every wait is bounded; assertions use ordering facts
// only, never timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mmlab/types.h"
#include "sync/cpu.h"
#include "sync/lock_order.h"
#include "sync/lockdep.h"
#include "sync/rwsem.h"
#include "sync/spinlock.h"

namespace mmlab {
namespace {

// Waits until pred() holds, giving up after at least a minute (a hang guard,
// not a timing assertion). Returns pred()'s final value.
template <typename Pred>
bool wait_until(Pred pred) {
  for (long i = 0; i < 1000; i++) {
    if (pred()) return true;
    std::this_thread::yield();
  }
  for (long i = 0; i < 600000; i++) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return pred();
}

// Trylock probes: whether the lock could be taken now (it is dropped again).
bool can_lock(SpinLock& l) {
  if (!l.try_lock()) return false;
  l.unlock();
  return true;
}
bool can_read_lock(RwSemaphore& s) {
  if (!s.down_read_trylock()) return false;
  s.up_read();
  return true;
}
bool can_write_lock(RwSemaphore& s) {
  if (!s.down_write_trylock()) return false;
  s.up_write();
  return true;
}

// ---------------------------------------------------------------------------
// SpinLock

struct SpinCounter {
  SpinLock lock{};
  uint64_t value GUARDED_BY(lock) = 0;  // protected by lock
};

TEST(SyncTest, SpinLockMutualExclusion) {
  constexpr int kThreads = 4;
  constexpr int kIters = 20000;
  SpinCounter c;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < kIters; i++) {
        SpinGuard g(&c.lock);
        uint64_t v = c.value;  // a split read-modify-write: lost updates without the lock
        c.value = v + 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  SpinGuard g(&c.lock);
  EXPECT_EQ(c.value, uint64_t{kThreads} * kIters);
}

TEST(SyncTest, SpinLockZeroBytesAreUnlocked) {
  alignas(SpinLock) unsigned char raw[sizeof(SpinLock)];
  std::memset(raw, 0, sizeof(raw));
  SpinLock* l = reinterpret_cast<SpinLock*>(raw);
  EXPECT_FALSE(l->is_locked());
  l->lock();
  EXPECT_TRUE(l->is_locked());
  l->unlock();
  EXPECT_FALSE(l->is_locked());
}

TEST(SyncTest, SpinLockTryLock) {
  SpinLock l{};
  if (!l.try_lock()) {
    ADD_FAILURE() << "try_lock failed on a free lock";
    return;
  }
  EXPECT_TRUE(l.is_locked());
  l.assert_held();
  bool other_got = true;
  std::thread([&] { other_got = can_lock(l); }).join();
  EXPECT_FALSE(other_got);
  l.unlock();
  std::thread([&] { other_got = can_lock(l); }).join();
  EXPECT_TRUE(other_got);
  EXPECT_FALSE(l.is_locked());
}

TEST(SyncTest, SpinGuardEarlyUnlock) {
  SpinLock l{};
  {
    SpinGuard g(&l);
    EXPECT_TRUE(l.is_locked());
    g.unlock();
    EXPECT_FALSE(l.is_locked());
  }
  EXPECT_FALSE(l.is_locked());
}

// ---------------------------------------------------------------------------
// RwSemaphore

TEST(SyncTest, RwSemReadersShare) {
  constexpr int kReaders = 4;
  RwSemaphore sem;
  std::atomic<int> all_in{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kReaders; t++) {
    threads.emplace_back([&] {
      ReadGuard g(&sem);
      // Every reader holds the lock at once: nobody leaves before all are in.
      if (wait_until([&] { return sem.nr_readers() == kReaders; })) all_in++;
      wait_until([&] { return release.load(); });
    });
  }
  EXPECT_TRUE(wait_until([&] { return all_in.load() == kReaders; }));
  EXPECT_EQ(sem.nr_readers(), kReaders);
  EXPECT_FALSE(sem.is_write_locked());
  EXPECT_FALSE(can_write_lock(sem));
  if (sem.down_read_trylock()) {  // no writer waits: one more reader gets in
    EXPECT_EQ(sem.nr_readers(), kReaders + 1);
    sem.up_read();
  } else {
    ADD_FAILURE() << "down_read_trylock failed with only readers in";
  }
  release = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(sem.nr_readers(), 0);
}

TEST(SyncTest, RwSemWriterExcludesReaders) {
  RwSemaphore sem;
  std::atomic<bool> tried{false}, trylock_got{false}, got{false}, saw_writer{false};
  sem.down_write();
  std::thread reader([&] {
    if (sem.down_read_trylock()) {
      trylock_got = true;
      sem.up_read();
    }
    tried = true;
    sem.down_read();
    saw_writer = sem.is_write_locked();
    got = true;
    sem.up_read();
  });
  EXPECT_TRUE(wait_until([&] { return tried.load(); }));
  EXPECT_FALSE(trylock_got.load());
  // The reader cannot get in while the write lock is held, however long it
  // has been trying.
  for (int i = 0; i < 100; i++) std::this_thread::yield();
  EXPECT_FALSE(got.load());
  EXPECT_TRUE(sem.is_write_locked());
  sem.up_write();
  reader.join();
  EXPECT_TRUE(got.load());
  EXPECT_FALSE(saw_writer.load());
}

struct RwCounter {
  RwSemaphore sem;
  uint64_t value GUARDED_BY(sem) = 0;  // protected by sem (written under write)
};

TEST(SyncTest, RwSemWritersExcludeEachOther) {
  constexpr int kThreads = 3;
  constexpr int kIters = 3000;
  RwCounter c;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < kIters; i++) {
        WriteGuard g(&c.sem);
        uint64_t v = c.value;
        c.value = v + 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  ReadGuard g(&c.sem);
  EXPECT_EQ(c.value, uint64_t{kThreads} * kIters);
}

TEST(SyncTest, RwSemWriterWaitsForReadersAndBlocksNewOnes) {
  RwSemaphore sem;
  std::atomic<bool> writer_done{false};
  sem.down_read();
  std::thread writer([&] {
    sem.down_write();
    writer_done = true;
    sem.up_write();
  });
  EXPECT_TRUE(wait_until([&] { return sem.nr_waiting_writers() == 1; }));
  EXPECT_FALSE(writer_done.load());  // a reader still holds the lock
  // A writer waits: a new reader may not overtake it, not even by trylock.
  std::atomic<bool> other_reader_got{true};
  std::thread([&] { other_reader_got = can_read_lock(sem); }).join();
  EXPECT_FALSE(other_reader_got.load());
  EXPECT_FALSE(writer_done.load());
  sem.up_read();
  writer.join();
  EXPECT_TRUE(writer_done.load());
  EXPECT_EQ(sem.nr_waiting_writers(), 0);
}

// The fairness rule: under a continuous stream of readers on several threads,
// a writer in down_write() gets the lock before any reader that queued after
// it. Checked with ordering facts only:
//  - the one writer counts in nr_waiting_writers() from taking its ticket to
//    being granted, and a ticket taken after it is granted after it;
//  - the writer sets writer_ran while it holds the lock, so every read
//    acquisition granted after the writer sees writer_ran, and every one
//    granted before it (it holds the read lock, so the writer cannot be in)
//    does not.
// So once a reader thread has seen nr_waiting_writers() > 0, every later read
// acquisition of that thread must see writer_ran ("overtakes" must be 0); and
// a read acquisition granted while the writer waits sees the writer waiting
// while it holds the lock, so each reader thread has at most one acquisition
// in that window ("in_window" <= 1): the writer waits for at most one
// acquisition per reader thread.
TEST(SyncTest, RwSemWriterNotStarvedByReaders) {
  constexpr int kReaders = 3;
  constexpr long kWarmup = 2000;        // reader acquisitions before the writer starts
  constexpr long kHangGuard = 5000000;  // per reader, after the writer started
  struct Result {
    long acquisitions = 0;
    long overtakes = 0;  // acquisitions started after seeing the writer wait, granted before it
    long in_window = 0;  // acquisitions granted while the writer waited
    bool hang_guard_hit = false;
  };
  RwSemaphore sem;
  std::atomic<long> total{0};
  std::atomic<bool> writer_started{false}, writer_ran{false};
  std::array<Result, kReaders> results{};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; t++) {
    readers.emplace_back([&, t] {
      Result& r = results[t];
      bool seen_waiting = false;
      long after_start = 0;
      while (!writer_ran.load()) {
        if (writer_started.load() && ++after_start > kHangGuard) {
          r.hang_guard_hit = true;
          break;
        }
        if (sem.nr_waiting_writers() > 0) seen_waiting = true;
        sem.down_read();
        const bool ran = writer_ran.load();
        if (!ran && seen_waiting) r.overtakes++;
        if (sem.nr_waiting_writers() > 0) {
          if (!ran) r.in_window++;
          seen_waiting = true;
        }
        r.acquisitions++;
        total++;
        sem.up_read();
      }
    });
  }
  // Let the readers stream for a while; they never stop before the writer ran.
  EXPECT_TRUE(wait_until([&] { return total.load() >= kWarmup; }));
  std::thread writer([&] {
    writer_started = true;
    sem.down_write();
    writer_ran = true;
    sem.up_write();
  });
  writer.join();
  for (auto& th : readers) th.join();

  EXPECT_TRUE(writer_ran.load());
  long in_window = 0;
  for (int t = 0; t < kReaders; t++) {
    SCOPED_TRACE("reader " + std::to_string(t));
    EXPECT_FALSE(results[t].hang_guard_hit);
    EXPECT_EQ(results[t].overtakes, 0);
    EXPECT_LE(results[t].in_window, 1);
    in_window += results[t].in_window;
  }
  EXPECT_LE(in_window, kReaders);
  EXPECT_EQ(sem.nr_waiting_writers(), 0);
  EXPECT_EQ(sem.nr_readers(), 0);
  EXPECT_FALSE(sem.is_write_locked());
}

TEST(SyncTest, RwSemDowngradeWrite) {
  RwSemaphore sem;
  sem.down_write();
  sem.assert_write_held();
  std::atomic<bool> reader_in{false}, reader_release{false}, writer_done{false};
  // A reader queues behind the write lock, then a writer behind the reader.
  std::thread reader([&] {
    sem.down_read();
    reader_in = true;
    wait_until([&] { return reader_release.load(); });
    sem.up_read();
  });
  // Whether the reader queued before the downgrade or arrives after it, it
  // shares the lock with the downgraded holder.
  sem.downgrade_write();
  sem.assert_held();
  EXPECT_FALSE(sem.is_write_locked());
  EXPECT_TRUE(wait_until([&] { return reader_in.load(); }));
  EXPECT_EQ(sem.nr_readers(), 2);
  // A writer arriving now waits for both readers.
  std::thread writer([&] {
    sem.down_write();
    writer_done = true;
    sem.up_write();
  });
  EXPECT_TRUE(wait_until([&] { return sem.nr_waiting_writers() == 1; }));
  EXPECT_FALSE(can_write_lock(sem));
  EXPECT_FALSE(writer_done.load());
  sem.up_read();
  EXPECT_FALSE(writer_done.load());  // the reader still holds it
  reader_release = true;
  reader.join();
  writer.join();
  EXPECT_TRUE(writer_done.load());
  EXPECT_EQ(sem.nr_readers(), 0);
  EXPECT_FALSE(sem.is_write_locked());
}

TEST(SyncTest, RwSemDowngradeKeepsWritersOut) {
  RwSemaphore sem;
  sem.down_write();
  sem.downgrade_write();
  EXPECT_EQ(sem.nr_readers(), 1);
  EXPECT_FALSE(sem.is_write_locked());
  EXPECT_FALSE(can_write_lock(sem));
  EXPECT_TRUE(can_read_lock(sem));
  sem.up_read();
  EXPECT_EQ(sem.nr_readers(), 0);
  EXPECT_TRUE(can_write_lock(sem));
}

TEST(SyncTest, RwSemTrylock) {
  RwSemaphore sem;
  if (sem.down_write_trylock()) {
    EXPECT_TRUE(sem.is_write_locked());
    EXPECT_FALSE(can_write_lock(sem));
    EXPECT_FALSE(can_read_lock(sem));
    sem.up_write();
  } else {
    ADD_FAILURE() << "down_write_trylock failed on a free semaphore";
  }
  if (sem.down_read_trylock()) {
    EXPECT_FALSE(can_write_lock(sem));
    EXPECT_EQ(sem.nr_readers(), 1);
    EXPECT_TRUE(can_read_lock(sem));  // readers share
    sem.up_read();
  } else {
    ADD_FAILURE() << "down_read_trylock failed on a free semaphore";
  }
  EXPECT_TRUE(can_write_lock(sem));
  EXPECT_EQ(sem.nr_readers(), 0);
  EXPECT_FALSE(sem.is_write_locked());
}

// ---------------------------------------------------------------------------
// Simulated CPUs

// Starts n threads that are all alive at once and returns their CPU ids.
std::vector<int> live_cpu_ids(int n, bool* all_exclusive) {
  std::vector<int> ids(n, -1);
  std::vector<char> excl(n, 0);
  std::latch all_live(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; i++) {
    threads.emplace_back([&, i] {
      ids[i] = this_cpu().id;
      excl[i] = this_cpu().exclusive;
      EXPECT_EQ(smp_processor_id(), ids[i]);
      all_live.arrive_and_wait();  // nobody exits (and frees its id) before all have one
    });
  }
  for (auto& th : threads) th.join();
  *all_exclusive = std::all_of(excl.begin(), excl.end(), [](char c) { return c != 0; });
  return ids;
}

TEST(SyncTest, ThisCpuDistinctAndReused) {
  constexpr int kThreads = 8;
  const int main_id = this_cpu().id;
  EXPECT_TRUE(this_cpu().exclusive);
  EXPECT_EQ(&this_cpu(), &this_cpu());

  bool excl1 = false, excl2 = false;
  std::vector<int> first = live_cpu_ids(kThreads, &excl1);
  std::set<int> s1(first.begin(), first.end());
  EXPECT_EQ(s1.size(), size_t{kThreads});
  EXPECT_EQ(s1.count(main_id), 0u);
  EXPECT_TRUE(excl1);
  for (int id : s1) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, NR_CPUS);
  }
  // All of them exited (join waits for thread_local destructors), so the same
  // lowest free ids are handed out again.
  std::vector<int> second = live_cpu_ids(kThreads, &excl2);
  std::set<int> s2(second.begin(), second.end());
  EXPECT_EQ(s2, s1);
  EXPECT_TRUE(excl2);
  int single = -1;
  std::thread([&] { single = this_cpu().id; }).join();
  EXPECT_EQ(single, *s1.begin());
}

TEST(SyncTest, ThisCpuBeyondNrCpusIsShared) {
  // More live threads than CPUs: every exclusive id is unique among the live
  // threads, and the rest share ids without being told they are exclusive.
  constexpr int kThreads = NR_CPUS + 8;
  const int main_id = this_cpu().id;  // the main thread is live throughout: take its id first
  std::vector<int> ids(kThreads, -1);
  std::vector<char> excl(kThreads, 0);
  std::latch all_live(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; i++) {
    threads.emplace_back([&, i] {
      ids[i] = this_cpu().id;
      excl[i] = this_cpu().exclusive;
      all_live.arrive_and_wait();
    });
  }
  for (auto& th : threads) th.join();
  std::vector<int> users(NR_CPUS, 0);
  for (int i = 0; i < kThreads; i++) {
    ASSERT_GE(ids[i], 0);
    ASSERT_LT(ids[i], NR_CPUS);
    users[ids[i]]++;
  }
  users[main_id]++;  // the main thread is live too
  for (int i = 0; i < kThreads; i++) {
    if (excl[i]) {
      EXPECT_EQ(users[ids[i]], 1) << "cpu " << ids[i] << " is shared but marked exclusive";
    }
  }
}

// ---------------------------------------------------------------------------
// Lockdep (debug builds)

#if defined(MMLAB_DEBUG_VM)
#define SKIP_WITHOUT_LOCKDEP() GTEST_FLAG_SET(death_test_style, "threadsafe")
#else
#define SKIP_WITHOUT_LOCKDEP() GTEST_SKIP() << "lockdep needs MMLAB_DEBUG_VM"
#endif

// The helpers below break the lock rules on purpose, so the static analysis
// is off for them; most never return (the checker aborts).

void take_pte_then_mmap() NO_THREAD_SAFETY_ANALYSIS {
  static SpinLock pte{};
  static RwSemaphore mm(LockClass::kMmapLock);
  pte.lock(LockClass::kPteLock);
  mm.down_read();
}

void take_folio_blocking_under_pte() NO_THREAD_SAFETY_ANALYSIS {
  static SpinLock pte{}, folio{};
  pte.lock(LockClass::kPteLock);
  folio.lock(LockClass::kFolioLock);
}

void take_two_ptes(int sub1, int sub2) NO_THREAD_SAFETY_ANALYSIS {
  static SpinLock dst{}, src{};
  dst.lock(LockClass::kPteLock, sub1);
  src.lock(LockClass::kPteLock, sub2);
  src.unlock();
  dst.unlock();
}

void take_ptes_both_subclass_orders() NO_THREAD_SAFETY_ANALYSIS {
  take_two_ptes(0, kSingleDepthNesting);
  take_two_ptes(kSingleDepthNesting, 0);
}

void take_generic_twice() NO_THREAD_SAFETY_ANALYSIS {
  static SpinLock l{};
  l.lock();
  l.lock();
}

void sleep_check_under_ptl() NO_THREAD_SAFETY_ANALYSIS {
  static SpinLock ptl{};
  ptl.lock(LockClass::kPageTableLock);
  lockdep_assert_none_held_from(LockClass::kPageTableLock);
}

void release_unheld() NO_THREAD_SAFETY_ANALYSIS {
  static SpinLock l{};
  l.unlock();
}

TEST(SyncTest, LockdepInversionAborts) {
  SKIP_WITHOUT_LOCKDEP();
  EXPECT_DEATH(take_pte_then_mmap(), "lock order inversion.*mmap_lock.*pte_lock");
}

TEST(SyncTest, LockdepKernelOrderIsFine) {  // also runs, unchecked, without lockdep
  RwSemaphore mm(LockClass::kMmapLock);
  RwSemaphore vma(LockClass::kVmaLock);
  RwSemaphore rmap(LockClass::kRmapLock);
  SpinLock folio{}, ptl{}, pmd{}, pte{}, zone{}, pcp{}, leaf{};
  mm.down_read();
  vma.down_write();
  folio.lock(LockClass::kFolioLock);
  rmap.down_read();
  ptl.lock(LockClass::kPageTableLock);
  pmd.lock(LockClass::kPmdLock);
  pte.lock(LockClass::kPteLock);
  zone.lock(LockClass::kZoneLock);
  pcp.lock(LockClass::kPcpLock);
  leaf.lock();  // generic: exempt from the order
  // Out-of-order release is allowed.
  pmd.unlock();
  mm.up_read();
  leaf.unlock();
  pcp.unlock();
  zone.unlock();
  pte.unlock();
  ptl.unlock();
  rmap.up_read();
  folio.unlock();
  vma.up_write();
  lockdep_assert_none_held_from(LockClass::kGeneric);
}

TEST(SyncTest, LockdepFolioTrylockUnderPteIsFine) {  // also runs, unchecked, without lockdep
  SpinLock pte{}, folio{};
  pte.lock(LockClass::kPteLock);
  if (folio.try_lock(LockClass::kFolioLock)) {  // wp_can_reuse_anon_folio()
    folio.unlock();
  } else {
    ADD_FAILURE() << "folio trylock failed on a free lock";
  }
  pte.unlock();
  // The drop-and-revalidate dance: folio lock (blocking) first, then the PTL.
  folio.lock(LockClass::kFolioLock);
  pte.lock(LockClass::kPteLock);
  pte.unlock();
  folio.unlock();
}

TEST(SyncTest, LockdepBlockingFolioUnderPteAborts) {
  SKIP_WITHOUT_LOCKDEP();
  EXPECT_DEATH(take_folio_blocking_under_pte(), "lock order inversion.*folio_lock.*pte_lock");
}

TEST(SyncTest, LockdepNestedPtlsWithSubclassesAreFine) {  // also runs, unchecked, without lockdep
  take_two_ptes(0, kSingleDepthNesting);
  take_two_ptes(0, kSingleDepthNesting);
}

TEST(SyncTest, LockdepNestedPtlsSameSubclassAbort) {
  SKIP_WITHOUT_LOCKDEP();
  EXPECT_DEATH(take_two_ptes(0, 0), "pte_lock/0.*pte_lock/0");
}

TEST(SyncTest, LockdepNestedPtlsReverseSubclassOrderAborts) {
  SKIP_WITHOUT_LOCKDEP();
  EXPECT_DEATH(take_ptes_both_subclass_orders(), "reverse order.*pte_lock/0.*pte_lock/1");
}

TEST(SyncTest, LockdepRecursiveGenericAborts) {
  SKIP_WITHOUT_LOCKDEP();
  EXPECT_DEATH(take_generic_twice(), "recursive locking");
}

TEST(SyncTest, LockdepAssertNoneHeldFrom) {
  SKIP_WITHOUT_LOCKDEP();
  {
    RwSemaphore mm(LockClass::kMmapLock);
    ReadGuard g(&mm);
    lockdep_assert_none_held_from(LockClass::kFolioLock);  // mmap_lock is above: fine
  }
  EXPECT_DEATH(sleep_check_under_ptl(), "page_table_lock");
}

TEST(SyncTest, LockdepReleaseOfUnheldLockAborts) {
  SKIP_WITHOUT_LOCKDEP();
  EXPECT_DEATH(release_unheld(), "does not hold");
}

// ---------------------------------------------------------------------------
// Names

TEST(SyncTest, ErrnoNamesRoundTrip) {
  const char* names[] = {"EFAULT", "ENOMEM", "EINVAL", "EPERM", "EBUSY", "EAGAIN", "EEXIST", "EMLINK",
                         "EOPNOTSUPP", "EINTR", "EHWPOISON", "EREMOTEIO", "EOVERFLOW", "ENOENT", "ENOSPC",
                         "E2BIG", "ESRCH", "EACCES", "ENODEV", "ENOSYS", "ERANGE", "ETXTBSY", "EBADF"};
  std::set<int> values;
  for (const char* n : names) {
    SCOPED_TRACE(n);
    int e = errno_from_name(n);
    ASSERT_GT(e, 0);
    values.insert(e);
    EXPECT_STREQ(errno_name(e), n);
    EXPECT_STREQ(errno_name(-e), n);
  }
  EXPECT_EQ(values.size(), std::size(names));
  EXPECT_EQ(errno_from_name("EFAULT"), EFAULT);
  EXPECT_EQ(errno_from_name("ENOMEM"), ENOMEM);
  EXPECT_EQ(errno_from_name("EHWPOISON"), EHWPOISON);
  EXPECT_STREQ(errno_name(-EFAULT), "EFAULT");
  EXPECT_STREQ(errno_name(EOPNOTSUPP), "EOPNOTSUPP");
}

TEST(SyncTest, ErrnoNamesUnknown) {
  EXPECT_STREQ(errno_name(0), "E?");
  EXPECT_STREQ(errno_name(100000), "E?");
  EXPECT_STREQ(errno_name(-100000), "E?");
  EXPECT_STREQ(errno_name(INT_MIN), "E?");
  EXPECT_STREQ(errno_name(INT_MAX), "E?");
  EXPECT_EQ(errno_from_name("ENOTANERROR"), 0);
  EXPECT_EQ(errno_from_name(""), 0);
  EXPECT_EQ(errno_from_name("efault"), 0);
  EXPECT_EQ(errno_from_name(nullptr), 0);
}

TEST(SyncTest, SignalNames) {
  EXPECT_STREQ(signal_name(Signal::kNone), "none");
  EXPECT_STREQ(signal_name(Signal::kSigsegv), "SIGSEGV");
  EXPECT_STREQ(signal_name(Signal::kSigbus), "SIGBUS");
}

}  // namespace
}  // namespace mmlab
