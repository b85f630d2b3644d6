// tp_block.cpp — ex11.1: a transformer block split by heads and hidden features.
#include "tp_block.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

TensorParallelBlockImpl::TensorParallelBlockImpl(const workbook::GptBlockImpl& whole, workbook::Communicator& comm) {
  norm1 = register_module("norm1", ch08::copy_layer<torch::nn::LayerNorm>(*whole.norm1));
  norm2 = register_module("norm2", ch08::copy_layer<torch::nn::LayerNorm>(*whole.norm2));
  // BEGIN SOLUTION ex11.1
  const int64_t t = comm.size(), all_heads = whole.attention->heads;
  WB_CHECK(all_heads % t == 0, "{} attention heads cannot be split over {} tensor ranks", all_heads, t);
  heads = all_heads / t;
  // Note: [heads, not columns] qkv's rows are [q of every head | k | v]: a
  // plain cut of its output features would give rank 0 all of q and none of
  // v. Reordered so that each rank's contiguous rows are its heads' q, k and
  // v, Chapter 8's column-parallel layer cuts it by heads as it is.
  const int64_t width = whole.norm1->options.normalized_shape()[0], head_size = width / all_heads;
  std::vector<int64_t> order;  // the whole qkv's rows, in the order the ranks' runs take them
  for (int64_t r = 0; r < t; ++r)
    for (int64_t part = 0; part < 3; ++part)  // q, k, v
      for (int64_t f = r * heads * head_size; f < (r + 1) * heads * head_size; ++f)
        order.push_back(part * width + f);
  const torch::nn::Linear& whole_qkv = whole.attention->qkv;
  torch::nn::Linear reordered(torch::nn::LinearOptions(width, 3 * width));
  reordered->to(whole_qkv->weight.device(), whole_qkv->weight.scalar_type());
  {
    torch::NoGradGuard no_grad;
    reordered->weight.copy_(whole_qkv->weight.index_select(0, torch::tensor(order)));
    reordered->bias.copy_(whole_qkv->bias.index_select(0, torch::tensor(order)));
  }
  qkv = register_module("qkv", ch08::ColumnParallelLinear(reordered, comm));
  // The projection reads the heads' outputs in head order: its input columns
  // of this rank's heads are a plain cut, and so are the MLP's hidden features.
  projection = register_module("projection", ch08::RowParallelLinear(whole.attention->projection, comm));
  expand = register_module("expand", ch08::ColumnParallelLinear(whole.expand, comm));
  contract = register_module("contract", ch08::RowParallelLinear(whole.contract, comm));
  // END SOLUTION
}

torch::Tensor TensorParallelBlockImpl::forward(const torch::Tensor& x) {
  // BEGIN SOLUTION ex11.1
  // Chapter 8's layers take [rows, features]: every position of every sequence is a row.
  const int64_t n = x.size(0), positions = x.size(1), width = x.size(2), rows = n * positions;
  const int64_t local_width = qkv->weight.size(0) / 3;
  const std::vector<torch::Tensor> parts = qkv(norm1(x).reshape({rows, width}))
                                               .view({n, positions, 3, heads, local_width / heads})
                                               .permute({2, 0, 3, 1, 4})
                                               .unbind(0);
  // The scale is 1/√(head size), the same as the whole block's: not the width over t.
  const torch::Tensor attended = workbook::causal_attention(parts[0], parts[1], parts[2]);
  const torch::Tensor h =
      x + projection(attended.transpose(1, 2).reshape({rows, local_width})).view({n, positions, width});
  return h + contract(torch::gelu(expand(norm2(h).reshape({rows, width})))).view({n, positions, width});
  // END SOLUTION
}

}  // namespace ch11
