// tp_block.cpp — ex11.1: a transformer block split by heads and hidden features.
#include "tp_block.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

TensorParallelBlockImpl::TensorParallelBlockImpl(const workbook::GptBlockImpl& whole, workbook::Communicator& comm) {
  const int64_t t = comm.size(), all_heads = whole.attention->heads;
  WB_CHECK(all_heads % t == 0, "{} attention heads cannot be split over {} tensor ranks", all_heads, t);
  heads = all_heads / t;
  norm1 = register_module("norm1", ch08::copy_layer<torch::nn::LayerNorm>(*whole.norm1));
  norm2 = register_module("norm2", ch08::copy_layer<torch::nn::LayerNorm>(*whole.norm2));
  WB_NOT_IMPLEMENTED("ex11.1");  // TODO(ex11.1): your code here
}

torch::Tensor TensorParallelBlockImpl::forward(const torch::Tensor& x) {
  WB_NOT_IMPLEMENTED("ex11.1");  // TODO(ex11.1): your code here
}

}  // namespace ch11
