// stage_split.cpp — ex8.6: a split of the blocks into stages whose slowest stage is as fast as can be.
#include "stage_split.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "workbook/errors.hpp"

namespace ch08 {

double costliest_stage(const std::vector<double>& block_costs, const std::vector<int>& firsts) {
  double worst = 0.0;
  for (size_t s = 0; s < firsts.size(); ++s) {
    const int end = s + 1 < firsts.size() ? firsts[s + 1] : static_cast<int>(block_costs.size());
    worst = std::max(worst, std::accumulate(block_costs.begin() + firsts[s], block_costs.begin() + end, 0.0));
  }
  return worst;
}

std::vector<int> balanced_split(const std::vector<double>& block_costs, int stages) {
  WB_NOT_IMPLEMENTED("ex8.6");  // TODO(ex8.6): your code here
}

}  // namespace ch08
