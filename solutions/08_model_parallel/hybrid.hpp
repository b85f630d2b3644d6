// hybrid.hpp — Chapter 8, third part: tensor parallelism and data
// parallelism together. The job's n ranks form a grid of T × D: each of the D
// tensor groups holds one whole model split T ways (ex8.1 to ex8.4), and the
// T data groups join the ranks that hold the same part, each of which trains
// on different samples and averages its gradients with its data group.
//
//   4 ranks on 2 nodes (ranks 0, 1 on node 1; 2, 3 on node 2), T = 2:
//
//   consecutive tensor groups:            strided tensor groups:
//     tensor {0, 1}  tensor {2, 3}          tensor {0, 2}  tensor {1, 3}
//     data   {0, 2}  data   {1, 3}          data   {0, 1}  data   {2, 3}
//     → tensor traffic inside a node,       → tensor traffic over the link,
//       data traffic over the link            data traffic inside a node
//
// Which goes over the slower link is the layout's whole question: the
// tensor groups' all-reduces carry activations, twice per step and in the
// middle of forward and backward, growing with the batch; the data groups'
// carry gradients, once per step, growing with the model's part.
#pragma once
#include <functional>
#include <memory>

#include <torch/torch.h>

#include "tensor_parallel.hpp"
#include "workbook/communicator.hpp"

namespace ch08 {

enum class TensorGroups {
  Consecutive,  // ranks [0, T), [T, 2T), ...: with T ranks per node, a tensor group is a node
  Strided,      // ranks {0, D, 2D, ...}, {1, D + 1, ...}: a tensor group spans the nodes
};

struct HybridGroups {
  std::unique_ptr<workbook::Communicator> tensor;  // the T ranks that split one model between them
  std::unique_ptr<workbook::Communicator> data;    // the D ranks that hold the same part of it
};

// ---- ex8.8: the groups -------------------------------------------------------
// Splits `world` into its tensor and data groups, each numbered in the
// world's order. world.size() must be a multiple of tensor_ranks.
HybridGroups make_hybrid_groups(workbook::Communicator& world, int tensor_ranks, TensorGroups placement);

// ---- ex8.9: a step --------------------------------------------------------------
// One training step of `model`, whose layers may be split over the tensor
// group. `loss()` runs the forward of this data group's samples (the same
// samples on every rank of its tensor group; each data group has its own,
// all of the same count) and returns their mean loss; the split layers
// communicate inside the forward and backward they make.
// After the step, every rank's parameters are what one process training the
// whole model on the global batch (every data group's samples, the loss
// their mean) would have after the same optimizer step, each rank holding
// its part of them. (BatchNorm aside: each data group's samples are a batch
// of their own, as in Chapter 3.) Returns the value `loss()` gave this step,
// computed before the update.
// BEGIN SOLUTION NOTE ex8.9
// Zero the gradients, loss(), backward (the tensor group's all-reduces run
// inside), then the gradients averaged over the data group, never over the
// tensor group, whose ranks hold different parts; then the optimizer.
// END SOLUTION NOTE
torch::Tensor hybrid_train_step(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                                const std::function<torch::Tensor()>& loss, HybridGroups& groups);

}  // namespace ch08
