// vocab_parallel.cpp — ex11.2: cross-entropy over a vocabulary split between ranks.
#include "vocab_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

torch::Tensor VocabParallelCrossEntropy::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& shard,
                                                 const torch::Tensor& targets, workbook::Communicator* comm) {
  WB_ASSERT(shard.dim() == 2 && targets.dim() == 1 && targets.size(0) == shard.size(0),
            "vocab_parallel_cross_entropy: logits [rows, V/t] and targets [rows], got {} and {}", shard.sizes(),
            targets.sizes());
  WB_NOT_IMPLEMENTED("ex11.2");  // TODO(ex11.2): your code here
}

torch::autograd::variable_list VocabParallelCrossEntropy::backward(torch::autograd::AutogradContext* ctx,
                                                                   torch::autograd::variable_list grad_outputs) {
  WB_NOT_IMPLEMENTED("ex11.2");  // TODO(ex11.2): your code here
}

}  // namespace ch11
