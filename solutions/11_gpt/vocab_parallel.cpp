// vocab_parallel.cpp — ex11.2: cross-entropy over a vocabulary split between ranks.
#include "vocab_parallel.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

torch::Tensor VocabParallelCrossEntropy::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& shard,
                                                 const torch::Tensor& targets, workbook::Communicator* comm) {
  WB_ASSERT(shard.dim() == 2 && targets.dim() == 1 && targets.size(0) == shard.size(0),
            "vocab_parallel_cross_entropy: logits [rows, V/t] and targets [rows], got {} and {}", shard.sizes(),
            targets.sizes());
  // BEGIN SOLUTION ex11.2
  // Note: [a softmax over columns no rank holds whole] log softmax(z)[y] =
  // z_y − m − log Σ_v exp(z_v − m) for any m; m = the row's maximum over the
  // WHOLE vocabulary keeps every exp ≤ 1 (a shard's own maximum would not: a
  // row whose largest logit lies on another rank overflows). Three
  // all-reduces of one number per row: the maximum, the sum of exponentials,
  // and the target's logit, which only its owner contributes.
  const int64_t columns = shard.size(1);
  const int64_t first = static_cast<int64_t>(comm->rank()) * columns;
  const torch::Tensor logits = shard.to(torch::kFloat32);
  torch::Tensor maximum = std::get<0>(logits.max(1)).contiguous();
  comm->all_reduce(maximum, workbook::ReduceOp::Max);
  const torch::Tensor shifted = logits - maximum.unsqueeze(1);
  torch::Tensor exp_sum = shifted.exp().sum(1).contiguous();
  comm->all_reduce(exp_sum, workbook::ReduceOp::Sum);
  const torch::Tensor local = targets - first;
  const torch::Tensor mine = (local >= 0) & (local < columns);
  const torch::Tensor column = local.clamp(0, columns - 1);
  torch::Tensor target_logit = shifted.gather(1, column.unsqueeze(1)).squeeze(1) * mine.to(torch::kFloat32);
  comm->all_reduce(target_logit, workbook::ReduceOp::Sum);
  const torch::Tensor per_row = exp_sum.log() - target_logit;
  // For backward: this rank's softmax columns, and where its targets lie.
  const torch::Tensor softmax = shifted.exp() / exp_sum.unsqueeze(1);
  ctx->save_for_backward({softmax, column, mine});
  ctx->saved_data["dtype"] = static_cast<int64_t>(shard.scalar_type());
  return per_row.mean();
  // END SOLUTION
}

torch::autograd::variable_list VocabParallelCrossEntropy::backward(torch::autograd::AutogradContext* ctx,
                                                                   torch::autograd::variable_list grad_outputs) {
  // BEGIN SOLUTION ex11.2
  // d loss / d z[row, v] = (softmax[row, v] − [v == target]) / rows: the
  // softmax is this rank's columns already, and the one-hot is this rank's
  // only where it owns the target. No communication.
  const auto saved = ctx->get_saved_variables();
  torch::Tensor grad = saved[0].clone();
  const int64_t rows = grad.size(0);
  grad.scatter_add_(1, saved[1].unsqueeze(1), -saved[2].to(grad.scalar_type()).unsqueeze(1));
  grad.mul_(grad_outputs[0] / static_cast<double>(rows));
  const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
  return {grad.to(dtype), torch::Tensor(), torch::Tensor()};
  // END SOLUTION
}

}  // namespace ch11
