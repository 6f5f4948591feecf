// mm/hugetlb.c, the pools: struct hstate's free lists and counters
// (persistent and surplus pages, gigantic pages from contiguous memory),
// hugetlb_acct_memory, the folio-free hook that gives a folio back to its
// pool (free_huge_folio), the fault mutex table, the hugetlbfs page cache
// (hugetlb_add_to_page_cache), and the sysfs files under
// /sys/kernel/mm/hugepages/. Reservations are in mm/hugetlb_resv.cpp, the
// page-table operations in mm/hugetlb_pgtable.cpp, the files in
// mm/hugetlbfs_inode.cpp, the faults in fault/hugetlb.cpp.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "mm/file.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/debug.h"
#include "pgtable/pgtable.h"
#include "phys/frame_copy.h"
#include "sync/lock_order.h"
#include "trace/trace.h"
#include "sync/sched.h"

namespace mmlab {

HugetlbState::HugetlbState() {
  hstates[0].order = PMD_ORDER;
  hstates[1].order = PUD_ORDER;
}

// Teardown: files that outlive us (the Kernel destroys its FileTable after
// us) must not reach back, and hugetlb folios freed from now on just vanish
// with the frame store.
HugetlbState::~HugetlbState() {
  {
    SpinGuard g(&lock);
    for (HugetlbFileState* fs : files) fs->kernel = nullptr;
    files.clear();
  }
  Kernel* k = kernel.load(std::memory_order_acquire);
  if (k && k->phys) {
    FolioFreeHook old = k->phys->folio_free_hook();
    k->phys->set_folio_free_hook([old](Folio* f) {
      if (folio_test_hugetlb(f)) return true;
      return old ? old(f) : false;
    });
  }
}
// ---- small helpers ----

HugetlbState* hugetlb_state(Kernel* k) {
  HugetlbState* hs = k->hugetlb.get();
  if (!hs->kernel.load(std::memory_order_relaxed)) hs->kernel.store(k, std::memory_order_release);
  return hs;
}

unsigned hstate_index(unsigned order) { return order == PUD_ORDER ? 1 : 0; }

Hstate* hstate_file(const File* f) { return f->hstate->h; }
Hstate* hstate_vma(const Vma* vma) { return hstate_file(vma->vm_file.get()); }

bool is_hugetlb_file(const File* f) { return f && f->hstate; }

// vma_hugecache_offset: the huge-page index in the file of addr.
uint64_t vma_hugecache_offset(const Hstate* h, const Vma* vma, uint64_t addr) {
  return ((addr - vma->vm_start) >> h->shift()) + (vma->vm_pgoff >> h->order);
}
namespace {

// folio->private flags of hugetlb folios (HPG_*).
constexpr uint64_t HPG_restore_reserve = 1ull << 0;
}  // namespace

bool folio_test_hugetlb_restore_reserve(const Folio* f) {
  return aref(const_cast<uint64_t&>(f->page.private_)).load(std::memory_order_acquire) & HPG_restore_reserve;
}
void folio_set_hugetlb_restore_reserve(Folio* f) {
  aref(f->page.private_).fetch_or(HPG_restore_reserve, std::memory_order_acq_rel);
}
void folio_clear_hugetlb_restore_reserve(Folio* f) {
  aref(f->page.private_).fetch_and(~HPG_restore_reserve, std::memory_order_acq_rel);
}
namespace {

void note_nr(Kernel* k, const Hstate* h) {
  auto& s = h->order == PUD_ORDER ? k->settings.nr_hugepages_1g : k->settings.nr_hugepages_2m;
  s.store(h->nr_huge_pages, std::memory_order_relaxed);
}

long persistent_huge_pages(const Hstate* h) { return h->nr_huge_pages - h->surplus_huge_pages; }
}  // namespace

namespace {

// ---- the pools ----

void enqueue_hugetlb_folio(HugetlbState* hs, Hstate* h, Folio* f) REQUIRES(hs->lock) {
  (void)hs;
  h->freelist.push_back(f);
  h->free_huge_pages++;
}
}  // namespace

Folio* dequeue_hugetlb_folio(HugetlbState* hs, Hstate* h) REQUIRES(hs->lock) {
  (void)hs;
  if (h->freelist.empty()) return nullptr;
  Folio* f = h->freelist.back();
  h->freelist.pop_back();
  h->free_huge_pages--;
  return f;
}
namespace {

// remove_pool_hugetlb_folio: a free folio leaves the pool (to be freed).
Folio* remove_pool_hugetlb_folio(HugetlbState* hs, Hstate* h, bool acct_surplus) REQUIRES(hs->lock) {
  Folio* f = dequeue_hugetlb_folio(hs, h);
  if (!f) return nullptr;
  h->nr_huge_pages--;
  if (acct_surplus) h->surplus_huge_pages--;
  return f;
}

// A fresh folio for the pool (alloc_fresh_hugetlb_folio): from the buddy
// allocator for 2 MiB, a contiguous range for 1 GiB. Refcount 1.
Folio* alloc_fresh_hugetlb_folio(Kernel* k, const Hstate* h) {
  // htlb_alloc_mask: movable unless gigantic (gigantic pages cannot migrate).
  gfp_t gfp = h->gigantic() ? __GFP_NOWARN : (__GFP_MOVABLE | __GFP_NOWARN);
  Folio* f = k->phys->folio_alloc(gfp, h->order);
  if (!f) return nullptr;
  aref(f->page.private_).store(0, std::memory_order_relaxed);
  folio_set_hugetlb(f);
  return f;
}

// __update_and_free_hugetlb_folio: the frames of a folio with refcount 0 go
// back to the page allocator.
void free_hugetlb_frames(Kernel* k, Folio* f) {
  folio_clear_hugetlb(f);
  aref(f->page.private_).store(0, std::memory_order_relaxed);
  k->phys->free_folio(f);
}

// update_and_free_hugetlb_folio for a folio taken off the free list: drop the
// pool's reference (folio_ref_freeze: wait out a speculative walker's), free.
void update_and_free_hugetlb_folio(Kernel* k, Folio* f) {
  auto r = aref(f->page.refcount);
  // Strong: a spurious failure under the explorer would disable the thread
  // on a refcount nobody else holds.
  sched::wait_until("update_and_free_hugetlb_folio", {f, sched::ObjKind::kRefcount, folio_pfn(f)}, [&r] {
    int one = 1;
    return r.compare_exchange_strong(one, 0, std::memory_order_acq_rel);
  });
  free_hugetlb_frames(k, f);
}
}  // namespace

void free_folios(Kernel* k, std::vector<Folio*>& v) {
  for (Folio* f : v) update_and_free_hugetlb_folio(k, f);
  v.clear();
}

// alloc_surplus_hugetlb_folio: a page beyond the persistent pool, allowed up
// to nr_overcommit_hugepages (never gigantic). Returned in use (refcount 1).
Folio* alloc_surplus_hugetlb_folio(Kernel* k, HugetlbState* hs, Hstate* h) {
  if (h->gigantic()) return nullptr;
  {
    SpinGuard g(&hs->lock);
    if (h->surplus_huge_pages >= h->nr_overcommit_huge_pages) return nullptr;
  }
  Folio* f = alloc_fresh_hugetlb_folio(k, h);
  if (!f) return nullptr;
  SpinGuard g(&hs->lock);
  if (h->surplus_huge_pages >= h->nr_overcommit_huge_pages) {
    g.unlock();
    aref(f->page.refcount).store(0, std::memory_order_release);
    free_hugetlb_frames(k, f);
    return nullptr;
  }
  h->nr_huge_pages++;
  h->surplus_huge_pages++;
  note_nr(k, h);
  return f;
}

// return_unused_surplus_pages: drop unused reservations and free up to as
// many surplus pages (into *to_free, freed by the caller after unlocking).
void return_unused_surplus_pages(HugetlbState* hs, Hstate* h, long unused, std::vector<Folio*>* to_free)
    REQUIRES(hs->lock) {
  h->resv_huge_pages -= unused;
  long nr = std::min(unused, h->surplus_huge_pages);
  while (nr-- > 0) {
    Folio* f = remove_pool_hugetlb_folio(hs, h, /*acct_surplus=*/true);
    if (!f) break;
    to_free->push_back(f);
  }
  if (Kernel* k = hs->kernel.load(std::memory_order_relaxed)) note_nr(k, h);
}
namespace {

// gather_surplus_pages: make delta more reservations, allocating surplus
// pages when the free pages do not cover them. 0 or -ENOMEM.
int gather_surplus_pages(Kernel* k, HugetlbState* hs, Hstate* h, long delta) {
  std::vector<Folio*> surplus;
  hs->lock.lock();
  long needed = h->resv_huge_pages + delta - h->free_huge_pages;
  if (needed <= 0) {
    h->resv_huge_pages += delta;
    hs->lock.unlock();
    return 0;
  }
  int ret = -ENOMEM;
  bool alloc_ok = true;
  for (;;) {
    hs->lock.unlock();
    for (long i = 0; i < needed; i++) {
      Folio* f = alloc_surplus_hugetlb_folio(k, hs, h);
      if (!f) {
        alloc_ok = false;
        break;
      }
      surplus.push_back(f);
    }
    hs->lock.lock();
    needed = h->resv_huge_pages + delta - (h->free_huge_pages + static_cast<long>(surplus.size()));
    if (needed > 0) {
      if (alloc_ok) continue;
      break;
    }
    needed += static_cast<long>(surplus.size());
    h->resv_huge_pages += delta;
    ret = 0;
    // The pages needed join the free list (the pool keeps their reference).
    while (needed-- > 0 && !surplus.empty()) {
      enqueue_hugetlb_folio(hs, h, surplus.back());
      surplus.pop_back();
    }
    break;
  }
  hs->lock.unlock();
  for (Folio* f : surplus) folio_put(f);  // unneeded surplus: back to the page allocator
  return ret;
}
}  // namespace

// hugetlb_acct_memory: change the global reservation count by delta.
int hugetlb_acct_memory(Kernel* k, HugetlbState* hs, Hstate* h, long delta) {
  if (!delta) return 0;
  std::vector<Folio*> to_free;
  if (delta > 0) {
    if (gather_surplus_pages(k, hs, h, delta) < 0) return -ENOMEM;
    SpinGuard g(&hs->lock);
    // allowed_mems_nr(): one node, every page allowed.
    if (delta > h->free_huge_pages) {
      return_unused_surplus_pages(hs, h, delta, &to_free);
      g.unlock();
      free_folios(k, to_free);
      return -ENOMEM;
    }
    return 0;
  }
  {
    SpinGuard g(&hs->lock);
    return_unused_surplus_pages(hs, h, -delta, &to_free);
  }
  free_folios(k, to_free);
  return 0;
}
namespace {

// set_max_huge_pages: grow the persistent pool to count pages (stopping at
// the first allocation failure), or shrink it: free pages beyond in-use and
// reserved ones go back, and the rest of the excess becomes surplus, freed
// as it is released.
void set_max_huge_pages(Kernel* k, HugetlbState* hs, Hstate* h, long count) {
  std::vector<Folio*> to_free;
  hs->lock.lock();
  while (h->surplus_huge_pages && count > persistent_huge_pages(h)) h->surplus_huge_pages--;  // adjust_pool_surplus(-1)
  while (count > persistent_huge_pages(h)) {
    hs->lock.unlock();
    Folio* f = alloc_fresh_hugetlb_folio(k, h);
    hs->lock.lock();
    if (!f) break;
    h->nr_huge_pages++;
    enqueue_hugetlb_folio(hs, h, f);
  }
  long min_count = h->resv_huge_pages + h->nr_huge_pages - h->free_huge_pages;
  min_count = std::max(count, min_count);
  while (min_count < persistent_huge_pages(h)) {
    Folio* f = remove_pool_hugetlb_folio(hs, h, /*acct_surplus=*/false);
    if (!f) break;
    to_free.push_back(f);
  }
  while (count < persistent_huge_pages(h)) {  // adjust_pool_surplus(+1)
    if (h->surplus_huge_pages >= h->nr_huge_pages) break;
    h->surplus_huge_pages++;
  }
  h->max_huge_pages = persistent_huge_pages(h);
  note_nr(k, h);
  hs->lock.unlock();
  free_folios(k, to_free);
}
}  // namespace

// ---- the page cache of hugetlbfs files ----

Mutex& hugetlb_fault_mutex(HugetlbState* hs, const File* f, uint64_t idx) {
  // The file's creation id, not its address: which (file, index) pairs
  // share a mutex must not change from run to run (issue 34 §4).
  uint64_t key = (f->cid + 1) * 0x9E3779B97F4A7C15ull ^ (idx * 0xC2B2AE3D27D4EB4Full);
  return hs->fault_mutex[(key >> 32) % HugetlbState::kFaultMutexes].m;
}

// filemap_lock_hugetlb_folio: the page-cache folio at huge index idx,
// referenced and locked, or nullptr.
Folio* filemap_lock_hugetlb_folio(File* f, const Hstate* h, uint64_t idx) {
  Folio* folio = nullptr;
  {
    MutexGuard g(&f->lock);
    auto it = f->pages.find(idx << h->order);
    if (it != f->pages.end()) {
      folio = it->second;
      folio_get(folio);
    }
  }
  if (!folio) return nullptr;
  folio_lock(folio);
  if (aref(folio->page.mapping).load(std::memory_order_acquire) != reinterpret_cast<uint64_t>(f)) {
    folio_unlock(folio);  // removed from the cache meanwhile
    folio_put(folio);
    return nullptr;
  }
  return folio;
}

// hugetlb_add_to_page_cache: insert a new folio (locked on return). The page
// cache holds one reference per page. 0 or -EEXIST.
int hugetlb_add_to_page_cache(Folio* folio, File* f, const Hstate* h, uint64_t idx) {
  const uint64_t index = idx << h->order;
  // __folio_set_locked: nobody else can see the folio yet. Before f->lock,
  // which is a leaf lock.
  __folio_set_locked(folio);
  folio->page.index = index;
  aref(folio->page.mapping).store(reinterpret_cast<uint64_t>(f), std::memory_order_release);
  folio_clear_hugetlb_restore_reserve(folio);
  folio_set_dirty(folio);  // never written back: keep it from being dropped
  folio_ref_add(folio, static_cast<int>(folio_nr_pages(folio)));
  bool added = false;
  {
    MutexGuard g(&f->lock);
    if (!f->pages.count(index)) {
      f->pages.emplace(index, folio);
      added = true;
      MM_TRACE("mm_filemap_add_to_page_cache", "pfn={:#x} ofs={} order={}", folio_pfn(folio), index,
               folio_order(folio));
    }
  }
  if (added) {
    HugetlbState* hs = f->kernel->hugetlb.get();
    SpinGuard hg(&hs->lock);
    f->hstate->cached++;
    return 0;
  }
  folio_ref_sub_and_test(folio, static_cast<int>(folio_nr_pages(folio)));  // the caller's reference remains
  aref(folio->page.mapping).store(0, std::memory_order_release);
  folio_unlock(folio);
  return -EEXIST;
}

void folio_zero_huge(Folio* folio, Stats* st) {
  const uint64_t bytes = static_cast<uint64_t>(folio_nr_pages(folio)) * PAGE_SIZE;
  zero_folio_frames(PhysMem::of(&folio->page), static_cast<uint8_t*>(folio_address(folio)), folio_nr_pages(folio), -1);
  st->count_zeroed(folio_order(folio), bytes);  // a gigantic folio counts in the total only
}

namespace {

// ---- sysfs ----

// "hugepages/hugepages-<kB>kB/<attr>" -> the hstate and the attribute.
bool parse_hugetlb_path(HugetlbState* hs, const std::string& path, Hstate** h, std::string* attr) {
  const std::string pre = "hugepages/hugepages-";
  if (path.rfind(pre, 0) != 0) return false;
  size_t kb_end = path.find("kB/", pre.size());
  if (kb_end == std::string::npos) return false;
  std::string kb = path.substr(pre.size(), kb_end - pre.size());
  *attr = path.substr(kb_end + 3);
  for (Hstate& s : hs->hstates) {
    if (kb == std::to_string(s.size() / 1024)) {
      *h = &s;
      return true;
    }
  }
  return false;
}

// kstrtoul(buf, 10): decimal digits, one trailing newline allowed.
bool parse_count(std::string v, long* out) {
  if (!v.empty() && v.back() == '\n') v.pop_back();
  if (v.empty() || v.size() > 18) return false;
  long n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return false;
    n = n * 10 + (ch - '0');
  }
  *out = n;
  return true;
}
}  // namespace

// ---- the folio-free hook ----

bool free_huge_folio(Kernel* k, Folio* folio) {
  if (!folio_test_hugetlb(folio)) return false;
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = &hs->hstates[hstate_index(folio_order(folio))];
  VM_BUG_ON_FOLIO(folio_ref_count(folio) != 0, folio, "freeing a referenced hugetlb folio");
  VM_BUG_ON_FOLIO(folio_mapcount(folio) != 0, folio, "freeing a mapped hugetlb folio");
  const bool restore_reserve = folio_test_hugetlb_restore_reserve(folio);
  // Back to a clean pool page: no anon/page-cache identity, no state bits.
  aref(folio->page.mapping).store(0, std::memory_order_relaxed);
  folio->page.index = 0;
  aref(folio->page.private_).store(0, std::memory_order_relaxed);
  const uint64_t keep = (1ull << PG_head) | (1ull << PG_hugetlb) | PG_ORDER_MASK;
  aref(folio->page.flags).fetch_and(keep, std::memory_order_acq_rel);
  clear_bit(PG_maybe_shared, folio_page(folio, 1));

  hs->lock.lock();
  if (restore_reserve) h->resv_huge_pages++;
  if (h->surplus_huge_pages) {  // a surplus page leaves the pool
    h->nr_huge_pages--;
    h->surplus_huge_pages--;
    note_nr(k, h);
    hs->lock.unlock();
    free_hugetlb_frames(k, folio);
    return true;
  }
  aref(folio->page.refcount).store(1, std::memory_order_release);  // the pool's reference
  enqueue_hugetlb_folio(hs, h, folio);
  hs->lock.unlock();
  return true;
}

long hugetlb_usage_pages(const Mm* mm) {
  HugetlbState* hs = hugetlb_state(mm->kernel);
  SpinGuard g(&hs->lock);
  auto it = hs->usage.find(mm->mm_id);
  return it == hs->usage.end() ? 0 : it->second;
}

std::string hugetlb_pool_audit(Kernel* k) {
  HugetlbState* hs = hugetlb_state(k);
  SpinGuard g(&hs->lock);
  for (Hstate& h : hs->hstates) {
    const std::string name = std::to_string(h.size() / 1024) + "kB: ";
    if (h.free_huge_pages != static_cast<long>(h.freelist.size()))
      return name + "free_huge_pages " + std::to_string(h.free_huge_pages) + " != free list " +
             std::to_string(h.freelist.size());
    if (h.free_huge_pages > h.nr_huge_pages || h.surplus_huge_pages > h.nr_huge_pages || h.surplus_huge_pages < 0)
      return name + "counters out of range";
    if (h.resv_huge_pages > h.free_huge_pages)
      return name + "resv_huge_pages " + std::to_string(h.resv_huge_pages) + " > free_huge_pages " +
             std::to_string(h.free_huge_pages);
    for (Folio* f : h.freelist) {
      if (!folio_test_hugetlb(f) || folio_order(f) != h.order || folio_ref_count(f) != 1 || folio_mapped(f) ||
          folio_test_anon(f) || aref(f->page.mapping).load(std::memory_order_relaxed) != 0)
        return name + "bad free folio\n" + dump_folio(f);
    }
  }
  for (auto& [id, pages] : hs->usage)
    if (pages < 0) return "hugetlb_usage of mm " + std::to_string(id) + " is negative";
  return "";
}

// ---- sysfs: hugepages/hugepages-<N>kB/ ----

int hugetlb_sysfs_write(Kernel* k, const std::string& path, const std::string& value) {
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = nullptr;
  std::string attr;
  if (!parse_hugetlb_path(hs, path, &h, &attr)) return -ENOENT;
  long n = 0;
  if (attr == "nr_hugepages") {
    if (!parse_count(value, &n)) return -EINVAL;
    set_max_huge_pages(k, hs, h, n);
    return 0;
  }
  if (attr == "nr_overcommit_hugepages") {
    if (!parse_count(value, &n)) return -EINVAL;
    SpinGuard g(&hs->lock);
    h->nr_overcommit_huge_pages = n;
    return 0;
  }
  if (attr == "free_hugepages" || attr == "resv_hugepages" || attr == "surplus_hugepages") return -EACCES;
  return -ENOENT;
}

int hugetlb_sysfs_read(Kernel* k, const std::string& path, std::string* out) {
  HugetlbState* hs = hugetlb_state(k);
  Hstate* h = nullptr;
  std::string attr;
  if (!parse_hugetlb_path(hs, path, &h, &attr)) return -ENOENT;
  long v;
  {
    SpinGuard g(&hs->lock);
    if (attr == "nr_hugepages") v = h->nr_huge_pages;
    else if (attr == "free_hugepages") v = h->free_huge_pages;
    else if (attr == "resv_hugepages") v = h->resv_huge_pages;
    else if (attr == "surplus_hugepages") v = h->surplus_huge_pages;
    else if (attr == "nr_overcommit_hugepages") v = h->nr_overcommit_huge_pages;
    else return -ENOENT;
  }
  *out = std::to_string(v);
  return 0;
}

}  // namespace mmlab
