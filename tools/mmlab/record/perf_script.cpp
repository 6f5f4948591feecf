// Splitting `perf script` lines (perf_script.h).
#include "record/perf_script.h"

#include <sys/mman.h>
#include <sys/sysmacros.h>

#include <cctype>

namespace mmlab::record {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool decimal(std::string_view s, int64_t* v) {
  bool neg = !s.empty() && s[0] == '-';
  if (neg) s.remove_prefix(1);
  if (!all_digits(s) || s.size() > 18) return false;
  int64_t x = 0;
  for (char c : s) x = x * 10 + (c - '0');
  *v = neg ? -x : x;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "SEC.NSEC" (nine digits of ns, as --ns prints).
bool parse_time(std::string_view s, uint64_t* ns) {
  size_t dot = s.find('.');
  if (dot == std::string_view::npos || s.size() - dot - 1 != 9) return false;
  int64_t sec = 0, frac = 0;
  if (!decimal(s.substr(0, dot), &sec) || sec < 0 || !all_digits(s.substr(dot + 1)) || !decimal(s.substr(dot + 1), &frac))
    return false;
  *ns = static_cast<uint64_t>(sec) * 1000000000ull + static_cast<uint64_t>(frac);
  return true;
}

// The header at the '[' at `open`: " PID/TID [CPU] TIME: ". false if the
// bracket does not start one.
bool header_at(std::string_view line, size_t open, PerfLine* out, size_t* after) {
  std::string_view before = line.substr(0, open);
  while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
  size_t sp = before.rfind(' ');
  std::string_view ids = sp == std::string_view::npos ? before : before.substr(sp + 1);
  size_t slash = ids.find('/');
  if (slash == std::string_view::npos || !decimal(ids.substr(0, slash), &out->pid) || !decimal(ids.substr(slash + 1), &out->tid))
    return false;
  size_t close = line.find(']', open);
  int64_t cpu = 0;
  if (close == std::string_view::npos || !decimal(line.substr(open + 1, close - open - 1), &cpu)) return false;
  size_t t0 = close + 1;
  while (t0 < line.size() && line[t0] == ' ') t0++;
  size_t colon = line.find(':', t0);
  if (colon == std::string_view::npos || !parse_time(line.substr(t0, colon - t0), &out->t_ns)) return false;
  out->cpu = static_cast<int>(cpu);
  out->comm = sp == std::string_view::npos ? std::string_view{} : trim(before.substr(0, sp));
  *after = colon + 1;
  return true;
}

}  // namespace

int parse_perf_line(std::string_view line, PerfLine* out, LineKind* kind, std::string* why) {
  std::string_view t = trim(line);
  *kind = LineKind::kSkip;
  if (t.empty() || t[0] == '#') return 0;
  *out = PerfLine{};
  size_t after = std::string_view::npos;
  for (size_t open = line.find('['); open != std::string_view::npos; open = line.find('[', open + 1))
    if (header_at(line, open, out, &after)) break;
  if (after == std::string_view::npos) {
    *why = "no \"PID/TID [CPU] SEC.NSEC:\" header (perf script -F " "comm,tid,pid,cpu,time,event,trace --ns?)";
    return -1;
  }
  std::string_view body = trim(line.substr(after));
  size_t end = body.find(' ');
  std::string_view ev = end == std::string_view::npos ? body : body.substr(0, end);
  if (!ev.empty() && ev.back() == ':') ev.remove_suffix(1);
  if (ev.empty()) {
    *why = "no event name after the time";
    return -1;
  }
  out->event = ev;
  out->rest = end == std::string_view::npos ? std::string_view{} : trim(body.substr(end + 1));
  *kind = LineKind::kEvent;
  return 0;
}

bool perf_field(std::string_view rest, std::string_view name, std::string_view* value) {
  for (size_t p = rest.find(name); p != std::string_view::npos; p = rest.find(name, p + 1)) {
    if (p > 0 && rest[p - 1] != ' ' && rest[p - 1] != ',') continue;
    size_t q = p + name.size();
    if (q < rest.size() && rest[q] == '=') {
      size_t e = rest.find(' ', q + 1);
      *value = rest.substr(q + 1, e == std::string_view::npos ? std::string_view::npos : e - q - 1);
      return true;
    }
    if (q + 1 < rest.size() && rest[q] == ':' && rest[q + 1] == ' ') {
      size_t e = rest.find(',', q + 2);
      *value = trim(rest.substr(q + 2, e == std::string_view::npos ? std::string_view::npos : e - q - 2));
      return true;
    }
  }
  return false;
}

bool perf_number(std::string_view s, uint64_t* v) {
  s = trim(s);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    if (s.empty() || s.size() > 16) return false;
    uint64_t x = 0;
    for (char c : s) {
      int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
              : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
              : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                          : -1;
      if (d < 0) return false;
      x = x << 4 | static_cast<uint64_t>(d);
    }
    *v = x;
    return true;
  }
  int64_t d = 0;
  if (!decimal(s, &d)) return false;
  *v = static_cast<uint64_t>(d);
  return true;
}

bool perf_field_number(std::string_view rest, std::string_view name, uint64_t* v) {
  std::string_view s;
  return perf_field(rest, name, &s) && perf_number(s, v);
}

int parse_mmap2(std::string_view rest, Mmap2* out, std::string* why) {
  *out = Mmap2{};
  size_t open = rest.find('['), paren = rest.find('(', open), cparen = rest.find(')', paren), at = rest.find(" @ ", cparen),
         close = rest.find("]: ", at);
  if (open == std::string_view::npos || paren == std::string_view::npos || cparen == std::string_view::npos ||
      at == std::string_view::npos || close == std::string_view::npos) {
    *why = "an MMAP2 record without \"[START(LEN) @ PGOFF MAJ:MIN INO GEN]: PROT PATH\"";
    return -1;
  }
  std::string_view inner = rest.substr(at + 3, close - at - 3);  // "PGOFF MAJ:MIN INO GEN" or "PGOFF <BUILDID>"
  std::string_view words[4];
  int n = 0;
  for (size_t p = 0; p < inner.size() && n < 4;) {
    size_t e = inner.find(' ', p);
    if (e == std::string_view::npos) e = inner.size();
    if (e > p) words[n++] = inner.substr(p, e - p);
    p = e + 1;
  }
  uint64_t maj = 0, min = 0;
  size_t colon = n >= 2 ? words[1].find(':') : std::string_view::npos;
  bool ok = perf_number(rest.substr(open + 1, paren - open - 1), &out->start) &&
            perf_number(rest.substr(paren + 1, cparen - paren - 1), &out->len) && n >= 1 && perf_number(words[0], &out->pgoff);
  if (ok && n >= 3 && colon != std::string_view::npos)  // a build-id record (no dev:ino) keeps 0:0
    ok = perf_number("0x" + std::string(words[1].substr(0, colon)), &maj) &&
         perf_number("0x" + std::string(words[1].substr(colon + 1)), &min) && perf_number(words[2], &out->ino);
  std::string_view tail = rest.substr(close + 3);
  if (!ok || tail.size() < 4) {
    *why = "an MMAP2 record with a malformed start, length, offset, device or inode";
    return -1;
  }
  out->dev = makedev(static_cast<unsigned>(maj), static_cast<unsigned>(min));
  out->prot = (tail[0] == 'r' ? PROT_READ : 0) | (tail[1] == 'w' ? PROT_WRITE : 0) | (tail[2] == 'x' ? PROT_EXEC : 0);
  out->shared = tail[3] == 's';
  out->path = std::string(trim(tail.substr(4)));
  return 0;
}

}  // namespace mmlab::record
