// router.cpp — ex13.2: top-k routing, capacity, and the balancing loss.
#include "router.hpp"

#include <cmath>

#include "group_ops.hpp"
#include "workbook/errors.hpp"

namespace ch13 {

int64_t expert_capacity(int64_t tokens, int64_t experts, int64_t top_k, double capacity_factor) {
  WB_ASSERT(experts > 0 && capacity_factor > 0, "expert_capacity: {} experts, factor {}", experts, capacity_factor);
  return static_cast<int64_t>(std::ceil(capacity_factor * static_cast<double>(tokens * top_k) /
                                        static_cast<double>(experts)));
}

Routing route(const torch::Tensor& logits, int64_t top_k, int64_t capacity) {
  WB_ASSERT(logits.dim() == 2 && top_k >= 1 && top_k <= logits.size(1) && capacity >= 0,
            "route: logits [tokens, experts] and 1 <= top_k <= experts, got {} and top_k {} (capacity {})",
            logits.sizes(), top_k, capacity);
  Routing routing;
  // BEGIN SOLUTION ex13.2
  const auto type = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  routing.probabilities = torch::softmax(logits.to(type), -1);
  auto [top, chosen] = routing.probabilities.topk(top_k, -1);  // sorted, most probable first
  routing.experts = chosen;
  routing.weights = top / top.sum(-1, true);
  // Note: [a place in the queue] Read the assignments token by token (row
  // major: a token's choices are of different experts, so their order within
  // the token does not matter). An assignment's place in its expert's queue
  // is how many assignments to that expert came before it, a running count
  // down the one-hot columns; it is kept if its place is under the capacity.
  const int64_t experts = logits.size(1);
  const torch::Tensor one_hot = torch::one_hot(chosen.reshape({-1}), experts);  // [tokens·k, experts]
  const torch::Tensor place = (one_hot.cumsum(0) * one_hot).sum(-1) - 1;
  routing.kept = (place < capacity).view_as(chosen);
  // END SOLUTION
  return routing;
}

torch::Tensor load_balancing_loss(const Routing& routing, workbook::Communicator& comm) {
  WB_ASSERT(routing.probabilities.dim() == 2 && routing.experts.dim() == 2,
            "load_balancing_loss: a Routing from route(), got probabilities {} and experts {}",
            routing.probabilities.sizes(), routing.experts.sizes());
  // BEGIN SOLUTION ex13.2
  // Note: [the group's shares, not the rank's] fᵢ and Pᵢ are shares of the
  // group's tokens: counts and probability sums are added over the ranks
  // before dividing (a mean of the ranks' own losses would weigh a rank's
  // few tokens like another's many, and reward balance within each rank
  // that the group as a whole need not have). The counts carry no gradient;
  // the probability sums go through sum_over_group, whose backward hands
  // every rank its share.
  const int64_t experts = routing.probabilities.size(1), top_k = routing.experts.size(1);
  const auto type = routing.probabilities.scalar_type();
  torch::Tensor counts = torch::zeros({experts + 1}, routing.probabilities.options().requires_grad(false));
  counts.narrow(0, 0, experts).copy_(torch::one_hot(routing.experts.reshape({-1}), experts).sum(0).to(type));
  counts[experts] = static_cast<double>(routing.probabilities.size(0));
  comm.all_reduce(counts, workbook::ReduceOp::Sum);
  const torch::Tensor tokens = counts[experts].clamp_min(1.0);
  const torch::Tensor share = counts.narrow(0, 0, experts) / (tokens * static_cast<double>(top_k));
  const torch::Tensor mean_probability = sum_over_group(routing.probabilities.sum(0), comm) / tokens;
  return static_cast<double>(experts) * (share * mean_probability).sum();
  // END SOLUTION
}

}  // namespace ch13
