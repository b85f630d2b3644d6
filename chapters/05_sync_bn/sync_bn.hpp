// sync_bn.hpp — Chapter 5's first half: BatchNorm whose statistics span every
// rank (SyncBatchNorm2d), and the conversion of a model's BatchNorm2d layers.
//
//   rank 0: x₀ [B₀,C,H,W]      rank 1: x₁ [B₁,C,H,W]       (B₀ ≠ B₁ is fine, 0 too)
//   ex5.1  one collective ──> every rank: the mean and variance of [x₀; x₁] per channel
//   ex5.2  forward:  y = (x − mean) / √(var + ε) · w + b   with the GLOBAL mean, var
//          backward: one collective ──> dx on each rank: ∂(Σ every rank's loss) / ∂x_r
//   ex5.3  the layer: train → ex5.1 + ex5.2 + running statistics; eval → none of it
//   ex5.4  convert_sync_batchnorm: every BatchNorm2d in a model becomes one
//
// Per rank, the result is exactly what BatchNorm2d computes on the
// concatenation of every rank's batch: the tests compare against that.
#pragma once
#include <cstdint>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch05 {

// ---- ex5.1: statistics over every rank's batch ----------------------------------

// Per-channel statistics of the global batch (every rank's [B, C, H, W]).
struct BatchStats {
  torch::Tensor mean;  // [C], float64
  torch::Tensor var;   // [C], float64, biased (divided by count): what normalizing uses
  int64_t count = 0;   // values per channel over all ranks: Σ B_r · H · W
};

// Collective: every rank calls it, including a rank whose batch is empty
// (B = 0), and every rank gets the same statistics. ONE collective call (a
// test counts them), whatever the number of ranks; float32 input whose mean
// is large against its spread (values near 1000, spread 1) must still give
// the right variance (a test checks it); a global count of 1 or less is a
// UserError (WB_CHECK), raised on every rank alike.
BatchStats global_batch_stats(const torch::Tensor& input, workbook::Communicator& comm);

// ---- ex5.2: normalizing with global statistics, and its backward ----------------

// forward(input, weight, bias, mean, var, count, comm, eps): input [B, C, H, W];
// weight, bias [C]; mean, var [C] from global_batch_stats (any float dtype);
// count: N, the values per channel over every rank. Communicates nothing:
// the statistics are global already.
//
// backward, given dy (the gradient of this rank's loss with respect to y),
// returns on every rank:
//   dx      = the gradient of the SUM of every rank's loss with respect to
//             this rank's input x (every rank's outputs depend on x, through
//             the global mean and variance): what BatchNorm2d's backward on
//             the concatenated batch gives for this rank's rows;
//   dweight, dbias = this rank's share only (its own samples' terms);
//   no gradient for the other arguments.
// With ONE collective (a test counts them) on every rank, an empty batch
// included. Which per-channel quantities must cross ranks for dx is yours to
// derive from BatchNorm's backward.
//
// Note: [whose loss] dweight and dbias stay local, like every other
// parameter's gradient: DDP's all-reduce (Chapter 3) averages them
// afterwards, as it averages the loss. Reducing them here too would count
// them twice.
class SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& mean,
                               const torch::Tensor& var, int64_t count, workbook::Communicator* comm, double eps);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

// ---- ex5.3: the layer ----------------------------------------------------------

// A drop-in for torch::nn::BatchNorm2d (the same options, parameters and
// buffers, under the same names), whose training-mode statistics span every
// rank of `comm`. In training mode it is collective: every rank must call
// forward (and backward) the same number of times, an empty batch included.
// In eval mode it normalizes with the running statistics and communicates
// nothing.
class SyncBatchNorm2dImpl : public workbook::TensorLayer {
 public:
  SyncBatchNorm2dImpl(const torch::nn::BatchNormOptions& options, workbook::Communicator& comm);
  // ex5.4: takes over `source`'s parameters and buffers: the very tensors, not
  // copies, so an optimizer that already holds them keeps working.
  SyncBatchNorm2dImpl(torch::nn::BatchNorm2dImpl& source, workbook::Communicator& comm);

  // Training: normalizes with ex5.1's global statistics through ex5.2's
  // function, and updates running_mean, running_var and num_batches_tracked
  // (without autograd) exactly as BatchNorm2d does on the concatenated batch
  // (with momentum set, and with momentum unset: the cumulative average; the
  // tests compare the buffers with BatchNorm2d's). Eval: the running
  // statistics, no communication.
  torch::Tensor forward(torch::Tensor input) override;

  torch::nn::BatchNormOptions options;
  torch::Tensor weight, bias;                                   // [C], trained
  torch::Tensor running_mean, running_var, num_batches_tracked;  // buffers

 private:
  workbook::Communicator* comm_;
};

// ---- ex5.4: converting a model -------------------------------------------------

// Replaces every BatchNorm2d in `model`, at any depth, by a SyncBatchNorm2d
// that takes over its tensors (registered under the same name, in the same
// training mode). Returns how many were replaced. The model's forward must
// call its layers through its registry of children, as FashionCNN does (see
// Note [replaceable norm layers] in workbook/models.hpp). A Sequential or a
// ModuleList calls its own list of layers, which replace_module does not
// change: a BatchNorm2d directly inside one is a UserError (WB_CHECK), as is
// one without weights or running statistics, and then nothing is replaced.
int convert_sync_batchnorm(torch::nn::Module& model, workbook::Communicator& comm);

}  // namespace ch05
