// Unit tests of the cost profile `mmlab calibrate` writes: the JSON round
// trip and what loading refuses. (Measuring needs the host and runs as the
// ctest smoke test cli.calibrate_quick_json.)
#include "mmlab/calibrate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "nlohmann/json.hpp"

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
  p.machine.arch = "x86_64";
  p.machine.hypervisor = "KVM";
  p.machine.init_on_alloc = "default";
  p.machine.init_on_free = "0";
  p.machine.mitigations = "retbleed,spectre_v2";
  p.machine.governor = "none";
  p.machine.thp_defrag = "madvise";
  p.machine.khugepaged_defrag = "1";
  p.machine.memcg = "v1";
  p.terms = {{"syscall", 1206.5, 1198.0, 1214.0, "fit"}, {"zero_o9", 0.1 / 3, 0.1 / 3, 0.1 / 3, "measured"},
             {"fault_unshare", 0, 0, 0, "not exercised"}};
  p.fit.cases = 46;
  p.fit.condition_number = 1.45e3;
  p.fit.residual_median = 0.039;
  p.fit.residual_max = 0.725;
  p.fit.cases_sha = "53de587cce9988d0";
  p.fit.reference_ns = 4.2e6;
  p.fit.per_case = {{"fault-o0-8m", 3286.1e3, 3394.5e3, {3286.1e3, 3301.0e3, 3250.2e3}}};
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
  text.replace(text.find("\"version\": 3"), 12, "\"version\": 99");
  EXPECT_EQ(cost_profile_from_json(text, &q, &err), -EINVAL);
  EXPECT_EQ(load_cost_profile("/nonexistent/mmlab-profile.json", &q, &err), -ENOENT);
}

// A version 2 profile (before each case's runs were stored) still loads,
// without them: a refit then refuses it.
TEST(CostProfile, VersionTwoLoadsWithoutRuns) {
  CostProfile p = sample_profile(), q;
  nlohmann::json j = nlohmann::json::parse(cost_profile_to_json(p));
  j["version"] = 2;
  for (auto& c : j["fit"]["per_case"]) c.erase("host_runs_ns");
  std::string err;
  ASSERT_EQ(cost_profile_from_json(j.dump(), &q, &err), 0) << err;
  ASSERT_EQ(q.fit.per_case.size(), 1u);
  EXPECT_TRUE(q.fit.per_case[0].host_runs_ns.empty());
  EXPECT_EQ(q.fit.per_case[0].host_ns, p.fit.per_case[0].host_ns);
}

// A version 1 profile (before the cost model's terms) still loads, without
// terms and with the header's newer fields empty.
TEST(CostProfile, VersionOneLoadsWithoutTerms) {
  CostProfile p = sample_profile(), q;
  nlohmann::json j = nlohmann::json::parse(cost_profile_to_json(p));
  j["version"] = 1;
  j.erase("terms");
  j.erase("fit");
  for (const char* k : {"arch", "hypervisor", "init_on_alloc", "init_on_free", "mitigations", "governor", "thp_defrag",
                        "khugepaged_defrag", "memcg"})
    j["machine"].erase(k);
  std::string err;
  ASSERT_EQ(cost_profile_from_json(j.dump(), &q, &err), 0) << err;
  EXPECT_TRUE(q.terms.empty());
  EXPECT_EQ(q.machine.arch, "");
  EXPECT_EQ(q.faults, p.faults);
}

TEST(CostProfile, HeaderDifferencesNameEachField) {
  MachineInfo a = sample_profile().machine, b = a;
  EXPECT_TRUE(cost_header_differences(a, b).empty());
  b.hostname = "another-box";  // the same kind of machine: not a difference
  EXPECT_TRUE(cost_header_differences(a, b).empty());
  b.arch = "aarch64";
  b.init_on_alloc = "1";
  auto d = cost_header_differences(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "arch: aarch64 here, x86_64 in the profile");
  EXPECT_EQ(d[1], "init_on_alloc: 1 here, default in the profile");
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
