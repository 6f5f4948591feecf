// The sysfs paths and tune keys, parsed and printed as on a real system.
#include "mm/settings.h"

#include "mmlab/tune.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace mmlab {
namespace {

constexpr const char* kThpPrefix = "transparent_hugepage/";

// kstrtoul/kstrtouint(s, 10, ...): an optional '+', decimal digits, and at
// most one trailing newline; -EINVAL otherwise, -ERANGE beyond `max`.
int kstrtoul(const std::string& s, uint64_t max, uint64_t* out) {
  size_t i = s.size() && s[0] == '+' ? 1 : 0;
  size_t end = s.size();
  if (end > i && s[end - 1] == '\n') end--;
  if (i == end) return -EINVAL;
  uint64_t v = 0;
  for (size_t k = i; k < end; k++) {
    if (s[k] < '0' || s[k] > '9') return -EINVAL;
    unsigned d = static_cast<unsigned>(s[k] - '0');
    if (v > (max - d) / 10) return -ERANGE;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

constexpr uint64_t kUintMax = 0xffffffffull;

// The stores of transparent_hugepage/khugepaged/ (mm/khugepaged.c): every
// rejected value is -EINVAL, as the kernel's stores return it.
int khugepaged_knob_write(Settings& s, const std::string& knob, const std::string& raw) {
  uint64_t n;
  if (knob == "max_ptes_none" || knob == "max_ptes_swap" || knob == "max_ptes_shared") {
    if (kstrtoul(raw, ~0ull, &n) || n > HPAGE_PMD_NR - 1) return -EINVAL;
    (knob == "max_ptes_none" ? s.max_ptes_none : knob == "max_ptes_swap" ? s.max_ptes_swap : s.max_ptes_shared) =
        static_cast<int>(n);
    return 0;
  }
  if (knob == "pages_to_scan") {
    if (kstrtoul(raw, kUintMax, &n) || n == 0) return -EINVAL;
    s.pages_to_scan = static_cast<int>(std::min<uint64_t>(n, 0x7fffffff));
    return 0;
  }
  if (knob == "scan_sleep_millisecs" || knob == "alloc_sleep_millisecs") {
    if (kstrtoul(raw, kUintMax, &n)) return -EINVAL;
    (knob == "scan_sleep_millisecs" ? s.scan_sleep_millisecs : s.alloc_sleep_millisecs) = static_cast<unsigned>(n);
    return 0;
  }
  if (knob == "defrag") {  // single_hugepage_flag_store
    int err = kstrtoul(raw, ~0ull, &n);
    if (err) return err;
    if (n > 1) return -EINVAL;
    s.khugepaged_defrag = n == 1;
    return 0;
  }
  return -ENOENT;
}

bool parse_long(const std::string& s, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 0);
  if (*end != '\0' && !(*end == '\n' && end[1] == '\0')) return false;
  *out = v;
  return true;
}

// "hugepages-64kB" -> order 4; -1 if not an anon THP size.
int order_from_dir(std::string_view dir) {
  if (dir.substr(0, 10) != "hugepages-" || dir.size() < 13 || dir.substr(dir.size() - 2) != "kB") return -1;
  long kb = std::strtol(std::string(dir.substr(10, dir.size() - 12)).c_str(), nullptr, 10);
  for (unsigned o = 2; o <= PMD_ORDER; o++)
    if (kb == static_cast<long>((PAGE_SIZE << o) / 1024)) return static_cast<int>(o);
  return -1;
}

const char* kOrderModeNames[] = {"never", "always", "inherit", "madvise"};

// The kernel prints every choice with the current one in brackets.
std::string bracketed(const std::vector<std::string>& choices, const std::string& cur) {
  std::string s;
  for (auto& c : choices) {
    if (!s.empty()) s += ' ';
    s += c == cur ? "[" + c + "]" : c;
  }
  return s;
}

template <typename E, size_t N>
bool parse_enum(const char* const (&names)[N], const std::string& v, E* out) {
  for (size_t i = 0; i < N; i++)
    if (v == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  return false;
}

const char* kGupWalkNames[] = {"v6.5", "legacy", "walk", "batch", "batch-ro"};
const char* kGupFastNames[] = {"legacy", "batch"};
const char* kCowPolicyNames[] = {"base", "rfc", "fixed"};
const char* kCowReuseNames[] = {"page", "whole"};
const char* kThpDefragNames[] = {"always", "defer", "defer+madvise", "madvise", "never"};
const char* kThpEnabledNames[] = {"always", "madvise", "never"};
const char* kOffOnNames[] = {"off", "on"};

}  // namespace

Settings::Settings() = default;

ThpOrderMode Settings::order_mode(unsigned order) const {
  uint64_t b = BIT(order);
  if (huge_anon_orders_always.load() & b) return ThpOrderMode::kAlways;
  if (huge_anon_orders_inherit.load() & b) return ThpOrderMode::kInherit;
  if (huge_anon_orders_madvise.load() & b) return ThpOrderMode::kMadvise;
  return ThpOrderMode::kNever;
}

void Settings::set_order_mode(unsigned order, ThpOrderMode m) {
  uint64_t b = BIT(order);
  huge_anon_orders_always.fetch_and(~b);
  huge_anon_orders_inherit.fetch_and(~b);
  huge_anon_orders_madvise.fetch_and(~b);
  if (m == ThpOrderMode::kAlways) huge_anon_orders_always.fetch_or(b);
  if (m == ThpOrderMode::kInherit) huge_anon_orders_inherit.fetch_or(b);
  if (m == ThpOrderMode::kMadvise) huge_anon_orders_madvise.fetch_or(b);
}

const char* gup_walk_name(GupWalk w) { return kGupWalkNames[static_cast<int>(w)]; }
const char* gup_fast_name(GupFast f) { return kGupFastNames[static_cast<int>(f)]; }
const char* cow_policy_name(CowPolicy p) { return kCowPolicyNames[static_cast<int>(p)]; }

int settings_write(Settings& s, const std::string& path, const std::string& value) {
  std::string v = value;
  if (!v.empty() && v.back() == '\n') v.pop_back();
  if (path.rfind(kThpPrefix, 0) == 0) {
    std::string rest = path.substr(std::string_view(kThpPrefix).size());
    if (rest == "enabled") {
      ThpEnabled e;
      if (!parse_enum(kThpEnabledNames, v, &e)) return -EINVAL;
      s.thp_enabled = e;
      return 0;
    }
    if (rest == "defrag") {
      ThpDefrag d;
      if (!parse_enum(kThpDefragNames, v, &d)) return -EINVAL;
      s.thp_defrag = d;
      return 0;
    }
    if (rest == "use_zero_page") {
      long n;
      if (!parse_long(v, &n) || (n != 0 && n != 1)) return -EINVAL;
      s.use_zero_page = n;
      return 0;
    }
    if (rest.rfind("khugepaged/", 0) == 0) return khugepaged_knob_write(s, rest.substr(11), value);
    auto slash = rest.find('/');
    if (slash != std::string::npos && rest.substr(slash + 1) == "enabled") {
      int order = order_from_dir(rest.substr(0, slash));
      if (order < 0) return -ENOENT;
      ThpOrderMode m;
      if (!parse_enum(kOrderModeNames, v, &m)) return -EINVAL;
      s.set_order_mode(static_cast<unsigned>(order), m);
      return 0;
    }
    return -ENOENT;
  }
  if (path == "hugepages/hugepages-2048kB/nr_hugepages" || path == "hugepages/hugepages-1048576kB/nr_hugepages") {
    long n;
    if (!parse_long(v, &n) || n < 0) return -EINVAL;
    (path.find("2048kB") != std::string::npos ? s.nr_hugepages_2m : s.nr_hugepages_1g) = n;
    return 0;
  }
  return -ENOENT;
}

int settings_read(const Settings& s, const std::string& path, std::string* out) {
  if (path.rfind(kThpPrefix, 0) == 0) {
    std::string rest = path.substr(std::string_view(kThpPrefix).size());
    if (rest == "enabled") {
      *out = bracketed({"always", "madvise", "never"}, kThpEnabledNames[static_cast<int>(s.thp_enabled.load())]);
      return 0;
    }
    if (rest == "use_zero_page") { *out = s.use_zero_page ? "1" : "0"; return 0; }
    if (rest == "defrag") {
      *out = bracketed({std::begin(kThpDefragNames), std::end(kThpDefragNames)},
                       kThpDefragNames[static_cast<int>(s.thp_defrag.load())]);
      return 0;
    }
    if (rest == "hpage_pmd_size") { *out = std::to_string(PMD_SIZE); return 0; }
    if (rest == "khugepaged/max_ptes_none") { *out = std::to_string(s.max_ptes_none); return 0; }
    if (rest == "khugepaged/max_ptes_swap") { *out = std::to_string(s.max_ptes_swap); return 0; }
    if (rest == "khugepaged/max_ptes_shared") { *out = std::to_string(s.max_ptes_shared); return 0; }
    if (rest == "khugepaged/pages_to_scan") { *out = std::to_string(s.pages_to_scan); return 0; }
    if (rest == "khugepaged/scan_sleep_millisecs") { *out = std::to_string(s.scan_sleep_millisecs); return 0; }
    if (rest == "khugepaged/alloc_sleep_millisecs") { *out = std::to_string(s.alloc_sleep_millisecs); return 0; }
    if (rest == "khugepaged/defrag") { *out = s.khugepaged_defrag ? "1" : "0"; return 0; }
    auto slash = rest.find('/');
    if (slash != std::string::npos && rest.substr(slash + 1) == "enabled") {
      int order = order_from_dir(rest.substr(0, slash));
      if (order < 0) return -ENOENT;
      *out = bracketed({"always", "inherit", "madvise", "never"},
                       kOrderModeNames[static_cast<int>(s.order_mode(static_cast<unsigned>(order)))]);
      return 0;
    }
    return -ENOENT;
  }
  if (path == "hugepages/hugepages-2048kB/nr_hugepages") { *out = std::to_string(s.nr_hugepages_2m); return 0; }
  if (path == "hugepages/hugepages-1048576kB/nr_hugepages") { *out = std::to_string(s.nr_hugepages_1g); return 0; }
  return -ENOENT;
}

int tune_write(Settings& s, const std::string& key, const std::string& value) {
  if (key == "gup.walk") {
    GupWalk w;
    if (!parse_enum(kGupWalkNames, value, &w)) return -EINVAL;
    s.gup_walk = w;
    return 0;
  }
  if (key == "gup.fast") {
    GupFast f;
    if (!parse_enum(kGupFastNames, value, &f)) return -EINVAL;
    s.gup_fast = f;
    return 0;
  }
  if (key == "cow.policy") {
    CowPolicy p;
    if (!parse_enum(kCowPolicyNames, value, &p)) return -EINVAL;
    s.cow_policy = p;
    return 0;
  }
  if (key == "cow.max_order") {
    uint64_t n;
    if (kstrtoul(value, kCowMaxOrderLimit, &n) || n > kCowMaxOrderLimit) return -EINVAL;
    s.cow_max_order = static_cast<unsigned>(n);
    return 0;
  }
  if (key == "cow.reuse") {
    CowReuse r;
    if (!parse_enum(kCowReuseNames, value, &r)) return -EINVAL;
    s.cow_reuse = r;
    return 0;
  }
  if (key == "khugepaged.mthp") {
    bool on;
    if (!parse_enum(kOffOnNames, value, &on)) return -EINVAL;
    s.khugepaged_mthp = on;
    return 0;
  }
  return -ENOENT;
}

int tune_read(const Settings& s, const std::string& key, std::string* out) {
  if (key == "gup.walk") { *out = gup_walk_name(s.gup_walk); return 0; }
  if (key == "gup.fast") { *out = gup_fast_name(s.gup_fast); return 0; }
  if (key == "cow.policy") { *out = cow_policy_name(s.cow_policy); return 0; }
  if (key == "cow.max_order") { *out = std::to_string(s.cow_max_order.load()); return 0; }
  if (key == "cow.reuse") { *out = kCowReuseNames[static_cast<int>(s.cow_reuse.load())]; return 0; }
  if (key == "khugepaged.mthp") { *out = kOffOnNames[s.khugepaged_mthp ? 1 : 0]; return 0; }
  return -ENOENT;
}

std::vector<std::string> tune_keys() {
  return {"gup.walk", "gup.fast", "cow.policy", "cow.max_order", "cow.reuse", "khugepaged.mthp"};
}

std::vector<std::string> tune_values(const std::string& key) {
  if (key == "gup.walk") return {std::begin(kGupWalkNames), std::end(kGupWalkNames)};
  if (key == "gup.fast") return {std::begin(kGupFastNames), std::end(kGupFastNames)};
  if (key == "cow.policy") return {std::begin(kCowPolicyNames), std::end(kCowPolicyNames)};
  if (key == "cow.max_order") {
    std::vector<std::string> v;
    for (unsigned o = 0; o <= kCowMaxOrderLimit; o++) v.push_back(std::to_string(o));
    return v;
  }
  if (key == "cow.reuse") return {std::begin(kCowReuseNames), std::end(kCowReuseNames)};
  if (key == "khugepaged.mthp") return {std::begin(kOffOnNames), std::end(kOffOnNames)};
  return {};
}

std::vector<std::string> settings_paths() {
  std::vector<std::string> v = {"transparent_hugepage/enabled", "transparent_hugepage/defrag",
                                "transparent_hugepage/use_zero_page",
                                "transparent_hugepage/khugepaged/max_ptes_none",
                                "transparent_hugepage/khugepaged/max_ptes_swap",
                                "transparent_hugepage/khugepaged/max_ptes_shared",
                                "transparent_hugepage/khugepaged/pages_to_scan",
                                "transparent_hugepage/khugepaged/scan_sleep_millisecs",
                                "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
                                "transparent_hugepage/khugepaged/defrag",
                                "hugepages/hugepages-2048kB/nr_hugepages",
                                "hugepages/hugepages-1048576kB/nr_hugepages"};
  for (unsigned o = 2; o <= PMD_ORDER; o++)
    v.push_back("transparent_hugepage/hugepages-" + std::to_string((PAGE_SIZE << o) / 1024) + "kB/enabled");
  return v;
}

std::string tune_values_text(const std::string& key) {
  std::vector<std::string> vals = tune_values(key);
  if (vals.empty()) return "";
  if (key == "cow.max_order") return vals.front() + ".." + vals.back();
  std::string list;
  for (auto& v : vals) list += (list.empty() ? "" : "|") + v;
  return list;
}

std::string tune_default(const std::string& key) {
  static const Settings defaults;
  std::string v;
  tune_read(defaults, key, &v);
  return v;
}

std::string tune_choices_text() {
  std::string out;
  for (auto& k : tune_keys()) out += (out.empty() ? "" : ", ") + k + " " + tune_values_text(k);
  return out;
}

bool tune_value_known(const std::string& key, const std::string& value) {
  for (auto& v : tune_values(key))
    if (v == value) return true;
  return false;
}

bool sysfs_value_well_formed(const std::string& path, const std::string& value) {
  // The khugepaged knobs take numbers: a value that is no number is a
  // mistake in the scenario, not something to hand the kernel.
  if (path.rfind("transparent_hugepage/khugepaged/", 0) != 0) return true;
  size_t i = value.size() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
  if (i == value.size()) return false;
  for (; i < value.size(); i++)
    if (value[i] < '0' || value[i] > '9') return false;
  return true;
}

bool sysfs_path_known(const std::string& path) {
  for (auto& p : settings_paths())
    if (p == path) return true;
  // Read-only files and statistics: the per-size stats directories, pool counters.
  if (path.rfind("transparent_hugepage/hugepages-", 0) == 0 && path.find("kB/stats/") != std::string::npos) return true;
  if (path == "transparent_hugepage/hpage_pmd_size") return true;
  if (path == "transparent_hugepage/khugepaged/pages_collapsed" || path == "transparent_hugepage/khugepaged/full_scans")
    return true;
  for (const char* sz : {"hugepages/hugepages-2048kB/", "hugepages/hugepages-1048576kB/"})
    for (const char* f : {"nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages", "nr_overcommit_hugepages"})
      if (path == std::string(sz) + f) return true;
  return false;
}

}  // namespace mmlab
