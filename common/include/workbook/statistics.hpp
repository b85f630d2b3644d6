// statistics.hpp — the median, which every benchmark in the workbook reports:
// on a busy machine one slow run moves the mean, not the median.
#pragma once
#include <algorithm>
#include <vector>

namespace workbook {

// The median of `values` (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The mean of `values`; 0 for none (averages over sizes, as nccl-tests' "Avg bus bandwidth").
inline double mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

}  // namespace workbook
