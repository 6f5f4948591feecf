// The backend-independent half of running one test.
#include "scenario/test_run.h"

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "fmt/format.h"
#include "mmlab/system.h"
#include "mmlab/types.h"

namespace mmlab {

ScenarioResult TestRun::run(const ScenarioFileAst& file, const TestCase& tc) {
  if (begin(file, tc)) {
    for (auto& st : file.prelude)
      if (!step(st)) break;
    if (!ended_)
      for (auto& st : tc.stmts)
        if (!step(st)) break;
  }
  return finish();
}

bool TestRun::begin(const ScenarioFileAst& file, const TestCase& tc) {
  res_ = ScenarioResult{};
  res_.file = file.path;
  res_.name = tc.name;
  res_.run_text = tc.run_text;
  line_ = tc.line;
  std::vector<const Stmt*> stmts;
  for (auto& st : file.prelude) stmts.push_back(&st);
  for (auto& st : tc.stmts) stmts.push_back(&st);
  try {
    guarded([&] { start(stmts); });
  } catch (const StartError& e) {
    res_.outcome = Outcome::kError;
    res_.diagnostics.push_back(e.msg);
    ended_ = errored_ = true;
  }
  return !ended_;
}

template <class F>
void TestRun::guarded(F&& f) {
  try {
    f();
  } catch (const Failure& fl) {
    if (fl.violation && !expected_violations_.empty()) {
      found_violations_.push_back(fl.msg);
      return;
    }
    failure_ = fl;
    ended_ = true;
  } catch (const SkipTest& sk) {
    res_.outcome = Outcome::kSkip;
    res_.reason = sk.reason;
    skipped_ = ended_ = true;
  }
}

bool TestRun::step(const Stmt& st) {
  if (ended_) return false;
  if (!when_holds(st)) return true;
  guarded([&] { exec(st); });
  if (!ended_) guarded([&] { collect_violations(st, new_violations()); });
  if (ended_ && failure_ && !skipped_) add_failure_state(st);
  if (opt_.record_states && !ended_) record_state(st);
  return !ended_;
}

namespace {

// A backend's snapshot() lines as facts.
class LineFacts final : public TestRun::StateFacts {
 public:
  explicit LineFacts(std::vector<std::string> l) : lines_(std::move(l)) {}
  bool equals(const StateFacts& o) const override {
    const auto* x = dynamic_cast<const LineFacts*>(&o);
    return x && x->lines_ == lines_;
  }
  std::vector<std::string> lines() const override { return lines_; }

 private:
  std::vector<std::string> lines_;
};

}  // namespace

std::pair<uint64_t, uint64_t> TestRun::StateFacts::digest() const {
  FactHash h;
  for (const std::string& l : lines()) h.add(l);
  return h.value();
}

std::unique_ptr<TestRun::StateFacts> TestRun::state_facts() { return std::make_unique<LineFacts>(snapshot()); }

// FNV-1a over the snapshot's lines and the counters: equal end states give
// equal digests in any build, since snapshot() names frames only relative
// to the previous statement's ("same-frame", "other-frame"), never by pfn.
void TestRun::record_state(const Stmt& st) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
  };
  for (const std::string& l : snapshot()) mix(l);
  for (auto& [name, v] : counters()) mix(fmt::format("{} {}", name, v));
  res_.states.push_back(fmt::format("{}:{} {:016x}", st.file, st.line, h));
}

namespace {

// Lines of a long dump kept in the TAP output; the rest are counted.
constexpr size_t kMaxStateLines = 64;

void append_indented(std::vector<std::string>* out, const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size() && i < kMaxStateLines; i++) out->push_back("  " + lines[i]);
  if (lines.size() > kMaxStateLines) out->push_back(fmt::format("  ... ({} more lines)", lines.size() - kMaxStateLines));
}

// What a statement names: a process, an address range in it, a statistic.
struct Named {
  std::string proc;
  std::optional<AddrExpr> addr;
  uint64_t size = PAGE_SIZE;
  bool statistic = false;
};

Named named_by(const Stmt& st) {
  return std::visit(
      [](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        Named n;
        if constexpr (requires { s.proc; }) n.proc = s.proc;
        if constexpr (requires { s.addr.region; }) n.addr = s.addr;
        if constexpr (std::is_same_v<S, stmt::Gup>) n.size = std::max<uint64_t>(1, s.nr_pages) * PAGE_SIZE;
        else if constexpr (std::is_same_v<S, stmt::Mremap>) n.size = s.old_size;
        else if constexpr (requires { s.addr.region; s.size; }) n.size = std::max<uint64_t>(s.size, 1);
        n.statistic = std::is_same_v<S, stmt::ExpectCounter> || std::is_same_v<S, stmt::ExpectVmstat> ||
                      std::is_same_v<S, stmt::ExpectSysfs>;
        return n;
      },
      st.body);
}

}  // namespace

void TestRun::add_failure_state(const Stmt& st) {
  const Named n = named_by(st);
  std::vector<std::string> out;
  try {
    if (!n.proc.empty()) {
      uint64_t start = 0, end = 0;
      std::string range;
      if (n.addr) {
        auto it = regions_.find(n.addr->region);
        if (it != regions_.end()) {
          start = (it->second + n.addr->offset) & PAGE_MASK;
          end = round_up(it->second + n.addr->offset + n.size, PAGE_SIZE);
          range = fmt::format(" {:#x}-{:#x}", start, end);
        }
      }
      out.push_back(fmt::format("state: {} smaps{}:", n.proc, range));
      append_indented(&out, state_lines(st, n.proc, stmt::PrintWhat::kSmaps, start, end));
      if (end) {
        out.push_back(fmt::format("state: {} pagetable{}:", n.proc, range));
        append_indented(&out, state_lines(st, n.proc, stmt::PrintWhat::kPagetable, start, end));
        out.push_back(fmt::format("state: {} folio {:#x}:", n.proc, start));
        append_indented(&out, state_lines(st, n.proc, stmt::PrintWhat::kFolio, start, start + PAGE_SIZE));
      }
    }
    if (n.statistic) {
      out.push_back("state: counters (every non-zero one):");
      append_indented(&out, counter_lines(""));
    }
  } catch (const Failure& f) {
    out.push_back("state: cannot be shown: " + f.msg);
  } catch (const SkipTest& s) {
    out.push_back("state: cannot be shown: " + s.reason);
  }
  res_.diagnostics.insert(res_.diagnostics.end(), out.begin(), out.end());
}

void TestRun::exec_print(const Stmt& st, const stmt::Print& p) {
  uint64_t start = 0, end = 0;
  std::string range;
  if (p.addr) {
    start = addr(st, *p.addr) & PAGE_MASK;
    end = round_up(addr(st, *p.addr) + p.size, PAGE_SIZE);
    range = p.what == stmt::PrintWhat::kFolio ? fmt::format(" {:#x}", start) : fmt::format(" {:#x}-{:#x}", start, end);
  }
  res_.output.push_back(fmt::format("{}:{}: {} {}{}:", st.file, st.line, p.proc, stmt::print_what_name(p.what), range));
  std::vector<std::string> lines = state_lines(st, p.proc, p.what, start, end);
  for (auto& l : lines) res_.output.push_back("  " + l);
}

void TestRun::exec_counters_print(const stmt::CountersPrint& c) {
  res_.output.push_back(c.glob.empty() ? std::string("counters (every non-zero one):") : "counters " + c.glob + ":");
  for (auto& l : counter_lines(c.glob)) res_.output.push_back("  " + l);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> smaps_of_range(const std::string& smaps, uint64_t start, uint64_t end) {
  std::vector<std::string> out;
  bool keep = false;
  for (const std::string& l : split_lines(smaps)) {
    unsigned long long a = 0, b = 0;
    int used = 0;
    // A VMA's header line "start-end perms ...": its block runs to the next header.
    if (std::sscanf(l.c_str(), "%llx-%llx %n", &a, &b, &used) == 2 && used > 0) keep = end == 0 || (a < end && b > start);
    if (keep) out.push_back(l);
  }
  if (out.empty()) out.push_back("(no VMA in the range)");
  return out;
}

bool proc_field_bytes(const std::string& text, const std::optional<uint64_t>& vma_addr, const std::string& field,
                      uint64_t* bytes, std::string* why) {
  bool inside = !vma_addr, seen_vma = false;
  for (const std::string& l : split_lines(text)) {
    unsigned long long a = 0, b = 0;
    int used = 0;
    if (vma_addr && std::sscanf(l.c_str(), "%llx-%llx %n", &a, &b, &used) == 2 && used > 0) {
      inside = a <= *vma_addr && *vma_addr < b;
      seen_vma |= inside;
      continue;
    }
    if (!inside || l.compare(0, field.size(), field) != 0 || l.size() <= field.size() || l[field.size()] != ':') continue;
    unsigned long long kb = 0;
    char unit[4] = {};
    // Both texts give sizes in kB; a line without the unit is no size.
    if (std::sscanf(l.c_str() + field.size() + 1, " %llu %3s", &kb, unit) != 2 || std::string(unit) != "kB") {
      *why = fmt::format("the {} line is no size: '{}'", field, l);
      return false;
    }
    *bytes = static_cast<uint64_t>(kb) << 10;
    return true;
  }
  *why = vma_addr && !seen_vma ? fmt::format("no VMA contains {:#x}", *vma_addr) : fmt::format("no {} line", field);
  return false;
}

std::string TestRun::tune_value(const std::string& key) { return tune_default(key); }

bool TestRun::when_holds(const Stmt& st) {
  for (const WhenCond& c : st.when)
    if (std::find(c.values.begin(), c.values.end(), tune_value(c.key)) == c.values.end()) return false;
  return true;
}

void TestRun::expect_violation(const Stmt& st, const stmt::ExpectViolation& e) {
  expected_violations_.push_back({e.text, fmt::format("{}:{}", st.file, st.line)});
}

void TestRun::violation(const Stmt& st, const std::string& msg) {
  throw Failure{fmt::format("{}:{}: {}", st.file, st.line, msg), true};
}

void TestRun::collect_violations(const Stmt& st, const std::vector<std::string>& msgs) {
  if (msgs.empty()) return;
  if (expected_violations_.empty())
    violation(st, msgs.size() == 1 ? msgs.front() : fmt::format("{} (and {} more)", msgs.front(), msgs.size() - 1));
  for (auto& m : msgs) found_violations_.push_back(fmt::format("{}:{}: {}", st.file, st.line, m));
}

std::optional<Failure> TestRun::check_expected_violations() {
  for (const auto& expected : expected_violations_) {
    const std::string& text = expected.first;
    const std::string& where = expected.second;
    bool found = std::any_of(found_violations_.begin(), found_violations_.end(),
                             [&](const std::string& v) { return v.find(text) != std::string::npos; });
    if (found) continue;
    if (found_violations_.empty()) return Failure{fmt::format("{}: expected a violation containing '{}', none was detected", where, text)};
    return Failure{fmt::format("{}: expected a violation containing '{}'; detected only: {}", where, text,
                               found_violations_.front())};
  }
  return std::nullopt;
}

ScenarioResult TestRun::finish() {
  if (opt_.cost_sample && !errored_ && !skipped_ && !failure_) sample_cost(&res_);
  if (opt_.record_counters && !errored_ && !skipped_) sample_counters(&res_);
  std::vector<std::string> leaks = teardown();
  ScenarioResult res = res_;
  res.leaks = leaks;
  if (errored_) return res;
  std::optional<Failure> failure = failure_;
  if (!leaks.empty() && !skipped_) {
    if (!expected_violations_.empty()) {
      for (auto& l : leaks) found_violations_.push_back(fmt::format("{}:{}: after teardown: {}", res.file, line_, l));
    } else {
      if (!failure)
        failure = Failure{fmt::format("{}:{}: after teardown: {} ({} violations)", res.file, line_, leaks.front(), leaks.size())};
      res.diagnostics.insert(res.diagnostics.end(), leaks.begin(), leaks.end());
    }
  }
  if (skipped_) return res;
  if (!failure && !expected_violations_.empty()) failure = check_expected_violations();
  res.violations = found_violations_;
  if (failure) {
    res.diagnostics.insert(res.diagnostics.begin(), failure->msg);
    res.outcome = xfail_ ? Outcome::kXfail : Outcome::kFail;
  } else {
    res.outcome = xfail_ ? Outcome::kXpass : Outcome::kPass;
  }
  if (xfail_) res.reason = xfail_reason_;
  return res;
}

void TestRun::fail(const Stmt& st, const std::string& msg) { throw Failure{fmt::format("{}:{}: {}", st.file, st.line, msg)}; }

void TestRun::bind(const Stmt& st, const std::string& name, char kind) {
  auto it = kinds_.find(name);
  if (it != kinds_.end() && (it->second != kind || kind == 'p' || kind == 'f' || kind == 's'))
    fail(st, fmt::format("the name {} is already bound", name));
  kinds_[name] = kind;
}

uint64_t TestRun::addr(const Stmt& st, const AddrExpr& a) {
  auto it = regions_.find(a.region);
  if (it == regions_.end()) fail(st, fmt::format("no region named {}", a.region));
  return it->second + a.offset;
}

void TestRun::check_vm_read(const Stmt& st, const stmt::VmRead& v, long ret) {
  check_errno(st, ret < 0 ? ret : 0, "vm-read");
  if (ret >= 0 && static_cast<uint64_t>(ret) != v.size)
    fail(st, fmt::format("vm-read copied {} of {} bytes", ret, v.size));
}

void TestRun::check_errno(const Stmt& st, long ret, const char* what) {
  if (st.expect_error) {
    if (!st.expect_signal.empty()) fail(st, fmt::format("expected {}, but {} is not a CPU access", st.expect_signal, what));
    if (ret >= 0) fail(st, fmt::format("expected {} to fail with {}, it succeeded", what, errno_name(st.expect_errno)));
    if (ret != st.expect_errno)
      fail(st, fmt::format("expected {} to fail with {}, found {}", what, errno_name(st.expect_errno), errno_name(static_cast<int>(ret))));
    return;
  }
  if (ret < 0) fail(st, fmt::format("{} failed with {}", what, errno_name(static_cast<int>(ret))));
}

void TestRun::check_signal(const Stmt& st, const std::string& sig, uint64_t fault_addr, const char* what) {
  if (st.expect_error) {
    if (st.expect_signal.empty())
      fail(st, fmt::format("expected {}, but a CPU access ends in a signal, not an errno", errno_name(st.expect_errno)));
    if (sig.empty()) fail(st, fmt::format("expected {} to end with {}, it completed", what, st.expect_signal));
    if (st.expect_signal != sig) fail(st, fmt::format("expected {} to end with {}, found {}", what, st.expect_signal, sig));
    return;
  }
  if (!sig.empty()) fail(st, fmt::format("{} ended with {} at {:#x}", what, sig, fault_addr));
}

namespace {
std::string yn(bool b) { return b ? "yes" : "no"; }
std::string ret_text(long v) { return v < 0 ? fmt::format("-{}", errno_name(static_cast<int>(v))) : std::to_string(v); }
std::string where(const std::string& proc, const AddrExpr& a) { return fmt::format("{} {}+{:#x}", proc, a.region, a.offset); }
}  // namespace

const char* stmt::print_what_name(PrintWhat w) {
  switch (w) {
    case PrintWhat::kSmaps: return "smaps";
    case PrintWhat::kPagetable: return "pagetable";
    case PrintWhat::kFolio: return "folio";
  }
  return "?";
}

const char* stmt::page_bit_name(PageBit b) {
  switch (b) {
    case PageBit::kExclusive: return "exclusive";
    case PageBit::kPinned: return "pinned";
    case PageBit::kZero: return "zero";
    case PageBit::kSwapped: return "swapped";
    case PageBit::kSoftDirty: return "soft-dirty";
    case PageBit::kUffdWp: return "uffd-wp";
    case PageBit::kGuard: return "guard";
  }
  return "?";
}

void TestRun::expect_bytes(const Stmt& st, const stmt::Read& r, int64_t bad, uint8_t found) {
  if (!r.byte || bad < 0) return;
  violation(st, fmt::format("expected every byte of {}+{:#x}..+{:#x} == {:#04x}, found {:#04x} at +{:#x}", r.addr.region,
                            r.addr.offset, r.size, *r.byte, found, r.addr.offset + static_cast<uint64_t>(bad)));
}

void TestRun::expect_handle_mismatch(const Stmt& st, const stmt::HandleRead& r, int64_t bad, uint8_t found) {
  if (bad < 0) return;
  violation(st, fmt::format("expected every byte {} reads at +{:#x}..+{:#x} == {:#04x}, found {:#04x} at +{:#x}", r.handle,
                            r.offset, r.size, r.byte, found, r.offset + static_cast<uint64_t>(bad)));
}

void TestRun::expect_handle_ret(const Stmt& st, const stmt::ExpectHandle& e, long ret) {
  if (ret != e.ret) fail(st, fmt::format("expected {} {}, found {}", e.handle, ret_text(e.ret), ret_text(ret)));
}

void TestRun::expect_number(const Stmt& st, const std::string& what, int64_t expected, int64_t found) {
  if (found != expected) fail(st, fmt::format("expected {} == {}, found {}", what, expected, found));
}

void TestRun::expect_rss(const Stmt& st, const stmt::ExpectRss& e, uint64_t found) {
  if (found != e.size) fail(st, fmt::format("expected {} rss {} {:#x}, found {:#x}", e.proc, e.kind, e.size, found));
}

void TestRun::expect_locked(const Stmt& st, const stmt::ExpectLocked& e, uint64_t found) {
  if (found != e.size) fail(st, fmt::format("expected {} locked {:#x}, found {:#x}", e.proc, e.size, found));
}

void TestRun::expect_faults(const Stmt& st, const stmt::ExpectFaults& e, uint64_t found) {
  if (found != e.count)
    fail(st, fmt::format("expected {} {} {}, found {}", e.proc, e.major ? "majflt" : "minflt", e.count, found));
}

void TestRun::expect_mapped(const Stmt& st, const stmt::ExpectMapped& e, const char* found) {
  if (e.level != found) fail(st, fmt::format("expected {} mapped {}, found {}", where(e.proc, e.addr), e.level, found));
}

void TestRun::expect_order(const Stmt& st, const stmt::ExpectOrder& e, bool mapped, int order) {
  if (!mapped) fail(st, fmt::format("expected {} order {}, found nothing mapped", where(e.proc, e.addr), e.order));
  if (order != e.order) fail(st, fmt::format("expected {} order {}, found {}", where(e.proc, e.addr), e.order, order));
}

void TestRun::expect_yes_no(const Stmt& st, const stmt::ExpectPageBit& e, bool mapped, bool found) {
  const char* what = stmt::page_bit_name(e.bit);
  const bool need_mapped = e.bit == stmt::PageBit::kExclusive || e.bit == stmt::PageBit::kSoftDirty || e.bit == stmt::PageBit::kUffdWp;
  if (need_mapped && !mapped)
    fail(st, fmt::format("expected {} {} {}, found nothing mapped", where(e.proc, e.addr), what, yn(e.yes)));
  if (found != e.yes) fail(st, fmt::format("expected {} {} {}, found {}", where(e.proc, e.addr), what, yn(e.yes), yn(found)));
}

void TestRun::expect_same(const Stmt& st, const stmt::ExpectSame& e, bool same) {
  if (same != e.same)
    fail(st, fmt::format("expected {} and {} {}+{:#x} to map {} frames, found {}", where(e.proc, e.addr), e.other_proc,
                         e.other_addr.region, e.other_addr.offset, e.same ? "the same" : "different",
                         same ? "the same frame" : "different frames"));
}

void TestRun::expect_proc_field(const Stmt& st, const stmt::ExpectProcField& e, uint64_t found) {
  if (found == e.size) return;
  if (e.smaps)
    fail(st, fmt::format("expected {} smaps {}+{:#x} {} {:#x}, found {:#x}", e.proc, e.addr.region, e.addr.offset, e.field, e.size, found));
  fail(st, fmt::format("expected {} status {} {:#x}, found {:#x}", e.proc, e.field, e.size, found));
}

void TestRun::remember_frame(const Stmt& st, const stmt::Remember& r, bool mapped, uint64_t pfn) {
  if (!mapped) fail(st, fmt::format("no frame mapped at {} to remember", where(r.proc, r.addr)));
  remembered_[{r.proc, addr(st, r.addr) & PAGE_MASK}] = pfn;
}

void TestRun::remember_unknown_frame(const Stmt& st, const stmt::Remember& r) {
  remembered_[{r.proc, addr(st, r.addr) & PAGE_MASK}] = std::nullopt;
}

void TestRun::expect_frame(const Stmt& st, const stmt::ExpectFrame& e, bool mapped, uint64_t pfn) {
  auto it = remembered_.find({e.proc, addr(st, e.addr) & PAGE_MASK});
  if (it == remembered_.end()) fail(st, fmt::format("no frame remembered at {} (`{} remember ADDR` first)", where(e.proc, e.addr), e.proc));
  if (!it->second) {
    skip_expectation("frame-unknown (remembered where the backend could not read the frame)");
    return;
  }
  const char* want = e.same ? "same-frame" : "other-frame";
  if (!mapped) fail(st, fmt::format("expected {} {}, found no frame mapped", where(e.proc, e.addr), want));
  const bool same = pfn == *it->second;
  if (same != e.same) fail(st, fmt::format("expected {} {}, found {}", where(e.proc, e.addr), want, same ? "the same frame" : "another frame"));
}

void TestRun::exec_skip(const stmt::Skip& s) { throw SkipTest{s.reason}; }

void TestRun::exec_xfail(const stmt::Xfail& x) {
  xfail_ = true;
  xfail_reason_ = x.reason;
}

void TestRun::skip_expectation(const std::string& why) {
  res_.skipped_expectations++;
  for (auto& n : res_.skips)
    if (n.why == why) {
      n.count++;
      return;
    }
  res_.skips.push_back({why.substr(0, why.find_first_of(" :")), why, 1});
}

}  // namespace mmlab
