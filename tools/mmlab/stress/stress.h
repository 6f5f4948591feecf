// `mmlab stress`: threads that run a random mix of mm operations at once on
// the same processes, with a data tracker that knows every page's expected
// content and the invariant checker at stop-the-world points (docs/STRESS.md).
// A consumer of the public API only (include/mmlab/system.h, gup.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mmlab {
class System;
}

namespace mmlab::stress {

// The operation kinds, in the order they are reported, and the weight each
// has unless --mix gives another.
std::vector<std::string> op_kinds();
unsigned default_weight(const std::string& kind);
// The memory types, in the order they are reported ("anon-16K", "thp", ...).
std::vector<std::string> type_names();
// The fault-injection sites --inject arms.
std::vector<std::string> inject_sites();

// Who interleaves the workers: the OS (free-running, the default), or the
// deterministic scheduler of issue 34 (docs/STRESS.md "Under the
// scheduler"): PCT or a uniformly random thread at every step.
enum class Sched : uint8_t { kFree, kPct, kRandom };
const char* sched_name(Sched s);

// One round of a run under the scheduler: check_every operations per
// worker, one explorer run, then the stop-the-world check. Its choices
// (run-length encoded, explore.h) and the hash of its steps.
struct Round {
  uint64_t hash = 0;
  std::string choices;
};
// The rounds as a schedule keeps them: "HASH:CHOICES/HASH:CHOICES/..."
// (the hash in hex). parse_rounds: false with *err naming the bad token.
std::string format_rounds(const std::vector<Round>& rounds);
bool parse_rounds(std::string_view text, std::vector<Round>* out, std::string* err);

struct Config {
  unsigned threads = 4;
  double seconds = 0;           // stop after this long (0: no limit)
  uint64_t ops = 0;             // stop after this many operations in all (0: no limit)
  uint64_t seed = 1;
  uint64_t check_every = 1000;  // operations per thread between stop-the-world checks
  std::map<std::string, unsigned> mix;                         // kind -> weight (every kind present)
  std::vector<std::string> types;                              // memory types to run
  std::vector<std::pair<std::string, std::vector<std::string>>> variants;  // tune key -> values switched between
  uint64_t ram = 4ull << 30;
  bool swap_blkdev = true, swap_file = true;  // the swap devices to add
  // Their sizes. The checker walks every slot, so a fuzzer's thousands of
  // short runs want small devices (and a full device is a path too).
  uint64_t swap_blkdev_bytes = 16ull << 20;
  uint64_t swap_file_bytes = 0;  // 0: ram / 8
  bool swap_zram = false;  // a zram device first (synchronous writes, mTHP swap-in)
  int64_t movable = -1;  // ZONE_MOVABLE bytes (-1: a quarter of ram)
  // Test-only: once, behind the tracker's back, change one byte of a page
  // the tracker knows (a planted bug the run must report).
  bool plant_corruption = false;
  // Test-only: every swap-in read fails (the site `swapin` armed with
  // probability 1), and each MADV_PAGEOUT of private anonymous memory is
  // followed, before the tracker marks the range, by a read of the page the
  // operation then checks: a swap-in failure that sticks to the page between
  // the pageout and the mark, as another thread's fault can (a cross pin's
  // GUP, khugepaged's swap-in). The tracker must still accept the SIGBUS.
  bool race_swapin_failure = false;
  // Fuzzing (tests/fuzz/fuzz_ops.cpp): when not empty, every choice (the
  // operation, its region, range, flags, bytes) is read from these bytes
  // instead of the seed's random stream, and the run ends when they run
  // out. Needs threads == 1 and no khugepaged thread, so that the bytes
  // alone decide the sequence.
  std::string_view choices;
  bool khugepaged_thread = true;
  // Fault injection (--inject): every site fails each call with
  // this probability, seeded with `seed`; 0 arms nothing.
  double inject_rate = 0;
  // A progress line on stderr while it runs (report/progress.h).
  bool progress = false;
  // A phase that makes no progress for this long is a hang (the watchdog
  // covers the whole run: the workers, the final sweep, the teardown).
  unsigned hang_seconds = 60;
  // Test-only: the teardown blocks for good, so that the watchdog must
  // report it (a hung run still prints what it has).
  bool plant_teardown_hang = false;
  // Test-only: before the end's leak check, files are left open with a
  // page in their page cache (a 4 KiB shmem page, and a 2 MiB hugetlb page
  // when a 2 MiB hugetlb type ran), so that the check must report them
  // (the free hugetlb pool pages it allows for must not hide them).
  bool plant_leaked_frame = false;
  // Fuzzing (fuzz_ops): no watchdog thread. A thread made and joined per
  // run was about a fifth of a short input under ASan (its per-thread state
  // is mapped and unmapped each time); the fuzzer's own -timeout is then
  // what reports a hang.
  bool watchdog = true;
  // Fuzzing (fuzz_ops): Result::stats, khugepaged_full_scans and
  // khugepaged_collapsed are not collected (about 80 string-keyed counters
  // read before and after, a tenth of a short input; the fuzzer reads none).
  bool statistics = true;
  // Called on a hang with what the run has so far (Result::hangs says where
  // each stuck thread is); the process then ends with exit status 1 (a
  // stuck thread cannot be unwound).
  std::function<void(const struct Result&)> on_hang;
  // Under the scheduler (needs ops, no seconds, no choices; runs no
  // khugepaged thread): the strategy, and, when not empty, the rounds of an
  // earlier run to replay (format_rounds), each checked against its hash.
  Sched sched = Sched::kFree;
  std::string replay;
};

struct Result {
  std::map<std::string, uint64_t> ops;     // kind -> operations run
  std::map<std::string, uint64_t> errors;  // "kind: ERRNO" -> calls that returned it (expected outcomes)
  std::map<std::string, std::string> not_run;  // type or operation -> why it did not run
  std::vector<std::string> types_run;          // the memory types that ran, in the order they are reported
  std::vector<std::string> violations;     // checker findings and model warnings
  std::vector<std::string> mismatches;     // data-tracker findings (first ones in full)
  uint64_t nr_mismatches = 0;
  uint64_t checks = 0;                     // stop-the-world checker runs
  uint64_t frames_leaked = 0;              // frames in use after every process exited
  // Frames the leak check counted as the kernel's own: the zero page, the
  // huge zero folio, the free pages of the hugetlb pools.
  uint64_t kernel_frames = 0;
  long khugepaged_full_scans = 0, khugepaged_collapsed = 0;
  std::map<std::string, int64_t> stats;    // selected vmstat/mTHP statistics
  std::map<std::string, uint64_t> injected;  // site -> failures injected (--inject), every site
  std::vector<std::string> hangs;          // on a hang: the phase and each stuck thread's last operations
  double elapsed_s = 0;
  // Under the scheduler: each round's choices and step hash (the schedule),
  // the steps in all, and a hash over the rounds' hashes.
  std::vector<Round> rounds;
  uint64_t sched_steps = 0;
  uint64_t run_hash = 0;
  uint64_t total_ops() const;
  bool ok() const { return violations.empty() && nr_mismatches == 0 && frames_leaked == 0 && hangs.empty(); }
};

// The System runs use, made as a Config says: its RAM and ZONE_MOVABLE, the
// swap devices, every THP size enabled, the hugetlb pools its memory types
// need. A caller may keep one for many runs (fuzz_ops makes thousands, and
// making and filling a System was most of each): a run leaves it as it found
// it (every process exited, every file closed, every frame back but the
// kernel's own, the tune keys it switched restored), and a run that did not
// (a violation, a mismatch, a leak) retires it.
class Machine {
 public:
  ~Machine();
  // Whether a run with this Config can use this machine: the same RAM,
  // swap devices, memory types and threads (the pools are sized per thread).
  bool fits(const Config& cfg) const;
  const System& system() const { return *sys_; }

 private:
  friend std::unique_ptr<Machine> make_machine(const Config&, std::string*);
  friend bool run(Machine*, const Config&, Result*, std::string*);
  Machine() = default;
  Config made_for_;
  std::unique_ptr<System> sys_;
  std::vector<std::string> types_run_;         // the types this machine holds
  std::map<std::string, std::string> not_run_;  // the others, with the reason
  size_t warnings_seen_ = 0;                    // the model's warnings earlier runs reported
  bool retired_ = false;
};

// Under the scheduler, the allocator is set so that the model's objects
// get the same addresses from the same steps (run() does it; a caller that
// allocates a replay's schedule first, as the CLI does, calls it earlier).
void deterministic_allocator();

// False (and *err) when the System cannot be set up as configured.
std::unique_ptr<Machine> make_machine(const Config& cfg, std::string* err);
// One run on a machine that fits cfg; false (and *err) when it does not fit,
// was retired, or the run cannot be set up.
bool run(Machine* m, const Config& cfg, Result* out, std::string* err);
// One run on a machine of its own.
bool run(const Config& cfg, Result* out, std::string* err);

}  // namespace mmlab::stress
