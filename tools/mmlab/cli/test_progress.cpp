// The progress line of `mmlab run` and `mmlab diff` (commands.h).
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "fmt/format.h"
#include "report/progress.h"

namespace mmlab::cli {

TestProgressLine::TestProgressLine(std::string prefix) : start_(std::chrono::steady_clock::now()) {
  if (isatty(STDOUT_FILENO)) return;
  line_ = std::make_unique<ProgressLine>(std::move(prefix), [this] { return state(); });
}

// The line is stopped (and erased from a terminal) before the counts it reads go.
TestProgressLine::~TestProgressLine() { line_.reset(); }

TestProgress TestProgressLine::callback() {
  return [this](size_t done, size_t total, bool failed) {
    total_.store(total);
    if (failed) failed_.fetch_add(1);
    done_.store(done);
  };
}

std::string TestProgressLine::state() const {
  const size_t done = done_.load(), total = total_.load();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string s = fmt::format("{}/{} tests, {} failed, {:.0f} s", done, total, failed_.load(), elapsed);
  if (done > 0 && done < total) s += fmt::format(", about {:.0f} s left", elapsed / static_cast<double>(done) * static_cast<double>(total - done));
  return s;
}

}  // namespace mmlab::cli
