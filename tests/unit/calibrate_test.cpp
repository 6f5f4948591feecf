// Unit tests of the cost profile `mmlab calibrate` writes: the JSON round
// trip and what loading refuses. (Measuring needs the host and runs as the
// ctest smoke test cli.calibrate_quick_json.)
#include "mmlab/calibrate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace mmlab::host {
namespace {

CostProfile sample_profile() {
  CostProfile p;
  p.name = "test-box";
  p.date = "2025-01-02T03:04:05Z";
  p.machine.hostname = "box";
  p.machine.cpu = "Some CPU @ 2.0GHz";
  p.machine.kernel = "6.18.0";
  p.machine.nproc = 2;
  p.machine.page_size = 4096;
  p.machine.mem_total_kb = 24u << 20;
  p.machine.thp_before = {{"transparent_hugepage/enabled", "madvise"},
                          {"transparent_hugepage/hugepages-2048kB/enabled", "inherit"}};
  p.build = "GNU 12.2.0, Release";
  p.commit = "abc1234";
  p.region_bytes = 256ull << 20;
  p.runs = 5;
  p.loadavg = 0.07;
  p.involuntary_switches = 12;
  p.seconds = 15.25;
  FaultCost f;
  f.size = "64K";
  f.folio_bytes = 64 << 10;
  f.faults = 4096;
  f.folios = 4100;
  f.ns_per_fault = 8504.7;
  f.ns_per_4k = 8504.7 / 16;  // not exactly representable in decimal: the round trip must keep every bit
  f.samples_ns_per_fault = {8500.1, 8504.7, 0.1 + 0.2};
  f.cow_faults = 65537;
  f.cow_faults_per_4k = 65537.0 / 65536.0;
  f.cow_ns_per_fault = 2276.25;
  f.cow_ns_per_4k = 2276.25 * f.cow_faults_per_4k;
  f.cow_samples_ns_per_fault = {2276.25};
  p.faults.push_back(f);
  PinCost pc;
  pc.size = "2M";
  pc.folio_bytes = 2 << 20;
  pc.bytes = 256ull << 20;
  pc.register_us = 138.4;
  pc.unregister_us = 3.1;
  pc.register_ns_per_4k = 138.4e3 / 65536;
  pc.unregister_ns_per_4k = 3.1e3 / 65536;
  pc.register_samples_us = {138.4, 140.0};
  pc.unregister_samples_us = {3.1, 3.0};
  p.pins.push_back(pc);
  p.notes = {"pin 64K: the host cannot enable anonymous folios of this size"};
  return p;
}

TEST(CostProfile, JsonRoundTripKeepsEveryField) {
  CostProfile p = sample_profile(), q;
  std::string err;
  ASSERT_EQ(cost_profile_from_json(cost_profile_to_json(p), &q, &err), 0) << err;
  EXPECT_EQ(q, p);
}

TEST(CostProfile, FileRoundTrip) {
  auto dir = std::filesystem::temp_directory_path() / ("mmlab-calibrate-test-" + std::to_string(::getpid()));
  std::string path = (dir / "sub" / "p.json").string();  // save creates the directory
  CostProfile p = sample_profile(), q;
  std::string err;
  ASSERT_EQ(save_cost_profile(path, p, &err), 0) << err;
  ASSERT_EQ(load_cost_profile(path, &q, &err), 0) << err;
  EXPECT_EQ(q, p);
  std::filesystem::remove_all(dir);
}

TEST(CostProfile, LoadRefusesOtherFiles) {
  CostProfile q;
  std::string err;
  EXPECT_EQ(cost_profile_from_json("{\"format\": \"something-else\", \"version\": 1}", &q, &err), -EINVAL);
  EXPECT_FALSE(err.empty());
  err.clear();
  EXPECT_EQ(cost_profile_from_json("{not json", &q, &err), -EINVAL);
  EXPECT_FALSE(err.empty());
  std::string text = cost_profile_to_json(sample_profile());
  text.replace(text.find("\"version\": 1"), 12, "\"version\": 99");
  EXPECT_EQ(cost_profile_from_json(text, &q, &err), -EINVAL);
  EXPECT_EQ(load_cost_profile("/nonexistent/mmlab-profile.json", &q, &err), -ENOENT);
}

TEST(CostProfile, LookupBySizeAndLabels) {
  CostProfile p = sample_profile();
  ASSERT_NE(p.fault_cost(64 << 10), nullptr);
  EXPECT_EQ(p.fault_cost(64 << 10)->faults, 4096u);
  EXPECT_EQ(p.fault_cost(4096), nullptr);  // sizes the profile lacks are "n/a" in reports
  ASSERT_NE(p.pin_cost(2 << 20), nullptr);
  EXPECT_EQ(p.pin_cost(64 << 10), nullptr);
  EXPECT_EQ(folio_size_label(4096), "4K");
  EXPECT_EQ(folio_size_label(64 << 10), "64K");
  EXPECT_EQ(folio_size_label(1 << 20), "1M");
  EXPECT_EQ(folio_size_label(2 << 20), "2M");
}

}  // namespace
}  // namespace mmlab::host
