// Processes and their CPU accesses: `proc P`, `P fork Q`, `P exit`,
// `P write|read ADDR SIZE [BYTE]` and `P print ...`.
#include <cctype>

#include "mmlab/system.h"
#include "scenario/parse_internal.h"

namespace mmlab::parser {

StmtBody parse_proc(LineParser& lp, const std::string&) { return stmt::Proc{subject_name(lp, "a process")}; }

StmtBody parse_fork(LineParser& lp, const std::string& who) { return stmt::Fork{who, subject_name(lp, "a process")}; }

StmtBody parse_exit(LineParser&, const std::string& who) { return stmt::Exit{who}; }

namespace {

// A GUP handle is read and written at an OFFSET, a number; a process at an
// ADDR, which starts with a region's name.
bool number_follows(const LineParser& lp) {
  const Token* nxt = lp.peek();
  return nxt && std::isdigit(static_cast<unsigned char>(nxt->s[0]));
}

}  // namespace

StmtBody parse_write(LineParser& lp, const std::string& who) {
  if (number_follows(lp)) return parse_handle_access(lp, who, true);
  stmt::Write w{who, lp.addr()};
  w.size = lp.number("a SIZE");
  lp.in_user_space(w.addr, w.size);
  w.byte = static_cast<uint8_t>(lp.byte());
  return w;
}

StmtBody parse_read(LineParser& lp, const std::string& who) {
  if (number_follows(lp)) return parse_handle_access(lp, who, false);
  stmt::Read r;
  r.proc = who;
  r.addr = lp.addr();
  r.size = lp.number("a SIZE");
  lp.in_user_space(r.addr, r.size);
  if (!lp.done()) r.byte = static_cast<uint8_t>(lp.byte());
  return r;
}

// P print smaps|pagetable [ADDR SIZE], P print folio ADDR
StmtBody parse_print(LineParser& lp, const std::string& who) {
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
  p.addr = lp.range(&p.size);
  return p;
}

// P remember ADDR: the frame there, for `expect P ADDR same-frame|other-frame`.
StmtBody parse_remember(LineParser& lp, const std::string& who) { return stmt::Remember{who, lp.addr()}; }

}  // namespace mmlab::parser
