// mseal(2) (mm/mseal.c): the VMA splits and merges a seal makes, what it
// refuses without changing anything, and what exit does with sealed VMAs.
// tests/scenarios/mseal.mms holds what the host kernel can be asked too.
#include "mm/mm.h"
#include "mm/mseal.h"
#include "test_util.h"

// A namespace of its own: mlock_test.cpp defines the same kPage and ANON,
// and the unit tests are built in unity batches that may hold both.
namespace mmlab::test::mseal_test {
namespace {

constexpr uint64_t kPage = PAGE_SIZE;
constexpr int ANON = MAP_PRIVATE | MAP_ANONYMOUS;
using Span = std::tuple<uint64_t, uint64_t, bool>;  // start, end, sealed

class MsealTest : public MmTest {
 protected:
  uint64_t map(uint64_t len, int prot = RW) {
    long a = p->mmap(0, len, prot, ANON);
    EXPECT_GT(a, 0);
    return static_cast<uint64_t>(a);
  }
  std::vector<Span> vmas() {
    std::vector<Span> v;
    for (auto& [s, vma] : p->mm()->vmas) v.emplace_back(vma->vm_start, vma->vm_end, vma_is_sealed(vma.get()));
    return v;
  }
};

// A seal of the middle splits the VMA in three; sealing the rest merges
// the three back into one sealed VMA.
TEST_F(MsealTest, SealSplitsThenMergesWithSealedNeighbours) {
  const uint64_t a = map(3 * kPage);
  ASSERT_EQ(p->mseal(a + kPage, kPage), 0);
  EXPECT_EQ(vmas(), (std::vector<Span>{{a, a + kPage, false}, {a + kPage, a + 2 * kPage, true}, {a + 2 * kPage, a + 3 * kPage, false}}));
  ASSERT_EQ(p->mseal(a, 3 * kPage), 0);
  EXPECT_EQ(vmas(), (std::vector<Span>{{a, a + 3 * kPage, true}}));
}

// A refused call changes nothing: no split, no unmap, no flag.
TEST_F(MsealTest, RefusalsLeaveTheVmasAsTheyWere) {
  const uint64_t a = map(4 * kPage);
  ASSERT_TRUE(p->fill(a, 1, 4 * kPage).ok());
  ASSERT_EQ(p->mseal(a + 2 * kPage, 2 * kPage), 0);
  const std::vector<Span> before = vmas();
  EXPECT_EQ(p->munmap(a + kPage, 2 * kPage), -EPERM);
  EXPECT_EQ(p->mremap(a + 2 * kPage, 2 * kPage, kPage, MREMAP_MAYMOVE), -EPERM);
  EXPECT_EQ(p->mseal(a + 1, kPage), -EINVAL);  // an unaligned start
  EXPECT_EQ(p->mseal(a, kPage, 1), -EINVAL);   // flags
  EXPECT_EQ(vmas(), before);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * kPage));
}

// mprotect walks the VMAs in order: those before the sealed one change,
// then it fails, as mprotect_fixup does VMA by VMA.
TEST_F(MsealTest, MprotectChangesTheVmasBeforeTheSealedOne) {
  const uint64_t a = map(2 * kPage);
  ASSERT_EQ(p->mseal(a + kPage, kPage), 0);
  EXPECT_EQ(p->mprotect(a, 2 * kPage, PROT_READ), -EPERM);
  auto it = p->mm()->vmas.begin();
  EXPECT_EQ(it->second->vm_flags & VM_WRITE, 0u);
  ++it;
  EXPECT_NE(it->second->vm_flags & VM_WRITE, 0u);
}

// A sealed VMA still goes at exit: MmTest's teardown finds every frame
// and page-table page free.
TEST_F(MsealTest, ExitTearsSealedVmasDown) {
  const uint64_t a = map(16 * kPage);
  ASSERT_TRUE(p->fill(a, 2, 16 * kPage).ok());
  ASSERT_EQ(p->mseal(a, 16 * kPage), 0);
  p->exit();
}

}  // namespace
}  // namespace mmlab::test::mseal_test
