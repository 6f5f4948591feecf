// The converter of `mmlab record` (docs/RECORD.md "The converter's
// rules"): the text `perf script` prints of a recording becomes a Trace.
// It reads every field by its name, never by position in a format, and
// refuses a malformed line with a message naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "record/mmtrace.h"

namespace mmlab::record {

// The `perf script` arguments the converter reads: comm, pid/tid, CPU, the
// time in ns, the event name and its fields, MMAP2 and lost-record lines.
inline constexpr const char* kPerfScriptFields = "comm,tid,pid,cpu,time,event,trace";
std::vector<std::string> perf_script_args();

// The recorder writes lines "# mmlab KEY VALUE" before the perf text (the
// header it measured: host profile, counters, mounts); the converter reads
// them back, so that a saved text converts alone on any machine.
//   command ARG...            (one line, the words JSON-quoted)
//   root PID                  the task whose exec starts the recording
//   attach 1                  -p: the tasks' mms existed before the capture
//   release R / arch A / zero_page 0|1 / fault_around_bytes N
//   overcommit_memory N / numa_balancing N / pswpin N / pswpout N
//   thp PATH VALUE            a file under /sys/kernel/mm/transparent_hugepage
//   minflt N / majflt N / flags N / lost N
//   mount TYPE PATH           tmpfs and hugetlbfs mount points (file classes)
//   size DEV INO BYTES        a mapped file's size when the run ended (stat)

// What the conversion kept and dropped, for the recorder's summary.
struct ConvertStats {
  uint64_t lines = 0;
  uint64_t faults = 0;
  uint64_t dropped_no_mm = 0;        // records of a task whose mm is not known (before the first exec)
  uint64_t dropped_kernel_addr = 0;  // faults on kernel addresses
  uint64_t mmap2_dropped = 0;        // MMAP2 records of brk, mprotect, mremap (not a mapping call)
  uint64_t unconverted_calls = 0;    // system calls seen but not in the Trace (process_madvise, ftruncate, ...)
  uint64_t failed_calls = 0;         // mapping calls that returned an error (kept, with ret)
  uint64_t reordered = 0;            // records moved after the fork or mapping call they need
  uint64_t unmatched_exits = 0;      // a sys_exit without its sys_enter (the capture began inside the call)
};

// Converts the whole text. 0, or -1 with *err "line N: what is wrong: the
// line". `stats` may be null.
int convert_perf_script(const std::string& text, Trace* out, ConvertStats* stats, std::string* err);

// The file class of a mapped path (FileClass), given the tmpfs and hugetlbfs
// mount points: "(deleted)", "/SYSV", "/memfd:" and tmpfs paths are shmem.
FileClass file_class_of(const std::string& path, const std::vector<std::string>& tmpfs,
                        const std::vector<std::string>& hugetlbfs);

}  // namespace mmlab::record
