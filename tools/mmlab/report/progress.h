// The progress of a long run, the one mechanism every subcommand uses
// (stress; bench's steps through progress() of report.h). It writes to
// stderr only, never to stdout or into a JSON report: on a terminal one
// line redrawn in place, otherwise a plain line every 10 s, so that a log
// shows a run is alive without filling up.
//
// A caller gives a function that says the state in one line ("1234567
// operations, 0 violations"); a thread of the ProgressLine asks it and
// draws. The function is called from that thread: what it reads must be
// safe to read while the run writes it (atomics, or data under a lock).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mmlab::cli {

class ProgressLine {
 public:
  enum class Style : uint8_t {
    kRedraw,  // a terminal: "\r" and erase, the line drawn again in place
    kPlain,   // a file or a pipe: one line each time, ending in a newline
  };
  // kRedraw if `out` is a terminal, else kPlain.
  static Style style_for(FILE* out);
  // How often each style draws: a terminal twice a second, a log every 10 s.
  static std::chrono::milliseconds interval_of(Style s);

  // Starts drawing "PREFIX: STATE" every interval_of(style) until destroyed
  // (interval 0: only when show() is called, for tests).
  ProgressLine(std::string prefix, std::function<std::string()> state, FILE* out = stderr);
  ProgressLine(std::string prefix, std::function<std::string()> state, FILE* out, Style style,
               std::chrono::milliseconds interval);
  ~ProgressLine();  // stops; a redrawn line is erased, so the report starts on a clean line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void show();  // draws the state now

 private:
  void loop();

  std::string prefix_;
  std::function<std::string()> state_;
  FILE* out_;
  Style style_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;  // serialises drawing and guards stop_
  std::condition_variable cv_;
  bool stop_ = false;
  bool drawn_ = false;  // a redrawn line is on the terminal
  std::thread thread_;
};

}  // namespace mmlab::cli
