// The schedule line's helpers that the explorer's replay shares
// (schedule_line.cpp; the line's format is in include/mmlab/explore.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mmlab/explore.h"

namespace mmlab::explore {

// The pieces of `s` between the separators ("" gives none, "a," gives "a", "").
std::vector<std::string_view> split_on(std::string_view s, char sep);
// A step's site and op as the line's site table has them: "mutex_lock:acquire".
std::string site_op(const char* site, uint8_t op);
// ... and as a message shows them: "mutex_lock acquire".
std::string site_shown(std::string s);
// The line of a run (this build, no test or tune yet): its choices, step
// hash (none when the hash is 0: a crashed run's steps, seen from the
// parent), and the site table of its trace.
ScheduleLine line_from(const RunResult& r, const std::vector<uint8_t>& choices);

}  // namespace mmlab::explore
