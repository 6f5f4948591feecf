// The schedule line of the explorer (issue 34 item 5, docs/RACES.md): its
// format both ways, and what explore.cpp's replay shares with it.
#include "process/schedule_line.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

#include "mmlab/types.h"
#include "sync/sched.h"

namespace mmlab::explore {

std::string encode_schedule(const std::vector<uint8_t>& choices) {
  std::string r;
  for (size_t i = 0; i < choices.size();) {
    size_t j = i;
    while (j < choices.size() && choices[j] == choices[i]) j++;
    if (!r.empty()) r += ',';
    r += std::to_string(choices[i]) + "*" + std::to_string(j - i);
    i = j;
  }
  return r;
}

std::optional<std::vector<uint8_t>> decode_schedule(std::string_view s) {
  std::vector<uint8_t> out;
  if (s.empty()) return out;
  for (bool more = true; more;) {
    const size_t comma = s.find(',');
    std::string_view run = s.substr(0, comma);
    more = comma != std::string_view::npos;  // "1*2," ends in an empty run: malformed
    s = more ? s.substr(comma + 1) : std::string_view{};
    const size_t star = run.find('*');
    unsigned t = 0;
    uint64_t n = 1;
    std::string_view ts = run.substr(0, star);
    auto r1 = std::from_chars(ts.data(), ts.data() + ts.size(), t);
    if (ts.empty() || r1.ec != std::errc{} || r1.ptr != ts.data() + ts.size() || t > 255) return std::nullopt;
    if (star != std::string_view::npos) {
      std::string_view ns = run.substr(star + 1);
      auto r2 = std::from_chars(ns.data(), ns.data() + ns.size(), n);
      if (ns.empty() || r2.ec != std::errc{} || r2.ptr != ns.data() + ns.size() || n == 0 || n > 100'000'000)
        return std::nullopt;
    }
    out.insert(out.end(), n, static_cast<uint8_t>(t));
  }
  return out;
}

namespace {

// %-escapes what would break the line's tokens: space, %, and the list
// separators , ; of the fields that are lists.
std::string line_escape(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == ' ' || c == '%' || c == ',' || c == ';' || c == '"' || c < 0x20) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      r += buf;
    } else {
      r += c;
    }
  }
  return r;
}

std::optional<std::string> line_unescape(std::string_view s) {
  std::string r;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '%') {
      r += s[i];
      continue;
    }
    unsigned v = 0;
    if (i + 2 >= s.size()) return std::nullopt;
    auto res = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (res.ec != std::errc{} || res.ptr != s.data() + i + 3) return std::nullopt;
    r += static_cast<char>(v);
    i += 2;
  }
  return r;
}

}  // namespace

std::vector<std::string_view> split_on(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  if (s.empty()) return out;
  for (;;) {
    const size_t p = s.find(sep);
    out.push_back(s.substr(0, p));
    if (p == std::string_view::npos) break;
    s = s.substr(p + 1);
  }
  return out;
}

namespace {

constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int digit_value(char c) {
  const char* p = std::strchr(kDigits, c);
  return c && p ? static_cast<int>(p - kDigits) : -1;
}

}  // namespace

std::string format_line(const ScheduleLine& l) {
  std::string r = "mmlab-schedule v" + std::to_string(kLineVersion);
  r += " build=" + line_escape(l.build.empty() ? "-" : l.build);
  r += " test=" + line_escape(l.test.empty() ? "-" : l.test);
  r += " tune=" + (l.tune.empty() ? std::string("-") : line_escape(l.tune));
  r += " threads=";
  for (size_t i = 0; i < l.threads.size(); i++) r += (i ? "," : "") + line_escape(l.threads[i]);
  r += " choices=" + encode_schedule(l.choices);
  if (l.has_hash) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, l.hash);
    r += std::string(" hash=") + buf;
  }
  if (!l.steps.empty()) {
    r += " sites=";
    for (size_t i = 0; i < l.sites.size(); i++) r += (i ? ";" : "") + line_escape(l.sites[i]);
    const bool two = l.sites.size() > 64;
    r += " steps=";
    for (uint32_t s : l.steps) {
      if (two) r += kDigits[(s >> 6) & 63];
      r += kDigits[s & 63];
    }
  }
  return r;
}

std::optional<ScheduleLine> parse_line(std::string_view s, std::string* err) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  ScheduleLine l;
  if (s.substr(0, 14) != "mmlab-schedule") {
    auto c = decode_schedule(s);
    if (!c) {
      *err = "malformed schedule '" + std::string(s) + "'";
      return std::nullopt;
    }
    l.choices = std::move(*c);
    return l;
  }
  std::vector<std::string_view> toks;
  for (std::string_view t : split_on(s, ' '))
    if (!t.empty()) toks.push_back(t);
  if (toks.size() < 2 || toks[1] != "v" + std::to_string(kLineVersion)) {
    *err = "schedule line: unknown format version '" + std::string(toks.size() > 1 ? toks[1] : "") +
           "' (this build reads v" + std::to_string(kLineVersion) + ")";
    return std::nullopt;
  }
  std::string steps_text;
  bool have_choices = false;
  for (size_t i = 2; i < toks.size(); i++) {
    const std::string_view t = toks[i];
    const size_t eq = t.find('=');
    if (eq == std::string_view::npos) {
      *err = "schedule line: token '" + std::string(t) + "' is not key=value";
      return std::nullopt;
    }
    const std::string_view key = t.substr(0, eq), val = t.substr(eq + 1);
    auto bad = [&] {
      *err = "schedule line: bad value in '" + std::string(t) + "'";
      return std::nullopt;
    };
    if (key == "build" || key == "test" || key == "tune") {
      auto v = line_unescape(val);
      if (!v) return bad();
      if (*v == "-") v->clear();
      (key == "build" ? l.build : key == "test" ? l.test : l.tune) = *v;
    } else if (key == "threads") {
      for (std::string_view n : split_on(val, ',')) {
        auto v = line_unescape(n);
        if (!v) return bad();
        l.threads.push_back(*v);
      }
    } else if (key == "choices") {
      auto c = decode_schedule(val);
      if (!c) return bad();
      l.choices = std::move(*c);
      have_choices = true;
    } else if (key == "hash") {
      auto r = std::from_chars(val.data(), val.data() + val.size(), l.hash, 16);
      if (val.empty() || r.ec != std::errc{} || r.ptr != val.data() + val.size()) return bad();
      l.has_hash = true;
    } else if (key == "sites") {
      for (std::string_view n : split_on(val, ';')) {
        auto v = line_unescape(n);
        if (!v) return bad();
        l.sites.push_back(*v);
      }
    } else if (key == "steps") {
      steps_text = val;
    } else {
      *err = "schedule line: unknown key in '" + std::string(t) + "'";
      return std::nullopt;
    }
  }
  if (!have_choices) {
    *err = "schedule line: no choices=";
    return std::nullopt;
  }
  if (!steps_text.empty()) {
    const size_t width = l.sites.size() > 64 ? 2 : 1;
    if (steps_text.size() != l.choices.size() * width) {
      *err = "schedule line: steps= has " + std::to_string(steps_text.size() / width) + " steps, choices= " +
             std::to_string(l.choices.size());
      return std::nullopt;
    }
    for (size_t i = 0; i < steps_text.size(); i += width) {
      int v = 0;
      for (size_t j = 0; j < width; j++) {
        const int d = digit_value(steps_text[i + j]);
        if (d < 0) {
          *err = "schedule line: bad step digit '" + std::string(1, steps_text[i + j]) + "'";
          return std::nullopt;
        }
        v = v * 64 + d;
      }
      if (static_cast<size_t>(v) >= l.sites.size()) {
        *err = "schedule line: step " + std::to_string(i / width) + " names site " + std::to_string(v) + " of " +
               std::to_string(l.sites.size());
        return std::nullopt;
      }
      l.steps.push_back(static_cast<uint32_t>(v));
    }
  }
  return l;
}

std::string site_op(const char* site, uint8_t op) {
  return std::string(site) + ":" + sched::op_name(static_cast<sched::Op>(op));
}

std::string site_shown(std::string s) {
  const size_t colon = s.rfind(':');
  if (colon != std::string::npos) s[colon] = ' ';
  return s;
}

ScheduleLine line_from(const RunResult& r, const std::vector<uint8_t>& choices) {
  ScheduleLine l;
  l.build = build_commit();
  l.choices = choices;
  l.hash = r.trace_hash;
  l.has_hash = r.trace_hash != 0;  // 0: not known (a crashed run's steps, from the parent)
  std::map<std::string, uint32_t> index;
  for (const TraceStep& s : r.trace) {
    auto [it, fresh] = index.try_emplace(site_op(s.site, s.op), static_cast<uint32_t>(l.sites.size()));
    if (fresh) l.sites.push_back(it->first);
    l.steps.push_back(it->second);
  }
  return l;
}

}  // namespace mmlab::explore
