// Fault injection (src/phys/fault_inject.h): the injector's modes, and every
// fallback path a failure site reaches, with the statistics the kernel
// counts there; and the fault accounting a retried fault tests. Each test ends with the checker and the leak check
// (MmTest::TearDown).
#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "gup/gup.h"
#include "mm/hugetlb.h"
#include "mmlab/gup.h"
#include "phys/fault_inject.h"
#include "stress/worker.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

using Mode = InjectSpec::Mode;

InjectSpec times(uint64_t n, int order = -1, uint64_t after = 0) {
  return InjectSpec{.mode = Mode::kTimes, .order = order, .n = n, .after = after};
}

class FaultInjectTest : public MmTest {
 protected:
  void inject(const char* site, const InjectSpec& spec) { ASSERT_EQ(sys->inject(site, spec), 0) << site; }
  void off(const char* site) { ASSERT_EQ(sys->inject(site, InjectSpec{}), 0) << site; }
  int64_t mthp(unsigned kb, const char* item) { return sys->mthp_stat(order_of_kb(kb), item); }
  int64_t vm(const char* item) { return sys->vmstat(item); }
  static unsigned order_of_kb(unsigned kb) {
    unsigned o = 0;
    while ((PAGE_SIZE << o) < kb * 1024ull) o++;
    return o;
  }
  void checked(const char* what) {
    CheckReport r = sys->check();
    EXPECT_TRUE(r.ok()) << what << ":\n" << r.to_string();
  }
  // One private page of byte b, shared with a forked child (*child).
  uint64_t forked_page(uint8_t b, Process** child) {
    thp_never();
    const uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
    EXPECT_TRUE(p->fill(a, b, PAGE_SIZE).ok());
    *child = p->fork("child");
    EXPECT_TRUE(*child);
    return a;
  }
  // Every anonymous THP size off but the ones a test enables.
  void thp_never() {
    set("transparent_hugepage/enabled", "never");
    for (unsigned kb = 16; kb <= 2048; kb *= 2) set("transparent_hugepage/hugepages-" + std::to_string(kb) + "kB/enabled", "never");
  }
};

// ---- the injector itself ----

TEST_F(FaultInjectTest, ModesCountAndFilterByOrder) {
  FaultInjector fi;
  Stats st;
  fi.set_stats(&st);
  auto pattern = [&](FaultSite s, unsigned order, int calls) {
    std::string r;
    for (int i = 0; i < calls; i++) r += fi.should_fail(s, order) ? 'x' : '.';
    return r;
  };
  EXPECT_EQ(pattern(FaultSite::page_alloc, 0, 4), "....");  // disarmed
  ASSERT_EQ(fi.set(FaultSite::page_alloc, FaultSpec{.mode = FaultSpec::Mode::kTimes, .n = 2, .after = 1}), 0);
  EXPECT_EQ(pattern(FaultSite::page_alloc, 0, 5), ".xx..");
  ASSERT_EQ(fi.set(FaultSite::page_alloc, FaultSpec{.mode = FaultSpec::Mode::kEvery, .order = 4, .n = 3}), 0);
  EXPECT_EQ(pattern(FaultSite::page_alloc, 0, 6), "......");  // other orders never count
  EXPECT_EQ(pattern(FaultSite::page_alloc, 4, 6), "..x..x");
  ASSERT_EQ(fi.set(FaultSite::charge, FaultSpec{.mode = FaultSpec::Mode::kProbability, .probability = 1}), 0);
  EXPECT_EQ(pattern(FaultSite::charge, 3, 3), "xxx");
  ASSERT_EQ(fi.set(FaultSite::charge, FaultSpec{.mode = FaultSpec::Mode::kProbability, .probability = 0}), 0);
  EXPECT_EQ(pattern(FaultSite::charge, 3, 3), "...");
  EXPECT_EQ(fi.injected(FaultSite::page_alloc), 4u);
  EXPECT_EQ(fi.injected(FaultSite::charge), 3u);
  EXPECT_EQ(st.read(Event::inject_page_alloc), 4u);
  EXPECT_EQ(st.read(Event::inject_charge), 3u);
  // Out of range: n == 0, P outside [0, 1].
  EXPECT_EQ(fi.set(FaultSite::copy_mc, FaultSpec{.mode = FaultSpec::Mode::kTimes, .n = 0}), -EINVAL);
  EXPECT_EQ(fi.set(FaultSite::copy_mc, FaultSpec{.mode = FaultSpec::Mode::kProbability, .probability = 1.5}), -EINVAL);
  EXPECT_FALSE(fi.armed(FaultSite::copy_mc));
}

// Probability draws depend on the seed and the call number only: the same
// seed gives the same pattern, about P of the calls fail.
TEST_F(FaultInjectTest, ProbabilityIsSeededAndNearItsRate) {
  auto run = [](uint64_t seed) {
    FaultInjector fi;
    fi.seed(seed);
    EXPECT_EQ(fi.set(FaultSite::folio_trylock, FaultSpec{.mode = FaultSpec::Mode::kProbability, .probability = 0.1}), 0);
    std::string r;
    for (int i = 0; i < 10000; i++) r += fi.should_fail(FaultSite::folio_trylock) ? 'x' : '.';
    return r;
  };
  const std::string a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto n = std::count(a.begin(), a.end(), 'x');
  EXPECT_GT(n, 800);
  EXPECT_LT(n, 1200);
}

TEST_F(FaultInjectTest, SystemApiNamesSitesAndCounters) {
  EXPECT_EQ(sys->inject("no_such_site", times(1)), -EINVAL);
  EXPECT_EQ(sys->inject("page_alloc", InjectSpec{.mode = Mode::kEvery, .n = 0}), -EINVAL);
  EXPECT_EQ(sys->injected("no_such_site"), -1);
  for (const std::string& s : System::inject_sites()) {
    EXPECT_EQ(sys->injected(s), 0) << s;
    EXPECT_EQ(sys->counter("inject." + s), 0) << s;
  }
}

// ---- anonymous faults: alloc_anon_folio and the PMD path ----

// An mTHP allocation failure counts anon_fault_fallback for that size and
// tries the next enabled one.
TEST_F(FaultInjectTest, MthpAllocationFailureFallsBackToTheNextOrder) {
  thp_never();
  enable_order_kb(64);
  enable_order_kb(32);
  const uint64_t a = map_aligned(k64K, k64K);
  inject("page_alloc", times(1, 4));
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  EXPECT_EQ(sys->injected("page_alloc"), 1);
  EXPECT_EQ(sys->counter("inject.page_alloc"), 1);
  EXPECT_EQ(order_at(a), 3);
  EXPECT_EQ(mthp(64, "anon_fault_fallback"), 1);
  EXPECT_EQ(mthp(64, "anon_fault_fallback_charge"), 0);
  EXPECT_EQ(mthp(64, "anon_fault_alloc"), 0);
  EXPECT_EQ(mthp(32, "anon_fault_alloc"), 1);
  EXPECT_EQ(mthp(32, "anon_fault_fallback"), 0);
  expect_bytes(p, a, PAGE_SIZE, 1);
  expect_bytes(p, a + PAGE_SIZE, k64K / 2 - PAGE_SIZE, 0);
}

// A charge failure counts both anon_fault_fallback_charge and
// anon_fault_fallback, and puts the folio it allocated.
TEST_F(FaultInjectTest, MthpChargeFailureCountsBothFallbacks) {
  thp_never();
  enable_order_kb(64);
  enable_order_kb(32);
  const uint64_t a = map_aligned(k64K, k64K);
  const uint64_t free_before = sys->nr_free_pages();
  const long tables_before = p->pgtables_bytes();
  inject("charge", times(1, 4));
  ASSERT_TRUE(p->fill(a, 2, PAGE_SIZE).ok());
  EXPECT_EQ(sys->injected("charge"), 1);
  EXPECT_EQ(order_at(a), 3);
  EXPECT_EQ(mthp(64, "anon_fault_fallback_charge"), 1);
  EXPECT_EQ(mthp(64, "anon_fault_fallback"), 1);
  EXPECT_EQ(mthp(32, "anon_fault_alloc"), 1);
  // The 32K folio and the new page tables are in use: the 64K folio went back.
  const uint64_t new_tables = static_cast<uint64_t>(p->pgtables_bytes() - tables_before) / PAGE_SIZE;
  EXPECT_EQ(free_before - sys->nr_free_pages(), 8u + new_tables);
  expect_bytes(p, a, PAGE_SIZE, 2);
}

// Every mTHP size failing ends at order 0; an order-0 failure is
// VM_FAULT_OOM (the CPU access dies with SIGKILL, GUP gets -ENOMEM) and
// counts no statistic.
TEST_F(FaultInjectTest, OrderZeroFailureIsOomWithNoStatistic) {
  thp_never();
  enable_order_kb(64);
  const uint64_t a = map_aligned(2 * k64K, k64K);
  inject("page_alloc", InjectSpec{.mode = Mode::kEvery, .order = 4, .n = 1});
  ASSERT_TRUE(p->fill(a, 3, PAGE_SIZE).ok());  // 64K fails, order 0 serves
  EXPECT_EQ(order_at(a), 0);
  EXPECT_EQ(mthp(64, "anon_fault_fallback"), 1);
  off("page_alloc");

  const uint64_t fallback = mthp(64, "anon_fault_fallback"), thp_fallback_before = vm("thp_fault_fallback");
  // The second 64K range: its table exists, so the only order-0
  // allocation is the folio's.
  inject("page_alloc", InjectSpec{.mode = Mode::kEvery, .n = 1});
  AccessResult r = p->fill(a + k64K, 4, PAGE_SIZE);
  EXPECT_EQ(r.sig, Signal::kSigkill);
  GupPages pages;
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a + k64K, 1, foll::WRITE, &pages), -ENOMEM);
  off("page_alloc");
  EXPECT_EQ(mthp(64, "anon_fault_fallback"), static_cast<int64_t>(fallback) + 2);  // the 64K tries before order 0
  EXPECT_EQ(vm("thp_fault_fallback"), thp_fallback_before);
  EXPECT_EQ(entry_at(a + k64K).level, 0);  // nothing mapped
  checked("after the OOM faults");
  expect_bytes(p, a + k64K, PAGE_SIZE, 0);  // the fault now succeeds
}

// The PMD path counts thp_fault_fallback and the order-9 mTHP statistics
// (with the _charge ones for a charge failure), then falls back to the PTE
// path.
TEST_F(FaultInjectTest, PmdFailureCountsThpFallbackAndUsesThePteFallback) {
  thp_never();
  set("transparent_hugepage/enabled", "always");
  set("transparent_hugepage/hugepages-2048kB/enabled", "inherit");
  for (const char* site : {"page_alloc", "charge"}) {
    SCOPED_TRACE(site);
    const bool charge = std::string(site) == "charge";
    const int64_t fb = vm("thp_fault_fallback"), fbc = vm("thp_fault_fallback_charge");
    const int64_t mfb = mthp(2048, "anon_fault_fallback"), mfbc = mthp(2048, "anon_fault_fallback_charge");
    const int64_t alloc = vm("thp_fault_alloc");
    const uint64_t a = map_aligned(PMD_SIZE);
    inject(site, times(1, PMD_ORDER));
    ASSERT_TRUE(p->fill(a, 5, PAGE_SIZE).ok());
    EXPECT_EQ(sys->injected(site), 1);
    off(site);
    EXPECT_EQ(vm("thp_fault_fallback") - fb, 1);
    EXPECT_EQ(vm("thp_fault_fallback_charge") - fbc, charge ? 1 : 0);
    EXPECT_EQ(mthp(2048, "anon_fault_fallback") - mfb, 1);
    EXPECT_EQ(mthp(2048, "anon_fault_fallback_charge") - mfbc, charge ? 1 : 0);
    EXPECT_EQ(vm("thp_fault_alloc"), alloc);
    EXPECT_EQ(entry_at(a).level, 1);  // a PTE of an order-0 folio
    EXPECT_EQ(order_at(a), 0);
    expect_bytes(p, a, PAGE_SIZE, 5);
    checked("after the fallback");
    ASSERT_EQ(p->munmap(a, PMD_SIZE), 0);
  }
}

// ---- copy-on-write ----

// A CoW whose allocation fails: the CPU access dies (OOM, SIGKILL), GUP
// returns -ENOMEM, and both processes keep their data.
TEST_F(FaultInjectTest, CowAllocationFailureIsOomForCpuAndGup) {
  Process* c = nullptr;
  const uint64_t a = forked_page(6, &c);
  ASSERT_TRUE(c);
  inject("page_alloc", times(1, 0));
  EXPECT_EQ(c->fill(a, 7, PAGE_SIZE).sig, Signal::kSigkill);
  inject("page_alloc", times(1, 0));
  GupPages pages;
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a, 1, foll::WRITE, &pages), -ENOMEM);
  EXPECT_EQ(sys->injected("page_alloc"), 2);
  expect_bytes(p, a, PAGE_SIZE, 6);
  expect_bytes(c, a, PAGE_SIZE, 6);
  EXPECT_EQ(sys->counter("fault.wp_copy"), 0);
  checked("after the failed copies");
  ASSERT_TRUE(c->fill(a, 7, PAGE_SIZE).ok());  // no injection: the copy happens
  expect_bytes(p, a, PAGE_SIZE, 6);
  expect_bytes(c, a, PAGE_SIZE, 7);
}

// The same with the charge failing: folio_prealloc puts the folio.
TEST_F(FaultInjectTest, CowChargeFailureIsOom) {
  Process* c = nullptr;
  const uint64_t a = forked_page(6, &c);
  ASSERT_TRUE(c);
  inject("charge", times(1));
  EXPECT_EQ(c->fill(a, 7, PAGE_SIZE).sig, Signal::kSigkill);
  EXPECT_EQ(sys->injected("charge"), 1);
  expect_bytes(c, a, PAGE_SIZE, 6);
}

// `mmlab stress`'s tracker takes a signal on an access as an injected
// outcome only from a site whose failure can cause that signal there: a
// machine check in the copy (SIGBUS), an allocation (SIGKILL); a retry or
// a failed trylock explains none. It used to take any signal after any
// injection on the thread: 977 "injected SIGBUS" in one run in which
// copy_mc injected nothing.
TEST_F(FaultInjectTest, StressTrackerTakesASignalOnlyFromASiteThatCanCauseIt) {
  Process* c = nullptr;
  const uint64_t a = forked_page(8, &c);
  ASSERT_TRUE(c);
  stress::InjectSnapshot before = stress::injected_snapshot();
  inject("copy_mc", times(1));
  EXPECT_EQ(c->fill(a, 9, PAGE_SIZE).sig, Signal::kSigbus);
  EXPECT_STREQ(stress::access_cause(before, stress::injected_snapshot(), Signal::kSigbus), "copy_mc");
  EXPECT_EQ(stress::access_cause(before, stress::injected_snapshot(), Signal::kSigkill), nullptr);
  before = stress::injected_snapshot();
  inject("page_alloc", times(1, 0));
  EXPECT_EQ(c->fill(a, 9, PAGE_SIZE).sig, Signal::kSigkill);
  const stress::InjectSnapshot now = stress::injected_snapshot();
  EXPECT_STREQ(stress::access_cause(before, now, Signal::kSigkill), "page_alloc");
  EXPECT_EQ(stress::access_cause(before, now, Signal::kSigbus), nullptr);
  // A retried fault and a failed trylock were injected, and explain no signal.
  before = stress::injected_snapshot();
  const uint64_t injected = System::injected_on_this_thread();
  inject("fault_retry", times(1));
  inject("folio_trylock", times(1));
  ASSERT_TRUE(c->fill(a, 9, PAGE_SIZE).ok());
  EXPECT_GT(System::injected_on_this_thread(), injected);
  for (Signal sig : {Signal::kSigbus, Signal::kSigkill, Signal::kSigsegv})
    EXPECT_EQ(stress::access_cause(before, stress::injected_snapshot(), sig), nullptr);
  expect_bytes(c, a, PAGE_SIZE, 9);
  expect_bytes(p, a, PAGE_SIZE, 8);
}

// A machine check while copying the old page (copy_mc_user_highpage): the
// write faults with SIGBUS (VM_FAULT_HWPOISON) and is not retried; GUP gets
// -EHWPOISON with FOLL_HWPOISON and -EFAULT without.
TEST_F(FaultInjectTest, CowCopyMachineCheckIsSigbus) {
  Process* c = nullptr;
  const uint64_t a = forked_page(8, &c);
  ASSERT_TRUE(c);
  inject("copy_mc", times(1));
  EXPECT_EQ(c->fill(a, 9, PAGE_SIZE).sig, Signal::kSigbus);
  GupPages pages;
  inject("copy_mc", times(1));
  EXPECT_EQ(gup(c, GupEntry::kGetUserPages, a, 1, foll::WRITE | foll::HWPOISON, &pages), -EHWPOISON);
  inject("copy_mc", times(1));
  EXPECT_EQ(gup(c, GupEntry::kGetUserPages, a, 1, foll::WRITE, &pages), -EFAULT);
  EXPECT_EQ(sys->injected("copy_mc"), 3);
  EXPECT_EQ(sys->counter("fault.wp_copy"), 0);
  expect_bytes(p, a, PAGE_SIZE, 8);
  expect_bytes(c, a, PAGE_SIZE, 8);
  checked("after the machine checks");
  ASSERT_TRUE(c->fill(a, 9, PAGE_SIZE).ok());
  expect_bytes(p, a, PAGE_SIZE, 8);
}

// The same in the large-folio CoW policies (`cow.policy rfc` and `fixed`):
// a machine check on any page of the run is VM_FAULT_HWPOISON for the whole
// fault, SIGBUS, as the kernel's large copies (copy_user_large_folio) give;
// no large folio is installed and nothing is retried at a smaller order.
TEST_F(FaultInjectTest, LargeCowCopyMachineCheckIsSigbus) {
  thp_never();
  set("transparent_hugepage/hugepages-64kB/enabled", "always");
  constexpr uint64_t k64K = 64 * 1024;
  for (const char* pol : {"rfc", "fixed"}) {
    SCOPED_TRACE(pol);
    ASSERT_EQ(sys->tune("cow.policy", pol), 0);
    const uint64_t a = map_aligned(k64K, k64K);
    ASSERT_TRUE(p->fill(a, 8, k64K).ok());
    ASSERT_EQ(order_at(a), 4);
    Process* c = p->fork("child");
    ASSERT_TRUE(c);
    const int64_t alloc = mthp(64, "wp_fault_alloc");
    const int64_t injected = sys->injected("copy_mc");
    inject("copy_mc", times(1, -1, 5));  // the sixth page of the copy
    EXPECT_EQ(c->fill(a + 3 * PAGE_SIZE, 9, PAGE_SIZE).sig, Signal::kSigbus);
    EXPECT_EQ(sys->injected("copy_mc") - injected, 1);
    inject("copy_mc", times(1));
    GupPages pages;
    EXPECT_EQ(gup(c, GupEntry::kGetUserPages, a, 1, foll::WRITE | foll::HWPOISON, &pages), -EHWPOISON);
    off("copy_mc");
    EXPECT_EQ(mthp(64, "wp_fault_alloc"), alloc);
    EXPECT_EQ(order_at(a), 4);
    EXPECT_EQ(entry_at(c, a).pfn, entry_at(p, a).pfn) << "the child still shares the old folio";
    expect_bytes(p, a, k64K, 8);
    expect_bytes(c, a, k64K, 8);
    checked("after the machine checks");
    ASSERT_TRUE(c->fill(a + 3 * PAGE_SIZE, 9, PAGE_SIZE).ok());  // no injection: the large copy happens
    EXPECT_EQ(mthp(64, "wp_fault_alloc") - alloc, 1);
    EXPECT_EQ(entry_at(c, a).folio_order, 4);
    expect_bytes(c, a + 3 * PAGE_SIZE, PAGE_SIZE, 9);
    expect_bytes(p, a, k64K, 8);
    c->exit();
    ASSERT_EQ(p->munmap(a, k64K), 0);
  }
}

// fork copies a page the parent may have pinned at once (copy_present_page);
// a machine check there fails the fork with -EHWPOISON (copy_pte_range
// stops, dup_mmap fails): the child is torn down, nothing leaks, the parent
// and its pin are intact.
TEST_F(FaultInjectTest, ForkCopyMachineCheckFailsTheFork) {
  thp_never();
  const uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 11, 4 * PAGE_SIZE).ok());
  GupPages pin;
  ASSERT_EQ(gup(p, GupEntry::kPinUserPages, a + PAGE_SIZE, 1, foll::WRITE, &pin), 1);
  const uint64_t free_before = sys->nr_free_pages();
  const long rss = p->rss_anon(), tables = p->pgtables_bytes();
  inject("copy_mc", times(1));
  int err = 0;
  Process* c = p->fork("child", &err);
  off("copy_mc");
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(err, -EHWPOISON);
  EXPECT_EQ(sys->injected("copy_mc"), 1);
  EXPECT_EQ(sys->processes().size(), 1u);
  EXPECT_EQ(sys->nr_free_pages(), free_before);
  EXPECT_EQ(p->rss_anon(), rss);
  EXPECT_EQ(p->pgtables_bytes(), tables);
  EXPECT_EQ(sys->counter("fork.copied_pages"), 0);
  std::map<uint64_t, long> refs;
  pin.add_refs(&refs);
  CheckReport r = sys->check_with_refs(refs);
  EXPECT_TRUE(r.ok()) << "after the failed fork:\n" << r.to_string();
  expect_bytes(p, a, 4 * PAGE_SIZE, 11);
  // Without injection the fork copies the pinned page for the child.
  c = p->fork("child", &err);
  ASSERT_TRUE(c);
  EXPECT_EQ(err, 0);
  EXPECT_EQ(sys->counter("fork.copied_pages"), 1);
  EXPECT_NE(entry_at(c, a + PAGE_SIZE).pfn, entry_at(p, a + PAGE_SIZE).pfn);
  expect_bytes(c, a, 4 * PAGE_SIZE, 11);
  ASSERT_EQ(pin.fill(0, 12, PAGE_SIZE), 0);
  pin.release(Dirty::kYes);
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 12);
  expect_bytes(c, a + PAGE_SIZE, PAGE_SIZE, 11);
}

// ---- collapse ----

// A machine check during the collapse copy: the PMD gets its table back,
// every page stays mapped as before, MADV_COLLAPSE returns -EINVAL; without
// injection the same collapse then succeeds.
TEST_F(FaultInjectTest, CollapseCopyMachineCheckRestoresThePmd) {
  thp_never();
  const uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 10, PMD_SIZE).ok());
  const long tables = p->pgtables_bytes();
  inject("copy_mc", times(1, -1, 100));  // the 101st page copied
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EINVAL);
  EXPECT_EQ(sys->injected("copy_mc"), 1);
  EXPECT_EQ(sys->counter("collapse.success"), 0);
  EXPECT_EQ(vm("thp_collapse_alloc"), 1);
  EXPECT_EQ(entry_at(a).level, 1);
  EXPECT_EQ(entry_at(a + PMD_SIZE - PAGE_SIZE).level, 1);
  EXPECT_EQ(p->pgtables_bytes(), tables);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  checked("after the failed collapse");
  expect_bytes(p, a, PMD_SIZE, 10);
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 11, PAGE_SIZE).ok());  // still writable in place
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
  EXPECT_EQ(order_at(a), 9);
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 11);
}

// The collapse folio's charge failing: SCAN_CGROUP_CHARGE_FAIL, -EBUSY.
TEST_F(FaultInjectTest, CollapseChargeFailureIsEbusy) {
  thp_never();
  const uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 12, PMD_SIZE).ok());
  inject("charge", times(1, PMD_ORDER));
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EBUSY);
  EXPECT_EQ(vm("thp_collapse_alloc"), 1);
  EXPECT_EQ(entry_at(a).level, 1);
  expect_bytes(p, a, PMD_SIZE, 12);
}

// folio_trylock failing in the collapse isolation: SCAN_PAGE_LOCK, -EAGAIN.
TEST_F(FaultInjectTest, CollapseFolioTrylockFailureIsEagain) {
  thp_never();
  const uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 13, PMD_SIZE).ok());
  inject("folio_trylock", times(1));
  EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), -EAGAIN);
  EXPECT_EQ(sys->injected("folio_trylock"), 1);
  EXPECT_EQ(entry_at(a).level, 1);
  expect_bytes(p, a, PMD_SIZE, 13);
  ASSERT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0);
}

// ---- page-table allocation ----

TEST_F(FaultInjectTest, PageTableAllocationFailureInFault) {
  thp_never();
  const uint64_t a = map_aligned(PMD_SIZE);
  inject("pgtable_alloc", InjectSpec{.mode = Mode::kEvery, .n = 1});
  EXPECT_EQ(p->fill(a, 1, PAGE_SIZE).sig, Signal::kSigkill);
  GupPages pages;
  EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a, 1, foll::WRITE, &pages), -ENOMEM);
  off("pgtable_alloc");
  EXPECT_GE(sys->injected("pgtable_alloc"), 2);
  EXPECT_EQ(p->rss_anon(), 0);
  checked("after the failed faults");
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
}

// fork fails cleanly with ENOMEM wherever the child's tables run out:
// nothing leaks, the parent keeps its memory. Every point of failure in
// turn, until fork needs no more tables than allowed.
TEST_F(FaultInjectTest, PageTableAllocationFailureInForkFailsCleanly) {
  thp_never();
  const uint64_t a = map_aligned(2 * PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 14, 2 * PMD_SIZE).ok());
  const uint64_t free_before = sys->nr_free_pages();
  const long rss = p->rss_anon(), tables = p->pgtables_bytes();
  int failures = 0;
  for (uint64_t after = 0;; after++) {
    SCOPED_TRACE(after);
    inject("pgtable_alloc", times(1, -1, after));
    Process* c = p->fork("child");
    const bool injected = sys->injected("pgtable_alloc") > failures;
    off("pgtable_alloc");
    if (!injected) {
      ASSERT_TRUE(c);
      expect_bytes(c, a, 2 * PMD_SIZE, 14);
      c->exit();
      break;
    }
    failures++;
    EXPECT_EQ(c, nullptr);
    EXPECT_EQ(sys->processes().size(), 1u);
    EXPECT_EQ(sys->nr_free_pages(), free_before);
    EXPECT_EQ(p->rss_anon(), rss);
    EXPECT_EQ(p->pgtables_bytes(), tables);
    checked("after the failed fork");
    ASSERT_LT(after, 64u);
  }
  EXPECT_GE(failures, 3);  // PUD, PMD and at least one PTE table
  expect_bytes(p, a, 2 * PMD_SIZE, 14);
  ASSERT_TRUE(p->fill(a, 15, PAGE_SIZE).ok());  // the parent's pages are its own again
}

// mremap whose destination table cannot be allocated: the moved part goes
// back, the new area is unmapped, -ENOMEM, the old mapping intact.
TEST_F(FaultInjectTest, PageTableAllocationFailureInMremap) {
  thp_never();
  const uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 16, PMD_SIZE).ok());
  const long dst = p->mmap(0, 4 * PMD_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(dst, 0);
  const uint64_t to = round_up(static_cast<uint64_t>(dst), PMD_SIZE) + PMD_SIZE / 2;  // straddles two tables
  ASSERT_EQ(p->munmap(static_cast<uint64_t>(dst), 4 * PMD_SIZE), 0);
  inject("pgtable_alloc", times(1, -1, 1));
  EXPECT_EQ(p->mremap(a, PMD_SIZE, PMD_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, to), -ENOMEM);
  EXPECT_EQ(sys->injected("pgtable_alloc"), 1);
  off("pgtable_alloc");
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PMD_SIZE));
  checked("after the failed mremap");
  expect_bytes(p, a, PMD_SIZE, 16);
  uint8_t b = 0;
  EXPECT_EQ(p->read(to, &b, 1).sig, Signal::kSigsegv);
}

// ---- VM_FAULT_RETRY and GUP's lock-dropping path ----

// A fault allowed to retry drops mmap_lock and returns VM_FAULT_RETRY; GUP
// (*locked = 0) retakes the lock and faults again with FOLL_TRIED, as often
// as the fault retries. Only the entry points that set FOLL_UNLOCKABLE
// (the unlocked ones, GUP-fast's slow fallback) let it happen.
TEST_F(FaultInjectTest, FaultRetryDropsTheLockAndGupRetries) {
  thp_never();
  struct Case {
    GupEntry entry;
    bool unlockable;
  };
  for (const Case& k : {Case{GupEntry::kGetUserPagesUnlocked, true}, Case{GupEntry::kPinUserPagesUnlocked, true},
                        Case{GupEntry::kGetUserPagesFast, true}, Case{GupEntry::kPinUserPagesFast, true},
                        Case{GupEntry::kGetUserPages, false}, Case{GupEntry::kPinUserPages, false}}) {
    SCOPED_TRACE(gup_entry_name(k.entry));
    const uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
    const int64_t before = sys->injected("fault_retry");
    inject("fault_retry", times(3));  // the first fault, then its FOLL_TRIED retry twice
    GupPages pages;
    EXPECT_EQ(gup(p, k.entry, a, 4, foll::WRITE, &pages), 4);
    EXPECT_EQ(sys->injected("fault_retry") - before, k.unlockable ? 3 : 0);
    off("fault_retry");
    EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * PAGE_SIZE));
    ASSERT_EQ(pages.fill(0, 0x5a, 4 * PAGE_SIZE), 0);
    std::map<uint64_t, long> refs;
    pages.add_refs(&refs);
    CheckReport r = sys->check_with_refs(refs);
    EXPECT_TRUE(r.ok()) << r.to_string();
    pages.release(Dirty::kYes);
    expect_bytes(p, a, 4 * PAGE_SIZE, 0x5a);
    ASSERT_EQ(p->munmap(a, 4 * PAGE_SIZE), 0);  // mmap_lock for write: nothing left it held
  }
}

// FOLL_NOWAIT (FAULT_FLAG_RETRY_NOWAIT): the fault keeps the lock and GUP
// returns what it has, here nothing.
TEST_F(FaultInjectTest, FaultRetryNowaitKeepsTheLock) {
  thp_never();
  const uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  inject("fault_retry", times(1));
  GupPages pages;
  EXPECT_EQ(gup(p, GupEntry::kGetUserPagesUnlocked, a, 2, foll::WRITE | foll::NOWAIT, &pages), 0);
  EXPECT_EQ(sys->injected("fault_retry"), 1);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(gup(p, GupEntry::kGetUserPagesUnlocked, a, 2, foll::WRITE | foll::NOWAIT, &pages), 2);
  pages.release();
  ASSERT_EQ(p->munmap(a, 2 * PAGE_SIZE), 0);
}

// MADV_POPULATE_WRITE through a retrying fault: the range is populated and
// madvise returns with mmap_lock released once.
TEST_F(FaultInjectTest, FaultRetryDuringPopulate) {
  thp_never();
  const uint64_t a = map_aligned(8 * PAGE_SIZE, PAGE_SIZE);
  inject("fault_retry", InjectSpec{.mode = Mode::kEvery, .n = 2});
  EXPECT_EQ(p->madvise(a, 8 * PAGE_SIZE, MADV_POPULATE_WRITE), 0);
  off("fault_retry");
  EXPECT_GE(sys->injected("fault_retry"), 4);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(8 * PAGE_SIZE));
  ASSERT_EQ(p->munmap(a, 8 * PAGE_SIZE), 0);
}

// A CPU access faults as do_user_addr_fault does, with FAULT_FLAG_ALLOW_RETRY:
// a retrying fault drops its lock (the per-VMA lock first, then mmap_lock),
// the handler takes mmap_lock again and repeats the fault with
// FAULT_FLAG_TRIED until it completes; the access then succeeds.
TEST_F(FaultInjectTest, FaultRetryInACpuAccessRetakesTheLockAndRetries) {
  thp_never();
  const uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());  // the VMA has its anon_vma: later faults need no mmap_lock
  sys->reset_counters();
  inject("fault_retry", times(3));  // the per-VMA-lock fault, then two retries under mmap_lock
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 2, PAGE_SIZE).ok());
  EXPECT_EQ(sys->injected("fault_retry"), 3);
  EXPECT_EQ(sys->counter("fault.vma_lock"), 1);
  EXPECT_EQ(sys->counter("fault.mmap_lock"), 3);  // two retried, one completed
  off("fault_retry");
  uint8_t b = 0;
  inject("fault_retry", times(1));  // a read fault retries the same way
  ASSERT_TRUE(p->read(a + 2 * PAGE_SIZE, &b, 1).ok());
  EXPECT_EQ(sys->injected("fault_retry"), 4);
  off("fault_retry");
  EXPECT_EQ(b, 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * PAGE_SIZE));
  expect_bytes(p, a, PAGE_SIZE, 1);
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 2);
  checked("after the retried faults");
  ASSERT_EQ(p->munmap(a, 4 * PAGE_SIZE), 0);  // mmap_lock and the VMA for write: no lock was left held
}

// ---- swap-in and hugetlb ----

// A swap-in read error: SIGBUS. zram is SWP_SYNCHRONOUS_IO and the entry
// has one user, so do_swap_page reads into a folio it never adds to the
// swap cache: on the error the folio is freed, the entry stays, and the
// next fault reads the slot again (pswpin counts reads that completed).
TEST_F(FaultInjectTest, SwapInReadErrorIsSigbus) {
  thp_never();
  ASSERT_EQ(sys->add_swap(8ull << 20, SwapKind::kZram), 0);
  const uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 17, 2 * PAGE_SIZE).ok());
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_PAGEOUT), 0);
  ASSERT_EQ(vm("pswpout"), 2);
  inject("swapin", times(1));
  uint8_t b = 0;
  EXPECT_EQ(p->read(a, &b, 1).sig, Signal::kSigbus);
  EXPECT_EQ(sys->injected("swapin"), 1);
  EXPECT_EQ(vm("pswpin"), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  checked("after the read error");
  expect_bytes(p, a, PAGE_SIZE, 17);  // the entry stayed: read again, without error now
  EXPECT_EQ(vm("pswpin"), 1);
  expect_bytes(p, a + PAGE_SIZE, PAGE_SIZE, 17);
  EXPECT_EQ(vm("pswpin"), 2);
}

class FaultInjectHugetlbTest : public FaultInjectTest {
 protected:
  FaultInjectHugetlbTest() { ram_bytes = 512ull << 20; }
  void TearDown() override {
    if (sys) {
      EXPECT_EQ(hugetlb_pool_audit(sys->kernel()), "");
    }
    FaultInjectTest::TearDown();
  }
  std::string attr(const char* name) {
    std::string v;
    EXPECT_EQ(sys->sysfs_read(std::string("hugepages/hugepages-2048kB/") + name, &v), 0);
    return v;
  }
};

// hugetlb_reserve_pages refusing: mmap fails with -ENOMEM, nothing reserved.
TEST_F(FaultInjectHugetlbTest, HugetlbReservationFailureFailsMmap) {
  set("hugepages/hugepages-2048kB/nr_hugepages", "2");
  for (int flags : {MAP_PRIVATE, MAP_SHARED}) {
    SCOPED_TRACE(flags);
    inject("hugetlb_resv", times(1, PMD_ORDER));
    EXPECT_EQ(p->mmap(0, 2 * PMD_SIZE, RW, flags | MAP_ANONYMOUS | MAP_HUGETLB), -ENOMEM);
    EXPECT_EQ(attr("resv_hugepages"), "0");
    EXPECT_EQ(attr("free_hugepages"), "2");
    const long a = p->mmap(0, 2 * PMD_SIZE, RW, flags | MAP_ANONYMOUS | MAP_HUGETLB);
    ASSERT_GT(a, 0);
    ASSERT_TRUE(p->fill(static_cast<uint64_t>(a), 18, 2 * PMD_SIZE).ok());
    ASSERT_EQ(p->munmap(static_cast<uint64_t>(a), 2 * PMD_SIZE), 0);
  }
  EXPECT_EQ(sys->injected("hugetlb_resv"), 2);
}

// hugetlb_wp copies the whole huge page with copy_user_large_folio: a
// machine check on any of its pages is VM_FAULT_HWPOISON_LARGE, SIGBUS; the
// new page goes back to the pool and the child keeps sharing the old one.
TEST_F(FaultInjectHugetlbTest, HugetlbCowCopyMachineCheckIsSigbus) {
  set("hugepages/hugepages-2048kB/nr_hugepages", "2");
  const long raw = p->mmap(0, PMD_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB);
  ASSERT_GT(raw, 0);
  const uint64_t a = static_cast<uint64_t>(raw);
  ASSERT_TRUE(p->fill(a, 21, PMD_SIZE).ok());
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  const std::string free_before = attr("free_hugepages");
  inject("copy_mc", times(1, -1, 100));  // the 101st page of the copy
  EXPECT_EQ(c->fill(a + 7 * PAGE_SIZE, 22, PAGE_SIZE).sig, Signal::kSigbus);
  off("copy_mc");
  EXPECT_EQ(sys->injected("copy_mc"), 1);
  EXPECT_EQ(attr("free_hugepages"), free_before);
  EXPECT_EQ(entry_at(c, a).pfn, entry_at(p, a).pfn) << "the child still shares the old page";
  expect_bytes(p, a, PMD_SIZE, 21);
  expect_bytes(c, a, PMD_SIZE, 21);
  checked("after the machine check");
  ASSERT_TRUE(c->fill(a + 7 * PAGE_SIZE, 22, PAGE_SIZE).ok());  // no injection: the copy happens
  EXPECT_NE(entry_at(c, a).pfn, entry_at(p, a).pfn);
  expect_bytes(c, a + 7 * PAGE_SIZE, PAGE_SIZE, 22);
  expect_bytes(p, a, PMD_SIZE, 21);
  c->exit();
}

// fork copies a pinned anonymous huge page for the child at once
// (copy_hugetlb_page_range): a machine check in that copy fails the fork
// with -EHWPOISON; nothing leaks and the parent's page and pin are intact.
TEST_F(FaultInjectHugetlbTest, ForkHugetlbCopyMachineCheckFailsTheFork) {
  set("hugepages/hugepages-2048kB/nr_hugepages", "2");
  const long raw = p->mmap(0, PMD_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB);
  ASSERT_GT(raw, 0);
  const uint64_t a = static_cast<uint64_t>(raw);
  ASSERT_TRUE(p->fill(a, 23, PMD_SIZE).ok());
  GupPages pin;
  ASSERT_EQ(gup(p, GupEntry::kPinUserPages, a, 1, foll::WRITE, &pin), 1);
  const std::string free_before = attr("free_hugepages");
  inject("copy_mc", times(1, -1, 300));
  int err = 0;
  Process* c = p->fork("child", &err);
  off("copy_mc");
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(err, -EHWPOISON);
  EXPECT_EQ(sys->injected("copy_mc"), 1);
  EXPECT_EQ(sys->processes().size(), 1u);
  EXPECT_EQ(attr("free_hugepages"), free_before);
  std::map<uint64_t, long> refs;
  pin.add_refs(&refs);
  CheckReport r = sys->check_with_refs(refs);
  EXPECT_TRUE(r.ok()) << "after the failed fork:\n" << r.to_string();
  expect_bytes(p, a, PMD_SIZE, 23);
  c = p->fork("child", &err);  // without injection the child gets its own copy
  ASSERT_TRUE(c);
  EXPECT_EQ(err, 0);
  EXPECT_NE(entry_at(c, a).pfn, entry_at(p, a).pfn);
  expect_bytes(c, a, PMD_SIZE, 23);
  pin.release(Dirty::kYes);
  c->exit();
}

// ---- fault accounting (mm_account_fault) and __vmf_anon_prepare ----
//
// pgfault once per completed fault, whatever lock the fault was first tried
// under, and the faulting task's min_flt/maj_flt (Process::min_flt/maj_flt,
// getrusage's ru_minflt and ru_majflt); the first anon_vma attached under a
// tried mmap_lock rather than by retrying the fault.

class FaultAccountTest : public FaultInjectTest {
 protected:
  void SetUp() override {
    FaultInjectTest::SetUp();
    thp_never();
  }
};

// The case: mmap 8K, write both pages. The first fault finds no
// anon_vma under the per-VMA lock and attaches one under a tried mmap_lock:
// two faults, both under the VMA lock, two pgfault, two minor faults.
TEST_F(FaultAccountTest, TwoPagesTwoFaults) {
  const uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  sys->reset_counters();
  const int64_t pgfault0 = vm("pgfault");
  ASSERT_TRUE(p->fill(a, 1, 2 * PAGE_SIZE).ok());
  EXPECT_EQ(vm("pgfault") - pgfault0, 2);
  EXPECT_EQ(sys->counter("fault.vma_lock"), 2);
  EXPECT_EQ(sys->counter("fault.mmap_lock"), 0);  // no retry: the trylock succeeded
  EXPECT_EQ(p->min_flt(), 2u);
  EXPECT_EQ(p->maj_flt(), 0u);
}

// A retried fault counts once. Under the VMA lock the retry is not
// FAULT_FLAG_TRIED (x86 sets it only for a VM_FAULT_MAJOR retry): minor. A
// retry under mmap_lock is FAULT_FLAG_TRIED, and the kernel counts the fault
// that completes then as major (though pgmajfault does not move: only the
// handlers that read count it).
TEST_F(FaultAccountTest, RetriedFaultCountsOnce) {
  const uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  ASSERT_EQ(p->min_flt(), 1u);
  sys->reset_counters();
  int64_t pgfault0 = vm("pgfault");
  inject("fault_retry", times(1));  // the per-VMA-lock fault retries under mmap_lock
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 2, PAGE_SIZE).ok());
  EXPECT_EQ(sys->counter("fault.vma_lock"), 1);
  EXPECT_EQ(sys->counter("fault.mmap_lock"), 1);
  EXPECT_EQ(vm("pgfault") - pgfault0, 1);
  EXPECT_EQ(p->min_flt(), 2u);
  EXPECT_EQ(p->maj_flt(), 0u);
  pgfault0 = vm("pgfault");
  inject("fault_retry", times(2));  // then once more under mmap_lock: FAULT_FLAG_TRIED
  ASSERT_TRUE(p->fill(a + 2 * PAGE_SIZE, 3, PAGE_SIZE).ok());
  EXPECT_EQ(vm("pgfault") - pgfault0, 1);
  EXPECT_EQ(vm("pgmajfault"), 0);
  EXPECT_EQ(p->min_flt(), 2u);
  EXPECT_EQ(p->maj_flt(), 1u);
}

// With mmap_lock held for write elsewhere the tried lock fails: the fault
// retries under mmap_lock once it is free, and still counts once.
TEST_F(FaultAccountTest, ContendedMmapLockRetriesAndCountsOnce) {
  const uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
  Mm* mm = p->mm();
  sys->reset_counters();
  const int64_t pgfault0 = vm("pgfault");
  mmap_write_lock(mm);
  std::atomic<bool> done{false};
  std::thread t([&] {
    EXPECT_TRUE(p->fill(a, 7, PAGE_SIZE).ok());
    done = true;
  });
  while (mm->mmap_lock.nr_waiting() == 0) std::this_thread::yield();  // it waits to retry
  EXPECT_FALSE(done.load());
  mmap_write_unlock(mm);
  t.join();
  EXPECT_EQ(sys->counter("fault.vma_lock"), 1);
  EXPECT_EQ(sys->counter("fault.mmap_lock"), 1);
  EXPECT_EQ(vm("pgfault") - pgfault0, 1);
  EXPECT_EQ(p->min_flt(), 1u);
  EXPECT_EQ(p->maj_flt(), 0u);
}

// A failed fault counts in pgfault but not to the task: an allocation that
// fails is VM_FAULT_OOM (SIGKILL). An access error never reaches the
// handler and counts nowhere.
TEST_F(FaultAccountTest, FailedFaultCountsInPgfaultOnly) {
  const uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, PAGE_SIZE).ok());
  const uint64_t b = map_aligned(PAGE_SIZE, PAGE_SIZE);
  const int64_t pgfault0 = vm("pgfault");
  const uint64_t min0 = p->min_flt();
  inject("page_alloc", times(1));
  EXPECT_EQ(p->fill(b, 2, PAGE_SIZE).sig, Signal::kSigkill);
  EXPECT_EQ(vm("pgfault") - pgfault0, 1);
  EXPECT_EQ(p->min_flt(), min0);
  const long ro = p->mmap(0, PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(ro, 0);
  EXPECT_EQ(p->fill(static_cast<uint64_t>(ro), 3, PAGE_SIZE).sig, Signal::kSigsegv);
  EXPECT_EQ(vm("pgfault") - pgfault0, 1);
  EXPECT_EQ(p->min_flt(), min0);
  EXPECT_EQ(p->maj_flt(), 0u);
}

// A swap-in that reads the page is VM_FAULT_MAJOR: maj_flt and pgmajfault.
TEST_F(FaultAccountTest, SwapInIsMajor) {
  ASSERT_EQ(sys->add_swap(8ull << 20, SwapKind::kZram), 0);
  const uint64_t a = map_aligned(2 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 5, 2 * PAGE_SIZE).ok());
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_PAGEOUT), 0);
  ASSERT_EQ(vm("pswpout"), 2);
  const uint64_t min0 = p->min_flt();
  uint8_t b = 0;
  ASSERT_TRUE(p->read(a, &b, 1).ok());
  EXPECT_EQ(b, 5);
  EXPECT_EQ(p->maj_flt(), 1u);
  EXPECT_EQ(p->min_flt(), min0);
  EXPECT_EQ(vm("pgmajfault"), 1);
}

// Each task counts its own faults; a fork's child starts at zero and a CoW
// write counts to the writer.
TEST_F(FaultAccountTest, PerProcessAndForkStartsAtZero) {
  const uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_TRUE(p->fill(a, 1, 4 * PAGE_SIZE).ok());
  EXPECT_EQ(p->min_flt(), 4u);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->min_flt(), 0u);
  EXPECT_EQ(c->maj_flt(), 0u);
  ASSERT_TRUE(c->fill(a, 2, PAGE_SIZE).ok());  // CoW in the child
  EXPECT_EQ(c->min_flt(), 1u);
  EXPECT_EQ(p->min_flt(), 4u);
  ASSERT_TRUE(p->fill(a + PAGE_SIZE, 3, PAGE_SIZE).ok());  // and in the parent
  EXPECT_EQ(p->min_flt(), 5u);
  c->exit();
  EXPECT_EQ(c->min_flt(), 1u);  // readable after exit, as a zombie's rusage
}

// Faults that system calls and GUP take count to the calling task, and a
// remote GUP (process_vm_readv) counts to the reader, not the target.
TEST_F(FaultAccountTest, SyscallGupAndRemoteFaultsCountToTheCaller) {
  const uint64_t a = map_aligned(4 * PAGE_SIZE, PAGE_SIZE);
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_POPULATE_WRITE), 0);
  EXPECT_EQ(p->min_flt(), 2u);
  GupPages pages;
  ASSERT_EQ(gup(p, GupEntry::kGetUserPages, a + 2 * PAGE_SIZE, 1, foll::WRITE, &pages), 1);
  pages.release();
  EXPECT_EQ(p->min_flt(), 3u);
  const long populated = p->mmap(0, 2 * PAGE_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE);
  ASSERT_GT(populated, 0);
  EXPECT_EQ(p->min_flt(), 5u);

  Process* r = sys->new_process("reader");
  ASSERT_TRUE(r);
  const uint64_t buf = map_aligned(r, PAGE_SIZE, PAGE_SIZE);
  // The target's last page was never touched: the remote read faults it in
  // (for the reader), then the copy into the reader's buffer faults there.
  EXPECT_EQ(process_vm_readv(r, buf, p, a + 3 * PAGE_SIZE, PAGE_SIZE), static_cast<long>(PAGE_SIZE));
  EXPECT_EQ(r->min_flt(), 2u);
  EXPECT_EQ(p->min_flt(), 5u);
}

// A fault with no task current (a kernel-internal caller: here the test
// calls get_user_pages on the mm directly) still counts pgfault, and counts
// to no process.
TEST_F(FaultAccountTest, NoCurrentCountsToNoProcess) {
  const uint64_t a = map_aligned(PAGE_SIZE, PAGE_SIZE);
  Mm* mm = p->mm();
  const int64_t pgfault0 = vm("pgfault");
  Page* page = nullptr;
  mmap_read_lock(mm);
  const long n = get_user_pages(mm, a, 1, FOLL_WRITE, &page);
  mmap_read_unlock(mm);
  ASSERT_EQ(n, 1);
  put_page(page);
  EXPECT_EQ(vm("pgfault") - pgfault0, 1);
  EXPECT_EQ(p->min_flt(), 0u);
  EXPECT_EQ(p->maj_flt(), 0u);
}

}  // namespace
}  // namespace mmlab::test
