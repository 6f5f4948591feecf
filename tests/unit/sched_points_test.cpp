// The schedule points of four operations, pinned site by site (issue 34,
// acceptance 1; docs/RACES.md "Points"). Each operation runs alone on one
// scheduler worker whose strategy records every step it is asked about, so
// the table below is what an explorer sees of the operation. A point added
// or removed anywhere on these paths changes a count here: update the
// table and docs/RACES.md together.
//
// Before issue 34 (races-design's count at 49dec6f, with a counter at every
// would-be point): 9, 19, 153 and 26 points. The points of the lock
// primitives (spin_*, mutex_*, down_*/up_*, folio_*lock) were there
// before this change; every other site below was added by it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mmlab/gup.h"
#include "sync/sched.h"
#include "test_util.h"

namespace mmlab {
namespace {

using Counts = std::map<std::string, int>;

// Takes the only thread at every step and counts the step's site.
class Recorder final : public sched::Strategy {
 public:
  Counts counts;
  int pick(const sched::Decision& d, std::string*) override {
    const sched::Step& s = d.pending[static_cast<size_t>(d.enabled.front())];
    if (s.op != sched::Op::kStart) counts[std::string(s.site) + " " + sched::op_name(s.op)]++;
    return d.enabled.front();
  }
};

Counts points_of(const std::function<void()>& body) {
  sched::Scheduler s(1);
  Recorder rec;
  sched::RunRecord r = s.run({body}, rec, 1'000'000);
  EXPECT_EQ(r.outcome, sched::Outcome::kClean) << r.detail;
  return rec.counts;
}

int total(const Counts& c) {
  int n = 0;
  for (const auto& [site, k] : c) n += k;
  return n;
}

// The lock primitives' points and the waits: what existed before issue
// 34's item 1 placed the rest.
bool earlier_point(const std::string& s) {
  const std::string site = s.substr(0, s.find(' '));
  for (const char* p : {"spin_lock", "spin_trylock", "spin_unlock", "mutex_lock", "mutex_trylock", "mutex_unlock",
                        "down_read", "down_read_trylock", "up_read", "down_write", "down_write_trylock", "up_write",
                        "downgrade_write", "folio_lock", "folio_trylock", "folio_unlock"})
    if (site == p) return true;
  return s.size() > 5 && s.compare(s.size() - 5, 5, " wait") == 0;
}

std::string table(const Counts& c) {
  std::string r;
  int added = 0;
  for (const auto& [site, k] : c) {
    r += "      {\"" + site + "\", " + std::to_string(k) + "},\n";
    if (!earlier_point(site)) added += k;
  }
  return r + "    total " + std::to_string(total(c)) + ", added by issue 34: " + std::to_string(added) + "\n";
}

class SchedPointsTest : public test::MmTest {
 protected:
  static constexpr uint64_t kPages = 16;
  uint64_t a = 0;

  void SetUp() override {
    ram_bytes = 64ull << 20;
    MmTest::SetUp();
    set("transparent_hugepage/enabled", "never");
    a = static_cast<uint64_t>(p->mmap(0, kPages * PAGE_SIZE, test::RW, MAP_PRIVATE | MAP_ANONYMOUS));
    ASSERT_EQ(p->fill(a, 1, kPages * PAGE_SIZE).ok(), true);
  }

  void expect_points(const char* op, const Counts& got, const Counts& want) {
    EXPECT_EQ(got, want) << op << ": the points now, as a table to paste:\n" << table(got);
    std::printf("# %s: %d points\n", op, total(got));
  }
};

TEST_F(SchedPointsTest, PinUserPagesFastOnePage) {
  GupPages pins;
  const Counts got = points_of([&] { EXPECT_EQ(gup(p, GupEntry::kPinUserPagesFast, a, 1, foll::WRITE, &pins), 1); });
  pins.release();
  expect_points("pin_user_pages_fast 1 x 4K", got,
                {
                    {"entry_get read", 6},
                    {"folio_ref_add rmw", 1},
                    {"folio_ref_try_add rmw", 1},
                    {"gup_fast.folio_read label", 1},
                    {"gup_fast.pte_read label", 1},
                    {"lockless_walk_begin acquire-shared", 1},
                    {"lockless_walk_end release-shared", 1},
                    {"mm_flags_set rmw", 1},
                    {"raw_read_seqcount read", 1},
                    {"read_seqcount_retry read", 1},
                });
}

TEST_F(SchedPointsTest, MadvDontneedOnePage) {
  const Counts got = points_of([&] { EXPECT_EQ(p->madvise(a + 3 * PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED), 0); });
  expect_points("MADV_DONTNEED 4K", got,
                {
                    {"down_read acquire-shared", 1},
                    {"entry_get read", 7},
                    {"entry_xchg rmw", 1},
                    {"folio_ref_sub_and_test rmw", 1},
                    {"lockless_walk_begin acquire-shared", 1},
                    {"lockless_walk_end release-shared", 1},
                    {"spin_lock acquire", 2},
                    {"spin_unlock release", 2},
                    {"up_read release-shared", 1},
                    {"vma_end_read release-shared", 1},
                    {"vma_start_read try-acquire-shared", 1},
                });
}

TEST_F(SchedPointsTest, ForkOfSixteenPages) {
  Process* child = nullptr;
  const Counts got = points_of([&] { child = p->fork("C"); });
  ASSERT_TRUE(child);
  expect_points("fork of 16 x 4K", got,
                {
                    {"ClearPageAnonExclusive rmw", 16},
                    {"PageAnonExclusive read", 16},
                    {"down_write acquire", 3},
                    {"down_write_trylock try-acquire", 1},
                    {"entry_clear_bits rmw", 16},
                    {"entry_get read", 30},
                    {"entry_set write", 19},
                    {"folio_ref_add rmw", 16},
                    {"fork.before_wrprotect label", 16},
                    {"lockless_walk_begin acquire-shared", 2},
                    {"lockless_walk_end release-shared", 2},
                    {"mm_flags_test read", 16},
                    {"spin_lock acquire", 11},
                    {"spin_unlock release", 11},
                    {"up_write release", 4},
                    {"vma_start_write acquire", 2},
                    {"write_seqcount_begin rmw", 1},
                    {"write_seqcount_end rmw", 1},
                });
}

TEST_F(SchedPointsTest, CowWriteOfOnePage) {
  Process* child = p->fork("C");
  ASSERT_TRUE(child);
  const uint8_t b = 2;
  const Counts got = points_of([&] { EXPECT_TRUE(p->write(a + 5 * PAGE_SIZE, &b, 1).ok()); });
  uint8_t v = 0;
  ASSERT_TRUE(child->read(a + 5 * PAGE_SIZE, &v, 1).ok());
  EXPECT_EQ(v, 1);  // the child still sees its copy
  expect_points("CoW write 4K (16-page VMA)", got,
                {
                    {"PageAnonExclusive read", 1},
                    {"SetPageAnonExclusive rmw", 1},
                    {"data_wait_plain wait", 2},
                    {"down_read acquire-shared", 1},
                    {"entry_get read", 20},
                    {"entry_set write", 1},
                    {"entry_xchg rmw", 1},
                    {"folio_ref_add rmw", 2},
                    {"folio_ref_count read", 2},
                    {"folio_ref_sub_and_test rmw", 3},
                    {"folio_ref_try_add rmw", 1},
                    {"lockless_walk_begin acquire-shared", 4},
                    {"lockless_walk_end release-shared", 4},
                    {"spin_lock acquire", 5},
                    {"spin_unlock release", 5},
                    {"up_read release-shared", 1},
                    {"vma_end_read release-shared", 1},
                    {"vma_start_read try-acquire-shared", 1},
                    {"wp_copy.before_revalidate label", 1},
                    {"wp_copy.enter label", 1},
                });
}

// The named labels the operations above do not reach, each reached by the
// operation whose window it names (docs/RACES.md "Named labels").
// split.unmapped and migrate.unmapped need a swap device or a movable zone:
// the tests of those paths (swap_test, gup_test) reach them.
class SchedLabelsTest : public test::MmTest {
 protected:
  void SetUp() override {
    ram_bytes = 64ull << 20;
    MmTest::SetUp();
  }
  static int label(const Counts& c, const std::string& site) {
    auto it = c.find(site + " label");
    return it == c.end() ? 0 : it->second;
  }
};

TEST_F(SchedLabelsTest, GupAfterFaultin) {
  const uint64_t a = static_cast<uint64_t>(p->mmap(0, 16 * PAGE_SIZE, test::RW, MAP_PRIVATE | MAP_ANONYMOUS));
  GupPages pages;
  const Counts got = points_of([&] { EXPECT_EQ(gup(p, GupEntry::kGetUserPages, a, 1, foll::WRITE, &pages), 1); });
  pages.release();
  EXPECT_EQ(label(got, "gup.after_faultin"), 1) << table(got);
}

TEST_F(SchedLabelsTest, CollapseLabels) {
  const uint64_t a = map_aligned(PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 7, PMD_SIZE).ok());
  const Counts got = points_of([&] { EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_COLLAPSE), 0); });
  EXPECT_EQ(p->page_info(a).level, 2);
  EXPECT_EQ(label(got, "collapse.after_flush"), 1) << table(got);
  EXPECT_EQ(label(got, "collapse.after_isolate"), 1);
  EXPECT_EQ(label(got, "collapse.before_clear"), 1);
}

TEST_F(SchedLabelsTest, HugetlbZapAfterUnmap) {
  set("hugepages/hugepages-2048kB/nr_hugepages", "1");
  const long raw = p->mmap(0, PMD_SIZE, test::RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB);
  ASSERT_GT(raw, 0);
  const uint64_t a = static_cast<uint64_t>(raw);
  ASSERT_TRUE(p->fill(a, 3, PMD_SIZE).ok());
  const Counts got = points_of([&] { EXPECT_EQ(p->madvise(a, PMD_SIZE, MADV_DONTNEED), 0); });
  EXPECT_EQ(label(got, "hugetlb_zap.after_unmap"), 1) << table(got);
}

TEST_F(SchedLabelsTest, HugetlbPunchAfterUnmap) {
  set("hugepages/hugepages-2048kB/nr_hugepages", "1");
  const int fd = sys->create_file(PMD_SIZE, FsClass::kHugetlbfs, PMD_SHIFT);
  ASSERT_GE(fd, 0);
  const Counts got = points_of([&] { EXPECT_EQ(sys->file_punch_hole(fd, 0, static_cast<int64_t>(PMD_SIZE)), 0); });
  EXPECT_EQ(label(got, "hugetlb_punch.after_unmap"), 1) << table(got);
  EXPECT_EQ(sys->close_file(fd), 0);
}

}  // namespace
}  // namespace mmlab
