// progress.cpp — the one-line progress bar of a single process on a terminal (progress.hpp).
#include "workbook/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace workbook {

namespace {
// The clock of now_seconds() (timing.hpp), without the LibTorch that header brings.
double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), enabled_(enabled) {}

void ProgressBar::update(int64_t done, const std::string& suffix) {
  if (!enabled_) return;
  const double now = seconds_now();
  if (done < total_ && now - last_draw_ < 0.1) return;  // redraw at most 10 times a second
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  fmt::print("\r{} [{}] {:>3}% {}", label_, bar, 100 * done / total_, suffix);
  std::fflush(stdout);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    fmt::print("\r\033[2K");
    std::fflush(stdout);
  }
  drawn_ = false;
}

}  // namespace workbook
