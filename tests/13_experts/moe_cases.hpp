// moe_cases.hpp — what the expert tests share: a router computed here from
// its definition (loops over tokens, float64), and a whole mixture of
// experts in one process, every expert held, to hold the group's to.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

namespace moe_cases {

// The largest |a − b|: 0 for empty tensors (a rank may hold no tokens),
// infinity when their shapes differ.
inline double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() || a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  return a.numel() == 0 ? 0.0 : (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

struct Routed {
  torch::Tensor probabilities;  // [tokens, E]
  torch::Tensor experts;        // [tokens, k] int64, most probable first
  torch::Tensor weights;        // [tokens, k], differentiable in the logits
  torch::Tensor kept;           // [tokens, k] bool
};

// Token by token: the k most probable experts (the logits are drawn at
// random, so no two are equal), their probabilities over their sum; an
// expert keeps the first `capacity` tokens that chose it, in token order.
inline Routed route(const torch::Tensor& logits, int64_t k, int64_t capacity) {
  const int64_t tokens = logits.size(0), experts = logits.size(1);
  Routed r;
  r.probabilities = torch::softmax(logits.to(torch::kFloat64), -1);
  r.experts = torch::zeros({tokens, k}, torch::kInt64);
  r.kept = torch::zeros({tokens, k}, torch::kBool);
  std::vector<int64_t> taken(experts, 0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int64_t> order(experts);
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    const torch::Tensor row = r.probabilities[t].detach();
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return row[a].item<double>() > row[b].item<double>(); });
    for (int64_t j = 0; j < k; ++j) {
      r.experts[t][j] = order[j];
      r.kept[t][j] = taken[order[j]]++ < capacity;
    }
  }
  const torch::Tensor chosen = r.probabilities.gather(1, r.experts);
  r.weights = chosen / chosen.sum(-1, true);
  return r;
}

// Switch Transformer's balancing loss over `all` tokens' routing at once.
inline torch::Tensor balancing_loss(const Routed& all) {
  const int64_t tokens = all.probabilities.size(0), experts = all.probabilities.size(1), k = all.experts.size(1);
  torch::Tensor count = torch::zeros({experts}, torch::kFloat64);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) count[all.experts[t][j].item<int64_t>()] += 1.0;
  const torch::Tensor share = count / static_cast<double>(tokens * k);
  const torch::Tensor mean = all.probabilities.sum(0) / static_cast<double>(tokens);
  return static_cast<double>(experts) * (share * mean).sum();
}

// Every expert's weights, and the router's and LayerNorm's: made alike on
// every rank from `seed` (float64).
struct Weights {
  torch::Tensor norm_weight, norm_bias;          // [width]
  torch::Tensor router;                          // [E, width], as nn::Linear holds it
  torch::Tensor expand_weight, expand_bias;      // [E, width, hidden], [E, hidden]
  torch::Tensor contract_weight, contract_bias;  // [E, hidden, width], [E, width]
};

inline Weights draw(int64_t width, int64_t hidden, int64_t experts, uint64_t seed) {
  torch::manual_seed(seed);
  const auto o = torch::kFloat64;
  Weights w;
  w.norm_weight = 1.0 + 0.2 * torch::randn({width}, o);
  w.norm_bias = 0.1 * torch::randn({width}, o);
  w.router = torch::randn({experts, width}, o);
  w.expand_weight = torch::randn({experts, width, hidden}, o) / std::sqrt(static_cast<double>(width));
  w.expand_bias = 0.1 * torch::randn({experts, hidden}, o);
  w.contract_weight = torch::randn({experts, hidden, width}, o) / std::sqrt(static_cast<double>(hidden));
  w.contract_bias = 0.1 * torch::randn({experts, width}, o);
  return w;
}

// One rank's tokens through the whole layer, every expert here:
// h + Σ_kept weight · expert(LayerNorm(h)), capacity ⌈factor·tokens·k/E⌉.
inline torch::Tensor forward(const torch::Tensor& h, const Weights& w, int64_t k, double factor, Routed* routed = nullptr) {
  const int64_t tokens = h.size(0), experts = w.router.size(0);
  const torch::Tensor x = torch::layer_norm(h, {h.size(1)}, w.norm_weight, w.norm_bias, 1e-5);
  const int64_t capacity = static_cast<int64_t>(std::ceil(factor * static_cast<double>(tokens * k) / experts));
  const Routed r = route(torch::matmul(x, w.router.t()), k, capacity);
  if (routed) *routed = r;
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < tokens; ++t) {
    torch::Tensor y = h[t];
    for (int64_t j = 0; j < k; ++j) {
      if (!r.kept[t][j].item<bool>()) continue;
      const int64_t e = r.experts[t][j].item<int64_t>();
      const torch::Tensor hidden = torch::gelu(torch::matmul(x[t], w.expand_weight[e]) + w.expand_bias[e]);
      y = y + r.weights[t][j] * (torch::matmul(hidden, w.contract_weight[e]) + w.contract_bias[e]);
    }
    rows.push_back(y);
  }
  return rows.empty() ? h * 1.0 : torch::stack(rows);
}

}  // namespace moe_cases
