// shmem reclaim and file truncation (mm/shmem.cpp, mm/truncate.cpp): the
// file's i_mmap through the VMA operations, the swap count a swapped-out
// shmem page holds in its file, unmap_mapping_range's even_cows, and a
// hole punched under a GUP pin. What the scenarios cannot see
// (tests/scenarios/shmem_reclaim.mms and truncate.mms show the rest).
#include <cstring>
#include <set>
#include <vector>

#include "mm/file.h"
#include "mm/filemap.h"
#include "mm/memory.h"
#include "mm/swapfile.h"
#include "mmlab/gup.h"
#include "file_fixture.h"

namespace mmlab::test {
namespace {

class ShmemReclaimTest : public FileFixture {
 protected:
  size_t i_mmap_size(File* f) {
    ReadGuard g(&f->i_mmap_rwsem);
    return f->i_mmap.size();
  }
  std::vector<swp_entry_t> swapped(File* f) {
    std::vector<swp_entry_t> out;
    MutexGuard g(&f->lock);
    for (auto& [index, e] : f->swapped) out.push_back(e);
    return out;
  }
  void fill(Process* q, uint64_t addr, uint64_t len, uint8_t byte) {
    std::vector<uint8_t> buf(len, byte);
    ASSERT_TRUE(q->write(addr, buf.data(), len).ok());
  }
};

// A VMA is on its file's i_mmap from its linking until it goes: split and
// merge (mprotect), fork, munmap and exit keep the set equal to the VMAs
// that map the file.
TEST_F(ShmemReclaimTest, IMmapFollowsTheVmas) {
  const int fd = create(16 * PAGE_SIZE);
  File* f = file(fd);
  const uint64_t a = map(p, fd, 16 * PAGE_SIZE, MAP_SHARED);
  EXPECT_EQ(i_mmap_size(f), 1u);
  ASSERT_EQ(p->mprotect(a + 4 * PAGE_SIZE, 4 * PAGE_SIZE, PROT_READ), 0);
  EXPECT_EQ(i_mmap_size(f), 3u);
  ASSERT_EQ(p->mprotect(a + 4 * PAGE_SIZE, 4 * PAGE_SIZE, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(i_mmap_size(f), 1u);
  Process* c = p->fork("child");
  ASSERT_TRUE(c);
  EXPECT_EQ(i_mmap_size(f), 2u);
  ASSERT_EQ(c->munmap(a, 8 * PAGE_SIZE), 0);
  EXPECT_EQ(i_mmap_size(f), 2u);  // the child's upper half
  c->exit();
  EXPECT_EQ(i_mmap_size(f), 1u);
  ASSERT_EQ(p->munmap(a, 16 * PAGE_SIZE), 0);
  EXPECT_EQ(i_mmap_size(f), 0u);
}

// shmem_writeout: the slot is counted once, for the file, and the swap cache
// has let the folio go (zram writes synchronously); the page cache no
// longer holds the index. pread reads it back without a fault
// (shmem_swapin_folio, no pgmajfault), and the slot is freed.
TEST_F(ShmemReclaimTest, SwappedOutPageIsHeldByTheFile) {
  ASSERT_EQ(sys->add_swap(16ull << 20, SwapKind::kZram), 0);
  const int fd = create(2 * PAGE_SIZE);
  File* f = file(fd);
  const uint64_t a = map(p, fd, 2 * PAGE_SIZE, MAP_SHARED);
  fill(p, a, 2 * PAGE_SIZE, 0x3c);
  ASSERT_EQ(p->madvise(a, 2 * PAGE_SIZE, MADV_PAGEOUT), 0);
  const std::vector<swp_entry_t> entries = swapped(f);
  ASSERT_EQ(entries.size(), 2u);
  for (swp_entry_t e : entries) EXPECT_EQ(swap_map_of(sys->kernel(), e), 1u);  // the file's count, no cache bit
  {
    MutexGuard g(&f->lock);
    EXPECT_TRUE(f->pages.empty());
  }
  EXPECT_EQ(p->rss_shmem(), 0);
  uint8_t b = 0;
  ASSERT_EQ(sys->file_pread(fd, PAGE_SIZE + 7, &b, 1), 1);
  EXPECT_EQ(b, 0x3c);
  EXPECT_EQ(sys->vmstat("pgmajfault"), 0);
  EXPECT_EQ(swapped(f).size(), 1u);
  EXPECT_EQ(swap_map_of(sys->kernel(), entries[1]), 0u);  // read back: the slot is free
  EXPECT_EQ(peek(p, a), 0x3c);                             // the other page by a fault
  EXPECT_EQ(sys->vmstat("pgmajfault"), 1);
  EXPECT_TRUE(swapped(f).empty());
}

// A failed swap read sticks to a shmem page as to an anonymous one: the
// unread folio stays in the swap cache, the file keeps the entry, a fault
// is SIGBUS and pread -EIO, every time; truncating the page ends it.
TEST_F(ShmemReclaimTest, FailedSwapReadSticks) {
  ASSERT_EQ(sys->add_swap(16ull << 20, SwapKind::kZram), 0);
  const int fd = create(PAGE_SIZE);
  const uint64_t a = map(p, fd, PAGE_SIZE, MAP_SHARED);
  fill(p, a, PAGE_SIZE, 0x6d);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_PAGEOUT), 0);
  InjectSpec once;
  once.mode = InjectSpec::Mode::kTimes;
  once.n = 1;
  ASSERT_EQ(sys->inject("swapin", once), 0);
  uint8_t b = 0;
  EXPECT_EQ(p->read(a, &b, 1).sig, Signal::kSigbus);
  EXPECT_EQ(sys->file_pread(fd, 0, &b, 1), -EIO);
  EXPECT_EQ(p->read(a, &b, 1).sig, Signal::kSigbus);
  EXPECT_EQ(swapped(file(fd)).size(), 1u);
  ASSERT_EQ(sys->file_ftruncate(fd, 0), 0);
  ASSERT_EQ(sys->file_ftruncate(fd, PAGE_SIZE), 0);
  EXPECT_EQ(peek(p, a), 0);
}

// smaps' Swap of a shmem VMA counts the file's swapped-out pages
// (shmem_swap_usage): all of them in a shared mapping, only those under an
// empty PTE in a private writable one (this host's kernel shows the same:
// 16 kB and 12 kB).
TEST_F(ShmemReclaimTest, SmapsSwapCountsTheFilesSwap) {
  ASSERT_EQ(sys->add_swap(16ull << 20, SwapKind::kZram), 0);
  const int fd = create(4 * PAGE_SIZE);
  const uint64_t s = map(p, fd, 4 * PAGE_SIZE, MAP_SHARED);
  fill(p, s, 4 * PAGE_SIZE, 0x51);
  const uint64_t a = map(p, fd, 4 * PAGE_SIZE, MAP_PRIVATE);
  fill(p, a, PAGE_SIZE, 0x52);  // a CoW copy over the file's first page
  ASSERT_EQ(p->madvise(s, 4 * PAGE_SIZE, MADV_PAGEOUT), 0);
  const std::string smaps = p->smaps();
  EXPECT_NE(smaps.find("Swap:                 16 kB"), std::string::npos) << smaps;
  EXPECT_NE(smaps.find("Swap:                 12 kB"), std::string::npos) << smaps;
}

// unmap_mapping_range without even_cows (a punched hole) leaves a private
// mapping's anonymous copies; with it (a truncation) they go too. The
// file's pages go from every mapping either way.
TEST_F(ShmemReclaimTest, UnmapMappingRangeKeepsCowsUnlessEvenCows) {
  const int fd = create(2 * PAGE_SIZE);
  File* f = file(fd);
  const uint64_t priv = map(p, fd, 2 * PAGE_SIZE, MAP_PRIVATE);
  const uint64_t shared = map(p, fd, 2 * PAGE_SIZE, MAP_SHARED);
  fill(p, shared, 2 * PAGE_SIZE, 0x11);
  fill(p, priv, PAGE_SIZE, 0x22);           // a CoW copy
  EXPECT_EQ(peek(p, priv + PAGE_SIZE), 0x11);  // the file's page
  unmap_mapping_range(f, 0, 0, /*even_cows=*/false);
  EXPECT_EQ(p->rss_anon(), static_cast<long>(PAGE_SIZE));
  EXPECT_EQ(p->rss_shmem(), 0);
  EXPECT_EQ(peek(p, priv), 0x22);
  unmap_mapping_range(f, 0, 0, /*even_cows=*/true);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_EQ(peek(p, priv), 0x11);  // the file's page again
}

// A hole punched under a long-term pin: the folio leaves the page cache and
// the mapping, but lives on in the pin, which still reads the old bytes;
// unpinning frees it (the fixture's leak check).
TEST_F(ShmemReclaimTest, PunchedHoleUnderAPin) {
  const int fd = create(PAGE_SIZE);
  const uint64_t a = map(p, fd, PAGE_SIZE, MAP_SHARED);
  fill(p, a, PAGE_SIZE, 0x5e);
  GupPages pages;
  ASSERT_EQ(gup(p, GupEntry::kPinUserPagesFast, a, 1, foll::WRITE | foll::LONGTERM, &pages), 1);
  ASSERT_EQ(sys->file_punch_hole(fd, 0, PAGE_SIZE), 0);
  EXPECT_EQ(peek(p, a), 0);  // a new page of the hole
  uint8_t b = 0;
  ASSERT_EQ(pages.read(0, &b, 1), 0);
  EXPECT_EQ(b, 0x5e);
  pages.release();
}

TEST_F(ShmemReclaimTest, TruncateAndPunchArguments) {
  const int fd = create(4 * PAGE_SIZE);
  EXPECT_EQ(sys->file_ftruncate(fd, -1), -EINVAL);
  EXPECT_EQ(sys->file_ftruncate(99, 0), -EBADF);
  EXPECT_EQ(sys->file_punch_hole(fd, 0, 0), -EINVAL);
  EXPECT_EQ(sys->file_punch_hole(fd, -1, PAGE_SIZE), -EINVAL);
  EXPECT_EQ(sys->file_punch_hole(fd, INT64_MAX, 2), -EFBIG);
  EXPECT_EQ(sys->file_ftruncate(fd, 3), 0);
  uint8_t b = 1;
  EXPECT_EQ(sys->file_pread(fd, 3, &b, 1), 0);  // EOF
}

}  // namespace
}  // namespace mmlab::test
