// progress.cpp — the one-line progress bar of a single process on a terminal (progress.hpp).
#include "workbook/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "workbook/timing.hpp"

namespace workbook {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), enabled_(enabled) {}

void ProgressBar::update(int64_t done, const std::string& suffix) {
  if (!enabled_) return;
  const double now = now_seconds();
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
