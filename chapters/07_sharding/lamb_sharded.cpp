// lamb_sharded.cpp — given: Chapter 6's LAMB on shards, its trust ratios
// from ex7.4's norms.
#include "sharding.hpp"

#include <cmath>

#include <torch/optim/serialize.h>

#include "workbook/errors.hpp"
#include "workbook/torch_compat.hpp"

namespace ch07 {
namespace {

// One torch::optim::Optimizer over the owned() views of the groups (one
// tensor per group), its state Chapter 6's LambParamState: checkpoints and
// optimizer_state_bytes treat it as Chapter 6's LAMB.
class ShardedLamb : public torch::optim::Optimizer {
 public:
  ShardedLamb(const std::vector<FlatGroup*>& groups, std::vector<torch::Tensor> owned, workbook::Communicator& comm,
              ch06::LambOptions options)
      : Optimizer({torch::optim::OptimizerParamGroup(std::move(owned))},
                  std::make_unique<ch06::LambOptions>(options)),
        groups_(groups), comm_(comm) {
    WB_ASSERT(groups_.size() == param_groups_[0].params().size(), "one owned tensor per group");
  }

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    WB_ASSERT(!closure, "ShardedLamb takes no closure");
    const auto& options = static_cast<const ch06::LambOptions&>(param_groups_[0].options());
    for (size_t g = 0; g < groups_.size(); ++g) {
      torch::Tensor& w = param_groups_[0].params()[g];
      const Partition& partition = groups_[g]->partition();
      const torch::Tensor& grad = w.grad();
      const auto key = workbook::torch_compat::optimizer_state_key(w);
      if (!state_.count(key)) {
        auto fresh = std::make_unique<ch06::LambParamState>();
        fresh->exp_avg(torch::zeros_like(w));
        fresh->exp_avg_sq(torch::zeros_like(w));
        state_[key] = std::move(fresh);
      }
      auto& state = static_cast<ch06::LambParamState&>(*state_[key]);
      state.step(state.step() + 1);
      const double t = static_cast<double>(state.step());
      // Chapter 6's arithmetic, element by element, on the shard.
      state.exp_avg().mul_(options.beta1()).add_(grad, 1 - options.beta1());
      state.exp_avg_sq().mul_(options.beta2()).addcmul_(grad, grad, 1 - options.beta2());
      const double correction1 = 1 - std::pow(options.beta1(), t);
      const double correction2 = 1 - std::pow(options.beta2(), t);
      torch::Tensor update =
          (state.exp_avg() / correction1) / ((state.exp_avg_sq() / correction2).sqrt() + options.eps());
      // layer_adaptation_groups' rule: tensors of 2 or more dimensions get
      // weight decay and a trust ratio, the others neither.
      const std::vector<torch::Tensor>& parameters = groups_[g]->parameters();
      for (const ShardPiece& piece : partition.pieces)
        if (parameters[piece.parameter].dim() > 1 && options.weight_decay() != 0)
          update.narrow(0, piece.shard_offset, piece.count).add_(w.narrow(0, piece.shard_offset, piece.count),
                                                                 options.weight_decay());
      // Each tensor's norms over all ranks (ex7.4): a split tensor gets one ratio.
      const torch::Tensor weight_norms = squared_norms_per_parameter(partition, w, comm_).sqrt().cpu();
      const torch::Tensor update_norms = squared_norms_per_parameter(partition, update, comm_).sqrt().cpu();
      for (const ShardPiece& piece : partition.pieces) {
        double step_size = options.lr();
        const auto i = static_cast<int64_t>(piece.parameter);
        const double weight_norm = weight_norms[i].item<double>(), update_norm = update_norms[i].item<double>();
        if (parameters[piece.parameter].dim() > 1 && weight_norm > 0 && update_norm > 0)
          step_size *= weight_norm / update_norm;
        w.narrow(0, piece.shard_offset, piece.count)
            .sub_(update.narrow(0, piece.shard_offset, piece.count) * static_cast<float>(step_size));
      }
    }
    return {};
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    torch::optim::serialize<ch06::LambParamState, ch06::LambOptions>(archive, *this);
  }
  void load(torch::serialize::InputArchive& archive) override {
    torch::optim::serialize<ch06::LambParamState, ch06::LambOptions>(archive, *this);
  }

 private:
  std::vector<FlatGroup*> groups_;
  workbook::Communicator& comm_;
};

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_sharded_lamb(const std::vector<FlatGroup*>& groups,
                                                           std::vector<torch::Tensor> owned,
                                                           workbook::Communicator& comm, ch06::LambOptions options) {
  return std::make_unique<ShardedLamb>(groups, std::move(owned), comm, options);
}

}  // namespace ch07
