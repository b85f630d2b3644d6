// sharding_common.hpp — Chapter 7: what every stage shares. The Sharding
// interface a training loop drives, its options, the layers stage 3 sees,
// stage 0 (Chapter 3's DDP, given), the norms of tensors split across ranks
// (ex7.4) and the optimizers. sharding.hpp adds the stages 1 to 3.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "flat_group.hpp"
#include "optimizers.hpp"  // Chapter 6's reference: Lamb, LambOptions
#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch07 {

// What a rank holds, counted from the tensors: bytes of parameters, gradients
// and optimizer state (every defined tensor in the optimizer's state).
struct HeldBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t total() const { return parameters + gradients + optimizer_state; }
};

// The bytes of every tensor in an optimizer's state (LibTorch's Adam: exp_avg,
// exp_avg_sq, and max_exp_avg_sq with amsgrad; LAMB's moments).
int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer);

// A layer as stage 3 sees it: its parameters, and how to call it. Frozen
// parameters may be listed: they stay whole (the tests' toy model has one,
// and a parameter that never gets a gradient). A layer without trainable
// parameters has no group: gathering or releasing it does nothing.
struct Layer {
  std::string name;
  std::vector<torch::Tensor> parameters;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

// FashionCNN::forward cut into its layers (given): conv1, bn1 (with ReLU and
// pooling), conv2, bn2 (and flatten), fc1 (with dropout), fc2, fc3. Calling
// them in order is model.forward, the same random numbers for dropout included.
std::vector<Layer> fashion_cnn_layers(workbook::FashionCNN& model);

struct ShardingOptions {
  PartitionFn partition = partition_parameters;
  // Stage 3's layers, for make_sharding; none: the model must be a
  // FashionCNN (fashion_cnn_layers).
  std::vector<Layer> layers;
  // Chapter 4's bucket limits: stage 2's groups.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // > 0: before every optimizer step, the averaged gradients are clipped to
  // this global norm (stage 0: torch::nn::utils::clip_grad_norm_; stages 1
  // to 3: ex7.4's clip_gradients_by_global_norm on the shards).
  double max_grad_norm = 0.0;
};

// Builds the optimizer for the tensors a stage hands it: the whole model's
// parameters (stage 0), or one tensor per group, this rank's unpadded part
// of it (stages 1 and 2: owned(); stage 3: a view of kept()).
using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<FlatGroup*>& groups,
                                                                             std::vector<torch::Tensor> tensors)>;

// Note: [one step with a Sharding]
//   sharding.zero_grad(); loss = criterion(sharding.forward(model, x)); loss.backward(); sharding.step();
// After step() every rank's model holds the same, updated parameters: the
// one that a single process would have after one step on the global batch.
class Sharding {
 public:
  virtual ~Sharding() = default;
  virtual void zero_grad() = 0;
  // After backward: average the gradients over ranks, step the optimizer,
  // bring every rank's parameters up to date. Collective.
  virtual void step() = 0;
  virtual HeldBytes held() const = 0;
  virtual torch::optim::Optimizer& optimizer() = 0;
  virtual std::vector<FlatGroup*> groups() { return {}; }
  // The model's forward: the same output, and the same gradients from it, as
  // model.forward. Stage 3 overrides it (it keeps only shards).
  virtual torch::Tensor forward(workbook::Classifier& model, const torch::Tensor& images) {
    return model.forward(images);
  }
  // Stage 3 keeps only shards between steps: gather_full() brings every
  // parameter back (to evaluate, save or hash the model) until release_full().
  // Collective. The other stages hold every parameter: nothing to do.
  virtual void gather_full() {}
  virtual void release_full() {}
  // What the parameters took at most while training, so far (stage 3:
  // shards plus the layers gathered at the time, gather_full() not
  // counted); the other stages: held().parameters.
  virtual int64_t peak_parameter_bytes() const { return held().parameters; }

 protected:
  // Given: the optimizer's step, after clipping the shards' gradients when
  // ShardingOptions::max_grad_norm is set. The stages call it in place of
  // optimizer().step().
  void step_optimizer(workbook::Communicator& comm);

  int64_t frozen_parameter_bytes_ = 0;  // parameters no group holds: every rank keeps them whole
  double max_grad_norm_ = 0.0;          // ShardingOptions::max_grad_norm
};

// The bytes of `model`'s parameters that do not require a gradient.
int64_t frozen_parameter_bytes(torch::nn::Module& model);

// Stage 0: Chapter 3's DDP (the reference's all_reduce_gradients), the
// baseline every stage is compared with (given).
class ReplicatedOptimizer : public Sharding {
 public:
  ReplicatedOptimizer(torch::nn::Module& model, workbook::Communicator& comm, const MakeOptimizer& make_optimizer,
                      const ShardingOptions& options = {});
  void zero_grad() override { optimizer_->zero_grad(); }
  void step() override;
  HeldBytes held() const override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }

 private:
  torch::nn::Module& model_;
  workbook::Communicator& comm_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// ---- ex7.4: norms of tensors that are split across ranks ---------------------------

// ex7.4: ‖·‖² of every parameter of a group, over all ranks. `owned` is this
// rank's owned() part of some per-element quantity laid out as flat() (the
// parameters, their gradients, an update). Returns float64 [number of
// parameters], the same on every rank: entry i is the squared norm of the
// whole of parameter i's quantity, wherever its elements lie. One collective.
torch::Tensor squared_norms_per_parameter(const Partition& partition, const torch::Tensor& owned,
                                          workbook::Communicator& comm);

// ex7.4: clipping by global norm, as torch::nn::utils::clip_grad_norm_ but on
// shards: ‖g‖ is the norm of every parameter's averaged gradient, of every
// group, though each rank holds only its shard gradients; every shard
// gradient is multiplied by max_norm / (‖g‖ + 1e-6) wherever that is below
// 1, as clip_grad_norm_ clamps it (so a norm a hair under max_norm is
// scaled too). Returns ‖g‖ before clipping, the same on every rank.
// Collective.
double clip_gradients_by_global_norm(const std::vector<FlatGroup*>& groups, double max_norm,
                                     workbook::Communicator& comm);

// LAMB (Chapter 6, ex6.3) on shards (given; uses ex7.4): the moments are
// kept for owned() only, and each parameter's trust ratio ‖w‖ / ‖u‖ comes from
// squared_norms_per_parameter, so a parameter split between ranks gets the
// ratio of the whole tensor. As Chapter 6's layer_adaptation_groups: tensors
// of one dimension get no weight decay and no trust ratio.
std::unique_ptr<torch::optim::Optimizer> make_sharded_lamb(const std::vector<FlatGroup*>& groups,
                                                           std::vector<torch::Tensor> owned,
                                                           workbook::Communicator& comm, ch06::LambOptions options);

// Optimizers for any stage: Adam (LibTorch's own, on whatever tensors the
// stage hands it) and LAMB (Chapter 6's on the whole model at stage 0; on
// shards, make_sharded_lamb, at stages 1 to 3).
MakeOptimizer adam(double lr);
MakeOptimizer lamb(workbook::Communicator& comm, double lr);

// The elements each rank sends, had every collective been a ring
// (Chapter 4): all-reduce 2(N-1)/N per element, reduce-scatter and
// all-gather (N-1)/N of the full buffer each.
int64_t ring_elements_sent(const workbook::CommStats& stats, int world_size);

}  // namespace ch07
