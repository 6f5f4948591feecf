// Parsing .mms files (scenario language v1). Every file is parsed whole
// before anything runs; the first error names file:line:column and what was
// expected there.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "mmlab/gup.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"
#include "scenario/ast.h"

namespace mmlab {
namespace {

struct Token {
  std::string s;
  int col;
};

struct ParseFail {
  std::string msg;
};

class LineParser {
 public:
  LineParser(const std::string& file, int line, std::vector<Token> toks) : file_(file), line_(line), t_(std::move(toks)) {}

  bool done() const { return i_ >= t_.size(); }
  void back() { i_--; }  // to report an error at the token just read
  const Token* peek() const { return done() ? nullptr : &t_[i_]; }
  [[noreturn]] void fail(const std::string& what) const {
    int col = done() ? (t_.empty() ? 1 : t_.back().col + static_cast<int>(t_.back().s.size()) + 1) : t_[i_].col;
    throw ParseFail{file_ + ":" + std::to_string(line_) + ":" + std::to_string(col) + ": expected " + what};
  }
  std::string word(const std::string& what) {
    if (done()) fail(what);
    return t_[i_++].s;
  }
  void keyword(const std::string& kw) {
    if (done() || t_[i_].s != kw) fail("'" + kw + "'");
    i_++;
  }
  bool accept(const std::string& kw) {
    if (!done() && t_[i_].s == kw) {
      i_++;
      return true;
    }
    return false;
  }
  std::string name() {
    if (done() || !is_name(t_[i_].s)) fail("a NAME (a letter, then letters, digits, '_' or '-')");
    return t_[i_++].s;
  }
  uint64_t number(const std::string& what = "a number (decimal or 0x hex, optional K/M/G suffix)") {
    if (done()) fail(what);
    uint64_t v;
    if (!checked_number(t_[i_].s, &v)) fail(what);
    i_++;
    return v;
  }
  uint64_t size() {
    if (done()) fail("a SIZE");
    uint64_t v;
    if (!checked_number(t_[i_].s, &v)) fail("a SIZE (a number with an optional K, M or G suffix), not '" + t_[i_].s + "'");
    if (v % 4096) fail("a SIZE that is a multiple of 4K");
    i_++;
    return v;
  }
  int byte() {
    if (done()) fail("a BYTE (0..255)");
    uint64_t v;
    if (!checked_number(t_[i_].s, &v) || v > 255) fail("a BYTE (0..255)");
    i_++;
    return static_cast<int>(v);
  }
  // parse_number() for a token at the current position (or inside it, as
  // `file=F+OFFSET`): a number too large for 64 bits is an error of its
  // own, since wrapping it would run a different scenario than written.
  bool checked_number(const std::string& s, uint64_t* out) const {
    bool overflow = false;
    if (parse_number(s, out, &overflow)) return true;
    if (overflow) fail("a number below 2^64, not '" + s + "'");
    return false;
  }
  // DURATION: a number and a unit (ns, us, ms, s); the result in ns.
  uint64_t duration() {
    const char* what = "a DURATION (a number and ns, us, ms or s, e.g. 10ms)";
    if (done()) fail(what);
    const std::string& s = t_[i_].s;
    size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) digits++;
    const std::string unit = s.substr(digits);
    uint64_t mult = unit == "ns" ? 1 : unit == "us" ? 1000 : unit == "ms" ? 1000000 : unit == "s" ? 1000000000 : 0;
    uint64_t v;
    if (!digits || !mult || !checked_number(s.substr(0, digits), &v) || v > ~0ull / mult) fail(what);
    i_++;
    return v * mult;
  }
  AddrExpr addr() {
    if (done()) fail("an ADDR (R or R+SIZE)");
    const std::string& s = t_[i_].s;
    auto plus = s.find('+');
    AddrExpr a;
    a.region = s.substr(0, plus);
    if (!is_name(a.region)) fail("an ADDR (R or R+SIZE)");
    if (plus != std::string::npos && !checked_number(s.substr(plus + 1), &a.offset)) fail("an ADDR (R or R+SIZE)");
    i_++;
    return a;
  }
  int prot() {
    static const std::pair<const char*, int> kProts[] = {
        {"none", PROT_NONE}, {"r", PROT_READ}, {"rw", PROT_READ | PROT_WRITE},
        {"rx", PROT_READ | PROT_EXEC}, {"rwx", PROT_READ | PROT_WRITE | PROT_EXEC}};
    if (!done())
      for (auto& [n, v] : kProts)
        if (t_[i_].s == n) {
          i_++;
          return v;
        }
    fail("a PROT (none, r, rw, rx, rwx)");
  }
  bool yes_no() {
    if (accept("yes")) return true;
    if (accept("no")) return false;
    fail("'yes' or 'no'");
  }
  std::string rest() {
    std::string r;
    while (!done()) r += (r.empty() ? "" : " ") + t_[i_++].s;
    return r;
  }
  void end() {
    if (!done()) fail("the end of the statement");
  }

  static bool is_name(const std::string& s) {
    if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
    for (char c : s)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
    return true;
  }
  // False if malformed, or (with *overflow set) too large for 64 bits.
  static bool parse_number(const std::string& s, uint64_t* out, bool* overflow = nullptr) {
    if (s.empty()) return false;
    std::string body = s;
    uint64_t mult = 1;
    char last = body.back();
    if (last == 'K' || last == 'M' || last == 'G') {
      mult = last == 'K' ? 1ull << 10 : last == 'M' ? 1ull << 20 : 1ull << 30;
      body.pop_back();
    }
    if (body.empty()) return false;
    int base = 10;
    size_t start = 0;
    if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
      base = 16;
      start = 2;
    }
    uint64_t v = 0;
    for (size_t k = start; k < body.size(); k++) {
      int d = std::isdigit(static_cast<unsigned char>(body[k])) ? body[k] - '0'
              : (base == 16 && std::isxdigit(static_cast<unsigned char>(body[k]))) ? std::tolower(body[k]) - 'a' + 10
                                                                                    : -1;
      if (d < 0) return false;
      if (__builtin_mul_overflow(v, static_cast<uint64_t>(base), &v) ||
          __builtin_add_overflow(v, static_cast<uint64_t>(d), &v)) {
        if (overflow) *overflow = true;
        return false;
      }
    }
    if (__builtin_mul_overflow(v, mult, out)) {
      if (overflow) *overflow = true;
      return false;
    }
    return true;
  }
  size_t pos() const { return i_; }

 private:
  std::string file_;
  int line_;
  std::vector<Token> t_;
  size_t i_ = 0;
};

std::vector<Token> tokenize(const std::string& line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '#') break;
    if (std::isspace(static_cast<unsigned char>(line[i]))) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j])) && line[j] != '#') j++;
    out.push_back({line.substr(i, j - i), static_cast<int>(i) + 1});
    i = j;
  }
  return out;
}

int advice_from(const std::string& s) {
  static const std::pair<const char*, int> kAdv[] = {
      {"hugepage", MADV_HUGEPAGE},         {"nohugepage", MADV_NOHUGEPAGE},       {"dontneed", MADV_DONTNEED},
      {"collapse", MADV_COLLAPSE},         {"populate_read", MADV_POPULATE_READ}, {"populate_write", MADV_POPULATE_WRITE},
      {"dontfork", MADV_DONTFORK},         {"dofork", MADV_DOFORK},               {"wipeonfork", MADV_WIPEONFORK},
      {"keeponfork", MADV_KEEPONFORK},     {"pageout", MADV_PAGEOUT},             {"cold", MADV_COLD},
      {"free", MADV_FREE}};
  for (auto& [n, v] : kAdv)
    if (s == n) return v;
  return -1;
}

void parse_gup_flags(LineParser& lp, Stmt* st) {
  const Token* tok = lp.peek();
  std::string flags = lp.word("FLAGS (a comma list: get or pin, [fast|fast-only|unlocked], write, force, longterm, nofault, split-pmd)");
  bool get = false, pin = false, fast = false, fast_only = false, unlocked = false;
  size_t pos = 0;
  while (pos <= flags.size()) {
    size_t c = flags.find(',', pos);
    if (c == std::string::npos) c = flags.size();
    std::string f = flags.substr(pos, c - pos);
    if (f == "get") get = true;
    else if (f == "pin") pin = true;
    else if (f == "fast") fast = true;
    else if (f == "fast-only") fast_only = true;
    else if (f == "unlocked") unlocked = true;
    else if (f == "write") st->gup_flags |= foll::WRITE;
    else if (f == "force") st->gup_flags |= foll::FORCE;
    else if (f == "longterm") st->gup_flags |= foll::LONGTERM;
    else if (f == "nofault") st->gup_flags |= foll::NOFAULT;
    else if (f == "split-pmd") st->gup_flags |= foll::SPLIT_PMD;
    else {
      (void)tok;
      lp.back();
      lp.fail("a GUP flag (get, pin, fast, fast-only, unlocked, write, force, longterm, nofault, split-pmd), not '" + f + "'");
    }
    pos = c + 1;
  }
  if (get == pin || fast + fast_only + unlocked > 1 || (pin && fast_only)) {
    lp.back();
    lp.fail(get == pin ? "FLAGS naming exactly one of 'get' and 'pin'" : "FLAGS naming one entry point");
  }
  GupEntry e = get ? (fast ? GupEntry::kGetUserPagesFast : fast_only ? GupEntry::kGetUserPagesFastOnly
                                                          : unlocked ? GupEntry::kGetUserPagesUnlocked
                                                                     : GupEntry::kGetUserPages)
                   : (fast ? GupEntry::kPinUserPagesFast : unlocked ? GupEntry::kPinUserPagesUnlocked : GupEntry::kPinUserPages);
  st->gup_entry = static_cast<int>(e);
}

// `depth`: the `when` and `expect-error` prefixes already read on this
// line. They nest by recursion, each level a copy of the statement and its
// line, so stack depth grows with the prefixes and memory with their square:
// past kMaxPrefixes it is a parse error.
constexpr int kMaxPrefixes = 16;
void parse_statement(LineParser& lp, Stmt* st, int depth = 0);

constexpr uint64_t kMaxGupPages = (1ull << 47) / 4096;

// `expect ...`
void parse_expect(LineParser& lp, Stmt* st) {
  std::string first = lp.word("an expectation");
  if (first == "sysfs" || first == "vmstat" || first == "counter") {
    st->op = first == "sysfs" ? Op::kExpectSysfs : first == "vmstat" ? Op::kExpectVmstat : Op::kExpectCounter;
    st->str = lp.word(first == "sysfs" ? "a sysfs PATH" : "a NAME");
    if (first == "sysfs" && !sysfs_path_known(st->str)) lp.back(), lp.fail("a sysfs PATH the model has, not '" + st->str + "'");
    st->value = static_cast<int64_t>(lp.number());
    return;
  }
  if (first == "violation") {  // expect violation TEXT...
    st->op = Op::kExpectViolation;
    st->str = lp.rest();
    if (st->str.empty()) lp.fail("the TEXT a detected violation must contain");
    return;
  }
  if (!LineParser::is_name(first)) lp.fail("a NAME");
  st->p = first;
  const Token* t = lp.peek();
  if (!t) lp.fail("what to expect");
  if (t->s == "pages") {  // expect D pages N holes M
    lp.keyword("pages");
    st->op = Op::kExpectDump;
    st->n = lp.number();
    lp.keyword("holes");
    st->size2 = lp.number();
    return;
  }
  if (t->s == "rss") {
    lp.keyword("rss");
    st->op = Op::kExpectRss;
    st->str = lp.word("anon, file or shmem");
    if (st->str != "anon" && st->str != "file" && st->str != "shmem") lp.fail("anon, file or shmem");
    st->size = lp.number("a SIZE");
    return;
  }
  if (t->s[0] == '-' || std::isdigit(static_cast<unsigned char>(t->s[0]))) {  // expect H N | -ERRNO
    st->op = Op::kExpectHandle;
    std::string v = lp.word("N or -ERRNO");
    if (v[0] == '-') {
      int e = errno_from_name(v.c_str() + 1);
      if (!e) lp.fail("a kernel errno name after '-' (e.g. -EFAULT)");
      st->value = -e;
    } else {
      uint64_t n;
      lp.back();
      if (!lp.checked_number(v, &n)) lp.fail("N or -ERRNO");
      lp.word("N");
      st->value = static_cast<int64_t>(n);
    }
    return;
  }
  st->addr = lp.addr();
  std::string what = lp.word("mapped, order, exclusive, pinned, zero, swapped, same or differ");
  if (what == "mapped") {
    st->op = Op::kExpectMapped;
    st->str = lp.word("pte, pmd, pud or none");
    if (st->str != "pte" && st->str != "pmd" && st->str != "pud" && st->str != "none") lp.fail("pte, pmd, pud or none");
  } else if (what == "order") {
    st->op = Op::kExpectOrder;
    st->value = static_cast<int64_t>(lp.number());
  } else if (what == "exclusive" || what == "pinned" || what == "zero" || what == "swapped" || what == "soft-dirty" ||
             what == "uffd-wp") {
    st->op = what == "exclusive" ? Op::kExpectExclusive : what == "pinned" ? Op::kExpectPinned
             : what == "zero" ? Op::kExpectZero : what == "swapped" ? Op::kExpectSwapped
             : what == "soft-dirty" ? Op::kExpectSoftDirty : Op::kExpectUffdWp;
    st->flag = lp.yes_no();
  } else if (what == "same" || what == "differ") {
    st->op = Op::kExpectSame;
    st->flag = what == "same";
    st->q = lp.name();
    st->addr2 = lp.addr();
  } else {
    lp.fail("mapped, order, exclusive, pinned, zero, swapped, soft-dirty, uffd-wp, same or differ");
  }
}

// Statements that start with a process or handle name.
void parse_named(LineParser& lp, Stmt* st, const std::string& who) {
  st->p = who;
  std::string verb = lp.word("a verb (fork, exit, mmap, munmap, mprotect, mremap, madvise, clear-soft-dirty, thp-disable, userfaultfd, uffd-wp, write, read, gup, dump)");
  const Token* nxt = lp.peek();
  bool numeric_next = nxt && std::isdigit(static_cast<unsigned char>(nxt->s[0]));
  if (verb == "fork") {
    st->op = Op::kFork;
    st->q = lp.name();
  } else if (verb == "exit") {
    st->op = Op::kExit;
  } else if (verb == "mmap") {
    st->op = Op::kMmap;
    st->name = lp.name();
    st->size = lp.size();
    st->prot = lp.prot();
    std::string vis = lp.word("private or shared");
    if (vis != "private" && vis != "shared") lp.fail("private or shared");
    st->flag = vis == "shared";
    while (!lp.done()) {
      std::string opt = lp.peek()->s;
      if (opt.rfind("file=", 0) == 0) {
        std::string ref = opt.substr(5);
        auto plus = ref.find('+');
        st->file_ref = ref.substr(0, plus);
        if (!LineParser::is_name(st->file_ref)) lp.fail("file=F[+OFFSET]");
        if (plus != std::string::npos && !lp.checked_number(ref.substr(plus + 1), &st->file_off))
          lp.fail("file=F[+OFFSET]");
      } else if (opt == "hugetlb=2M" || opt == "hugetlb=1G") {
        st->hugetlb_shift = opt == "hugetlb=2M" ? 21 : 30;
      } else if (opt.rfind("align=", 0) == 0) {
        if (!lp.checked_number(opt.substr(6), &st->align) || !st->align || (st->align & (st->align - 1)) ||
            st->align % 4096)
          lp.fail("align=SIZE (a power of two, at least 4K)");
      } else {
        lp.fail("file=F[+OFFSET], hugetlb=2M|1G or align=SIZE");
      }
      lp.word("");
    }
  } else if (verb == "munmap" || verb == "mprotect" || verb == "madvise") {
    st->op = verb == "munmap" ? Op::kMunmap : verb == "mprotect" ? Op::kMprotect : Op::kMadvise;
    st->addr = lp.addr();
    st->size = lp.size();
    if (st->op == Op::kMprotect) st->prot = lp.prot();
    if (st->op == Op::kMadvise) {
      std::string adv = lp.word("an ADVICE");
      st->advice = advice_from(adv);
      st->str = adv;
      if (st->advice < 0)
        lp.fail("an ADVICE (hugepage, nohugepage, dontneed, collapse, populate_read, populate_write, dontfork, dofork, "
                "wipeonfork, keeponfork, pageout, cold, free)");
    }
  } else if (verb == "mremap") {
    st->op = Op::kMremap;
    st->addr = lp.addr();
    st->size = lp.size();
    st->size2 = lp.size();
    st->name = lp.name();
    if (!lp.done()) {
      std::string to = lp.peek()->s;
      if (to.rfind("to=", 0) != 0) lp.fail("to=ADDR");
      LineParser sub("", 0, {{to.substr(3), lp.peek()->col + 3}});
      try {
        st->addr2 = sub.addr();
      } catch (const ParseFail&) {
        lp.fail("to=ADDR");
      }
      st->has_to = true;
      lp.word("");
    }
  } else if (verb == "clear-soft-dirty") {
    st->op = Op::kClearSoftDirty;
  } else if (verb == "thp-disable") {  // prctl(PR_SET_THP_DISABLE)
    st->op = Op::kThpDisable;
    st->flag = lp.yes_no();
    if (lp.accept("except-advised")) st->str = "except-advised";
  } else if (verb == "userfaultfd") {  // UFFDIO_REGISTER
    st->op = Op::kUffdRegister;
    st->addr = lp.addr();
    st->size = lp.size();
    std::string modes = lp.word("MODES (missing, wp or missing,wp)");
    if (modes == "missing") st->n = 1;
    else if (modes == "wp") st->n = 2;
    else if (modes == "missing,wp" || modes == "wp,missing") st->n = 3;
    else lp.back(), lp.fail("MODES (missing, wp or missing,wp)");
  } else if (verb == "uffd-wp") {  // UFFDIO_WRITEPROTECT
    st->op = Op::kUffdWp;
    st->addr = lp.addr();
    st->size = lp.size();
    std::string on = lp.word("on or off");
    if (on != "on" && on != "off") lp.back(), lp.fail("on or off");
    st->flag = on == "on";
  } else if ((verb == "write" || verb == "read") && numeric_next) {  // H write|read OFFSET SIZE BYTE
    st->op = verb == "write" ? Op::kHandleWrite : Op::kHandleRead;
    st->size2 = lp.number("an OFFSET");
    st->size = lp.number("a SIZE");
    st->byte = lp.byte();
  } else if (verb == "write" || verb == "read") {
    st->op = verb == "write" ? Op::kWrite : Op::kRead;
    st->addr = lp.addr();
    st->size = lp.number("a SIZE");
    if (st->op == Op::kWrite || !lp.done()) st->byte = lp.byte();
  } else if (verb == "gup") {
    st->op = Op::kGup;
    st->name = lp.name();
    st->addr = lp.addr();
    st->n = lp.number("NPAGES");
    // No range of a 47-bit user address space holds more pages; a larger
    // count is a typo, and would not fit the pages array of any caller.
    if (st->n > kMaxGupPages) lp.back(), lp.fail("NPAGES up to " + std::to_string(kMaxGupPages) + " (the pages of a 128 TiB user address space)");
    parse_gup_flags(lp, st);
  } else if (verb == "dump") {
    st->op = Op::kDump;
    st->name = lp.name();
    st->addr = lp.addr();
    st->size = lp.size();
  } else {
    lp.fail("a verb (fork, exit, mmap, munmap, mprotect, mremap, madvise, clear-soft-dirty, thp-disable, userfaultfd, uffd-wp, write, read, gup, dump), not '" + verb + "'");
  }
}

// `tune KEY VALUE`: a key and value this build has, else an error naming
// what it has (a value at the value, an unknown key at the key).
void parse_tune(LineParser& lp, std::string* key, std::string* value) {
  const std::string all = "a tune KEY and VALUE this build has (" + tune_choices_text() + ")";
  *key = lp.word("a tune KEY");
  const std::string values = tune_values_text(*key);
  if (values.empty()) lp.back(), lp.fail(all);
  if (lp.done()) lp.fail("a VALUE for " + *key + " (" + values + ")");
  if (!tune_value_known(*key, lp.peek()->s)) lp.fail("a VALUE for " + *key + " (" + values + "), not '" + lp.peek()->s + "'");
  *value = lp.word("a VALUE");
}

// The form of a value a writable sysfs file takes: a word of a fixed set
// (the kernel's stores compare with sysfs_streq and refuse anything else:
// another word is a mistake in the scenario, a parse error) or a number
// (kstrtoul: a number the store then rejects, such as use_zero_page 2, is
// EINVAL at run time, which `expect-error EINVAL sysfs ...` can assert).
const char* const* sysfs_words(const std::string& path) {
  static const char* const kEnabled[] = {"always", "madvise", "never", nullptr};
  static const char* const kSizeEnabled[] = {"always", "inherit", "madvise", "never", nullptr};
  static const char* const kDefrag[] = {"always", "defer", "defer+madvise", "madvise", "never", nullptr};
  if (path == "transparent_hugepage/enabled") return kEnabled;
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
  return path == "transparent_hugepage/use_zero_page" ||
         (path.rfind("hugepages/", 0) == 0 && path.size() > 13 && path.compare(path.size() - 13, 13, "/nr_hugepages") == 0);
}

void parse_statement(LineParser& lp, Stmt* st, int depth) {
  std::string w = lp.word("a statement");
  if ((w == "when" || w == "expect-error") && depth >= kMaxPrefixes)
    lp.back(), lp.fail("a statement after at most " + std::to_string(kMaxPrefixes) + " `when` and `expect-error` prefixes");
  if (w == "sysfs") {
    st->op = Op::kSysfs;
    st->str = lp.word("a sysfs PATH");
    if (!sysfs_path_known(st->str)) lp.back(), lp.fail("a sysfs PATH the model has, not '" + st->str + "'");
    st->str2 = lp.word("a VALUE");
    if (!sysfs_value_well_formed(st->str, st->str2)) lp.back(), lp.fail("a number for " + st->str + ", not '" + st->str2 + "'");
    if (const char* const* words = sysfs_words(st->str); words && !sysfs_value_is_word(words, st->str2))
      lp.back(), lp.fail("a VALUE for " + st->str + " (" + join_words(words) + "), not '" + st->str2 + "'");
    if (sysfs_takes_number(st->str) && !std::all_of(st->str2.begin(), st->str2.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      lp.back(), lp.fail("a number for " + st->str + ", not '" + st->str2 + "'");
  } else if (w == "tune") {
    st->op = Op::kTune;
    parse_tune(lp, &st->str, &st->str2);
  } else if (w == "proc") {
    st->op = Op::kProc;
    st->p = lp.name();
  } else if (w == "file") {
    st->op = Op::kFile;
    st->name = lp.name();
    st->size = lp.size();
    st->fs = "shmem";
    while (!lp.done()) {
      std::string opt = lp.peek()->s;
      if (opt.rfind("fs=", 0) == 0) {
        FsClass c;
        if (!fs_class_from_name(opt.substr(3), &c)) lp.fail("fs=CLASS (shmem, hugetlbfs, ext4, xfs, btrfs)");
        st->fs = opt.substr(3);
      } else if (opt == "hugetlb=2M" || opt == "hugetlb=1G") {
        st->hugetlb_shift = opt == "hugetlb=2M" ? 21 : 30;
      } else {
        lp.fail("fs=CLASS or hugetlb=2M|1G");
      }
      lp.word("");
    }
  } else if (w == "swap") {
    st->op = Op::kSwap;
    st->size = lp.size();
    // The kind decides whether large folios swap out whole (a block device
    // does; a swap file never does).
    st->str = "blkdev";
    if (!lp.done()) {
      st->str = lp.word("blkdev or file");
      if (st->str != "blkdev" && st->str != "file") lp.back(), lp.fail("blkdev or file");
    }
  } else if (w == "khugepaged") {
    st->op = Op::kKhugepaged;
    st->n = lp.done() ? 1 : lp.number();
  } else if (w == "advance") {
    st->op = Op::kAdvance;
    st->n = lp.duration();
  } else if (w == "counters") {
    lp.keyword("reset");
    st->op = Op::kCountersReset;
  } else if (w == "unpin") {
    st->op = Op::kUnpin;
    st->name = lp.name();
    st->flag = lp.accept("dirty");
  } else if (w == "expect") {
    parse_expect(lp, st);
  } else if (w == "check") {
    st->op = Op::kCheck;
  } else if (w == "skip" || w == "xfail") {
    st->op = w == "skip" ? Op::kSkip : Op::kXfail;
    st->str = lp.rest();
    // The reason is what the TAP line reports (`# SKIP REASON`, `# XFAIL REASON`).
    if (st->str.empty()) lp.fail("a REASON after '" + w + "' (why the test is " + (w == "skip" ? "skipped" : "expected to fail") + ")");
  } else if (w == "when") {  // when KEY=V1[,V2...] STATEMENT
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
    Stmt inner;
    inner.file = st->file;
    inner.line = st->line;
    inner.text = st->text;
    parse_statement(lp, &inner, depth + 1);
    if (inner.op == Op::kTune) lp.fail("a statement other than `tune` after `when` (a variant does not choose variants)");
    inner.when.insert(inner.when.begin(), c);
    *st = inner;
    return;
  } else if (w == "expect-error") {
    std::string e = lp.word("an ERRNO or SIGNAL");
    if (e == "SIGSEGV" || e == "SIGBUS" || e == "SIGKILL") {
      st->expect_signal = e;
    } else {
      st->expect_errno = -errno_from_name(e.c_str());
      if (!st->expect_errno) lp.back(), lp.fail("an ERRNO name (EFAULT, ENOMEM, EINVAL, ...) or SIGSEGV/SIGBUS");
    }
    Stmt inner;
    inner.file = st->file;
    inner.line = st->line;
    inner.text = st->text;
    parse_statement(lp, &inner, depth + 1);
    inner.expect_error = true;
    inner.expect_errno = st->expect_errno;
    inner.expect_signal = st->expect_signal;
    *st = inner;
    return;
  } else if (LineParser::is_name(w)) {
    parse_named(lp, st, w);
  } else {
    lp.fail("a statement");
  }
  lp.end();
}

// Names resolved at parse time: every name a statement uses must have been
// bound, as that kind, by an earlier statement of the test or the prelude
// (the runner would fail the test there with "no process named Q"). One
// namespace per test; processes and files are bound once, regions,
// handles and dumps may be bound again as the same kind. A statement under
// `when` may not run: its bindings count as made, and it may rebind.
class NameTable {
 public:
  explicit NameTable(const NameTable* parent = nullptr) : parent_(parent) {}
  void resolve(const Stmt& st, const std::string& file, int line, const std::vector<Token>& toks) {
    file_ = &file;
    line_ = line;
    toks_ = &toks;
    const bool conditional = !st.when.empty();
    auto region = [&](const AddrExpr& a) { use(a.region, 'r'); };
    switch (st.op) {
      case Op::kProc: bind(st.p, 'p', conditional); break;
      case Op::kFork: use(st.p, 'p'), bind(st.q, 'p', conditional); break;
      case Op::kExit: case Op::kClearSoftDirty: case Op::kThpDisable: case Op::kExpectRss: use(st.p, 'p'); break;
      case Op::kFile: bind(st.name, 'f', conditional); break;
      case Op::kMmap:
        use(st.p, 'p');
        if (!st.file_ref.empty()) use(st.file_ref, 'f');
        bind(st.name, 'r', conditional);
        break;
      case Op::kMunmap: case Op::kMprotect: case Op::kMadvise: case Op::kUffdRegister: case Op::kUffdWp:
      case Op::kWrite: case Op::kRead: case Op::kExpectMapped: case Op::kExpectOrder: case Op::kExpectExclusive:
      case Op::kExpectPinned: case Op::kExpectZero: case Op::kExpectSwapped: case Op::kExpectSoftDirty:
      case Op::kExpectUffdWp:
        use(st.p, 'p'), region(st.addr);
        break;
      case Op::kMremap:
        use(st.p, 'p'), region(st.addr);
        if (st.has_to) region(st.addr2);
        bind(st.name, 'r', conditional);
        break;
      case Op::kGup: use(st.p, 'p'), region(st.addr), bind(st.name, 'h', conditional); break;
      case Op::kDump: use(st.p, 'p'), region(st.addr), bind(st.name, 'd', conditional); break;
      case Op::kHandleWrite: case Op::kHandleRead: case Op::kExpectHandle: use(st.p, 'h'); break;
      case Op::kUnpin: use(st.name, 'h'); break;
      case Op::kExpectDump: use(st.p, 'd'); break;
      case Op::kExpectSame: use(st.p, 'p'), region(st.addr), use(st.q, 'p'), region(st.addr2); break;
      default: break;
    }
  }

 private:
  static const char* kind_name(char k) {
    return k == 'p' ? "a process" : k == 'r' ? "a region" : k == 'h' ? "a GUP handle" : k == 'd' ? "a dump" : "a file";
  }
  static const char* binders(char k) {
    return k == 'p' ? "proc or fork" : k == 'r' ? "mmap or mremap" : k == 'h' ? "gup" : k == 'd' ? "dump" : "file";
  }
  // The column of the token that names `name` (alone, as R+OFFSET, or after
  // file= or to=): the first such token for a use, the last for a binding
  // (`P mmap P ...` binds the second P).
  int column_of(const std::string& name, bool last) const {
    int col = 1;
    for (const Token& t : *toks_)
      for (const char* pre : {"", "file=", "to="}) {
        const std::string p = pre;
        if (t.s.compare(0, p.size(), p) != 0 || t.s.compare(p.size(), name.size(), name) != 0) continue;
        const size_t end = p.size() + name.size();
        if (end != t.s.size() && t.s[end] != '+') continue;
        col = t.col + static_cast<int>(p.size());
        if (!last) return col;
      }
    return col;
  }
  [[noreturn]] void fail(const std::string& name, bool binding, const std::string& what) const {
    throw ParseFail{*file_ + ":" + std::to_string(line_) + ":" + std::to_string(column_of(name, binding)) + ": expected " + what};
  }
  // The kind `name` is bound as here or in the parent (0: unbound).
  char kind_of(const std::string& name) const {
    auto it = kinds_.find(name);
    if (it != kinds_.end()) return it->second;
    return parent_ ? parent_->kind_of(name) : 0;
  }
  void use(const std::string& name, char kind) const {
    const char bound = kind_of(name);
    if (!bound)
      fail(name, false, std::string(kind_name(kind)) + " bound before this line (by " + binders(kind) + "), not '" + name + "'");
    if (bound != kind) fail(name, false, std::string(kind_name(kind)) + ", not '" + name + "' (" + kind_name(bound) + ")");
  }
  void bind(const std::string& name, char kind, bool conditional) {
    const char bound = kind_of(name);
    if (!bound) {
      kinds_.emplace(name, kind);
      return;
    }
    if (conditional) return;
    if (bound != kind || kind == 'p' || kind == 'f')
      fail(name, true, "a NAME not bound yet in this test, not '" + name + "' (" + kind_name(bound) + ")");
  }

  std::map<std::string, char> kinds_;
  // A test's table sees the prelude's names through its parent instead of a
  // copy of them: copying made parsing quadratic (prelude names x tests).
  const NameTable* parent_ = nullptr;
  const std::string* file_ = nullptr;
  int line_ = 0;
  const std::vector<Token>* toks_ = nullptr;
};

}  // namespace

static void parse_text(const std::string& path, std::istream& in, ScenarioFileAst* out) {
  out->path = path;
  std::string line;
  int lineno = 0;
  TestCase* cur = nullptr;
  NameTable prelude_names;
  NameTable names(&prelude_names);  // a test starts with the prelude's names
  while (std::getline(in, line)) {
    lineno++;
    auto toks = tokenize(line);
    if (toks.empty()) continue;
    LineParser lp(path, lineno, toks);
    if (toks[0].s == "test") {
      lp.word("test");
      TestCase tc;
      if (const Token* t = lp.peek()) tc.col = t->col;
      tc.name = lp.name();
      lp.end();
      tc.file = path;
      tc.line = lineno;
      out->tests.push_back(std::move(tc));
      cur = &out->tests.back();
      names = NameTable(&prelude_names);
      continue;
    }
    Stmt st;
    st.file = path;
    st.line = lineno;
    st.text = line;
    parse_statement(lp, &st);
    (cur ? names : prelude_names).resolve(st, path, lineno, toks);
    (cur ? cur->stmts : out->prelude).push_back(std::move(st));
  }
}

static void free_program(ScenarioProgram* p) { delete p; }

// Test names identify results (TAP lines, --known, mmlab diff, JSON): a name
// used twice in one run would make two results indistinguishable.
static bool check_unique_test_names(const ScenarioProgram& prog, std::string* error) {
  std::map<std::string, const TestCase*> first;
  for (auto& f : prog.files)
    for (auto& tc : f.tests) {
      auto [it, fresh] = first.emplace(tc.name, &tc);
      if (fresh) continue;
      *error = tc.file + ":" + std::to_string(tc.line) + ":" + std::to_string(tc.col) + ": expected a test NAME not used before in this run; '" +
               tc.name + "' is also at " + it->second->file + ":" + std::to_string(it->second->line);
      return false;
    }
  return true;
}

std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse(const std::vector<std::string>& paths,
                                                                             std::string* error) {
  std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> prog(new ScenarioProgram, free_program);
  for (auto& path : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {  // an ifstream opens a directory, and reads nothing
      *error = path + ": is a directory, not a scenario file (name the .mms files, e.g. " + path + "/*.mms)";
      return {nullptr, free_program};
    }
    std::ifstream in(path);
    if (!in) {
      *error = path + ": cannot read the file";
      return {nullptr, free_program};
    }
    ScenarioFileAst f;
    try {
      parse_text(path, in, &f);
    } catch (const ParseFail& e) {
      *error = e.msg;
      return {nullptr, free_program};
    }
    prog->files.push_back(std::move(f));
  }
  if (!check_unique_test_names(*prog, error)) return {nullptr, free_program};
  return prog;
}

std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse_text(const std::string& name,
                                                                                  const std::string& text,
                                                                                  std::string* error) {
  std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> prog(new ScenarioProgram, free_program);
  std::istringstream in(text);
  ScenarioFileAst f;
  try {
    parse_text(name, in, &f);
  } catch (const ParseFail& e) {
    *error = e.msg;
    return {nullptr, free_program};
  }
  prog->files.push_back(std::move(f));
  if (!check_unique_test_names(*prog, error)) return {nullptr, free_program};
  return prog;
}

}  // namespace mmlab
