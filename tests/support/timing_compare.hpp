// timing_compare.hpp — for [timing] tests: two ways of doing one thing,
// timed in one run, interleaved round by round (a slow spell of a busy
// machine hits both alike), compared by medians on rank 0's clock.
#pragma once
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

namespace timing_compare {

// median(time of `numerator`) / median(time of `denominator`), each timed
// between barriers over `rounds` interleaved rounds after one untimed call
// of each. Collective: the same verdict on every rank (rank 0's).
inline double median_ratio(workbook::Communicator& comm, int rounds, const std::function<void()>& numerator,
                           const std::function<void()>& denominator) {
  auto time_it = [&](const std::function<void()>& work) {
    comm.barrier();
    const double start = workbook::now_seconds();
    work();
    comm.barrier();
    return workbook::now_seconds() - start;
  };
  time_it(numerator);
  time_it(denominator);
  std::vector<double> top, bottom;
  for (int round = 0; round < rounds; ++round) {
    top.push_back(time_it(numerator));
    bottom.push_back(time_it(denominator));
  }
  torch::Tensor ratio = torch::full({1}, workbook::median(top) / workbook::median(bottom), torch::kFloat64);
  comm.broadcast(ratio, 0);
  return ratio.item<double>();
}

}  // namespace timing_compare
