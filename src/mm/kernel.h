// The simulated kernel's global state: one per System. Everything below the
// public API reaches settings, physical memory and statistics through it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mm/settings.h"
#include "pgtable/pgtable.h"
#include "phys/phys.h"
#include "stats/stats.h"

namespace mmlab {

struct Mm;

struct FileTable;     // mm/file.h (page cache, files)
struct GupHooks;         // mm/gup_hooks.h (MADV_POPULATE and mm_populate into GUP)
struct KhugepagedHooks;  // mm/khugepaged_hooks.h (the call sites' way into khugepaged)
class Khugepaged;        // khugepaged/khugepaged.h (owned by the System)
struct SwapState;     // mm/swapfile.h (swap devices, swap cache)
struct HugetlbState;  // mm/hugetlb.h (hugetlb pools)
struct ShmIds;        // mm/shm.h (SysV shared memory segments)

struct Kernel {
  Kernel();
  ~Kernel();
  std::unique_ptr<Stats> stats;
  std::unique_ptr<PhysMem> phys;
  Settings settings;
  // The per-CPU TLBs (tlb/tlb.h), shared by every Mm.
  TlbState tlb;
  std::atomic<int> next_mm_id{1};
  // Creation ids of VMAs, anon_vmas and files: what orders them in the
  // rmap's and hugetlb's containers and names them at a schedule point,
  // the same in every run of a replayed schedule (a host address is not).
  std::atomic<uint64_t> next_cid{1};

  // Deferred page-table freeing (pgtable/pgtable.h), shared by every Mm.
  DeferredTables deferred_tables;

  // Deferred split queue (partially mapped large anon folios, and PMD THPs
  // for the underused shrinker), linked by set membership.
  Mutex split_queue_lock{LockClass::kSplitQueueLock};
  std::set<Folio*> split_queue GUARDED_BY(split_queue_lock);

  // khugepaged and MADV_COLLAPSE live in a layer above this one: the System
  // installs its hooks and state here at creation (null: neither exists).
  const KhugepagedHooks* khugepaged_hooks = nullptr;
  Khugepaged* khugepaged = nullptr;
  // GUP's populate path, above this layer likewise (mm/gup_hooks.h).
  const GupHooks* gup_hooks = nullptr;

  std::unique_ptr<FileTable> files;
  std::unique_ptr<SwapState> swap;
  std::unique_ptr<HugetlbState> hugetlb;
  std::unique_ptr<ShmIds> shm;

  // Violations the model detected and went on from instead of aborting:
  // what the `rfc` CoW path does that the kernel would only survive
  // corrupted, and, under that policy or a revert switch (Revert), every
  // VM_BUG_ON* and VM_WARN_ON*
  // site on a page, folio or mm of this System (base/mmdebug.h, through
  // mm/debug.cpp's reporter). The scenario runner fails the test with them.
  bool vm_warn_records() const;
  void vm_warn(std::string msg) {
    MutexGuard g(&warn_lock);
    warnings.push_back(std::move(msg));
  }
  // A VM_WARN_ON_ONCE* site's first firing in this System (true), or not.
  bool vm_warn_once_first(const void* site) {
    MutexGuard g(&warn_lock);
    return warned_once.insert(site).second;
  }
  // pr_warn_once(): the kernel log's line, once per site and System; the
  // scenario runner prints it under the test that caused it (`# dmesg:`),
  // never as a bare line on stderr, since tests run side by side.
  void pr_warn_once(const void* site, std::string msg) {
    MutexGuard g(&warn_lock);
    if (warned_once.insert(site).second) kernel_log.push_back(std::move(msg));
  }
  mutable Mutex warn_lock;
  std::vector<std::string> warnings GUARDED_BY(warn_lock);
  std::vector<std::string> kernel_log GUARDED_BY(warn_lock);
  std::set<const void*> warned_once GUARDED_BY(warn_lock);
};

}  // namespace mmlab

namespace mmlab {
// The Kernel that owns a Page (through its PhysMem).
Kernel* kernel_of(const Page* p);
}  // namespace mmlab
