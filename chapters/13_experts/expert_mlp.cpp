// expert_mlp.cpp — ex13.3: the expert layer's forward, dispatch to combine.
#include "expert_mlp.hpp"

#include "group_ops.hpp"
#include "workbook/errors.hpp"

namespace ch13 {

torch::Tensor ExpertMlpImpl::forward(const torch::Tensor& h) {
  WB_ASSERT(h.dim() == 2 && h.size(1) == options.width, "ExpertMlp: h must be [tokens, {}], got {}", options.width,
            h.sizes());
  WB_NOT_IMPLEMENTED("ex13.3");  // TODO(ex13.3): your code here
}

}  // namespace ch13
