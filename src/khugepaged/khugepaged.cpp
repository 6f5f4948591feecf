// khugepaged and MADV_COLLAPSE (mm/khugepaged.c, v6.18), anonymous memory:
// registration (__khugepaged_enter, khugepaged_enter_vma, __khugepaged_exit),
// the mm_slot list and khugepaged's scan of it (khugepaged_scan_mm_slot,
// khugepaged_do_scan, khugepaged_wait_work, start_stop_khugepaged), the
// sysfs files khugepaged owns, and MADV_COLLAPSE (madvise_collapse). The
// scan of one PMD range and its collapse are khugepaged_collapse.cpp's; the
// model's thread, its virtual clock and the timing khugepaged_thread.cpp's.
#include "khugepaged/khugepaged.h"

#include <algorithm>
#include <memory>
#include <string>

#include "base/mmdebug.h"
#include "fault/fault.h"
#include "khugepaged/khugepaged_internal.h"
#include "mm/huge_mm.h"
#include "mm/kernel.h"
#include "mm/khugepaged_hooks.h"
#include "mm/mm.h"
#include "mm/filemap.h"
#include "mm/mmap.h"
#include "sync/sched.h"

namespace mmlab {
namespace {

Khugepaged* state_of(const Mm* mm) { return mm->kernel->khugepaged; }

// madvise_collapse_errno: MADV_COLLAPSE tells the caller what to do next.
int madvise_collapse_errno(int r) {
  switch (r) {
    case SCAN_ALLOC_HUGE_PAGE_FAIL:
      return -ENOMEM;
    case SCAN_CGROUP_CHARGE_FAIL:
    case SCAN_EXCEED_NONE_PTE:
      return -EBUSY;
    // Temporarily unavailable: trying again may succeed.
    case SCAN_PAGE_COUNT:
    case SCAN_PAGE_LOCK:
    case SCAN_PAGE_LRU:
    case SCAN_DEL_PAGE_LRU:
    case SCAN_PAGE_FILLED:
      return -EAGAIN;
    // Intrinsic to the range: khugepaged would not collapse it either.
    default:
      return -EINVAL;
  }
}

// madvise_collapse: mmap_lock held for read on entry and on return.
// Opt-out: in between, a local mmap_locked says whether it is held.
int madvise_collapse(Vma* vma, uint64_t start, uint64_t end, bool* lock_dropped) NO_THREAD_SAFETY_ANALYSIS {
  Mm* mm = vma->vm_mm;
  mmap_assert_locked(mm);
  VM_BUG_ON(vma->vm_start > start || vma->vm_end < end, "madvise_collapse outside the VMA");
  CollapseControl cc(mm->kernel, Collapser::kMadviseCollapse);
  if (!collapse_allowable_orders(vma, vma->vm_flags, &cc)) return -EINVAL;
  // Among files, shmem and (tune mm.read_only_thp_for_fs) a regular file
  // nobody has open for write get past the check.

  uint64_t hstart = (start + ~PMD_MASK) & PMD_MASK;
  uint64_t hend = end & PMD_MASK;
  unsigned thps = 0;
  int last_fail = SCAN_FAIL;
  bool mmap_locked = true;
  bool file = false;
  for (uint64_t addr = hstart; addr < hend; addr += PMD_SIZE) {
    int result = SCAN_FAIL;
    if (!mmap_locked) {
      mmap_read_lock(mm);
      mmap_locked = true;
      result = hugepage_vma_revalidate(mm, addr, /*expect_anon=*/false, &vma, &cc, PMD_ORDER);
      if (result != SCAN_SUCCEED) {
        last_fail = result;
        break;  // out_nolock (the lock is held)
      }
      hend = std::min(hend, vma->vm_end & PMD_MASK);
    }
    if (vma_is_anonymous(vma)) {
      result = hpage_collapse_scan_pmd(mm, vma, addr, &mmap_locked, &cc);
    } else if (vma->vm_file) {
      // The page cache is collapsed with mmap_lock dropped; the file is
      // held meanwhile (get_file).
      std::shared_ptr<File> f = vma->vm_file;
      const uint64_t pgoff = linear_page_index(vma, addr);
      mmap_read_unlock(mm);
      mmap_locked = false;
      result = hpage_collapse_scan_file(mm, addr, f.get(), pgoff, &cc);
    } else {  // remapped to another file meanwhile
      file = true;
      break;
    }
    if (!mmap_locked) *lock_dropped = true;
    bool stop = false;
    if (result == SCAN_PTE_MAPPED_HUGEPAGE) {
      // The range is one PMD-order folio of the page cache: map it.
      mmap_read_lock(mm);
      result = collapse_pte_mapped_thp(mm, addr, /*install_pmd=*/true);
      mmap_read_unlock(mm);
    }
    switch (result) {
      case SCAN_SUCCEED:
      case SCAN_PMD_MAPPED:
        ++thps;
        break;
      // The results after which the next PMD is tried.
      case SCAN_PMD_NULL:
      case SCAN_PTE_NON_PRESENT:
      case SCAN_PTE_UFFD_WP:
      case SCAN_LACK_REFERENCED_PAGE:
      case SCAN_PAGE_NULL:
      case SCAN_PAGE_COUNT:
      case SCAN_PAGE_LOCK:
      case SCAN_PAGE_COMPOUND:
      case SCAN_PAGE_LRU:
      case SCAN_DEL_PAGE_LRU:
        last_fail = result;
        break;
      default:
        last_fail = result;
        stop = true;
        break;
    }
    if (stop) break;
  }
  if (!mmap_locked) mmap_read_lock(mm);  // the caller expects it held
  if (file) return kCollapseFileNotModelled;
  return thps == ((hend - hstart) >> PMD_SHIFT) ? 0 : madvise_collapse_errno(last_fail);
}

// ---- registration: what the hooks below this layer reach ----

bool hugepage_enabled_for_collapse(const Settings& s);

// khugepaged_enter_vma: register vma's mm if vm_flags make it eligible.
void khugepaged_enter_vma(Vma* vma, vm_flags_t vm_flags) {
  Mm* mm = vma->vm_mm;
  Khugepaged* kh = state_of(mm);
  if (!kh || mm->test_flag(MMF_VM_HUGEPAGE) || !hugepage_enabled_for_collapse(mm->kernel->settings)) return;
  CollapseControl cc(mm->kernel, Collapser::kKhugepaged);
  if (collapse_allowable_orders(vma, vm_flags, &cc)) kh->__khugepaged_enter(mm);
}

// khugepaged_fork's and khugepaged_exit's way in (mm/khugepaged_hooks.h).
void hook_enter(Mm* mm) {
  if (Khugepaged* kh = state_of(mm)) kh->__khugepaged_enter(mm);
}

void hook_exit(Mm* mm) {
  if (Khugepaged* kh = state_of(mm)) kh->__khugepaged_exit(mm);
}

// hugepage_pmd_enabled (v6.18), or the series' hugepage_enabled(): whether
// the khugepaged thread runs: with CONFIG_READ_ONLY_THP_FOR_FS the global
// control (regular files follow it), then the anonymous controls, or shmem's.
bool hugepage_enabled_for_collapse(const Settings& s) {
  if (s.read_only_thp_for_fs.load() && hugepage_global_enabled(s)) return true;
  const uint64_t always = s.huge_anon_orders_always.load(), madvise = s.huge_anon_orders_madvise.load();
  const uint64_t inherit = s.huge_anon_orders_inherit.load();
  const uint64_t mask = s.khugepaged_mthp.load() ? THP_ORDERS_ALL_ANON : BIT(PMD_ORDER);
  if ((always | madvise) & mask) return true;
  if ((inherit & mask) && hugepage_global_enabled(s)) return true;
  return shmem_hpage_pmd_enabled(s);
}

}  // namespace

const KhugepagedHooks kKhugepagedHooks = {khugepaged_enter_vma, hook_enter, hook_exit, madvise_collapse};

// ---- the mm_slot list and khugepaged's scan of it ----

Khugepaged::Khugepaged(Kernel* k, std::atomic<uint64_t>* clock) : k_(k), clock_(clock), cursor_(mm_head_.end()) {
  k_->khugepaged = this;
  start_stop_khugepaged();  // khugepaged_init + the first start_stop
}

Khugepaged::~Khugepaged() {
  stop_thread();
  k_->khugepaged = nullptr;
}

bool Khugepaged::hugepage_pmd_enabled() const { return hugepage_enabled_for_collapse(k_->settings); }

bool Khugepaged::khugepaged_has_work() const { return !mm_head_.empty() && hugepage_pmd_enabled(); }

bool Khugepaged::kthread_running() const {
  MutexGuard g(&mm_lock_);
  return kthread_;
}

// wake_up_interruptible(&khugepaged_wait): ends an untimed wait that has an
// mm to scan now, and an alloc sleep. A timed scan sleep ends only if its
// expiry was reset (the sleep stores do that themselves).
void Khugepaged::wake_up_interruptible() {
  if (!kthread_) return;
  if (wait_ == Wait::kEvent && !mm_head_.empty()) wait_ = Wait::kRunnable;
  if (wait_ == Wait::kTimer && scan_.active) wait_ = Wait::kRunnable;
  work_cv_.notify_all();
}

void Khugepaged::__khugepaged_enter(Mm* mm) {
  VM_BUG_ON(hpage_collapse_test_exit(mm), "__khugepaged_enter of an exiting mm");
  if (mm->test_and_set_flag(MMF_VM_HUGEPAGE)) return;
  MutexGuard g(&mm_lock_);
  const bool wakeup = mm_head_.empty();
  // At the tail, just behind the scan cursor: the area settles a little.
  mm_head_.push_back({mm});
  mm_slots_hash_[mm] = std::prev(mm_head_.end());
  if (wakeup) wake_up_interruptible();
}

// Under the explorer (khugepaged as a race body or one of mmlab stress
// --sched's threads, exiting mms beside it) a wait in the OS would hang the
// run, where one thread moves at a time: the lock is dropped and the test
// retried as a step each time another thread has taken one (sched::yield).
void Khugepaged::wait_scan_left(Mm* mm) {
  if (!sched::active()) {
    exit_cv_.wait(mm_lock_, [&]() REQUIRES(mm_lock_) { return scanning_mm_ != mm; });
    return;
  }
  while (scanning_mm_ == mm) {
    mm_lock_.unlock();
    sched::yield("__khugepaged_exit", sched::Object{&scanning_mm_, sched::ObjKind::kWord, sched::kByFirstUse});
    mm_lock_.lock();
  }
}

void Khugepaged::__khugepaged_exit(Mm* mm) {
  MutexGuard g(&mm_lock_);
  // A scan working on this mm finishes with it first (the kernel's
  // mmap_write_lock/unlock serialisation); then the slot is found gone or
  // still here.
  wait_scan_left(mm);
  auto it = mm_slots_hash_.find(mm);
  if (it == mm_slots_hash_.end()) return;
  SlotList::iterator slot = it->second;
  if (cursor_valid_ && cursor_ == slot) {
    // The cursor rests on this mm between wakes. The kernel leaves the slot
    // for the next wake to find the mm dead and move on; the model's Mm goes
    // away now, so the cursor moves on now as that wake would move it.
    if (std::next(slot) != mm_head_.end()) {
      cursor_ = std::next(slot);
      scan_address_ = 0;
    } else {
      cursor_valid_ = false;
      full_scans_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  mm_slots_hash_.erase(it);
  mm_head_.erase(slot);
  mm->clear_flag(MMF_VM_HUGEPAGE);
  exit_cv_.notify_all();
}

void Khugepaged::collect_mm_slot(SlotList::iterator slot) {
  if (!hpage_collapse_test_exit(slot->mm)) return;
  mm_slots_hash_.erase(slot->mm);
  mm_head_.erase(slot);
}

// khugepaged_scan_mm_slot's file branch for the PMD range at address of a
// file VMA (shmem, or a read-only regular file): the page cache is scanned (and collapsed) with mmap_lock
// dropped, then a PMD-order folio found there has its PTE table removed
// (collapse_pte_mapped_thp without install_pmd: the next fault maps it).
// mmap_lock held for read on entry, dropped on return (*mmap_locked false).
// SCAN_ANY_PROCESS: the mm began to exit meanwhile.
static int khugepaged_scan_file_range(Mm* mm, Vma* vma, uint64_t address, bool* mmap_locked,
                                      CollapseControl* cc) NO_THREAD_SAFETY_ANALYSIS {
  std::shared_ptr<File> f = vma->vm_file;  // get_file
  const uint64_t pgoff = linear_page_index(vma, address);
  mmap_read_unlock(mm);
  *mmap_locked = false;
  int result = hpage_collapse_scan_file(mm, address, f.get(), pgoff, cc);
  if (result != SCAN_PTE_MAPPED_HUGEPAGE) return result;
  mmap_read_lock(mm);
  if (hpage_collapse_test_exit_or_disable(mm)) {
    mmap_read_unlock(mm);
    return SCAN_ANY_PROCESS;
  }
  result = collapse_pte_mapped_thp(mm, address, /*install_pmd=*/false);
  if (result == SCAN_PMD_MAPPED) result = SCAN_SUCCEED;
  mmap_read_unlock(mm);
  return result;
}

// The mmap_lock part of khugepaged_scan_mm_slot: from *address, scan the
// mm's VMAs under mmap_lock (read, never waited for) for up to `pages` of
// progress. *vma_out: the VMA the scan stopped in, nullptr if it got past
// the last. hpage_collapse_scan_pmd drops mmap_lock when it collapses and
// says so in mmap_locked, which the analysis cannot follow.
static unsigned khugepaged_scan_mm_vmas(Mm* mm, uint64_t* address, unsigned pages, int* result, CollapseControl* cc,
                                        Vma** vma_out, std::atomic<unsigned>* pages_collapsed) NO_THREAD_SAFETY_ANALYSIS {
  unsigned progress = 0;
  Vma* vma = nullptr;
  // Never wait for mmap_lock: move on to the next mm instead.
  if (mmap_read_trylock(mm)) {
    bool mmap_locked = true;
    progress++;
    if (!hpage_collapse_test_exit_or_disable(mm)) {
      for (vma = find_vma(mm, *address); vma; vma = vma_next(mm, vma)) {
        if (hpage_collapse_test_exit_or_disable(mm)) {
          progress++;
          break;
        }
        // Among files only shmem and (file_thp_enabled) read-only regular
        // files can be eligible.
        if (!collapse_allowable_orders(vma, vma->vm_flags, cc)) {
          progress++;
          continue;
        }
        const uint64_t hstart = round_up(vma->vm_start, PMD_SIZE), hend = round_down(vma->vm_end, PMD_SIZE);
        if (*address > hend) {
          progress++;
          continue;
        }
        if (*address < hstart) *address = hstart;
        bool out = false;
        while (*address < hend) {
          if (hpage_collapse_test_exit_or_disable(mm)) {
            out = true;
            break;
          }
          if (vma_is_anonymous(vma)) {
            *result = hpage_collapse_scan_pmd(mm, vma, *address, &mmap_locked, cc);
          } else {
            *result = khugepaged_scan_file_range(mm, vma, *address, &mmap_locked, cc);
            if (*result == SCAN_ANY_PROCESS) {
              out = true;  // the mm is exiting: on to the next one
              break;
            }
          }
          if (*result == SCAN_SUCCEED) pages_collapsed->fetch_add(1, std::memory_order_acq_rel);
          *address += PMD_SIZE;
          progress += HPAGE_PMD_NR;
          // The collapse dropped mmap_lock (before any allocation, so an
          // allocation failure is always reported from here).
          if (!mmap_locked || progress >= pages) {
            out = true;
            break;
          }
        }
        if (out) break;
      }
    }
    if (mmap_locked) mmap_read_unlock(mm);  // exit_mmap destroys the tables after this
  }
  *vma_out = vma;
  return progress;
}

// khugepaged_scan_mm_slot: scan the cursor's mm from the cursor's address
// for up to `pages` of progress. mm_lock_ held on entry and on return,
// dropped meanwhile.
unsigned Khugepaged::khugepaged_scan_mm_slot(unsigned pages, int* result) {
  *result = SCAN_FAIL;
  if (!cursor_valid_) {
    cursor_ = mm_head_.begin();
    cursor_valid_ = true;
    scan_address_ = 0;
  }
  const SlotList::iterator slot = cursor_;
  Mm* mm = slot->mm;
  uint64_t address = scan_address_;
  scanning_mm_ = mm;
  mm_lock_.unlock();

  CollapseControl cc(k_, Collapser::kKhugepaged);
  Vma* vma = nullptr;
  const unsigned progress = khugepaged_scan_mm_vmas(mm, &address, pages, result, &cc, &vma, &pages_collapsed_);

  mm_lock_.lock();
  VM_BUG_ON(!cursor_valid_ || cursor_ != slot, "khugepaged's cursor moved during a scan");
  scanning_mm_ = nullptr;
  scan_address_ = address;
  wake_stats_.ptes_scanned += cc.ptes_scanned;
  wake_stats_.collapsed += cc.collapsed;
  wake_stats_.bytes_copied += cc.bytes_copied;
  // Done with this mm: it is exiting, or every VMA was scanned.
  if (hpage_collapse_test_exit(mm) || !vma) {
    if (std::next(slot) != mm_head_.end()) {
      cursor_ = std::next(slot);
      scan_address_ = 0;
    } else {
      cursor_valid_ = false;
      full_scans_.fetch_add(1, std::memory_order_acq_rel);
    }
    collect_mm_slot(slot);
  }
  exit_cv_.notify_all();
  return progress;
}

// khugepaged_do_scan: one wake, up to pages_to_scan of progress and at most
// two passes over the list head. The first allocation failure sleeps
// alloc_sleep_millisecs (kAllocSleep: the wake resumes later), the second
// ends the wake.
Khugepaged::StepEnd Khugepaged::khugepaged_do_scan() {
  MutexGuard g(&mm_lock_);
  if (!scan_.active) {
    scan_ = DoScan{true, static_cast<unsigned>(k_->settings.pages_to_scan.load()), 0, 0, true};
    wake_stats_ = {};
    k_->stats->count(Event::khugepaged_wake);
  }
  int result = SCAN_SUCCEED;
  for (;;) {
    if (!kthread_) break;  // kthread_should_stop
    if (!cursor_valid_) scan_.pass_through_head++;
    if (khugepaged_has_work() && scan_.pass_through_head < 2)
      scan_.progress += khugepaged_scan_mm_slot(scan_.pages - scan_.progress, &result);
    else
      scan_.progress = scan_.pages;
    if (scan_.progress >= scan_.pages) break;
    if (result == SCAN_ALLOC_HUGE_PAGE_FAIL) {
      if (!scan_.wait) break;
      scan_.wait = false;
      return StepEnd::kAllocSleep;
    }
  }
  scan_.active = false;
  wake_stats_.progress = scan_.progress;
  return StepEnd::kDone;
}

// khugepaged_wait_work: sleep scan_sleep_millisecs while there is work,
// else until an mm registers.
void Khugepaged::khugepaged_wait_work() {
  if (khugepaged_has_work()) {
    const uint64_t sleep_ns = uint64_t{k_->settings.scan_sleep_millisecs.load()} * 1000000;
    if (!sleep_ns) {
      wait_ = Wait::kRunnable;
      return;
    }
    wait_ = Wait::kTimer;
    wake_at_ = clock_->load() + sleep_ns;
    return;
  }
  wait_ = Wait::kEvent;
}

// start_stop_khugepaged: the kthread runs while some THP size that khugepaged
// serves is enabled. Its first wake is at once; stopped, it lets go of the
// cursor's slot (collecting it if its mm exited).
void Khugepaged::start_stop_khugepaged() {
  MutexGuard g(&mm_lock_);
  if (hugepage_pmd_enabled()) {
    if (!kthread_) {
      kthread_ = true;
      wait_ = Wait::kRunnable;
      scan_ = DoScan{};
    } else if (!mm_head_.empty()) {
      wake_up_interruptible();
    }
  } else if (kthread_) {
    kthread_ = false;
    scan_ = DoScan{};
    wait_ = Wait::kEvent;
    if (cursor_valid_) {
      cursor_valid_ = false;
      collect_mm_slot(cursor_);
    }
  }
  work_cv_.notify_all();
  exit_cv_.notify_all();
}

void Khugepaged::sysfs_written(const std::string& path) {
  const std::string thp = "transparent_hugepage/";
  auto ends_with = [&](const char* tail) {
    const size_t n = std::char_traits<char>::length(tail);
    return path.size() > n && path.compare(path.size() - n, n, tail) == 0;
  };
  if (path == thp + "enabled" || path == thp + "shmem_enabled" ||
      (path.rfind(thp + "hugepages-", 0) == 0 && (ends_with("/enabled") || ends_with("/shmem_enabled")))) {
    start_stop_khugepaged();
    return;
  }
  if (path == thp + "khugepaged/scan_sleep_millisecs" || path == thp + "khugepaged/alloc_sleep_millisecs") {
    // khugepaged_sleep_expire = 0, then a wakeup: any sleep ends now.
    MutexGuard g(&mm_lock_);
    if (kthread_ && wait_ == Wait::kTimer) wait_ = Wait::kRunnable;
    work_cv_.notify_all();
  }
}

int Khugepaged::sysfs_read(const std::string& path, std::string* out) const {
  if (path == "transparent_hugepage/khugepaged/pages_collapsed") {
    *out = std::to_string(pages_collapsed());
    return 0;
  }
  if (path == "transparent_hugepage/khugepaged/full_scans") {
    *out = std::to_string(full_scans());
    return 0;
  }
  return -ENOENT;
}

}  // namespace mmlab
