// `mmlab stress`: the command line of the stress tester (stress.h, docs/STRESS.md).
#include <cstdio>
#include <cstdlib>
#include <charconv>
#include <fstream>
#include <sstream>
#include <set>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/explore.h"
#include "mmlab/system.h"
#include "mmlab/types.h"
#include "mmlab/tune.h"
#include "stress/stress.h"

namespace mmlab::cli {
namespace {

struct StressCli {
  unsigned threads = 4;
  double seconds = 0;
  uint64_t ops = 0;
  uint64_t seed = 1;
  uint64_t check_every = 1000;
  std::string mix, types = "default", ram = "4G", swap = "blkdev,file", movable, inject;
  std::vector<std::string> variants;
  bool debug_vm = false, plant = false, race_swapin = false, plant_hang = false;
  unsigned hang_seconds = 60;
  std::string sched;          // --sched pct|random
  std::string schedule;       // --schedule LINE (or @FILE)
  std::string schedule_out;   // --schedule-out FILE
  std::string line_build;     // the build a replayed line names
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(sep, pos);
    if (c == std::string::npos) c = s.size();
    out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

bool usage(const std::string& msg) {
  std::fprintf(stderr, "mmlab stress: %s\n", msg.c_str());
  return false;
}

bool parse_mix(const std::string& text, std::map<std::string, unsigned>* mix) {
  if (text.empty()) return true;
  const auto kinds = stress::op_kinds();
  for (const std::string& tok : split(text, ',')) {
    const auto eq = tok.find('=');
    const std::string k = tok.substr(0, eq);
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end())
      return usage(fmt::format("--mix: unknown operation '{}' (expected KIND=WEIGHT,...; kinds: {})", tok, fmt::join(kinds, ", ")));
    const std::string w = eq == std::string::npos ? "" : tok.substr(eq + 1);
    if (w.empty() || w.size() > 6 || w.find_first_not_of("0123456789") != std::string::npos)
      return usage(fmt::format("--mix: '{}': expected a weight 0..999999 after '='", tok));
    (*mix)[k] = static_cast<unsigned>(std::stoul(w));
  }
  // The weights the run would draw from, the defaults included: all zero
  // is no operation to run.
  unsigned total = 0;
  for (const std::string& k : kinds) total += mix->count(k) ? mix->at(k) : stress::default_weight(k);
  if (total == 0) return usage(fmt::format("--mix {}: gives every operation weight 0", text));
  return true;
}

// The memory types: "default" is every type but hugetlb-1G (a GiB of
// simulated RAM per page), "all" every type.
bool parse_types(const std::string& text, std::vector<std::string>* types) {
  const auto names = stress::type_names();
  if (text == "all" || text == "default") {
    for (const auto& n : names)
      if (text == "all" || n != "hugetlb-1G") types->push_back(n);
    return true;
  }
  for (const std::string& tok : split(text, ',')) {
    if (std::find(names.begin(), names.end(), tok) == names.end())
      return usage(fmt::format("--types: unknown memory type '{}' (expected all, default or a list of: {})", tok, fmt::join(names, ", ")));
    if (std::find(types->begin(), types->end(), tok) == types->end()) types->push_back(tok);
  }
  return true;
}

// --variants ITEM... (default: every gup.walk and gup.fast value; "none": none).
bool parse_stress_variants(const std::vector<std::string>& texts, std::vector<Variant>* out) {
  std::vector<std::string> t;
  for (const std::string& tok : texts.empty() ? std::vector<std::string>{"gup.walk=all", "gup.fast=all"} : texts)
    if (tok != "none") t.push_back(tok);
  std::string msg;
  return parse_variant_items(t, out, &msg) || usage("--variants: " + msg);
}

std::string repro_line(const StressCli& o, const stress::Config& c) {
  std::string s = fmt::format("mmlab stress --seed {} --threads {}", c.seed, c.threads);
  if (c.ops) s += fmt::format(" --ops {}", c.ops);
  if (c.seconds > 0) s += fmt::format(" --seconds {}", c.seconds);
  if (!o.mix.empty()) s += " --mix " + o.mix;
  s += fmt::format(" --types {}", fmt::join(c.types, ","));
  for (const auto& v : o.variants) s += " --variants " + v;
  if (c.check_every != 1000) s += fmt::format(" --check-every {}", c.check_every);
  if (c.ram != (4ull << 30)) s += " --ram " + o.ram;
  if (o.swap != "blkdev,file") s += " --swap " + o.swap;
  if (!o.movable.empty()) s += " --movable " + o.movable;
  if (!o.inject.empty()) s += " --inject " + o.inject;
  if (o.race_swapin) s += " --race-swapin-failure";
  if (o.hang_seconds != 60) s += fmt::format(" --hang-seconds {}", o.hang_seconds);
  if (c.sched != stress::Sched::kFree) s += fmt::format(" --sched {}", stress::sched_name(c.sched));
  if (c.plant_corruption) s += " --plant-corruption";
  return s;
}

// ---- the schedule line of a run under the scheduler -----------------------
//
//   mmlab-stress-schedule v1 build=COMMIT hash=RUNHASH args=OPTIONS rounds=H:C/H:C/...
//
// args: the run's options (the reproduce line's, %-escaped), so that the
// line alone makes the same run; rounds: each round's step hash and
// run-length encoded choices (stress.h format_rounds).

constexpr std::string_view kLineHead = "mmlab-stress-schedule";

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '%' ? "%25" : ch == ' ' ? "%20" : std::string(1, ch);
  return out;
}

bool unescape(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    unsigned v = 0;
    if (i + 2 >= s.size() + 0 || std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr != s.data() + i + 3) return false;
    *out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

std::string stress_line(const StressCli& o, const stress::Config& c, const stress::Result& r) {
  std::string args = repro_line(o, c).substr(std::string_view("mmlab stress ").size());
  return fmt::format("{} v1 build={} hash={:016x} args={} rounds={}", kLineHead, build_commit(), r.run_hash, escape(args),
                     stress::format_rounds(r.rounds));
}

// The options of a line's args into `o` (the reproduce line's options only).
bool parse_line_args(const std::string& args, StressCli* o, std::string* err) {
  std::vector<std::string> toks;
  for (const std::string& t : split(args, ' '))
    if (!t.empty()) toks.push_back(t);
  const auto num = [&](const std::string& opt, const std::string& v, uint64_t* out) {
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    if (ec != std::errc{} || p != v.data() + v.size() || v.empty()) {
      *err = fmt::format("args: {} '{}': expected a number", opt, v);
      return false;
    }
    return true;
  };
  for (size_t i = 0; i < toks.size(); i++) {
    const std::string& t = toks[i];
    if (t == "--race-swapin-failure") { o->race_swapin = true; continue; }
    if (t == "--plant-corruption") { o->plant = true; continue; }
    if (i + 1 >= toks.size()) {
      *err = fmt::format("args: '{}' without a value", t);
      return false;
    }
    const std::string& v = toks[++i];
    uint64_t n = 0;
    if (t == "--seed") { if (!num(t, v, &o->seed)) return false; }
    else if (t == "--ops") { if (!num(t, v, &o->ops)) return false; }
    else if (t == "--check-every") { if (!num(t, v, &o->check_every) || o->check_every == 0) return *err = "args: --check-every: expected at least 1", false; }
    else if (t == "--threads") {
      if (!num(t, v, &n) || n < 1 || n > 64) return *err = fmt::format("args: --threads '{}': expected 1..64", v), false;
      o->threads = static_cast<unsigned>(n);
    } else if (t == "--hang-seconds") {
      if (!num(t, v, &n) || n < 1 || n > 3600) return *err = fmt::format("args: --hang-seconds '{}': expected 1..3600", v), false;
      o->hang_seconds = static_cast<unsigned>(n);
    }
    else if (t == "--mix") o->mix = v;
    else if (t == "--types") o->types = v;
    else if (t == "--variants") o->variants.push_back(v);
    else if (t == "--ram") o->ram = v;
    else if (t == "--swap") o->swap = v;
    else if (t == "--movable") o->movable = v;
    else if (t == "--inject") o->inject = v;
    else if (t == "--sched") o->sched = v;
    else {
      *err = fmt::format("args: unknown option '{}'", t);
      return false;
    }
  }
  if (o->sched.empty()) return *err = "args: no --sched (the line is not of a run under the scheduler)", false;
  return true;
}

// A schedule line (or @FILE holding one) into the options of its run and
// the rounds to replay; false with *err naming the bad token.
bool parse_stress_line(const std::string& text, StressCli* o, std::string* rounds, std::string* err) {
  std::string line = text;
  if (!line.empty() && line[0] == '@') {
    std::ifstream f(line.substr(1));
    if (!f) return *err = fmt::format("cannot read '{}'", line.substr(1)), false;
    std::stringstream ss;
    ss << f.rdbuf();
    line = ss.str();
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.pop_back();
  }
  std::vector<std::string> toks;
  for (const std::string& t : split(line, ' '))
    if (!t.empty()) toks.push_back(t);
  if (toks.size() < 2 || toks[0] != kLineHead)
    return *err = fmt::format("'{}': expected a line that begins '{} v1'", line.substr(0, 40), kLineHead), false;
  if (toks[1] != "v1") return *err = fmt::format("'{}': this build reads version v1", toks[1]), false;
  bool have_args = false, have_rounds = false;
  for (size_t i = 2; i < toks.size(); i++) {
    const size_t eq = toks[i].find('=');
    const std::string key = toks[i].substr(0, eq), val = eq == std::string::npos ? "" : toks[i].substr(eq + 1);
    if (eq == std::string::npos) return *err = fmt::format("'{}': expected KEY=VALUE", toks[i].substr(0, 40)), false;
    if (key == "hash") continue;  // the rounds carry the check, each its own hash
    if (key == "build") {
      o->line_build = val;  // told on a divergence
      continue;
    }
    if (key == "args") {
      std::string args;
      if (!unescape(val, &args)) return *err = fmt::format("args: '{}': a bad %-escape", val.substr(0, 40)), false;
      if (!parse_line_args(args, o, err)) return false;
      have_args = true;
    } else if (key == "rounds") {
      std::vector<stress::Round> rs;
      if (!stress::parse_rounds(val, &rs, err)) return *err = "rounds: " + *err, false;
      *rounds = val;
      have_rounds = true;
    } else {
      return *err = fmt::format("'{}': unknown key '{}'", toks[i].substr(0, 40), key), false;
    }
  }
  if (!have_args || !have_rounds) return *err = fmt::format("the line has no {}=", have_args ? "rounds" : "args"), false;
  return true;
}

// Under the scheduler: the rounds, their steps and the run's hash (the
// same for the same seed and build), and the schedule line: shown when the
// run failed (unless very long), saved by --schedule-out.
void print_schedule(const StressCli& o, const stress::Config& c, const stress::Result& r) {
  const double el = r.elapsed_s > 0 ? r.elapsed_s : 1e-9;
  std::printf("scheduler: %s%s, %zu rounds (%.1f runs/s), %llu steps (%.0f steps/s), run hash %016llx\n",
              stress::sched_name(c.sched), c.replay.empty() ? "" : " (replayed)", r.rounds.size(),
              static_cast<double>(r.rounds.size()) / el, static_cast<unsigned long long>(r.sched_steps),
              static_cast<double>(r.sched_steps) / el, static_cast<unsigned long long>(r.run_hash));
  if (!c.replay.empty() && !r.ok() && !o.line_build.empty() && o.line_build != build_commit())
    std::printf("schedule: the line is from build %s, this is %s\n", o.line_build.c_str(), build_commit());
  const std::string line = stress_line(o, c, r);
  if (!o.schedule_out.empty()) {
    std::ofstream f(o.schedule_out);
    f << line << "\n";
    std::printf("schedule line saved to %s (%zu bytes): mmlab stress --schedule @%s\n", o.schedule_out.c_str(), line.size(),
                o.schedule_out.c_str());
  }
  if (r.ok() || !c.replay.empty()) return;
  if (line.size() <= (64u << 10)) std::printf("schedule: %s\n", line.c_str());
  else std::printf("schedule: %zu bytes, not shown (--schedule-out FILE saves it)\n", line.size());
}

// The report, at the end or, on a hang, with what the run has so far
// (r.hangs says where it stuck). Returns the exit status.
int print_report(const StressCli& o, const stress::Config& c, const stress::Result& r) {
  std::printf("operations (%u threads, %.1f s, %.0f ops/s):\n", c.threads, r.elapsed_s,
              r.elapsed_s > 0 ? static_cast<double>(r.total_ops()) / r.elapsed_s : 0.0);
  for (const auto& k : stress::op_kinds())
    std::printf("  %-10s %10llu\n", k.c_str(), static_cast<unsigned long long>(r.ops.count(k) ? r.ops.at(k) : 0));
  std::printf("  khugepaged: %ld full scans, %ld pages collapsed\n", r.khugepaged_full_scans, r.khugepaged_collapsed);
  if (!r.errors.empty()) {
    std::printf("expected errors returned:\n");
    for (const auto& [k, v] : r.errors) std::printf("  %-28s %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  }
  if (!r.injected.empty()) {
    // Every site: one that injected nothing tested nothing, and says so.
    std::printf("injected failures (%s):\n", o.inject.empty() ? "--race-swapin-failure" : ("--inject " + o.inject).c_str());
    for (const auto& [k, v] : r.injected)
      std::printf("  %-28s %llu%s\n", k.c_str(), static_cast<unsigned long long>(v), v ? "" : "  (injected nothing)");
  }
  std::printf("statistics:\n");
  for (const auto& [k, v] : r.stats) std::printf("  %-40s %lld\n", k.c_str(), static_cast<long long>(v));
  for (const auto& [k, why] : r.not_run) std::printf("not run: %s (%s)\n", k.c_str(), why.c_str());
  std::printf("memory types run: %s\n", fmt::format("{}", fmt::join(r.types_run, ",")).c_str());
  for (const auto& v : r.violations) std::printf("VIOLATION: %s\n", v.c_str());
  for (const auto& m : r.mismatches) std::printf("DATA MISMATCH: %s\n", m.c_str());
  for (const auto& h : r.hangs) std::printf("HANG: %s\n", h.c_str());
  std::printf("checker runs: %llu; violations: %zu; data mismatches: %llu; frames leaked: %llu%s\n",
              static_cast<unsigned long long>(r.checks), r.violations.size(), static_cast<unsigned long long>(r.nr_mismatches),
              static_cast<unsigned long long>(r.frames_leaked), r.hangs.empty() ? "" : "; hung: the report is partial");
  std::printf("reproduce: %s\n", repro_line(o, c).c_str());
  if (c.sched != stress::Sched::kFree) print_schedule(o, c, r);
  if (!r.ok()) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("no violation in %llu operations\n", static_cast<unsigned long long>(r.total_ops()));
  return 0;
}

// The options into the engine's Config; false (and a usage message) on a bad one.
bool stress_config(StressCli& o, stress::Config* c) {
  if (const char* e = std::getenv("MMLAB_DEBUG_VM"); e && std::string(e) == "all") o.debug_vm = true;
  c->threads = o.threads;
  c->seconds = o.seconds;
  c->ops = o.ops;
  c->seed = o.seed;
  c->check_every = o.debug_vm ? 1 : o.check_every;
  c->plant_corruption = o.plant;
  c->race_swapin_failure = o.race_swapin;
  c->plant_teardown_hang = o.plant_hang;
  c->hang_seconds = o.hang_seconds;
  if (!parse_mix(o.mix, &c->mix) || !parse_types(o.types, &c->types) || !parse_stress_variants(o.variants, &c->variants)) return false;
  if (std::string msg; !parse_ram_option("--ram", o.ram, 0, &c->ram, &msg)) return usage(msg);
  if (!o.movable.empty()) {
    uint64_t m = 0;
    if (parse_size(o.movable, &m) != SizeParse::kOk || m % (4ull << 20) || m >= c->ram)
      return usage(fmt::format("--movable {}: expected a multiple of 4M below --ram (or 0)", o.movable));
    c->movable = static_cast<int64_t>(m);
  }
  c->swap_blkdev = c->swap_file = false;
  for (const std::string& tok : split(o.swap, ',')) {
    if (tok == "blkdev") c->swap_blkdev = true;
    else if (tok == "file") c->swap_file = true;
    else if (tok == "zram") c->swap_zram = true;
    else if (tok != "none")
      return usage(fmt::format("--swap: unknown swap device '{}' (expected blkdev, file, zram, a list as blkdev,file, or none)", tok));
  }
  if (!o.inject.empty() && (!parse_probability(o.inject, &c->inject_rate) || c->inject_rate <= 0))
    return usage(fmt::format("--inject {}: expected a failure rate above 0 and at most 1, as 0.01 or 1%", o.inject));
  if (!o.sched.empty()) {
    if (o.sched == "pct") c->sched = stress::Sched::kPct;
    else if (o.sched == "random") c->sched = stress::Sched::kRandom;
    else return usage(fmt::format("--sched '{}': expected pct or random", o.sched));
    if (!explore::available()) return usage(fmt::format("--sched {}: {}", o.sched, explore::unavailable_reason()));
    if (c->seconds > 0) return usage("--seconds: the scheduler takes no wall clock (give --ops)");
    if (c->ops == 0) c->ops = 10000;
  }
  if (c->ops == 0 && c->seconds <= 0) c->seconds = 10;
  return true;
}

// The options a schedule line carries itself: none of them may be given
// with --schedule.
constexpr const char* kLineOptions[] = {"--threads", "--seconds", "--ops",     "--seed",   "--check-every",
                                        "--mix",     "--types",   "--variants", "--ram",   "--movable",
                                        "--swap",    "--inject",  "--debug-vm", "--sched", "--plant-corruption",
                                        "--race-swapin-failure"};

int run_stress(StressCli o, const CLI::App* sub) {
  if (!o.sched.empty() || !o.schedule.empty()) stress::deterministic_allocator();  // before the line is read
  stress::Config c;
  std::string rounds;
  if (!o.schedule.empty()) {
    for (const char* opt : kLineOptions)
      if (sub->count(opt)) {
        (void)usage(fmt::format("{}: --schedule replays the line's own options; give it alone", opt));
        return 2;
      }
    std::string err;
    StressCli from_line;
    from_line.schedule = o.schedule;
    from_line.schedule_out = o.schedule_out;
    if (!parse_stress_line(o.schedule, &from_line, &rounds, &err)) {
      (void)usage("--schedule: " + err);
      return 2;
    }
    o = std::move(from_line);
  } else if (sub->count("--sched") && sub->count("--seconds")) {
    (void)usage("--seconds: the scheduler takes no wall clock (give --ops)");
    return 2;
  }
  if (!stress_config(o, &c)) return 2;
  c.replay = rounds;
  // Not under the scheduler: the progress line's thread allocates while the
  // workers run, which would move their objects' addresses (stress.cpp run()).
  c.progress = c.sched == stress::Sched::kFree;
  c.on_hang = [&o, &c](const stress::Result& partial) { (void)print_report(o, c, partial); };
  stress::Result r;
  std::string err;
  if (!stress::run(c, &r, &err)) {
    std::fprintf(stderr, "mmlab stress: %s\n", err.c_str());
    return 1;
  }
  return print_report(o, c, r);
}

}  // namespace

void add_stress(CLI::App& app) {
  auto o = std::make_shared<StressCli>();
  CLI::App* sub = app.add_subcommand("stress", "threads running a random mix of mm operations at once, with a data tracker "
                                               "and the invariant checker (docs/STRESS.md)");
  sub->add_option("--threads", o->threads, "worker threads (default 4)")->check(unsigned_number() & CLI::Range(1u, 64u));
  sub->add_option("--seconds", o->seconds, "stop after this long (default 10 when --ops is not given)")
      ->check(finite_range(0.0, 86400.0));
  sub->add_option("--ops", o->ops, "stop after this many operations in all")->check(unsigned_number());
  sub->add_option("--seed", o->seed, "seed of the per-thread random streams (default 1)")->check(unsigned_number());
  sub->add_option("--check-every", o->check_every, "operations per thread between stop-the-world checker runs (default 1000)")
      ->check(unsigned_number() & CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  sub->add_option("--mix", o->mix, "operation weights KIND=WEIGHT,... (the others keep their default weight)");
  sub->add_option("--types", o->types, "memory types: default (all but hugetlb-1G), all, or a comma list");
  sub->add_option("--variants", o->variants,
                  "tune KEY=VALUE,... switched between at random (default gup.walk=all gup.fast=all; 'none' switches nothing)");
  sub->add_option("--ram", o->ram, "simulated RAM (default 4G)");
  sub->add_option("--movable", o->movable, "ZONE_MOVABLE size, where FOLL_LONGTERM pins migrate from (default a quarter of --ram; 0: none)");
  sub->add_option("--swap", o->swap, "swap devices: blkdev,file (default), a list of blkdev, file and zram, or none");
  sub->add_option("--inject", o->inject,
                  "fault injection: every site fails each call with this probability (0.01 or 1%); "
                  "the failures are expected outcomes");
  sub->add_flag("--debug-vm", o->debug_vm, "run the checker after every operation (also MMLAB_DEBUG_VM=all)");
  sub->add_flag("--plant-corruption", o->plant, "test only: change one byte behind the tracker's back (the run must fail)")
      ->group("");
  sub->add_flag("--race-swapin-failure", o->race_swapin,
                "test only: every swap-in fails, and one sticks to a page between its MADV_PAGEOUT and the tracker's mark")
      ->group("");
  sub->add_flag("--plant-teardown-hang", o->plant_hang, "test only: the teardown blocks for good (the watchdog must report it)")
      ->group("");
  sub->add_option("--hang-seconds", o->hang_seconds, "a phase without progress this long is a hang (default 60)")
      ->check(unsigned_number() & CLI::Range(1u, 3600u));
  sub->add_option("--sched", o->sched,
                  "run the workers under the deterministic scheduler: pct or random (the seed alone reproduces the run; "
                  "needs --ops, default 10000)");
  sub->add_option("--schedule", o->schedule, "replay a run under the scheduler from its schedule line (or @FILE holding it)");
  sub->add_option("--schedule-out", o->schedule_out, "under the scheduler: save the run's schedule line in this file");
  add_trace_options(sub);
  register_action(sub, [o, sub] { return run_stress(*o, sub); });
}

}  // namespace mmlab::cli
