// Shared test fixture: a fresh small System per test; every test ends by
// exiting its processes and running the invariant checker, which also proves
// that every frame and page-table page was returned.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/mmdebug.h"
#include "mm/kernel.h"
#include "mm/mm.h"
#include "mmlab/system.h"
#include "phys/phys.h"

namespace mmlab::test {

inline constexpr uint64_t k64K = 64 * 1024;
inline constexpr int RW = PROT_READ | PROT_WRITE;

// Every test fails if a VM_WARN_ON* fired during it (the listener in
// vm_warn_listener.cpp checks vm_warn_count() around each test), unless
// the test says here how many it provokes on purpose.
inline int g_expected_vm_warns = 0;
inline void expect_vm_warns(int n) { g_expected_vm_warns = n; }

class MmTest : public ::testing::Test {
 protected:
  uint64_t ram_bytes = 256ull << 20;

  void SetUp() override {
    SystemConfig cfg;
    cfg.ram_bytes = ram_bytes;
    int err = 0;
    sys = System::create(cfg, &err);
    ASSERT_TRUE(sys) << "System::create failed: " << err;
    p = sys->new_process("test");
    ASSERT_TRUE(p);
  }

  void TearDown() override {
    if (!sys) return;
    CheckReport live = sys->check();
    EXPECT_TRUE(live.ok()) << "before exit:\n" << live.to_string();
    for (Process* q : sys->processes()) q->exit();
    CheckReport r = sys->check();
    EXPECT_TRUE(r.ok()) << "after exit:\n" << r.to_string();
    sys.reset();
  }

  void set(const std::string& path, const std::string& value) {
    ASSERT_EQ(sys->sysfs_write(path, value), 0) << path << "=" << value;
  }
  void enable_order_kb(unsigned kb, const char* mode = "always") {
    set("transparent_hugepage/hugepages-" + std::to_string(kb) + "kB/enabled", mode);
  }

  // An anonymous private mapping of `len` whose start is aligned to `align`.
  uint64_t map_aligned(Process* q, uint64_t len, uint64_t align = PMD_SIZE, int prot = PROT_READ | PROT_WRITE) {
    long raw = q->mmap(0, len + align, prot, MAP_PRIVATE | MAP_ANONYMOUS);
    EXPECT_GT(raw, 0);
    uint64_t start = round_up(static_cast<uint64_t>(raw), align);
    // Trim the slack so the VMA is exactly [start, start+len), as selftests do.
    if (start > static_cast<uint64_t>(raw)) {
      EXPECT_EQ(q->munmap(static_cast<uint64_t>(raw), start - raw), 0);
    }
    uint64_t tail = static_cast<uint64_t>(raw) + len + align - (start + len);
    if (tail) {
      EXPECT_EQ(q->munmap(start + len, tail), 0);
    }
    return start;
  }
  uint64_t map_aligned(uint64_t len, uint64_t align = PMD_SIZE) { return map_aligned(p, len, align); }

  // The entry mapping addr (level 0 if none).
  PteDumpEntry entry_at(Process* q, uint64_t addr) {
    auto v = q->pagetable_dump(addr & PAGE_MASK, (addr & PAGE_MASK) + PAGE_SIZE);
    if (v.empty()) return PteDumpEntry{addr, 0, 0, 0, -1, false};
    return v.front();
  }
  PteDumpEntry entry_at(uint64_t addr) { return entry_at(p, addr); }
  int order_at(uint64_t addr) { return entry_at(addr).folio_order; }

  void expect_bytes(Process* q, uint64_t addr, uint64_t len, uint8_t byte) {
    int64_t bad = -2;
    uint8_t found = 0;
    AccessResult r = q->read_expect(addr, byte, len, &bad, &found);
    ASSERT_TRUE(r.ok()) << "signal " << signal_name(r.sig) << " at " << std::hex << r.fault_addr;
    EXPECT_EQ(bad, -1) << "byte at +" << bad << " is " << int(found) << ", expected " << int(byte);
  }

  std::unique_ptr<System> sys;
  Process* p = nullptr;
};

}  // namespace mmlab::test
