// libFuzzer target over the scenario parser (scenario_parse_text). The
// property: the parser never crashes, hangs or throws anything but its own
// parse error, and every input it rejects gets a message that names
// file:line:column and says what was expected there.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mmlab/scenario.h"

namespace {

constexpr const char kName[] = "fuzz.mms";

// "fuzz.mms:LINE:COLUMN: expected ...", LINE and COLUMN positive decimals.
bool names_file_line_column(const std::string& e) {
  const std::string prefix = std::string(kName) + ":";
  if (e.compare(0, prefix.size(), prefix) != 0) return false;
  size_t i = prefix.size();
  for (int field = 0; field < 2; field++) {
    size_t start = i;
    while (i < e.size() && std::isdigit(static_cast<unsigned char>(e[i]))) i++;
    if (i == start || e[start] == '0' || i >= e.size() || e[i] != ':') return false;
    i++;
  }
  return e.compare(i, 10, " expected ") == 0 && e.size() > i + 10;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  auto prog = mmlab::scenario_parse_text(kName, text, &error);
  if (prog) {
    if (!error.empty()) {
      std::fprintf(stderr, "accepted input with an error message: %s\n", error.c_str());
      std::abort();
    }
    (void)mmlab::scenario_count_tests(*prog, "");
    return 0;
  }
  if (!names_file_line_column(error)) {
    std::fprintf(stderr, "rejected input without file:line:column: expected ...: '%s'\n", error.c_str());
    std::abort();
  }
  return 0;
}
