// `mmlab record` (docs/RECORD.md): runs a program, or attaches to one,
// under `perf record` with the events a replay needs, measures the host
// profile around it, and converts the capture into a Trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "record/mmtrace.h"
#include "record/perf_convert.h"

namespace mmlab::record {

struct RecordOptions {
  std::vector<std::string> command;  // launch mode: the program and its arguments
  int pid = 0;                       // attach mode (-p): the process to record until it exits or SIGINT
  bool keep_thp = false;             // launch mode: leave THP on (the trace is for fidelity only)
  bool rss = false;                  // also kmem:rss_stat
  bool force = false;                // keep a capture with lost records (marked)
  std::string keep_script;           // write the perf script text (with its "# mmlab" header) here
  std::string perf = "perf";         // the perf program
};

// Why a recording cannot run here (not root, not x86-64, no tracefs, an
// event missing, no perf): false with *why; the caller exits 4.
bool record_available(const RecordOptions& o, std::string* why);

// What a recording saw beside the trace, for the summary.
struct RecordResult {
  int child_status = 0;     // launch mode: the program's wait status
  ConvertStats stats;
  std::string perf_stderr;  // what perf record and perf script said
};

// Records, converts, and fills *t (header, files, records). 0; else -1
// with *err (perf failed, the program could not start, the text did not
// convert, records were lost without --force).
int record_program(const RecordOptions& o, Trace* t, RecordResult* res, std::string* err);

// The host profile the replay needs (HostProfile), measured now; the swap
// counters are absolute (record_program turns them into deltas).
HostProfile measure_host_profile();

// The "# mmlab KEY VALUE" lines of a header (perf_convert.h lists the
// keys), which convert_perf_script reads back.
std::string header_lines(const Header& h, const std::vector<std::string>& mounts_lines, bool attach);

}  // namespace mmlab::record
