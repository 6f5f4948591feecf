// The progress line of long runs (progress.h).
#include "report/progress.h"

#include <unistd.h>

#include <utility>

namespace mmlab::cli {

ProgressLine::Style ProgressLine::style_for(FILE* out) { return isatty(fileno(out)) ? Style::kRedraw : Style::kPlain; }

std::chrono::milliseconds ProgressLine::interval_of(Style s) {
  return s == Style::kRedraw ? std::chrono::milliseconds(500) : std::chrono::milliseconds(10000);
}

ProgressLine::ProgressLine(std::string prefix, std::function<std::string()> state, FILE* out)
    : ProgressLine(std::move(prefix), std::move(state), out, style_for(out), interval_of(style_for(out))) {}

ProgressLine::ProgressLine(std::string prefix, std::function<std::string()> state, FILE* out, Style style,
                           std::chrono::milliseconds interval)
    : prefix_(std::move(prefix)), state_(std::move(state)), out_(out), style_(style), interval_(interval) {
  if (interval_.count() > 0) thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> g(mu_);
  if (drawn_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
  }
}

void ProgressLine::show() {
  const std::string line = prefix_ + ": " + state_();
  std::lock_guard<std::mutex> g(mu_);
  if (style_ == Style::kRedraw) {
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> g(mu_);
      if (cv_.wait_for(g, interval_, [this] { return stop_; })) return;
    }
    show();
  }
}

}  // namespace mmlab::cli
