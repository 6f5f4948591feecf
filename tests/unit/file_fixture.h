// A fixture for tests of files: the files it creates are closed, and the
// processes exited, before MmTest's leak check, so every page-cache frame
// must be back on the free lists.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "mm/file.h"
#include "mm/filemap.h"
#include "test_util.h"

namespace mmlab::test {

class FileFixture : public MmTest {
 protected:
  void TearDown() override {
    if (sys) {
      for (Process* q : sys->processes()) q->exit();
      for (int fd : fds_) (void)sys->close_file(fd);
    }
    MmTest::TearDown();
  }

  int create(uint64_t size, FsClass fs = FsClass::kShmem) {
    int fd = sys->create_file(size, fs);
    EXPECT_GE(fd, 0);
    fds_.push_back(fd);
    return fd;
  }
  int close(int fd) {
    std::erase(fds_, fd);
    return sys->close_file(fd);
  }
  uint64_t map(Process* q, int fd, uint64_t len, int flags, int prot = PROT_READ | PROT_WRITE, uint64_t off = 0) {
    long a = q->mmap_file(0, len, prot, flags, fd, off);
    EXPECT_GT(a, 0) << errno_name(static_cast<int>(a));
    return static_cast<uint64_t>(a);
  }
  File* file(int fd) {
    std::shared_ptr<File> f = file_get(sys->kernel(), fd);
    return f.get();  // the table keeps it alive
  }
  Folio* cache_folio(int fd, uint64_t index) {
    File* f = file(fd);
    MutexGuard g(&f->lock);
    return filemap_lookup(f, index);
  }
  uint8_t peek(Process* q, uint64_t addr) {
    uint8_t b = 0xee;
    EXPECT_TRUE(q->read(addr, &b, 1).ok());
    return b;
  }
  void poke(Process* q, uint64_t addr, uint8_t b) { ASSERT_TRUE(q->write(addr, &b, 1).ok()); }
  std::vector<int> fds_;
};

}  // namespace mmlab::test
