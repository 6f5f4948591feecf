// Calibration from the host: what the model cannot incur itself, measured on
// the running kernel and kept as a named cost profile. `mmlab calibrate`
// writes one (JSON); `mmlab bench --profile` multiplies the model's event
// counts by it and reports the result as modelled time, apart from the
// times it measured.
//
//   first-touch fault  one write per folio of a fresh anonymous mapping, for
//                      4K and each anonymous mTHP size the host offers,
//                      enabled one at a time
//   CoW fault          after fork, one write per 4K page in the parent
//   long-term pin      io_uring fixed-buffer registration of 256 MiB, that
//                      is pin_user_pages_fast(FOLL_WRITE | FOLL_LONGTERM),
//                      and its unregistration, at 4K, 64K and 2M
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mmlab::host {

// Costs at one folio size (medians over the runs).
struct FaultCost {
  std::string size;      // "4K", "64K", "2M"
  uint64_t folio_bytes = 0;
  // First touch of a fresh mapping, one write per folio.
  uint64_t faults = 0;       // page faults of one run (getrusage minflt)
  uint64_t folios = 0;       // anon_fault_alloc at this size in one run (0 for 4K)
  uint64_t fallback = 0;     // anon_fault_fallback at this size, all runs together
  double ns_per_fault = 0;   // median
  double ns_per_4k = 0;      // ns_per_fault spread over the folio's 4K pages
  std::vector<double> samples_ns_per_fault;
  // CoW after fork: one write per 4K page of the parent's populated region.
  uint64_t cow_faults = 0;        // page faults of one run (getrusage minflt)
  double cow_faults_per_4k = 0;   // 1.0 when each fault copies one 4K page
  double cow_ns_per_fault = 0;    // median
  double cow_ns_per_4k = 0;
  uint64_t cow_fallback = 0;      // anon_fault_fallback while populating, all runs
  std::vector<double> cow_samples_ns_per_fault;

  bool operator==(const FaultCost&) const = default;
};

// io_uring buffer registration of one populated region (medians).
struct PinCost {
  std::string size;
  uint64_t folio_bytes = 0;
  uint64_t bytes = 0;            // the registered buffer
  uint64_t fallback = 0;         // anon_fault_fallback while populating
  double register_us = 0, unregister_us = 0;
  double register_ns_per_4k = 0, unregister_ns_per_4k = 0;
  std::vector<double> register_samples_us, unregister_samples_us;

  bool operator==(const PinCost&) const = default;
};

struct MachineInfo {
  std::string hostname, cpu, kernel;  // kernel: uname release
  long nproc = 0, page_size = 0;
  uint64_t mem_total_kb = 0;
  std::map<std::string, std::string> thp_before;  // /sys/kernel/mm/<rel> -> value before calibrating
  // What moves the kernel's costs by more than 10% (profile format 2): a
  // profile is refused for a machine where one of these differs
  // (cost_header_differences).
  std::string arch;          // uname machine
  std::string hypervisor;    // "none" on bare metal, else the CPUID vendor ("KVM", ...)
  std::string init_on_alloc, init_on_free;  // "0"/"1" (with init_on_alloc the allocator zeroes)
  std::string mitigations;   // the vulnerabilities that report "Mitigation: ...", sorted, comma-separated
  std::string governor;      // cpufreq scaling_governor of CPU 0, "none" without cpufreq
  std::string thp_defrag, khugepaged_defrag;
  std::string memcg;         // "v2", "v1" or "none": is the memory controller charging

  bool operator==(const MachineInfo&) const = default;
};

// The cost of one term of the cost model (include/mmlab/cost.h) on this
// machine: ns per count, with its 95% interval.
struct TermCost {
  std::string id;
  double ns = 0, lo = 0, hi = 0;
  // "fit", "measured", "override" (set by hand), "merged into ID" (its count
  // cannot be told apart from ID's in the calibration design: ID's cost
  // covers both and this one is 0), "not exercised" (no calibration case
  // counts it: 0, and a prediction that uses it says so).
  std::string how;
  bool operator==(const TermCost&) const = default;
};

// One calibration case: the host's median CPU time and the fit's value.
struct CaseFit {
  std::string name;
  double host_ns = 0, fitted_ns = 0;
  std::vector<double> host_runs_ns;  // format 3: every measured run, so that a refit needs no machine
  bool operator==(const CaseFit&) const = default;
};

struct FitSummary {
  std::vector<CaseFit> per_case;
  int cases = 0;
  double condition_number = 0;  // of the fitted terms' design, columns scaled to unit length
  double residual_median = 0, residual_max = 0;  // in-sample |predicted - measured| / measured
  std::string cases_sha;  // of the calibration cases file
  double reference_ns = 0;  // cost::speed_reference_ns() during the calibration (median)
  bool operator==(const FitSummary&) const = default;
};

struct CostProfile {
  std::string name;
  std::string date;  // UTC, ISO 8601
  MachineInfo machine;
  std::string build, commit;  // of the mmlab that measured
  bool instrumented = false;  // a debug or sanitizer build measured (the host's costs are its own either way)
  uint64_t region_bytes = 0;  // fault and CoW region
  int runs = 0;
  double loadavg = 0;               // 1-minute load average when calibration began
  long involuntary_switches = 0;    // during calibration: how much others ran on our CPU
  double seconds = 0;               // measuring, not counting the wait for the host lock
  std::vector<FaultCost> faults;  // by folio size, 4K first
  std::vector<PinCost> pins;
  std::vector<std::string> notes;  // what could not be measured, and why
  std::vector<TermCost> terms;     // format 2: the cost model's terms (empty in a format 1 profile)
  FitSummary fit;
  // Not stored: the header fields that differ from the machine using the
  // profile, when it was taken with --force (report.h, load_profile_option).
  std::vector<std::string> forced;

  const TermCost* term(const std::string& id) const;

  // The entry for a folio size, or nullptr when the profile lacks it.
  const FaultCost* fault_cost(uint64_t folio_bytes) const;
  const PinCost* pin_cost(uint64_t folio_bytes) const;
  bool operator==(const CostProfile&) const = default;
};

struct CalibrateOptions {
  std::string name;
  uint64_t region_bytes = 256ull << 20;  // fault and CoW region, rounded up to 2 MiB (the pinned buffer is always 256 MiB)
  int runs = 5;
  std::function<void(const std::string&)> progress;  // "CoW 64K (2/5)"; may be empty
};

// Whether this machine can be calibrated (root, /sys/kernel/mm writable:
// the host backend's conditions); otherwise false with the reason.
bool host_calibration_available(std::string* why);

// Measures the running kernel, holding the host backend's machine-wide lock
// (it waits for another host run to end). Every sysfs setting it changes is
// put back before it returns, or when the process is interrupted.
// 0, or -errno with *err (-EPERM: not available, see above).
int calibrate_host(const CalibrateOptions& o, CostProfile* out, std::string* err);

// "4K", "64K", "2M" for a folio size in bytes.
std::string folio_size_label(uint64_t bytes);

// The profile as a Markdown table (what `mmlab calibrate` prints).
std::string cost_profile_table(const CostProfile& p);

// The header fields that differ between the profile's machine and this one
// ("arch: x86_64 here, aarch64 in the profile"); empty when it applies.
std::vector<std::string> cost_header_differences(const MachineInfo& profile, const MachineInfo& here);
// This machine, as a profile header records it.
MachineInfo describe_this_machine();

// JSON (format "mmlab-cost-profile", version 3; version 1 files still load,
// without terms, and version 2 ones without each case's runs). load(save(p)) == p.
std::string cost_profile_to_json(const CostProfile& p);
int cost_profile_from_json(const std::string& text, CostProfile* out, std::string* err);
int save_cost_profile(const std::string& path, const CostProfile& p, std::string* err);
int load_cost_profile(const std::string& path, CostProfile* out, std::string* err);

}  // namespace mmlab::host
