// moe_gpt.cpp — the expert GPT (given).
#include "moe_gpt.hpp"

#include <cmath>
#include <string>

namespace ch13 {

MoeBlockImpl::MoeBlockImpl(const MoeGptOptions& options, workbook::Communicator& comm) {
  const int64_t width = options.gpt.width;
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  attention = register_module("attention", workbook::CausalSelfAttention(width, options.gpt.heads));
  if (options.dense) {
    const int64_t hidden = options.moe.top_k * options.moe.hidden;
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    expand = register_module("expand", torch::nn::Linear(width, hidden));
    contract = register_module("contract", torch::nn::Linear(hidden, width));
  } else {
    MoeOptions moe = options.moe;
    moe.width = width;
    moe.contract_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options.gpt.layers));
    experts = register_module("experts", ExpertMlp(moe, comm));
  }
}

torch::Tensor MoeBlockImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = x + attention(norm1(x));
  if (!experts) return h + contract(torch::gelu(expand(norm2(h))));
  return experts(h.reshape({-1, h.size(-1)})).view_as(h);
}

MoeGptImpl::MoeGptImpl(const MoeGptOptions& model, workbook::Communicator& comm) : options(model) {
  options.gpt.check();
  options.moe.width = options.gpt.width;
  if (!options.dense) options.moe.check(comm.size());
  tokens = register_module("tokens", torch::nn::Embedding(options.gpt.vocabulary, options.gpt.width));
  positions = register_module("positions", torch::nn::Embedding(options.gpt.context, options.gpt.width));
  for (int64_t i = 0; i < options.gpt.layers; ++i)
    blocks.push_back(register_module("block" + std::to_string(i), MoeBlock(options, comm)));
  final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.gpt.width})));
  // GPT-2's initialisation, as workbook::Gpt's, but for the experts' stacked
  // weights (ExpertMlp's expand_weight, ..., contract_bias): they drew their own.
  workbook::initialise_like_gpt2(*this, options.gpt.layers, {"experts.expand_", "experts.contract_"});
}

torch::Tensor MoeGptImpl::forward(const torch::Tensor& bytes) {
  const int64_t length = bytes.size(1);
  torch::Tensor x = tokens(bytes) + positions(torch::arange(length, bytes.options()));
  for (auto& block : blocks) x = block(x);
  return torch::matmul(final_norm(x), tokens->weight.t());
}

torch::Tensor MoeGptImpl::balancing_loss() const {
  if (options.dense) return torch::zeros({}, tokens->weight.options());
  std::vector<torch::Tensor> losses;
  for (const auto& block : blocks) losses.push_back(block->experts->balancing_loss);
  return torch::stack(losses).mean();
}

std::pair<int64_t, int64_t> MoeGptImpl::dropped_of_assigned() const {
  int64_t dropped = 0, assigned = 0;
  if (options.dense) return {0, 0};
  for (const auto& block : blocks) {
    const torch::Tensor& kept = block->experts->routing.kept;
    assigned += kept.numel();
    dropped += kept.numel() - kept.sum().item<int64_t>();
  }
  return {dropped, assigned};
}

std::vector<torch::Tensor> MoeGptImpl::expert_parameters() const {
  std::vector<torch::Tensor> found;
  if (options.dense) return found;
  for (const auto& block : blocks) {
    const auto& e = block->experts;
    found.insert(found.end(), {e->expand_weight, e->expand_bias, e->contract_weight, e->contract_bias});
  }
  return found;
}

std::vector<torch::Tensor> MoeGptImpl::replicated_parameters() const {
  std::vector<torch::Tensor> found;
  const std::vector<torch::Tensor> experts = expert_parameters();
  for (const auto& p : parameters()) {
    bool expert = false;
    for (const auto& e : experts) expert = expert || p.is_same(e);
    if (!expert) found.push_back(p);
  }
  return found;
}

void average_gradients(MoeGptImpl& model, workbook::Communicator& comm) {
  std::vector<torch::Tensor> grads;
  const std::vector<torch::Tensor> replicated = model.replicated_parameters();
  for (const auto& p : replicated)
    grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  torch::Tensor flat = torch::cat(grads);
  comm.all_reduce(flat, workbook::ReduceOp::Average);
  int64_t offset = 0;
  for (const auto& p : replicated) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
  for (const auto& p : model.expert_parameters())
    if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(comm.size()));
}

}  // namespace ch13
