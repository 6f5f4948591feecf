// Parsing .mms files (scenario language v1). Every file is parsed whole
// before anything runs; the first error names file:line:column and what was
// expected there.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fmt/format.h"
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
    const std::string what = "a DURATION (a number and ns, us, ms or s, e.g. 10ms)";
    if (done()) fail(what);
    const std::string& s = t_[i_].s;
    size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) digits++;
    const std::string unit = s.substr(digits);
    uint64_t mult = unit == "ns" ? 1 : unit == "us" ? 1000 : unit == "ms" ? 1000000 : unit == "s" ? 1000000000 : 0;
    uint64_t v;
    if (!digits || !mult || !parse_number(s.substr(0, digits), &v)) {
      bool overflow = false;
      if (digits && mult) parse_number(s.substr(0, digits), &v, &overflow);
      fail(overflow ? "a DURATION below 2^64 ns, not '" + s + "'" : what + ", not '" + s + "'");
    }
    if (v > ~0ull / mult) fail("a DURATION below 2^64 ns (about 584 years), not '" + s + "'");
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
    // A region lies below TASK_SIZE: a larger offset can only wrap past 2^64
    // or leave the user address space, never name a byte of R.
    if (a.offset >= TASK_SIZE) fail(fmt::format("an ADDR whose offset is below TASK_SIZE ({:#x}), not '{}'", TASK_SIZE, s));
    i_++;
    return a;
  }
  // After ADDR and its SIZE (the token just read): ADDR + SIZE stays in the
  // user address space, so that no statement's range wraps past 2^64.
  void in_user_space(const AddrExpr& a, uint64_t len, const char* what = "a SIZE that keeps") {
    if (len <= TASK_SIZE - a.offset) return;
    back();
    fail(fmt::format("{} {}+{:#x} below TASK_SIZE ({:#x}), not '{}'", what, a.region, a.offset, TASK_SIZE, t_[i_].s));
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

void parse_gup_flags(LineParser& lp, stmt::Gup* g) {
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
    else if (f == "write") g->gup_flags |= foll::WRITE;
    else if (f == "force") g->gup_flags |= foll::FORCE;
    else if (f == "longterm") g->gup_flags |= foll::LONGTERM;
    else if (f == "nofault") g->gup_flags |= foll::NOFAULT;
    else if (f == "split-pmd") g->gup_flags |= foll::SPLIT_PMD;
    else {
      lp.back();
      lp.fail("a GUP flag (get, pin, fast, fast-only, unlocked, write, force, longterm, nofault, split-pmd), not '" + f + "'");
    }
    pos = c + 1;
  }
  if (get == pin || fast + fast_only + unlocked > 1 || (pin && fast_only)) {
    lp.back();
    lp.fail(get == pin ? "FLAGS naming exactly one of 'get' and 'pin'" : "FLAGS naming one entry point");
  }
  g->entry = get ? (fast ? GupEntry::kGetUserPagesFast : fast_only ? GupEntry::kGetUserPagesFastOnly
                                                        : unlocked ? GupEntry::kGetUserPagesUnlocked
                                                                   : GupEntry::kGetUserPages)
                 : (fast ? GupEntry::kPinUserPagesFast : unlocked ? GupEntry::kPinUserPagesUnlocked : GupEntry::kPinUserPages);
}

// `depth`: the `when` and `expect-error` prefixes already read on this
// line. They nest by recursion, each level a copy of the statement and its
// line, so stack depth grows with the prefixes and memory with their square:
// past kMaxPrefixes it is a parse error.
constexpr int kMaxPrefixes = 16;
void parse_statement(LineParser& lp, Stmt* st, int depth = 0);

constexpr uint64_t kMaxGupPages = (1ull << 47) / 4096;

// `expect ...`
StmtBody parse_expect(LineParser& lp) {
  std::string first = lp.word("an expectation");
  if (first == "sysfs") {
    stmt::ExpectSysfs e;
    e.path = lp.word("a sysfs PATH");
    if (!sysfs_path_known(e.path)) lp.back(), lp.fail("a sysfs PATH the model has, not '" + e.path + "'");
    e.value = static_cast<int64_t>(lp.number());
    return e;
  }
  if (first == "vmstat") {
    stmt::ExpectVmstat e;
    e.item = lp.word("a NAME");
    e.value = static_cast<int64_t>(lp.number());
    return e;
  }
  if (first == "counter") {
    stmt::ExpectCounter e;
    e.counter = lp.word("a NAME");
    e.value = static_cast<int64_t>(lp.number());
    return e;
  }
  if (first == "violation") {  // expect violation TEXT...
    stmt::ExpectViolation e;
    e.text = lp.rest();
    if (e.text.empty()) lp.fail("the TEXT a detected violation must contain");
    return e;
  }
  if (!LineParser::is_name(first)) lp.fail("a NAME");
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
    if (e.kind != "anon" && e.kind != "file" && e.kind != "shmem") lp.fail("anon, file or shmem");
    e.size = lp.number("a SIZE");
    return e;
  }
  if (t->s[0] == '-' || std::isdigit(static_cast<unsigned char>(t->s[0]))) {  // expect H N | -ERRNO
    stmt::ExpectHandle e;
    e.handle = first;
    std::string v = lp.word("N or -ERRNO");
    if (v[0] == '-') {
      int err = errno_from_name(v.c_str() + 1);
      if (!err) lp.fail("a kernel errno name after '-' (e.g. -EFAULT)");
      e.ret = -err;
    } else {
      uint64_t n;
      lp.back();
      if (!lp.checked_number(v, &n)) lp.fail("N or -ERRNO");
      lp.word("N");
      e.ret = static_cast<int64_t>(n);
    }
    return e;
  }
  const AddrExpr addr = lp.addr();
  std::string what = lp.word("mapped, order, exclusive, pinned, zero, swapped, same or differ");
  if (what == "mapped") {
    stmt::ExpectMapped e{first, addr, lp.word("pte, pmd, pud or none")};
    if (e.level != "pte" && e.level != "pmd" && e.level != "pud" && e.level != "none") lp.fail("pte, pmd, pud or none");
    return e;
  }
  if (what == "order") return stmt::ExpectOrder{first, addr, static_cast<int64_t>(lp.number())};
  static const std::pair<const char*, stmt::PageBit> kBits[] = {
      {"exclusive", stmt::PageBit::kExclusive}, {"pinned", stmt::PageBit::kPinned},
      {"zero", stmt::PageBit::kZero},           {"swapped", stmt::PageBit::kSwapped},
      {"soft-dirty", stmt::PageBit::kSoftDirty}, {"uffd-wp", stmt::PageBit::kUffdWp}};
  for (auto& [name, bit] : kBits)
    if (what == name) return stmt::ExpectPageBit{first, addr, bit, lp.yes_no()};
  if (what == "same" || what == "differ") {
    stmt::ExpectSame e;
    e.proc = first;
    e.addr = addr;
    e.same = what == "same";
    e.other_proc = lp.name();
    e.other_addr = lp.addr();
    return e;
  }
  lp.fail("mapped, order, exclusive, pinned, zero, swapped, soft-dirty, uffd-wp, same or differ");
}

stmt::Mmap parse_mmap(LineParser& lp, const std::string& who) {
  stmt::Mmap m;
  m.proc = who;
  m.region = lp.name();
  m.size = lp.size();
  m.prot = lp.prot();
  std::string vis = lp.word("private or shared");
  if (vis != "private" && vis != "shared") lp.fail("private or shared");
  m.shared = vis == "shared";
  while (!lp.done()) {
    std::string opt = lp.peek()->s;
    if (opt.rfind("file=", 0) == 0) {
      std::string ref = opt.substr(5);
      auto plus = ref.find('+');
      m.file = ref.substr(0, plus);
      if (!LineParser::is_name(m.file)) lp.fail("file=F[+OFFSET]");
      if (plus != std::string::npos && !lp.checked_number(ref.substr(plus + 1), &m.file_off)) lp.fail("file=F[+OFFSET]");
    } else if (opt == "hugetlb=2M" || opt == "hugetlb=1G") {
      m.hugetlb_shift = opt == "hugetlb=2M" ? 21 : 30;
    } else if (opt.rfind("align=", 0) == 0) {
      if (!lp.checked_number(opt.substr(6), &m.align) || !m.align || (m.align & (m.align - 1)) || m.align % 4096)
        lp.fail("align=SIZE (a power of two, at least 4K)");
    } else {
      lp.fail("file=F[+OFFSET], hugetlb=2M|1G or align=SIZE");
    }
    lp.word("");
  }
  return m;
}

stmt::Mremap parse_mremap(LineParser& lp, const std::string& who) {
  stmt::Mremap m;
  m.proc = who;
  m.addr = lp.addr();
  m.old_size = lp.size();
  lp.in_user_space(m.addr, m.old_size);
  m.new_size = lp.size();
  m.region = lp.name();
  if (!lp.done()) {
    std::string to = lp.peek()->s;
    if (to.rfind("to=", 0) != 0) lp.fail("to=ADDR");
    LineParser sub("", 0, {{to.substr(3), lp.peek()->col + 3}});
    try {
      m.to = sub.addr();
    } catch (const ParseFail&) {
      lp.fail(fmt::format("to=ADDR (R or R+SIZE, the offset below TASK_SIZE {:#x}), not '{}'", TASK_SIZE, to));
    }
    if (m.new_size > TASK_SIZE - m.to->offset)
      lp.fail(fmt::format("to=ADDR that keeps NEW below TASK_SIZE ({:#x}), not '{}'", TASK_SIZE, to));
    lp.word("");
  }
  return m;
}

// Statements that start with a process or handle name.
// P print smaps|pagetable [ADDR SIZE], P print folio ADDR
stmt::Print parse_print(LineParser& lp, const std::string& who) {
  stmt::Print p;
  p.proc = who;
  const std::string what = lp.word("smaps, pagetable or folio");
  if (what == "smaps") p.what = stmt::PrintWhat::kSmaps;
  else if (what == "pagetable") p.what = stmt::PrintWhat::kPagetable;
  else if (what == "folio") p.what = stmt::PrintWhat::kFolio;
  else lp.back(), lp.fail("smaps, pagetable or folio");
  if (p.what == stmt::PrintWhat::kFolio) {
    p.addr = lp.addr();
    p.size = PAGE_SIZE;
    return p;
  }
  if (lp.done()) return p;
  p.addr = lp.addr();
  p.size = lp.size();
  lp.in_user_space(*p.addr, p.size);
  return p;
}

StmtBody parse_named(LineParser& lp, const std::string& who) {
  std::string verb = lp.word("a verb (fork, exit, mmap, munmap, mprotect, mremap, madvise, clear-soft-dirty, thp-disable, userfaultfd, uffd-wp, write, read, gup, dump, print)");
  const Token* nxt = lp.peek();
  bool numeric_next = nxt && std::isdigit(static_cast<unsigned char>(nxt->s[0]));
  if (verb == "fork") return stmt::Fork{who, lp.name()};
  if (verb == "exit") return stmt::Exit{who};
  if (verb == "mmap") return parse_mmap(lp, who);
  if (verb == "munmap") {
    stmt::Munmap m{who, lp.addr()};
    m.size = lp.size();
    lp.in_user_space(m.addr, m.size);
    return m;
  }
  if (verb == "mprotect") {
    stmt::Mprotect m{who, lp.addr()};
    m.size = lp.size();
    lp.in_user_space(m.addr, m.size);
    m.prot = lp.prot();
    return m;
  }
  if (verb == "madvise") {
    stmt::Madvise m;
    m.proc = who;
    m.addr = lp.addr();
    m.size = lp.size();
    lp.in_user_space(m.addr, m.size);
    m.advice_name = lp.word("an ADVICE");
    m.advice = advice_from(m.advice_name);
    if (m.advice < 0)
      lp.fail("an ADVICE (hugepage, nohugepage, dontneed, collapse, populate_read, populate_write, dontfork, dofork, "
              "wipeonfork, keeponfork, pageout, cold, free)");
    return m;
  }
  if (verb == "mremap") return parse_mremap(lp, who);
  if (verb == "clear-soft-dirty") return stmt::ClearSoftDirty{who};
  if (verb == "thp-disable") {  // prctl(PR_SET_THP_DISABLE)
    stmt::ThpDisable t{who, lp.yes_no()};
    t.except_advised = lp.accept("except-advised");
    return t;
  }
  if (verb == "userfaultfd") {  // UFFDIO_REGISTER
    stmt::UffdRegister u{who, lp.addr()};
    u.size = lp.size();
    lp.in_user_space(u.addr, u.size);
    std::string modes = lp.word("MODES (missing, wp or missing,wp)");
    if (modes == "missing") u.missing = true;
    else if (modes == "wp") u.wp = true;
    else if (modes == "missing,wp" || modes == "wp,missing") u.missing = u.wp = true;
    else lp.back(), lp.fail("MODES (missing, wp or missing,wp)");
    return u;
  }
  if (verb == "uffd-wp") {  // UFFDIO_WRITEPROTECT
    stmt::UffdWp u{who, lp.addr()};
    u.size = lp.size();
    lp.in_user_space(u.addr, u.size);
    std::string on = lp.word("on or off");
    if (on != "on" && on != "off") lp.back(), lp.fail("on or off");
    u.on = on == "on";
    return u;
  }
  if ((verb == "write" || verb == "read") && numeric_next) {  // H write|read OFFSET SIZE BYTE
    const uint64_t off = lp.number("an OFFSET");
    const uint64_t size = lp.number("a SIZE");
    const auto byte = static_cast<uint8_t>(lp.byte());
    if (verb == "write") return stmt::HandleWrite{who, off, size, byte};
    return stmt::HandleRead{who, off, size, byte};
  }
  if (verb == "write") {
    stmt::Write w{who, lp.addr()};
    w.size = lp.number("a SIZE");
    lp.in_user_space(w.addr, w.size);
    w.byte = static_cast<uint8_t>(lp.byte());
    return w;
  }
  if (verb == "read") {
    stmt::Read r;
    r.proc = who;
    r.addr = lp.addr();
    r.size = lp.number("a SIZE");
    lp.in_user_space(r.addr, r.size);
    if (!lp.done()) r.byte = static_cast<uint8_t>(lp.byte());
    return r;
  }
  if (verb == "gup") {
    stmt::Gup g;
    g.proc = who;
    g.handle = lp.name();
    g.addr = lp.addr();
    g.nr_pages = lp.number("NPAGES");
    // No range of a 47-bit user address space holds more pages; a larger
    // count is a typo, and would not fit the pages array of any caller.
    if (g.nr_pages > kMaxGupPages)
      lp.back(), lp.fail("NPAGES up to " + std::to_string(kMaxGupPages) + " (the pages of a 128 TiB user address space)");
    lp.in_user_space(g.addr, g.nr_pages * PAGE_SIZE, "NPAGES that keep");
    parse_gup_flags(lp, &g);
    return g;
  }
  if (verb == "print") return parse_print(lp, who);
  if (verb == "dump") {
    stmt::Dump d;
    d.proc = who;
    d.dump = lp.name();
    d.addr = lp.addr();
    d.size = lp.size();
    lp.in_user_space(d.addr, d.size);
    return d;
  }
  lp.fail("a verb (fork, exit, mmap, munmap, mprotect, mremap, madvise, clear-soft-dirty, thp-disable, userfaultfd, uffd-wp, write, read, gup, dump, print), not '" + verb + "'");
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

stmt::Sysfs parse_sysfs(LineParser& lp) {
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

stmt::File parse_file(LineParser& lp) {
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
    } else {
      lp.fail("fs=CLASS or hugetlb=2M|1G");
    }
    lp.word("");
  }
  return f;
}

// `when KEY=V1[,V2...]`
WhenCond parse_when(LineParser& lp) {
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

// inject SITE [order N] (times N|every N|probability P) [after N]; inject SITE off
stmt::Inject parse_inject(LineParser& lp) {
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

void parse_statement(LineParser& lp, Stmt* st, int depth) {
  std::string w = lp.word("a statement");
  if ((w == "when" || w == "expect-error") && depth >= kMaxPrefixes)
    lp.back(), lp.fail("a statement after at most " + std::to_string(kMaxPrefixes) + " `when` and `expect-error` prefixes");
  if (w == "sysfs") {
    st->body = parse_sysfs(lp);
  } else if (w == "tune") {
    stmt::Tune t;
    parse_tune(lp, &t.key, &t.value);
    st->body = t;
  } else if (w == "proc") {
    st->body = stmt::Proc{lp.name()};
  } else if (w == "file") {
    st->body = parse_file(lp);
  } else if (w == "swap") {
    stmt::Swap sw;
    if (const Token* t = lp.peek()) sw.size_col = t->col;
    sw.size = lp.size();
    // The kind decides whether large folios swap out whole (a block device
    // does; a swap file never does).
    if (!lp.done()) {
      sw.kind = lp.word("blkdev or file");
      if (sw.kind != "blkdev" && sw.kind != "file") lp.back(), lp.fail("blkdev or file");
    }
    st->body = sw;
  } else if (w == "khugepaged") {
    st->body = stmt::Khugepaged{lp.done() ? 1 : lp.number()};
  } else if (w == "advance") {
    st->body = stmt::Advance{lp.duration()};
  } else if (w == "inject") {
    st->body = parse_inject(lp);
  } else if (w == "counters") {
    if (lp.accept("print")) {
      st->body = stmt::CountersPrint{lp.done() ? "" : lp.word("a GLOB")};
    } else if (lp.accept("reset")) {
      st->body = stmt::CountersReset{};
    } else {
      lp.fail("'reset' or 'print'");
    }
  } else if (w == "unpin") {
    stmt::Unpin u{lp.name()};
    u.dirty = lp.accept("dirty");
    st->body = u;
  } else if (w == "expect") {
    st->body = parse_expect(lp);
  } else if (w == "check") {
    st->body = stmt::Check{};
  } else if (w == "skip" || w == "xfail") {
    std::string reason = lp.rest();
    // The reason is what the TAP line reports (`# SKIP REASON`, `# XFAIL REASON`).
    if (reason.empty()) lp.fail("a REASON after '" + w + "' (why the test is " + (w == "skip" ? "skipped" : "expected to fail") + ")");
    if (w == "skip") st->body = stmt::Skip{reason};
    else st->body = stmt::Xfail{reason};
  } else if (w == "when") {  // when KEY=V1[,V2...] STATEMENT
    WhenCond c = parse_when(lp);
    Stmt inner;
    inner.file = st->file;
    inner.line = st->line;
    inner.text = st->text;
    parse_statement(lp, &inner, depth + 1);
    if (inner.as<stmt::Tune>()) lp.fail("a statement other than `tune` after `when` (a variant does not choose variants)");
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
    st->body = parse_named(lp, w);
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
    conditional_ = !st.when.empty();
    std::visit([this](const auto& s) { names(s); }, st.body);
  }

 private:
  // The names each statement uses and binds, one overload per statement.
  void names(const stmt::Sysfs&) {}
  void names(const stmt::Tune&) {}
  void names(const stmt::Proc& s) { bind(s.proc, 'p'); }
  void names(const stmt::Fork& s) { use(s.parent, 'p'), bind(s.child, 'p'); }
  void names(const stmt::Exit& s) { use(s.proc, 'p'); }
  void names(const stmt::File& s) { bind(s.name, 'f'); }
  void names(const stmt::Swap&) {}
  void names(const stmt::Khugepaged&) {}
  void names(const stmt::Advance&) {}
  void names(const stmt::Inject&) {}
  void names(const stmt::CountersReset&) {}
  void names(const stmt::CountersPrint&) {}
  void names(const stmt::Mmap& s) {
    use(s.proc, 'p');
    if (!s.file.empty()) use(s.file, 'f');
    bind(s.region, 'r');
  }
  void names(const stmt::Munmap& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Mprotect& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Madvise& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Mremap& s) {
    use(s.proc, 'p'), region(s.addr);
    if (s.to) region(*s.to);
    bind(s.region, 'r');
  }
  void names(const stmt::ClearSoftDirty& s) { use(s.proc, 'p'); }
  void names(const stmt::ThpDisable& s) { use(s.proc, 'p'); }
  void names(const stmt::UffdRegister& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::UffdWp& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Write& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Read& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Gup& s) { use(s.proc, 'p'), region(s.addr), bind(s.handle, 'h'); }
  void names(const stmt::HandleWrite& s) { use(s.handle, 'h'); }
  void names(const stmt::HandleRead& s) { use(s.handle, 'h'); }
  void names(const stmt::Unpin& s) { use(s.handle, 'h'); }
  void names(const stmt::Dump& s) { use(s.proc, 'p'), region(s.addr), bind(s.dump, 'd'); }
  void names(const stmt::Print& s) {
    use(s.proc, 'p');
    if (s.addr) region(*s.addr);
  }
  void names(const stmt::Check&) {}
  void names(const stmt::Skip&) {}
  void names(const stmt::Xfail&) {}
  void names(const stmt::ExpectHandle& s) { use(s.handle, 'h'); }
  void names(const stmt::ExpectDump& s) { use(s.dump, 'd'); }
  void names(const stmt::ExpectRss& s) { use(s.proc, 'p'); }
  void names(const stmt::ExpectSysfs&) {}
  void names(const stmt::ExpectVmstat&) {}
  void names(const stmt::ExpectCounter&) {}
  void names(const stmt::ExpectMapped& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectOrder& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectPageBit& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectSame& s) { use(s.proc, 'p'), region(s.addr), use(s.other_proc, 'p'), region(s.other_addr); }
  void names(const stmt::ExpectViolation&) {}

  void region(const AddrExpr& a) const { use(a.region, 'r'); }

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
  // Where the error points: the name's first token for a use, its last for a binding.
  enum class At { kUse, kBinding };
  [[noreturn]] void fail(const std::string& name, At at, const std::string& what) const {
    throw ParseFail{*file_ + ":" + std::to_string(line_) + ":" + std::to_string(column_of(name, at == At::kBinding)) +
                    ": expected " + what};
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
      fail(name, At::kUse, std::string(kind_name(kind)) + " bound before this line (by " + binders(kind) + "), not '" + name + "'");
    if (bound != kind) fail(name, At::kUse, std::string(kind_name(kind)) + ", not '" + name + "' (" + kind_name(bound) + ")");
  }
  // A statement under `when` may not run: its binding counts as made, and it may rebind.
  void bind(const std::string& name, char kind) {
    const char bound = kind_of(name);
    if (!bound) {
      kinds_.emplace(name, kind);
      return;
    }
    if (conditional_) return;
    if (bound != kind || kind == 'p' || kind == 'f')
      fail(name, At::kBinding, "a NAME not bound yet in this test, not '" + name + "' (" + kind_name(bound) + ")");
  }

  std::map<std::string, char> kinds_;
  // A test's table sees the prelude's names through its parent instead of a
  // copy of them: copying made parsing quadratic (prelude names x tests).
  const NameTable* parent_ = nullptr;
  const std::string* file_ = nullptr;
  int line_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  bool conditional_ = false;
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
    if (toks.empty()) {
      // A replay's `# [RUN] TEXT`, right after its `test NAME`.
      if (cur && cur->stmts.empty() && cur->run_text.empty() && line.rfind("# [RUN] ", 0) == 0) cur->run_text = line.substr(2);
      continue;
    }
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

namespace {

// The token at `col` (1-based) of a source line.
std::string token_at(const std::string& line, int col) {
  if (col < 1 || static_cast<size_t>(col) > line.size()) return "";
  const size_t from = static_cast<size_t>(col) - 1;
  size_t to = from;
  while (to < line.size() && !std::isspace(static_cast<unsigned char>(line[to])) && line[to] != '#') to++;
  return line.substr(from, to - from);
}

std::string size_words(uint64_t bytes) {
  static const std::pair<unsigned, const char*> kUnits[] = {{30, "G"}, {20, "M"}, {10, "K"}};
  for (auto& [shift, unit] : kUnits)
    if (bytes && bytes % (1ull << shift) == 0) return std::to_string(bytes >> shift) + unit;
  return std::to_string(bytes);
}

// A file is allocated whole (its page cache populated) and a swap device's
// slots each take host memory: both are refused where the RAM of the
// System (or, for a file, the host's available memory) cannot hold them.
bool check_stmt_size(const Stmt& st, const ScenarioOptions& opt, uint64_t host_avail, std::string* error) {
  auto refuse = [&](int col, const std::string& what) {
    *error = fmt::format("{}:{}:{}: expected {}, not '{}'", st.file, st.line, col, what, token_at(st.text, col));
    return false;
  };
  const bool model = opt.backend == Backend::kModel;
  if (const auto* f = st.as<stmt::File>()) {
    if (model && f->size > opt.ram_bytes)
      return refuse(f->size_col, fmt::format("a file SIZE up to the System's RAM ({}, --ram): a file is allocated whole", size_words(opt.ram_bytes)));
    if (host_avail && f->size > host_avail)
      return refuse(f->size_col, fmt::format("a file SIZE up to the host's available memory ({} MiB): a file is allocated whole", host_avail >> 20));
  }
  if (const auto* s = st.as<stmt::Swap>()) {
    if (model && s->size > opt.ram_bytes)
      return refuse(s->size_col, fmt::format("a swap SIZE up to the System's RAM ({}, --ram)", size_words(opt.ram_bytes)));
    if (!model && host_avail && s->size > host_avail)
      return refuse(s->size_col, fmt::format("a swap SIZE up to the host's available memory ({} MiB)", host_avail >> 20));
  }
  return true;
}

}  // namespace

bool scenario_check_sizes(const ScenarioProgram& prog, const ScenarioOptions& opt, std::string* error) {
  const uint64_t host_avail = host_memory_available();
  for (auto& f : prog.files) {
    for (auto& st : f.prelude)
      if (!check_stmt_size(st, opt, host_avail, error)) return false;
    for (auto& tc : f.tests)
      for (auto& st : tc.stmts)
        if (!check_stmt_size(st, opt, host_avail, error)) return false;
  }
  return true;
}

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
