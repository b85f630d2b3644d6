// tp_block.cpp — ex11.1: a transformer block split by heads and hidden features.
#include "tp_block.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

TensorParallelBlockImpl::TensorParallelBlockImpl(const workbook::GptBlockImpl& whole, workbook::Communicator& comm) {
  norm1 = register_module("norm1", ch08::copy_layer<torch::nn::LayerNorm>(*whole.norm1));
  norm2 = register_module("norm2", ch08::copy_layer<torch::nn::LayerNorm>(*whole.norm2));
  WB_NOT_IMPLEMENTED("ex11.1");  // TODO(ex11.1): your code here
}

torch::Tensor TensorParallelBlockImpl::forward(const torch::Tensor& x) {
  WB_NOT_IMPLEMENTED("ex11.1");  // TODO(ex11.1): your code here
}

}  // namespace ch11
