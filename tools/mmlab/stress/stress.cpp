// The engine of `mmlab stress` (docs/STRESS.md).
//
// Exactness: every region belongs to one worker thread, the only one that
// changes its content or layout (write, device write through its own R/W pin,
// DONTNEED, FREE, munmap, mremap, mprotect, writes in its own children).
// Other threads touch it only in ways that change no content: pins held for a
// while (cross pins), forks of the shared parent, khugepaged. So the tracker
// knows each page's content exactly, but for MADV_FREE'd pages, which read
// their old content or zeros until written.
#include "stress/stress.h"

#include <algorithm>
#include <charconv>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "mmlab/explore.h"
#include "mmlab/gup.h"
#include "mmlab/system.h"
#include "mmlab/tune.h"
#include "report/progress.h"
#include "stress/worker.h"

namespace mmlab::stress {
namespace {

// The stop-the-world point: every worker has released its cross pins and
// waits; khugepaged stops while the checker runs.
void quiesce_and_check(Shared* s) {
  s->phase = "checker";
  s->main_progress.fetch_add(1, std::memory_order_relaxed);
  if (s->khugepaged) s->sys->stop_khugepaged_thread();
  // An injected folio_trylock failure has no holder to look at the folio
  // again when it unlocks (the model's substitute for reclaim noticing it):
  // a swap-cache folio whose last swap PTE went stays in the swap cache, as
  // in the kernel until reclaim. Run the model's reclaim stand-in first,
  // with folio_trylock not failing: the stand-in tries once, where the
  // kernel's reclaim would come back. Re-arming restarts the site's call
  // numbers, so a new seed keeps its decisions from repeating.
  if (s->cfg->inject_rate > 0) {
    (void)s->sys->inject("folio_trylock", InjectSpec{});
    (void)s->sys->run_shrinkers();
    s->sys->inject_seed(s->cfg->seed + s->res->checks + 1);
    (void)s->sys->inject("folio_trylock", InjectSpec{.mode = InjectSpec::Mode::kProbability, .probability = s->cfg->inject_rate});
  }
  CheckReport rep = s->sys->check();
  {
    std::lock_guard<std::mutex> g(s->mu);
    s->res->checks++;
    for (const Violation& v : rep.violations)
      s->res->violations.push_back(fmt::format("{} at {}\n{}", v.invariant, v.where, v.dump));
  }
  bool all_done = true;
  for (auto& w : s->workers) all_done &= (w->quota && w->done >= w->quota) || w->choices_spent();
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - s->start).count();
  if (all_done || (s->cfg->seconds > 0 && el >= s->cfg->seconds) || !rep.ok()) s->stop = true;
  if (s->khugepaged && !s->stop) (void)s->sys->start_khugepaged_thread();
  s->phase = "run";
}

struct Completion {
  Shared* s;
  void operator()() noexcept { quiesce_and_check(s); }
};

int set_up_system(const Config& cfg, std::unique_ptr<System>* out, std::string* err) {
  SystemConfig sc;
  sc.ram_bytes = cfg.ram;
  // FOLL_LONGTERM pins migrate their pages out of ZONE_MOVABLE.
  sc.movable_bytes = cfg.movable < 0 ? round_down(cfg.ram / 4, 4ull << 20) : static_cast<uint64_t>(cfg.movable);
  int e = 0;
  *out = System::create(sc, &e);
  if (!*out) {
    *err = fmt::format("System::create: {}", errno_name(-e));
    return -1;
  }
  System* sys = out->get();
  (void)sys->sysfs_write("transparent_hugepage/enabled", "always");
  for (unsigned order = 2; order <= 8; order++)
    (void)sys->sysfs_write(fmt::format("transparent_hugepage/hugepages-{}kB/enabled", 4u << order), "always");
  (void)sys->sysfs_write("transparent_hugepage/khugepaged/scan_sleep_millisecs", "0");
  (void)sys->sysfs_write("transparent_hugepage/khugepaged/alloc_sleep_millisecs", "0");
  // Swap on a block device (large folios swap out whole) and on a file
  // (split first): the block device is small so that swap spills to the file.
  if (int r = cfg.swap_zram ? sys->add_swap(16ull << 20, SwapKind::kZram) : 0; r < 0) {
    *err = fmt::format("swap on zram: {}", errno_name(-r));
    return -1;
  }
  if (int r = cfg.swap_blkdev ? sys->add_swap(cfg.swap_blkdev_bytes, SwapKind::kBlkdev) : 0; r < 0) {
    *err = fmt::format("swap on a block device: {}", errno_name(-r));
    return -1;
  }
  if (int r = cfg.swap_file ? sys->add_swap(cfg.swap_file_bytes ? cfg.swap_file_bytes : cfg.ram / 8, SwapKind::kFile) : 0; r < 0) {
    *err = fmt::format("swap on a file: {}", errno_name(-r));
    return -1;
  }
  return 0;
}

// A hugetlb pool for a type: each thread's region, a copy for a pinned
// page across fork and one for a child's write, and slack for remaps.
bool set_up_hugetlb(System* sys, const Config& cfg, const TypeInfo& t, unsigned per_thread, std::string* why) {
  const std::string path = t.huge_shift == PUD_SHIFT ? "hugepages/hugepages-1048576kB/nr_hugepages"
                                                     : "hugepages/hugepages-2048kB/nr_hugepages";
  std::string cur;
  (void)sys->sysfs_read(path, &cur);
  const long want = std::stol(cur.empty() ? "0" : cur) + static_cast<long>(per_thread * cfg.threads);
  (void)sys->sysfs_write(path, std::to_string(want));
  (void)sys->sysfs_read(path, &cur);
  if (std::stol(cur.empty() ? "0" : cur) < want) {
    *why = fmt::format("the hugetlb pool got {} of {} pages (--ram {}M)", cur, want, cfg.ram >> 20);
    return false;
  }
  return true;
}

}  // namespace

const char* sched_name(Sched s) {
  switch (s) {
    case Sched::kFree: return "free";
    case Sched::kPct: return "pct";
    case Sched::kRandom: return "random";
  }
  return "?";
}

std::string format_rounds(const std::vector<Round>& rounds) {
  std::string out;
  for (const Round& r : rounds) out += fmt::format("{}{:x}:{}", out.empty() ? "" : "/", r.hash, r.choices);
  return out;
}

bool parse_rounds(std::string_view text, std::vector<Round>* out, std::string* err) {
  out->clear();
  size_t pos = 0;
  for (unsigned n = 0; pos <= text.size(); n++) {
    size_t slash = text.find('/', pos);
    if (slash == std::string_view::npos) slash = text.size();
    const std::string_view tok = text.substr(pos, slash - pos);
    const size_t colon = tok.find(':');
    const std::string_view hex = tok.substr(0, colon == std::string_view::npos ? 0 : colon);
    Round r;
    const auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), r.hash, 16);
    if (colon == std::string_view::npos || hex.empty() || ec != std::errc{} || p != hex.data() + hex.size()) {
      *err = fmt::format("round {}: '{}': expected HASH:CHOICES (the hash in hex)", n, tok.substr(0, 40));
      return false;
    }
    r.choices = std::string(tok.substr(colon + 1));
    if (!explore::decode_schedule(r.choices) || r.choices.empty()) {
      *err = fmt::format("round {}: '{}': malformed choices (expected T*N,T*N,...)", n, tok.substr(colon + 1, 40));
      return false;
    }
    out->push_back(std::move(r));
    pos = slash + 1;
  }
  return true;
}

std::vector<std::string> op_kinds() { return {std::begin(kOpNames), std::end(kOpNames)}; }

unsigned default_weight(const std::string& kind) {
  for (unsigned op = 0; op < kNrOps; op++)
    if (kind == kOpNames[op]) return kDefaultWeight[op];
  return 0;
}

// Every site, swapin included (the tracker accepts the SIGBUS a failed
// swap-in leaves on a paged-out page: Worker::swapin_outcome).
std::vector<std::string> inject_sites() { return System::inject_sites(); }

std::vector<std::string> type_names() {
  std::vector<std::string> v;
  for (const TypeInfo& t : all_types()) v.push_back(t.name);
  return v;
}

uint64_t Result::total_ops() const {
  uint64_t n = 0;
  for (const auto& [k, v] : ops) n += v;
  return n;
}

namespace {

// The memory types --types names that this System can hold (hugetlb needs
// its pool filled); the others are reported as not run, with the reason.
bool choose_types(System* sys, const Config& cfg, std::vector<std::string>* run,
                  std::map<std::string, std::string>* not_run, std::string* err) {
  for (const TypeInfo& t : all_types()) {
    if (std::find(cfg.types.begin(), cfg.types.end(), t.name) == cfg.types.end()) {
      (*not_run)[t.name] = "not in --types";
      continue;
    }
    std::string why;
    if (is_hugetlb(t.backing)) {
      // 2M: also one page per cross-pin slot (1G: no cross pins, Worker::op_cross_pin): a held pin keeps a page that
      // its owner zapped out of the pool, and the owner's next fault needs
      // another (the kernel's too: the restored reservation is not a page).
      const unsigned per_thread = t.huge_shift == PUD_SHIFT ? 3 : 4 + kCrossPinSlots;
      if (!set_up_hugetlb(sys, cfg, t, per_thread, &why)) {
        (*not_run)[t.name] = why;
        continue;
      }
    }
    run->push_back(t.name);
  }
  if (run->empty()) {
    *err = "no memory type to run";
    return false;
  }
  return true;
}

// The machine's types as the workers see them.
void take_types(Shared* s, const std::vector<std::string>& names) {
  static const std::vector<TypeInfo> types = all_types();
  for (const TypeInfo& t : types)
    if (std::find(names.begin(), names.end(), t.name) != names.end()) s->types.push_back(&t);
}

// A run from bytes maps the types its input chose (Worker::types_to_map):
// the others did not run.
void note_types_chosen(Shared* s, Result* out) {
  std::vector<std::string> ran;
  for (const std::string& name : out->types_run) {
    bool mapped = false;
    for (const auto& w : s->workers)
      for (const auto& r : w->regions) mapped |= r->type->name == name;
    if (mapped) ran.push_back(name);
    else out->not_run[name] = "not chosen by the input";
  }
  out->types_run = std::move(ran);
}

// The operation mix as a cumulative distribution of the weights.
bool build_mix(Shared* s, std::string* err) {
  unsigned cum = 0;
  for (unsigned op = 0; op < kNrOps; op++) {
    auto it = s->cfg->mix.find(kOpNames[op]);
    cum += it == s->cfg->mix.end() ? kDefaultWeight[op] : it->second;
    s->mix_cdf.push_back(cum);
  }
  if (cum == 0) {
    *err = "--mix gives every operation weight 0";
    return false;
  }
  return true;
}

bool set_up_workers(Shared* s, std::string* err) {
  const Config& cfg = *s->cfg;
  s->parent = s->sys->new_process("stress");
  for (unsigned t = 0; t < cfg.threads; t++) {
    s->workers.push_back(std::make_unique<Worker>(s, t, cfg.seed * 1000003 + t));
    if (cfg.ops) s->workers.back()->quota = cfg.ops / cfg.threads + (t < cfg.ops % cfg.threads ? 1 : 0);
  }
  for (auto& w : s->workers)
    if (!w->setup(err)) return false;
  return true;
}

// --inject: every site fails with the configured probability; the
// swap-in race of the tests fails every swap-in read.
bool arm_injection(Shared* s, std::string* err) {
  const Config& cfg = *s->cfg;
  if (cfg.inject_rate > 0) {
    s->sys->inject_seed(cfg.seed);
    for (const std::string& site : inject_sites()) {
      InjectSpec spec{.mode = InjectSpec::Mode::kProbability, .probability = cfg.inject_rate};
      if (int r = s->sys->inject(site, spec); r < 0) {
        *err = fmt::format("inject {}: {}", site, errno_name(-r));
        return false;
      }
    }
  }
  if (cfg.race_swapin_failure) {
    if (int r = s->sys->inject("swapin", InjectSpec{.mode = InjectSpec::Mode::kProbability, .probability = 1}); r < 0) {
      *err = fmt::format("inject swapin: {}", errno_name(-r));
      return false;
    }
  }
  return true;
}

uint64_t ops_so_far(const Shared* s) {
  uint64_t n = 0;
  for (const auto& w : s->workers) n += w->progress.load(std::memory_order_relaxed);
  return n;
}

// The progress line's state (report/progress.h): operations so far, the
// violations and mismatches found so far, and the phase once past the run.
std::string progress_text(Shared* s) {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - s->start).count();
  size_t violations = 0;
  uint64_t mismatches = 0;
  {
    std::lock_guard<std::mutex> g(s->mu);
    violations = s->res->violations.size();
    mismatches = s->res->nr_mismatches;
  }
  const std::string phase = s->phase.load();
  return fmt::format("{} operations ({} threads, {:.0f} s), {} violations, {} data mismatches{}", ops_so_far(s),
                     s->workers.size(), el, violations, mismatches, phase == "run" ? "" : "; " + phase);
}

// What a hung run has so far, for its report: the operations, what the
// checker and the tracker found (if their lock is free: the stuck thread
// may hold it), and, once collected, the rest.
Result partial_result(Shared* s, std::vector<std::string> hangs) {
  Result r;
  for (unsigned op = 0; op < kNrOps; op++)
    for (auto& w : s->workers) r.ops[kOpNames[op]] += w->ops[op].load(std::memory_order_relaxed);
  if (s->mu.try_lock()) {
    r.violations = s->res->violations;
    r.mismatches = s->res->mismatches;
    r.nr_mismatches = s->res->nr_mismatches;
    r.checks = s->res->checks;
    s->mu.unlock();
  } else {
    hangs.push_back("(the violations found so far cannot be shown: the stuck thread holds their lock)");
  }
  r.not_run = s->res->not_run;
  r.types_run = s->res->types_run;
  if (s->collected.load()) {
    r.errors = s->res->errors;
    r.stats = s->res->stats;
    r.injected = s->res->injected;
    r.khugepaged_full_scans = s->res->khugepaged_full_scans;
    r.khugepaged_collapsed = s->res->khugepaged_collapsed;
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s->start).count();
  r.hangs = std::move(hangs);
  return r;
}

// The whole run's watchdog, from the workers' start to the end of the
// teardown: a worker that makes no progress for hang_seconds in an
// operation, or the main thread in the checker, the final sweep or the
// teardown (Shared::phase, main_progress), is a hang in the model. The run
// so far is reported (Config::on_hang) with each stuck thread's last
// operations, and the process ends: a stuck thread cannot be unwound.
class Watchdog {
 public:
  // The per-thread counts are made here, on the caller's thread: the
  // watchdog allocates nothing while the run goes on, which under the
  // scheduler would race with the workers' allocations (see run()).
  explicit Watchdog(Shared* s)
      : s_(s), last_(s->workers.size(), 0), still_(s->workers.size(), 0), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_one();  // a short run must not wait out the second
    thread_.join();
  }

 private:
  void loop() {
    std::vector<uint64_t>& last = last_;
    std::vector<unsigned>& still = still_;
    uint64_t main_last = ~0ull;
    unsigned main_still = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> g(mu_);
        if (cv_.wait_for(g, std::chrono::seconds(1), [this] { return done_; })) return;
      }
      std::vector<std::string> hangs;
      if (s_->sched) {
        // Under the scheduler progress is counted in steps, not in
        // operations a second: one worker moves at a time, a strategy may
        // hold one back for a whole round, and random's baton pass at
        // every step makes a long operation (a fork of a large mm) last
        // minutes. Steps without an operation finished are a livelock,
        // which the round's step bound ends (round_bound), the same way in
        // every run. What no bound can see is a run that takes no step at
        // all: a thread blocked in the OS or looping between points.
        const uint64_t steps = s_->session->steps_taken();
        all_still_ = (steps == all_last_ && std::string(s_->phase.load()) == "run") ? all_still_ + 1 : 0;
        all_last_ = steps;
        if (all_still_ >= s_->cfg->hang_seconds)
          hangs.push_back(fmt::format("the scheduler took no step for {} s (after {} steps, {} operations)", all_still_,
                                      steps, ops_so_far(s_)));
      }
      for (size_t t = 0; t < s_->workers.size() && !s_->sched; t++) {
        const Worker* w = s_->workers[t].get();
        const uint64_t p = w->progress.load(std::memory_order_relaxed);
        const int cur = w->current.load(std::memory_order_relaxed);
        still[t] = (p == last[t] && cur >= 0) ? still[t] + 1 : 0;
        last[t] = p;
        if (still[t] >= s_->cfg->hang_seconds)
          hangs.push_back(fmt::format("thread {} made no progress for {} s in operation '{}' (after {} operations); last "
                                      "operations, oldest first: {}",
                                      t, still[t], kOpNames[cur], p, fmt::join(w->recent_ops(), ", ")));
      }
      const char* phase = s_->phase.load();
      const uint64_t m = s_->main_progress.load(std::memory_order_relaxed);
      main_still = (m == main_last && std::string(phase) != "run") ? main_still + 1 : 0;
      main_last = m;
      if (main_still >= s_->cfg->hang_seconds)
        hangs.push_back(fmt::format("the {} made no progress for {} s (after {} operations)", phase, main_still, ops_so_far(s_)));
      if (hangs.empty()) continue;
      if (s_->cfg->on_hang) s_->cfg->on_hang(partial_result(s_, std::move(hangs)));
      std::fflush(stdout);
      std::_Exit(1);
    }
  }

  Shared* s_;
  uint64_t all_last_ = 0;
  unsigned all_still_ = 0;
  std::vector<uint64_t> last_;
  std::vector<unsigned> still_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The workers run their operations, meeting at a barrier every
// check_every operations for the stop-the-world check, until the run ends.
// One worker runs on the caller's thread: a thread made and joined per run
// was a tenth of a short fuzz_ops input under ASan (its per-thread state is
// mapped and unmapped each time).
void run_workers(Shared* s) {
  std::barrier<Completion> barrier(static_cast<std::ptrdiff_t>(s->cfg->threads), Completion{s});
  std::vector<std::thread> threads;
  for (auto& wp : s->workers) {
    Worker* w = wp.get();
    auto body = [s, w, &barrier] {
      while (!s->stop.load()) {
        // A worker that stopped the run (a re-mmap that failed leaves its
        // region unmapped) must not go on to the next check.
        for (uint64_t k = 0; k < s->cfg->check_every && !(w->quota && w->done >= w->quota) && !w->choices_spent() &&
                             !s->stop.load(std::memory_order_relaxed);
             k++, w->done++) {
          w->run();
        }
        w->release_held();
        barrier.arrive_and_wait();
      }
    };
    if (s->workers.size() == 1) body();
    else threads.emplace_back(body);
  }
  for (auto& t : threads) t.join();
}

// FNV-1a step of the run hash over the rounds' hashes.
uint64_t mix_hash(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

// A round's step bound: far above what a round takes (PCT sized by the
// round before), so that only a livelock meets it.
uint64_t round_bound(uint64_t k) { return std::max<uint64_t>(50'000'000, 100 * k); }

// The run under the deterministic scheduler: each round is one explorer
// run in which every worker does its check_every operations (the
// session's workers are the only threads that touch the model), and the
// stop-the-world check then runs here, as the barrier's completion does
// free-running. No wall clock decides anything: the seed (or the replayed
// rounds) and the build fix every step.
void run_workers_sched(Shared* s, std::vector<Round>* replay) {
  const Config& cfg = *s->cfg;
  explore::Session& session = *s->session;
  explore::Session::Bodies bodies;
  for (auto& wp : s->workers) {
    Worker* w = wp.get();
    bodies.push_back([s, w] {
      for (uint64_t k = 0; k < s->cfg->check_every && !(w->quota && w->done >= w->quota) && !s->stop.load(); k++, w->done++)
        w->run();
      w->release_held();
    });
  }
  // khugepaged as one more scheduled thread: a full scan of every
  // registered mm a round, its wakes run inline (System::run_khugepaged, as
  // a race body's `khugepaged N`), interleaved with the workers' steps.
  if (s->khugepaged_body) bodies.push_back([s] { (void)s->sys->run_khugepaged(1); });
  Result* res = s->res;
  res->run_hash = 0xcbf29ce484222325ull;
  // PCT's k for round 0: a fixed estimate of the steps of a round (then
  // each round is sized by the one before).
  uint64_t k = cfg.check_every * cfg.threads * 64;
  for (uint64_t round = 0; !s->stop.load(); round++) {
    explore::RunResult r;
    if (replay) {
      if (round >= replay->size()) {
        std::lock_guard<std::mutex> g(s->mu);
        res->violations.push_back(fmt::format("schedule: the run goes on after the schedule's {} rounds (replay diverged)", replay->size()));
        s->stop = true;
        break;
      }
      const Round& want = (*replay)[round];
      r = session.replay(bodies, want.choices, round_bound(k));
      if (r.outcome == explore::Outcome::kClean && r.trace_hash != want.hash) {
        r.outcome = explore::Outcome::kDiverged;
        r.detail = fmt::format("the steps' hash is {:016x}, the schedule's {:016x}", r.trace_hash, want.hash);
      }
    } else if (cfg.sched == Sched::kPct) {
      r = session.run_pct(bodies, 2 + static_cast<int>(round % 2), k, cfg.seed, round, round_bound(k));
    } else {
      r = session.run_random(bodies, cfg.seed, round, round_bound(k));
    }
    k = std::max<uint64_t>(r.steps, 1);
    res->rounds.push_back(Round{r.trace_hash, r.schedule});
    res->sched_steps += r.steps;
    res->run_hash = mix_hash(res->run_hash, r.trace_hash);
    if (r.outcome != explore::Outcome::kClean) {
      std::lock_guard<std::mutex> g(s->mu);
      res->violations.push_back(fmt::format("scheduler: round {} ended {} after {} steps: {}", round,
                                            explore::outcome_name(r.outcome), r.steps, r.detail));
      s->stop = true;
      // Unwound threads may hold the model's locks: nothing may touch it
      // again (no final sweep, no teardown).
      if (r.abandoned) s->abandoned = true;
      break;
    }
    quiesce_and_check(s);
  }
  std::lock_guard<std::mutex> g(s->mu);
  if (replay && !s->abandoned && res->rounds.size() < replay->size() && res->violations.empty())
    res->violations.push_back(fmt::format("schedule: the run ended after {} rounds, the schedule has {} (replay diverged)",
                                          res->rounds.size(), replay->size()));
}

// The statistics a run reports, as the System has them so far: which paths
// ran, and where the large folios fell back to smaller ones (the PMD size's
// faults as vmstat counts them, every mTHP order's), and khugepaged's work.
// A kept machine's count from earlier runs: a run reports its growth.
std::map<std::string, int64_t> statistics(System* sys) {
  std::map<std::string, int64_t> st;
  for (const char* name : {"pswpin", "pswpout", "thp_fault_alloc", "thp_fault_fallback", "thp_fault_fallback_charge",
                           "thp_collapse_alloc", "thp_collapse_alloc_failed", "thp_swpout", "thp_swpout_fallback",
                           "pgmigrate_success"})
    st[name] = sys->vmstat(name);
  for (unsigned order = 2; order <= 9; order++)
    for (const char* item : {"anon_fault_alloc", "anon_fault_fallback", "anon_fault_fallback_charge", "wp_fault_alloc",
                             "wp_fault_fallback", "swpout", "swpout_fallback"})
      st[fmt::format("mthp.order{}.{}", order, item)] = sys->mthp_stat(order, item);
  for (const char* name : {"full_scans", "pages_collapsed"}) {
    std::string v;
    st[fmt::format("khugepaged.{}", name)] =
        sys->sysfs_read(fmt::format("transparent_hugepage/khugepaged/{}", name), &v) == 0 ? std::stol(v) : 0;
  }
  return st;
}

// What the run did: operations and their errors, injections, khugepaged's
// work, selected statistics and the model's warnings (those of this run).
void collect(Shared* s, Result* out) {
  for (unsigned op = 0; op < kNrOps; op++) {
    uint64_t n = 0;
    for (auto& w : s->workers) n += w->ops[op].load(std::memory_order_relaxed);
    out->ops[kOpNames[op]] = n;
  }
  for (auto& w : s->workers)
    for (const auto& [k, v] : w->errors) out->errors[k] += v;
  for (const auto& [k, v] : s->cfg->statistics ? statistics(s->sys) : std::map<std::string, int64_t>{}) {
    const int64_t grew = v - s->stats_before[k];
    if (k == "khugepaged.full_scans") out->khugepaged_full_scans = grew;
    else if (k == "khugepaged.pages_collapsed") out->khugepaged_collapsed = grew;
    else out->stats[k] = grew;
  }
  {
    std::lock_guard<std::mutex> g(s->mu);
    const std::vector<std::string> warnings = s->sys->warnings();
    for (size_t i = s->warnings_before; i < warnings.size(); i++) out->violations.push_back("model warning: " + warnings[i]);
    s->warnings_before = warnings.size();
  }
  s->collected = true;
}

// Test-only (Config::plant_leaked_frame): files that the teardown never
// closes, each with a page in its page cache: one 4 KiB frame of shmem and,
// when a 2 MiB hugetlb type ran, one 2 MiB hugetlb page (faulted in by a
// process that then exits). Both are still in use after every process
// exited, and the leak check must report 1 + 512 frames: a hugetlb page in
// use is not one of the pool's free pages it allows for.
void plant_leaked_frame(Shared* s) {
  System* sys = s->sys;
  const int fd = sys->create_file(PAGE_SIZE, FsClass::kShmem, 0, "stress-planted-leak");
  const uint8_t b = 0x5a;
  if (fd >= 0) (void)sys->file_pwrite(fd, 0, &b, 1);
  const auto& run = s->res->types_run;
  if (std::find(run.begin(), run.end(), "hugetlb-2M") == run.end() &&
      std::find(run.begin(), run.end(), "hugetlb-2M-shared") == run.end())
    return;
  const int hfd = sys->create_file(PMD_SIZE, FsClass::kHugetlbfs, PMD_SHIFT, "stress-planted-leak-2M");
  Process* p = sys->new_process("planted-leak");
  const long a = hfd >= 0 ? p->mmap_file(0, PMD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, hfd) : -EBADF;
  if (a >= 0) (void)p->fill(static_cast<uint64_t>(a), b, 1);
  p->exit();
}

// The kernel's own frames at the end: the zero page, the huge zero folio
// once made (the kernel frees it only under memory pressure), and the free
// pages of the hugetlb pools. A hugetlb page still in use is not free, so
// a leaked one is still counted.
uint64_t kernel_owned_frames(System* sys) {
  uint64_t n = 1 + (sys->vmstat("thp_zero_page_alloc") > 0 ? HPAGE_PMD_NR : 0);
  const std::pair<const char*, uint64_t> pools[] = {{"hugepages-2048kB", PMD_SIZE / PAGE_SIZE},
                                                    {"hugepages-1048576kB", PUD_SIZE / PAGE_SIZE}};
  for (const auto& [dir, pages] : pools) {
    std::string v;
    if (sys->sysfs_read(fmt::format("hugepages/{}/free_hugepages", dir), &v) == 0) n += std::stoull(v) * pages;
  }
  return n;
}

// Frames in use that nothing should hold once every process exited and
// every file closed.
uint64_t frames_in_use_by_nobody(System* sys) {
  const uint64_t in_use = sys->nr_total_pages() - sys->nr_free_pages();
  const uint64_t kernel = kernel_owned_frames(sys);
  return in_use > kernel ? in_use - kernel : 0;
}

// The end: everything unmapped and exited; the checker then proves that no
// frame or page-table page is left in use. The hugetlb pools keep their
// free pages (emptying them poisoned every frame of every huge page: most
// of a short run's teardown), and those count as the kernel's own.
void tear_down(Shared* s, Result* out) {
  s->phase = "teardown";
  const auto step = [s] { s->main_progress.fetch_add(1, std::memory_order_relaxed); };
  for (auto& w : s->workers) w->teardown(), step();
  if (s->cfg->plant_teardown_hang)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  s->parent->exit();
  step();
  if (s->cfg->plant_leaked_frame) plant_leaked_frame(s);
  (void)s->sys->run_shrinkers();
  step();
  CheckReport end = s->sys->check();
  step();
  std::lock_guard<std::mutex> g(s->mu);
  for (const Violation& x : end.violations)
    out->violations.push_back(fmt::format("at the end: {} at {}\n{}", x.invariant, x.where, x.dump));
  out->checks++;
  out->kernel_frames = kernel_owned_frames(s->sys);
  out->frames_leaked = frames_in_use_by_nobody(s->sys);
}

}  // namespace

Machine::~Machine() = default;

bool Machine::fits(const Config& cfg) const {
  const Config& m = made_for_;
  return cfg.ram == m.ram && cfg.movable == m.movable && cfg.swap_blkdev == m.swap_blkdev && cfg.swap_file == m.swap_file &&
         cfg.swap_blkdev_bytes == m.swap_blkdev_bytes && cfg.swap_file_bytes == m.swap_file_bytes &&
         cfg.swap_zram == m.swap_zram && cfg.types == m.types && cfg.threads == m.threads;
}

std::unique_ptr<Machine> make_machine(const Config& cfg, std::string* err) {
  std::unique_ptr<Machine> m(new Machine);
  m->made_for_ = cfg;
  m->made_for_.choices = {};  // the bytes belong to one run
  m->made_for_.on_hang = nullptr;
  if (set_up_system(cfg, &m->sys_, err) < 0 || !choose_types(m->sys_.get(), cfg, &m->types_run_, &m->not_run_, err))
    return nullptr;
  return m;
}

void deterministic_allocator() {
#ifdef __GLIBC__
  // One malloc arena for every thread. The model ordered a few containers
  // by host address (Vma::anon_vma_chain, the rmap's VMA sets, the hugetlb
  // maps, a file's i_mmap: issue 34 items 4 and 9), and with an arena per
  // thread which worker gets which arena is a race of their first
  // allocations: the same seed then walked those containers in another
  // order in about one process in four. They follow creation ids now (a
  // second run in one process, on another heap, repeats the first); the
  // arena stays, so that host addresses still follow from the steps should
  // a new order by address creep in.
  (void)mallopt(M_ARENA_MAX, 1);
  // And every block of 4 KiB or more its own mapping, outside the arena,
  // at a fixed threshold (glibc's moves with what was freed): a replay's
  // schedule, larger than the run's own, then leaves no hole in the arena
  // for the model's objects to fall into.
  (void)mallopt(M_MMAP_THRESHOLD, 4096);
#endif
}

// A run under the scheduler: no wall clock, a number of operations, no
// choices from bytes, the replayed rounds well formed (parsed into *replay).
static bool sched_config(const Config& cfg, std::vector<Round>* replay, std::string* err) {
  deterministic_allocator();
  if (cfg.seconds > 0) {
    *err = "the scheduler takes no wall clock: give --ops, not --seconds";
    return false;
  }
  if (cfg.ops == 0) {
    *err = "the scheduler needs a number of operations (--ops)";
    return false;
  }
  if (!cfg.choices.empty()) {
    *err = "choices from bytes and the scheduler exclude each other";
    return false;
  }
  return cfg.replay.empty() || parse_rounds(cfg.replay, replay, err);
}

bool run(Machine* m, const Config& cfg, Result* out, std::string* err) {
  if (m->retired_) {
    *err = "the machine was retired: an earlier run on it did not leave it clean";
    return false;
  }
  if (!m->fits(cfg)) {
    *err = "the machine was made for another RAM size, swap, memory types or thread count";
    return false;
  }
  if (!cfg.choices.empty() && (cfg.threads != 1 || cfg.khugepaged_thread)) {
    *err = "choices from bytes need one thread and no khugepaged thread";
    return false;
  }
  std::vector<Round> replay;
  if ((cfg.sched != Sched::kFree || !cfg.replay.empty()) && !sched_config(cfg, &replay, err)) return false;
  Shared s;
  s.cfg = &cfg;
  s.sched = cfg.sched != Sched::kFree || !cfg.replay.empty();
  s.res = out;
  s.sys = m->sys_.get();
  out->types_run = m->types_run_;
  out->not_run = m->not_run_;
  take_types(&s, m->types_run_);
  if (cfg.statistics) s.stats_before = statistics(s.sys);
  s.warnings_before = m->warnings_seen_;
  // The tune keys the run switches between, as it found them.
  std::vector<std::pair<std::string, std::string>> tunes;
  for (const auto& [key, values] : cfg.variants) {
    std::string v;
    if (s.sys->tune_read(key, &v) == 0) tunes.emplace_back(key, v);
  }
  s.injecting = cfg.inject_rate > 0 || cfg.race_swapin_failure;
  if (!build_mix(&s, err) || !set_up_workers(&s, err) || !arm_injection(&s, err)) {
    m->retired_ = true;  // a worker may hold regions already
    return false;
  }
  if (!cfg.choices.empty()) note_types_chosen(&s, out);
  s.khugepaged = cfg.khugepaged_thread && !s.sched && s.sys->start_khugepaged_thread() == 0;
  // Under the scheduler khugepaged is one of the session's threads (the
  // explorer must own every thread), not the System's own.
  s.khugepaged_body = cfg.khugepaged_thread && s.sched;
  if (s.sched) s.session = std::make_unique<explore::Session>(static_cast<int>(cfg.threads + (s.khugepaged_body ? 1 : 0)));
  if (!cfg.khugepaged_thread) out->not_run["khugepaged"] = "no khugepaged thread (choices from bytes)";
  else if (!s.sched && !s.khugepaged) out->not_run["khugepaged"] = "the khugepaged thread did not start";
  s.start = std::chrono::steady_clock::now();
  s.phase = "run";
  {
    std::optional<Watchdog> watchdog;
    if (cfg.watchdog) watchdog.emplace(&s);
    std::optional<cli::ProgressLine> line;
    if (cfg.progress) line.emplace("mmlab stress", [&s] { return progress_text(&s); });
    if (s.sched) run_workers_sched(&s, cfg.replay.empty() ? nullptr : &replay);
    else run_workers(&s);
    out->elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
    if (s.abandoned) {
      // A thread unwound with the model's locks possibly held: report what
      // the run found, and never touch the System again (below).
      for (unsigned op = 0; op < kNrOps; op++)
        for (auto& w : s.workers) out->ops[kOpNames[op]] += w->ops[op].load(std::memory_order_relaxed);
      for (auto& w : s.workers)
        for (const auto& [k, v] : w->errors) out->errors[k] += v;
    } else {
      s.phase = "final sweep";
      if (s.khugepaged) s.sys->stop_khugepaged_thread();
      // The final sweep and the teardown run without injected failures.
      for (const std::string& site : System::inject_sites())
        if (int64_t n = s.sys->injected(site); s.injecting && n >= 0) out->injected[site] = static_cast<uint64_t>(n);
      s.sys->inject_off_all();
      if (cfg.plant_corruption) s.workers[0]->plant_corruption();
      for (auto& w : s.workers) w->verify_all("final sweep"), s.main_progress.fetch_add(1, std::memory_order_relaxed);
      collect(&s, out);
      tear_down(&s, out);
    }
  }
  if (s.abandoned) {
    // Never destroyed either (their destructors would take those locks),
    // and still reachable (no leak report).
    static auto* kept = new std::vector<std::unique_ptr<System>>;
    kept->push_back(std::move(m->sys_));
    static auto* kept_workers = new std::vector<std::unique_ptr<Worker>>;  // their pins too
    for (auto& w : s.workers) kept_workers->push_back(std::move(w));
    m->retired_ = true;
    return true;
  }
  for (const auto& [key, v] : tunes) (void)s.sys->tune(key, v);
  (void)s.sys->release_exited();  // every process of the run has exited
  m->warnings_seen_ = s.warnings_before;
  if (!out->ok() || cfg.plant_leaked_frame) m->retired_ = true;
  return true;
}

bool run(const Config& cfg, Result* out, std::string* err) {
  std::unique_ptr<Machine> m = make_machine(cfg, err);
  return m && run(m.get(), cfg, out, err);
}

}  // namespace mmlab::stress
