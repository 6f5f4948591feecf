// khugepaged and MADV_COLLAPSE: the collapse itself, its errnos, the
// registration points, the scan's limits, the sysfs stores, the virtual
// clock, the mTHP variant, and collapse racing GUP-fast pins and writers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include "gup/gup.h"
#include "mm/kernel.h"
#include "mm/rmap.h"
#include "mm/settings.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "phys/frame_copy.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

constexpr const char* kKhp = "transparent_hugepage/khugepaged/";

class KhugepagedTest : public MmTest {
 protected:
  KhugepagedTest() { ram_bytes = 512ull << 20; }
  void tune(const char* key, const char* v) { ASSERT_EQ(sys->tune(key, v), 0) << key << "=" << v; }
  int64_t ctr(const char* n) { return sys->counter(n); }
  int64_t vm(const char* n) { return sys->vmstat(n); }
  std::string rd(const std::string& path) {
    std::string v;
    EXPECT_EQ(sys->sysfs_read(path, &v), 0) << path;
    return v;
  }
  bool registered(Process* q = nullptr) { return (q ? q : p)->mm()->test_flag(MMF_VM_HUGEPAGE); }
  // Collapse in a loop (MADV_COLLAPSE, or the khugepaged thread) against
  // GUP-fast pins and writes through them, and writer threads.
  void race_collapse_with_pins(const char* fast, bool use_khugepaged);
  // A PMD range of 4K pages: byte `b` everywhere, PTE-mapped.
  uint64_t small_pages(uint64_t len, uint8_t b) {
    uint64_t a = map_aligned(len);
    EXPECT_TRUE(p->fill(a, b, len).ok());
    EXPECT_EQ(entry_at(a).level, 1);
    return a;
  }
};

// The waste figure: a present page written with zeros is copied, and
// counted as a zero page copied; a none slot is zero-filled, not counted.
TEST_F(KhugepagedTest, CollapseCountsCopiedPagesThatWereAllZero) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 7, PMD_SIZE / 4).ok());
  ASSERT_TRUE(p->fill(a + PMD_SIZE / 4, 0, PMD_SIZE / 4).ok());  // present, all zero
  uint8_t last = 1;
  ASSERT_TRUE(p->write(a + PMD_SIZE / 2 - 1, &last, 1).ok());  // the last such page is not all zero
  sys->reset_counters();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  EXPECT_EQ(p->page_info(a).level, 2);
  EXPECT_EQ(ctr("collapse.bytes_copied"), static_cast<int64_t>(PMD_SIZE / 2));
  EXPECT_EQ(ctr("collapse.bytes_zeroed"), static_cast<int64_t>(PMD_SIZE / 2));
  EXPECT_EQ(ctr("collapse.zero_subpages_copied"), static_cast<int64_t>(PMD_SIZE / 4 / PAGE_SIZE - 1));
  expect_bytes(p, a + PMD_SIZE / 4, PMD_SIZE / 4 - 1, 0);
}

TEST_F(KhugepagedTest, MadviseCollapseCopiesAndDepositsTheTable) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 7, PMD_SIZE / 2).ok());  // half present, half none
  const long tables = p->pgtables_bytes();
  sys->reset_counters();
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  PageInfo pi = p->page_info(a);
  EXPECT_EQ(pi.level, 2);
  EXPECT_EQ(pi.order, 9);
  EXPECT_TRUE(pi.anon_exclusive);
  EXPECT_TRUE(pi.writable);
  EXPECT_EQ(pi.refcount, 1);
  expect_bytes(p, a, PMD_SIZE / 2, 7);
  expect_bytes(p, a + PMD_SIZE / 2, PMD_SIZE / 2, 0);  // none slots are zero-filled
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  // The PTE table now sits deposited under the PMD: no table page freed.
  EXPECT_EQ(p->pgtables_bytes(), tables);
  EXPECT_EQ(ctr("pgtable.free"), 0);
  EXPECT_EQ(ctr("collapse.bytes_copied"), static_cast<int64_t>(PMD_SIZE / 2));
  EXPECT_EQ(ctr("collapse.bytes_zeroed"), static_cast<int64_t>(PMD_SIZE / 2));
  EXPECT_EQ(ctr("collapse.pmd_flush"), 1);
  EXPECT_EQ(ctr("collapse.table_sync"), 1);
  EXPECT_EQ(vm("thp_collapse_alloc"), 1);
  EXPECT_EQ(vm("thp_collapse_alloc_failed"), 0);
  EXPECT_FALSE(registered());  // MADV_COLLAPSE does not register
  // Already PMD-mapped: success, nothing new.
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  EXPECT_EQ(vm("thp_collapse_alloc"), 1);
  // Splitting the new PMD uses the deposited table.
  ASSERT_EQ(p->munmap(a + PAGE_SIZE, PAGE_SIZE), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  expect_bytes(p, a, PAGE_SIZE, 7);
}

TEST_F(KhugepagedTest, MadviseCollapseOnlyTheCollapsingMmGetsTheThp) {
  uint64_t a = small_pages(PMD_SIZE, 3);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);  // the shared pages count for nothing here
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_TRUE(p->page_info(a).anon_exclusive);
  EXPECT_EQ(entry_at(c, a).level, 1);
  EXPECT_FALSE(p->page_info(a).pfn == c->page_info(a).pfn);
  ASSERT_TRUE(p->fill(a, 9, PMD_SIZE).ok());  // no CoW: the THP is the parent's alone
  expect_bytes(c, a, PMD_SIZE, 3);
  expect_bytes(p, a, PMD_SIZE, 9);
  c->exit();
}

TEST_F(KhugepagedTest, MadviseCollapseErrnos) {
  // VM_NOHUGEPAGE, and a VMA that never faulted (no anon_vma): -EINVAL.
  uint64_t a = small_pages(PMD_SIZE, 1);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_NOHUGEPAGE), 0);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EINVAL);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  uint64_t empty = map_aligned(PMD_SIZE);
  EXPECT_EQ(p->madvise(empty, PMD_SIZE, MADV_COLLAPSE), -EINVAL);
  // The sysfs controls do not matter.
  set("transparent_hugepage/enabled", "never");
  set("transparent_hugepage/hugepages-2048kB/enabled", "never");
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  set("transparent_hugepage/enabled", "madvise");
  set("transparent_hugepage/hugepages-2048kB/enabled", "inherit");
  // A range holding no whole PMD: thps == 0 == (hend - hstart) >> PMD_SHIFT
  // when both round to one boundary; unsigned wrap-around (-EINVAL) when the
  // range lies between two.
  uint64_t b = small_pages(2 * PMD_SIZE, 2);
  EXPECT_EQ(p->madvise(b, PAGE_SIZE, MADV_COLLAPSE), 0);
  EXPECT_EQ(p->madvise(b + PAGE_SIZE, PAGE_SIZE, MADV_COLLAPSE), -EINVAL);
  EXPECT_EQ(entry_at(b).level, 1);
  // A hole in the range: what could collapse did, the hole is -ENOMEM.
  uint64_t h3 = small_pages(3 * PMD_SIZE, 2);
  ASSERT_EQ(p->munmap(h3 + PMD_SIZE, PMD_SIZE), 0);
  EXPECT_EQ(p->madvise(h3, 3 * PMD_SIZE, MADV_COLLAPSE), -ENOMEM);
  EXPECT_EQ(entry_at(h3).level, 2);
  EXPECT_EQ(entry_at(h3 + 2 * PMD_SIZE).level, 2);
  // A VMA smaller than a PMD is no candidate at all: -EINVAL.
  ASSERT_EQ(p->munmap(b + PMD_SIZE, PAGE_SIZE), 0);
  EXPECT_EQ(p->madvise(b + PMD_SIZE + PAGE_SIZE, PMD_SIZE - PAGE_SIZE, MADV_COLLAPSE), -EINVAL);
  // hugetlb: -EINVAL.
  set("hugepages/hugepages-2048kB/nr_hugepages", "1");
  long h = p->mmap(0, PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB);
  ASSERT_GT(h, 0);
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(h), 1, PMD_SIZE).ok());
  EXPECT_EQ(p->madvise(static_cast<uint64_t>(h), PMD_SIZE, MADV_COLLAPSE), -EINVAL);
  // Shared anonymous memory is shmem: collapse_file() makes a PMD THP of
  // its page cache and MADV_COLLAPSE maps it (the PMD size's
  // shmem_enabled inherits by default).
  long s = p->mmap(0, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS);
  ASSERT_GT(s, 0);
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(s), 1, 2 * PMD_SIZE).ok());
  EXPECT_EQ(p->madvise(round_up(static_cast<uint64_t>(s), PMD_SIZE), PMD_SIZE, MADV_COLLAPSE), 0);
  EXPECT_EQ(entry_at(round_up(static_cast<uint64_t>(s), PMD_SIZE)).level, 2);
  // With the PMD size's shmem_enabled "never" it is refused.
  set("transparent_hugepage/hugepages-2048kB/shmem_enabled", "never");
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(s), 2, PMD_SIZE).ok());
  ASSERT_EQ(p->munmap(round_up(static_cast<uint64_t>(s), PMD_SIZE), PMD_SIZE), 0);
  long s2 = p->mmap(0, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS);
  ASSERT_GT(s2, 0);
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(s2), 3, 2 * PMD_SIZE).ok());
  EXPECT_EQ(p->madvise(round_up(static_cast<uint64_t>(s2), PMD_SIZE), PMD_SIZE, MADV_COLLAPSE), -EINVAL);
}

TEST_F(KhugepagedTest, PrctlThpDisable) {
  uint64_t a = small_pages(PMD_SIZE, 1);
  EXPECT_EQ(p->prctl_set_thp_disable(false, Process::PR_THP_DISABLE_EXCEPT_ADVISED), -EINVAL);
  EXPECT_EQ(p->prctl_set_thp_disable(true, 1ul << 3), -EINVAL);
  ASSERT_EQ(p->prctl_set_thp_disable(true), 0);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EINVAL);
  // Except where advised: MADV_COLLAPSE is advice enough (v6.18).
  ASSERT_EQ(p->prctl_set_thp_disable(true, Process::PR_THP_DISABLE_EXCEPT_ADVISED), 0);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  // ... while khugepaged still needs VM_HUGEPAGE to look.
  uint64_t b = small_pages(PMD_SIZE, 2);
  set("transparent_hugepage/enabled", "always");
  Process* c = p->fork("child");  // inherits the prctl
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->mm()->test_flag(MMF_DISABLE_THP_EXCEPT_ADVISED));
  c->exit();
  ASSERT_EQ(p->madvise(b, PAGE_SIZE, MADV_DONTFORK), 0);  // a merge after this would register: it cannot
  ASSERT_EQ(p->madvise(b, PAGE_SIZE, MADV_DOFORK), 0);
  EXPECT_FALSE(registered());
  ASSERT_EQ(p->prctl_set_thp_disable(false), 0);
}

TEST_F(KhugepagedTest, CollapseRefusesPinnedAndGotPages) {
  uint64_t a = small_pages(PMD_SIZE, 5);
  GupPages pin, get;
  ASSERT_EQ(gup(p, GupEntry::kPinUserPagesFast, a + 8 * PAGE_SIZE, 1, foll::WRITE, &pin), 1);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EAGAIN);
  EXPECT_EQ(entry_at(a).level, 1);
  pin.release();
  ASSERT_EQ(gup(p, GupEntry::kGetUserPagesFast, a + 9 * PAGE_SIZE, 1, 0, &get), 1);
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EAGAIN);
  // khugepaged skips it too, and tries again on a later scan.
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(sys->run_khugepaged(2), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  get.release();
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  expect_bytes(p, a, PMD_SIZE, 5);
}

TEST_F(KhugepagedTest, UserfaultfdRules) {
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PMD_SIZE / 2).ok());
  ASSERT_EQ(p->uffd_register(a, PMD_SIZE, Process::kUffdMissing), 0);
  // A none PTE in a userfaultfd-armed VMA: SCAN_EXCEED_NONE_PTE, -EBUSY.
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EBUSY);
  EXPECT_EQ(vm("thp_scan_exceed_none_pte"), 1);
  // Nobody reads the userfaultfd: a missing fault ends with SIGBUS.
  uint8_t buf[8];
  EXPECT_EQ(p->read(a + PMD_SIZE / 2, buf, 8).sig, Signal::kSigbus);
  uint64_t b = small_pages(PMD_SIZE, 2);
  ASSERT_EQ(p->uffd_register(b, PMD_SIZE, Process::kUffdWp), 0);
  EXPECT_EQ(p->uffd_writeprotect(a, PAGE_SIZE, true), -ENOENT);  // not registered for wp
  ASSERT_EQ(p->uffd_writeprotect(b + 4 * PAGE_SIZE, PAGE_SIZE, true), 0);
  EXPECT_TRUE(p->page_info(b + 4 * PAGE_SIZE).uffd_wp);
  EXPECT_FALSE(p->page_info(b + 4 * PAGE_SIZE).writable);
  EXPECT_EQ(p->write(b + 4 * PAGE_SIZE, buf, 1).sig, Signal::kSigbus);
  // A uffd-wp PTE: SCAN_PTE_UFFD_WP, which MADV_COLLAPSE reports as -EINVAL.
  EXPECT_EQ(p->madvise(b, PMD_SIZE, MADV_COLLAPSE), -EINVAL);
  ASSERT_EQ(p->uffd_writeprotect(b, PMD_SIZE, false), 0);
  EXPECT_EQ(p->madvise(b, PMD_SIZE, MADV_COLLAPSE), 0);
  expect_bytes(p, b, PMD_SIZE, 2);
  EXPECT_EQ(p->uffd_register(b, PMD_SIZE, 0), -EINVAL);
}

TEST_F(KhugepagedTest, RegistrationPoints) {
  // mmap of a fresh VMA: no anon_vma, not eligible yet; nor are 4K faults.
  uint64_t a = small_pages(PMD_SIZE, 1);
  EXPECT_FALSE(registered());
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  EXPECT_TRUE(registered());
  // fork of a registered mm registers the child.
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_TRUE(registered(c));
  // Exit removes it: the next scans still count full passes.
  c->exit();
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(a).level, 2);

  // The PMD fault registers (enabled=always); with every size that starts
  // khugepaged disabled, nothing registers.
  Process* q = sys->new_process("q");
  set("transparent_hugepage/enabled", "always");
  uint64_t b = map_aligned(q, PMD_SIZE);
  ASSERT_TRUE(q->fill(b, 1, 1).ok());
  EXPECT_EQ(entry_at(q, b).level, 2);
  EXPECT_TRUE(registered(q));
  Process* r = sys->new_process("r");
  set("transparent_hugepage/hugepages-2048kB/enabled", "never");
  EXPECT_FALSE(sys->khugepaged_running());
  uint64_t d = map_aligned(r, PMD_SIZE);
  ASSERT_TRUE(r->fill(d, 1, PMD_SIZE).ok());
  ASSERT_EQ(r->madvise(d, PMD_SIZE, MADV_HUGEPAGE), 0);
  EXPECT_FALSE(registered(r));
  set("transparent_hugepage/hugepages-2048kB/enabled", "inherit");
  EXPECT_TRUE(sys->khugepaged_running());
  // A merge registers: a VMA too small for a PMD got its anon_vma from 4K
  // faults (enabled=always), then a new mapping next to it makes it large enough.
  Process* m = sys->new_process("m");
  set("transparent_hugepage/enabled", "always");
  uint64_t e = map_aligned(m, 4 * PMD_SIZE);
  ASSERT_EQ(m->munmap(e + PMD_SIZE / 2, 4 * PMD_SIZE - PMD_SIZE / 2), 0);
  ASSERT_TRUE(m->fill(e, 1, PMD_SIZE / 2).ok());
  EXPECT_EQ(entry_at(m, e).level, 1);
  EXPECT_FALSE(registered(m));
  ASSERT_EQ(m->mmap(e + PMD_SIZE / 2, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED),
            static_cast<long>(e + PMD_SIZE / 2));
  EXPECT_TRUE(registered(m));
  set("transparent_hugepage/enabled", "madvise");
}

TEST_F(KhugepagedTest, ScanLimitsAndTheirEvents) {
  set(std::string(kKhp) + "max_ptes_none", "255");
  uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 1, 256 * PAGE_SIZE).ok());  // 256 none > 255
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(a).level, 1);
  EXPECT_EQ(vm("thp_scan_exceed_none_pte"), 1);
  ASSERT_TRUE(p->fill(a + 256 * PAGE_SIZE, 1, PAGE_SIZE).ok());  // 255 none
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(rd(std::string(kKhp) + "pages_collapsed"), "1");

  // max_ptes_shared: 257 shared > 256 in the child of a fork.
  uint64_t b = small_pages(PMD_SIZE, 2);
  ASSERT_EQ(p->madvise(b, PMD_SIZE, MADV_HUGEPAGE), 0);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->fill(b, 3, 255 * PAGE_SIZE).ok());  // 255 copied, 257 still shared
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(c, b).level, 1);
  EXPECT_GE(vm("thp_scan_exceed_share_pte"), 1);
  ASSERT_TRUE(c->fill(b, 3, 256 * PAGE_SIZE).ok());  // 256 shared
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(c, b).level, 2);
  expect_bytes(c, b, 256 * PAGE_SIZE, 3);
  expect_bytes(c, b + 256 * PAGE_SIZE, 256 * PAGE_SIZE, 2);
  c->exit();

  // max_ptes_swap: 65 swapped > 64; the swap-in brings 64 back in.
  ASSERT_EQ(sys->add_swap(64ull << 20), 0);
  uint64_t s = small_pages(PMD_SIZE, 4);
  ASSERT_EQ(p->madvise(s, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(p->madvise(s, 65 * PAGE_SIZE, MADV_PAGEOUT), 0);
  ASSERT_TRUE(p->page_info(s + 64 * PAGE_SIZE).swap);
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(s + PMD_SIZE - PAGE_SIZE).level, 1);
  EXPECT_GE(vm("thp_scan_exceed_swap_pte"), 1);
  uint8_t byte;
  ASSERT_TRUE(p->read(s + 64 * PAGE_SIZE, &byte, 1).ok());  // 64 swapped now
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(s).level, 2);
  expect_bytes(p, s, PMD_SIZE, 4);
}

TEST_F(KhugepagedTest, SysfsStoresAndDefaults) {
  const std::pair<const char*, const char*> defaults[] = {
      {"defrag", "1"},          {"max_ptes_none", "511"},          {"max_ptes_swap", "64"},
      {"max_ptes_shared", "256"}, {"pages_to_scan", "4096"},       {"scan_sleep_millisecs", "10000"},
      {"alloc_sleep_millisecs", "60000"}, {"pages_collapsed", "0"}, {"full_scans", "0"}};
  for (auto& [knob, v] : defaults) EXPECT_EQ(rd(std::string(kKhp) + knob), v) << knob;
  const std::pair<const char*, const char*> rejected[] = {
      {"max_ptes_none", "512"}, {"max_ptes_swap", "-1"},     {"max_ptes_shared", "0x10"}, {"pages_to_scan", "0"},
      {"defrag", "2"},          {"scan_sleep_millisecs", "4294967296"}, {"alloc_sleep_millisecs", "1 0"},
      {"max_ptes_none", ""}};
  for (auto& [knob, v] : rejected) EXPECT_EQ(sys->sysfs_write(std::string(kKhp) + knob, v), -EINVAL) << knob << "=" << v;
  EXPECT_EQ(sys->sysfs_write(std::string(kKhp) + "full_scans", "1"), -EACCES);
  EXPECT_EQ(sys->sysfs_write(std::string(kKhp) + "max_ptes_none", "+7\n"), 0);
  EXPECT_EQ(rd(std::string(kKhp) + "max_ptes_none"), "7");
  EXPECT_EQ(sys->sysfs_write(std::string(kKhp) + "scan_sleep_millisecs", "0"), 0);
  EXPECT_FALSE(sysfs_value_well_formed(std::string(kKhp) + "max_ptes_none", "abc"));
  EXPECT_TRUE(sysfs_value_well_formed(std::string(kKhp) + "max_ptes_none", "-3"));
  // The per-size collapse statistics exist only with the mTHP series.
  std::string v;
  EXPECT_EQ(sys->sysfs_read("transparent_hugepage/hugepages-64kB/stats/collapse_alloc", &v), -ENOENT);
  tune("khugepaged.mthp", "on");
  EXPECT_EQ(rd("transparent_hugepage/hugepages-64kB/stats/collapse_alloc"), "0");
}

TEST_F(KhugepagedTest, VirtualClockWakesAndSleeps) {
  uint64_t a = small_pages(PMD_SIZE, 1);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);  // an mm on the list wakes khugepaged now
  EXPECT_EQ(sys->clock_ns(), 0u);
  ASSERT_EQ(sys->advance_clock(1000000), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(sys->clock_ns(), 1000000u);
  EXPECT_EQ(rd(std::string(kKhp) + "full_scans"), "1");
  // The next wake is scan_sleep_millisecs (10 s) after the first.
  uint64_t b = small_pages(PMD_SIZE, 2);
  ASSERT_EQ(p->madvise(b, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(sys->advance_clock(9'000'000'000ull - 1000000 - 1), 0);
  EXPECT_EQ(entry_at(b).level, 1);
  ASSERT_EQ(sys->advance_clock(1'000'000'001ull), 0);  // crosses 10 s
  EXPECT_EQ(entry_at(b).level, 2);
  EXPECT_EQ(rd(std::string(kKhp) + "full_scans"), "2");
  // Storing scan_sleep_millisecs ends the sleep at once.
  uint64_t d = small_pages(PMD_SIZE, 3);
  ASSERT_EQ(p->madvise(d, PMD_SIZE, MADV_HUGEPAGE), 0);
  set(std::string(kKhp) + "scan_sleep_millisecs", "500");
  ASSERT_EQ(sys->advance_clock(0), 0);
  EXPECT_EQ(entry_at(d).level, 2);
  // Wake cost: each wake takes virtual time when a cost function says so.
  sys->set_khugepaged_wake_cost([](const KhugepagedWakeStats& w) { return w.progress * 1000; });
  const uint64_t t0 = sys->clock_ns();
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_GE(sys->clock_ns(), t0 + 500'000'000ull + 1000);
  // No sleep between wakes and no cost: wakes without end.
  sys->set_khugepaged_wake_cost(nullptr);
  set(std::string(kKhp) + "scan_sleep_millisecs", "0");
  EXPECT_EQ(sys->advance_clock(1), -ELOOP);
  set(std::string(kKhp) + "scan_sleep_millisecs", "10000");
  EXPECT_EQ(sys->run_khugepaged(1), 0);
}

// The total write-hold time sums the holds; the longest is kept apart (what
// one fault blocked behind a collapse waits at most).
TEST_F(KhugepagedTest, CollapseTimingKeepsTheLongestWriteHold) {
  uint64_t a = small_pages(PMD_SIZE, 1), b = small_pages(PMD_SIZE, 2);
  const CollapseTiming t0 = sys->collapse_timing();
  EXPECT_EQ(t0.mmap_write_max_ns, 0u);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  const CollapseTiming t1 = sys->collapse_timing();
  ASSERT_EQ(t1.write_locked, 1u);
  EXPECT_GT(t1.mmap_write_max_ns, 0u);
  EXPECT_EQ(t1.mmap_write_max_ns, t1.mmap_write_ns);
  ASSERT_EQ(p->madvise(b, PMD_SIZE, MADV_COLLAPSE), 0);
  const CollapseTiming t2 = sys->collapse_timing();
  ASSERT_EQ(t2.write_locked, 2u);
  EXPECT_LE(t2.mmap_write_max_ns, t2.mmap_write_ns);
  EXPECT_EQ(t2.mmap_write_max_ns, std::max(t1.mmap_write_ns, t2.mmap_write_ns - t1.mmap_write_ns));
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(entry_at(b).level, 2);
}

// A paced thread (start_khugepaged_thread(N)) charges each wake's host time
// to the virtual clock, and sleeps the full virtual scan_sleep_millisecs in
// between: from the end of one wake to the end of the next the clock moves
// by more than the sleep (by exactly the sleep back to back). The wake-cost
// hook, which runs at the end of each wake, reads the clock there.
TEST_F(KhugepagedTest, PacedThreadChargesItsWakesToTheClock) {
  constexpr uint64_t kSleep = 10'000'000'000ull;  // scan_sleep_millisecs' default
  uint64_t a = small_pages(PMD_SIZE, 1);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  std::vector<uint64_t> wake_ends;  // written by the khugepaged thread only, read after it stops
  sys->set_khugepaged_wake_cost([&](const KhugepagedWakeStats&) {
    wake_ends.push_back(sys->clock_ns());
    return uint64_t{0};
  });
  const KhugepagedTiming w0 = sys->khugepaged_timing();
  ASSERT_EQ(sys->start_khugepaged_thread(1'000'000), 0);  // 10 s sleeps last 10 us
  EXPECT_EQ(sys->start_khugepaged_thread(1'000'000), -EBUSY);
  // Three full scans (one wake each: the mm has one PMD range), however
  // long the host takes to run them.
  while (std::stol(rd(std::string(kKhp) + "full_scans")) < 3) std::this_thread::yield();
  sys->stop_khugepaged_thread();
  sys->set_khugepaged_wake_cost(nullptr);
  const KhugepagedTiming w = sys->khugepaged_timing();
  ASSERT_GE(wake_ends.size(), 3u);
  EXPECT_GT(wake_ends[0], 0u);
  for (size_t i = 1; i < wake_ends.size(); i++) EXPECT_GT(wake_ends[i] - wake_ends[i - 1], kSleep) << i;
  EXPECT_LE(wake_ends.back(), (wake_ends.size() - 1) * kSleep + wake_ends[0] + (w.busy_ns - w0.busy_ns));
  // Stopped, the clock holds the part of the sleep that had passed, and is
  // the caller's again.
  EXPECT_GE(sys->clock_ns(), wake_ends.back());
  EXPECT_LE(sys->clock_ns(), wake_ends.back() + kSleep);
  EXPECT_EQ(entry_at(a).level, 2);
  const uint64_t now = sys->clock_ns();
  ASSERT_EQ(sys->advance_clock(1), 0);
  EXPECT_EQ(sys->clock_ns(), now + 1);
}

TEST_F(KhugepagedTest, AllocationFailureSleepsThenEndsTheWake) {
  // Fragment memory so that no PMD-order block is left: all free RAM
  // filled with 4K pages, then every second one given back.
  ram_bytes = 64ull << 20;
  TearDown();
  SetUp();
  uint64_t a = small_pages(2 * PMD_SIZE, 1);
  set("transparent_hugepage/hugepages-2048kB/enabled", "never");
  const uint64_t frag_len = (sys->nr_free_pages() - 128) * PAGE_SIZE / PMD_SIZE * PMD_SIZE;
  uint64_t frag = map_aligned(frag_len);
  ASSERT_TRUE(p->fill(frag, 1, frag_len).ok());
  for (uint64_t o = 0; o < frag_len; o += 2 * PAGE_SIZE) ASSERT_EQ(p->madvise(frag + o, PAGE_SIZE, MADV_DONTNEED), 0);
  set("transparent_hugepage/hugepages-2048kB/enabled", "inherit");
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -ENOMEM);
  EXPECT_EQ(vm("thp_collapse_alloc_failed"), 1);
  ASSERT_EQ(p->madvise(a, 2 * PMD_SIZE, MADV_HUGEPAGE), 0);
  // The first failure sleeps alloc_sleep_millisecs inside the wake, the
  // second ends it: two failures, and the clock past 60 s.
  ASSERT_EQ(sys->advance_clock(59'000'000'000ull), 0);
  EXPECT_EQ(vm("thp_collapse_alloc_failed"), 2);
  ASSERT_EQ(sys->advance_clock(2'000'000'000ull), 0);
  EXPECT_EQ(vm("thp_collapse_alloc_failed"), 3);
  EXPECT_EQ(entry_at(a).level, 1);
  ASSERT_EQ(p->munmap(frag, frag_len), 0);
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(entry_at(a + PMD_SIZE).level, 2);
}

// ---- tune khugepaged.mthp on (docs/VARIANTS.md) ----

class MthpCollapseTest : public KhugepagedTest {
 protected:
  void SetUp() override {
    KhugepagedTest::SetUp();
    tune("khugepaged.mthp", "on");
    set("transparent_hugepage/hugepages-2048kB/enabled", "never");
    enable_order_kb(64);
  }
  std::string stat64(const char* item) { return rd(std::string("transparent_hugepage/hugepages-64kB/stats/") + item); }
};

TEST_F(MthpCollapseTest, CollapsesToTheEnabledOrderWithoutThePmdSize) {
  set("transparent_hugepage/hugepages-64kB/enabled", "never");
  uint64_t a = small_pages(PMD_SIZE, 1);
  ASSERT_TRUE(p->fill(a + 64 * 1024, 2, 4 * PAGE_SIZE).ok());
  enable_order_kb(64);
  ASSERT_EQ(p->madvise(a, 80 * 1024, MADV_DONTNEED), 0);
  ASSERT_TRUE(p->fill(a + 64 * 1024, 2, PAGE_SIZE).ok());  // one page in the second 64K; the first is empty
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  EXPECT_TRUE(registered());
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  // max_ptes_none 511: (1 << order) - 1 for 64K, so one occupied page is enough.
  EXPECT_EQ(order_at(a + 64 * 1024), 4);
  EXPECT_EQ(entry_at(a).level, 0);  // no page there: nothing to collapse
  expect_bytes(p, a + 64 * 1024, PAGE_SIZE, 2);
  expect_bytes(p, a + 68 * 1024, 12 * 1024, 0);
  EXPECT_EQ(stat64("collapse_alloc"), "31");  // the 31 64K ranges that held a page
  EXPECT_EQ(order_at(a + PMD_SIZE - PAGE_SIZE), 4);
  // MADV_COLLAPSE stays PMD-only.
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  EXPECT_EQ(entry_at(a).level, 2);
  EXPECT_EQ(rd("transparent_hugepage/hugepages-2048kB/stats/collapse_alloc"), "1");
}

TEST_F(MthpCollapseTest, MaxPtesNoneZeroAndOtherValues) {
  set(std::string(kKhp) + "max_ptes_none", "0");
  uint64_t a = map_aligned(PMD_SIZE);
  set("transparent_hugepage/hugepages-64kB/enabled", "never");
  ASSERT_TRUE(p->fill(a, 1, 64 * 1024).ok());               // a full 64K range of 4K pages
  ASSERT_TRUE(p->fill(a + 64 * 1024, 1, 60 * 1024).ok());   // one page short
  enable_order_kb(64);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(order_at(a), 4);
  EXPECT_EQ(order_at(a + 64 * 1024), 0);
  // A folio of the order already there: SCAN_PTE_MAPPED_HUGEPAGE, no new one.
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(stat64("collapse_alloc"), "2");  // the second scan allocated and gave up
  // Values other than 0 and 511 count as 0 for mTHP.
  set(std::string(kKhp) + "max_ptes_none", "100");
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(order_at(a + 64 * 1024), 0);
  expect_bytes(p, a, 124 * 1024, 1);
}

TEST_F(MthpCollapseTest, RefusesSwappedAndSharedRanges) {
  ASSERT_EQ(sys->add_swap(64ull << 20), 0);
  set("transparent_hugepage/hugepages-64kB/enabled", "never");
  uint64_t a = small_pages(PMD_SIZE, 1);
  ASSERT_EQ(p->madvise(a + 8 * PAGE_SIZE, PAGE_SIZE, MADV_PAGEOUT), 0);  // the first 64K holds a swap PTE
  ASSERT_TRUE(p->page_info(a + 8 * PAGE_SIZE).swap);
  Process* c = p->fork("child");  // every page shared...
  ASSERT_TRUE(c);
  ASSERT_TRUE(p->fill(a + 128 * 1024, 2, PMD_SIZE - 128 * 1024).ok());  // ...but the first two 64K ranges
  enable_order_kb(64);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_HUGEPAGE), 0);
  ASSERT_EQ(sys->run_khugepaged(1), 0);
  EXPECT_EQ(order_at(a), 0);
  EXPECT_EQ(order_at(a + 64 * 1024), 0);
  EXPECT_EQ(order_at(a + 128 * 1024), 4);
  EXPECT_EQ(order_at(a + PMD_SIZE - PAGE_SIZE), 4);
  EXPECT_EQ(stat64("collapse_exceed_swap_pte"), "1");
  EXPECT_EQ(stat64("collapse_exceed_shared_pte"), "1");
  // 30 collapsed, one allocated for the shared range and given back; the
  // swap range was refused before allocating (a fix-up: v18 allocates first).
  EXPECT_EQ(stat64("collapse_alloc"), "31");
  expect_bytes(p, a, 128 * 1024, 1);
  expect_bytes(p, a + 128 * 1024, PMD_SIZE - 128 * 1024, 2);
  expect_bytes(c, a, PMD_SIZE, 1);
  c->exit();
}

// ---- collapse against GUP-fast pins, faults and writers ----

// The oracle of collapse racing pins and writers, once every thread is done
// and the range collapsed once more: every page holds what its owner wrote
// last (a pin on a page that collapse replaced would have lost the pinner's
// writes), every PMD of the range is a leaf, the checker is clean. Used by
// the free-running tests and by the explorer's twin.
std::optional<std::string> collapse_pin_oracle(System& sys, Process* p, uint64_t a, const std::vector<uint8_t>& want) {
  for (uint64_t i = 0; i < want.size(); i++) {
    int64_t bad = -2;
    uint8_t found = 0;
    if (!p->read_expect(a + i * PAGE_SIZE, want[i], PAGE_SIZE, &bad, &found).ok() || bad != -1)
      return "page " + std::to_string(i) + " reads " + std::to_string(found) + ", its owner wrote " +
             std::to_string(want[i]) + " last";
  }
  for (uint64_t m = 0; m < want.size() * PAGE_SIZE / PMD_SIZE; m++) {
    auto e = p->pagetable_dump(a + m * PMD_SIZE, a + m * PMD_SIZE + PAGE_SIZE);
    if (e.empty() || e[0].level != 2) return "PMD " + std::to_string(m) + " is not collapsed at the end";
  }
  CheckReport r = sys.check();
  if (!r.ok()) return r.to_string();
  return std::nullopt;
}

// Every 4th page belongs to the pinner (it writes only through its pins),
// pages 1 and 2 of every 4 to a writer thread each, page 3 to nobody (the
// collapser's mprotect() target, so no writer meets a read-only VMA). At
// the end every page holds what its owner wrote last: a pin on a page that
// collapse replaced would have lost the pinner's writes.
void KhugepagedTest::race_collapse_with_pins(const char* fast, bool use_khugepaged) {
  ASSERT_EQ(sys->tune("gup.fast", fast), 0);
  const uint64_t nr_pmds = 4, len = nr_pmds * PMD_SIZE, npages = len / PAGE_SIZE;
  const uint64_t a = map_aligned(len);
  std::vector<std::atomic<uint8_t>> expect(npages);
  for (uint64_t i = 0; i < npages; i++) expect[i] = static_cast<uint8_t>(i % 4 == 3 ? 0x33 : 1);
  for (uint64_t i = 0; i < npages; i++) ASSERT_TRUE(p->fill(a + i * PAGE_SIZE, expect[i], PAGE_SIZE).ok());
  ASSERT_EQ(p->madvise(a, len, MADV_HUGEPAGE), 0);
  if (use_khugepaged) {
    ASSERT_EQ(sys->start_khugepaged_thread(), 0);
  }
#ifdef MMLAB_INSTRUMENTED_BUILD
  const int rounds = 8;
#else
  const int rounds = 60;
#endif
  std::atomic<bool> stop{false};
  std::atomic<long> collapsed{0}, refused{0}, pinned{0};
  std::thread collapser([&] {
    // The rounds go on until the pinner has pinned a few times and
    // khugepaged has collapsed (either may not have run yet), within a bound
    // so that one that never succeeds fails the test instead of hanging it.
    auto waiting = [&] { return pinned.load() < 8 || (use_khugepaged && sys->collapse_timing().collapsed == 0); };
    for (int r = 0; r < rounds || (waiting() && r < 1000 * rounds); r++) {
      for (uint64_t m = 0; m < nr_pmds; m++) {
        const uint64_t pmd = a + m * PMD_SIZE, victim = pmd + 3 * PAGE_SIZE;
        // PTE-map the range again (split the PMD), then collapse it.
        EXPECT_EQ(p->mprotect(victim, PAGE_SIZE, PROT_READ), 0);
        EXPECT_EQ(p->mprotect(victim, PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
        if (use_khugepaged) continue;
        int ret = p->madvise(pmd, PMD_SIZE, MADV_COLLAPSE);
        EXPECT_TRUE(ret == 0 || ret == -EAGAIN) << ret;
        (ret == 0 ? collapsed : refused)++;
      }
      if (use_khugepaged) std::this_thread::yield();
    }
    stop = true;
  });
  std::thread pinner([&] {
    std::mt19937 rng(7);
    std::vector<Page*> pg(16);
    uint8_t v = 2;
    while (!stop) {
      const uint64_t first = rng() % (npages - 16) & ~3ull;  // a pinner page
      const unsigned flags = FOLL_WRITE | (rng() % 2 ? FOLL_LONGTERM : 0);
      const bool is_pin = rng() % 4;  // else FOLL_GET, as vmsplice or O_DIRECT
      long n = is_pin ? pin_user_pages_fast(p->mm(), a + first * PAGE_SIZE, 16, flags, pg.data())
                      : get_user_pages_fast(p->mm(), a + first * PAGE_SIZE, 16, FOLL_WRITE, pg.data());
      for (long i = 0; i < n; i += 4) {
        // The device writes through what it holds.
        Page* page = pg[static_cast<size_t>(i)];
        user_memset(PhysMem::of(page), PhysMem::of(page)->page_address(page), v, PAGE_SIZE);
        expect[first + static_cast<uint64_t>(i)] = v;
      }
      if (n > 0) {
        pinned++;
        if (is_pin) {
          unpin_user_pages_dirty_lock(pg.data(), n, true);
        } else {
          for (long i = 0; i < n; i++) put_page(pg[static_cast<size_t>(i)]);
        }
      }
      v = static_cast<uint8_t>(v == 250 ? 2 : v + 1);
    }
  });
  auto writer = [&](uint64_t lane) {
    uint8_t v = 100;
    while (!stop) {
      for (uint64_t i = lane; i < npages; i += 4) {
        ASSERT_TRUE(p->fill(a + i * PAGE_SIZE, v, PAGE_SIZE).ok());
        expect[i] = v;
      }
      v = static_cast<uint8_t>(v == 200 ? 100 : v + 1);
    }
  };
  std::thread w1(writer, 1), w2(writer, 2);
  collapser.join();
  pinner.join();
  w1.join();
  w2.join();
  if (use_khugepaged) {
    sys->stop_khugepaged_thread();
    EXPECT_GT(sys->collapse_timing().collapsed, 0u);
    ASSERT_EQ(sys->run_khugepaged(1), 0);  // what the last splits left, collapsed now
  } else {
    EXPECT_GT(collapsed.load(), 0);
    for (uint64_t m = 0; m < nr_pmds; m++) EXPECT_EQ(p->madvise(a + m * PMD_SIZE, PMD_SIZE, MADV_COLLAPSE), 0);
  }
  EXPECT_GT(pinned.load(), 0);
  std::vector<uint8_t> want(npages);
  for (uint64_t i = 0; i < npages; i++) want[i] = expect[i];
  std::optional<std::string> bad = collapse_pin_oracle(*sys, p, a, want);
  EXPECT_FALSE(bad) << *bad;
  ASSERT_EQ(p->munmap(a, len), 0);
}

TEST_F(KhugepagedTest, MadviseCollapseRacesGupFastPinsAndWriters) {
  for (const std::string& fast : tune_values("gup.fast")) {
    SCOPED_TRACE(fast);
    race_collapse_with_pins(fast.c_str(), false);
  }
}

// The explorer's twin of MadviseCollapseRacesGupFastPinsAndWriters (which
// stays, free-running, as a smoke test): one PMD range, PTE-mapped, and
// three threads under PCT (fixed seeds, depth 2 and 3 in turn): C splits
// the PMD mapping (mprotect of page 3 and back) and collapses it
// (MADV_COLLAPSE, 0 or -EAGAIN); G pins pages 0-15 with GUP-fast and writes
// through pages 0, 4, 8 and 12 as a device would; W writes pages 1, 5, 9
// and 13. Then the range is collapsed once more and the same oracle runs.
struct CollapsePinRun {
  std::unique_ptr<System> sys;
  Process* p = nullptr;
  uint64_t a = 0;
  std::vector<uint8_t> want;
  int collapse_ret = 0;
};

void collapse_pin_twin(const char* fast, uint64_t seed, int runs) {
  explore::Race<CollapsePinRun> race;
  race.setup([fast](CollapsePinRun& f) {
    SystemConfig cfg;
    cfg.ram_bytes = 64ull << 20;
    f.sys = System::create(cfg);
    (void)f.sys->tune("gup.fast", fast);
    f.p = f.sys->new_process("P");
    const long raw = f.p->mmap(0, 2 * PMD_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    f.a = round_up(static_cast<uint64_t>(raw), PMD_SIZE);
    f.want.resize(HPAGE_PMD_NR);
    for (uint64_t i = 0; i < f.want.size(); i++) {
      f.want[i] = static_cast<uint8_t>(i % 4 == 3 ? 0x33 : 1);
      (void)f.p->fill(f.a + i * PAGE_SIZE, f.want[i], PAGE_SIZE);  // no MADV_HUGEPAGE yet: 4K pages
    }
    (void)f.p->madvise(f.a, PMD_SIZE, MADV_HUGEPAGE);
  });
  race.thread("C", [](CollapsePinRun& f) {
    (void)f.p->mprotect(f.a + 3 * PAGE_SIZE, PAGE_SIZE, PROT_READ);
    (void)f.p->mprotect(f.a + 3 * PAGE_SIZE, PAGE_SIZE, PROT_READ | PROT_WRITE);
    f.collapse_ret = f.p->madvise(f.a, PMD_SIZE, MADV_COLLAPSE);
  });
  race.thread("G", [](CollapsePinRun& f) {
    std::vector<Page*> pg(16);
    long n = pin_user_pages_fast(f.p->mm(), f.a, 16, FOLL_WRITE | FOLL_LONGTERM, pg.data());
    for (long i = 0; i < n; i += 4) {
      Page* page = pg[static_cast<size_t>(i)];
      user_memset(PhysMem::of(page), PhysMem::of(page)->page_address(page), 2, PAGE_SIZE);
      f.want[static_cast<size_t>(i)] = 2;
    }
    if (n > 0) unpin_user_pages_dirty_lock(pg.data(), n, true);
  });
  race.thread("W", [](CollapsePinRun& f) {
    for (uint64_t i = 1; i < 16; i += 4) {
      (void)f.p->fill(f.a + i * PAGE_SIZE, 100, PAGE_SIZE);
      f.want[i] = 100;
    }
  });
  race.check([](CollapsePinRun& f) -> std::optional<std::string> {
    if (f.collapse_ret != 0 && f.collapse_ret != -EAGAIN) return "MADV_COLLAPSE returned " + std::to_string(f.collapse_ret);
    const int ret = f.p->madvise(f.a, PMD_SIZE, MADV_COLLAPSE);
    if (ret != 0) return "the last MADV_COLLAPSE returned " + std::to_string(ret);
    if (auto bad = collapse_pin_oracle(*f.sys, f.p, f.a, f.want)) return bad;
    for (Process* q : f.sys->processes()) q->exit();
    CheckReport r = f.sys->check();
    if (!r.ok()) return "after exit:\n" + r.to_string();
    return std::nullopt;
  });
  race.id("KhugepagedExploreTest.MadviseCollapseRacesGupFastPinsAndWritersUnderPct", std::string("gup.fast=") + fast);
  auto res = race.explore(explore::Pct{.runs = runs, .seed = seed});
  EXPECT_FALSE(res.found) << res.summary() << "\n" << race.explain(res.failure);
  EXPECT_EQ(res.runs, runs);
  EXPECT_GT(res.k, 0u);
}

TEST(KhugepagedExploreTest, MadviseCollapseRacesGupFastPinsAndWritersUnderPct) {
  for (const std::string& fast : tune_values("gup.fast")) {
    SCOPED_TRACE(fast);
    collapse_pin_twin(fast.c_str(), 1, 100);
  }
}

TEST_F(KhugepagedTest, KhugepagedThreadRacesGupFastPinsAndWriters) {
  for (const std::string& fast : tune_values("gup.fast")) {
    SCOPED_TRACE(fast);
    race_collapse_with_pins(fast.c_str(), true);
  }
}

}  // namespace
}  // namespace mmlab::test
