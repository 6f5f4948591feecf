// The frame store pool: a System built on a recycled store sees what a System
// on fresh host memory sees, the pool stays within its bounds, and bytes move
// on the plain path only while one thread uses a System.
#include "phys/frame_store.h"
#include "phys/frame_copy.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "mm/kernel.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"
#include "phys/phys.h"
#include "phys/store_use.h"

namespace mmlab {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kRam = 64 * MiB;

std::unique_ptr<PhysMem> make_phys(Stats* stats, uint64_t ram = kRam, HostThp thp = HostThp::kDefault) {
  PhysConfig cfg;
  cfg.ram_bytes = ram;
  cfg.host_thp = thp;
  int err = 1;
  auto pm = PhysMem::create(cfg, stats, &err);
  EXPECT_NE(pm, nullptr);
  EXPECT_EQ(err, 0);
  return pm;
}

// Every Page of the memmap as text, with the fields that hold Page
// addresses (free-list links, tail pages' head) as pfns, so that two stores
// at different addresses compare equal when their states are the same.
std::vector<std::string> memmap_state(const PhysMem& pm) {
  const Page* base = pm.pfn_to_page(0);
  auto pfn_of = [&](uint64_t addr) -> long long {
    if (!addr) return -1;
    return static_cast<long long>((reinterpret_cast<const Page*>(addr & ~1ull) - base));
  };
  std::vector<std::string> v;
  for (pfn_t pfn = 0; pfn < pm.nr_frames(); pfn++) {
    const Page* p = pm.pfn_to_page(pfn);
    v.push_back(fmt::format("{} flags={:#x} head={}{} lru={},{} mapping={:#x} index={:#x} private={:#x} map={} ref={}", pfn,
                            p->flags, pfn_of(p->compound_head), (p->compound_head & 1) ? "|1" : "", pfn_of(p->lru.next),
                            pfn_of(p->lru.prev), p->mapping, p->index, p->private_, p->mapcount, p->refcount));
  }
  return v;
}

// The pfns the allocator hands out, order by order, until it runs dry
// (everything is given back afterwards).
std::vector<pfn_t> allocation_order(PhysMem& pm) {
  std::vector<pfn_t> seq;
  std::vector<std::pair<Page*, unsigned>> held;
  for (unsigned order : {9u, 3u, 0u, 10u, 2u}) {
    for (int i = 0; i < 40; i++) {
      Page* p = pm.alloc_pages(GFP_KERNEL, order);
      if (!p) break;
      seq.push_back(pm.page_to_pfn(p));
      held.push_back({p, order});
    }
  }
  while (Page* p = pm.alloc_pages(GFP_KERNEL, 0)) {
    seq.push_back(pm.page_to_pfn(p));
    held.push_back({p, 0});
  }
  for (auto& [p, order] : held) {
    folio_ref_sub_and_test(reinterpret_cast<Folio*>(p), 1);
    pm.free_pages(p, order);
  }
  return seq;
}

// A System that used every frame, scribbled over every byte of every frame
// and of its memmap, and never gave anything back: the next System on its
// store still starts exactly as one on fresh host memory.
TEST(FrameStoreTest, RecycledStoreLooksFresh) {
  FrameStorePool& pool = FrameStorePool::instance();
  pool.drain();
  Stats stats;
  std::vector<std::string> fresh_state;
  const uint8_t* store = nullptr;
  {
    auto pm = make_phys(&stats);
    ASSERT_EQ(pm->frame_store().uses(), 1u);
    fresh_state = memmap_state(*pm);
    store = static_cast<const uint8_t*>(pm->pfn_address(0));
    // Every frame allocated (every block marked used), its bytes and its Page scribbled on.
    std::vector<Page*> all;
    for (unsigned order : {10u, 3u, 0u})
      while (Page* p = pm->alloc_pages(GFP_KERNEL, order)) all.push_back(p);
    EXPECT_EQ(pm->nr_free_pages(), 0u);
    std::memset(pm->pfn_address(0), 0x5a, kRam);
    std::memset(static_cast<void*>(pm->pfn_to_page(0)), 0xa5, pm->nr_frames() * sizeof(Page));
  }
  std::vector<pfn_t> recycled_order;
  {
    auto pm = make_phys(&stats);
    ASSERT_EQ(pm->frame_store().uses(), 2u);
    ASSERT_EQ(static_cast<const uint8_t*>(pm->pfn_address(0)), store) << "not the same store";
    EXPECT_EQ(memmap_state(*pm), fresh_state);
    EXPECT_EQ(pm->nr_free_pages(), pm->nr_frames() - pm->nr_reserved_pages());
    // The zero page is zeroed on every System: the model zeroes what the kernel zeroes.
    const auto* zero = static_cast<const uint8_t*>(pm->page_address(pm->zero_page()));
    for (uint64_t i = 0; i < PAGE_SIZE; i++) ASSERT_EQ(zero[i], 0) << i;
    // __GFP_ZERO zeroes a frame an earlier System left full of 0x5a.
    Page* z = pm->alloc_pages(__GFP_ZERO, 2);
    ASSERT_NE(z, nullptr);
    const auto* zb = static_cast<const uint8_t*>(pm->page_address(z));
    for (uint64_t i = 0; i < 4 * PAGE_SIZE; i++) ASSERT_EQ(zb[i], 0) << i;
    folio_ref_sub_and_test(reinterpret_cast<Folio*>(z), 1);
    pm->free_pages(z, 2);
    recycled_order = allocation_order(*pm);
  }
  pool.drain();
  auto fresh = make_phys(&stats);
  ASSERT_EQ(fresh->frame_store().uses(), 1u);
  EXPECT_EQ(allocation_order(*fresh), recycled_order);
}

// The same through the public API: what one System wrote is not what the
// next one reads; its statistics and free memory are those of a new System.
TEST(FrameStoreTest, RecycledSystemReadsWhatAFreshOneReads) {
  FrameStorePool::instance().drain();
  SystemConfig cfg;
  cfg.ram_bytes = kRam;
  std::string fresh_vmstat;
  {
    auto sys = System::create(cfg);
    ASSERT_TRUE(sys);
    fresh_vmstat = sys->vmstat_text();
    ASSERT_EQ(sys->sysfs_write("transparent_hugepage/hugepages-2048kB/enabled", "always"), 0);
    Process* p = sys->new_process("dirty");
    const uint64_t len = 48 * MiB;
    long a = p->mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    ASSERT_GT(a, 0);
    ASSERT_EQ(p->madvise(static_cast<uint64_t>(a), len, MADV_HUGEPAGE), 0);
    ASSERT_TRUE(p->fill(static_cast<uint64_t>(a), 0xaa, len).ok());
    Process* c = p->fork("child");
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->fill(static_cast<uint64_t>(a), 0xbb, 4 * MiB).ok());  // CoW copies
    int fd = sys->create_file(4 * MiB);
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> buf(4 * MiB, 0xcc);
    ASSERT_EQ(sys->file_pwrite(fd, 0, buf.data(), buf.size()), static_cast<long>(buf.size()));
    sys->close_file(fd);
    c->exit();
    p->exit();
    EXPECT_TRUE(sys->check().ok());
  }
  auto sys = System::create(cfg);
  ASSERT_TRUE(sys);
  EXPECT_EQ(sys->kernel()->phys->frame_store().uses(), 2u);
  EXPECT_EQ(sys->vmstat_text(), fresh_vmstat);
  Process* p = sys->new_process("clean");
  const uint64_t len = 56 * MiB;  // nearly all of RAM, 4K pages
  long a = p->mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(a), 0, 1).ok());  // one write fault, the rest read faults
  int64_t bad = -2;
  uint8_t found = 0;
  ASSERT_TRUE(p->read_expect(static_cast<uint64_t>(a), 0, len, &bad, &found).ok());
  EXPECT_EQ(bad, -1) << "found " << int(found);
  ASSERT_EQ(p->madvise(static_cast<uint64_t>(a), len, MADV_POPULATE_WRITE), 0);  // write faults zero new frames
  ASSERT_TRUE(p->read_expect(static_cast<uint64_t>(a), 0, len, &bad, &found).ok());
  EXPECT_EQ(bad, -1) << "found " << int(found);
  int fd = sys->create_file(4 * MiB);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> buf(4 * MiB, 0xff);
  ASSERT_EQ(sys->file_pread(fd, 0, buf.data(), buf.size()), static_cast<long>(buf.size()));
  for (size_t i = 0; i < buf.size(); i++) ASSERT_EQ(buf[i], 0) << i;
  sys->close_file(fd);
  p->exit();
  EXPECT_TRUE(sys->check().ok());
}

// Live stores are never shared; idle ones are bounded by count and bytes.
TEST(FrameStoreTest, PoolBounds) {
  FrameStorePool& pool = FrameStorePool::instance();
  pool.drain();
  const unsigned max_idle = pool.max_idle();
  pool.set_max_idle(2);
  // Stores another test of this process kept for good (an explorer run that
  // abandoned its fixture keeps its System) stay live throughout.
  const unsigned kept = pool.counters().live;
  Stats stats;
  {
    auto c = make_phys(&stats, 2 * kRam);  // released last: stays
    auto a = make_phys(&stats);            // stays
    auto b = make_phys(&stats);            // released first: unmapped
    EXPECT_NE(a->pfn_address(0), b->pfn_address(0));
    EXPECT_EQ(pool.counters().live, kept + 3u);
  }
  FrameStorePool::Counters n = pool.counters();
  EXPECT_EQ(n.live, kept);
  EXPECT_EQ(n.idle, 2u);
  {
    auto big = make_phys(&stats, 2 * kRam);  // the 128 MiB store, not one of the 64 MiB ones
    EXPECT_EQ(big->frame_store().uses(), 2u);
    auto small = make_phys(&stats);  // a 64 MiB one is idle
    EXPECT_EQ(small->frame_store().uses(), 2u);
  }
  pool.set_idle_budget(0);  // only the most recently released store stays
  EXPECT_EQ(pool.counters().idle, 1u);
  pool.set_idle_budget(1ull << 40);
  pool.set_max_idle(max_idle);
  pool.drain();
  EXPECT_EQ(pool.counters().idle, 0u);
}

// Host THP on request, reported from the host's own accounting.
TEST(FrameStoreTest, HostThpAdvice) {
  FrameStorePool::instance().drain();
  Stats stats;
  PhysConfig cfg;
  cfg.ram_bytes = kRam;
  cfg.host_thp = HostThp::kHugepage;
  cfg.prefault = true;
  int err = 0;
  auto pm = PhysMem::create(cfg, &stats, &err);
  ASSERT_NE(pm, nullptr);
  EXPECT_EQ(pm->frame_store().populated_bytes(), kRam);
  FrameStore::Residency r = pm->frame_store().residency();
  EXPECT_TRUE(r.known);
  EXPECT_GE(r.rss, kRam / 2);  // populated
  if (FrameStorePool::host_thp_enabled()) {
    EXPECT_TRUE(pm->frame_store().thp_advised());
  }
  EXPECT_STREQ(host_thp_name(HostThp::kHugepage), "hugepage");
  pm.reset();
  FrameStorePool::instance().drain();
}

// A fork of this process (the host backend forks the runner for each
// scenario process) inherits neither the frames nor the memmap: msync()
// finds nothing mapped there in the child, and everything in the parent.
TEST(FrameStoreTest, ForkedChildDoesNotInheritTheStore) {
  Stats stats;
  auto pm = make_phys(&stats);
  ASSERT_NE(pm, nullptr);
  void* data = pm->frame_store().data();
  void* memmap = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(pm->frame_store().memmap()) & ~(uintptr_t{4095}));
  ASSERT_EQ(msync(data, 4096, MS_ASYNC), 0);
  ASSERT_EQ(msync(memmap, 4096, MS_ASYNC), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const bool data_gone = msync(data, 4096, MS_ASYNC) != 0 && errno == ENOMEM;
    const bool memmap_gone = msync(memmap, 4096, MS_ASYNC) != 0 && errno == ENOMEM;
    _exit((data_gone ? 0 : 1) | (memmap_gone ? 0 : 2));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: frames inherited, 2: memmap inherited";
  pm.reset();
  FrameStorePool::instance().drain();
}

// Bytes move with plain memcpy/memset while one thread alone uses a System;
// a second thread switches it to atomic words for good, and what both wrote
// reads back.
TEST(FrameStoreTest, SecondThreadSwitchesToAtomicWords) {
  SystemConfig cfg;
  cfg.ram_bytes = kRam;
  auto sys = System::create(cfg);
  ASSERT_TRUE(sys);
  PhysMem* phys = sys->kernel()->phys.get();
  Process* p = sys->new_process("p");
  long a = p->mmap(0, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  const uint64_t addr = static_cast<uint64_t>(a);
  ASSERT_TRUE(p->fill(addr, 1, MiB).ok());
  EXPECT_FALSE(phys->data_shared());
  std::thread t([&] { EXPECT_TRUE(p->fill(addr + MiB, 2, MiB).ok()); });
  t.join();
  EXPECT_TRUE(phys->data_shared());
  int64_t bad = -2;
  uint8_t found = 0;
  ASSERT_TRUE(p->read_expect(addr, 1, MiB, &bad, &found).ok());
  EXPECT_EQ(bad, -1);
  ASSERT_TRUE(p->read_expect(addr + MiB, 2, MiB - 3, &bad, &found).ok());
  EXPECT_EQ(bad, -1);
  ASSERT_TRUE(p->read_expect(addr + MiB - 5, 1, 64, &bad, &found).ok());  // unaligned, across the boundary
  EXPECT_EQ(bad, 5);
  EXPECT_EQ(found, 2);
  // A line that differs only in its sixth word, after three that do not:
  // the scan that tests a line at a time still names the first byte.
  const uint8_t nine = 9;
  ASSERT_TRUE(p->write(addr + 3 * 64 + 5 * 8 + 3, &nine, 1).ok());
  ASSERT_TRUE(p->read_expect(addr, 1, 1024, &bad, &found).ok());
  EXPECT_EQ(bad, 3 * 64 + 5 * 8 + 3);
  EXPECT_EQ(found, 9);
  p->exit();
  EXPECT_TRUE(sys->check().ok());
}

// A borrowed store gives every statement the same state digest (mmlab run
// --states: page tables, folios, frame identities relative to the previous
// statement, vmstat, the model's counters) as a fresh one, and the same
// frames (`print pagetable` names them by pfn). Each test first
// runs alone on a fresh store (the pool drained before it); then a test
// dirties a store (every frame of its RAM written, hugetlb, swap and file
// pages made) and the whole program runs on what the pool hands back, once
// with one worker and once with two.
TEST(FrameStoreTest, BorrowedStoreGivesTheStateDigestsOfAFreshOne) {
  const std::string program = R"(proc P

test anon-thp-fork
sysfs transparent_hugepage/hugepages-2048kB/enabled always
P mmap A 4M rw private align=2M
P write A 4M 1
P fork C
P write A+4K 8K 0xff
C read A 4M 1
P read A+4K 8K 0xff
P print pagetable
C exit

test anon-4k-swap
swap 64M
sysfs transparent_hugepage/hugepages-2048kB/enabled never
P mmap A 64K rw private
P write A 64K 3
P madvise A 64K pageout
expect P A swapped yes
P read A 64K 3
P write A 4K 4
P print pagetable

test hugetlb-2m-fork
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
P mmap A 2M rw private hugetlb=2M
P write A 2M 5
P fork C
P write A 2M 6
C read A 2M 5
P print pagetable
C exit

test file-shared
file F 400K
P mmap A 400K rw shared file=F
P write A 40K 7
P read A+40K 360K 0
P print pagetable

test mthp-collapse
sysfs transparent_hugepage/hugepages-64kB/enabled always
P mmap A 4M rw private align=2M
P write A 2M 8
P madvise A 2M collapse
P read A 2M 8
P write A+2M 4K 9
P read A+2052K 2044K 0
P print pagetable
)";
  const std::string dirt = R"(proc P

test dirty
swap 64M
sysfs hugepages/hugepages-2048kB/nr_hugepages 8
P mmap H 16M rw private hugetlb=2M
P write H 16M 0xaa
P mmap A 160M rw private
P write A 160M 0xbb
P madvise A 8M pageout
P fork C
C write A 16M 0xcc
C exit
)";
  std::string err;
  auto prog = scenario_parse_text("borrowed.mms", program, &err);
  ASSERT_TRUE(prog) << err;
  auto dirty = scenario_parse_text("dirty.mms", dirt, &err);
  ASSERT_TRUE(dirty) << err;
  ScenarioOptions so;
  so.ram_bytes = 256 * MiB;
  so.record_states = true;
  std::ostringstream tap;
  FrameStorePool& pool = FrameStorePool::instance();
  // Fresh: each test on a store no System used before.
  std::map<std::string, std::vector<std::string>> fresh, fresh_output;
  for (const std::string& name : scenario_test_names(*prog, {})) {
    pool.drain();
    ScenarioOptions one = so;
    one.filter = TestFilter(name);
    auto r = scenario_run(*prog, one, tap);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].outcome, Outcome::kPass) << name << ": " << r[0].reason;
    ASSERT_FALSE(r[0].states.empty());
    fresh[name] = r[0].states;
    fresh_output[name] = r[0].output;
  }
  for (int jobs : {1, 2}) {
    pool.drain();
    ScenarioOptions d = so;
    d.jobs = jobs;
    for (auto& r : scenario_run(*dirty, d, tap)) ASSERT_EQ(r.outcome, Outcome::kPass) << r.reason;
    const uint64_t recycled = pool.counters().recycled;
    so.jobs = jobs;
    auto results = scenario_run(*prog, so, tap);
    EXPECT_GT(pool.counters().recycled, recycled) << "no test borrowed a store";
    ASSERT_EQ(results.size(), fresh.size());
    for (auto& r : results) {
      ASSERT_EQ(r.outcome, Outcome::kPass) << r.name << ": " << r.reason;
      EXPECT_EQ(r.states, fresh[r.name]) << r.name << " with " << jobs << " workers";
      // The page tables as printed name frames by pfn: the same frames.
      EXPECT_EQ(r.output, fresh_output[r.name]) << r.name << " with " << jobs << " workers";
    }
  }
  pool.drain();
}

// A store that served a large test (GiBs of host memory, kept warm) goes to
// the next large test and never to a small one; trimming the idle stores
// unmaps small ones first. Every store that ever ran a 1 GiB hugetlb test
// stayed 2 GiB resident, which is how `mmlab diff -j 2` held 12 GiB.
TEST(FrameStoreTest, LargeTestsKeepOneStoreToThemselves) {
  FrameStorePool& pool = FrameStorePool::instance();
  pool.drain();
  const unsigned max_idle = pool.max_idle();
  pool.set_max_idle(4);
  Stats stats;
  const void* large = nullptr;
  {
    ScopedStoreUse use(StoreUse::kLarge);
    large = make_phys(&stats)->pfn_address(0);
  }
  {
    ScopedStoreUse use(StoreUse::kSmall);
    auto s = make_phys(&stats);  // only the large store is idle: a new one
    EXPECT_NE(s->pfn_address(0), large);
  }
  {
    ScopedStoreUse use(StoreUse::kLarge);
    auto l = make_phys(&stats);  // the small store was released last; the large one is taken
    EXPECT_EQ(l->pfn_address(0), large);
    EXPECT_EQ(l->frame_store().uses(), 2u);
  }
  {
    ScopedStoreUse use(StoreUse::kSmall);
    auto a = make_phys(&stats);
    auto b = make_phys(&stats);
    EXPECT_NE(a->pfn_address(0), large);
    EXPECT_NE(b->pfn_address(0), large);
  }
  // Idle now, least recently released first: the large store, then two
  // small ones. Down to two: the older small one goes, the large one stays.
  EXPECT_EQ(pool.counters().idle, 3u);
  pool.set_max_idle(2);
  EXPECT_EQ(pool.counters().idle, 2u);
  {
    ScopedStoreUse use(StoreUse::kLarge);
    EXPECT_EQ(make_phys(&stats)->pfn_address(0), large);
  }
  {
    // No preference (unit tests, bench): the pool's own choice, which may be it.
    ScopedStoreUse use(StoreUse::kAny);
    auto a = make_phys(&stats);
    auto b = make_phys(&stats);
    EXPECT_TRUE(a->pfn_address(0) == large || b->pfn_address(0) == large);
  }
  pool.set_max_idle(max_idle);
  pool.drain();
}

// Zero-fill that is free for memory never written: a range taken whole from
// pristine host memory skips its first zeroing, and every later zeroing of
// the same frames writes zeros again. Each read-back below fails if the
// lazy path skipped a zeroing it owed (after a copy into the range, after a
// zeroing and a write, after the blocks went back to the buddy and were
// used for small pages, or on a recycled store).
TEST(FrameStoreTest, LazilyZeroedFramesReadBackAsZero) {
  FrameStorePool& pool = FrameStorePool::instance();
  pool.drain();
  Stats stats;
  constexpr unsigned kOrder = MAX_PAGE_ORDER + 2;  // four blocks
  constexpr uint64_t kBytes = PAGE_SIZE << kOrder;
  auto all_zero = [](const uint8_t* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
      if (p[i]) return false;
    return true;
  };
  auto free_range = [](PhysMem& pm, Page* p) {
    folio_ref_sub_and_test(reinterpret_cast<Folio*>(p), 1);
    pm.free_pages(p, kOrder);
  };
  auto zero_range = [&](PhysMem& pm, Page* p) {
    zero_folio_frames(&pm, static_cast<uint8_t*>(pm.page_address(p)), 1l << kOrder, -1);
  };
  {
    auto pm = make_phys(&stats);
    const FrameStore& fs = pm->frame_store();
    ASSERT_EQ(fs.uses(), 1u);
    Page* p = pm->alloc_pages(GFP_KERNEL, kOrder);
    ASSERT_NE(p, nullptr);
    auto* b = static_cast<uint8_t*>(pm->page_address(p));
    EXPECT_FALSE(fs.block_pristine(pm->page_to_pfn(p)));
    // First zeroing of pristine memory: free, and the bytes are zero.
    zero_range(*pm, p);
    EXPECT_EQ(fs.zero_skipped_bytes(), kBytes);
    EXPECT_TRUE(all_zero(b, kBytes));
    // Written (as a user would), zeroed again: this one is owed.
    std::memset(b, 0x5a, kBytes);
    zero_range(*pm, p);
    EXPECT_EQ(fs.zero_skipped_bytes(), kBytes);
    EXPECT_TRUE(all_zero(b, kBytes));
    // A pristine range that a copy wrote first (hugetlb CoW into a new
    // gigantic page) owes its next zeroing.
    Page* q = pm->alloc_pages(GFP_KERNEL, kOrder);
    ASSERT_NE(q, nullptr);
    std::vector<uint8_t> src(kBytes, 0x77);
    copy_frames(pm.get(), pm->page_address(q), src.data(), kBytes);
    zero_range(*pm, q);
    EXPECT_EQ(fs.zero_skipped_bytes(), kBytes);
    EXPECT_TRUE(all_zero(static_cast<uint8_t*>(pm->page_address(q)), kBytes));
    free_range(*pm, q);
    free_range(*pm, p);
    // Blocks that went back to the buddy untouched are pristine no more
    // once the buddy hands them out: small pages written there, then a
    // range taken whole again, must be zeroed.
    std::vector<Page*> ranges;
    while (Page* r = pm->alloc_pages(GFP_KERNEL, kOrder)) ranges.push_back(r);
    ASSERT_GE(ranges.size(), 3u) << "a third range, pristine until now";
    for (Page* r : ranges) free_range(*pm, r);
    std::vector<Page*> small;
    while (Page* r = pm->alloc_pages(GFP_KERNEL, 0)) {
      std::memset(pm->page_address(r), 0x33, PAGE_SIZE);
      small.push_back(r);
    }
    for (Page* r : small) {
      folio_ref_sub_and_test(reinterpret_cast<Folio*>(r), 1);
      pm->free_pages(r, 0);
    }
    ranges.clear();
    while (Page* r = pm->alloc_pages(GFP_KERNEL, kOrder)) ranges.push_back(r);
    ASSERT_GE(ranges.size(), 3u);
    for (Page* r : ranges) {
      zero_range(*pm, r);
      EXPECT_TRUE(all_zero(static_cast<uint8_t*>(pm->page_address(r)), kBytes)) << pm->page_to_pfn(r);
    }
    EXPECT_EQ(fs.zero_skipped_bytes(), kBytes);
    for (Page* r : ranges) free_range(*pm, r);
  }
  // A recycled store: every block some System took is written memory.
  {
    auto pm = make_phys(&stats);
    ASSERT_EQ(pm->frame_store().uses(), 2u);
    Page* p = pm->alloc_pages(GFP_KERNEL, kOrder);
    ASSERT_NE(p, nullptr);
    std::memset(pm->page_address(p), 0x44, kBytes);  // as if a System had used it
    free_range(*pm, p);
  }
  {
    auto pm = make_phys(&stats);
    Page* p = pm->alloc_pages(GFP_KERNEL, kOrder);
    ASSERT_NE(p, nullptr);
    const uint64_t before = pm->frame_store().zero_skipped_bytes();
    zero_range(*pm, p);
    EXPECT_EQ(pm->frame_store().zero_skipped_bytes(), before);
    EXPECT_TRUE(all_zero(static_cast<uint8_t*>(pm->page_address(p)), kBytes));
    free_range(*pm, p);
  }
  pool.drain();
  // A range taken whole from pristine memory and freed before anything
  // zeroed it: the debug builds poison it as it is freed
  // (free_pages_prepare), a write, so the store's reset must not make it
  // pristine again, and the next System's first zeroing is owed.
  for (int round = 0; round < 2; round++) {
    auto pm = make_phys(&stats);
    Page* p = pm->alloc_pages(GFP_KERNEL, kOrder);
    ASSERT_NE(p, nullptr);
    if (round == 1) {
      zero_range(*pm, p);
      EXPECT_TRUE(all_zero(static_cast<uint8_t*>(pm->page_address(p)), kBytes));
    }
    free_range(*pm, p);
  }
  pool.drain();
}

// `mmlab diff` runs a test's two model sides one after the other, so the
// second borrows the first's store: one store, not two live at once. Equal
// states compare by digest; counters that differ are reported from the
// steps; a state difference reruns the test in lockstep for its lines.
TEST(FrameStoreTest, DiffSidesRunOneAfterTheOther) {
  const std::string program = R"(sysfs transparent_hugepage/hugepages-2048kB/enabled never
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P

test gup-pin-hugetlb
sysfs hugepages/hugepages-2048kB/nr_hugepages 3
file F 2M hugetlb=2M
P mmap A 2M rw shared file=F
P write A 2M 0
P gup H A 512 pin,write,longterm
expect H 512
unpin H

test cow-mthp-fork-write-one-page
P mmap A 128K rw private align=64K
P write A 128K 1
expect P A order 4
P fork C
C write A+8K 4K 2
C read A 8K 1
C read A+8K 4K 2
P read A 128K 1
C exit
)";
  std::string err;
  auto prog = scenario_parse_text("sides.mms", program, &err);
  ASSERT_TRUE(prog) << err;
  FrameStorePool& pool = FrameStorePool::instance();
  auto diff = [&](const std::string& test, const std::string& key, const std::string& value, DiffSummary* sum) {
    DiffOptions d;
    d.filter = TestFilter(test);
    d.b.name = "model:" + key + "=" + value;
    d.b.tunes = {{key, value}};
    d.jobs = 1;
    std::ostringstream out;
    scenario_diff(*prog, d, out, sum);
    return out.str();
  };
  pool.drain();
  const uint64_t created = pool.counters().created;
  DiffSummary sum;
  std::string out = diff("gup-pin-hugetlb", "gup.walk", "walk", &sum);
  EXPECT_EQ(pool.counters().created, created + 1) << "the two sides were live at once\n" << out;
  ASSERT_EQ(sum.records.size(), 1u);
  EXPECT_EQ(sum.records[0].verdict, "counters") << out;
  EXPECT_NE(out.find("#    model-only counters (model/model:gup.walk=walk): gup."), std::string::npos) << out;

  // The same configuration twice: the second side, on the first's store,
  // gives every statement's digest equal to the first's, on a fresh store.
  for (const char* test : {"gup-pin-hugetlb", "cow-mthp-fork-write-one-page"}) {
    pool.drain();
    out = diff(test, "cow.policy", "base", &sum);
    ASSERT_EQ(sum.records.size(), 1u);
    EXPECT_EQ(sum.records[0].verdict, "agree") << out;
  }
  out = diff("cow-mthp-fork-write-one-page", "cow.policy", "fixed", &sum);
  ASSERT_EQ(sum.records.size(), 1u);
  EXPECT_EQ(sum.records[0].verdict, "state") << out;
  EXPECT_NE(out.find("#  after sides.mms:19: C write A+8K 4K 2\n#    - model: C 0x"), std::string::npos) << out;
  EXPECT_NE(out.find("#    + model:cow.policy=fixed: C 0x"), std::string::npos) << out;
  pool.drain();
}

}  // namespace
}  // namespace mmlab
