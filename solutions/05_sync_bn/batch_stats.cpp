// batch_stats.cpp — ex5.1: per-channel mean and variance over every rank's batch.
#include "sync_bn.hpp"
#include "workbook/errors.hpp"

namespace ch05 {

BatchStats global_batch_stats(const torch::Tensor& input, workbook::Communicator& comm) {
  WB_ASSERT(input.dim() == 4, "SyncBatchNorm2d expects [B, C, H, W] input, got {} dimensions", input.dim());
  // BEGIN SOLUTION ex5.1
  const int64_t channels = input.size(1);
  // [Σx | Σx² | count] in one buffer, so that one all-reduce carries all three.
  torch::Tensor sums = torch::empty({2 * channels + 1}, input.options().dtype(torch::kFloat64));
  const torch::Tensor x = input.to(torch::kFloat64);  // see Note [sums, not means]
  sums.narrow(0, 0, channels).copy_(x.sum({0, 2, 3}));
  sums.narrow(0, channels, channels).copy_(x.square().sum({0, 2, 3}));
  sums[2 * channels] = static_cast<double>(input.numel() / std::max<int64_t>(channels, 1));
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
