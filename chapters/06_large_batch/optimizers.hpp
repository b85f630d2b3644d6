// optimizers.hpp — ex6.2 LARS and ex6.3 LAMB: layer-wise adaptive rates, as
// torch::optim::Optimizer subclasses with their own options and state.
//
// One rate for every layer assumes every layer's gradient is in proportion to
// its weights. At large rates it is not: a layer whose ‖g‖/‖w‖ is 100 times
// another's changes 100 times faster, and diverges first. Both optimizers
// scale each layer's (each parameter tensor's) update by a trust ratio,
//
//     trust = ‖w‖ / ‖update‖          per tensor, recomputed every step,
//
// so every layer moves by the same fraction of its own size, whatever its
// gradient's scale. Biases and BatchNorm's weight and bias are excluded
// (layer_adaptation_groups): they have one value per channel, start at 0 or
// 1, and need neither weight decay nor a trust ratio.
//
//   LARS (You, Gitman, Ginsburg 2017, Algorithm 1), for one tensor w, gradient g:
//     local_lr = η · ‖w‖ / (‖g‖ + β · ‖w‖)        η: trust_coefficient, β: weight_decay
//     v ← m · v + lr · local_lr · (g + β · w)    m: momentum, lr: the global rate
//     w ← w − v
//   LAMB (You et al. 2019, Algorithm 2), with step count t:
//     m ← β₁ m + (1 − β₁) g          v ← β₂ v + (1 − β₂) g²
//     m̂ = m / (1 − β₁ᵗ)              v̂ = v / (1 − β₂ᵗ)
//     u = m̂ / (√v̂ + ε) + λ · w       λ: weight_decay
//     w ← w − lr · (‖w‖ / ‖u‖) · u
//   Either ratio is 1 where ‖w‖ or the denominator is 0 (a tensor that starts
//   at zero must still be able to move), and where the group's adapt() is false.
//
// Note: [state in checkpoints] LibTorch saves an optimizer's state keyed by
// parameter position, through the ParamState and Options classes' serialize()
// methods; defining those (below) is all it takes for ch03's save_checkpoint
// and load_checkpoint to carry LARS's momentum and LAMB's moments and step
// counts with the model. The options (lr, η, weight decay) are written but,
// as for LibTorch 1.13's own optimizers, not read back: load() restores the
// state into an optimizer the program has built with its options, and the
// rate comes from the schedule at every step anyway.
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
  // Goyal et al. §2.2: when lr changes, scale v by lr_new / lr_old first.
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
  // momentum buffer of a parameter is created (zeros) at its first step and
  // kept in state() under its key (workbook::torch_compat::optimizer_state_key(p), Note [an optimizer's state key]).
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
  // count t is per parameter (1 at its first update), as in torch.optim.Adam.
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
