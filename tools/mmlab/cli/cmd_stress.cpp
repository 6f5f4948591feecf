// `mmlab stress`: the command line of the stress tester (stress.h, docs/STRESS.md).
#include <cstdio>
#include <cstdlib>
#include <set>

#include "cli/commands.h"
#include "fmt/format.h"
#include "mmlab/system.h"
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
  bool debug_vm = false, plant = false, race_swapin = false;
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
  std::vector<std::string> t = texts;
  if (t.empty()) t = {"gup.walk=all", "gup.fast=all"};
  for (const std::string& tok : t) {
    if (tok == "none") continue;
    Variant v;
    std::string msg;
    if (!parse_variant_item(tok, &v, &msg)) return usage("--variants: " + msg);
    out->push_back(v);
  }
  return true;
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
  return s;
}

int run_stress(StressCli o) {
  if (const char* e = std::getenv("MMLAB_DEBUG_VM"); e && std::string(e) == "all") o.debug_vm = true;
  stress::Config c;
  c.threads = o.threads;
  c.seconds = o.seconds;
  c.ops = o.ops;
  c.seed = o.seed;
  c.check_every = o.debug_vm ? 1 : o.check_every;
  c.plant_corruption = o.plant;
  c.race_swapin_failure = o.race_swapin;
  if (!parse_mix(o.mix, &c.mix) || !parse_types(o.types, &c.types) || !parse_stress_variants(o.variants, &c.variants)) return 2;
  if (std::string msg; !parse_ram_option("--ram", o.ram, &c.ram, &msg)) {
    usage(msg);
    return 2;
  }
  if (!o.movable.empty()) {
    uint64_t m = 0;
    if (parse_size(o.movable, &m) != SizeParse::kOk || m % (4ull << 20) || m >= c.ram) {
      usage(fmt::format("--movable {}: expected a multiple of 4M below --ram (or 0)", o.movable));
      return 2;
    }
    c.movable = static_cast<int64_t>(m);
  }
  c.swap_blkdev = c.swap_file = false;
  for (const std::string& tok : split(o.swap, ',')) {
    if (tok == "blkdev") c.swap_blkdev = true;
    else if (tok == "file") c.swap_file = true;
    else if (tok == "zram") c.swap_zram = true;
    else if (tok != "none") {
      usage(fmt::format("--swap: unknown swap device '{}' (expected blkdev, file, zram, a list as blkdev,file, or none)", tok));
      return 2;
    }
  }
  if (!o.inject.empty() && (!parse_probability(o.inject, &c.inject_rate) || c.inject_rate <= 0)) {
    usage(fmt::format("--inject {}: expected a failure rate above 0 and at most 1, as 0.01 or 1%", o.inject));
    return 2;
  }
  if (c.ops == 0 && c.seconds <= 0) c.seconds = 10;
  c.on_hang = [line = repro_line(o, c)] { std::printf("reproduce: %s\nFAILED\n", line.c_str()); };
  stress::Result r;
  std::string err;
  if (!stress::run(c, &r, &err)) {
    std::fprintf(stderr, "mmlab stress: %s\n", err.c_str());
    return 1;
  }
  std::printf("operations (%u threads, %.1f s, %.0f ops/s):\n", c.threads, r.elapsed_s,
              r.elapsed_s > 0 ? static_cast<double>(r.total_ops()) / r.elapsed_s : 0.0);
  for (const auto& k : stress::op_kinds()) std::printf("  %-10s %10llu\n", k.c_str(), static_cast<unsigned long long>(r.ops[k]));
  std::printf("  khugepaged: %ld full scans, %ld pages collapsed\n", r.khugepaged_full_scans, r.khugepaged_collapsed);
  if (!r.errors.empty()) {
    std::printf("expected errors returned:\n");
    for (const auto& [k, v] : r.errors) std::printf("  %-28s %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  }
  if (!r.injected.empty()) {
    std::printf("injected failures (%s):\n",
                o.inject.empty() ? "--race-swapin-failure" : ("--inject " + o.inject).c_str());
    for (const auto& [k, v] : r.injected) std::printf("  %-28s %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  }
  std::printf("statistics:\n");
  for (const auto& [k, v] : r.stats) std::printf("  %-32s %lld\n", k.c_str(), static_cast<long long>(v));
  for (const auto& [k, why] : r.not_run) std::printf("not run: %s (%s)\n", k.c_str(), why.c_str());
  std::printf("memory types run: %s\n", fmt::format("{}", fmt::join(c.types, ",")).c_str());
  for (const auto& v : r.violations) std::printf("VIOLATION: %s\n", v.c_str());
  for (const auto& m : r.mismatches) std::printf("DATA MISMATCH: %s\n", m.c_str());
  std::printf("checker runs: %llu; violations: %zu; data mismatches: %llu; frames leaked: %llu\n",
              static_cast<unsigned long long>(r.checks), r.violations.size(),
              static_cast<unsigned long long>(r.nr_mismatches), static_cast<unsigned long long>(r.frames_leaked));
  std::printf("reproduce: %s\n", repro_line(o, c).c_str());
  if (!r.ok()) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("no violation in %llu operations\n", static_cast<unsigned long long>(r.total_ops()));
  return 0;
}

}  // namespace

void add_stress(CLI::App& app) {
  auto o = std::make_shared<StressCli>();
  CLI::App* sub = app.add_subcommand("stress", "threads running a random mix of mm operations at once, with a data tracker "
                                               "and the invariant checker (docs/STRESS.md)");
  sub->add_option("--threads", o->threads, "worker threads (default 4)")->check(CLI::Range(1u, 64u));
  sub->add_option("--seconds", o->seconds, "stop after this long (default 10 when --ops is not given)")->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--ops", o->ops, "stop after this many operations in all");
  sub->add_option("--seed", o->seed, "seed of the per-thread random streams (default 1)");
  sub->add_option("--check-every", o->check_every, "operations per thread between stop-the-world checker runs (default 1000)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
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
  add_trace_options(sub);
  register_action(sub, [o] { return run_stress(*o); });
}

}  // namespace mmlab::cli
