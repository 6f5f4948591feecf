// Expectations and outcomes: `expect ...`, `check`, `skip REASON` and
// `xfail REASON`.
#include <cctype>

#include "mmlab/system.h"
#include "scenario/parse_internal.h"

namespace mmlab::parser {

StmtBody parse_expect(LineParser& lp, const std::string&) {
  std::string first = lp.word("an expectation");
  if (first == "sysfs") {
    stmt::ExpectSysfs e;
    e.path = lp.word("a sysfs PATH");
    if (!sysfs_path_known(e.path)) lp.back(), lp.fail("a sysfs PATH the model has, not '" + e.path + "'");
    e.value = lp.signed_count();
    return e;
  }
  if (first == "vmstat") {
    stmt::ExpectVmstat e;
    e.item = lp.word("a NAME");
    e.value = lp.signed_count();
    return e;
  }
  if (first == "counter") {
    stmt::ExpectCounter e;
    e.counter = lp.word("a NAME");
    e.value = lp.signed_count();
    return e;
  }
  if (first == "violation") {  // expect violation TEXT...
    stmt::ExpectViolation e;
    e.text = lp.rest();
    if (e.text.empty()) lp.fail("the TEXT a detected violation must contain");
    return e;
  }
  if (!LineParser::is_name(first)) lp.fail_last("an expectation (sysfs, vmstat, counter, violation, or a NAME)");
  const Token* t = lp.peek();
  if (!t) lp.fail("what to expect");
  if (t->s == "pages") {  // expect D pages N holes M
    lp.keyword("pages");
    stmt::ExpectDump e;
    e.dump = first;
    e.pages = lp.number();
    lp.keyword("holes");
    e.holes = lp.number();
    return e;
  }
  if (t->s == "rss") {
    lp.keyword("rss");
    stmt::ExpectRss e;
    e.proc = first;
    e.kind = lp.word("anon, file or shmem");
    if (e.kind != "anon" && e.kind != "file" && e.kind != "shmem") lp.fail_last("anon, file or shmem");
    e.size = lp.number("a SIZE");
    return e;
  }
  if (t->s == "locked") {  // expect P locked SIZE
    lp.keyword("locked");
    stmt::ExpectLocked e;
    e.proc = first;
    e.size = lp.number("a SIZE");
    return e;
  }
  if (t->s == "minflt" || t->s == "majflt") {  // expect P minflt|majflt N
    stmt::ExpectFaults e;
    e.proc = first;
    e.major = lp.word("minflt or majflt") == "majflt";
    e.count = lp.number("N");
    return e;
  }
  if (t->s == "smaps" || t->s == "status") {  // expect P smaps ADDR FIELD SIZE | expect P status FIELD SIZE
    stmt::ExpectProcField e;
    e.proc = first;
    e.smaps = lp.word("smaps or status") == "smaps";
    if (e.smaps) e.addr = lp.addr();
    e.field = lp.word(e.smaps ? "a smaps FIELD (e.g. AnonHugePages)" : "a status FIELD (e.g. VmPTE)");
    // Only a field the model shows: the host would compare with nothing.
    if (e.smaps && !smaps_field_known(e.field)) lp.fail_last("a smaps FIELD the model shows (Rss, Anonymous, LazyFree, AnonHugePages, Swap, ...)");
    if (!e.smaps && !status_field_known(e.field)) lp.fail_last("a status FIELD the model shows (VmRSS, RssAnon, RssFile, RssShmem, VmPTE, VmSwap, HugetlbPages)");
    e.size = lp.number("a SIZE");
    return e;
  }
  if (t->s[0] == '-' || std::isdigit(static_cast<unsigned char>(t->s[0]))) {  // expect H N | -ERRNO
    stmt::ExpectHandle e;
    e.handle = first;
    std::string v = lp.word("N or -ERRNO");
    if (v[0] == '-') {
      int err = errno_from_name(v.c_str() + 1);
      if (!err) lp.fail_last("a kernel errno name after '-' (e.g. -EFAULT)");
      e.ret = -err;
    } else {
      uint64_t n;
      lp.back();
      // A count GUP can return: no call pins more pages than the address
      // space has, and a larger N would wrap to a negative return, an errno.
      if (!lp.checked_number(v, &n) || n > kMaxGupPages)
        lp.fail("N (a page count up to " + std::to_string(kMaxGupPages) + ") or -ERRNO, not '" + v + "'");
      lp.word("N");
      e.ret = static_cast<int64_t>(n);
    }
    return e;
  }
  const AddrExpr addr = lp.addr();
  std::string what = lp.word("mapped, order, exclusive, pinned, zero, swapped, same, differ, same-frame or other-frame");
  if (what == "mapped") {
    stmt::ExpectMapped e{first, addr, lp.word("pte, pmd, pud or none")};
    if (e.level != "pte" && e.level != "pmd" && e.level != "pud" && e.level != "none") lp.fail_last("pte, pmd, pud or none");
    return e;
  }
  if (what == "order") {
    const uint64_t order = lp.number("an ORDER (0..18)");
    if (order > 18) lp.fail_last("an ORDER (0..18)");
    return stmt::ExpectOrder{first, addr, static_cast<int64_t>(order)};
  }
  static const std::pair<const char*, stmt::PageBit> kBits[] = {
      {"exclusive", stmt::PageBit::kExclusive}, {"pinned", stmt::PageBit::kPinned},
      {"zero", stmt::PageBit::kZero},           {"swapped", stmt::PageBit::kSwapped},
      {"soft-dirty", stmt::PageBit::kSoftDirty}, {"uffd-wp", stmt::PageBit::kUffdWp},
      {"guard", stmt::PageBit::kGuard}};
  for (auto& [name, bit] : kBits)
    if (what == name) return stmt::ExpectPageBit{first, addr, bit, lp.yes_no()};
  if (what == "same-frame" || what == "other-frame") return stmt::ExpectFrame{first, addr, what == "same-frame"};
  if (what == "same" || what == "differ") {
    stmt::ExpectSame e;
    e.proc = first;
    e.addr = addr;
    e.same = what == "same";
    e.other_proc = lp.name();
    e.other_addr = lp.addr();
    return e;
  }
  lp.fail_last("mapped, order, exclusive, pinned, zero, swapped, soft-dirty, uffd-wp, guard, same, differ, same-frame or other-frame");
}

StmtBody parse_check(LineParser&, const std::string&) { return stmt::Check{}; }

namespace {

// The reason is what the TAP line reports (`# SKIP REASON`, `# XFAIL REASON`).
std::string reason(LineParser& lp, const char* verb, const char* why) {
  std::string r = lp.rest();
  if (r.empty()) lp.fail(std::string("a REASON after '") + verb + "' (why the test is " + why + ")");
  return r;
}

}  // namespace

StmtBody parse_skip(LineParser& lp, const std::string&) { return stmt::Skip{reason(lp, "skip", "skipped")}; }

StmtBody parse_xfail(LineParser& lp, const std::string&) { return stmt::Xfail{reason(lp, "xfail", "expected to fail")}; }

}  // namespace mmlab::parser
