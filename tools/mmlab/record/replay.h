// `mmlab replay`: a recorded program run on the model (docs/RECORD.md).
// Every mapping goes at its recorded address, every traced fault becomes one
// access through the model's CPU path (a write for a write fault), and the
// tasks fork, exec, share address spaces and exit as they did.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mmlab/system.h"
#include "record/mmtrace.h"

namespace mmlab::record {

struct ReplayOptions {
  // The recorded host's settings first (zero page, the THP sysfs tree),
  // then `configure` (a column's policy), on the fresh System.
  bool recorded_settings = true;
  std::function<int(System*, std::string* err)> configure;
  // PR_SET_THP_DISABLE as the program set it (false: ignored, to see what
  // the policies would do had the program left THP on).
  bool honour_thp_disable = true;
  // A process's PSS is read at exit and every this many records (the peak
  // is the largest reading).
  uint64_t pss_every = 65536;
  // Read the TLBs' reach every 1,024 records (with a tlb.geometry).
  bool sample_tlb = false;
  // Stop after this many records (0: all); for excerpts and tests.
  uint64_t max_records = 0;
};

// One address space of the recording, as the replay ends it.
struct MmReport {
  uint32_t tid = 0;  // the task that made it (fork or exec)
  std::string comm;
  long peak_rss_anon = 0, rss_anon_at_exit = 0;  // bytes
  long peak_pss = 0, pss_at_exit = 0;
  long private_dirty_at_exit = 0;  // smaps' Private_Dirty summed (what Redis reports as rdb_last_cow_size)
  int64_t faults_traced = 0;       // the trace's faults by this mm's tasks
  int64_t min_flt = 0, maj_flt = 0;  // the model's counts for its tasks (getrusage)
  long traced_peak_rss_anon = -1;  // kmem:rss_stat's largest MM_ANONPAGES reading (-1: none recorded)
  long peak_rss_file = 0;          // file and shmem pages (RssFile + RssShmem)
  long traced_peak_rss_file = -1;  // rss_stat's MM_FILEPAGES + MM_SHMEMPAGES at their largest
};

// The trace's faults as the replay classified them by the VMA they hit.
struct TracedFaults {
  int64_t total = 0;
  int64_t anon_first_touch = 0;   // not present, private anonymous VMA
  int64_t private_present_write = 0;  // present write, private VMA (anonymous or file): a CoW fault
  int64_t other = 0;                   // the rest (file first touches, shared VMAs, reads of present pages)
  int64_t kernel = 0;             // page_fault_kernel
  // A kernel-mode fault on the page of the same task's previous fault, with
  // the same bits: the kernel touching user memory with page faults
  // disabled (an atomic copy) faults again and again without handling one,
  // then faults the page in another way. The trace shows each attempt.
  int64_t kernel_repeats = 0;
  // A fault by one thread on the page another thread of the same mm
  // faulted on last, which the model found mapped: both threads raised the
  // exception, one fault fixed the entry for both.
  int64_t concurrent_noops = 0;
};

struct ReplayResult {
  uint64_t records = 0;
  TracedFaults traced;
  // What the replay met that the recording did not: accesses the model
  // refused, and calls the model answered differently.
  int64_t sigsegv = 0, sigbus = 0;
  int64_t unknown_addresses = 0;  // faults outside every known mapping (a page mapped for them)
  int64_t stack_pages_grown = 0;  // faults below the stack that grew it
  // Pages exec made present with no fault in the trace (its stack's
  // arguments, written through GUP): the replay writes them at the exec,
  // and keeps those faults out of model_faults_by_tasks and first touches.
  int64_t exec_populated = 0;
  int64_t call_divergences = 0;   // a replayed call whose result differs from the recorded one
  std::vector<std::string> first_divergences;  // the first few, for the report
  std::map<std::string, int64_t> counters;  // System::all_counters() at the end
  std::vector<MmReport> mms;               // in creation order
  // The model's min_flt + maj_flt summed over every address space's tasks,
  // less exec_populated.
  int64_t model_faults_by_tasks = 0;
  double seconds = 0;                 // the replay's host time
  uint64_t tlb_l2_reach_peak = 0;     // bytes the L2 TLBs' entries translate, at its largest (with a tlb.geometry)
  // The invariant checker after every process has exited (each violation's
  // invariant), and the violations the model recorded and went on from
  // (System::warnings: under cow.policy rfc, what the posting breaks).
  std::vector<std::string> violations, warnings;
};

// 0, or -1 with *err (the System could not be made, or a configure step failed).
int replay(const Trace& t, const ReplayOptions& o, ReplayResult* out, std::string* err);

// The bytes CoW copies when every folio is 4K (the trace replayed under the
// recorded settings with THP off): a 4K copy is a page the program then
// wrote, so a column's copies beyond these were never written. -1 with
// *err if the replay fails.
int64_t bytes_written_after_sharing(const Trace& t, std::string* err);

// The simulated RAM a replay of `t` asks for: every mapped byte once per
// address space that could write it, bounded, with room for the page
// tables; sized before anything is allocated.
uint64_t replay_ram_bytes(const Trace& t);

}  // namespace mmlab::record
