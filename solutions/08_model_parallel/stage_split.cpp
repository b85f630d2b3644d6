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
  // BEGIN SOLUTION ex8.6
  const size_t n = block_costs.size();
  WB_CHECK(stages >= 1 && static_cast<size_t>(stages) <= n,
           "balanced_split: {} stages for {} blocks (each stage needs a block)", stages, n);
  for (size_t b = 0; b < n; ++b)
    WB_CHECK(std::isfinite(block_costs[b]) && block_costs[b] >= 0,
             "balanced_split: block {}'s cost is {}; costs must be finite and at least 0", b, block_costs[b]);
  // Note: [the bottleneck by dynamic programming] Greedy fills (cut when a
  // stage reaches total / p) miss: one large block late in the list forces
  // the others to share less. best[k][j]: the least bottleneck of blocks
  // 0..j-1 in k stages; best[k][j] = min over the last stage's first block i
  // of max(best[k-1][i], cost(i..j-1)). O(p·n²) on a handful of blocks is
  // nothing; a binary search on the bottleneck works as well.
  const size_t p = static_cast<size_t>(stages);
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t b = 0; b < n; ++b) prefix[b + 1] = prefix[b] + block_costs[b];
  const double infinity = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(n + 1, infinity));
  std::vector<std::vector<size_t>> last_first(p + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (size_t k = 1; k <= p; ++k)
    for (size_t j = k; j <= n; ++j)
      for (size_t i = k - 1; i < j; ++i) {
        const double bottleneck = std::max(best[k - 1][i], prefix[j] - prefix[i]);
        if (bottleneck < best[k][j]) {
          best[k][j] = bottleneck;
          last_first[k][j] = i;
        }
      }
  // Walk back from all n blocks in p stages: each entry names where its last stage began.
  std::vector<int> firsts(p);
  for (size_t k = p, j = n; k >= 1; --k) {
    j = last_first[k][j];
    firsts[k - 1] = static_cast<int>(j);
  }
  return firsts;
  // END SOLUTION
}

}  // namespace ch08
