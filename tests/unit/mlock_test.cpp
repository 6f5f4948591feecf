// mlock(2) and friends (mm/mlock.c), MAP_LOCKED/MAP_POPULATE and
// MREMAP_DONTUNMAP's lock bits: the VMA flags, the splits and merges, the
// errors and what is populated.
#include "mm/mm.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

constexpr uint64_t kPage = PAGE_SIZE;
constexpr int ANON = MAP_PRIVATE | MAP_ANONYMOUS;

class MlockTest : public MmTest {
 protected:
  uint64_t map(uint64_t len, int prot = RW, int flags = ANON) {
    long a = p->mmap(0, len, prot, flags);
    EXPECT_GT(a, 0);
    return static_cast<uint64_t>(a);
  }
  // The VMAs as (start, end, lock bits).
  std::vector<std::tuple<uint64_t, uint64_t, vm_flags_t>> vmas() {
    std::vector<std::tuple<uint64_t, uint64_t, vm_flags_t>> v;
    for (auto& [s, vma] : p->mm()->vmas) v.emplace_back(vma->vm_start, vma->vm_end, vma->vm_flags & VM_LOCKED_MASK);
    return v;
  }
};

TEST_F(MlockTest, MlockPopulatesAndMunlockSplitsThenMerges) {
  uint64_t a = map(3 * kPage);
  ASSERT_EQ(p->mlock2(a, 3 * kPage), 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(3 * kPage));
  EXPECT_EQ(p->locked_vm(), static_cast<long>(3 * kPage));
  ASSERT_EQ(p->munlock(a + kPage, kPage), 0);
  using T = std::tuple<uint64_t, uint64_t, vm_flags_t>;
  EXPECT_EQ(vmas(), (std::vector<T>{{a, a + kPage, VM_LOCKED}, {a + kPage, a + 2 * kPage, 0}, {a + 2 * kPage, a + 3 * kPage, VM_LOCKED}}));
  ASSERT_EQ(p->munlock(a, 3 * kPage), 0);
  EXPECT_EQ(vmas(), (std::vector<T>{{a, a + 3 * kPage, 0}}));
  EXPECT_EQ(p->locked_vm(), 0);
}

TEST_F(MlockTest, OnfaultPopulatesNothing) {
  uint64_t a = map(4 * kPage);
  ASSERT_EQ(p->mlock2(a, 4 * kPage, MLOCK_ONFAULT), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  ASSERT_EQ(vmas().size(), 1u);
  EXPECT_EQ(std::get<2>(vmas()[0]), VM_LOCKED | VM_LOCKONFAULT);
  // mlock without the flag on a lock-on-fault VMA turns it into a plain lock and populates.
  ASSERT_EQ(p->mlock2(a, 4 * kPage), 0);
  EXPECT_EQ(std::get<2>(vmas()[0]), VM_LOCKED);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * kPage));
}

TEST_F(MlockTest, Errors) {
  uint64_t a = map(3 * kPage);
  EXPECT_EQ(p->mlock2(a, kPage, 2), -EINVAL);  // an unknown mlock2 flag
  EXPECT_EQ(p->mlockall(0), -EINVAL);
  EXPECT_EQ(p->mlockall(MCL_ONFAULT), -EINVAL);
  EXPECT_EQ(p->mlockall(8), -EINVAL);
  ASSERT_EQ(p->munmap(a + kPage, kPage), 0);
  // A hole in the middle: the VMA before it is locked, nothing is populated.
  EXPECT_EQ(p->mlock2(a, 3 * kPage), -ENOMEM);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(kPage));
  EXPECT_EQ(p->rss_anon(), 0);
  // A hole at the start changes nothing.
  EXPECT_EQ(p->munlock(a + kPage, 2 * kPage), -ENOMEM);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(kPage));
  EXPECT_EQ(p->mlock2(a, 0), 0);
}

TEST_F(MlockTest, ProtNoneIsLockedButNotPopulated) {
  uint64_t a = map(2 * kPage, PROT_NONE);
  EXPECT_EQ(p->mlock2(a, 2 * kPage), -ENOMEM);  // GUP's -EFAULT, as mlock reports it
  EXPECT_EQ(p->locked_vm(), static_cast<long>(2 * kPage));
  EXPECT_EQ(p->rss_anon(), 0);
}

TEST_F(MlockTest, MlockallFutureLocksLaterMappingsAndForkDropsIt) {
  ASSERT_EQ(p->mlockall(MCL_FUTURE), 0);
  uint64_t a = map(2 * kPage);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(2 * kPage));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * kPage));
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->locked_vm(), 0);
  EXPECT_EQ(c->mm()->def_flags, 0u);  // mm_init keeps no lock bit
  ASSERT_EQ(p->munlockall(), 0);
  EXPECT_EQ(p->locked_vm(), 0);
  (void)map(kPage);
  EXPECT_EQ(p->locked_vm(), 0);
  (void)a;
}

TEST_F(MlockTest, MlockallCurrentOnfault) {
  (void)map(2 * kPage);
  (void)map(2 * kPage, PROT_READ);
  ASSERT_EQ(p->mlockall(MCL_CURRENT | MCL_ONFAULT), 0);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(4 * kPage));
  EXPECT_EQ(p->rss_anon(), 0);
  ASSERT_EQ(p->munlockall(), 0);
  EXPECT_EQ(p->locked_vm(), 0);
}

TEST_F(MlockTest, MapLockedAndPopulate) {
  uint64_t a = map(2 * kPage, RW, ANON | MAP_LOCKED);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(2 * kPage));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * kPage));
  uint64_t b = map(2 * kPage, RW, ANON | MAP_POPULATE);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(2 * kPage));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * kPage));
  (void)a, (void)b;
}

TEST_F(MlockTest, MadviseOnLockedVmas) {
  uint64_t a = map(2 * kPage);
  ASSERT_EQ(p->mlock2(a, 2 * kPage), 0);
  EXPECT_EQ(p->madvise(a, 2 * kPage, MADV_DONTNEED), -EINVAL);
  EXPECT_EQ(p->madvise(a, 2 * kPage, MADV_PAGEOUT), -EINVAL);
  EXPECT_EQ(p->madvise(a, 2 * kPage, MADV_COLD), -EINVAL);
  EXPECT_EQ(p->madvise(a, 2 * kPage, MADV_DONTNEED_LOCKED), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(2 * kPage));
}

TEST_F(MlockTest, MremapDontunmapUnlocksTheOldVma) {
  uint64_t a = map(2 * kPage);
  ASSERT_EQ(p->mlock2(a, 2 * kPage), 0);
  long b = p->mremap(a, 2 * kPage, 2 * kPage, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
  ASSERT_GT(b, 0);
  EXPECT_EQ(p->locked_vm(), static_cast<long>(2 * kPage));  // the new one only
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * kPage));
  EXPECT_EQ(p->mremap(a, 2 * kPage, 4 * kPage, MREMAP_MAYMOVE | MREMAP_DONTUNMAP), -EINVAL);  // sizes differ
  EXPECT_EQ(p->mremap(a, 2 * kPage, 2 * kPage, MREMAP_DONTUNMAP), -EINVAL);                   // no MAYMOVE
}

}  // namespace
}  // namespace mmlab::test
