// tensor_parallel.hpp — Chapter 8, first half: tensor parallelism. One layer's
// weight matrix is cut between the ranks, and every rank computes its part of
// every sample (Megatron-LM's column- and row-parallel layers).
//
// A pair of Linear layers, y = B·(A·x), split over n ranks without gathering
// the hidden activations in between:
//
//             column-parallel A                 row-parallel B
//   x ──f──> rank 0: A₀·x = h₀ [B, H₀] ──> rank 0: B₀·h₀ ┐
//   [B, I]   rank 1: A₁·x = h₁ [B, H₁] ──> rank 1: B₁·h₁ ┼─g──> y = Σ_r B_r·h_r [B, O]
//            (A's rows: output features)    (B's columns)┘       (+ bias, once)
//
// In forward every rank's A_r reads the whole x, and y, on every rank, is the
// sum of the ranks' products (plus B's bias, once). In backward every rank
// must end with the gradient of x that one process computes for the whole
// pair. f and g make both directions right: one all-reduce in forward and
// one in backward per pair, whatever the number of ranks (the tests count
// them). Whatever lies between A and B must act on each hidden feature alone
// (in FashionCNN it is dropout; an elementwise nonlinearity would do as
// well): then it runs on each rank's columns as it is.
//
// Every rank of a tensor-parallel group computes on the same samples: the
// input x is the same on every rank, and so is y.
#pragma once
#include <cstdint>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/errors.hpp"
#include "workbook/models.hpp"

namespace ch08 {

// Given: the part of a dimension of `total` features that `rank` of `ranks`
// owns, [begin, begin + size). The first total % ranks ranks get one more, so
// 7 features over 3 ranks are 3, 2, 2: a width that does not divide is allowed.
struct Shard {
  int64_t begin = 0;
  int64_t size = 0;
};
Shard shard_of(int64_t total, int rank, int ranks);

// Given: a deep copy of one of a whole model's layers (its parameters and
// buffers, on its device, in its dtype): what a rank keeps whole.
template <typename Layer>
Layer copy_layer(const torch::nn::Module& source) {
  auto copy = std::dynamic_pointer_cast<typename Layer::Impl>(source.clone());
  WB_ASSERT(copy != nullptr, "{} is not the kind of layer asked for", source.name());
  return Layer(copy);
}

// ---- ex8.1: the conjugate operators f and g ----------------------------------

// ex8.1. f goes before a column-parallel layer: its input x is the same on
// every rank, and each rank's part of the layer reads all of it. Its
// backward gets the gradient for x that this rank's part passes back.
// Together (f, then this rank's part of A, ..., this rank's part of B, then
// g), the pair's output and x's gradient must be the unsplit pair's on every
// rank, and each rank's gradients of its parts of A and B the unsplit pair's
// gradients of those parts.
class CopyToTensorParallel : public torch::autograd::Function<CopyToTensorParallel> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               workbook::Communicator* comm);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

// ex8.1. g goes after a row-parallel layer: its input is this rank's partial
// product, and its output must be the whole layer's product, the same on
// every rank. Its backward gets the gradient of that output (the same on
// every rank); what it returns is for this rank's partial product.
class ReduceFromTensorParallel : public torch::autograd::Function<ReduceFromTensorParallel> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               workbook::Communicator* comm);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs);
};

inline torch::Tensor copy_to_tensor_parallel(const torch::Tensor& input, workbook::Communicator& comm) {
  return CopyToTensorParallel::apply(input, &comm);
}
inline torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& input, workbook::Communicator& comm) {
  return ReduceFromTensorParallel::apply(input, &comm);
}

// ---- ex8.2: the column-parallel Linear --------------------------------------

// This rank's rows of a Linear's weight [out, in] (its output features
// shard_of(out, rank, n)) and the same part of its bias.
// forward(x [B, in], the same on every rank): [B, this rank's output features],
// and after backward x's gradient must be the whole layer's on every rank,
// though this rank computed only its own features.
class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  // Takes this rank's part of `full`'s weight and bias (copies, not views).
  ColumnParallelLinearImpl(const torch::nn::Linear& full, workbook::Communicator& comm);
  torch::Tensor forward(const torch::Tensor& input);

  torch::Tensor weight, bias;  // [outputs.size, in], [outputs.size]
  Shard outputs;               // which of the full layer's output features this rank computes
  workbook::Communicator* comm;
};
TORCH_MODULE(ColumnParallelLinear);

// ---- ex8.3: the row-parallel Linear -----------------------------------------

// This rank's columns of a Linear's weight [out, in] (its input features
// shard_of(in, rank, n)) and the whole bias.
// forward(x [B, this rank's input features]): [B, out], the same on every
// rank: the whole layer's output, bias included, for the whole input.
class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(const torch::nn::Linear& full, workbook::Communicator& comm);
  torch::Tensor forward(const torch::Tensor& input);

  torch::Tensor weight, bias;  // [out, inputs.size], [out]
  Shard inputs;                // which of the full layer's input features this rank holds
  workbook::Communicator* comm;
};
TORCH_MODULE(RowParallelLinear);

// ---- ex8.4: FashionCNN with its classifier split ----------------------------

// FashionCNN (models.hpp) with fc1 (2304 → 600) and fc2 (600 → 120) split
// over the ranks, the pair that holds 98.6% of its parameters, with ex8.2's
// and ex8.3's layers; the convolutions, BatchNorm and fc3 replicated. The
// logits and every gradient are one process's, on every rank, with one
// all-reduce in forward and one in backward per step, however many ranks
// (the members below say which layer splits which way; why that order needs
// no collective between fc1 and fc2 is worth working out).
class TensorParallelFashionCNN : public torch::nn::Module {
 public:
  // This rank's part of `full` (its weights copied): every rank must pass the
  // same model. dropout_p: after fc1, as FashionCNN's.
  TensorParallelFashionCNN(const workbook::FashionCNN& full, workbook::Communicator& comm,
                           double dropout_p = 0.25, uint64_t dropout_seed = 0);
  torch::Tensor forward(const torch::Tensor& images);  // [N, 1, 28, 28] -> [N, 10] logits, the same on every rank

  // Given: conv1 → BN → ReLU → pool → conv2 → BN → ReLU → pool → flatten: [N, 2304].
  torch::Tensor features(const torch::Tensor& images);
  // Dropout of this rank's columns of fc1's output (training mode only):
  // each feature dropped with probability p and the kept ones scaled by
  // 1 / (1 - p), anew at every call. The split model is one dropout network,
  // whatever the number of ranks: built from the same model and the same
  // dropout_seed, and given the same batches, it trains as the same model on
  // a group of one rank does.
  torch::Tensor dropout(const torch::Tensor& shard);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  ColumnParallelLinear fc1{nullptr};
  RowParallelLinear fc2{nullptr};
  torch::nn::Linear fc3{nullptr};

 private:
  workbook::Communicator* comm_;
  double dropout_p_;
  int64_t hidden_;  // fc1's output features in the whole model (600)
  // Set by the given constructor; dropout() may use any of them, or none:
  uint64_t dropout_seed_;
  torch::Generator dropout_generator_;  // seeded with dropout_seed
  int64_t dropout_calls_ = 0;
};

// What evaluating a split model on the test set found (every rank gets it).
struct Evaluation {
  double accuracy = 0.0, mean_loss = 0.0;
  int64_t correct = 0, total = 0;
};

// Given: the test set through the tensor-parallel model in eval mode, in
// batches of `batch`. Every rank evaluates every sample: the ranks must call
// forward on the same batches, or f and g would add up parts of different samples.
Evaluation evaluate_tensor_parallel(TensorParallelFashionCNN& model, const torch::Tensor& images,
                                    const torch::Tensor& labels, int64_t batch);

}  // namespace ch08
