// progress.hpp — a one-line progress bar, drawn only when stdout is a terminal.
#pragma once
#include <cstdint>
#include <string>

namespace workbook {

class ProgressBar {
 public:
  // `enabled` false (not a terminal, or not rank 0) makes every call a no-op.
  ProgressBar(std::string label, int64_t total, bool enabled);
  void update(int64_t done, const std::string& suffix = "");
  void finish();  // clears the line
  ~ProgressBar() { finish(); }

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  double last_draw_ = 0.0;
};

}  // namespace workbook
