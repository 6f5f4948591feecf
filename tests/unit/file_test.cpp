// File-backed and shared memory: memfd/tmpfs (shmem), ext4-class files and
// MAP_SHARED|MAP_ANONYMOUS; the page cache, pread/pwrite, file mappings and
// their faults (read with fault-around, CoW, shared, write-notify), rss.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mm/file.h"
#include "mm/filemap.h"
#include "file_fixture.h"

namespace mmlab::test {
namespace {

class FileMmTest : public FileFixture {
 protected:
  uint8_t file_byte(int fd, uint64_t off) {
    uint8_t b = 0xee;
    EXPECT_EQ(sys->file_pread(fd, off, &b, 1), 1);
    return b;
  }
  long mapped_ptes(Process* q, uint64_t start, uint64_t len) {
    return static_cast<long>(q->pagetable_dump(start, start + len).size());
  }
  // do_fault_around's window for a read fault at addr in a VMA starting at
  // vma_start of vma_pages pages: 16 naturally aligned PTEs clamped to the
  // VMA and the page table.
  static long fault_around_window(uint64_t addr, uint64_t vma_start, uint64_t vma_pages) {
    uint64_t pte_off = (addr >> PAGE_SHIFT) & 511;
    uint64_t vma_off = (addr - vma_start) >> PAGE_SHIFT;
    uint64_t from = std::max<uint64_t>(round_down(pte_off, 16), pte_off - std::min(pte_off, vma_off));
    uint64_t to = std::min<uint64_t>({from + 16, 512, pte_off + vma_pages - vma_off});
    return static_cast<long>(to - from);
  }
  // The invariant checker over the live system. Until the checker counts an
  // open (or mapped) file's page cache as a holder, a cached folio that no
  // PTE maps is reported as a leak: such findings are accepted here when the
  // frames are page-cache folios of a live file holding only the cache's
  // references (everything else must be clean).
  void expect_check_ok() {
    std::set<uint64_t> live;  // File* of every open or mapped file
    {
      FileTable* t = sys->kernel()->files.get();
      MutexGuard g(&t->lock);
      for (auto& [fd, f] : t->files) live.insert(reinterpret_cast<uint64_t>(f.get()));
    }
    for (Process* q : sys->processes())
      if (q->mm())
        for (auto& [start, v] : q->mm()->vmas)
          if (v->vm_file) live.insert(reinterpret_cast<uint64_t>(v->vm_file.get()));
    PhysMem* phys = sys->kernel()->phys.get();
    CheckReport r = sys->check();
    CheckReport rest;
    for (auto& v : r.violations) {
      unsigned long lo = 0, hi = 0;
      bool cached = v.invariant == "frame leaked" && std::sscanf(v.where.c_str(), "pfn %lx-%lx", &lo, &hi) == 2;
      for (unsigned long pfn = lo; cached && pfn <= hi; pfn++) {
        Folio* f = page_folio(phys->pfn_to_page(pfn));
        cached = !folio_test_anon(f) && live.count(f->page.mapping) && !folio_mapped(f) &&
                 folio_ref_count(f) == folio_nr_pages(f);
      }
      if (!cached) rest.violations.push_back(v);
    }
    EXPECT_TRUE(rest.ok()) << rest.to_string();
  }
};

using FileTest = FileMmTest;
using ShmemTest = FileMmTest;

constexpr long P = static_cast<long>(PAGE_SIZE);

// ---- the page cache and its system calls ----

TEST_F(FileTest, CreateReadWriteClose) {
  uint64_t free0 = sys->nr_free_pages();
  int fd = create(3 * PAGE_SIZE);
  EXPECT_GE(fd, 3);
  EXPECT_EQ(free0 - sys->nr_free_pages(), 3u) << "fully allocated: three page-cache folios";
  std::vector<uint8_t> buf(3 * PAGE_SIZE, 0xaa);
  EXPECT_EQ(sys->file_pread(fd, 0, buf.data(), buf.size()), 3 * P);
  for (uint8_t b : buf) ASSERT_EQ(b, 0);

  const char msg[] = "hello, page cache";
  EXPECT_EQ(sys->file_pwrite(fd, PAGE_SIZE - 5, msg, sizeof(msg)), static_cast<long>(sizeof(msg)));
  char back[sizeof(msg)] = {};
  EXPECT_EQ(sys->file_pread(fd, PAGE_SIZE - 5, back, sizeof(back)), static_cast<long>(sizeof(back)));
  EXPECT_STREQ(back, msg);
  // Reads stop at EOF.
  EXPECT_EQ(sys->file_pread(fd, 3 * PAGE_SIZE, buf.data(), 10), 0);
  EXPECT_EQ(sys->file_pread(fd, 3 * PAGE_SIZE - 4, buf.data(), 100), 4);

  // Page-cache folios: mapped by nobody, one reference (the cache's), shmem.
  Folio* f0 = cache_folio(fd, 0);
  ASSERT_TRUE(f0);
  EXPECT_EQ(folio_ref_count(f0), 1);
  EXPECT_EQ(f0->page.index, 0u);
  EXPECT_FALSE(folio_test_anon(f0));
  EXPECT_TRUE(folio_test_swapbacked(f0));
  EXPECT_TRUE(folio_test_lru(f0));
  EXPECT_EQ(f0->page.mapping, reinterpret_cast<uint64_t>(file(fd)));
  EXPECT_TRUE(folio_test_uptodate(f0) && folio_test_dirty(f0)) << "written";
  Folio* f2 = cache_folio(fd, 2);
  EXPECT_FALSE(folio_test_uptodate(f2)) << "a fallocated shmem folio is uptodate only once used";
  EXPECT_TRUE(folio_test_dirty(f2)) << "shmem_fallocate dirties it";

  EXPECT_EQ(close(fd), 0);
  EXPECT_EQ(sys->close_file(fd), -EBADF);
  EXPECT_EQ(sys->nr_free_pages(), free0) << "closing the last reference frees the page cache";
}

TEST_F(FileTest, BadFdsAndSizes) {
  char b[4];
  EXPECT_EQ(sys->file_pread(42, 0, b, 4), -EBADF);
  EXPECT_EQ(sys->file_pwrite(42, 0, b, 4), -EBADF);
  EXPECT_EQ(sys->close_file(-1), -EBADF);
  EXPECT_EQ(sys->create_file(PAGE_SIZE, FsClass::kExt4, 21), -EINVAL) << "hugetlb_shift needs shmem/hugetlbfs";
  EXPECT_EQ(sys->create_file(PAGE_SIZE, FsClass::kShmem, 16), -EINVAL) << "no 64K hugetlb pages";
  // An empty file is fine; a size that is not a page multiple is cached in whole pages.
  int e = create(0);
  EXPECT_EQ(sys->file_pread(e, 0, b, 4), 0);
  int fd = create(100);
  std::vector<uint8_t> buf(200, 1);
  EXPECT_EQ(sys->file_pread(fd, 0, buf.data(), buf.size()), 100);
  EXPECT_TRUE(cache_folio(fd, 0));
  EXPECT_FALSE(cache_folio(fd, 1));
}

TEST_F(FileTest, PwriteExtendsTheFile) {
  for (FsClass fs : {FsClass::kShmem, FsClass::kExt4}) {
    int fd = create(PAGE_SIZE, fs);
    uint8_t x = 0x5a;
    EXPECT_EQ(sys->file_pwrite(fd, 3 * PAGE_SIZE + 7, &x, 1), 1);
    EXPECT_EQ(i_size_read(file(fd)), 3 * PAGE_SIZE + 8);
    EXPECT_EQ(file_byte(fd, 3 * PAGE_SIZE + 7), 0x5a);
    EXPECT_EQ(file_byte(fd, 2 * PAGE_SIZE), 0) << "a hole reads as zeros";
    EXPECT_FALSE(cache_folio(fd, 2)) << "reading a hole does not fill it";
  }
  EXPECT_EQ(sys->file_pwrite(fds_[0], 0, nullptr, 0), 0);
}

TEST_F(FileTest, FsClassNames) {
  for (FsClass c : {FsClass::kShmem, FsClass::kHugetlbfs, FsClass::kExt4, FsClass::kXfs, FsClass::kBtrfs}) {
    FsClass back;
    ASSERT_TRUE(fs_class_from_name(fs_class_name(c), &back));
    EXPECT_EQ(back, c);
  }
  FsClass x;
  EXPECT_FALSE(fs_class_from_name("nfs", &x));
}

// ---- mmap of files ----

TEST_F(FileTest, MmapErrors) {
  int fd = create(4 * PAGE_SIZE);
  EXPECT_EQ(p->mmap_file(0, PAGE_SIZE, RW, MAP_SHARED, 77), -EBADF);
  EXPECT_EQ(p->mmap_file(0, PAGE_SIZE, RW, MAP_SHARED, fd, 100), -EINVAL) << "offset not page aligned";
  EXPECT_EQ(p->mmap_file(0, 0, RW, MAP_SHARED, fd), -EINVAL);
  EXPECT_EQ(p->mmap_file(0, PAGE_SIZE, RW, MAP_SHARED | MAP_HUGETLB, fd), -EINVAL);
  EXPECT_EQ(p->mmap_file(0, PAGE_SIZE, RW, 0, fd), -EINVAL) << "neither shared nor private";
  EXPECT_EQ(p->mmap_file(0, PAGE_SIZE, RW, MAP_SHARED_VALIDATE | 0x80, fd), -EOPNOTSUPP);
  EXPECT_GT(p->mmap_file(0, PAGE_SIZE, RW, MAP_SHARED | 0x80, fd), 0) << "plain MAP_SHARED ignores unknown flags";
  EXPECT_GT(p->mmap_file(0, PAGE_SIZE, RW, MAP_SHARED_VALIDATE, fd), 0);
  EXPECT_EQ(p->mmap(0, PAGE_SIZE, RW, MAP_SHARED), -EBADF) << "no MAP_ANONYMOUS and no fd";
  EXPECT_EQ(p->mmap(0, PAGE_SIZE, RW, MAP_SHARED_VALIDATE | MAP_ANONYMOUS), -EINVAL);
  // MAP_ANONYMOUS ignores the fd.
  long a = p->mmap_file(0, PAGE_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS, 77);
  EXPECT_GT(a, 0);
  EXPECT_FALSE(p->mm()->vmas.at(static_cast<uint64_t>(a))->vm_file);
}

TEST_F(FileTest, VmaFlagsAndProtections) {
  int shm = create(PAGE_SIZE);
  int ext = create(PAGE_SIZE, FsClass::kExt4);
  uint64_t a = map(p, shm, PAGE_SIZE, MAP_SHARED);
  uint64_t b = map(p, ext, PAGE_SIZE, MAP_SHARED);
  uint64_t c = map(p, ext, PAGE_SIZE, MAP_PRIVATE);
  Vma* va = p->mm()->vmas.at(a).get();
  Vma* vb = p->mm()->vmas.at(b).get();
  Vma* vc = p->mm()->vmas.at(c).get();
  EXPECT_EQ(va->vm_flags & (VM_SHARED | VM_MAYSHARE | VM_MAYWRITE), VM_SHARED | VM_MAYSHARE | VM_MAYWRITE);
  EXPECT_EQ(vc->vm_flags & (VM_SHARED | VM_MAYSHARE | VM_MAYWRITE), VM_MAYWRITE);
  EXPECT_TRUE(vc->vm_flags & VM_ACCOUNT) << "private writable file mappings are charged";
  EXPECT_FALSE(va->vm_flags & VM_ACCOUNT);
  EXPECT_TRUE(vma_is_shmem(va));
  EXPECT_FALSE(vma_is_shmem(vb));
  // shmem shared writable: mapped writable at once; ext4: write-notify.
  EXPECT_TRUE(va->vm_page_prot.v & _PAGE_RW);
  EXPECT_FALSE(vb->vm_page_prot.v & _PAGE_RW);
  EXPECT_FALSE(vc->vm_page_prot.v & _PAGE_RW);
  EXPECT_EQ(va->vm_file.get(), file(shm));
}

TEST_F(FileTest, SharedMappingWriteVisibleThroughPreadAndPwrite) {
  int fd = create(2 * PAGE_SIZE);
  uint64_t a = map(p, fd, 2 * PAGE_SIZE, MAP_SHARED);
  poke(p, a + PAGE_SIZE + 3, 0x42);
  EXPECT_EQ(file_byte(fd, PAGE_SIZE + 3), 0x42);
  EXPECT_EQ(p->rss_shmem(), P);
  EXPECT_EQ(p->rss_file(), 0);
  EXPECT_EQ(p->rss_anon(), 0);
  uint8_t x = 0x99;
  EXPECT_EQ(sys->file_pwrite(fd, PAGE_SIZE + 4, &x, 1), 1);
  EXPECT_EQ(peek(p, a + PAGE_SIZE + 4), 0x99);
  // The mapping's PTE maps the page-cache folio: two references (cache + PTE).
  Folio* f = cache_folio(fd, 1);
  auto e = entry_at(a + PAGE_SIZE);
  EXPECT_EQ(e.pfn, folio_pfn(f));
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_EQ(folio_ref_count(f), 2);
  EXPECT_EQ(folio_mapcount(f), 1);
  EXPECT_TRUE(folio_test_dirty(f));
  expect_check_ok();
}

TEST_F(FileTest, SharedMappingVisibleInAnotherProcess) {
  int fd = create(4 * PAGE_SIZE);
  Process* q = sys->new_process("q");
  uint64_t a = map(p, fd, 4 * PAGE_SIZE, MAP_SHARED);
  uint64_t b = map(q, fd, 4 * PAGE_SIZE, MAP_SHARED);
  poke(p, a + 2 * PAGE_SIZE, 7);
  EXPECT_EQ(peek(q, b + 2 * PAGE_SIZE), 7);
  poke(q, b + 10, 8);
  EXPECT_EQ(peek(p, a + 10), 8);
  EXPECT_EQ(entry_at(p, a + 2 * PAGE_SIZE).pfn, entry_at(q, b + 2 * PAGE_SIZE).pfn);
  Folio* f = cache_folio(fd, 2);
  EXPECT_EQ(folio_mapcount(f), 2);
  EXPECT_EQ(folio_ref_count(f), 3);
  expect_check_ok();
  // An mm that goes away drops its mappings; the data stays in the file.
  q->exit();
  EXPECT_EQ(folio_mapcount(f), 1);
  EXPECT_EQ(file_byte(fd, 2 * PAGE_SIZE), 7);
}

TEST_F(FileTest, MappingAtAnOffset) {
  int fd = create(4 * PAGE_SIZE, FsClass::kExt4);
  for (uint8_t i = 0; i < 4; i++) {
    uint8_t b = 0x10 + i;
    ASSERT_EQ(sys->file_pwrite(fd, i * PAGE_SIZE, &b, 1), 1);
  }
  uint64_t a = map(p, fd, 2 * PAGE_SIZE, MAP_PRIVATE, PROT_READ, 2 * PAGE_SIZE);
  EXPECT_EQ(p->mm()->vmas.at(a)->vm_pgoff, 2u);
  EXPECT_EQ(peek(p, a), 0x12);
  EXPECT_EQ(peek(p, a + PAGE_SIZE), 0x13);
  EXPECT_EQ(entry_at(a).pfn, folio_pfn(cache_folio(fd, 2)));
}

TEST_F(FileTest, PrivateReadMapsThePageCacheAndWriteCopies) {
  for (FsClass fs : {FsClass::kShmem, FsClass::kExt4}) {
    SCOPED_TRACE(fs_class_name(fs));
    int fd = create(PAGE_SIZE, fs);
    uint8_t v = 0x33;
    ASSERT_EQ(sys->file_pwrite(fd, 0, &v, 1), 1);
    Process* q = sys->new_process("smem");
    Process* r = sys->new_process("mem");
    uint64_t s = map(q, fd, PAGE_SIZE, MAP_SHARED, PROT_READ);
    uint64_t m = map(r, fd, PAGE_SIZE, MAP_PRIVATE);
    EXPECT_EQ(peek(q, s), 0x33);
    EXPECT_EQ(peek(r, m), 0x33);
    Folio* pc = cache_folio(fd, 0);
    auto before = entry_at(r, m);
    EXPECT_EQ(before.pfn, entry_at(q, s).pfn) << "the private read maps the page-cache folio";
    EXPECT_EQ(before.pfn, folio_pfn(pc));
    EXPECT_FALSE(before.bits & _PAGE_RW) << "read-only in a private mapping";
    long cache_rss = fs == FsClass::kShmem ? r->rss_shmem() : r->rss_file();
    EXPECT_EQ(cache_rss, P);
    EXPECT_EQ(r->rss_anon(), 0);
    expect_check_ok();

    // The first write copies into a private anon page: rss moves cache -> anon.
    poke(r, m, 0x44);
    auto after = entry_at(r, m);
    EXPECT_NE(after.pfn, before.pfn);
    EXPECT_TRUE(after.bits & _PAGE_RW);
    EXPECT_EQ(r->rss_anon(), P);
    EXPECT_EQ(fs == FsClass::kShmem ? r->rss_shmem() : r->rss_file(), 0);
    Folio* anon = page_folio(sys->kernel()->phys->pfn_to_page(after.pfn));
    EXPECT_TRUE(folio_test_anon(anon));
    EXPECT_TRUE(PageAnonExclusive(&anon->page));
    // The file and the other mapping are unchanged.
    EXPECT_EQ(file_byte(fd, 0), 0x33);
    EXPECT_EQ(peek(q, s), 0x33);
    EXPECT_EQ(peek(r, m), 0x44);
    EXPECT_EQ(folio_mapcount(pc), 1);
    EXPECT_EQ(folio_ref_count(pc), 2);
    expect_check_ok();
    q->exit();
    r->exit();
  }
}

TEST_F(FileTest, PrivateWriteToUnmappedPageCopiesAtOnce) {
  int fd = create(2 * PAGE_SIZE, FsClass::kExt4);
  uint8_t v = 0x21;
  ASSERT_EQ(sys->file_pwrite(fd, PAGE_SIZE, &v, 1), 1);
  uint64_t m = map(p, fd, 2 * PAGE_SIZE, MAP_PRIVATE);
  poke(p, m + PAGE_SIZE + 1, 0x22);  // do_cow_fault: copy of the cached page
  EXPECT_EQ(peek(p, m + PAGE_SIZE), 0x21) << "the copy has the file's contents";
  EXPECT_EQ(p->rss_anon(), P);
  EXPECT_EQ(p->rss_file(), 0);
  EXPECT_EQ(file_byte(fd, PAGE_SIZE + 1), 0);
  Folio* pc = cache_folio(fd, 1);
  EXPECT_EQ(folio_mapcount(pc), 0);
  EXPECT_EQ(folio_ref_count(pc), 1);
  EXPECT_NE(entry_at(m + PAGE_SIZE).pfn, folio_pfn(pc));
  expect_check_ok();
}

TEST_F(FileTest, BeyondEofIsSigbus) {
  int fd = create(100, FsClass::kExt4);  // one page of cache, i_size 100
  uint64_t a = map(p, fd, 3 * PAGE_SIZE, MAP_SHARED);
  EXPECT_EQ(peek(p, a + 200), 0) << "the rest of the last page reads as zeros";
  uint8_t b;
  AccessResult r = p->read(a + PAGE_SIZE, &b, 1);
  EXPECT_EQ(r.sig, Signal::kSigbus);
  EXPECT_EQ(r.fault_addr, a + PAGE_SIZE);
  EXPECT_EQ(p->write(a + 2 * PAGE_SIZE, &b, 1).sig, Signal::kSigbus);
  // Private mappings too, for reads and CoW writes.
  uint64_t m = map(p, fd, 2 * PAGE_SIZE, MAP_PRIVATE);
  EXPECT_EQ(p->write(m + PAGE_SIZE, &b, 1).sig, Signal::kSigbus);
  // pwrite past EOF grows the file: the page becomes accessible.
  ASSERT_EQ(sys->file_pwrite(fd, PAGE_SIZE, &b, 1), 1);
  EXPECT_TRUE(p->read(a + PAGE_SIZE, &b, 1).ok());
}

TEST_F(FileTest, Ext4SharedWriteNotifyDirtiesTheFolio) {
  int fd = create(2 * PAGE_SIZE, FsClass::kExt4);
  uint64_t a = map(p, fd, 2 * PAGE_SIZE, MAP_SHARED);
  Folio* f0 = cache_folio(fd, 0);
  EXPECT_FALSE(folio_test_dirty(f0));
  EXPECT_EQ(peek(p, a), 0);
  auto e = entry_at(a);
  EXPECT_EQ(e.pfn, folio_pfn(f0));
  EXPECT_FALSE(e.bits & _PAGE_RW) << "write-notify: mapped read-only";
  EXPECT_FALSE(folio_test_dirty(f0));
  EXPECT_EQ(p->rss_file(), 2 * P) << "fault-around mapped the neighbour too";
  EXPECT_EQ(p->rss_shmem(), 0);

  sys->reset_counters();
  poke(p, a + 5, 0x77);  // wp_page_shared -> page_mkwrite
  e = entry_at(a);
  EXPECT_TRUE(e.bits & _PAGE_RW);
  EXPECT_TRUE(e.bits & _PAGE_DIRTY);
  EXPECT_EQ(e.pfn, folio_pfn(f0)) << "shared mappings never CoW";
  EXPECT_TRUE(folio_test_dirty(f0));
  EXPECT_EQ(sys->counter("fault.wp_reuse"), 1);
  EXPECT_EQ(file_byte(fd, 5), 0x77);
  EXPECT_FALSE(folio_test_dirty(cache_folio(fd, 1))) << "the other page was not written";
  expect_check_ok();
}

TEST_F(FileTest, Ext4SharedFirstWriteMapsWritableAndDirty) {
  int fd = create(PAGE_SIZE, FsClass::kXfs);
  uint64_t a = map(p, fd, PAGE_SIZE, MAP_SHARED);
  poke(p, a, 1);  // do_shared_fault with ->page_mkwrite
  auto e = entry_at(a);
  EXPECT_TRUE((e.bits & _PAGE_RW) && (e.bits & _PAGE_DIRTY));
  EXPECT_TRUE(folio_test_dirty(cache_folio(fd, 0)));
  EXPECT_EQ(p->rss_file(), P);
}

TEST_F(FileTest, ShmemSharedReadOfDirtyFolioIsWritable) {
  int fd = create(PAGE_SIZE);
  uint8_t v = 9;
  ASSERT_EQ(sys->file_pwrite(fd, 0, &v, 1), 1);  // uptodate and dirty
  uint64_t a = map(p, fd, PAGE_SIZE, MAP_SHARED);
  EXPECT_EQ(peek(p, a), 9);
  auto e = entry_at(a);
  EXPECT_TRUE(e.bits & _PAGE_RW) << "no write-notify for shmem";
  EXPECT_TRUE(e.bits & _PAGE_DIRTY) << "set_pte_range: writable and the folio is dirty";
  // A read-only shared mapping stays read-only; writing it is SIGSEGV.
  uint64_t r = map(p, fd, PAGE_SIZE, MAP_SHARED, PROT_READ);
  EXPECT_EQ(peek(p, r), 9);
  EXPECT_FALSE(entry_at(r).bits & _PAGE_RW);
  EXPECT_EQ(p->write(r, &v, 1).sig, Signal::kSigsegv);
}

TEST_F(FileTest, FaultAroundMapsUptodateNeighbours) {
  int fd = create(32 * PAGE_SIZE, FsClass::kExt4);
  uint64_t a = map(p, fd, 32 * PAGE_SIZE, MAP_PRIVATE, PROT_READ);
  EXPECT_EQ(peek(p, a + 3 * PAGE_SIZE), 0);
  // fault_around_bytes = 64K: the naturally aligned 16 pages around the fault
  // (the VMA start need not be aligned: the window is in PTE indices).
  long n = fault_around_window(a + 3 * PAGE_SIZE, a, 32);
  EXPECT_GT(n, 1);
  EXPECT_EQ(mapped_ptes(p, a, 32 * PAGE_SIZE), n);
  EXPECT_EQ(p->rss_file(), n * P);
  for (auto& e : p->pagetable_dump(a, a + 32 * PAGE_SIZE)) EXPECT_FALSE(e.bits & _PAGE_RW);
  expect_check_ok();
}

TEST_F(FileTest, FaultAroundStopsAtEofAndVma) {
  int fd = create(3 * PAGE_SIZE, FsClass::kExt4);
  uint64_t a = map(p, fd, 2 * PAGE_SIZE, MAP_SHARED, PROT_READ);
  EXPECT_EQ(peek(p, a), 0);
  EXPECT_EQ(mapped_ptes(p, a - 16 * PAGE_SIZE, 64 * PAGE_SIZE), 2) << "only the VMA's pages";
  uint64_t b = map(p, fd, 8 * PAGE_SIZE, MAP_SHARED, PROT_READ);
  EXPECT_EQ(peek(p, b), 0);
  EXPECT_EQ(mapped_ptes(p, b, 8 * PAGE_SIZE), 3) << "only pages before EOF";
}

TEST_F(FileTest, FaultAroundSkipsFallocatedShmem) {
  int fd = create(16 * PAGE_SIZE);
  uint64_t a = map(p, fd, 16 * PAGE_SIZE, MAP_SHARED, PROT_READ);
  EXPECT_EQ(peek(p, a), 0);
  EXPECT_EQ(mapped_ptes(p, a, 16 * PAGE_SIZE), 1) << "fallocated shmem folios are !uptodate";
  EXPECT_EQ(p->rss_shmem(), P);
  // Written pages are uptodate: a new mapping faults them all in at once.
  std::vector<uint8_t> buf(16 * PAGE_SIZE, 3);
  ASSERT_EQ(sys->file_pwrite(fd, 0, buf.data(), buf.size()), 16 * P);
  uint64_t b = map(p, fd, 16 * PAGE_SIZE, MAP_SHARED, PROT_READ);
  EXPECT_EQ(peek(p, b + 5 * PAGE_SIZE), 3);
  EXPECT_EQ(mapped_ptes(p, b, 16 * PAGE_SIZE), fault_around_window(b + 5 * PAGE_SIZE, b, 16));
  expect_check_ok();
}

TEST_F(FileTest, RssCountersByFileSystem) {
  int shm = create(PAGE_SIZE);
  int ext = create(PAGE_SIZE, FsClass::kBtrfs);
  uint64_t a = map(p, shm, PAGE_SIZE, MAP_SHARED);
  uint64_t b = map(p, ext, PAGE_SIZE, MAP_SHARED);
  poke(p, a, 1);
  poke(p, b, 1);
  EXPECT_EQ(p->rss_shmem(), P);
  EXPECT_EQ(p->rss_file(), P);
  EXPECT_EQ(p->rss_anon(), 0);
  EXPECT_TRUE(folio_test_swapbacked(cache_folio(shm, 0)));
  EXPECT_FALSE(folio_test_swapbacked(cache_folio(ext, 0)));
  std::string st = p->status_rss();
  EXPECT_NE(st.find("RssFile:\t       4 kB"), std::string::npos) << st;
  EXPECT_NE(st.find("RssShmem:\t       4 kB"), std::string::npos) << st;
  ASSERT_EQ(p->munmap(a, PAGE_SIZE), 0);
  ASSERT_EQ(p->munmap(b, PAGE_SIZE), 0);
  EXPECT_EQ(p->rss_shmem(), 0);
  EXPECT_EQ(p->rss_file(), 0);
  EXPECT_TRUE(folio_test_dirty(cache_folio(ext, 0))) << "zap carries the PTE's dirty bit";
}

TEST_F(FileTest, DontneedThenRefaultKeepsSharedData) {
  int fd = create(PAGE_SIZE);
  uint64_t a = map(p, fd, PAGE_SIZE, MAP_SHARED);
  poke(p, a, 0x61);
  ASSERT_EQ(p->madvise(a, PAGE_SIZE, MADV_DONTNEED), 0);
  EXPECT_EQ(p->rss_shmem(), 0);
  EXPECT_EQ(peek(p, a), 0x61);
  // A private mapping's CoW copy is gone after DONTNEED: the file shows again.
  uint64_t m = map(p, fd, PAGE_SIZE, MAP_PRIVATE);
  poke(p, m, 0x62);
  ASSERT_EQ(p->madvise(m, PAGE_SIZE, MADV_DONTNEED), 0);
  EXPECT_EQ(peek(p, m), 0x61);
}

TEST_F(FileTest, MunmapCloseAndExitReleaseEverything) {
  uint64_t free0 = sys->nr_free_pages();
  Process* q = sys->new_process("q");
  int fd = create(8 * PAGE_SIZE, FsClass::kExt4);
  uint64_t s = map(q, fd, 8 * PAGE_SIZE, MAP_SHARED);
  uint64_t m = map(q, fd, 8 * PAGE_SIZE, MAP_PRIVATE);
  ASSERT_TRUE(q->fill(s, 1, 8 * PAGE_SIZE).ok());
  ASSERT_TRUE(q->fill(m, 2, 8 * PAGE_SIZE).ok());
  // Closing the fd keeps the file alive for its mappings.
  EXPECT_EQ(close(fd), 0);
  expect_bytes(q, s, 8 * PAGE_SIZE, 1);
  expect_bytes(q, m, 8 * PAGE_SIZE, 2);
  expect_check_ok();
  ASSERT_EQ(q->munmap(s, 8 * PAGE_SIZE), 0);
  expect_check_ok();
  q->exit();
  EXPECT_EQ(sys->nr_free_pages(), free0) << "page cache, CoW pages and tables all freed";
}

TEST_F(FileTest, ConcurrentFaultsOnSharedAndPrivateMappings) {
  // Threads of two processes fault the same file pages at once: shared
  // readers and writers (fault-around racing with single-page faults and
  // write-notify), and private CoW writers. Each writer owns its bytes.
  constexpr uint64_t kPages = 64;
  int ext = create(kPages * PAGE_SIZE, FsClass::kExt4);
  int shm = create(kPages * PAGE_SIZE);
  Process* q = sys->new_process("q");
  struct Map {
    Process* proc;
    uint64_t addr;
  };
  std::vector<Map> shared, priv;
  for (int fd : {ext, shm})
    for (Process* r : {p, q}) {
      shared.push_back({r, map(r, fd, kPages * PAGE_SIZE, MAP_SHARED)});
      priv.push_back({r, map(r, fd, kPages * PAGE_SIZE, MAP_PRIVATE)});
    }
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPages; i++) {
        uint64_t pg = (i * 7 + static_cast<uint64_t>(t) * 13) % kPages;
        for (size_t m = 0; m < shared.size(); m++) {
          uint8_t b;
          // Shared: thread t writes byte t of each page through p's mapping
          // of each file (even m) while q's mapping (odd m) reads.
          Map& sm = shared[m];
          uint8_t v = static_cast<uint8_t>(0x10 + t);
          if (m % 2 == 0) (void)sm.proc->write(sm.addr + pg * PAGE_SIZE + static_cast<uint64_t>(t), &v, 1);
          else (void)sm.proc->read(sm.addr + pg * PAGE_SIZE + 100, &b, 1);
          // Private: every thread writes its own byte (CoW races with reads).
          Map& pm = priv[m];
          uint8_t w = static_cast<uint8_t>(0x80 + t);
          (void)pm.proc->write(pm.addr + pg * PAGE_SIZE + 200 + static_cast<uint64_t>(t), &w, 1);
          (void)pm.proc->read(pm.addr + ((pg + 1) % kPages) * PAGE_SIZE, &b, 1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (uint64_t pg = 0; pg < kPages; pg++)
    for (int t = 0; t < kThreads; t++) {
      for (int fd : {ext, shm}) EXPECT_EQ(file_byte(fd, pg * PAGE_SIZE + static_cast<uint64_t>(t)), 0x10 + t);
      for (Map& pm : priv) EXPECT_EQ(peek(pm.proc, pm.addr + pg * PAGE_SIZE + 200 + static_cast<uint64_t>(t)), 0x80 + t);
    }
  EXPECT_EQ(file_byte(ext, 200), 0) << "private writes never reach the file";
  expect_check_ok();
}

// ---- shared anonymous memory (shmem_zero_setup) ----

TEST_F(ShmemTest, SharedAnonymousIsShmem) {
  long a = p->mmap(0, 4 * PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  Vma* v = p->mm()->vmas.at(static_cast<uint64_t>(a)).get();
  ASSERT_TRUE(v->vm_file);
  EXPECT_TRUE(v->vm_file->anon_shared);
  EXPECT_TRUE(vma_is_shmem(v));
  EXPECT_EQ(v->vm_pgoff, 0u);
  EXPECT_EQ(i_size_read(v->vm_file.get()), 4 * PAGE_SIZE);
  // A read fault allocates a shmem page (no zero page) and maps it writable.
  EXPECT_EQ(peek(p, static_cast<uint64_t>(a) + PAGE_SIZE), 0);
  EXPECT_EQ(p->rss_shmem(), P);
  auto e = entry_at(static_cast<uint64_t>(a) + PAGE_SIZE);
  EXPECT_NE(e.pfn, sys->kernel()->phys->zero_pfn());
  EXPECT_TRUE(e.bits & _PAGE_RW);
  // Two separate shared anonymous mappings never merge (different files).
  long b = p->mmap(static_cast<uint64_t>(a) + 4 * PAGE_SIZE, PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED);
  ASSERT_EQ(b, a + 4 * P);
  EXPECT_EQ(p->mm()->vmas.count(static_cast<uint64_t>(b)), 1u);
  // Private anonymous memory is not shmem.
  long c = p->mmap(0, PAGE_SIZE, RW, MAP_PRIVATE | MAP_ANONYMOUS);
  EXPECT_FALSE(vma_is_shmem(p->mm()->vmas.at(static_cast<uint64_t>(c)).get()));
  expect_check_ok();
}

TEST_F(ShmemTest, VisibleThroughASecondMapping) {
  uint64_t a = static_cast<uint64_t>(p->mmap(0, 2 * PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS));
  poke(p, a + PAGE_SIZE, 0x11);
  // mremap(old_size = 0) makes a second mapping of the same shared memory.
  long b = p->mremap(a, 0, 2 * PAGE_SIZE, MREMAP_MAYMOVE);
  ASSERT_GT(b, 0);
  uint64_t ub = static_cast<uint64_t>(b);
  EXPECT_EQ(peek(p, ub + PAGE_SIZE), 0x11);
  poke(p, ub, 0x12);
  EXPECT_EQ(peek(p, a), 0x12);
  EXPECT_EQ(entry_at(a).pfn, entry_at(ub).pfn);
  EXPECT_EQ(p->rss_shmem(), 4 * P) << "two pages, each mapped twice";
  expect_check_ok();
  // Moving it keeps the contents.
  long c = p->mremap(a, 2 * PAGE_SIZE, 2 * PAGE_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, a + 64 * PAGE_SIZE);
  ASSERT_EQ(c, static_cast<long>(a + 64 * PAGE_SIZE));
  EXPECT_EQ(peek(p, static_cast<uint64_t>(c) + PAGE_SIZE), 0x11);
  expect_check_ok();
}

TEST_F(ShmemTest, GrowingBeyondTheObjectIsSigbus) {
  uint64_t a = static_cast<uint64_t>(p->mmap(0, PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS));
  long b = p->mremap(a, PAGE_SIZE, 3 * PAGE_SIZE, MREMAP_MAYMOVE);
  ASSERT_GT(b, 0);
  uint8_t x;
  EXPECT_TRUE(p->read(static_cast<uint64_t>(b), &x, 1).ok());
  EXPECT_EQ(p->read(static_cast<uint64_t>(b) + PAGE_SIZE, &x, 1).sig, Signal::kSigbus)
      << "the shmem object keeps its original size";
}

TEST_F(ShmemTest, VisibleAcrossFork) {
  uint64_t a = static_cast<uint64_t>(p->mmap(0, 2 * PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS));
  poke(p, a, 1);
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  EXPECT_EQ(peek(child, a), 1);
  poke(child, a + PAGE_SIZE, 2);
  EXPECT_EQ(peek(p, a + PAGE_SIZE), 2);
  poke(p, a, 3);
  EXPECT_EQ(peek(child, a), 3);
  EXPECT_EQ(entry_at(p, a).pfn, entry_at(child, a).pfn);
  expect_check_ok();
  child->exit();
  EXPECT_EQ(peek(p, a + PAGE_SIZE), 2);
}

TEST_F(ShmemTest, MemfdSharedAcrossFork) {
  int fd = create(PAGE_SIZE);
  uint64_t s = map(p, fd, PAGE_SIZE, MAP_SHARED);
  uint64_t m = map(p, fd, PAGE_SIZE, MAP_PRIVATE);
  poke(p, s, 5);
  EXPECT_EQ(peek(p, m), 5);
  Process* child = p->fork("child");
  ASSERT_TRUE(child);
  poke(child, s, 6);
  EXPECT_EQ(peek(p, s), 6);
  EXPECT_EQ(file_byte(fd, 0), 6);
  poke(child, m, 7);  // the child's private copy
  EXPECT_EQ(peek(p, m), 6);
  expect_check_ok();
}

TEST_F(ShmemTest, MunmapFreesTheObject) {
  uint64_t free0 = sys->nr_free_pages();
  Process* q = sys->new_process("q");
  uint64_t a = static_cast<uint64_t>(q->mmap(0, 16 * PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS));
  ASSERT_TRUE(q->fill(a, 0xab, 16 * PAGE_SIZE).ok());
  EXPECT_EQ(q->rss_shmem(), 16 * P);
  expect_check_ok();
  ASSERT_EQ(q->munmap(a, 16 * PAGE_SIZE), 0);
  EXPECT_EQ(q->rss_shmem(), 0);
  q->exit();
  EXPECT_EQ(sys->nr_free_pages(), free0);
}

TEST_F(ShmemTest, PopulateMapsSharedPages) {
  uint64_t a = static_cast<uint64_t>(p->mmap(0, 8 * PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE));
  EXPECT_EQ(p->rss_shmem(), 8 * P);
  for (auto& e : p->pagetable_dump(a, a + 8 * PAGE_SIZE)) EXPECT_TRUE(e.bits & _PAGE_RW);
  expect_check_ok();
}

}  // namespace
}  // namespace mmlab::test
