// One line of `perf script` text (perf_convert.h's field list), split into
// its header and its fields. Internal to the converter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mmlab::record {

// "COMM PID/TID [CPU] SEC.NSEC: EVENT: FIELDS". COMM may hold spaces.
struct PerfLine {
  std::string_view comm;
  int64_t pid = 0, tid = 0;
  int cpu = -1;  // MMAP2 lines print [-01]
  uint64_t t_ns = 0;
  std::string_view event;  // "exceptions:page_fault_user", "PERF_RECORD_MMAP2", ...
  std::string_view rest;   // what follows the event name
};

enum class LineKind { kEvent, kSkip };  // kSkip: blank, or a comment

// 0 and *kind, or -1 with *why (what in the line is malformed).
int parse_perf_line(std::string_view line, PerfLine* out, LineKind* kind, std::string* why);

// A field of a tracepoint's text by name: "name=VALUE" (VALUE up to the next
// space) or, as the syscall tracepoints print, "name: VALUE" (up to a comma).
// false if the name is not there.
bool perf_field(std::string_view rest, std::string_view name, std::string_view* value);
// A number as perf prints it: 0x-prefixed hex or decimal (a leading '-' for
// a negative decimal, which *v holds two's-complement). false if malformed.
bool perf_number(std::string_view s, uint64_t* v);
// perf_field, then perf_number: false if missing or malformed.
bool perf_field_number(std::string_view rest, std::string_view name, uint64_t* v);

// A PERF_RECORD_MMAP2 line's fields:
// "PID/TID: [START(LEN) @ PGOFF MAJ:MIN INO GEN]: PROT PATH".
struct Mmap2 {
  uint64_t start = 0, len = 0, pgoff = 0, dev = 0, ino = 0;
  uint32_t prot = 0;  // PROT_READ | PROT_WRITE | PROT_EXEC
  bool shared = false;
  std::string path;
};
int parse_mmap2(std::string_view rest, Mmap2* out, std::string* why);

}  // namespace mmlab::record
