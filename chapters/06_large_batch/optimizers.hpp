// optimizers.hpp — ex6.2 LARS and ex6.3 LAMB: layer-wise adaptive rates, as
// torch::optim::Optimizer subclasses with their own options and state.
//
// One rate for every layer assumes every layer's gradient is in proportion to
// its weights. At large rates it is not: a layer whose ‖g‖/‖w‖ is 100 times
// another's changes 100 times faster, and diverges first. Both optimizers
// scale each layer's (each parameter tensor's) step by a factor computed from
// that tensor's own norms, recomputed every step, so that every layer moves by
// about the same fraction of its own size, whatever its gradient's scale.
// Biases and BatchNorm's weight and bias are excluded
// (layer_adaptation_groups): they have one value per channel, start at 0 or
// 1, and need neither weight decay nor a layer-wise factor.
//
// The contract: the algorithms as their papers define them, per tensor.
//   ex6.2 LARS: You, Gitman and Ginsburg 2017, "Large Batch Training of
//     Convolutional Networks", Algorithm 1, exactly as written there
//     (trust_coefficient is its η, weight_decay its β, lr its global rate γ;
//     it differs from torch::optim::SGD's momentum in more than the local
//     rate, and the tests tell the variants apart). momentum_correction(true):
//     when lr changes between steps, the step is what it would have been had
//     every past step of the velocity been taken at the new rate (Goyal et
//     al. 2017, §2.2).
//   ex6.3 LAMB: You et al. 2019, "Large Batch Optimization for Deep Learning:
//     Training BERT in 76 Minutes", Algorithm 2 with φ the identity, exactly
//     as written there, with torch::optim::Adam's bias corrections (the step
//     count t per parameter, 1 at its first update); weight_decay is its λ.
//   Both, for every tensor with a gradient (one without is skipped: no
//   decay, no new state):
//   - in a group whose adapt() is false, and wherever the layer-wise factor is
//     undefined (‖w‖ = 0, or the norm it divides by is 0), the factor that
//     multiplies lr is 1: the tensor takes the step an excluded tensor takes
//     (LARS: plain momentum SGD at rate lr; LAMB: Adam with decoupled decay).
//     A tensor that starts at zero must still be able to move.
//   - the factor stays a 0-dim tensor on the parameter's device: a test counts
//     the values one step reads on the host, for 1 tensor and for 4.
//   - the state (LARS: the velocity and the last rate; LAMB: both moments and
//     t) lives in state() under the parameter's key, so checkpoints carry it.
//   The tests compare float64 steps (one to four steps, two tensors of
//   different norms in one group, a change of rate between steps, a zero
//   tensor) to 1e-12 with values recorded from the reference solution, and
//   with torch::optim::SGD's (momentum) and AdamW's steps where the above
//   says they agree; they check properties any correct implementation has
//   (how far a step moves a tensor of a given norm), and a resumed run to
//   the last bit.
//
// Note: [state in checkpoints] LibTorch saves an optimizer's state keyed by
// parameter position, through the ParamState and Options classes' serialize()
// methods; defining those (below) is all it takes for ch03's save_checkpoint
// and load_checkpoint to carry LARS's momentum and LAMB's moments and step
// counts with the model. torch::optim::serialize writes each group's options
// too, and load() assigns them back to the optimizer's groups (as for
// LibTorch's own optimizers); the rate then comes from the schedule at every
// step anyway.
#pragma once
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace ch06 {

// ---- LARS -----------------------------------------------------------------------

struct LarsOptions : public torch::optim::OptimizerCloneableOptions<LarsOptions> {
  LarsOptions(double lr = 0.1) : lr_(lr) {}  // NOLINT: implicit, as LibTorch's options are
  TORCH_ARG(double, lr);
  TORCH_ARG(double, momentum) = 0.9;
  TORCH_ARG(double, weight_decay) = 5e-4;
  TORCH_ARG(double, trust_coefficient) = 1e-3;  // η
  TORCH_ARG(bool, adapt) = true;                // false: plain momentum SGD for this group
  // Goyal et al. §2.2: the contract at the top of this file.
  TORCH_ARG(bool, momentum_correction) = false;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LarsParamState : public torch::optim::OptimizerCloneableParamState<LarsParamState> {
  TORCH_ARG(torch::Tensor, momentum_buffer);  // v
  TORCH_ARG(double, last_lr) = 0.0;           // the lr of this tensor's last step (0: none yet)

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

class Lars : public torch::optim::Optimizer {
 public:
  Lars(std::vector<torch::optim::OptimizerParamGroup> param_groups, LarsOptions defaults);
  Lars(std::vector<torch::Tensor> params, LarsOptions defaults)
      : Lars(std::vector<torch::optim::OptimizerParamGroup>{torch::optim::OptimizerParamGroup(std::move(params))},
             defaults) {}
  // ex6.2: one update of every parameter with a gradient, as above. The
  // velocity of a parameter starts at zero at its first step and is kept in
  // state() under its key (workbook::torch_compat::optimizer_state_key(p), Note [an optimizer's state key]).
  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;  // given
  void load(torch::serialize::InputArchive& archive) override;         // given
};

// ---- LAMB -----------------------------------------------------------------------

struct LambOptions : public torch::optim::OptimizerCloneableOptions<LambOptions> {
  LambOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT
  TORCH_ARG(double, lr);
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0.01;  // λ
  TORCH_ARG(bool, adapt) = true;           // false: no trust ratio (Adam with decoupled decay)

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LambParamState : public torch::optim::OptimizerCloneableParamState<LambParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, exp_avg);     // m
  TORCH_ARG(torch::Tensor, exp_avg_sq);  // v

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

class Lamb : public torch::optim::Optimizer {
 public:
  Lamb(std::vector<torch::optim::OptimizerParamGroup> param_groups, LambOptions defaults);
  Lamb(std::vector<torch::Tensor> params, LambOptions defaults)
      : Lamb(std::vector<torch::optim::OptimizerParamGroup>{torch::optim::OptimizerParamGroup(std::move(params))},
             defaults) {}
  // ex6.3: one update of every parameter with a gradient, as above; the step
  // count t is per parameter (1 at its first update), as in torch::optim::Adam.
  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;  // given
  void load(torch::serialize::InputArchive& archive) override;         // given
};

// ---- the usual exclusions (given) ------------------------------------------------

// Two parameter groups of `model`'s trainable parameters: the weights of conv
// and linear layers (2 or more dimensions), with `options` as given; and every
// 1-dimensional tensor (biases, BatchNorm's weight and bias), with no weight
// decay and adapt(false).
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> layer_adaptation_groups(torch::nn::Module& model,
                                                                       const Options& options) {
  std::vector<torch::Tensor> adapted, excluded;
  for (const torch::Tensor& p : model.parameters())
    if (p.requires_grad()) (p.dim() > 1 ? adapted : excluded).push_back(p);
  auto excluded_options = std::make_unique<Options>(options);
  excluded_options->weight_decay(0.0).adapt(false);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!adapted.empty()) groups.emplace_back(adapted, std::make_unique<Options>(options));
  if (!excluded.empty()) groups.emplace_back(excluded, std::move(excluded_options));
  return groups;
}

}  // namespace ch06
