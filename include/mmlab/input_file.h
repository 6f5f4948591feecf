// Reading a file named on the command line (a scenario, a list of known
// differences, a cost profile): only a regular file, and only up to a
// bound, so that /dev/zero, a fifo or a directory is an error at once and
// never an endless read or a wait for a writer.
#pragma once

#include <cstdint>
#include <string>

namespace mmlab {

// The bytes of the regular file at `path`, at most max_bytes of them: 0, or
// -errno with *err saying why ("not a regular file (a character device)",
// "larger than 64 MiB", the open's error), without the path.
int read_input_file(const std::string& path, uint64_t max_bytes, std::string* out, std::string* err);

}  // namespace mmlab
