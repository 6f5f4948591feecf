// Parsing .mms files (scenario language v1). Every file is parsed whole
// before anything runs; the first error names file:line:column and what was
// expected there. A line is a statement found by its verb in one table
// (below; each verb's parser is in the parse_*.cpp file of its concern),
// then its names resolved against what earlier statements bound.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fmt/format.h"
#include "mmlab/explore.h"
#include "mmlab/scenario.h"
#include "mmlab/system.h"
#include "mmlab/input_file.h"
#include "scenario/ast.h"
#include "scenario/parse_internal.h"

namespace mmlab {
namespace parser {
namespace {

// `depth`: the `when` and `expect-error` prefixes already read on this
// line. They nest by recursion, so stack depth grows with them: past
// kMaxPrefixes it is a parse error.
constexpr int kMaxPrefixes = 16;

// `when KEY=V1[,V2...] STATEMENT`
void parse_when(LineParser& lp, Stmt* st, int depth) {
  WhenCond c = parse_when_condition(lp);
  parse_statement(lp, st, depth + 1);
  if (st->as<stmt::Tune>()) lp.fail("a statement other than `tune` after `when` (a variant does not choose variants)");
  st->when.insert(st->when.begin(), c);
}

// `expect-error ERRNO|SIGNAL STATEMENT`: the outermost prefix decides.
void parse_expect_error(LineParser& lp, Stmt* st, int depth) {
  std::string e = lp.word("an ERRNO or SIGNAL");
  std::string signal;
  int err = 0;
  if (e == "SIGSEGV" || e == "SIGBUS" || e == "SIGKILL") {
    signal = e;
  } else {
    err = -errno_from_name(e.c_str());
    if (!err) lp.back(), lp.fail("an ERRNO name (EFAULT, ENOMEM, EINVAL, ...) or SIGSEGV/SIGBUS");
  }
  // Set before the statement is parsed, which refuses one that cannot
  // fail; an outer prefix has set it already and decides.
  if (!st->expect_error) {
    st->expect_error = true;
    st->expect_errno = err;
    st->expect_signal = signal;
  }
  parse_statement(lp, st, depth + 1);
}

constexpr VerbForm kKeyword = VerbForm::kKeyword, kSubject = VerbForm::kSubject;
constexpr Fallible kNeverFails = Fallible::kNo;

// Every statement verb. The kSubject ones are listed in the order an
// unknown verb's error names them.
constexpr StatementVerb kVerbs[] = {
    {"sysfs", kKeyword, parse_sysfs},
    {"tune", kKeyword, parse_tune},
    {"proc", kKeyword, parse_proc, nullptr, kNeverFails},
    {"file", kKeyword, parse_file},
    {"truncate", kKeyword, parse_truncate},
    {"punch-hole", kKeyword, parse_punch_hole},
    {"shmget", kKeyword, parse_shmget},
    {"shmctl", kKeyword, parse_shmctl},
    {"swap", kKeyword, parse_swap},
    {"writeback", kKeyword, parse_writeback},
    {"shrink-slab", kKeyword, parse_shrink_slab},
    {"khugepaged", kKeyword, parse_khugepaged},
    {"advance", kKeyword, parse_advance},
    {"inject", kKeyword, parse_inject},
    {"counters", kKeyword, parse_counters, nullptr, kNeverFails},
    {"unpin", kKeyword, parse_unpin, nullptr, kNeverFails},
    {"expect", kKeyword, parse_expect, nullptr, kNeverFails},
    {"check", kKeyword, parse_check, nullptr, kNeverFails},
    {"skip", kKeyword, parse_skip, nullptr, kNeverFails},
    {"xfail", kKeyword, parse_xfail, nullptr, kNeverFails},
    {"when", VerbForm::kPrefix, nullptr, parse_when},
    {"expect-error", VerbForm::kPrefix, nullptr, parse_expect_error},
    {"fork", kSubject, parse_fork},
    {"exit", kSubject, parse_exit, nullptr, kNeverFails},
    {"mmap", kSubject, parse_mmap},
    {"munmap", kSubject, parse_munmap},
    {"mprotect", kSubject, parse_mprotect},
    {"mremap", kSubject, parse_mremap},
    {"madvise", kSubject, parse_madvise},
    {"mlock", kSubject, parse_mlock},
    {"munlock", kSubject, parse_munlock},
    {"mseal", kSubject, parse_mseal},
    {"shmat", kSubject, parse_shmat},
    {"shmdt", kSubject, parse_shmdt},
    {"mlockall", kSubject, parse_mlockall},
    {"munlockall", kSubject, parse_munlockall},
    {"clear-soft-dirty", kSubject, parse_clear_soft_dirty, nullptr, kNeverFails},
    {"thp-disable", kSubject, parse_thp_disable},
    {"userfaultfd", kSubject, parse_userfaultfd},
    {"uffd-wp", kSubject, parse_uffd_wp},
    {"write", kSubject, parse_write},
    {"read", kSubject, parse_read},
    {"gup", kSubject, parse_gup, nullptr, kNeverFails},
    {"vm-read", kSubject, parse_vm_read},
    {"dump", kSubject, parse_dump, nullptr, kNeverFails},
    {"print", kSubject, parse_print, nullptr, kNeverFails},
    {"remember", kSubject, parse_remember, nullptr, kNeverFails},
};

// The record of `word` among the verbs of `subject` form (kSubject) or of
// the others, or null.
const StatementVerb* find_verb(const std::string& word, bool subject) {
  for (const StatementVerb& v : kVerbs)
    if ((v.form == kSubject) == subject && v.verb == word) return &v;
  return nullptr;
}

// "a verb (fork, exit, ...)": what may follow a process or handle name.
const std::string& subject_verbs_text() {
  static const std::string text = [] {
    std::string list;
    for (const StatementVerb& v : kVerbs)
      if (v.form == kSubject) list += (list.empty() ? "" : ", ") + std::string(v.verb);
    return "a verb (" + list + ")";
  }();
  return text;
}

}  // namespace

namespace {

// `expect-error` before a statement that never fails would be ignored
// (the verb was just read).
void refuse_expect_error(LineParser& lp, const Stmt& st, const StatementVerb& v) {
  if (st.expect_error && v.fallible == Fallible::kNo)
    lp.fail_last("a statement that can fail after `expect-error` (`" + std::string(v.verb) + "` never returns an error or a signal)");
}

}  // namespace

void parse_statement(LineParser& lp, Stmt* st, int depth) {
  std::string w = lp.word("a statement");
  if (const StatementVerb* v = find_verb(w, false)) {
    if (v->form == VerbForm::kPrefix) {
      if (depth >= kMaxPrefixes)
        lp.back(), lp.fail("a statement after at most " + std::to_string(kMaxPrefixes) + " `when` and `expect-error` prefixes");
      v->prefix(lp, st, depth);
      return;  // the prefixed statement has read up to the end of the line
    }
    refuse_expect_error(lp, *st, *v);
    st->body = v->parse(lp, "");
  } else if (LineParser::is_name(w)) {  // NAME VERB ...
    std::string verb = lp.word(subject_verbs_text());
    const StatementVerb* sv = find_verb(verb, true);
    if (!sv) lp.fail(subject_verbs_text() + ", not '" + verb + "'");
    refuse_expect_error(lp, *st, *sv);
    st->body = sv->parse(lp, w);
  } else {
    lp.fail_last("a statement (a verb such as proc, tune or expect, or NAME VERB)");
  }
  lp.end();
}

bool is_reserved_word(const std::string& word) {
  if (word == "test" || word == "race" || word == "thread" || word == "end") return true;
  for (const StatementVerb& v : kVerbs)
    if (v.form != kSubject && v.verb == word) return true;
  return false;
}

std::string subject_name(LineParser& lp, const char* what) {
  const std::string n = lp.name();
  if (!is_reserved_word(n)) return n;
  std::string words = "test";
  for (const StatementVerb& v : kVerbs)
    if (v.form != kSubject) words += ", " + std::string(v.verb);
  words += ", race, thread, end";
  lp.fail_last(std::string(what) + " NAME that is not a reserved word (" + words + ")");
}

namespace {

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
  void names(const stmt::Truncate& s) { use(s.file, 'f'); }
  void names(const stmt::PunchHole& s) { use(s.file, 'f'); }
  void names(const stmt::Shmget& s) { bind(s.seg, 's'); }
  void names(const stmt::Shmctl& s) { use(s.seg, 's'); }
  void names(const stmt::Swap&) {}
  void names(const stmt::Writeback&) {}
  void names(const stmt::ShrinkSlab&) {}
  void names(const stmt::Khugepaged&) {}
  void names(const stmt::Advance&) {}
  void names(const stmt::Inject&) {}
  void names(const stmt::CountersReset&) {}
  void names(const stmt::CountersPrint&) {}
  void names(const stmt::Mmap& s) {
    use(s.proc, 'p');
    if (!s.file.empty()) use(s.file, 'f');
    if (s.place != stmt::Mmap::Place::kAny) region(s.place_addr);
    bind(s.region, 'r');
  }
  void names(const stmt::Shmat& s) { use(s.proc, 'p'), use(s.seg, 's'), bind(s.region, 'r'); }
  void names(const stmt::Shmdt& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Munmap& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Mprotect& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Madvise& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Mremap& s) {
    use(s.proc, 'p'), region(s.addr);
    if (s.to) region(*s.to);
    bind(s.region, 'r');
  }
  void names(const stmt::Mlock& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Mseal& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Mlockall& s) { use(s.proc, 'p'); }
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
  void names(const stmt::VmRead& s) { use(s.proc, 'p'), use(s.target, 'p'), region(s.remote), region(s.local); }
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
  void names(const stmt::ExpectLocked& s) { use(s.proc, 'p'); }
  void names(const stmt::ExpectFaults& s) { use(s.proc, 'p'); }
  void names(const stmt::ExpectSysfs&) {}
  void names(const stmt::ExpectVmstat&) {}
  void names(const stmt::ExpectCounter&) {}
  void names(const stmt::ExpectMapped& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectOrder& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectPageBit& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectSame& s) { use(s.proc, 'p'), region(s.addr), use(s.other_proc, 'p'), region(s.other_addr); }
  void names(const stmt::ExpectViolation&) {}
  void names(const stmt::ExpectProcField& s) {
    use(s.proc, 'p');
    if (s.smaps) region(s.addr);
  }
  void names(const stmt::Remember& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::ExpectFrame& s) { use(s.proc, 'p'), region(s.addr); }
  void names(const stmt::Race&) {}  // its threads' statements are resolved line by line

 public:
  // After a race block's `end`: what its threads bound is bound from here
  // on. A name two threads bind is an error at `end` (either binding may
  // be the one that stays).
  void adopt(const NameTable& thread, const std::string& thread_name, std::map<std::string, std::string>* by,
             const std::string& file, int line) {
    for (auto& [name, kind] : thread.kinds_) {
      auto [it, fresh] = by->emplace(name, thread_name);
      if (!fresh && it->second != thread_name)
        throw ParseFail{file + ":" + std::to_string(line) + ":1: expected names bound by one thread only; '" + name +
                        "' is bound by threads " + it->second + " and " + thread_name};
      kinds_[name] = kind;
    }
  }

 private:

  void region(const AddrExpr& a) const { use(a.region, 'r'); }

  static const char* kind_name(char k) {
    return k == 'p'   ? "a process"
           : k == 'r' ? "a region"
           : k == 'h' ? "a GUP handle"
           : k == 'd' ? "a dump"
           : k == 's' ? "a shared memory segment"
                      : "a file";
  }
  static const char* binders(char k) {
    return k == 'p'   ? "proc or fork"
           : k == 'r' ? "mmap, mremap or shmat"
           : k == 'h' ? "gup"
           : k == 'd' ? "dump"
           : k == 's' ? "shmget"
                      : "file";
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
    if (bound != kind || kind == 'p' || kind == 'f' || kind == 's')
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
}  // namespace parser

std::span<const parser::StatementVerb> scenario_statement_verbs() { return parser::kVerbs; }

using parser::LineParser;
using parser::NameTable;
using parser::ParseFail;
using parser::Token;

namespace {

// The words of a `race` line with their columns; a value may be quoted
// (schedule="F@fork.before_wrprotect G F"), which the statement tokenizer
// does not know. A `#` outside quotes begins a comment.
std::vector<Token> race_words(const std::string& path, int lineno, const std::string& line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    if (std::isspace(static_cast<unsigned char>(line[i]))) {
      i++;
      continue;
    }
    if (line[i] == '#') break;
    const size_t from = i;
    std::string w;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) {
      if (line[i] == '"') {
        const size_t close = line.find('"', i + 1);
        if (close == std::string::npos)
          throw ParseFail{path + ":" + std::to_string(lineno) + ":" + std::to_string(i + 1) + ": expected a closing '\"'"};
        w += line.substr(i + 1, close - i - 1);
        i = close + 1;
        continue;
      }
      w += line[i++];
    }
    out.push_back({w, static_cast<int>(from) + 1});
  }
  return out;
}

// `race [pct=D|dfs=C|schedule="..."] [runs=N] [seed=S] [filter=on|off]`
std::shared_ptr<stmt::RaceBlock> parse_race_line(const std::string& path, int lineno, const std::vector<Token>& toks) {
  auto b = std::make_shared<stmt::RaceBlock>();
  b->line = lineno;
  bool strategy = false;
  auto fail_at = [&](const Token& t, const std::string& what) -> void {
    throw ParseFail{path + ":" + std::to_string(lineno) + ":" + std::to_string(t.col) + ": expected " + what + ", not '" +
                    t.s + "'"};
  };
  for (size_t i = 1; i < toks.size(); i++) {
    const Token& t = toks[i];
    const size_t eq = t.s.find('=');
    const std::string key = t.s.substr(0, eq), val = eq == std::string::npos ? "" : t.s.substr(eq + 1);
    uint64_t n = 0;
    const bool num = LineParser::parse_number(val, &n);
    auto one_strategy = [&] {
      if (strategy) fail_at(t, "one of pct=, dfs= and schedule=");
      strategy = true;
    };
    if (key == "pct") {
      one_strategy();
      if (!num || n < 2 || n > 3) fail_at(t, "pct=2 or pct=3 (the PCT depth)");
      b->mode = stmt::RaceBlock::Mode::kPct;
      b->depth = static_cast<int>(n);
    } else if (key == "dfs") {
      one_strategy();
      if (!num || n < 1 || n > 3) fail_at(t, "dfs=1, dfs=2 or dfs=3 (the preemption bound)");
      b->mode = stmt::RaceBlock::Mode::kDfs;
      b->bound = static_cast<int>(n);
    } else if (key == "schedule") {
      one_strategy();
      if (val.empty()) fail_at(t, "schedule=\"LINE\" or schedule=\"T@label U T\"");
      b->mode = stmt::RaceBlock::Mode::kSchedule;
      b->schedule = val;
      b->schedule_col = t.col;
    } else if (key == "runs") {
      if (!num || n < 1 || n > 100'000'000) fail_at(t, "runs=N with N from 1 to 100000000");
      b->runs = static_cast<int>(n);
    } else if (key == "seed") {
      if (!num) fail_at(t, "seed=S (a number)");
      b->seed = n;
    } else if (key == "filter") {
      if (val != "on" && val != "off") fail_at(t, "filter=on or filter=off");
      b->filter = val == "on";
    } else {
      fail_at(t, "a race option (pct=D, dfs=C, schedule=\"...\", runs=N, seed=S, filter=on|off)");
    }
  }
  return b;
}

// Statements a thread of a race block cannot hold: they set up or judge
// the whole test, not one thread's part of it.
const char* refused_in_thread(const Stmt& st) {
  if (st.as<stmt::Tune>()) return "tune";
  if (st.as<stmt::Skip>()) return "skip";
  if (st.as<stmt::Xfail>()) return "xfail";
  if (st.as<stmt::ExpectViolation>()) return "expect violation";
  if (st.as<stmt::CountersReset>()) return "counters reset";
  return nullptr;
}

}  // namespace

static void parse_text(const std::string& path, std::istream& in, ScenarioFileAst* out) {
  out->path = path;
  std::string line;
  int lineno = 0;
  TestCase* cur = nullptr;
  NameTable prelude_names;
  NameTable names(&prelude_names);  // a test starts with the prelude's names
  // The race block being read: its threads' names tables see the test's
  // names; each thread's bindings join the test's at `end`.
  std::shared_ptr<stmt::RaceBlock> race;
  std::vector<std::unique_ptr<NameTable>> thread_names;
  auto fail_line = [&](int col, const std::string& what) {
    throw ParseFail{path + ":" + std::to_string(lineno) + ":" + std::to_string(col) + ": expected " + what};
  };
  while (std::getline(in, line)) {
    lineno++;
    // A UTF-8 byte-order mark, which some editors write, is no token: the
    // columns count from after it, as the editor shows them.
    if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    auto toks = parser::tokenize(line);
    if (toks.empty()) {
      // A replay's `# [RUN] TEXT`, right after its `test NAME`.
      if (cur && cur->stmts.empty() && cur->run_text.empty() && line.rfind("# [RUN] ", 0) == 0) cur->run_text = line.substr(2);
      continue;
    }
    if (toks[0].s == "race") {
      if (!cur) fail_line(toks[0].col, "a `race` block inside a test, not in the prelude");
      if (race) fail_line(toks[0].col, "`end` closing the race block of line " + std::to_string(race->line) + " before another `race`");
      for (const Stmt& s : cur->stmts)
        if (s.as<stmt::Race>()) fail_line(toks[0].col, "one race block per test (one is at line " + std::to_string(s.line) + ")");
      race = parse_race_line(path, lineno, race_words(path, lineno, line));
      Stmt st;
      st.file = path;
      st.line = lineno;
      st.text = line;
      st.body = stmt::Race{race};
      cur->stmts.push_back(std::move(st));
      thread_names.clear();
      continue;
    }
    if (race && toks[0].s == "thread") {
      LineParser lp(path, lineno, toks);
      lp.word("thread");
      const Token* at = lp.peek();
      const std::string tname = lp.name();
      lp.end();
      for (const stmt::RaceThread& t : race->threads)
        if (t.name == tname) fail_line(at->col, "a thread NAME not used before in this race block, not '" + tname + "'");
      race->threads.push_back({tname, lineno, {}});
      thread_names.push_back(std::make_unique<NameTable>(&names));
      continue;
    }
    if (race && toks[0].s == "end") {
      LineParser lp(path, lineno, toks);
      lp.word("end");
      lp.end();
      if (race->threads.empty()) fail_line(toks[0].col, "`thread NAME` and its statements before `end`");
      if (race->mode == stmt::RaceBlock::Mode::kSchedule &&
          (race->schedule.rfind("mmlab-schedule", 0) == 0 || explore::decode_schedule(race->schedule))) {
        // A schedule line: well formed, and naming only this block's threads.
        std::string why;
        auto l = explore::parse_line(race->schedule, &why);
        if (l)
          for (uint8_t c : l->choices)
            if (c >= race->threads.size()) {
              why = "schedule line: thread " + std::to_string(c) + " of " + std::to_string(race->threads.size());
              l.reset();
              break;
            }
        if (!l)
          throw ParseFail{path + ":" + std::to_string(race->line) + ":" + std::to_string(race->schedule_col) +
                          ": expected a schedule line of this block: " + why};
      } else if (race->mode == stmt::RaceBlock::Mode::kSchedule) {
        std::vector<std::string> tn;
        for (const stmt::RaceThread& t : race->threads) tn.push_back(t.name);
        const std::string why = explore::check_directed(race->schedule, tn);
        if (!why.empty())
          throw ParseFail{path + ":" + std::to_string(race->line) + ":" + std::to_string(race->schedule_col) +
                          ": expected a schedule of this block's threads: " + why};
      }
      std::map<std::string, std::string> by;
      for (size_t i = 0; i < thread_names.size(); i++)
        names.adopt(*thread_names[i], race->threads[i].name, &by, path, lineno);
      race.reset();
      thread_names.clear();
      continue;
    }
    if (race && toks[0].s == "test")
      fail_line(toks[0].col, "`end` closing the race block of line " + std::to_string(race->line) + " before the next test");
    if (!race && (toks[0].s == "thread" || toks[0].s == "end"))
      fail_line(toks[0].col, "`" + toks[0].s + "` inside a race block (after `race`)");
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
    parser::parse_statement(lp, &st);
    if (race) {
      if (race->threads.empty()) fail_line(toks[0].col, "`thread NAME` after `race`, before the first statement");
      if (const char* what = refused_in_thread(st))
        fail_line(toks[0].col, std::string("a statement a thread can run, not `") + what + "` (it belongs outside the race block)");
      thread_names.back()->resolve(st, path, lineno, toks);
      race->threads.back().stmts.push_back(std::move(st));
      continue;
    }
    (cur ? names : prelude_names).resolve(st, path, lineno, toks);
    (cur ? cur->stmts : out->prelude).push_back(std::move(st));
  }
  if (race)
    throw ParseFail{path + ":" + std::to_string(race->line) + ":1: expected `end` closing this race block before the end of the file"};
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

// A scenario file is text a person or a generator wrote: the largest of the
// corpus (cow.mms) is under 1 MiB. The bound keeps /dev/zero, or a file
// named by mistake, from being read without end.
constexpr uint64_t kMaxScenarioFileBytes = 64ull << 20;

std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> scenario_parse(const std::vector<std::string>& paths,
                                                                             std::string* error) {
  std::unique_ptr<ScenarioProgram, void (*)(ScenarioProgram*)> prog(new ScenarioProgram, free_program);
  for (auto& path : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {  // an ifstream opens a directory, and reads nothing
      *error = path + ": is a directory, not a scenario file (name the .mms files, e.g. " + path + "/*.mms)";
      return {nullptr, free_program};
    }
    std::string text, why;
    if (read_input_file(path, kMaxScenarioFileBytes, &text, &why)) {
      *error = path + ": " + why;
      return {nullptr, free_program};
    }
    std::istringstream in(std::move(text));
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
