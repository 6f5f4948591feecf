// The words of a .mms line: tokens and their columns, and the cursor that
// reads names, numbers, sizes, durations, addresses and protections from
// them, each malformed one an error naming file:line:column.
#include <cctype>
#include <cstdint>

#include "fmt/format.h"
#include "mmlab/system.h"
#include "scenario/parse_internal.h"

namespace mmlab::parser {

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

void LineParser::fail(const std::string& what) const {
  int col = done() ? (t_.empty() ? 1 : t_.back().col + static_cast<int>(t_.back().s.size()) + 1) : t_[i_].col;
  throw ParseFail{file_ + ":" + std::to_string(line_) + ":" + std::to_string(col) + ": expected " + what};
}

std::string LineParser::word(const std::string& what) {
  if (done()) fail(what);
  return t_[i_++].s;
}

void LineParser::keyword(const std::string& kw) {
  if (done() || t_[i_].s != kw) fail("'" + kw + "'");
  i_++;
}

bool LineParser::accept(const std::string& kw) {
  if (!done() && t_[i_].s == kw) {
    i_++;
    return true;
  }
  return false;
}

std::string LineParser::name() {
  if (done() || !is_name(t_[i_].s)) fail("a NAME (a letter, then letters, digits, '_' or '-')");
  return t_[i_++].s;
}

uint64_t LineParser::number(const std::string& what) {
  if (done()) fail(what);
  uint64_t v;
  if (!checked_number(t_[i_].s, &v)) fail(what);
  i_++;
  return v;
}

uint64_t LineParser::size() {
  if (done()) fail("a SIZE");
  uint64_t v;
  if (!checked_number(t_[i_].s, &v)) fail("a SIZE (a number with an optional K, M or G suffix), not '" + t_[i_].s + "'");
  if (v % 4096) fail("a SIZE that is a multiple of 4K");
  i_++;
  return v;
}

int64_t LineParser::signed_count() {
  const uint64_t v = number();
  if (v > static_cast<uint64_t>(INT64_MAX)) fail_last("a number below 2^63");
  return static_cast<int64_t>(v);
}

int LineParser::byte() {
  if (done()) fail("a BYTE (0..255)");
  uint64_t v;
  if (!checked_number(t_[i_].s, &v) || v > 255) fail("a BYTE (0..255)");
  i_++;
  return static_cast<int>(v);
}

bool LineParser::checked_number(const std::string& s, uint64_t* out) const {
  bool overflow = false;
  if (parse_number(s, out, &overflow)) return true;
  if (overflow) fail("a number below 2^64, not '" + s + "'");
  return false;
}

uint64_t LineParser::duration() {
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

AddrExpr LineParser::addr() {
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

void LineParser::in_user_space(const AddrExpr& a, uint64_t len, const char* what) {
  if (len <= TASK_SIZE - a.offset) return;
  back();
  fail(fmt::format("{} {}+{:#x} below TASK_SIZE ({:#x}), not '{}'", what, a.region, a.offset, TASK_SIZE, t_[i_].s));
}

int LineParser::prot() {
  static const std::pair<const char*, int> kProts[] = {
      {"none", PROT_NONE},           {"r", PROT_READ},  {"w", PROT_WRITE}, {"rw", PROT_READ | PROT_WRITE},
      {"rx", PROT_READ | PROT_EXEC}, {"rwx", PROT_READ | PROT_WRITE | PROT_EXEC}};
  if (!done())
    for (auto& [n, v] : kProts)
      if (t_[i_].s == n) {
        i_++;
        return v;
      }
  fail("a PROT (none, r, w, rw, rx, rwx)");
}

bool LineParser::yes_no() {
  if (accept("yes")) return true;
  if (accept("no")) return false;
  fail("'yes' or 'no'");
}

std::string LineParser::rest() {
  std::string r;
  while (!done()) r += (r.empty() ? "" : " ") + t_[i_++].s;
  return r;
}

bool LineParser::is_name(const std::string& s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

bool LineParser::parse_number(const std::string& s, uint64_t* out, bool* overflow) {
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

}  // namespace mmlab::parser
