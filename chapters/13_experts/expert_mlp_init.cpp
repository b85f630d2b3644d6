// expert_mlp_init.cpp — ExpertMlp's options and weights (given).
#include "expert_mlp.hpp"
#include "workbook/errors.hpp"

namespace ch13 {

void MoeOptions::check(int ranks) const {
  WB_CHECK(width > 0 && hidden > 0 && experts > 0 && top_k > 0 && capacity_factor > 0,
           "the expert layer's sizes must be positive: width {}, hidden {}, {} experts, top-k {}, capacity factor {}",
           width, hidden, experts, top_k, capacity_factor);
  WB_CHECK(top_k <= experts, "top-k {} is more than the {} experts", top_k, experts);
  WB_CHECK(experts % ranks == 0, "{} experts cannot be split evenly over {} ranks", experts, ranks);
}

ExpertMlpImpl::ExpertMlpImpl(const MoeOptions& moe, workbook::Communicator& group)
    : options(moe), comm(&group), local_experts(moe.experts / group.size()),
      first_expert(group.rank() * (moe.experts / group.size())) {
  options.check(group.size());
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.width})));
  router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(options.width, options.experts).bias(false)));
  // Every expert drawn as GPT-2 draws an MLP (normal, zero biases), all on every rank.
  const int64_t e = options.experts, w = options.width, h = options.hidden;
  const torch::Tensor all_expand_w = torch::empty({e, w, h}).normal_(0.0, 0.02);
  const torch::Tensor all_contract_w = torch::empty({e, h, w}).normal_(0.0, options.contract_std);
  const torch::Tensor all_expand_b = torch::zeros({e, h}), all_contract_b = torch::zeros({e, w});
  const auto mine = [&](const torch::Tensor& all) { return all.narrow(0, first_expert, local_experts).clone(); };
  expand_weight = register_parameter("expand_weight", mine(all_expand_w));
  expand_bias = register_parameter("expand_bias", mine(all_expand_b));
  contract_weight = register_parameter("contract_weight", mine(all_contract_w));
  contract_bias = register_parameter("contract_bias", mine(all_contract_b));
}

}  // namespace ch13
