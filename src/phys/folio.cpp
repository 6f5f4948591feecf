// The last-reference path of a folio (folio_put_refs() -> __folio_put()) and
// the folio lock (PG_locked; folio_lock() in mm/filemap.c).
#include <thread>

#include "base/mmdebug.h"
#include "phys/phys.h"
#include "sync/sched.h"

namespace mmlab {

void folio_put_refs(Folio* f, int nr) {
  if (!folio_ref_sub_and_test(f, nr)) return;
  // The zero page and the huge zero folio hold a reference of their own for
  // the PhysMem's lifetime; reaching zero means a caller dropped one too many.
  if (folio_test_reserved(f) || folio_test_huge_zero(f)) {
    VM_BUG_ON_FOLIO(true, f, "last reference dropped on a zero page");
    return;
  }
  PhysMem* pm = PhysMem::of(&f->page);
  // __folio_put(): hugetlb pools and the deferred-split queue get first say.
  const FolioFreeHook& hook = pm->folio_free_hook();
  if (hook && hook(f)) return;
  pm->free_folio(f);
}

namespace {
// The folio lock at a schedule point is named by the folio's pfn, which is
// the same in every run with the same choices (its address is not).
sched::Object folio_lock_object(Folio* f) { return {f, sched::ObjKind::kFolioLock, folio_pfn(f)}; }
}  // namespace

bool folio_trylock(Folio* f) {
  VM_BUG_ON_FOLIO(PageTail(&f->page), f, "folio_trylock on a tail page");
  if (sched::active()) [[unlikely]]
    sched::point("folio_trylock", sched::Op::kTryAcquire, folio_lock_object(f));
  // As if another task held the lock: every caller copes with a failed trylock.
  if (PhysMem::of(&f->page)->should_fail(FaultSite::folio_trylock, folio_order(f))) return false;
  if (test_and_set_bit(PG_locked, &f->page)) return false;
  lockdep_acquire(f, LockClass::kFolioLock, 0, LockdepTry::kTry);
  return true;
}

void __folio_set_locked(Folio* f) {
  VM_BUG_ON_FOLIO(PageTail(&f->page), f, "__folio_set_locked on a tail page");
  const bool was_locked = test_and_set_bit(PG_locked, &f->page);
  VM_BUG_ON_FOLIO(was_locked, f, "__folio_set_locked on a locked folio");
  (void)was_locked;
  lockdep_acquire(f, LockClass::kFolioLock, 0, LockdepTry::kTry);
}

// A sleeping lock in the kernel: the waiter yields its CPU rather than spin.
void folio_lock(Folio* f) {
  VM_BUG_ON_FOLIO(PageTail(&f->page), f, "folio_lock on a tail page");
  if (sched::active()) [[unlikely]] {
    // Under the explorer: try, else block on the folio until folio_unlock
    // wakes it (a yield would spin while the holder cannot run). A run
    // ended meanwhile unwinds from here without the lock.
    sched::point("folio_lock", sched::Op::kAcquire, folio_lock_object(f));
    lockdep_acquire(f, LockClass::kFolioLock, 0);
    try {
      while (test_and_set_bit(PG_locked, &f->page)) sched::block_on("folio_lock", folio_lock_object(f));
    } catch (const sched::RunAborted&) {
      lockdep_release(f);
      throw;
    }
    return;
  }
  lockdep_acquire(f, LockClass::kFolioLock, 0);
  // Test before test-and-set so waiters do not bounce the flags word.
  while (test_bit(PG_locked, &f->page) || test_and_set_bit(PG_locked, &f->page)) std::this_thread::yield();
}

void folio_unlock(Folio* f) {
  VM_BUG_ON_FOLIO(!folio_test_locked(f), f, "folio_unlock of an unlocked folio");
  if (sched::active()) [[unlikely]]
    sched::point("folio_unlock", sched::Op::kRelease, folio_lock_object(f));
  lockdep_release(f);
  clear_bit(PG_locked, &f->page);  // release ordering: the critical section happens-before the next owner
  sched::wake(f);
}

}  // namespace mmlab
