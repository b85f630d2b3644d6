// batch_stats.cpp — ex5.1: per-channel mean and variance over every rank's batch.
#include "sync_bn.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

BatchStats global_batch_stats(const torch::Tensor& input, workbook::Communicator& comm) {
  WB_ASSERT(input.dim() == 4, "SyncBatchNorm2d expects [B, C, H, W] input, got {} dimensions", input.dim());
  // BEGIN SOLUTION ex5.1
  const int64_t channels = input.size(1);
  const int64_t values = channels == 0 ? 0 : input.numel() / channels;  // per channel, on this rank
  // [Σx | Σx² | count] in one float64 buffer, so that one all-reduce carries all three.
  torch::Tensor sums = torch::zeros({2 * channels + 1}, input.options().dtype(torch::kFloat64));
  if (values > 0) {  // an empty batch contributes zeros
    // This rank's mean, then its sum of squared deviations from that mean:
    // two passes in the input's precision, both stable, turned into sums in
    // float64 (see Note [sums, not means]).
    const double n = static_cast<double>(values);
    const torch::Tensor mean = input.sum({0, 2, 3}) / n;
    const torch::Tensor squared_deviations = (input - mean.view({1, -1, 1, 1})).square_().sum({0, 2, 3});
    const torch::Tensor mean64 = mean.to(torch::kFloat64), var64 = squared_deviations.to(torch::kFloat64) / n;
    sums.narrow(0, 0, channels).copy_(mean64 * n);
    sums.narrow(0, channels, channels).copy_((var64 + mean64.square()) * n);
    sums[2 * channels] = n;
  }
  comm.all_reduce(sums, workbook::ReduceOp::Sum);

  BatchStats stats;
  stats.count = static_cast<int64_t>(sums[2 * channels].item<double>());
  WB_CHECK(stats.count > 1, "SyncBatchNorm2d needs more than one value per channel over all ranks, got {}",
           stats.count);
  stats.mean = sums.narrow(0, 0, channels) / static_cast<double>(stats.count);
  stats.var = (sums.narrow(0, channels, channels) / static_cast<double>(stats.count) - stats.mean.square())
                  .clamp_min(0.0);  // rounding can leave a tiny negative
  return stats;
  // END SOLUTION
}

}  // namespace ch05
