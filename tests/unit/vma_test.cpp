// Unit tests of the VMA layer: mmap (placement, hints, MAP_FIXED, merging),
// munmap, mprotect, mremap and the flag-changing madvise behaviours, with
// the kernel's errno for every bad argument; anon_vma reuse; and the
// per-VMA lock (lock_vma_under_rcu against vma_start_write).
//
// Only the public API drives the system; the VMA tree is inspected white-box
// under mmap_lock. Every test ends with MmTest's invariant checker (test_util.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "mm/mm.h"
#include "mmlab/system.h"
#include "test_util.h"

namespace mmlab {
namespace {

constexpr uint64_t P = PAGE_SIZE;
using test::RW;
constexpr int ANON = MAP_PRIVATE | MAP_ANONYMOUS;

// What a test needs to know of one VMA.
struct VmaView {
  uint64_t start;
  uint64_t end;
  vm_flags_t flags;
  uint64_t pgoff;
  bool has_anon_vma;
};

// The VMAs intersecting [lo, hi), in address order.
std::vector<VmaView> vmas(Process* p, uint64_t lo = 0, uint64_t hi = ~0ull) {
  std::vector<VmaView> out;
  Mm* mm = p->mm();
  mmap_read_lock(mm);
  for (auto& kv : mm->vmas) {
    const Vma* v = kv.second.get();
    if (v->vm_end > lo && v->vm_start < hi)
      out.push_back({v->vm_start, v->vm_end, v->vm_flags, v->vm_pgoff, v->anon_vma != nullptr});
  }
  mmap_read_unlock(mm);
  return out;
}

// The private anonymous read-write VMA flags mmap gives.
constexpr vm_flags_t kAnonRwFlags =
    VM_READ | VM_WRITE | VM_MAYREAD | VM_MAYWRITE | VM_MAYEXEC | VM_ACCOUNT | VM_SOFTDIRTY;

// MmTest's System and process, its end-of-test checker (before and after
// every process exits) and its leak checks.
class VmaTest : public test::MmTest {
 protected:
  // mmap that must succeed.
  uint64_t map(uint64_t len, int prot = RW, int flags = ANON, uint64_t addr = 0) {
    long ret = p->mmap(addr, len, prot, flags);
    EXPECT_GT(ret, 0) << errno_name(static_cast<int>(-ret));
    return ret > 0 ? static_cast<uint64_t>(ret) : 0;
  }

  // Every byte of [addr, addr+len) reads back as byte.
  bool holds(uint64_t addr, uint8_t byte, uint64_t len, Process* q = nullptr) {
    int64_t mismatch = -1;
    uint8_t found = 0;
    AccessResult r = (q ? q : p)->read_expect(addr, byte, len, &mismatch, &found);
    return r.ok() && mismatch < 0;
  }
};

// ---- mmap ----

TEST_F(VmaTest, MmapErrnos) {
  EXPECT_EQ(p->mmap(0, 0, RW, ANON), -EINVAL);                              // len 0
  EXPECT_EQ(p->mmap(0x7000001000ull + 1, P, RW, ANON | MAP_FIXED), -EINVAL);  // unaligned fixed
  EXPECT_EQ(p->mmap(0, ~0ull - 10, RW, ANON), -ENOMEM);                     // PAGE_ALIGN overflows
  EXPECT_EQ(p->mmap(0, TASK_SIZE + P, RW, ANON), -ENOMEM);                  // larger than the space
  EXPECT_EQ(p->mmap(0, P, RW, MAP_ANONYMOUS), -EINVAL);                      // neither private nor shared
  EXPECT_EQ(p->mmap(0, P, RW, MAP_ANONYMOUS | MAP_SHARED_VALIDATE), -EINVAL);
  EXPECT_EQ(p->mmap(0, P, RW, MAP_PRIVATE), -EBADF);                         // a file mapping, no fd
  EXPECT_EQ(p->mmap(0, P, RW, ANON | MAP_HUGETLB), -ENOMEM);                // no huge pages in the pool
  EXPECT_EQ(p->mmap(TASK_SIZE - P, 2 * P, RW, ANON | MAP_FIXED), -ENOMEM);   // past TASK_SIZE
  EXPECT_EQ(p->mmap(P, P, RW, ANON | MAP_FIXED), -EPERM);                    // below mmap_min_addr
  EXPECT_TRUE(vmas(p).empty());

  uint64_t a = map(4 * P);
  EXPECT_EQ(p->mmap(a + P, P, RW, ANON | MAP_FIXED_NOREPLACE), -EEXIST);
  EXPECT_EQ(p->mmap(a - P, 2 * P, RW, ANON | MAP_FIXED_NOREPLACE), -EEXIST);  // overlaps partly
  EXPECT_EQ(p->mmap(a - P, P, RW, ANON | MAP_FIXED_NOREPLACE), static_cast<long>(a - P));
}

TEST_F(VmaTest, MmapTopDownAndMergesAdjacentAnonymous) {
  uint64_t a = map(2 * P);
  EXPECT_LT(a, MMAP_BASE);
  EXPECT_EQ(a, MMAP_BASE - 2 * P);  // the highest gap below mmap_base
  uint64_t b = map(3 * P);
  EXPECT_EQ(b, a - 3 * P);  // top-down: right below
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 1u);  // merged: same flags, linear pgoff
  EXPECT_EQ(v[0].start, b);
  EXPECT_EQ(v[0].end, a + 2 * P);
  EXPECT_EQ(v[0].flags, kAnonRwFlags);
  EXPECT_EQ(v[0].pgoff, b >> PAGE_SHIFT);

  // A different protection does not merge.
  uint64_t c = map(P, PROT_READ);
  EXPECT_EQ(c, b - P);
  EXPECT_EQ(vmas(p).size(), 2u);
  // Shared anonymous memory never merges with private memory.
  uint64_t d = map(P, RW, MAP_SHARED | MAP_ANONYMOUS);
  v = vmas(p, d, d + P);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flags & (VM_SHARED | VM_MAYSHARE), VM_SHARED | VM_MAYSHARE);
  EXPECT_EQ(v[0].pgoff, 0u);
  EXPECT_EQ(vmas(p).size(), 3u);
}

TEST_F(VmaTest, MmapMergesAfterFaultAndWithBothNeighbours) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0x11, 4 * P).ok());  // anon_vma attached
  ASSERT_TRUE(vmas(p)[0].has_anon_vma);
  // Punch a hole and map it again: prev has an anon_vma, the new one none,
  // next shares prev's anon_vma: all three merge.
  ASSERT_EQ(p->munmap(a + P, P), 0);
  ASSERT_EQ(vmas(p).size(), 2u);
  ASSERT_EQ(p->mmap(a + P, P, RW, ANON | MAP_FIXED), static_cast<long>(a + P));
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].start, a);
  EXPECT_EQ(v[0].end, a + 4 * P);
  EXPECT_TRUE(holds(a, 0x11, P));
  EXPECT_TRUE(holds(a + P, 0, P));  // fresh memory
  EXPECT_TRUE(holds(a + 2 * P, 0x11, 2 * P));
}

TEST_F(VmaTest, MmapHints) {
  const uint64_t hint = 0x100000000ull;  // free
  EXPECT_EQ(p->mmap(hint, 2 * P, RW, ANON), static_cast<long>(hint));
  // An unaligned hint is rounded down.
  EXPECT_EQ(p->mmap(hint + 4 * P + 123, P, RW, ANON), static_cast<long>(hint + 4 * P));
  // A hint over a mapping is ignored: the area comes from the top-down search.
  long r = p->mmap(hint, P, RW, ANON);
  ASSERT_GT(r, 0);
  EXPECT_NE(static_cast<uint64_t>(r), hint);
  EXPECT_EQ(static_cast<uint64_t>(r), MMAP_BASE - P);
  // A hint below mmap_min_addr moves up to it.
  EXPECT_EQ(p->mmap(P, P, RW, ANON), static_cast<long>(mmap_min_addr));
  // A hint whose range runs past TASK_SIZE is ignored.
  r = p->mmap(TASK_SIZE - P, 2 * P, RW, ANON);
  ASSERT_GT(r, 0);
  EXPECT_LT(static_cast<uint64_t>(r), MMAP_BASE);
}

TEST_F(VmaTest, MmapLargeAnonymousIsPmdAligned) {
  uint64_t a = map(4 * PMD_SIZE);
  EXPECT_TRUE(is_aligned(a, PMD_SIZE));
  uint64_t b = map(PMD_SIZE);
  EXPECT_TRUE(is_aligned(b, PMD_SIZE));
  // With a hint no alignment is forced; sizes that are not PMD multiples neither.
  EXPECT_EQ(p->mmap(0x200001000ull, PMD_SIZE, RW, ANON), 0x200001000l);
}

TEST_F(VmaTest, MapFixedReplacesExistingMappings) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0xaa, 4 * P).ok());
  ASSERT_EQ(p->mmap(a + P, 2 * P, PROT_READ, ANON | MAP_FIXED), static_cast<long>(a + P));
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].end, a + P);
  EXPECT_EQ(v[1].start, a + P);
  EXPECT_EQ(v[1].end, a + 3 * P);
  EXPECT_EQ(v[1].flags & VM_ACCESS_FLAGS, VM_READ);
  EXPECT_EQ(v[2].pgoff, (a >> PAGE_SHIFT) + 3);
  EXPECT_TRUE(holds(a, 0xaa, P));
  EXPECT_TRUE(holds(a + P, 0, 2 * P));
  EXPECT_TRUE(holds(a + 3 * P, 0xaa, P));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * P));
}

TEST_F(VmaTest, MapPopulate) {
  long a = p->mmap(0, 8 * P, RW, ANON | MAP_POPULATE);
  ASSERT_GT(a, 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(8 * P));  // written: private and writable
}

// ---- munmap ----

TEST_F(VmaTest, MunmapErrnosAndNothing) {
  uint64_t a = map(2 * P);
  EXPECT_EQ(p->munmap(a + 1, P), -EINVAL);
  EXPECT_EQ(p->munmap(a, 0), -EINVAL);
  EXPECT_EQ(p->munmap(TASK_SIZE - P, 2 * P), -EINVAL);
  EXPECT_EQ(p->munmap(TASK_SIZE + P, P), -EINVAL);
  EXPECT_EQ(p->munmap(0x300000000ull, 16 * P), 0);  // nothing mapped there
  EXPECT_EQ(vmas(p).size(), 1u);
}

TEST_F(VmaTest, MunmapMiddleSplits) {
  uint64_t a = map(3 * P);
  ASSERT_TRUE(p->fill(a, 0x5a, 3 * P).ok());
  ASSERT_EQ(p->munmap(a + P, P), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].start, a);
  EXPECT_EQ(v[0].end, a + P);
  EXPECT_EQ(v[1].start, a + 2 * P);
  EXPECT_EQ(v[1].end, a + 3 * P);
  EXPECT_EQ(v[1].pgoff, v[0].pgoff + 2);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * P));
  EXPECT_TRUE(holds(a, 0x5a, P));
  EXPECT_TRUE(holds(a + 2 * P, 0x5a, P));
  uint8_t byte;
  EXPECT_EQ(p->read(a + P, &byte, 1).sig, Signal::kSigsegv);
  // Unmap across the hole and both pieces.
  ASSERT_EQ(p->munmap(a, 3 * P), 0);
  EXPECT_TRUE(vmas(p).empty());
  EXPECT_EQ(p->rss_anon(), 0);
}

// ---- mprotect ----

TEST_F(VmaTest, MprotectErrnos) {
  uint64_t a = map(4 * P);
  EXPECT_EQ(p->mprotect(a + 1, P, PROT_READ), -EINVAL);
  EXPECT_EQ(p->mprotect(a, P, 0x10), -EINVAL);                                // unknown bit
  EXPECT_EQ(p->mprotect(a, P, PROT_READ | 0x01000000 | 0x02000000), -EINVAL);  // GROWSDOWN|GROWSUP
  EXPECT_EQ(p->mprotect(a, 0, PROT_READ), 0);
  EXPECT_EQ(p->mprotect(a, ~0ull - P, PROT_READ), -ENOMEM);                   // wraps
  EXPECT_EQ(p->mprotect(a + 8 * P, P, PROT_READ), -ENOMEM);                   // nothing mapped
  EXPECT_EQ(p->mprotect(a - P, 2 * P, PROT_READ), -ENOMEM);                   // hole at the start
  EXPECT_EQ(vmas(p).size(), 1u);
  EXPECT_EQ(vmas(p)[0].flags, kAnonRwFlags);

  // A hole after the first VMA: the first part changes, then -ENOMEM.
  uint64_t b = map(2 * P, RW, ANON, a + 6 * P);
  ASSERT_EQ(b, a + 6 * P);
  EXPECT_EQ(p->mprotect(a, 8 * P, PROT_READ), -ENOMEM);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].flags & VM_ACCESS_FLAGS, VM_READ);
  EXPECT_EQ(v[1].flags & VM_ACCESS_FLAGS, VM_READ | VM_WRITE);
}

TEST_F(VmaTest, MprotectSharedWithoutMayWriteIsEacces) {
  uint64_t a = map(2 * P, PROT_READ, MAP_SHARED | MAP_ANONYMOUS);
  Mm* mm = p->mm();
  {
    // A read-only shared file mapping has no VM_MAYWRITE; no file exists yet,
    // so make one by hand.
    mmap_write_lock(mm);
    Vma* vma = vma_lookup(mm, a);
    if (vma) {
      mmap_assert_write_locked(vma->vm_mm);
      vma_start_write(vma);
      vma->vm_flags &= ~VM_MAYWRITE;
    }
    mmap_write_unlock(mm);
    ASSERT_NE(vma, nullptr);
  }
  EXPECT_EQ(p->mprotect(a, 2 * P, RW), -EACCES);
  EXPECT_EQ(p->mprotect(a, 2 * P, PROT_READ | PROT_EXEC), 0);
}

TEST_F(VmaTest, MprotectMiddleSplitsAndRestoreMerges) {
  uint64_t a = map(3 * P);
  ASSERT_TRUE(p->fill(a, 0x77, 3 * P).ok());
  ASSERT_EQ(p->mprotect(a + P, P, PROT_READ), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].end, a + P);
  EXPECT_EQ(v[1].start, a + P);
  EXPECT_EQ(v[1].end, a + 2 * P);
  EXPECT_EQ(v[1].flags & VM_ACCESS_FLAGS, VM_READ);
  EXPECT_EQ(v[1].flags & VM_ACCOUNT, VM_ACCOUNT);  // it has an anon_vma: stays charged
  EXPECT_EQ(v[2].flags, kAnonRwFlags);
  EXPECT_EQ(v[1].pgoff, v[0].pgoff + 1);
  EXPECT_TRUE(holds(a, 0x77, 3 * P));
  uint8_t byte = 1;
  EXPECT_EQ(p->write(a + P, &byte, 1).sig, Signal::kSigsegv);
  EXPECT_TRUE(p->write(a, &byte, 1).ok());

  // Same protection again: nothing changes.
  ASSERT_EQ(p->mprotect(a + P, P, PROT_READ), 0);
  EXPECT_EQ(vmas(p).size(), 3u);

  ASSERT_EQ(p->mprotect(a + P, P, RW), 0);
  v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].start, a);
  EXPECT_EQ(v[0].end, a + 3 * P);
  EXPECT_EQ(v[0].flags, kAnonRwFlags);
  EXPECT_TRUE(p->write(a + P, &byte, 1).ok());
}

TEST_F(VmaTest, MprotectSpanningVmasAndPartialMerge) {
  uint64_t a = map(4 * P);
  ASSERT_EQ(p->mprotect(a + 2 * P, 2 * P, PROT_READ), 0);
  ASSERT_EQ(vmas(p).size(), 2u);
  // The first page becomes read-only too: it joins the read-only VMA.
  ASSERT_EQ(p->mprotect(a + P, P, PROT_READ), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].end, a + P);
  EXPECT_EQ(v[1].start, a + P);
  EXPECT_EQ(v[1].end, a + 4 * P);
  // Across both VMAs at once, back to one.
  ASSERT_EQ(p->mprotect(a, 4 * P, PROT_NONE), 0);
  v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flags & (VM_ACCESS_FLAGS | VM_ACCOUNT), 0u);  // never faulted: uncharged
  ASSERT_EQ(p->mprotect(a, 4 * P, RW), 0);
  v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flags, kAnonRwFlags);
}

TEST_F(VmaTest, AnonVmaReuseLetsNeighboursMergeBack) {
  uint64_t a = map(3 * P);
  // Split before any fault: three VMAs without anon_vmas.
  ASSERT_EQ(p->mprotect(a + P, P, RW | PROT_EXEC), 0);
  ASSERT_EQ(vmas(p).size(), 3u);
  // Fault the first, then the middle: the middle reuses the first's anon_vma
  // (they differ only in access flags).
  ASSERT_TRUE(p->fill(a, 1, P).ok());
  ASSERT_TRUE(p->fill(a + P, 2, P).ok());
  Mm* mm = p->mm();
  mmap_read_lock(mm);
  AnonVma* first = vma_lookup(mm, a)->anon_vma;
  AnonVma* middle = vma_lookup(mm, a + P)->anon_vma;
  mmap_read_unlock(mm);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, middle);
  ASSERT_EQ(p->mprotect(a + P, P, RW), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(v[0].has_anon_vma);
  EXPECT_TRUE(holds(a, 1, P));
  EXPECT_TRUE(holds(a + P, 2, P));
  EXPECT_TRUE(holds(a + 2 * P, 0, P));
}

// ---- madvise ----

TEST_F(VmaTest, MadviseErrnos) {
  uint64_t a = map(4 * P);
  EXPECT_EQ(p->madvise(a + 1, P, MADV_DONTNEED), -EINVAL);
  EXPECT_EQ(p->madvise(a, 0, MADV_DONTNEED), 0);
  EXPECT_EQ(p->madvise(a, P, 999), -EINVAL);
  EXPECT_EQ(p->madvise(a, 0, 999), -EINVAL);  // the advice is checked first
  EXPECT_EQ(p->madvise(a + 1, 0, MADV_NORMAL), -EINVAL);
  EXPECT_EQ(p->madvise(a, ~0ull - 10, MADV_NORMAL), -EINVAL);  // length wraps
  EXPECT_EQ(p->madvise(0x300000000ull, P, MADV_HUGEPAGE), -ENOMEM);
  EXPECT_EQ(p->madvise(a, P, MADV_COLLAPSE), -EINVAL);  // TODO(khugepaged)
  EXPECT_EQ(p->madvise(a, P, MADV_REMOVE), -EINVAL);    // private anonymous
  EXPECT_EQ(p->madvise(a, P, MADV_FREE), 0);
  EXPECT_EQ(p->madvise(a, P, MADV_COLD), 0);
  EXPECT_EQ(p->madvise(a, P, MADV_PAGEOUT), 0);
  EXPECT_EQ(vmas(p).size(), 1u);
}

TEST_F(VmaTest, MadviseHugepageSplitsAndRestoreMerges) {
  uint64_t a = map(4 * P);
  ASSERT_EQ(p->madvise(a + P, 2 * P, MADV_HUGEPAGE), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[1].start, a + P);
  EXPECT_EQ(v[1].end, a + 3 * P);
  EXPECT_EQ(v[1].flags & (VM_HUGEPAGE | VM_NOHUGEPAGE), VM_HUGEPAGE);
  EXPECT_EQ(v[0].flags & (VM_HUGEPAGE | VM_NOHUGEPAGE), 0u);

  // All of it MADV_HUGEPAGE: one VMA again.
  ASSERT_EQ(p->madvise(a, 4 * P, MADV_HUGEPAGE), 0);
  ASSERT_EQ(vmas(p).size(), 1u);
  // NOHUGEPAGE on the middle clears VM_HUGEPAGE there; HUGEPAGE restores it.
  ASSERT_EQ(p->madvise(a + P, 2 * P, MADV_NOHUGEPAGE), 0);
  v = vmas(p);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[1].flags & (VM_HUGEPAGE | VM_NOHUGEPAGE), VM_NOHUGEPAGE);
  ASSERT_EQ(p->madvise(a + P, 2 * P, MADV_HUGEPAGE), 0);
  v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flags & (VM_HUGEPAGE | VM_NOHUGEPAGE), VM_HUGEPAGE);
}

TEST_F(VmaTest, MadviseHugepageSplitsPmdMappedThp) {
  ASSERT_EQ(sys->sysfs_write("transparent_hugepage/enabled", "always"), 0);
  uint64_t a = map(2 * PMD_SIZE);
  uint64_t thp = round_up(a, PMD_SIZE);
  ASSERT_TRUE(p->fill(thp, 0x3c, PMD_SIZE).ok());
  // Changing the flags of part of the THP splits the PMD mapping, not the data.
  ASSERT_EQ(p->madvise(thp + PMD_SIZE / 2, P, MADV_NOHUGEPAGE), 0);
  EXPECT_EQ(vmas(p, thp, thp + PMD_SIZE).size(), 3u);
  EXPECT_TRUE(holds(thp, 0x3c, PMD_SIZE));
  for (const PteDumpEntry& e : p->pagetable_dump(thp, thp + PMD_SIZE)) EXPECT_EQ(e.level, 1);
  ASSERT_EQ(p->madvise(thp, PMD_SIZE, MADV_NOHUGEPAGE), 0);
  EXPECT_EQ(vmas(p, thp, thp + PMD_SIZE).size(), 1u);
  EXPECT_TRUE(holds(thp, 0x3c, PMD_SIZE));
}

TEST_F(VmaTest, MadviseDontforkDoforkSplitAndMerge) {
  uint64_t a = map(4 * P);
  ASSERT_EQ(p->madvise(a + P, P, MADV_DONTFORK), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(v[1].flags & VM_DONTCOPY);
  EXPECT_FALSE(v[0].flags & VM_DONTCOPY);
  ASSERT_EQ(p->madvise(a + P, P, MADV_DOFORK), 0);
  v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flags, kAnonRwFlags);
}

TEST_F(VmaTest, MadviseWipeonforkOnlyPrivateAnonymous) {
  uint64_t a = map(2 * P);
  ASSERT_EQ(p->madvise(a, P, MADV_WIPEONFORK), 0);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].flags & VM_WIPEONFORK);
  ASSERT_EQ(p->madvise(a, P, MADV_KEEPONFORK), 0);
  EXPECT_EQ(vmas(p).size(), 1u);

  uint64_t s = map(2 * P, RW, MAP_SHARED | MAP_ANONYMOUS);
  EXPECT_EQ(p->madvise(s, P, MADV_WIPEONFORK), -EINVAL);
  EXPECT_EQ(vmas(p, s, s + 2 * P).size(), 1u);
}

TEST_F(VmaTest, MadviseOverHolesAppliesToMappedPartsThenEnomem) {
  uint64_t a = map(5 * P);
  ASSERT_EQ(p->munmap(a + P, P), 0);
  ASSERT_EQ(p->munmap(a + 3 * P, P), 0);
  EXPECT_EQ(p->madvise(a, 5 * P, MADV_DONTFORK), -ENOMEM);
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 3u);
  for (const VmaView& x : v) EXPECT_TRUE(x.flags & VM_DONTCOPY);
  // Starting in a hole also applies to what follows.
  EXPECT_EQ(p->madvise(a + P, 2 * P, MADV_DOFORK), -ENOMEM);
  EXPECT_FALSE(vmas(p, a + 2 * P, a + 3 * P)[0].flags & VM_DONTCOPY);
  // DONTNEED too: both pieces are zapped.
  ASSERT_TRUE(p->fill(a, 9, P).ok());
  ASSERT_TRUE(p->fill(a + 2 * P, 9, P).ok());
  EXPECT_EQ(p->madvise(a, 3 * P, MADV_DONTNEED), -ENOMEM);
  EXPECT_TRUE(holds(a, 0, P));
  EXPECT_TRUE(holds(a + 2 * P, 0, P));
}

TEST_F(VmaTest, MadviseDontneedZaps) {
  uint64_t a = map(8 * P);
  ASSERT_TRUE(p->fill(a, 0xee, 8 * P).ok());
  EXPECT_EQ(p->rss_anon(), static_cast<long>(8 * P));
  ASSERT_EQ(p->madvise(a + 2 * P, 4 * P, MADV_DONTNEED), 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * P));
  EXPECT_TRUE(holds(a, 0xee, 2 * P));
  EXPECT_TRUE(holds(a + 2 * P, 0, 4 * P));
  EXPECT_TRUE(holds(a + 6 * P, 0xee, 2 * P));
  EXPECT_EQ(vmas(p).size(), 1u);  // no flags change, no split
}

TEST_F(VmaTest, MadvisePopulate) {
  uint64_t a = map(4 * P);
  EXPECT_EQ(p->madvise(a, 4 * P, MADV_POPULATE_WRITE), 0);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * P));
  uint64_t r = map(2 * P, PROT_READ);
  EXPECT_EQ(p->madvise(r, 2 * P, MADV_POPULATE_WRITE), -EINVAL);
  EXPECT_EQ(p->madvise(r, 2 * P, MADV_POPULATE_READ), 0);
  EXPECT_EQ(p->madvise(0x300000000ull, P, MADV_POPULATE_READ), -ENOMEM);
}

// ---- mremap ----

TEST_F(VmaTest, MremapErrnos) {
  uint64_t a = map(4 * P);
  EXPECT_EQ(p->mremap(a, P, 2 * P, 8), -EINVAL);                  // unknown flag
  EXPECT_EQ(p->mremap(a + 1, P, 2 * P, 0), -EINVAL);              // unaligned
  EXPECT_EQ(p->mremap(a, P, 0, MREMAP_MAYMOVE), -EINVAL);         // new_len 0
  EXPECT_EQ(p->mremap(a, P, P, MREMAP_FIXED, a + 8 * P), -EINVAL);  // FIXED without MAYMOVE
  EXPECT_EQ(p->mremap(a, P, P, MREMAP_FIXED | MREMAP_MAYMOVE, a + 8 * P + 1), -EINVAL);
  EXPECT_EQ(p->mremap(a, P, 2 * P, MREMAP_DONTUNMAP | MREMAP_MAYMOVE), -EINVAL);  // resizing
  EXPECT_EQ(p->mremap(0x300000000ull, P, 2 * P, MREMAP_MAYMOVE), -EFAULT);      // not mapped
  // Overlapping old and new ranges.
  EXPECT_EQ(p->mremap(a, 2 * P, 2 * P, MREMAP_FIXED | MREMAP_MAYMOVE, a + P), -EINVAL);
  // Private "duplicate" (old_len 0).
  EXPECT_EQ(p->mremap(a, 0, P, MREMAP_MAYMOVE), -EINVAL);
  // The old range must lie inside one VMA.
  uint64_t b = map(P, PROT_READ, ANON, a + 4 * P);
  ASSERT_EQ(b, a + 4 * P);
  EXPECT_EQ(p->mremap(a + 2 * P, 3 * P, 4 * P, MREMAP_MAYMOVE), -EFAULT);
  // No room above and no MREMAP_MAYMOVE.
  EXPECT_EQ(p->mremap(a, 4 * P, 5 * P, 0), -ENOMEM);
  EXPECT_EQ(vmas(p).size(), 2u);
}

// check_mremap_params looks at the lengths after PAGE_ALIGN and checks the
// new range against TASK_SIZE before any VMA is looked up.
TEST_F(VmaTest, MremapChecksPageAlignedLengthsFirst) {
  uint64_t a = map(2 * P);
  const uint64_t t = a + 16 * P;
  // 4095 and 4096 are one page each: not a resize.
  long r = p->mremap(a, P - 1, P, MREMAP_DONTUNMAP | MREMAP_MAYMOVE, t);
  EXPECT_EQ(r, static_cast<long>(t));
  // A new range beyond TASK_SIZE is -EINVAL even where nothing is mapped.
  const uint64_t task_size = p->mm()->task_size;
  EXPECT_EQ(p->mremap(0x300000000ull, P, P, MREMAP_FIXED | MREMAP_MAYMOVE, task_size), -EINVAL);
  EXPECT_EQ(p->mremap(a, P, task_size + P, MREMAP_MAYMOVE), -EINVAL);
}

TEST_F(VmaTest, MremapShrinkAndSameSize) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0x42, 4 * P).ok());
  EXPECT_EQ(p->mremap(a, 4 * P, 4 * P, 0), static_cast<long>(a));
  EXPECT_EQ(p->mremap(a, 4 * P, 2 * P + 1, 0), static_cast<long>(a));  // rounds up to 3 pages
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].end, a + 3 * P);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(3 * P));
  EXPECT_TRUE(holds(a, 0x42, 3 * P));
}

TEST_F(VmaTest, MremapGrowInPlace) {
  uint64_t a = map(8 * P);
  ASSERT_EQ(p->munmap(a + 4 * P, 4 * P), 0);  // room above
  ASSERT_TRUE(p->fill(a, 0x24, 4 * P).ok());
  EXPECT_EQ(p->mremap(a, 4 * P, 8 * P, 0), static_cast<long>(a));
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].end, a + 8 * P);
  EXPECT_EQ(v[0].flags, kAnonRwFlags);
  EXPECT_TRUE(holds(a, 0x24, 4 * P));
  EXPECT_TRUE(holds(a + 4 * P, 0, 4 * P));
}

TEST_F(VmaTest, MremapGrowMergesWithNextVma) {
  uint64_t a = map(8 * P);
  ASSERT_EQ(p->mprotect(a + 4 * P, 4 * P, PROT_READ), 0);
  ASSERT_EQ(p->munmap(a + 2 * P, 2 * P), 0);
  ASSERT_EQ(p->mprotect(a + 4 * P, 4 * P, RW), 0);
  ASSERT_EQ(vmas(p).size(), 2u);
  // Growing the first VMA into the gap makes it touch the second: one VMA.
  EXPECT_EQ(p->mremap(a, 2 * P, 4 * P, 0), static_cast<long>(a));
  auto v = vmas(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].start, a);
  EXPECT_EQ(v[0].end, a + 8 * P);
}

TEST_F(VmaTest, MremapMoves) {
  uint64_t a = map(4 * P);
  uint64_t blocker = map(P, PROT_READ, ANON | MAP_FIXED, a + 4 * P);
  ASSERT_EQ(blocker, a + 4 * P);
  ASSERT_TRUE(p->fill(a, 0x99, 4 * P).ok());
  uint64_t old_pgoff = vmas(p, a, a + P)[0].pgoff;
  EXPECT_EQ(p->mremap(a, 4 * P, 8 * P, 0), -ENOMEM);
  long r = p->mremap(a, 4 * P, 8 * P, MREMAP_MAYMOVE);
  ASSERT_GT(r, 0);
  uint64_t n = static_cast<uint64_t>(r);
  EXPECT_NE(n, a);
  EXPECT_TRUE(vmas(p, a, a + 4 * P).empty());  // the old range is gone
  auto v = vmas(p, n, n + 8 * P);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].start, n);
  EXPECT_EQ(v[0].end, n + 8 * P);
  EXPECT_EQ(v[0].pgoff, old_pgoff);  // faulted anon memory keeps its offset
  EXPECT_TRUE(v[0].has_anon_vma);
  EXPECT_TRUE(holds(n, 0x99, 4 * P));
  EXPECT_TRUE(holds(n + 4 * P, 0, 4 * P));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * P));
  uint8_t byte;
  EXPECT_EQ(p->read(a, &byte, 1).sig, Signal::kSigsegv);
}

TEST_F(VmaTest, MremapFixedMovesOverExistingMapping) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0x61, 4 * P).ok());
  const uint64_t dst = 0x200000000ull;
  uint64_t old = map(8 * P, PROT_READ, ANON | MAP_FIXED, dst);  // replaced by the move
  ASSERT_EQ(old, dst);
  // Move the middle two pages.
  long r = p->mremap(a + P, 2 * P, 2 * P, MREMAP_FIXED | MREMAP_MAYMOVE, dst + 2 * P);
  ASSERT_EQ(r, static_cast<long>(dst + 2 * P));
  auto v = vmas(p, dst, dst + 8 * P);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[1].start, dst + 2 * P);
  EXPECT_EQ(v[1].end, dst + 4 * P);
  EXPECT_EQ(v[1].flags & VM_ACCESS_FLAGS, VM_READ | VM_WRITE);
  EXPECT_TRUE(holds(dst + 2 * P, 0x61, 2 * P));
  v = vmas(p, a, a + 4 * P);
  ASSERT_EQ(v.size(), 2u);  // the source VMA lost its middle
  EXPECT_EQ(v[0].end, a + P);
  EXPECT_EQ(v[1].start, a + 3 * P);
  EXPECT_TRUE(holds(a, 0x61, P));
  EXPECT_TRUE(holds(a + 3 * P, 0x61, P));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(4 * P));

  // Moving it back where it came from merges everything into one VMA again.
  r = p->mremap(dst + 2 * P, 2 * P, 2 * P, MREMAP_FIXED | MREMAP_MAYMOVE, a + P);
  ASSERT_EQ(r, static_cast<long>(a + P));
  v = vmas(p, a, a + 4 * P);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].start, a);
  EXPECT_EQ(v[0].end, a + 4 * P);
  EXPECT_TRUE(holds(a, 0x61, 4 * P));
}

TEST_F(VmaTest, MremapFixedShrinkAndMove) {
  uint64_t a = map(4 * P);
  ASSERT_TRUE(p->fill(a, 0x13, 4 * P).ok());
  const uint64_t dst = 0x200000000ull;
  long r = p->mremap(a, 4 * P, 2 * P, MREMAP_FIXED | MREMAP_MAYMOVE, dst);
  ASSERT_EQ(r, static_cast<long>(dst));
  EXPECT_TRUE(vmas(p, a, a + 4 * P).empty());
  EXPECT_TRUE(holds(dst, 0x13, 2 * P));
  EXPECT_EQ(p->rss_anon(), static_cast<long>(2 * P));
}

TEST_F(VmaTest, MremapDontunmapLeavesAnEmptySource) {
  uint64_t a = map(2 * P);
  ASSERT_TRUE(p->fill(a, 0x71, 2 * P).ok());
  long r = p->mremap(a, 2 * P, 2 * P, MREMAP_DONTUNMAP | MREMAP_MAYMOVE);
  ASSERT_GT(r, 0);
  uint64_t n = static_cast<uint64_t>(r);
  EXPECT_TRUE(holds(n, 0x71, 2 * P));
  auto v = vmas(p, a, a + 2 * P);
  ASSERT_EQ(v.size(), 1u);  // still mapped
  EXPECT_FALSE(v[0].flags & VM_ACCOUNT);
  EXPECT_FALSE(v[0].has_anon_vma);  // moved whole: its pages live in the new VMA
  EXPECT_TRUE(holds(a, 0, 2 * P));  // fresh zero pages
}

// ---- per-VMA locks ----

TEST_F(VmaTest, LockVmaUnderRcuFailsWhileWriteLocked) {
  uint64_t a = map(2 * P);
  Mm* mm = p->mm();
  EXPECT_EQ(lock_vma_under_rcu(mm, a - P), nullptr);  // no VMA there

  Vma* vma = lock_vma_under_rcu(mm, a + P);
  ASSERT_NE(vma, nullptr);
  EXPECT_EQ(vma->vm_start, a);
  EXPECT_EQ(vma->vm_refcnt.load(), 1);
  vma_end_read(vma);

  mmap_write_lock(mm);
  Vma* w = vma_lookup(mm, a);
  if (!w) {
    mmap_write_unlock(mm);
    FAIL() << "no VMA at " << a;
  }
  EXPECT_FALSE(vma_is_write_locked(w));
  mmap_assert_write_locked(w->vm_mm);
  vma_start_write(w);
  EXPECT_TRUE(vma_is_write_locked(w));
  EXPECT_EQ(lock_vma_under_rcu(mm, a), nullptr);
  // From another thread too.
  Vma* other = reinterpret_cast<Vma*>(1);
  std::thread t([&] { other = lock_vma_under_rcu(mm, a); });
  t.join();
  EXPECT_EQ(other, nullptr);
  mmap_write_unlock(mm);  // ends every VMA write lock

  EXPECT_FALSE(vma_is_write_locked(w));
  vma = lock_vma_under_rcu(mm, a);
  ASSERT_NE(vma, nullptr);
  vma_end_read(vma);
}

TEST_F(VmaTest, VmaStartWriteWaitsForReaders) {
  uint64_t a = map(P);
  Mm* mm = p->mm();
  Vma* r = lock_vma_under_rcu(mm, a);
  ASSERT_NE(r, nullptr);
  std::atomic<bool> locked{false};
  std::thread writer([&] {
    mmap_write_lock(mm);
    Vma* w = vma_lookup(mm, a);
    mmap_assert_write_locked(w->vm_mm);
    vma_start_write(w);  // waits for our reader
    locked.store(true);
    mmap_write_unlock(mm);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(locked.load());
  vma_end_read(r);
  writer.join();
  EXPECT_TRUE(locked.load());
}

// mprotect/madvise split and merge VMAs, and zap and refill pages, while
// other threads fault through the per-VMA lock: every read must succeed and
// see the data or, on a page just zapped, zeroes.
TEST_F(VmaTest, SplitMergeRacesWithFaults) {
  constexpr uint64_t kPages = 16;
  uint64_t a = map(kPages * P);
  ASSERT_TRUE(p->fill(a, 0xab, kPages * P).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; i++) {
    readers.emplace_back([&, i] {
      while (!stop.load()) {
        for (uint64_t pg = static_cast<uint64_t>(i); pg < kPages; pg += 2) {
          uint8_t byte = 0x55;
          if (!p->read(a + pg * P + 8, &byte, 1).ok() || (byte != 0xab && byte != 0)) bad.fetch_add(1);
        }
      }
    });
  }
  for (int it = 0; it < 200; it++) {
    uint64_t pg = 1 + static_cast<uint64_t>(it) % (kPages - 2);
    EXPECT_EQ(p->mprotect(a + pg * P, P, PROT_READ), 0);
    EXPECT_EQ(p->madvise(a + pg * P, 2 * P, MADV_NOHUGEPAGE), 0);
    EXPECT_EQ(p->madvise(a, kPages * P, MADV_NORMAL), 0);
    EXPECT_EQ(p->mprotect(a, kPages * P, RW), 0);
    EXPECT_EQ(p->madvise(a + pg * P, P, MADV_DONTNEED), 0);
    EXPECT_TRUE(p->fill(a + pg * P, 0xab, P).ok());
    EXPECT_EQ(p->madvise(a + pg * P, 2 * P, MADV_HUGEPAGE), 0);
    EXPECT_EQ(p->madvise(a, kPages * P, MADV_HUGEPAGE), 0);
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(vmas(p).size(), 1u);
  EXPECT_TRUE(holds(a, 0xab, kPages * P));
}

// ---- exit ----

TEST_F(VmaTest, ExitTearsEverythingDown) {
  uint64_t a = map(4 * PMD_SIZE);
  ASSERT_TRUE(p->fill(a, 1, 4 * PMD_SIZE).ok());
  uint64_t b = map(8 * P);
  ASSERT_TRUE(p->fill(b, 2, 8 * P).ok());
  ASSERT_EQ(p->mprotect(b + P, P, PROT_READ), 0);
  p->exit();
  EXPECT_TRUE(p->exited());
}

}  // namespace
}  // namespace mmlab
