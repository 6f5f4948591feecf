// VM_WARN_ON* counts and goes on; VM_BUG_ON* aborts (debug builds only).
#include <gtest/gtest.h>

#include "base/mmdebug.h"
#include "phys/phys.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

class VmDebugTest : public MmTest {};

#if defined(MMLAB_DEBUG_VM)

TEST_F(VmDebugTest, WarnCountsAndContinues) {
  expect_vm_warns(3);
  const uint64_t before = vm_warn_count();
  const int64_t counted = sys->counter("debug.vm_warn");
  // A warning on an mm counts in its System and the test goes on.
  VM_WARN_ON_ONCE_MM(vm_warn_count() >= before, p->mm(), "a warning the test provokes");
  EXPECT_EQ(vm_warn_count(), before + 1);
  EXPECT_EQ(sys->counter("debug.vm_warn"), counted + 1);
  for (int i = 0; i < 3; i++) VM_WARN_ON_ONCE_MM(i >= 0, p->mm(), "fires on the first pass only");
  VM_WARN_ON_ONCE_MM(false, p->mm(), "not a warning");
  EXPECT_EQ(vm_warn_count(), before + 2);

  // A folio's warning counts in its System's debug.vm_warn counter too.
  const long a = p->mmap(0, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_GT(a, 0);
  ASSERT_TRUE(p->fill(static_cast<uint64_t>(a), 1, PAGE_SIZE).ok());
  PteDumpEntry e = entry_at(p, static_cast<uint64_t>(a));
  ASSERT_TRUE(e.level != 0 && !e.swap && e.folio_order >= 0);
  Folio* f = page_folio(sys->kernel()->phys->pfn_to_page(e.pfn));
  VM_WARN_ON_FOLIO(folio_test_anon(f), f, "a warning on an anonymous folio the test provokes");
  EXPECT_EQ(sys->counter("debug.vm_warn"), counted + 3);
  EXPECT_EQ(vm_warn_count(), before + 3);
}

// A _ONCE site fires once per System, not once per process: a second System
// (the next test of `mmlab run`) sees its own first warning.
TEST_F(VmDebugTest, OnceIsPerSystem) {
  expect_vm_warns(2);
  const uint64_t before = vm_warn_count();
  auto once = [](const Mm* mm) { VM_WARN_ON_ONCE_MM(mm != nullptr, mm, "one site, two Systems"); };
  once(p->mm());
  once(p->mm());
  EXPECT_EQ(vm_warn_count(), before + 1);
  SystemConfig cfg;
  cfg.ram_bytes = 16ull << 20;
  auto other = System::create(cfg);
  ASSERT_TRUE(other);
  Process* q = other->new_process("other");
  ASSERT_TRUE(q);
  once(q->mm());
  once(q->mm());
  EXPECT_EQ(vm_warn_count(), before + 2);
  EXPECT_EQ(other->counter("debug.vm_warn"), 1);
  q->exit();
  EXPECT_TRUE(other->check().ok());
}

TEST_F(VmDebugTest, BugAborts) {
  EXPECT_DEATH(VM_BUG_ON(sys != nullptr, "a bug the test provokes"), "VM_BUG_ON\\(sys != nullptr\\)");
}

#else

TEST_F(VmDebugTest, ChecksCompileToNothing) {
  const uint64_t before = vm_warn_count();
  VM_WARN_ON_ONCE_MM(true, p->mm(), "compiled out");
  VM_BUG_ON(true, "compiled out");
  EXPECT_EQ(vm_warn_count(), before);
}

#endif

}  // namespace
}  // namespace mmlab::test
