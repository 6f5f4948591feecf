// The parser's inside, shared by its files: the tokens of a line and the
// cursor over them (parse_lex.cpp), the table of statement verbs
// (parse.cpp) and the parser of each verb, in a file of its concern:
// parse_mm.cpp (the mm system calls), parse_process.cpp (processes and
// their CPU accesses), parse_gup.cpp, parse_system.cpp (settings, files,
// swap, khugepaged, time, fault injection, counters) and parse_expect.cpp
// (expectations and outcomes). A statement added later is one record of
// the table and its parser.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "scenario/ast.h"

namespace mmlab {
namespace parser {

struct Token {
  std::string s;
  int col;
};

std::vector<Token> tokenize(const std::string& line);

// A parse error: "FILE:LINE:COLUMN: expected WHAT".
struct ParseFail {
  std::string msg;
};

// The tokens of one line and the position of the next one to read. Every
// error points at that token (or just past the line's end) and says what
// was expected there.
class LineParser {
 public:
  LineParser(const std::string& file, int line, std::vector<Token> toks) : file_(file), line_(line), t_(std::move(toks)) {}

  bool done() const { return i_ >= t_.size(); }
  void back() { i_--; }  // to report an error at the token just read
  // An error at the token just read, naming it: "expected WHAT, not 'TOKEN'".
  [[noreturn]] void fail_last(const std::string& what) {
    back();
    fail(what + ", not '" + t_[i_].s + "'");
  }
  const Token* peek() const { return done() ? nullptr : &t_[i_]; }
  [[noreturn]] void fail(const std::string& what) const;
  std::string word(const std::string& what);
  void keyword(const std::string& kw);
  bool accept(const std::string& kw);
  std::string name();
  uint64_t number(const std::string& what = "a number (decimal or 0x hex, optional K/M/G suffix)");
  uint64_t size();
  // A number an expectation compares with a signed value (a statistic, a
  // counter): up to 2^63 - 1, which it would otherwise wrap to a negative.
  int64_t signed_count();
  int byte();
  // parse_number() for a token at the current position (or inside it, as
  // `file=F+OFFSET`): a number too large for 64 bits is an error of its
  // own, since wrapping it would run a different scenario than written.
  bool checked_number(const std::string& s, uint64_t* out) const;
  // DURATION: a number and a unit (ns, us, ms, s); the result in ns.
  uint64_t duration();
  AddrExpr addr();
  // After ADDR and its SIZE (the token just read): ADDR + SIZE stays in the
  // user address space, so that no statement's range wraps past 2^64.
  void in_user_space(const AddrExpr& a, uint64_t len, const char* what = "a SIZE that keeps");
  // ADDR SIZE: a range of the user address space (addr(), size(), in_user_space()).
  AddrExpr range(uint64_t* len) {
    AddrExpr a = addr();
    *len = size();
    in_user_space(a, *len);
    return a;
  }
  int prot();
  bool yes_no();
  std::string rest();
  void end() {
    if (!done()) fail("the end of the statement");
  }

  static bool is_name(const std::string& s);
  // False if malformed, or (with *overflow set) too large for 64 bits.
  static bool parse_number(const std::string& s, uint64_t* out, bool* overflow = nullptr);

 private:
  std::string file_;
  int line_;
  std::vector<Token> t_;
  size_t i_ = 0;
};

// A statement's words after its verb, parsed into its struct. `subject` is
// the NAME before the verb of a kSubject statement (a process, or for
// `write` and `read` a GUP handle), empty for the others.
using StatementParser = StmtBody (*)(LineParser& lp, const std::string& subject);
// A prefix's words, then the statement it prefixes, parsed into *st.
// `depth`: the prefixes already read on this line.
using PrefixParser = void (*)(LineParser& lp, Stmt* st, int depth);

enum class VerbForm {
  kKeyword,  // VERB ...: the verb is a reserved word
  kSubject,  // NAME VERB ...
  kPrefix,   // VERB ... STATEMENT (when, expect-error): a reserved word too
};

// Whether a statement can fail with an errno or a signal: `expect-error`
// before one that cannot (exit, check, expect, gup, ...) would be ignored,
// so it is a parse error.
enum class Fallible { kYes, kNo };

// One record per statement verb: its word, its form, its parser
// (`prefix` for kPrefix, `parse` for the others) and whether the statement
// can fail.
struct StatementVerb {
  std::string_view verb;
  VerbForm form;
  StatementParser parse = nullptr;
  PrefixParser prefix = nullptr;
  Fallible fallible = Fallible::kYes;
};

// Words that cannot name a process or a GUP handle, which begin statements:
// `test` and the verbs of the kKeyword and kPrefix records of the table, so
// that a verb added to the table is reserved too. A NAME that a statement
// binds there (`proc P`, `P fork Q`, `P gup H ...`): a reserved one is an
// error at its token.
bool is_reserved_word(const std::string& word);
std::string subject_name(LineParser& lp, const char* what);

// A statement with its prefixes, up to the end of the line.
void parse_statement(LineParser& lp, Stmt* st, int depth = 0);

// parse_process.cpp
StmtBody parse_proc(LineParser& lp, const std::string& subject);
StmtBody parse_fork(LineParser& lp, const std::string& subject);
StmtBody parse_exit(LineParser& lp, const std::string& subject);
StmtBody parse_write(LineParser& lp, const std::string& subject);
StmtBody parse_read(LineParser& lp, const std::string& subject);
StmtBody parse_print(LineParser& lp, const std::string& subject);
StmtBody parse_remember(LineParser& lp, const std::string& subject);

// parse_mm.cpp
StmtBody parse_mmap(LineParser& lp, const std::string& subject);
StmtBody parse_munmap(LineParser& lp, const std::string& subject);
StmtBody parse_mprotect(LineParser& lp, const std::string& subject);
StmtBody parse_mremap(LineParser& lp, const std::string& subject);
StmtBody parse_madvise(LineParser& lp, const std::string& subject);
StmtBody parse_mlock(LineParser& lp, const std::string& subject);
StmtBody parse_munlock(LineParser& lp, const std::string& subject);
StmtBody parse_mseal(LineParser& lp, const std::string& subject);
StmtBody parse_shmat(LineParser& lp, const std::string& subject);
StmtBody parse_shmdt(LineParser& lp, const std::string& subject);
StmtBody parse_mlockall(LineParser& lp, const std::string& subject);
StmtBody parse_munlockall(LineParser& lp, const std::string& subject);
StmtBody parse_clear_soft_dirty(LineParser& lp, const std::string& subject);
StmtBody parse_thp_disable(LineParser& lp, const std::string& subject);
StmtBody parse_userfaultfd(LineParser& lp, const std::string& subject);
StmtBody parse_uffd_wp(LineParser& lp, const std::string& subject);

// parse_gup.cpp
// No range of a 47-bit user address space holds more pages: the largest
// NPAGES of `gup` and the largest count `expect H N` can meet.
inline constexpr uint64_t kMaxGupPages = (1ull << 47) / 4096;
StmtBody parse_gup(LineParser& lp, const std::string& subject);
// `H write|read OFFSET SIZE BYTE`, which `write` and `read` hand over
// when a number follows the verb.
StmtBody parse_handle_access(LineParser& lp, const std::string& handle, bool write);
StmtBody parse_unpin(LineParser& lp, const std::string& subject);
StmtBody parse_vm_read(LineParser& lp, const std::string& subject);
StmtBody parse_dump(LineParser& lp, const std::string& subject);

// parse_system.cpp
StmtBody parse_sysfs(LineParser& lp, const std::string& subject);
StmtBody parse_tune(LineParser& lp, const std::string& subject);
StmtBody parse_file(LineParser& lp, const std::string& subject);
StmtBody parse_swap(LineParser& lp, const std::string& subject);
StmtBody parse_truncate(LineParser& lp, const std::string& subject);
StmtBody parse_shmget(LineParser& lp, const std::string& subject);
StmtBody parse_shmctl(LineParser& lp, const std::string& subject);
StmtBody parse_punch_hole(LineParser& lp, const std::string& subject);
StmtBody parse_writeback(LineParser& lp, const std::string& subject);
StmtBody parse_shrink_slab(LineParser& lp, const std::string& subject);
StmtBody parse_khugepaged(LineParser& lp, const std::string& subject);
StmtBody parse_advance(LineParser& lp, const std::string& subject);
StmtBody parse_inject(LineParser& lp, const std::string& subject);
StmtBody parse_counters(LineParser& lp, const std::string& subject);
// `when KEY=V1[,V2...]`'s condition.
WhenCond parse_when_condition(LineParser& lp);

// parse_expect.cpp
StmtBody parse_expect(LineParser& lp, const std::string& subject);
StmtBody parse_check(LineParser& lp, const std::string& subject);
StmtBody parse_skip(LineParser& lp, const std::string& subject);
StmtBody parse_xfail(LineParser& lp, const std::string& subject);

}  // namespace parser

// The table, one record per verb (parse.cpp). The words of kKeyword and
// kPrefix records cannot start a kSubject statement, so they cannot name a
// process; `test`, which opens a test, is read before the table is.
std::span<const parser::StatementVerb> scenario_statement_verbs();

}  // namespace mmlab
