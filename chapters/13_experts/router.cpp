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
  WB_NOT_IMPLEMENTED("ex13.2");  // TODO(ex13.2): your code here
  return routing;
}

torch::Tensor load_balancing_loss(const Routing& routing, workbook::Communicator& comm) {
  WB_ASSERT(routing.probabilities.dim() == 2 && routing.experts.dim() == 2,
            "load_balancing_loss: a Routing from route(), got probabilities {} and experts {}",
            routing.probabilities.sizes(), routing.experts.sizes());
  WB_NOT_IMPLEMENTED("ex13.2");  // TODO(ex13.2): your code here
}

}  // namespace ch13
