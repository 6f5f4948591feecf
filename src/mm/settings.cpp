// The sysfs paths and tune keys, parsed and printed as on a real system.
#include "mm/settings.h"
#include "mm/variants.h"

#include "mmlab/tune.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <span>
#include <string_view>
#include <type_traits>

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

// shmem_enabled's values, in ShmemHuge's order, and the order the kernel prints them.
const char* kShmemHugeNames[] = {"never", "always", "within_size", "advise", "deny", "force"};
const std::vector<std::string> kShmemHugeShown = {"always", "within_size", "advise", "never", "deny", "force"};
const char* kShmemOrderModeNames[] = {"never", "always", "inherit", "within_size", "advise"};
const std::vector<std::string> kShmemOrderModeShown = {"always", "inherit", "within_size", "advise", "never"};

// "hugepages-8kB" -> order 1: the shmem per-size directories start at order
// 1 (hugepages-8kB has shmem_enabled only); -1 otherwise.
int shmem_order_from_dir(std::string_view dir) {
  if (dir == "hugepages-8kB") return 1;
  return order_from_dir(dir);
}

// shmem_enabled_store: force is refused while some size other than the
// PMD one inherits (non-PMD mTHP may not override huge=), and only the
// four mount values reach the internal mount.
int shmem_enabled_write(Settings& s, const std::string& v) {
  ShmemHuge h;
  if (!parse_enum(kShmemHugeNames, v, &h)) return -EINVAL;
  if (h == ShmemHuge::kForce && s.huge_shmem_orders_inherit.load() != BIT(PMD_ORDER)) return -EINVAL;
  s.shmem_huge = h;
  if (h != ShmemHuge::kDeny && h != ShmemHuge::kForce) s.shm_mnt_huge = h;
  return 0;
}

// thpsize_shmem_enabled_store: inherit of a non-PMD size is refused while
// shmem_enabled is force.
int shmem_size_enabled_write(Settings& s, unsigned order, const std::string& v) {
  ShmemOrderMode m;
  if (!parse_enum(kShmemOrderModeNames, v, &m)) return -EINVAL;
  if (m == ShmemOrderMode::kInherit && order != PMD_ORDER && s.shmem_huge.load() == ShmemHuge::kForce) return -EINVAL;
  s.set_shmem_order_mode(order, m);
  return 0;
}

const char* kThpDefragNames[] = {"always", "defer", "defer+madvise", "madvise", "never"};
const char* kThpEnabledNames[] = {"always", "madvise", "never"};

// The `tune` keys. Each names its values (the lists of variants.h, or
// numbers, or off/on), stored as the value's index into the list: an enum
// value, a number, or a bool.
struct TuneValueDef {
  const char* name;
  const char* meaning;
};
#define MMLAB_VALUE_DEF(e, name, meaning) {name, meaning},
constexpr TuneValueDef kGupWalkValues[] = {MMLAB_GUP_WALK_VALUES(MMLAB_VALUE_DEF)};
constexpr TuneValueDef kGupFastValues[] = {MMLAB_GUP_FAST_VALUES(MMLAB_VALUE_DEF)};
constexpr TuneValueDef kCowPolicyValues[] = {MMLAB_COW_POLICY_VALUES(MMLAB_VALUE_DEF)};
constexpr TuneValueDef kCowReuseValues[] = {MMLAB_COW_REUSE_VALUES(MMLAB_VALUE_DEF)};
constexpr TuneValueDef kZeroPageValues[] = {MMLAB_ZERO_PAGE_VALUES(MMLAB_VALUE_DEF)};
#undef MMLAB_VALUE_DEF
constexpr TuneValueDef kCowMaxOrderValues[] = {{"0", ""}, {"1", ""}, {"2", ""}, {"3", ""}, {"4", ""},
                                               {"5", ""}, {"6", ""}, {"7", ""}, {"8", ""}};
static_assert(std::size(kCowMaxOrderValues) == kCowMaxOrderLimit + 1);
// In TlbGeometry's order; the capacities and their sources are in tlb/geometry.cpp.
constexpr TuneValueDef kTlbGeometryValues[] = {
    {"off", "no TLB model: user accesses pay one predicted branch, flushes are counted by kind"},
    {"x86-intel", "Intel Skylake's L1 dTLB and STLB, per-size capacities"},
    {"x86-amd", "AMD Zen 4's L1 and L2 dTLBs, with 4 x 4K PTE coalescing"},
    {"arm64", "Arm Neoverse N1's L1 and L2 TLBs, with contpte blocks of 16 x 4K"}};
static_assert(std::size(kTlbGeometryValues) == static_cast<size_t>(TlbGeometry::kArm64) + 1);
constexpr TuneValueDef kReadOnlyThpValues[] = {
    {"off", "a kernel built without CONFIG_READ_ONLY_THP_FOR_FS (this project's machines): only anonymous memory and shmem collapse"},
    {"on", "CONFIG_READ_ONLY_THP_FOR_FS=y: khugepaged and MADV_COLLAPSE also collapse the page cache of a regular file nobody has open for write"}};
constexpr TuneValueDef kReadAheadValues[] = {
    {"128", "the kernel's default (VM_READAHEAD_PAGES): a page-cache miss through a mapping reads 32 pages around it"},
    {"0", "read_ahead_kb 0 on the file's device, as khugepaged.c sets it: a miss reads only its own page"}};
constexpr TuneValueDef kKhugepagedMthpValues[] = {
    {"off", "v6.18: khugepaged and MADV_COLLAPSE collapse to the PMD order only"},
    {"on", "\"khugepaged: add mTHP collapse support\" v18: khugepaged also collapses to the enabled mTHP orders"}};

// A key's setting, written and read as the index of its value.
template <auto Member>
void store_index(Settings& s, size_t i) {
  using T = typename std::remove_reference_t<decltype(s.*Member)>::value_type;
  (s.*Member).store(static_cast<T>(i));
}
template <auto Member>
size_t show_index(const Settings& s) {
  return static_cast<size_t>((s.*Member).load());
}

// The revert switches: value 0 is `off`, 1 the registered value.
#define MMLAB_REVERT_VALUES(e, key, value, commit, subject, restores) \
  constexpr TuneValueDef kRevertValues_##e[] = {{"off", "the fix is in (v6.18)"},                \
                                                {value, "before " commit " \"" subject "\""}};
MMLAB_REVERTS(MMLAB_REVERT_VALUES)
#undef MMLAB_REVERT_VALUES
template <Revert R>
void store_revert(Settings& s, size_t i) {
  const uint32_t bit = 1u << static_cast<unsigned>(R);
  if (i) s.reverts.fetch_or(bit);
  else s.reverts.fetch_and(~bit);
}
template <Revert R>
size_t show_revert(const Settings& s) {
  return s.reverted(R) ? 1 : 0;
}

void store_tlb_geometry(Settings& s, size_t i) {
  const auto g = static_cast<TlbGeometry>(i);
  s.tlb_geometry.store(g);
  if (s.tlb) tlb_set_geometry(s.tlb, g);
}

struct TuneKeyDef {
  const char* key;
  const char* meaning;
  std::span<const TuneValueDef> values;
  void (*store)(Settings&, size_t);
  size_t (*show)(const Settings&);
  bool numeric;  // values are 0..N: messages say "0..N", and the store takes kstrtouint's forms ("+3", "3\n")
};

constexpr TuneKeyDef kTuneKeys[] = {
    {"gup.walk", "how __get_user_pages() walks the page tables (the follow_page_mask() chain)", kGupWalkValues,
     store_index<&Settings::gup_walk>, show_index<&Settings::gup_walk>, false},
    {"gup.fast", "GUP-fast's PTE loop", kGupFastValues, store_index<&Settings::gup_fast>, show_index<&Settings::gup_fast>,
     false},
    {"cow.policy", "the order of the folio a write-protect (CoW) fault copies into", kCowPolicyValues,
     store_index<&Settings::cow_policy>, show_index<&Settings::cow_policy>, false},
    {"cow.max_order", "the largest order cow.policy=fixed copies (a model-only sweep axis)", kCowMaxOrderValues,
     store_index<&Settings::cow_max_order>, show_index<&Settings::cow_max_order>, true},
    {"cow.reuse", "how much a reusing write fault makes writable", kCowReuseValues, store_index<&Settings::cow_reuse>,
     show_index<&Settings::cow_reuse>, false},
    {"mm.zero_page", "whether read faults may map the shared zero page (mm_forbids_zeropage)", kZeroPageValues,
     store_index<&Settings::zero_page>, show_index<&Settings::zero_page>, false},
    {"khugepaged.mthp", "the mTHP collapse series (docs/VARIANTS.md)", kKhugepagedMthpValues,
     store_index<&Settings::khugepaged_mthp>, show_index<&Settings::khugepaged_mthp>, false},
    {"mm.read_only_thp_for_fs", "CONFIG_READ_ONLY_THP_FOR_FS (file_thp_enabled)", kReadOnlyThpValues,
     store_index<&Settings::read_only_thp_for_fs>, show_index<&Settings::read_only_thp_for_fs>, false},
    {"mm.read_ahead_kb", "the file device's read_ahead_kb: the mmap read-around of a page-cache miss", kReadAheadValues,
     store_index<&Settings::read_ahead_off>, show_index<&Settings::read_ahead_off>, false},
    {"tlb.geometry", "the per-CPU TLB the model keeps (docs/TLB.md)", kTlbGeometryValues, store_tlb_geometry,
     show_index<&Settings::tlb_geometry>, false},
#define MMLAB_REVERT_KEY(e, key, value, commit, subject, restores) \
  {key, restores, kRevertValues_##e, store_revert<Revert::e>, show_revert<Revert::e>, false},
    MMLAB_REVERTS(MMLAB_REVERT_KEY)
#undef MMLAB_REVERT_KEY
};

const TuneKeyDef* find_tune_key(const std::string& key) {
  for (auto& k : kTuneKeys)
    if (key == k.key) return &k;
  return nullptr;
}

}  // namespace

Settings::Settings()
    : gup_walk(GupWalk::kLegacy),
      gup_fast(GupFast::kLegacy),
      cow_policy(CowPolicy::kBase),
      cow_reuse(CowReuse::kPage),
      zero_page(ZeroPage::kOn) {}

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

ShmemOrderMode Settings::shmem_order_mode(unsigned order) const {
  uint64_t b = BIT(order);
  if (huge_shmem_orders_always.load() & b) return ShmemOrderMode::kAlways;
  if (huge_shmem_orders_inherit.load() & b) return ShmemOrderMode::kInherit;
  if (huge_shmem_orders_within_size.load() & b) return ShmemOrderMode::kWithinSize;
  if (huge_shmem_orders_madvise.load() & b) return ShmemOrderMode::kAdvise;
  return ShmemOrderMode::kNever;
}

void Settings::set_shmem_order_mode(unsigned order, ShmemOrderMode m) {
  uint64_t b = BIT(order);
  for (auto* bits : {&huge_shmem_orders_always, &huge_shmem_orders_inherit, &huge_shmem_orders_within_size,
                     &huge_shmem_orders_madvise})
    bits->fetch_and(~b);
  if (m == ShmemOrderMode::kAlways) huge_shmem_orders_always.fetch_or(b);
  if (m == ShmemOrderMode::kInherit) huge_shmem_orders_inherit.fetch_or(b);
  if (m == ShmemOrderMode::kWithinSize) huge_shmem_orders_within_size.fetch_or(b);
  if (m == ShmemOrderMode::kAdvise) huge_shmem_orders_madvise.fetch_or(b);
}

const RevertInfo& revert_info(Revert r) {
#define MMLAB_REVERT_INFO(e, key, value, commit, subject, restores) {key, value, commit, subject, restores},
  static constexpr RevertInfo kInfo[] = {MMLAB_REVERTS(MMLAB_REVERT_INFO)};
#undef MMLAB_REVERT_INFO
  static_assert(std::size(kInfo) == static_cast<size_t>(Revert::kCount));
  return kInfo[static_cast<size_t>(r)];
}

const char* gup_walk_name(GupWalk w) { return kGupWalkValues[static_cast<int>(w)].name; }
const char* gup_fast_name(GupFast f) { return kGupFastValues[static_cast<int>(f)].name; }
const char* cow_policy_name(CowPolicy p) { return kCowPolicyValues[static_cast<int>(p)].name; }

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
    if (rest == "use_zero_page" || rest == "shrink_underused") {
      long n;
      if (!parse_long(v, &n) || (n != 0 && n != 1)) return -EINVAL;
      (rest == "use_zero_page" ? s.use_zero_page : s.shrink_underused) = n;
      return 0;
    }
    if (rest.rfind("khugepaged/", 0) == 0) return khugepaged_knob_write(s, rest.substr(11), value);
    if (rest == "shmem_enabled") return shmem_enabled_write(s, v);
    auto slash = rest.find('/');
    if (slash != std::string::npos && rest.substr(slash + 1) == "shmem_enabled") {
      int order = shmem_order_from_dir(rest.substr(0, slash));
      if (order < 0) return -ENOENT;
      return shmem_size_enabled_write(s, static_cast<unsigned>(order), v);
    }
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
    if (rest == "shrink_underused") { *out = s.shrink_underused ? "1" : "0"; return 0; }
    if (rest == "defrag") {
      *out = bracketed({std::begin(kThpDefragNames), std::end(kThpDefragNames)},
                       kThpDefragNames[static_cast<int>(s.thp_defrag.load())]);
      return 0;
    }
    if (rest == "hpage_pmd_size") { *out = std::to_string(PMD_SIZE); return 0; }
    if (rest == "shmem_enabled") {
      *out = bracketed(kShmemHugeShown, kShmemHugeNames[static_cast<int>(s.shmem_huge.load())]);
      return 0;
    }
    if (rest == "khugepaged/max_ptes_none") { *out = std::to_string(s.max_ptes_none); return 0; }
    if (rest == "khugepaged/max_ptes_swap") { *out = std::to_string(s.max_ptes_swap); return 0; }
    if (rest == "khugepaged/max_ptes_shared") { *out = std::to_string(s.max_ptes_shared); return 0; }
    if (rest == "khugepaged/pages_to_scan") { *out = std::to_string(s.pages_to_scan); return 0; }
    if (rest == "khugepaged/scan_sleep_millisecs") { *out = std::to_string(s.scan_sleep_millisecs); return 0; }
    if (rest == "khugepaged/alloc_sleep_millisecs") { *out = std::to_string(s.alloc_sleep_millisecs); return 0; }
    if (rest == "khugepaged/defrag") { *out = s.khugepaged_defrag ? "1" : "0"; return 0; }
    auto slash = rest.find('/');
    if (slash != std::string::npos && rest.substr(slash + 1) == "shmem_enabled") {
      int order = shmem_order_from_dir(rest.substr(0, slash));
      if (order < 0) return -ENOENT;
      *out = bracketed(kShmemOrderModeShown,
                       kShmemOrderModeNames[static_cast<int>(s.shmem_order_mode(static_cast<unsigned>(order)))]);
      return 0;
    }
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
  const TuneKeyDef* k = find_tune_key(key);
  if (!k) return -ENOENT;
  if (k->numeric) {
    uint64_t n;
    if (kstrtoul(value, k->values.size() - 1, &n) || n >= k->values.size()) return -EINVAL;
    k->store(s, n);
    return 0;
  }
  for (size_t i = 0; i < k->values.size(); i++)
    if (value == k->values[i].name) {
      k->store(s, i);
      return 0;
    }
  return -EINVAL;
}

int tune_read(const Settings& s, const std::string& key, std::string* out) {
  const TuneKeyDef* k = find_tune_key(key);
  if (!k) return -ENOENT;
  *out = k->values[k->show(s)].name;
  return 0;
}

std::vector<std::string> tune_keys() {
  std::vector<std::string> v;
  for (auto& k : kTuneKeys) v.push_back(k.key);
  return v;
}

std::vector<std::string> tune_values(const std::string& key) {
  std::vector<std::string> v;
  if (const TuneKeyDef* k = find_tune_key(key))
    for (auto& val : k->values) v.push_back(val.name);
  return v;
}

std::vector<TuneKeyInfo> tune_catalogue() {
  static const Settings defaults;
  std::vector<TuneKeyInfo> out;
  for (auto& k : kTuneKeys) {
    TuneKeyInfo info{k.key, k.meaning, k.values[k.show(defaults)].name, {}};
    for (auto& v : k.values) info.values.push_back({v.name, v.meaning});
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::string> settings_paths() {
  std::vector<std::string> v = {"transparent_hugepage/enabled", "transparent_hugepage/defrag",
                                "transparent_hugepage/use_zero_page",
                                "transparent_hugepage/shmem_enabled",
                                "transparent_hugepage/shrink_underused",
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
  for (unsigned o = 1; o <= PMD_ORDER; o++)
    v.push_back("transparent_hugepage/hugepages-" + std::to_string((PAGE_SIZE << o) / 1024) + "kB/shmem_enabled");
  return v;
}

std::string tune_values_text(const std::string& key) {
  std::vector<std::string> vals = tune_values(key);
  if (vals.empty()) return "";
  if (find_tune_key(key)->numeric) return vals.front() + ".." + vals.back();
  std::string list;
  for (auto& v : vals) list += (list.empty() ? "" : "|") + v;
  return list;
}

std::string tune_default(const std::string& key) {
  static const Settings defaults;
  std::string v;
  (void)tune_read(defaults, key, &v);  // an unknown key's default reads as ""
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
