// A test passes only if no VM_WARN_ON* fired while it ran (beyond those it
// announced with expect_vm_warns): a warning is a kernel bug the model went
// on from, which a green run must not hide.
#include <gtest/gtest.h>

#include "base/mmdebug.h"
#include "test_util.h"

namespace mmlab::test {
namespace {

class VmWarnChecker : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    g_expected_vm_warns = 0;
    start_ = vm_warn_count();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    const uint64_t fired = vm_warn_count() - start_;
    EXPECT_EQ(fired, static_cast<uint64_t>(g_expected_vm_warns))
        << fired << " VM_WARN_ON* fired during this test (see the WARNING lines on stderr)";
  }
  uint64_t start_ = 0;
};

// Registered before gtest_main's RUN_ALL_TESTS; the listener list owns it.
const bool g_registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new VmWarnChecker);
  return true;
}();

}  // namespace
}  // namespace mmlab::test
