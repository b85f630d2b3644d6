// context_gpt.cpp — the GPT's forward pass over a context group.
#include "context_gpt.hpp"

#include <vector>

namespace ch12 {

ContextLayout make_layout(int64_t context, int ranks, Split split) {
  std::vector<torch::Tensor> rows;
  for (int r = 0; r < ranks; ++r) rows.push_back(held_positions(context, r, ranks, split));
  return {split, context, torch::stack(rows)};
}

torch::Tensor my_columns(const torch::Tensor& whole, const ContextLayout& layout, int rank) {
  return whole.index_select(1, layout.positions[rank].to(whole.device()));
}

void average_gradients(workbook::GptImpl& gpt, workbook::Communicator& comm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : gpt.parameters()) grads.push_back(p.grad().reshape({-1}));
  torch::Tensor flat = torch::cat(grads);
  comm.all_reduce(flat, workbook::ReduceOp::Average);
  int64_t offset = 0;
  for (const auto& p : gpt.parameters()) {
    p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

torch::Tensor context_parallel_logits(workbook::GptImpl& gpt, const torch::Tensor& bytes, const ContextLayout& layout,
                                      workbook::Communicator& comm, RingOptions options) {
  const torch::Tensor positions = layout.positions.to(bytes.device());
  const int64_t n = bytes.size(0), held = bytes.size(1), width = gpt.options.width, heads = gpt.options.heads;
  // Position embeddings by global position: the rank's columns are not 0..T/cp−1.
  torch::Tensor x = gpt.tokens(bytes) + gpt.positions(positions[comm.rank()]);
  for (const auto& module : *gpt.blocks) {
    auto& block = *module->as<workbook::GptBlock>();
    auto& attention = *block.attention;
    const std::vector<torch::Tensor> qkv =
        at::linear(block.norm1(x), attention.qkv->weight, attention.qkv->bias)
            .view({n, held, 3, heads, width / heads})
            .permute({2, 0, 3, 1, 4})
            .unbind(0);
    const torch::Tensor attended = ring_attention(qkv[0].contiguous(), qkv[1].contiguous(), qkv[2].contiguous(),
                                                  positions, comm, options);
    x = x + at::linear(attended.transpose(1, 2).reshape({n, held, width}), attention.projection->weight,
                       attention.projection->bias);
    x = x + at::linear(torch::gelu(at::linear(block.norm2(x), block.expand->weight, block.expand->bias)),
                       block.contract->weight, block.contract->bias);
  }
  return torch::matmul(gpt.final_norm(x), gpt.tokens->weight.t());  // tied, as the whole model's
}

}  // namespace ch12
