#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>

#include <memory>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/system.h"
#include "mmlab/tune.h"
#include "mmlab/trace.h"

namespace mmlab::cli {
namespace {
std::map<CLI::App*, std::function<int()>>& actions() {
  static std::map<CLI::App*, std::function<int()>> a;
  return a;
}
}  // namespace

void register_action(CLI::App* sub, std::function<int()> action) { actions()[sub] = std::move(action); }

namespace {
std::string& command_line_text() {
  static std::string s;
  return s;
}
}  // namespace

void set_command_line(int argc, char** argv) {
  std::string& s = command_line_text();
  s.clear();
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t'\"$`\\") == std::string::npos;
    s += (i ? " " : "") + (plain ? a : "'" + a + "'");
  }
}

const std::string& command_line() { return command_line_text(); }

namespace {
struct TraceCli {
  std::string file, format, buffer;
  std::vector<std::string> events;
};
std::map<CLI::App*, std::shared_ptr<TraceCli>>& traces() {
  static std::map<CLI::App*, std::shared_ptr<TraceCli>> t;
  return t;
}

int run_traced(CLI::App* sub, const std::function<int()>& action) {
  auto it = traces().find(sub);
  if (it == traces().end() || it->second->file.empty()) return action();
  const TraceCli& t = *it->second;
  const trace::Format f = t.format.empty() ? trace::format_for(t.file)
                          : t.format == "json" ? trace::Format::kChromeJson
                                               : trace::Format::kFtrace;
  trace::Options opt;
  opt.events = t.events;
  if (!t.buffer.empty()) {
    const SizeParse p = parse_size(t.buffer, &opt.buffer_bytes);
    if (p != SizeParse::kOk || !opt.buffer_bytes) {
      std::cerr << "mmlab " << sub->get_name() << ": --trace-buffer " << t.buffer << ": "
                << (p == SizeParse::kTooLarge ? "too large" : "not a size (e.g. 64M)") << "\n";
      return 2;
    }
  }
  std::string err;
  if (trace::start(t.file, f, &err, opt)) {
    std::cerr << "mmlab " << sub->get_name() << ": --trace " << t.file << ": " << err << "\n";
    return 2;
  }
  const int rc = action();
  trace::Totals tot;
  if (trace::stop(&err, &tot)) {
    std::cerr << "mmlab " << sub->get_name() << ": --trace " << t.file << ": " << err << "\n";
    return rc ? rc : 1;
  }
  if (tot.kept < tot.written)
    std::cerr << fmt::format("mmlab {}: --trace {}: the buffer kept the newest {} of {} events ({} dropped)\n",
                             sub->get_name(), t.file, tot.kept, tot.written, tot.written - tot.kept);
  return rc;
}
}  // namespace

void add_trace_options(CLI::App* sub) {
  auto t = std::make_shared<TraceCli>();
  traces()[sub] = t;
  sub->add_option("--trace", t->file,
                  "record the model's events (kernel tracepoint names: mm_page_alloc, mm_fault, gup_call, ...) into "
                  "FILE; docs/TRACING.md");
  sub->add_option("--trace-format", t->format, "ftrace (text, the default) or json (Chrome/Perfetto; the default for *.json)")
      ->check(CLI::IsMember({"ftrace", "json"}));
  sub->add_option("--trace-events", t->events, "GLOB[,GLOB...]: record only the events whose names match (e.g. 'mm_fault*,gup_*')")
      ->delimiter(',')
      ->allow_extra_args(false);
  sub->add_option("--trace-buffer", t->buffer,
                  "SIZE: keep the trace in a ring of about SIZE bytes (e.g. 64M), the newest events, and say how many "
                  "were dropped (default: every event)");
}

int run_selected(CLI::App& app) {
  for (auto* sub : app.get_subcommands())
    if (auto it = actions().find(sub); it != actions().end()) return run_traced(sub, it->second);
  return 2;
}

SizeParse parse_size(const std::string& s, uint64_t* out) {
  if (s.empty()) return SizeParse::kMalformed;
  unsigned shift = 0;
  std::string body = s;
  switch (body.back()) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
  }
  if (shift) body.pop_back();
  if (body.empty() || body.find_first_not_of("0123456789") != std::string::npos) return SizeParse::kMalformed;
  uint64_t v = 0;
  for (char c : body)
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<uint64_t>(c - '0'), &v))
      return SizeParse::kTooLarge;
  if (v > (~0ull >> shift)) return SizeParse::kTooLarge;  // would wrap: another size than written
  *out = v << shift;
  return SizeParse::kOk;
}

std::string size_text(uint64_t bytes) {
  static const std::pair<unsigned, const char*> kUnits[] = {{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}};
  for (auto& [shift, unit] : kUnits)
    if (bytes && bytes % (1ull << shift) == 0) return std::to_string(bytes >> shift) + unit;
  return std::to_string(bytes);
}

bool parse_size_option(const std::string& opt, const std::string& s, uint64_t multiple, uint64_t min, uint64_t max,
                       const std::string& max_why, uint64_t* out, std::string* msg) {
  uint64_t v = 0;
  const SizeParse p = parse_size(s, &v);
  const std::string head = opt + " " + (s.empty() ? std::string("''") : s) + ": ";
  if (p == SizeParse::kMalformed) {
    *msg = head + "not a size (a number with an optional K, M, G or T suffix, e.g. 4G)";
    return false;
  }
  if (p == SizeParse::kTooLarge || v > max) {
    *msg = head + "too large: at most " + size_text(max) + " (" + max_why + ")";
    return false;
  }
  if (multiple && v % multiple) {
    *msg = head + "not a multiple of " + size_text(multiple);
    return false;
  }
  if (v < min) {
    *msg = head + "too small: at least " + size_text(min);
    return false;
  }
  *out = v;
  return true;
}

void add_parallel_options(CLI::App* sub, ParallelCli* o) {
  sub->add_option("-j,--jobs", o->jobs, "tests run at once on the model, each on its own thread and System (default: one per CPU)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--ram", o->ram, "simulated RAM of each test's System (default 4G)");
  sub->add_option("--mem-budget", o->mem_budget,
                  "host memory the tests' frame stores may use at once (default: the host's available memory); "
                  "fewer tests run at once where they would not fit");
}

TestFilter FilterCli::tests() const {
  TestFilter f;
  for (auto& g : filter) f.add(g);
  for (auto& g : exclude) f.exclude.push_back(g);
  return f;
}

void add_filter_options(CLI::App* sub, FilterCli* o, const char* what) {
  sub->add_option("--filter", o->filter,
                  fmt::format("only {} whose name matches this glob; repeatable (any of them), '!GLOB' excludes", what))
      ->allow_extra_args(false);  // one glob per --filter: the files after it stay files
  sub->add_option("--exclude", o->exclude, fmt::format("leave out {} whose name matches this glob; repeatable", what))
      ->allow_extra_args(false);
}

std::string no_test_message(const TestFilter& f) {
  return f.empty() ? "the files hold no test" : "no test matches the filter (" + f.text() + ")";
}

bool parse_ram_option(const std::string& opt, const std::string& s, uint64_t budget, uint64_t* out, std::string* msg) {
  constexpr uint64_t kBlock = 4ull << 20;  // the page allocator's largest block
  const uint64_t max = system_max_ram_bytes();
  const std::string why = max == (1ull << 42) - kBlock ? "4T less 4M: the largest memmap a System can have" : "the largest memmap a System can have";
  uint64_t ram = 0;
  if (!parse_size_option(opt, s, kBlock, kBlock, max, why, &ram, msg)) return false;
  // Making the System touches its memmap whatever then runs: a size the
  // host cannot hold is refused here, not thrashed through.
  const char* of = budget ? "--mem-budget" : "the host's available memory";
  if (!budget) budget = host_memory_available();
  if (const uint64_t need = system_host_memory(ram).at_create; budget && need > budget) {
    *msg = fmt::format("{} {}: a System of that size takes {} MiB of host memory when it is made (its memmap), more than {} ({} MiB)",
                       opt, s, need >> 20, of, budget >> 20);
    return false;
  }
  *out = ram;
  return true;
}

bool parse_parallel_options(const char* cmd, const ParallelCli& o, int* jobs, uint64_t* ram, uint64_t* budget) {
  *jobs = o.jobs;
  *budget = 0;
  std::string msg;
  if (!o.mem_budget.empty() && !parse_size_option("--mem-budget", o.mem_budget, 0, 1, ~0ull, "", budget, &msg)) {
    std::cerr << "mmlab " << cmd << ": " << msg << "\n";
    return false;
  }
  if (!parse_ram_option("--ram", o.ram, *budget, ram, &msg)) {
    std::cerr << "mmlab " << cmd << ": " << msg << "\n";
    return false;
  }
  return true;
}

bool parse_variant_item(const std::string& item, Variant* out, std::string* msg) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
    *msg = "'" + item + "': expected KEY=VALUE[,VALUE...] (keys: " + tune_choices_text() + ")";
    return false;
  }
  const std::string key = item.substr(0, eq), rest = item.substr(eq + 1);
  if (tune_values_text(key).empty()) {
    *msg = "unknown tune key '" + key + "' (keys: " + tune_choices_text() + ")";
    return false;
  }
  std::vector<std::string> values;
  if (rest == "all" || rest == "others") {
    for (const std::string& v : tune_values(key))
      if (rest == "all" || v != tune_default(key)) values.push_back(v);
  } else {
    values = split_list(rest);
  }
  for (size_t i = 0; i < values.size(); i++) {
    const std::string& v = values[i];
    if (!tune_value_known(key, v)) {
      *msg = "'" + v + "' is not a value of " + key + " (values: " + tune_values_text(key) + ")";
      return false;
    }
    // Each value is a run (or a switch) of its own, named by it: twice
    // would be two results under one name.
    if (std::find(values.begin(), values.begin() + static_cast<long>(i), v) != values.begin() + static_cast<long>(i)) {
      *msg = "'" + item + "': names " + key + "=" + v + " twice";
      return false;
    }
  }
  *out = {key, values};
  return true;
}

bool parse_variant_items(const std::vector<std::string>& items, std::vector<Variant>* out, std::string* msg) {
  for (const std::string& item : items) {
    Variant v;
    if (!parse_variant_item(item, &v, msg)) return false;
    for (const Variant& seen : *out)
      if (seen.first == v.first) {
        *msg = "'" + item + "': " + v.first + " is named by another item too";
        return false;
      }
    out->push_back(v);
  }
  return true;
}

CLI::Validator finite_range(double min, double max) {
  const std::string range = fmt::format("[{} - {}]", min, max);
  return CLI::Validator(
      [min, max, range](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end || !std::isfinite(v)) return "Value " + s + " not in range " + range + " (not a finite number)";
        if (v < min || v > max) return "Value " + s + " not in range " + range;
        return "";
      },
      "FLOAT in " + range);
}

CLI::Validator unsigned_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        bool ok = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
        for (size_t i = 0; ok && i < s.size(); i++)
          ok = !__builtin_mul_overflow(v, 10u, &v) && !__builtin_add_overflow(v, static_cast<uint64_t>(s[i] - '0'), &v);
        return ok ? "" : "Value " + s + " is not a number from 0 to 18446744073709551615";
      },
      "UINT");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    if (c == std::string::npos) c = s.size();
    if (c > pos) out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

}  // namespace mmlab::cli
