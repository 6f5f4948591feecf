// hugetlb: the pools and their sysfs files, reservations at mmap, PMD and
// PUD leaves, data, CoW after fork (reuse by mapcount, the reservation
// owner's unmap_ref_private, SIGBUS for the others), shared mappings through
// hugetlbfs files, pinned pages at fork, surplus pages, release at exit,
// and hugetlbfs truncation and hole punching (the counters after each, and
// the reservation audit quiet at every step).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "fault/fault.h"
#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/hugetlb.h"
#include "mm/hugetlb_internal.h"
#include "mm/mm.h"
#include "mm/vma.h"
#include "mmlab/explore.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

constexpr int kPriv = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB;
constexpr int kShared = MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB;
constexpr const char* k2M = "hugepages-2048kB";
constexpr const char* k1G = "hugepages-1048576kB";

class HugetlbTest : public MmTest {
 protected:
  HugetlbTest() { ram_bytes = 4ull << 30; }

  // The checker with the processes alive, the pools' own audit before and
  // after every process exits, then MmTest's checks of the empty system.
  void TearDown() override {
    if (sys) {
      EXPECT_EQ(hugetlb_pool_audit(sys->kernel()), "");
      CheckReport live = sys->check();
      EXPECT_TRUE(live.ok()) << "before exit:\n" << live.to_string();
      for (Process* q : sys->processes()) q->exit();
      EXPECT_EQ(hugetlb_pool_audit(sys->kernel()), "");
    }
    MmTest::TearDown();
  }

  std::string attr_path(const char* dir, const char* attr) { return std::string("hugepages/") + dir + "/" + attr; }
  long attr(const char* attr, const char* dir = k2M) {
    std::string v;
    EXPECT_EQ(sys->sysfs_read(attr_path(dir, attr), &v), 0) << attr;
    return std::stol(v);
  }
  void set_pool(long n, const char* dir = k2M) { set(attr_path(dir, "nr_hugepages"), std::to_string(n)); }
  long nr(const char* dir = k2M) { return attr("nr_hugepages", dir); }
  long free_pages(const char* dir = k2M) { return attr("free_hugepages", dir); }
  long resv(const char* dir = k2M) { return attr("resv_hugepages", dir); }
  long surplus(const char* dir = k2M) { return attr("surplus_hugepages", dir); }

  // The pool is back to rest: every page free, nothing reserved.
  void expect_idle(long n, const char* dir = k2M) {
    EXPECT_EQ(nr(dir), n);
    EXPECT_EQ(free_pages(dir), n);
    EXPECT_EQ(resv(dir), 0);
    EXPECT_EQ(surplus(dir), 0);
  }

  uint64_t map(Process* q, uint64_t len, int flags = kPriv) {
    long a = q->mmap(0, len, RW, flags);
    EXPECT_GT(a, 0) << "mmap: " << errno_name(static_cast<int>(-a));
    return a > 0 ? static_cast<uint64_t>(a) : 0;
  }
  uint64_t map(uint64_t len, int flags = kPriv) { return map(p, len, flags); }
  // A free, huge-page aligned range of len to move a mapping to.
  uint64_t free_area(uint64_t len) {
    uint64_t area = map_aligned(len);
    EXPECT_EQ(p->munmap(area, len), 0);
    return area;
  }

  AccessResult write_byte(Process* q, uint64_t addr, uint8_t v) { return q->write(addr, &v, 1); }
  // A pool of `pool` 2M pages and a private mapping of one, written (its
  // reservation consumed). 0 on failure.
  uint64_t map_written_page(long pool, uint8_t v) {
    set_pool(pool);
    uint64_t a = map(PMD_SIZE);
    if (!a || !write_byte(p, a, v).ok()) {
      ADD_FAILURE() << "no written hugetlb page";
      return 0;
    }
    EXPECT_EQ(resv(), 0);
    return a;
  }
  int read_byte(Process* q, uint64_t addr) {
    uint8_t v = 0;
    AccessResult r = q->read(addr, &v, 1);
    return r.ok() ? v : -static_cast<int>(r.sig);
  }
  pfn_t pfn_at(Process* q, uint64_t addr) { return entry_at(q, addr).pfn; }
  // A fault as GUP raises it (handle_mm_fault under mmap_lock).
  vm_fault_t fault(Process* q, uint64_t addr, fault_flags_t flags) {
    Mm* mm = q->mm();
    mmap_read_lock(mm);
    Vma* v = vma_lookup(mm, addr);
    vm_fault_t r = v ? handle_mm_fault(v, addr, flags) : VM_FAULT_SIGSEGV;
    mmap_read_unlock(mm);
    return r;
  }
  Folio* folio_at(Process* q, uint64_t addr) {
    PhysMem* phys = sys->kernel()->phys.get();
    return page_folio(phys->pfn_to_page(pfn_at(q, addr)));
  }
};

// ---- pools ----

TEST_F(HugetlbTest, PoolGrowsAndShrinks) {
  const uint64_t free0 = sys->nr_free_pages();
  set_pool(4);
  expect_idle(4);
  EXPECT_EQ(sys->nr_free_pages(), free0 - 4 * HPAGE_PMD_NR);
  EXPECT_EQ(sys->kernel()->settings.nr_hugepages_2m.load(), 4);
  set_pool(1);
  expect_idle(1);
  EXPECT_EQ(sys->nr_free_pages(), free0 - HPAGE_PMD_NR);
  set_pool(0);
  expect_idle(0);
  EXPECT_EQ(sys->nr_free_pages(), free0);
  EXPECT_EQ(sys->kernel()->settings.nr_hugepages_2m.load(), 0);
}

// A machine of 1 GiB: a pool that takes all of it is freed (and, in debug
// builds, poisoned) a quarter as slowly as one of the fixture's 4 GiB.
class HugetlbSmallTest : public HugetlbTest {
 protected:
  HugetlbSmallTest() { ram_bytes = 1ull << 30; }
};

TEST_F(HugetlbSmallTest, PoolStopsAtAllocationFailure) {
  // 1 GiB of RAM cannot hold 750 pages of 2 MiB: the value read back is what
  // was obtained, as nr_hugepages_store does.
  set_pool(750);
  long got = nr();
  EXPECT_GT(got, 250);
  EXPECT_LT(got, 750);
  EXPECT_EQ(free_pages(), got);
  set_pool(0);
  expect_idle(0);
}

TEST_F(HugetlbTest, GiganticPool) {
  const uint64_t free0 = sys->nr_free_pages();
  set_pool(2, k1G);
  expect_idle(2, k1G);
  EXPECT_EQ(sys->nr_free_pages(), free0 - 2ull * HPAGE_PUD_NR);
  EXPECT_EQ(sys->kernel()->settings.nr_hugepages_1g.load(), 2);
  set_pool(0, k1G);
  expect_idle(0, k1G);
  EXPECT_EQ(sys->nr_free_pages(), free0);
}

TEST_F(HugetlbTest, SysfsErrors) {
  EXPECT_EQ(sys->sysfs_write(attr_path(k2M, "nr_hugepages"), "abc"), -EINVAL);
  EXPECT_EQ(sys->sysfs_write(attr_path(k2M, "nr_hugepages"), "-1"), -EINVAL);
  EXPECT_EQ(sys->sysfs_write(attr_path(k2M, "nr_hugepages"), "2\n"), 0);
  EXPECT_EQ(nr(), 2);
  EXPECT_EQ(sys->sysfs_write(attr_path(k2M, "free_hugepages"), "1"), -EACCES);
  EXPECT_EQ(sys->sysfs_write(attr_path(k2M, "no_such_file"), "1"), -ENOENT);
  std::string v;
  EXPECT_EQ(sys->sysfs_read("hugepages/hugepages-4096kB/nr_hugepages", &v), -ENOENT);
  EXPECT_EQ(attr("nr_overcommit_hugepages"), 0);
}

// ---- reservations ----

TEST_F(HugetlbTest, PrivateMappingReservesAtMmap) {
  set_pool(4);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_TRUE(is_aligned(a, PMD_SIZE));
  EXPECT_EQ(free_pages(), 4);
  EXPECT_EQ(resv(), 2);
  ASSERT_TRUE(write_byte(p, a, 1).ok());  // consumes one reservation
  EXPECT_EQ(free_pages(), 3);
  EXPECT_EQ(resv(), 1);
  ASSERT_TRUE(write_byte(p, a + 1, 2).ok());  // same page: nothing new
  EXPECT_EQ(free_pages(), 3);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), HPAGE_PMD_NR);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  expect_idle(4);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), 0);
}

TEST_F(HugetlbTest, NoReserveMapping) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE, kPriv | MAP_NORESERVE);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 0);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  expect_idle(2);
}

TEST_F(HugetlbTest, MmapBeyondThePool) {
  set_pool(1);
  EXPECT_EQ(p->mmap(0, 2 * PMD_SIZE, RW, kPriv), -ENOMEM);
  EXPECT_EQ(p->mmap(0, 2 * PMD_SIZE, RW, kShared), -ENOMEM);
  expect_idle(1);
  // Without a reservation the mapping succeeds and the second page's fault
  // finds no page: SIGBUS.
  uint64_t a = map(2 * PMD_SIZE, kPriv | MAP_NORESERVE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  AccessResult r = write_byte(p, a + PMD_SIZE, 1);
  EXPECT_EQ(r.sig, Signal::kSigbus);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  expect_idle(1);
}

TEST_F(HugetlbTest, NoPoolNoMapping) { EXPECT_EQ(p->mmap(0, PMD_SIZE, RW, kPriv), -ENOMEM); }

TEST_F(HugetlbTest, MapHugetlbRoundsTheLength) {
  // ksys_mmap_pgoff aligns a MAP_HUGETLB length up to the huge page size.
  set_pool(1);
  uint64_t a = map(PAGE_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 1);
  ASSERT_TRUE(write_byte(p, a + PMD_SIZE - 1, 7).ok());
  EXPECT_EQ(p->munmap(a, PMD_SIZE), 0);
  expect_idle(1);
}

TEST_F(HugetlbTest, UnalignedIsEinval) {
  set_pool(2);
  // MAP_FIXED at an address that is not huge-page aligned.
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(p->mmap(a + PAGE_SIZE, PMD_SIZE, RW, kPriv | MAP_FIXED), -EINVAL);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  // The VMA-level checks of the hugetlb layer.
  auto f = [&] {
    int err = 0;
    return hugetlb_file_setup(sys->kernel(), PMD_SIZE, PMD_SHIFT, &err);
  }();
  ASSERT_TRUE(f);
  Vma v;
  v.vm_mm = p->mm();
  v.vm_file = f;
  v.vm_start = 0x40000000;
  v.vm_end = v.vm_start + PMD_SIZE + PAGE_SIZE;  // length not a multiple
  v.vm_flags = VM_READ | VM_MAYREAD | VM_MAYWRITE | VM_NORESERVE;
  EXPECT_EQ(hugetlb_file_mmap(f.get(), &v), -EINVAL);
  v.vm_end = v.vm_start + PMD_SIZE;
  v.vm_pgoff = 1;  // file offset not a multiple
  EXPECT_EQ(hugetlb_file_mmap(f.get(), &v), -EINVAL);
  EXPECT_TRUE(v.vm_flags & VM_HUGETLB);
  EXPECT_EQ(hugetlb_split_check(&v, v.vm_start + PAGE_SIZE), -EINVAL);
  EXPECT_EQ(hugetlb_split_check(&v, v.vm_start + PMD_SIZE), 0);
  int err = 0;
  EXPECT_FALSE(hugetlb_file_setup(sys->kernel(), PMD_SIZE, 22, &err));
  EXPECT_EQ(err, -EINVAL);
  expect_idle(2);
}

TEST_F(HugetlbTest, PartialMunmapIsEinval) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  // split_vma refuses a split inside a huge page (hugetlb_split_check).
  ASSERT_EQ(p->munmap(a, PAGE_SIZE), -EINVAL);
  // At a huge page boundary the VMA splits; the pieces keep the reservation.
  EXPECT_EQ(p->munmap(a + PMD_SIZE, PMD_SIZE), 0);
  EXPECT_EQ(resv(), 1);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(p->munmap(a, PMD_SIZE), 0);
  expect_idle(2);
}

TEST_F(HugetlbTest, SplitPiecesShareTheReservation) {
  set_pool(4);
  uint64_t a = map(4 * PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 4);
  // Unmap the first page: the rest keeps its three reservations.
  ASSERT_EQ(p->munmap(a, PMD_SIZE), 0);
  EXPECT_EQ(resv(), 3);
  for (int i = 1; i < 4; i++) ASSERT_TRUE(write_byte(p, a + i * PMD_SIZE, 1).ok());
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 1);
  ASSERT_EQ(p->munmap(a + PMD_SIZE, 3 * PMD_SIZE), 0);
  expect_idle(4);
  // Unmap the last page: the VMA that stays keeps the others.
  uint64_t b = map(4 * PMD_SIZE);
  ASSERT_TRUE(b);
  ASSERT_EQ(p->munmap(b + 3 * PMD_SIZE, PMD_SIZE), 0);
  EXPECT_EQ(resv(), 3);
  ASSERT_EQ(p->munmap(b + PMD_SIZE, PMD_SIZE), 0);  // a hole in the middle
  EXPECT_EQ(resv(), 2);
  ASSERT_TRUE(write_byte(p, b + 2 * PMD_SIZE, 1).ok());
  EXPECT_EQ(resv(), 1);
  ASSERT_EQ(p->munmap(b, 4 * PMD_SIZE), 0);
  expect_idle(4);
}

// ---- leaves and data ----

TEST_F(HugetlbTest, FaultMapsPmdLeaf) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  expect_bytes(p, a + 12345, 100, 0);  // a read fault maps a zeroed page
  PteDumpEntry e = entry_at(a);
  EXPECT_EQ(e.level, 2);
  EXPECT_EQ(e.folio_order, static_cast<int>(PMD_ORDER));
  EXPECT_FALSE(e.bits & _PAGE_RW);  // private: read-only until written
  ASSERT_TRUE(p->fill(a, 0x5a, PMD_SIZE).ok());
  e = entry_at(a + PMD_SIZE - 1);
  EXPECT_EQ(e.level, 2);
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_TRUE(e.bits & _PAGE_DIRTY);
  expect_bytes(p, a, PMD_SIZE, 0x5a);
  Folio* f = folio_at(p, a);
  EXPECT_TRUE(folio_test_hugetlb(f));
  EXPECT_TRUE(folio_test_anon(f));
  EXPECT_TRUE(PageAnonExclusive(&f->page));
  EXPECT_FALSE(folio_test_lru(f));
  EXPECT_EQ(folio_mapcount(f), 1);
  EXPECT_EQ(folio_ref_count(f), 1);
  // hugetlb pages are not in RssAnon; smaps shows them as Private_Hugetlb.
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_NE(p->smaps().find("Private_Hugetlb:    2048 kB"), std::string::npos) << p->smaps();
  EXPECT_EQ(sys->mthp_stat(PMD_ORDER, "nr_anon"), 0);
  EXPECT_EQ(sys->vmstat("nr_anon_transparent_hugepages"), 0);
}

TEST_F(HugetlbTest, FaultMapsPudLeaf) {
  set_pool(1, k1G);
  long a = p->mmap(0, PUD_SIZE, RW, kPriv | MAP_HUGE_1GB);
  ASSERT_GT(a, 0) << errno_name(static_cast<int>(-a));
  const uint64_t addr = static_cast<uint64_t>(a);
  EXPECT_TRUE(is_aligned(addr, PUD_SIZE));
  EXPECT_EQ(resv(k1G), 1);
  ASSERT_TRUE(p->fill(addr + PUD_SIZE - PMD_SIZE, 0x77, PMD_SIZE).ok());
  PteDumpEntry e = entry_at(addr);
  EXPECT_EQ(e.level, 3);
  EXPECT_EQ(e.folio_order, static_cast<int>(PUD_ORDER));
  EXPECT_TRUE(e.bits & _PAGE_RW);
  expect_bytes(p, addr + PUD_SIZE - PMD_SIZE, PMD_SIZE, 0x77);
  expect_bytes(p, addr, PAGE_SIZE, 0);
  EXPECT_EQ(free_pages(k1G), 0);
  EXPECT_EQ(resv(k1G), 0);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), HPAGE_PUD_NR);
  EXPECT_EQ(p->munmap(addr, PUD_SIZE), 0);
  expect_idle(1, k1G);
}

TEST_F(HugetlbTest, MixedSizesInOneProcess) {
  set_pool(2);
  set_pool(1, k1G);
  uint64_t a = map(2 * PMD_SIZE);
  long b = p->mmap(0, PUD_SIZE, RW, kPriv | MAP_HUGE_1GB);
  ASSERT_TRUE(a);
  ASSERT_GT(b, 0);
  ASSERT_TRUE(write_byte(p, a + PMD_SIZE, 3).ok());
  ASSERT_TRUE(write_byte(p, static_cast<uint64_t>(b) + 5, 4).ok());
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), 3);
  EXPECT_EQ(read_byte(p, static_cast<uint64_t>(b) + 5), 4);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), HPAGE_PMD_NR + HPAGE_PUD_NR);
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(free_pages(k1G), 0);
}

// ---- CoW after fork ----

TEST_F(HugetlbTest, PrivateCowAfterFork) {
  set_pool(2);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  Folio* f = folio_at(p, a);
  EXPECT_EQ(folio_mapcount(f), 2);
  EXPECT_FALSE(PageAnonExclusive(&f->page));
  EXPECT_FALSE(entry_at(p, a).bits & _PAGE_RW);
  EXPECT_FALSE(entry_at(c, a).bits & _PAGE_RW);
  EXPECT_EQ(hugetlb_usage_pages(c->mm()), HPAGE_PMD_NR);
  // The parent writes: a copy, from the spare page.
  ASSERT_TRUE(p->fill(a, 0x22, PMD_SIZE).ok());
  EXPECT_EQ(free_pages(), 0);
  EXPECT_NE(pfn_at(p, a), pfn_at(c, a));
  expect_bytes(c, a, PMD_SIZE, 0x11);
  expect_bytes(p, a, PMD_SIZE, 0x22);
  // The child's write now reuses its page (mapcount 1).
  pfn_t cp = pfn_at(c, a);
  ASSERT_TRUE(write_byte(c, a, 0x33).ok());
  EXPECT_EQ(pfn_at(c, a), cp);
  EXPECT_EQ(read_byte(p, a), 0x22);
  c->exit();
  p->exit();
  expect_idle(2);
}

TEST_F(HugetlbTest, OwnerWithoutSpareUnmapsFromChild) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  pfn_t old = pfn_at(p, a);
  // No spare page: the reservation owner takes the page back from the child
  // (unmap_ref_private) and reuses it.
  ASSERT_TRUE(p->fill(a, 0x22, PMD_SIZE).ok());
  EXPECT_EQ(pfn_at(p, a), old);
  expect_bytes(p, a, PMD_SIZE, 0x22);
  EXPECT_EQ(entry_at(c, a).level, 0);
  EXPECT_EQ(hugetlb_usage_pages(c->mm()), 0);
  // The child is killed on its next access there (HPAGE_RESV_UNMAPPED).
  uint8_t v;
  EXPECT_EQ(c->read(a, &v, 1).sig, Signal::kSigbus);
  EXPECT_EQ(c->write(a, &v, 1).sig, Signal::kSigbus);
  c->exit();
  p->exit();
  expect_idle(1);
}

TEST_F(HugetlbTest, NonOwnerWithoutSpareGetsSigbus) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  // The child has no reservation and there is no free page: SIGBUS, and
  // the counter that lets stress's tracker tell it from a model bug moves,
  // on this thread's tally.
  {
    EventTally tally;
    EXPECT_EQ(write_byte(c, a, 0x99).sig, Signal::kSigbus);
    EXPECT_EQ(tally.at(EventTally::slot("fault.hugetlb_cow_nopage")), 1);
  }
  EXPECT_EQ(read_byte(c, a), 0x11);  // reading the shared page still works
  expect_bytes(p, a, PMD_SIZE, 0x11);
  c->exit();
  // Alone again, the parent writes in place.
  pfn_t old = pfn_at(p, a);
  ASSERT_TRUE(write_byte(p, a, 0x22).ok());
  EXPECT_EQ(pfn_at(p, a), old);
}

TEST_F(HugetlbTest, OwnerUnmapsWhileChildMaps) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  // The owner's unmap restores its reservation on the folio (given back to
  // the pool when the child lets go of it) and closing gives it up again.
  ASSERT_EQ(p->munmap(a, PMD_SIZE), 0);
  expect_bytes(c, a, PMD_SIZE, 0x11);
  ASSERT_TRUE(write_byte(c, a, 0x22).ok());  // alone now: reused
  EXPECT_EQ(read_byte(c, a), 0x22);
  c->exit();
  expect_idle(1);
}

TEST_F(HugetlbTest, OwnerExitReleasesItsReservation) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 2);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_EQ(resv(), 2);  // the child has none
  p->exit();
  EXPECT_EQ(resv(), 0);
  ASSERT_TRUE(write_byte(c, a, 1).ok());  // from the unreserved pool
  EXPECT_EQ(free_pages(), 1);
  c->exit();
  expect_idle(2);
}

TEST_F(HugetlbTest, ReuseByMapcountAfterChildExit) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  c->exit();
  pfn_t old = pfn_at(p, a);
  sys->reset_counters();
  ASSERT_TRUE(write_byte(p, a, 0x22).ok());
  EXPECT_EQ(pfn_at(p, a), old);
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 1);
  EXPECT_EQ(sys->counter("fault.wp_copy"), 0);
  EXPECT_TRUE(PageAnonExclusive(&folio_at(p, a)->page));
}

TEST_F(HugetlbTest, ReuseIgnoresExtraReferences) {
  // hugetlb_wp reuses on mapcount 1 even with another reference held (a pipe
  // after vmsplice): the reason cow.c's vmsplice cases XFAIL on hugetlb.
  set_pool(2);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  Folio* f = folio_at(c, a);
  folio_get(f);  // the "pipe" reference, taken in the child
  c->exit();
  EXPECT_EQ(folio_ref_count(f), 2);
  pfn_t old = pfn_at(p, a);
  ASSERT_TRUE(write_byte(p, a, 0x22).ok());
  EXPECT_EQ(pfn_at(p, a), old);  // reused: the "pipe" sees the parent's write
  EXPECT_EQ(free_pages(), 1);
  folio_put(f);
}

TEST_F(HugetlbTest, UnshareCopiesASharedPage) {
  // A R/O long-term pin of a page shared with a child first unshares it:
  // an exclusive copy, still mapped read-only.
  set_pool(2);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  sys->reset_counters();
  ASSERT_EQ(fault(p, a, FAULT_FLAG_UNSHARE), 0u);
  EXPECT_NE(pfn_at(p, a), pfn_at(c, a));
  EXPECT_FALSE(entry_at(p, a).bits & _PAGE_RW);
  EXPECT_TRUE(PageAnonExclusive(&folio_at(p, a)->page));
  EXPECT_EQ(sys->counter("fault.unshare"), 1);
  expect_bytes(p, a, PMD_SIZE, 0x11);
  // Unsharing an exclusive page changes nothing; the write then reuses it.
  pfn_t mine = pfn_at(p, a);
  ASSERT_EQ(fault(p, a, FAULT_FLAG_UNSHARE), 0u);
  ASSERT_TRUE(write_byte(p, a, 0x22).ok());
  EXPECT_EQ(pfn_at(p, a), mine);
  EXPECT_EQ(sys->counter("fault.wp_copy"), 0);
  EXPECT_EQ(read_byte(c, a), 0x11);
}

TEST_F(HugetlbTest, GiganticCowAfterFork) {
  set_pool(2, k1G);
  long r = p->mmap(0, PUD_SIZE, RW, kPriv | MAP_HUGE_1GB);
  ASSERT_GT(r, 0);
  const uint64_t a = static_cast<uint64_t>(r);
  ASSERT_TRUE(write_byte(p, a + PUD_SIZE - 1, 0x11).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  sys->reset_counters();
  ASSERT_TRUE(write_byte(c, a + PUD_SIZE - 1, 0x22).ok());  // the child copies 1 GiB
  EXPECT_EQ(sys->counter("bytes.copied"), static_cast<int64_t>(PUD_SIZE));
  EXPECT_EQ(read_byte(p, a + PUD_SIZE - 1), 0x11);
  EXPECT_EQ(read_byte(c, a + PUD_SIZE - 1), 0x22);
  EXPECT_EQ(entry_at(c, a).level, 3);
  EXPECT_EQ(free_pages(k1G), 0);
}

TEST_F(HugetlbTest, GiganticOwnerTakesBackFromChild) {
  set_pool(1, k1G);
  long r = p->mmap(0, PUD_SIZE, RW, kPriv | MAP_HUGE_1GB);
  ASSERT_GT(r, 0);
  const uint64_t a = static_cast<uint64_t>(r);
  ASSERT_TRUE(write_byte(p, a + 4096, 0x11).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_EQ(entry_at(c, a).level, 3);
  EXPECT_EQ(read_byte(c, a + 4096), 0x11);
  EXPECT_EQ(folio_mapcount(folio_at(p, a)), 2);
  pfn_t old = pfn_at(p, a);
  ASSERT_TRUE(write_byte(p, a + 4096, 0x22).ok());  // no spare 1 GiB page: unmap from the child
  EXPECT_EQ(pfn_at(p, a), old);
  EXPECT_EQ(read_byte(c, a), -static_cast<int>(Signal::kSigbus));
  c->exit();
  p->exit();
  expect_idle(1, k1G);
}

TEST_F(HugetlbTest, ConcurrentFaults) {
  constexpr int kPages = 8, kThreads = 4;
  set_pool(2 * kPages + 1);
  uint64_t a = map(kPages * PMD_SIZE);
  uint64_t s = map(kPages * PMD_SIZE, kShared);
  ASSERT_TRUE(a);
  ASSERT_TRUE(s);
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kPages; i++) {
        uint64_t off = static_cast<uint64_t>((t + i) % kPages) * PMD_SIZE + t;
        EXPECT_TRUE(write_byte(p, a + off, static_cast<uint8_t>(t + 1)).ok());
        EXPECT_TRUE(write_byte(p, s + off, static_cast<uint8_t>(t + 1)).ok());
      }
    });
  }
  for (auto& t : ts) t.join();
  // One page per index, whoever faulted first.
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(resv(), 0);
  for (int i = 0; i < kPages; i++)
    for (int t = 0; t < kThreads; t++) {
      EXPECT_EQ(read_byte(p, a + static_cast<uint64_t>(i) * PMD_SIZE + t), t + 1);
      EXPECT_EQ(read_byte(p, s + static_cast<uint64_t>(i) * PMD_SIZE + t), t + 1);
    }
}

TEST_F(HugetlbTest, ConcurrentCowAfterFork) {
  constexpr int kPages = 4;
  set_pool(3 * kPages);  // enough for both sides to copy every page at once
  uint64_t a = map(kPages * PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, kPages * PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  std::atomic<int> ready{0};
  auto writer = [&](Process* q, uint8_t byte) {
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    for (int i = 0; i < kPages; i++)
      EXPECT_TRUE(q->fill(a + static_cast<uint64_t>(i) * PMD_SIZE, byte, PMD_SIZE).ok());
  };
  std::thread tp(writer, p, 0x22), tc(writer, c, 0x33);
  tp.join();
  tc.join();
  expect_bytes(p, a, kPages * PMD_SIZE, 0x22);
  expect_bytes(c, a, kPages * PMD_SIZE, 0x33);
  // Each side ends with a page of its own per index; the old pages are free.
  EXPECT_EQ(free_pages(), kPages);
  c->exit();
  p->exit();
  expect_idle(3 * kPages);
}

TEST_F(HugetlbTest, ChangeProtectionWriteProtects) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  ASSERT_TRUE(entry_at(a).bits & _PAGE_RW);
  Mm* mm = p->mm();
  mmap_write_lock(mm);
  Vma* v = vma_lookup(mm, a);
  EXPECT_EQ(hugetlb_change_protection(v, a, a + PMD_SIZE, vm_get_page_prot(VM_READ)),
            static_cast<long>(HPAGE_PMD_NR));
  mmap_write_unlock(mm);
  EXPECT_FALSE(entry_at(a).bits & _PAGE_RW);
  EXPECT_EQ(entry_at(a).level, 2);
  // Still exclusive: the next write fault reuses the page.
  pfn_t old = pfn_at(p, a);
  ASSERT_TRUE(write_byte(p, a, 2).ok());
  EXPECT_EQ(pfn_at(p, a), old);
  EXPECT_EQ(read_byte(p, a), 2);
}

TEST_F(HugetlbTest, PinnedPageIsCopiedAtFork) {
  set_pool(2);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x11, PMD_SIZE).ok());
  // A FOLL_PIN of the page (what pin_user_pages leaves behind).
  Folio* f = folio_at(p, a);
  p->mm()->set_flag(MMF_HAS_PINNED);
  folio_ref_add(f, 1);
  aref(folio_page(f, 1)->f1.pincount).fetch_add(1);
  sys->reset_counters();
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  // The child got its own copy; the parent keeps the pinned page exclusive
  // and writable.
  EXPECT_NE(pfn_at(c, a), pfn_at(p, a));
  EXPECT_EQ(sys->counter("fork.copied_pages"), static_cast<int64_t>(HPAGE_PMD_NR));
  EXPECT_TRUE(PageAnonExclusive(&f->page));
  EXPECT_TRUE(entry_at(p, a).bits & _PAGE_RW);
  EXPECT_EQ(free_pages(), 0);
  expect_bytes(c, a, PMD_SIZE, 0x11);
  ASSERT_TRUE(write_byte(p, a, 0x22).ok());
  EXPECT_EQ(read_byte(c, a), 0x11);
  aref(folio_page(f, 1)->f1.pincount).fetch_sub(1);
  folio_put(f);
}

TEST_F(HugetlbTest, PinnedPageWithoutSpareFailsFork) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  Folio* f = folio_at(p, a);
  p->mm()->set_flag(MMF_HAS_PINNED);
  folio_ref_add(f, 1);
  aref(folio_page(f, 1)->f1.pincount).fetch_add(1);
  Process* c = p->fork("child");
  EXPECT_EQ(c, nullptr);  // the copy needs a free huge page
  aref(folio_page(f, 1)->f1.pincount).fetch_sub(1);
  folio_put(f);
  EXPECT_EQ(read_byte(p, a), 1);
}

// ---- shared mappings ----

TEST_F(HugetlbTest, SharedAnonymousAcrossFork) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE, kShared);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 2);
  ASSERT_TRUE(write_byte(p, a, 0x11).ok());
  EXPECT_EQ(resv(), 1);
  EXPECT_TRUE(entry_at(a).bits & _PAGE_RW);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  ASSERT_TRUE(write_byte(c, a + 1, 0x22).ok());
  ASSERT_TRUE(write_byte(c, a + PMD_SIZE, 0x33).ok());  // the second page, seen by both
  EXPECT_EQ(read_byte(p, a + 1), 0x22);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), 0x33);
  EXPECT_EQ(pfn_at(p, a), pfn_at(c, a));
  Folio* f = folio_at(p, a);
  EXPECT_FALSE(folio_test_anon(f));
  EXPECT_EQ(folio_mapcount(f), 2);
  EXPECT_EQ(folio_ref_count(f), 2 + static_cast<int>(HPAGE_PMD_NR));  // two mappings + the page cache
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(resv(), 0);
  c->exit();
  p->exit();
  expect_idle(2);
}

TEST_F(HugetlbTest, HugetlbfsFileShared) {
  set_pool(4);  // two shared pages, and two reserved by the private mapping below
  int fd = sys->create_file(2 * PMD_SIZE, FsClass::kHugetlbfs, PMD_SHIFT, "huge");
  ASSERT_GE(fd, 0) << errno_name(-fd);
  Process* q = sys->new_process("other");
  long a = p->mmap_file(0, 2 * PMD_SIZE, RW, MAP_SHARED, fd);
  long b = q->mmap_file(0, 2 * PMD_SIZE, RW, MAP_SHARED, fd);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  const uint64_t pa = static_cast<uint64_t>(a), qb = static_cast<uint64_t>(b);
  ASSERT_TRUE(p->fill(pa, 0x5a, PMD_SIZE).ok());
  expect_bytes(q, qb, PMD_SIZE, 0x5a);
  ASSERT_TRUE(write_byte(q, qb + PMD_SIZE + 7, 0x44).ok());
  EXPECT_EQ(read_byte(p, pa + PMD_SIZE + 7), 0x44);
  EXPECT_EQ(pfn_at(p, pa), pfn_at(q, qb));
  char buf[2] = {};
  EXPECT_EQ(sys->file_pread(fd, PMD_SIZE + 7, buf, 1), 1);
  EXPECT_EQ(buf[0], 0x44);
  // A private mapping of the same file reads the page cache and copies on write.
  long c = p->mmap_file(0, 2 * PMD_SIZE, RW, MAP_PRIVATE, fd);
  ASSERT_GT(c, 0);
  const uint64_t pc = static_cast<uint64_t>(c);
  EXPECT_EQ(read_byte(p, pc), 0x5a);
  EXPECT_EQ(pfn_at(p, pc), pfn_at(p, pa));
  ASSERT_TRUE(write_byte(p, pc, 0x66).ok());
  EXPECT_NE(pfn_at(p, pc), pfn_at(p, pa));
  EXPECT_EQ(read_byte(p, pa), 0x5a);
  EXPECT_EQ(read_byte(q, qb), 0x5a);
  q->exit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(4);
}

TEST_F(HugetlbTest, CreateFileErrors) {
  set_pool(1);
  int fd = sys->create_file(PMD_SIZE + PAGE_SIZE, FsClass::kHugetlbfs, PMD_SHIFT);
  EXPECT_EQ(fd, -EINVAL);  // hugetlbfs files are whole huge pages
  EXPECT_EQ(sys->create_file(2 * PMD_SIZE, FsClass::kHugetlbfs, PMD_SHIFT), -ENOSPC);
  expect_idle(1);
  fd = sys->create_file(PMD_SIZE, FsClass::kHugetlbfs, PMD_SHIFT);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(free_pages(), 0);
  // Beyond EOF: SIGBUS, even in a private mapping.
  long a = p->mmap_file(0, 2 * PMD_SIZE, PROT_READ, MAP_PRIVATE | MAP_NORESERVE, fd);
  ASSERT_GT(a, 0);
  EXPECT_EQ(read_byte(p, static_cast<uint64_t>(a)), 0);
  EXPECT_EQ(read_byte(p, static_cast<uint64_t>(a) + PMD_SIZE), -static_cast<int>(Signal::kSigbus));
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(1);
}

TEST_F(HugetlbTest, SharedFileReservationOnce) {
  set_pool(2);
  int fd = sys->create_file(0, FsClass::kHugetlbfs, PMD_SHIFT, "empty");
  ASSERT_GE(fd, 0) << errno_name(-fd);
  // Two shared mappings of one range reserve it once; a third page is too many.
  long a = p->mmap_file(0, 2 * PMD_SIZE, RW, MAP_SHARED, fd);
  ASSERT_GT(a, 0);
  EXPECT_EQ(resv(), 2);
  long b = p->mmap_file(0, 2 * PMD_SIZE, RW, MAP_SHARED, fd);
  ASSERT_GT(b, 0);
  EXPECT_EQ(resv(), 2);
  EXPECT_EQ(p->mmap_file(0, 3 * PMD_SIZE, RW, MAP_SHARED, fd), -ENOMEM);
  ASSERT_TRUE(write_byte(p, static_cast<uint64_t>(a), 9).ok());
  EXPECT_EQ(read_byte(p, static_cast<uint64_t>(b)), 9);
  EXPECT_EQ(resv(), 1);
  // Unmapping keeps the file's reservations; closing the file gives them back.
  EXPECT_EQ(p->munmap(static_cast<uint64_t>(a), 2 * PMD_SIZE), 0);
  EXPECT_EQ(p->munmap(static_cast<uint64_t>(b), 2 * PMD_SIZE), 0);
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

TEST_F(HugetlbTest, FallocateFillsThePageCache) {
  set_pool(2);
  int err = 0;
  auto f = hugetlb_file_setup(sys->kernel(), 0, PMD_SHIFT, &err);
  ASSERT_TRUE(f);
  EXPECT_EQ(hugetlb_fallocate(f.get(), 0, 2 * PMD_SIZE), 0);
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(i_size_read(f.get()), 2 * PMD_SIZE);
  EXPECT_EQ(hugetlb_fallocate(f.get(), 0, 3 * PMD_SIZE), -ENOSPC);
  f.reset();  // eviction gives the pages back
  expect_idle(2);
}

// ---- surplus pages, shrinking while in use ----

TEST_F(HugetlbTest, OvercommitUsesSurplusPages) {
  set(attr_path(k2M, "nr_overcommit_hugepages"), "2");
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(nr(), 1);
  EXPECT_EQ(surplus(), 1);
  EXPECT_EQ(resv(), 1);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(p->mmap(0, 2 * PMD_SIZE, RW, kPriv), -ENOMEM);  // beyond the overcommit limit
  EXPECT_EQ(p->munmap(a, PMD_SIZE), 0);
  expect_idle(0);
}

TEST_F(HugetlbTest, ShrinkBelowInUseLeavesSurplus) {
  set_pool(2);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  set_pool(0);
  EXPECT_EQ(nr(), 1);
  EXPECT_EQ(surplus(), 1);
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(p->munmap(a, PMD_SIZE), 0);  // the surplus page leaves the pool when freed
  expect_idle(0);
}

TEST_F(HugetlbTest, ShrinkKeepsReservedPages) {
  set_pool(3);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  set_pool(0);
  EXPECT_EQ(nr(), 2);  // never below in use + reserved
  EXPECT_EQ(free_pages(), 2);
  EXPECT_EQ(surplus(), 2);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  expect_idle(0);
}

// ---- release ----

TEST_F(HugetlbTest, EverythingReleasedAtExit) {
  set_pool(4);
  uint64_t a = map(3 * PMD_SIZE);
  uint64_t s = map(PMD_SIZE, kShared);
  ASSERT_TRUE(a);
  ASSERT_TRUE(s);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  ASSERT_TRUE(write_byte(p, s, 1).ok());
  EXPECT_EQ(resv(), 2);
  p->exit();
  expect_idle(4);
  EXPECT_TRUE(sys->check().ok()) << sys->check().to_string();
}

TEST_F(HugetlbTest, MadviseDontneedRestoresTheReservation) {
  uint64_t a = map_written_page(1, 5);
  ASSERT_TRUE(a);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_DONTNEED), 0);
  // The page went back to the pool with its reservation: nobody can take it.
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(read_byte(p, a), 0);
  EXPECT_EQ(resv(), 0);
}

// A directed run's own fixture: empty, the test's System is the state.
struct HugetlbZapRun {};

// MADV_DONTNEED of an owner's page while another thread faults the same
// index (a GUP of another thread's region, as in `mmlab stress`): both hold
// the mmap_lock (or the VMA lock) for read. The kernel's zap holds the
// hugetlb VMA lock (resv_map->rw_sema) for write from the unmap to the
// reservation restore, and the fault holds it for read, so the fault finds
// the reservation restored. Without it, the fault came in between, took a
// page nobody had reserved and left the index consumed; the zap then put a
// reservation back for an index that was mapped again; the next zap found
// it reserved already, yet its folio still gave one back when freed, and
// munmap left resv_huge_pages at 1 for good (stress: "frames leaked: 512"
// with a pool page kept for it).
TEST_F(HugetlbTest, DontneedRacingAFaultOfTheIndexKeepsTheReservationCount) {
  uint64_t a = map_written_page(2, 1);
  ASSERT_TRUE(a);
  // Between the unmap and the restore (the label hugetlb_zap.after_unmap):
  // another thread writes the page, to its end or until it waits on the
  // hugetlb VMA lock, then the zap goes on.
  explore::Race<HugetlbZapRun> race;
  race.thread("Z", [&](HugetlbZapRun&) { ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_DONTNEED), 0); });
  race.thread("F", [&](HugetlbZapRun&) { EXPECT_TRUE(write_byte(p, a, 2).ok()); });
  explore::RunResult r = race.replay_directed("Z@hugetlb_zap.after_unmap F Z");
  ASSERT_EQ(r.outcome, explore::Outcome::kClean) << r.summary() << "\n" << race.explain(r);
  EXPECT_EQ(read_byte(p, a), 2);
  EXPECT_EQ(resv(), 0);
  CheckReport rep = sys->check();
  EXPECT_TRUE(rep.ok()) << rep.to_string();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_DONTNEED), 0);
  EXPECT_EQ(resv(), 1);  // the page went back with its reservation
  ASSERT_EQ(p->munmap(a, PMD_SIZE), 0);
  expect_idle(2);
}

// ---- madvise and mremap of hugetlb mappings ----

// madvise_dontneed_free_valid_vma: a hugetlb VMA takes MADV_DONTNEED from a
// huge-page aligned start only; the end is aligned down, and a range that
// becomes empty zaps nothing.
TEST_F(HugetlbTest, DontneedNeedsAnAlignedStartAndRoundsTheEndDown) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  ASSERT_TRUE(write_byte(p, a + PMD_SIZE, 2).ok());
  EXPECT_EQ(p->madvise(a + PAGE_SIZE, PMD_SIZE, MADV_DONTNEED), -EINVAL);
  EXPECT_EQ(p->madvise(a, PAGE_SIZE, MADV_DONTNEED), 0);  // [a, a) after rounding down
  EXPECT_EQ(read_byte(p, a), 1);
  EXPECT_EQ(p->madvise(a, PMD_SIZE + PAGE_SIZE, MADV_DONTNEED), 0);  // zaps [a, a + 2M)
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), 2);
  EXPECT_EQ(read_byte(p, a), 0);
  EXPECT_EQ(p->madvise(a + PMD_SIZE, PMD_SIZE, 24 /* MADV_DONTNEED_LOCKED */), 0);
  EXPECT_EQ(entry_at(a + PMD_SIZE).level, 0);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  expect_idle(2);
}

// MADV_FREE is not for hugetlb (madvise_dontneed_free_valid_vma), nor are
// MADV_COLD and MADV_PAGEOUT (can_madv_lru_vma).
TEST_F(HugetlbTest, FreeColdAndPageoutAreEinval) {
  set_pool(1);
  uint64_t a = map(PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 3).ok());
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_FREE), -EINVAL);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLD), -EINVAL);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_PAGEOUT), -EINVAL);
  EXPECT_EQ(read_byte(p, a), 3);
}

// align_hugetlb: lengths round up to the huge page size; the old and the
// new address must be huge-page aligned (the new one as passed, even
// without MREMAP_FIXED); a hugetlb mapping never grows; MREMAP_DONTUNMAP is
// refused (VM_DONTEXPAND).
TEST_F(HugetlbTest, MremapArgumentRules) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, 3 * PMD_SIZE, MREMAP_MAYMOVE), -EINVAL);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, 2 * PMD_SIZE + PAGE_SIZE, MREMAP_MAYMOVE), -EINVAL);  // 3 huge pages
  EXPECT_EQ(p->mremap(a + PAGE_SIZE, PMD_SIZE, PMD_SIZE, MREMAP_MAYMOVE), -EINVAL);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, PMD_SIZE, 0, 0x1234000), -EINVAL);
  const uint64_t t = a + 8 * PMD_SIZE;
  EXPECT_EQ(p->mremap(a, PMD_SIZE, PMD_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, t + PAGE_SIZE), -EINVAL);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, 2 * PMD_SIZE, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, t), -EINVAL);
  // Both lengths round to two huge pages: no change.
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE - PAGE_SIZE, 2 * PMD_SIZE - 2 * PAGE_SIZE, 0), static_cast<long>(a));
  EXPECT_EQ(resv(), 2);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  expect_idle(2);
}

// Shrinking unmaps the tail in place; the tail's reservation goes back.
TEST_F(HugetlbTest, MremapShrinksInPlace) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 4).ok());
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, PMD_SIZE + PAGE_SIZE, 0), static_cast<long>(a));  // rounds to 2M: as it was
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, PMD_SIZE, 0), static_cast<long>(a));
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(read_byte(p, a), 4);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), -SIGSEGV);
  EXPECT_EQ(p->munmap(a, PMD_SIZE), 0);
  expect_idle(2);
}

// A move takes the leaves (not copies) and the reservation map along: the
// page at the new place is the old frame, the unfaulted page still has its
// reservation there, and nothing is given back or leaked.
TEST_F(HugetlbTest, MremapMovesAWholePrivateMapping) {
  set_pool(3);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 5).ok());
  const pfn_t pfn = pfn_at(p, a);
  EXPECT_EQ(resv(), 1);
  const uint64_t area = free_area(4 * PMD_SIZE);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, 2 * PMD_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, area), static_cast<long>(area));
  EXPECT_EQ(entry_at(a).level, 0);
  EXPECT_EQ(read_byte(p, a), -SIGSEGV);
  EXPECT_EQ(entry_at(area).level, 2);
  EXPECT_EQ(pfn_at(p, area), pfn);
  EXPECT_EQ(read_byte(p, area), 5);
  EXPECT_EQ(resv(), 1);
  ASSERT_TRUE(write_byte(p, area + PMD_SIZE, 6).ok());  // consumes the moved reservation
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), 2 * 512);
  EXPECT_EQ(p->munmap(area, 2 * PMD_SIZE), 0);
  expect_idle(3);
}

// Moving part of a private mapping: the kernel clears the reservation map
// of the whole source VMA (clear_vma_resv_huge_pages), so the part left
// behind loses its reservations: they are never given back
// (HugePages_Rsvd stays raised; seen on the host too) and a fault there
// needs a page nobody reserved.
TEST_F(HugetlbTest, MremapMovingPartOfAPrivateMappingLeaksTheRest) {
  set_pool(3);
  uint64_t a = map(2 * PMD_SIZE);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 2);
  const uint64_t area = free_area(2 * PMD_SIZE);
  EXPECT_EQ(p->mremap(a, PMD_SIZE, PMD_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, area), static_cast<long>(area));
  EXPECT_EQ(resv(), 2);
  ASSERT_TRUE(write_byte(p, a + PMD_SIZE, 7).ok());  // no reservation here any more
  EXPECT_EQ(resv(), 2);
  EXPECT_EQ(free_pages(), 2);
  ASSERT_TRUE(write_byte(p, area, 8).ok());  // the moved part still has its own
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(p->munmap(a + PMD_SIZE, PMD_SIZE), 0);
  EXPECT_EQ(p->munmap(area, PMD_SIZE), 0);
  EXPECT_EQ(free_pages(), 3);
  EXPECT_EQ(resv(), 1);  // leaked for good, as in the kernel
}

// A shared mapping moves without touching the file's reservations.
TEST_F(HugetlbTest, MremapMovesASharedMapping) {
  set_pool(2);
  uint64_t a = map(2 * PMD_SIZE, kShared);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a + PMD_SIZE, 9).ok());
  EXPECT_EQ(resv(), 1);
  const uint64_t area = free_area(2 * PMD_SIZE);
  EXPECT_EQ(p->mremap(a, 2 * PMD_SIZE, 2 * PMD_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, area), static_cast<long>(area));
  EXPECT_EQ(read_byte(p, area + PMD_SIZE), 9);
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(p->mremap(area, 2 * PMD_SIZE, PMD_SIZE, 0), static_cast<long>(area));  // shrink: the file keeps its pages
  EXPECT_EQ(p->munmap(area, PMD_SIZE), 0);
  p->exit();
  expect_idle(2);
}

// ---- truncation and hole punching (fs/hugetlbfs/inode.c) ----

class HugetlbTruncateTest : public HugetlbTest {
 protected:
  // The checker's two hugetlb audits, with every process alive.
  void audit() {
    std::vector<Mm*> live;
    for (Process* q : sys->processes())
      if (!q->exited()) live.push_back(q->mm());
    EXPECT_EQ(hugetlb_pool_audit(sys->kernel()), "");
    EXPECT_EQ(hugetlb_resv_audit(sys->kernel(), live), "");
  }
  int hugetlb_file(uint64_t size) {
    int fd = sys->create_file(size, FsClass::kHugetlbfs, PMD_SHIFT, "h");
    EXPECT_GE(fd, 0) << errno_name(-fd);
    return fd;
  }
  uint64_t map_file(Process* q, int fd, uint64_t len, int flags) {
    long a = q->mmap_file(0, len, RW, flags, fd);
    EXPECT_GT(a, 0) << errno_name(static_cast<int>(-a));
    return a > 0 ? static_cast<uint64_t>(a) : 0;
  }
  File* file_of(int fd) { return file_get(sys->kernel(), fd).get(); }  // the table keeps it alive
  long cached(int fd) {
    File* f = file_of(fd);
    MutexGuard g(&f->lock);
    return static_cast<long>(f->pages.size());
  }
  static constexpr int kSigbus = -static_cast<int>(Signal::kSigbus);
};

// Past the new end: the shared mapping's page unmapped and freed, every
// reservation the region map held there given back, SIGBUS; the audit
// quiet before, between and after.
TEST_F(HugetlbTruncateTest, TruncateGivesBackPagesAndReservations) {
  set_pool(4);
  const int fd = hugetlb_file(0);
  const uint64_t a = map_file(p, fd, 3 * PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  EXPECT_EQ(resv(), 3);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  ASSERT_TRUE(write_byte(p, a + PMD_SIZE, 2).ok());
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(free_pages(), 2);
  audit();
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(PMD_SIZE)), 0);
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 3);
  EXPECT_EQ(cached(fd), 1);
  EXPECT_EQ(entry_at(p, a + PMD_SIZE).level, 0);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), HPAGE_PMD_NR);
  audit();
  EXPECT_EQ(read_byte(p, a), 1);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), kSigbus);
  EXPECT_EQ(read_byte(p, a + 2 * PMD_SIZE), kSigbus);
  // Growing again: holes, filled by faults with pages nobody reserved.
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(3 * PMD_SIZE)), 0);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), 0);
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 2);
  audit();
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);
  EXPECT_EQ(free_pages(), 4);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(4);
}

TEST_F(HugetlbTruncateTest, TruncateToAPartialHugePageIsEinval) {
  set_pool(1);
  const int fd = hugetlb_file(PMD_SIZE);
  EXPECT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(PAGE_SIZE)), -EINVAL);
  EXPECT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(PMD_SIZE + PAGE_SIZE)), -EINVAL);
  EXPECT_EQ(cached(fd), 1);
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(1);
}

// A private owner's CoW copies past the new end are unmapped too; each
// gets its reservation back in the owner's map (HPG_restore_reserve, then
// resv_huge_pages when the copy is freed), which munmap gives back.
TEST_F(HugetlbTruncateTest, TruncateTakesPrivateCowCopiesAndRestoresTheirReservations) {
  set_pool(4);
  const int fd = hugetlb_file(2 * PMD_SIZE);
  const uint64_t a = map_file(p, fd, 2 * PMD_SIZE, MAP_PRIVATE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x33, 2 * PMD_SIZE).ok());
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 0);
  audit();
  ASSERT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(PMD_SIZE)), 0);
  EXPECT_EQ(entry_at(p, a + PMD_SIZE).level, 0);
  EXPECT_EQ(free_pages(), 2);  // the file's page and the copy
  EXPECT_EQ(resv(), 1);        // the copy's, back in the owner's map
  audit();
  EXPECT_EQ(read_byte(p, a), 0x33);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), kSigbus);
  EXPECT_EQ(p->munmap(a, 2 * PMD_SIZE), 0);
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 3);
  audit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(4);
}

// A hole frees only the pages it finds and drops only their indices from
// the region map: an index reserved by a mapping and never faulted in
// keeps its reservation. The refault of a freed index needs an unreserved
// page: SIGBUS while the only free one is promised elsewhere.
TEST_F(HugetlbTruncateTest, PunchHoleKeepsReservationsOfPagesNeverFaulted) {
  set_pool(3);
  const int fd = hugetlb_file(0);
  const uint64_t a = map_file(p, fd, 2 * PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 5).ok());
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(free_pages(), 2);
  ASSERT_EQ(sys->file_punch_hole(fd, 0, static_cast<int64_t>(2 * PMD_SIZE)), 0);
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(free_pages(), 3);
  EXPECT_EQ(cached(fd), 0);
  EXPECT_EQ(i_size_read(file_of(fd)), 2 * PMD_SIZE);  // KEEP_SIZE
  audit();
  // Another mapping takes the last unreserved page's promise.
  Process* q = sys->new_process("q");
  const uint64_t b = map(q, 2 * PMD_SIZE);
  ASSERT_TRUE(b);
  EXPECT_EQ(resv(), 3);
  EXPECT_EQ(read_byte(p, a), kSigbus);     // index 0 left the region map
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), 0);  // index 1 kept its reservation
  EXPECT_EQ(resv(), 2);
  audit();
  q->exit();
  EXPECT_EQ(read_byte(p, a), 0);
  EXPECT_EQ(free_pages(), 1);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(3);
}

// hugetlb_vmdelete_list zaps private VMAs whole: a hole takes the private
// CoW copy too (shmem's keeps it), and the copy's reservation returns to
// the owner, whose next access allocates a fresh page with it.
TEST_F(HugetlbTruncateTest, PunchHoleTakesThePrivateCowCopy) {
  set_pool(2);
  const int fd = hugetlb_file(PMD_SIZE);
  const uint64_t a = map_file(p, fd, PMD_SIZE, MAP_PRIVATE);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 0x44).ok());
  EXPECT_EQ(resv(), 0);
  Folio* copy = folio_at(p, a);
  EXPECT_TRUE(folio_test_anon(copy));
  ASSERT_EQ(sys->file_punch_hole(fd, 0, static_cast<int64_t>(PMD_SIZE)), 0);
  EXPECT_EQ(entry_at(p, a).level, 0);
  EXPECT_EQ(resv(), 1);
  EXPECT_EQ(free_pages(), 2);
  audit();
  EXPECT_EQ(read_byte(p, a), 0);
  EXPECT_TRUE(folio_test_anon(folio_at(p, a)));
  EXPECT_EQ(resv(), 0);
  EXPECT_EQ(free_pages(), 1);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

// Partial huge pages at a hole's edges are zeroed inside it, stay cached
// and stay mapped; no counter moves.
TEST_F(HugetlbTruncateTest, PunchHoleZeroesPartialHugePages) {
  set_pool(2);
  const int fd = hugetlb_file(2 * PMD_SIZE);
  const uint64_t a = map_file(p, fd, 2 * PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x55, 2 * PMD_SIZE).ok());
  const pfn_t first = pfn_at(p, a);
  ASSERT_EQ(sys->file_punch_hole(fd, static_cast<int64_t>(PMD_SIZE - PAGE_SIZE), static_cast<int64_t>(2 * PAGE_SIZE)), 0);
  EXPECT_EQ(pfn_at(p, a), first);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE - PAGE_SIZE - 1), 0x55);
  expect_bytes(p, a + PMD_SIZE - PAGE_SIZE, 2 * PAGE_SIZE, 0);
  EXPECT_EQ(read_byte(p, a + PMD_SIZE + PAGE_SIZE), 0x55);
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(cached(fd), 2);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

// A page-cache folio that something else still references (a GUP pin, a
// read in flight) leaves the page cache and the mappings at once but goes
// back to the pool only with its last reference.
TEST_F(HugetlbTruncateTest, PunchedPageUnderAReferenceGoesBackWithIt) {
  set_pool(2);
  const int fd = hugetlb_file(PMD_SIZE);
  const uint64_t a = map_file(p, fd, PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 0x66).ok());
  Folio* f = folio_at(p, a);
  folio_get(f);
  ASSERT_EQ(sys->file_punch_hole(fd, 0, static_cast<int64_t>(PMD_SIZE)), 0);
  EXPECT_EQ(entry_at(p, a).level, 0);
  EXPECT_EQ(cached(fd), 0);
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(static_cast<uint8_t*>(folio_address(f))[0], 0x66);
  EXPECT_EQ(read_byte(p, a), 0);  // a new page (the pool's other one)
  EXPECT_EQ(free_pages(), 0);
  folio_put(f);
  EXPECT_EQ(free_pages(), 1);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

// MADV_REMOVE of a shared MAP_HUGETLB mapping punches its file: the page
// goes back, the mapping refaults a new one; a private one is EACCES.
TEST_F(HugetlbTruncateTest, MadviseRemoveOfASharedMapping) {
  set_pool(2);
  const uint64_t a = map(2 * PMD_SIZE, kShared);
  ASSERT_TRUE(a);
  ASSERT_TRUE(p->fill(a, 0x77, 2 * PMD_SIZE).ok());
  EXPECT_EQ(free_pages(), 0);
  ASSERT_EQ(p->madvise(a + PMD_SIZE, PMD_SIZE, MADV_REMOVE), 0);
  EXPECT_EQ(entry_at(p, a + PMD_SIZE).level, 0);
  EXPECT_EQ(free_pages(), 1);
  EXPECT_EQ(resv(), 0);
  audit();
  EXPECT_EQ(read_byte(p, a + PMD_SIZE), 0);
  EXPECT_EQ(read_byte(p, a), 0x77);
  EXPECT_EQ(free_pages(), 0);
  EXPECT_EQ(p->mmap(0, PMD_SIZE, RW, kPriv), -ENOMEM);  // the pool is used up again
  audit();
  p->exit();
  expect_idle(2);
}

// Each process that maps the file loses its pages: the audit also counts
// the per-mm usage (HugetlbPages) down to zero.
TEST_F(HugetlbTruncateTest, TruncateUnmapsEveryProcess) {
  set_pool(2);
  const int fd = hugetlb_file(2 * PMD_SIZE);
  Process* q = sys->new_process("q");
  const uint64_t a = map_file(p, fd, 2 * PMD_SIZE, MAP_SHARED);
  const uint64_t b = map_file(q, fd, 2 * PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(p->fill(a, 0x12, 2 * PMD_SIZE).ok());
  expect_bytes(q, b, 2 * PMD_SIZE, 0x12);
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);
  EXPECT_EQ(hugetlb_usage_pages(p->mm()), 0);
  EXPECT_EQ(hugetlb_usage_pages(q->mm()), 0);
  EXPECT_EQ(free_pages(), 2);
  EXPECT_EQ(read_byte(q, b), kSigbus);
  audit();
  q->exit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

// 1 GiB pages take the same paths (PUD leaves; the host has no 1G pool, so
// only the model shows it). One page: each one allocated is zeroed, slowly.
TEST_F(HugetlbTruncateTest, GiganticHoleAndTruncation) {
  set_pool(1, k1G);
  const int fd = sys->create_file(PUD_SIZE, FsClass::kHugetlbfs, PUD_SHIFT, "g");
  ASSERT_GE(fd, 0) << errno_name(-fd);
  const uint64_t a = map_file(p, fd, PUD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 1).ok());
  EXPECT_EQ(entry_at(p, a).level, 3);
  EXPECT_EQ(sys->file_ftruncate(fd, static_cast<int64_t>(PMD_SIZE)), -EINVAL);
  ASSERT_EQ(sys->file_punch_hole(fd, 0, static_cast<int64_t>(PUD_SIZE)), 0);
  EXPECT_EQ(entry_at(p, a).level, 0);
  EXPECT_EQ(free_pages(k1G), 1);
  EXPECT_EQ(resv(k1G), 0);
  audit();
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);
  EXPECT_EQ(read_byte(p, a), kSigbus);
  EXPECT_EQ(free_pages(k1G), 1);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(1, k1G);
}

// A directed run's own fixture: empty, the test's System is the state.
struct HugetlbPunchRun {};

// A fault between the hole's unmap and the page cache's removal (the label
// hugetlb_punch.after_unmap) maps the page again: it is still in the page
// cache, the hole not yet made. remove_inode_single_folio finds it mapped
// and unmaps it anew under the fault mutex before it leaves the page cache;
// the page goes back to the pool and the counts agree.
TEST_F(HugetlbTruncateTest, FaultBetweenTheHolesUnmapAndItsRemovalIsUnmappedAgain) {
  set_pool(2);
  const int fd = hugetlb_file(PMD_SIZE);
  const uint64_t a = map_file(p, fd, PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  ASSERT_TRUE(write_byte(p, a, 0x21).ok());
  explore::Race<HugetlbPunchRun> race;
  race.thread("T", [&](HugetlbPunchRun&) { ASSERT_EQ(sys->file_punch_hole(fd, 0, static_cast<int64_t>(PMD_SIZE)), 0); });
  race.thread("F", [&](HugetlbPunchRun&) { EXPECT_EQ(read_byte(p, a), 0x21); });
  explore::RunResult r = race.replay_directed("T@hugetlb_punch.after_unmap F T");
  ASSERT_EQ(r.outcome, explore::Outcome::kClean) << r.summary() << "\n" << race.explain(r);
  EXPECT_EQ(entry_at(p, a).level, 0);
  EXPECT_EQ(cached(fd), 0);
  EXPECT_EQ(free_pages(), 2);
  EXPECT_EQ(resv(), 0);
  audit();
  EXPECT_EQ(read_byte(p, a), 0);
  EXPECT_EQ(free_pages(), 1);
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

// The audit sees what a truncation that forgot hugetlb_unreserve_pages
// would leave: a region past EOF still counted as a reservation.
TEST_F(HugetlbTruncateTest, AuditCatchesARegionTheTruncationForgot) {
  set_pool(2);
  const int fd = hugetlb_file(0);
  const uint64_t a = map_file(p, fd, 2 * PMD_SIZE, MAP_SHARED);
  ASSERT_TRUE(a);
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);
  EXPECT_EQ(resv(), 0);
  audit();
  File* f = file_of(fd);
  HugetlbState* hs = sys->kernel()->hugetlb.get();
  {
    SpinGuard g(&hs->lock);
    f->hstate->regions.insert(1);  // the index, back without its reservation
  }
  std::vector<Mm*> live{p->mm()};
  EXPECT_NE(hugetlb_resv_audit(sys->kernel(), live).find("resv_huge_pages 0 != outstanding reservations 1"),
            std::string::npos);
  {
    SpinGuard g(&hs->lock);
    f->hstate->regions.erase(1);
  }
  audit();
  p->exit();
  EXPECT_EQ(sys->close_file(fd), 0);
  expect_idle(2);
}

}  // namespace
}  // namespace mmlab::test
