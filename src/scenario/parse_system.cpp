// Statements on the System rather than a process: `sysfs`, `tune`,
// `file`, `swap`, `khugepaged`, `advance`, `inject` and `counters`, and the
// condition of a `when` prefix (a tune key and its values).
#include <algorithm>
#include <cctype>

#include "mmlab/system.h"
#include "scenario/parse_internal.h"

namespace mmlab::parser {
namespace {

// The form of a value a writable sysfs file takes: a word of a fixed set
// (the kernel's stores compare with sysfs_streq and refuse anything else:
// another word is a mistake in the scenario, a parse error) or a number
// (kstrtoul: a number the store then rejects, such as use_zero_page 2, is
// EINVAL at run time, which `expect-error EINVAL sysfs ...` can assert).
const char* const* sysfs_words(const std::string& path) {
  static const char* const kEnabled[] = {"always", "madvise", "never", nullptr};
  static const char* const kSizeEnabled[] = {"always", "inherit", "madvise", "never", nullptr};
  static const char* const kDefrag[] = {"always", "defer", "defer+madvise", "madvise", "never", nullptr};
  static const char* const kShmem[] = {"always", "within_size", "advise", "never", "deny", "force", nullptr};
  static const char* const kSizeShmem[] = {"always", "inherit", "within_size", "advise", "never", nullptr};
  if (path == "transparent_hugepage/enabled") return kEnabled;
  if (path == "transparent_hugepage/shmem_enabled") return kShmem;
  if (path.rfind("transparent_hugepage/hugepages-", 0) == 0 && path.size() > 14 &&
      path.compare(path.size() - 14, 14, "/shmem_enabled") == 0)
    return kSizeShmem;
  if (path == "transparent_hugepage/defrag") return kDefrag;
  if (path.rfind("transparent_hugepage/hugepages-", 0) == 0 && path.size() > 8 &&
      path.compare(path.size() - 8, 8, "/enabled") == 0)
    return kSizeEnabled;
  return nullptr;
}
bool sysfs_value_is_word(const char* const* words, const std::string& v) {
  for (; *words; words++)
    if (v == *words) return true;
  return false;
}
std::string join_words(const char* const* words) {
  std::string out;
  for (; *words; words++) out += (out.empty() ? "" : ", ") + std::string(*words);
  return out;
}
bool sysfs_takes_number(const std::string& path) {
  auto ends_with = [&](const char* tail) {
    const size_t n = std::char_traits<char>::length(tail);
    return path.size() > n && path.compare(path.size() - n, n, tail) == 0;
  };
  return path == "transparent_hugepage/use_zero_page" || path == "transparent_hugepage/shrink_underused" ||
         (path.rfind("hugepages/", 0) == 0 && (ends_with("/nr_hugepages") || ends_with("/nr_overcommit_hugepages")));
}

}  // namespace

StmtBody parse_sysfs(LineParser& lp, const std::string&) {
  stmt::Sysfs w;
  w.path = lp.word("a sysfs PATH");
  if (!sysfs_path_known(w.path)) lp.back(), lp.fail("a sysfs PATH the model has, not '" + w.path + "'");
  w.value = lp.word("a VALUE");
  if (!sysfs_value_well_formed(w.path, w.value)) lp.back(), lp.fail("a number for " + w.path + ", not '" + w.value + "'");
  if (const char* const* words = sysfs_words(w.path); words && !sysfs_value_is_word(words, w.value))
    lp.back(), lp.fail("a VALUE for " + w.path + " (" + join_words(words) + "), not '" + w.value + "'");
  if (sysfs_takes_number(w.path) &&
      !std::all_of(w.value.begin(), w.value.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    lp.back(), lp.fail("a number for " + w.path + ", not '" + w.value + "'");
  return w;
}

// `tune KEY VALUE`: a key and value this build has, else an error naming
// what it has (a value at the value, an unknown key at the key).
StmtBody parse_tune(LineParser& lp, const std::string&) {
  stmt::Tune t;
  const std::string all = "a tune KEY and VALUE this build has (" + tune_choices_text() + ")";
  t.key = lp.word("a tune KEY");
  const std::string values = tune_values_text(t.key);
  if (values.empty()) lp.back(), lp.fail(all);
  if (lp.done()) lp.fail("a VALUE for " + t.key + " (" + values + ")");
  if (!tune_value_known(t.key, lp.peek()->s)) lp.fail("a VALUE for " + t.key + " (" + values + "), not '" + lp.peek()->s + "'");
  t.value = lp.word("a VALUE");
  return t;
}

// file F SIZE [fs=CLASS] [hugetlb=2M|1G] [huge=always|within_size|advise|never] [noswap] [ro] [uncached]
StmtBody parse_file(LineParser& lp, const std::string&) {
  stmt::File f;
  f.name = lp.name();
  if (const Token* t = lp.peek()) f.size_col = t->col;
  f.size = lp.size();
  while (!lp.done()) {
    std::string opt = lp.peek()->s;
    if (opt.rfind("fs=", 0) == 0) {
      FsClass c;
      if (!fs_class_from_name(opt.substr(3), &c)) lp.fail("fs=CLASS (shmem, hugetlbfs, ext4, xfs, btrfs)");
      f.fs = opt.substr(3);
    } else if (opt == "hugetlb=2M" || opt == "hugetlb=1G") {
      f.hugetlb_shift = opt == "hugetlb=2M" ? 21 : 30;
    } else if (opt == "huge=always" || opt == "huge=within_size" || opt == "huge=advise" || opt == "huge=never") {
      f.huge = opt.substr(5);
    } else if (opt == "noswap") {
      f.noswap = true;
    } else if (opt == "ro") {
      f.read_only = true;
    } else if (opt == "uncached") {
      f.uncached = true;
    } else {
      lp.fail("fs=CLASS, hugetlb=2M|1G, huge=always|within_size|advise|never, noswap, ro or uncached");
    }
    lp.word("");
  }
  // huge= and noswap are tmpfs mount options: a shmem file only.
  if (!f.huge.empty() && (f.fs != "shmem" || f.hugetlb_shift)) lp.fail("huge= only for a shmem file (a file on tmpfs)");
  if (f.noswap && (f.fs != "shmem" || f.hugetlb_shift)) lp.fail("noswap only for a shmem file (a file on tmpfs)");
  // A memfd cannot be opened again read-only by name; hugetlbfs needs no case.
  if (f.read_only && (f.fs == "shmem" || f.fs == "hugetlbfs" || f.hugetlb_shift))
    lp.fail("ro only for a file of fs=ext4, xfs or btrfs");
  if (f.uncached && (f.fs == "shmem" || f.fs == "hugetlbfs" || f.hugetlb_shift))
    lp.fail("uncached only for a file of fs=ext4, xfs or btrfs");
  // A tmpfs mounted without huge= has huge=never.
  if (f.noswap && f.huge.empty()) f.huge = "never";
  return f;
}

namespace {

// A file offset or length: any byte count that fits in off_t.
uint64_t file_offset(LineParser& lp, const char* what) {
  const Token* t = lp.peek();
  const uint64_t v = lp.number(what);
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    lp.back();
    lp.fail(std::string(what) + " below 2^63 (a file offset, off_t), not '" + t->s + "'");
  }
  return v;
}

}  // namespace

// truncate F SIZE
StmtBody parse_truncate(LineParser& lp, const std::string&) {
  stmt::Truncate t;
  t.file = lp.name();
  t.size = file_offset(lp, "a SIZE");
  lp.end();
  return t;
}

// punch-hole F OFFSET SIZE
StmtBody parse_punch_hole(LineParser& lp, const std::string&) {
  stmt::PunchHole p;
  p.file = lp.name();
  p.offset = file_offset(lp, "an OFFSET");
  p.len = file_offset(lp, "a SIZE");
  lp.end();
  return p;
}

// shmget S SIZE [hugetlb]
StmtBody parse_shmget(LineParser& lp, const std::string&) {
  stmt::Shmget g;
  g.seg = lp.name();
  if (const Token* t = lp.peek()) g.size_col = t->col;
  g.size = lp.size();
  if (!lp.done()) {
    lp.keyword("hugetlb");
    g.hugetlb = true;
  }
  lp.end();
  return g;
}

// shmctl S lock|unlock|rmid
StmtBody parse_shmctl(LineParser& lp, const std::string&) {
  stmt::Shmctl c;
  c.seg = lp.name();
  c.cmd_name = lp.word("lock, unlock or rmid");
  if (c.cmd_name == "lock") c.cmd = 11;
  else if (c.cmd_name == "unlock") c.cmd = 12;
  else if (c.cmd_name == "rmid") c.cmd = 0;
  else lp.fail_last("lock, unlock or rmid");
  lp.end();
  return c;
}

// swap SIZE [blkdev|file]
StmtBody parse_swap(LineParser& lp, const std::string&) {
  stmt::Swap sw;
  if (const Token* t = lp.peek()) sw.size_col = t->col;
  sw.size = lp.size();
  // The kind decides whether large folios swap out whole (a block device
  // and zram do; a swap file never does) and whether writes are
  // asynchronous (not zram's).
  if (!lp.done()) {
    sw.kind = lp.word("blkdev, file or zram");
    if (sw.kind != "blkdev" && sw.kind != "file" && sw.kind != "zram") lp.back(), lp.fail("blkdev, file or zram");
  }
  return sw;
}

StmtBody parse_writeback(LineParser&, const std::string&) { return stmt::Writeback{}; }

StmtBody parse_shrink_slab(LineParser&, const std::string&) { return stmt::ShrinkSlab{}; }

// Each full scan walks every registered mm, PMD by PMD: a count beyond any
// scenario's need would only make the run take hours.
constexpr uint64_t kMaxFullScans = 1000;
StmtBody parse_khugepaged(LineParser& lp, const std::string&) {
  if (lp.done()) return stmt::Khugepaged{1};
  const uint64_t n = lp.number("a count N of full scans (1.." + std::to_string(kMaxFullScans) + ")");
  if (n == 0 || n > kMaxFullScans) lp.fail_last("a count N of full scans (1.." + std::to_string(kMaxFullScans) + ")");
  return stmt::Khugepaged{n};
}

// The wakes an advance runs grow with its length (one per
// scan_sleep_millisecs): a day of them is more than any scenario needs.
constexpr uint64_t kMaxAdvanceNs = 86400ull * 1000000000;
StmtBody parse_advance(LineParser& lp, const std::string&) {
  const uint64_t ns = lp.duration();
  if (ns > kMaxAdvanceNs) lp.fail_last("a DURATION up to a day (86400s)");
  return stmt::Advance{ns};
}

// inject SITE [order N] (times N|every N|probability P) [after N]; inject SITE off
StmtBody parse_inject(LineParser& lp, const std::string&) {
  stmt::Inject in;
  const std::vector<std::string> sites = System::inject_sites();
  std::string names;
  for (const std::string& n : sites) names += (names.empty() ? "" : ", ") + n;
  in.site = lp.word("a SITE (" + names + ")");
  if (std::find(sites.begin(), sites.end(), in.site) == sites.end()) lp.back(), lp.fail("a SITE (" + names + ")");
  if (lp.accept("off")) return in;
  if (lp.accept("order")) {
    const uint64_t order = lp.number("an ORDER (0..18)");
    if (order > 18) lp.back(), lp.fail("an ORDER (0..18)");
    in.spec.order = static_cast<int>(order);
  }
  const std::string mode = lp.word("times N, every N or probability P");
  if (mode == "times" || mode == "every") {
    in.spec.mode = mode == "times" ? InjectSpec::Mode::kTimes : InjectSpec::Mode::kEvery;
    in.spec.n = lp.number("a count N (1 or more)");
    if (in.spec.n == 0) lp.back(), lp.fail("a count N (1 or more)");
  } else if (mode == "probability") {
    in.spec.mode = InjectSpec::Mode::kProbability;
    const std::string p = lp.word("a probability P (0..1, or 0%..100%)");
    if (!parse_probability(p, &in.spec.probability)) lp.back(), lp.fail("a probability P (0..1, or 0%..100%), not '" + p + "'");
  } else {
    lp.back(), lp.fail("times N, every N or probability P");
  }
  if (lp.accept("after")) in.spec.after = lp.number("a count N of calls that pass first");
  return in;
}

// counters reset, counters print [GLOB]
StmtBody parse_counters(LineParser& lp, const std::string&) {
  if (lp.accept("print")) return stmt::CountersPrint{lp.done() ? "" : lp.word("a GLOB")};
  if (lp.accept("reset")) return stmt::CountersReset{};
  lp.fail("'reset' or 'print'");
}

// `when KEY=V1[,V2...]`
WhenCond parse_when_condition(LineParser& lp) {
  WhenCond c;
  const std::string cond = lp.word("KEY=VALUE[,VALUE...] (a tune key and its values)");
  const auto eq = cond.find('=');
  c.key = cond.substr(0, eq == std::string::npos ? cond.size() : eq);
  const std::string values = tune_values_text(c.key);
  if (eq == std::string::npos || values.empty())
    lp.back(), lp.fail("KEY=VALUE[,VALUE...] naming a tune key this build has (" + tune_choices_text() + ")");
  for (size_t pos = eq + 1; pos <= cond.size();) {
    size_t comma = std::min(cond.find(',', pos), cond.size());
    c.values.push_back(cond.substr(pos, comma - pos));
    if (!tune_value_known(c.key, c.values.back()))
      lp.back(), lp.fail("values of " + c.key + " (" + values + "), not '" + c.values.back() + "'");
    pos = comma + 1;
  }
  return c;
}

}  // namespace mmlab::parser
