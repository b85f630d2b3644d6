// block_mlp.cpp — Chapter 9's model (given).
#include "block_mlp.hpp"

#include <algorithm>

#include "checkpoint.hpp"
#include "workbook/errors.hpp"

namespace ch09 {

BlockMlp::BlockMlp(BlockMlpOptions options) : options_(options) {
  WB_CHECK(options.blocks >= 1 && options.width >= 1, "a BlockMlp needs at least one block of width 1 (got {} of {})",
           options.blocks, options.width);
  input = register_module("input", torch::nn::Linear(28 * 28, options.width));
  for (int64_t b = 0; b < options.blocks; ++b)
    blocks.push_back(register_module("block" + std::to_string(b), torch::nn::Linear(options.width, options.width)));
  output = register_module("output", torch::nn::Linear(options.width, 10));
}

void BlockMlp::checkpoint_every(int64_t blocks_per_segment) {
  WB_CHECK(blocks_per_segment >= 0 && blocks_per_segment <= options_.blocks,
           "--checkpoint-every {}: the model has {} block(s); a checkpoint holds 1 to {} of them (0: none)",
           blocks_per_segment, options_.blocks, options_.blocks);
  blocks_per_segment_ = blocks_per_segment;
}

torch::Tensor BlockMlp::run_blocks(torch::Tensor x, int64_t first, int64_t last) {
  for (int64_t b = first; b < last; ++b)
    x = x + torch::dropout(torch::relu(blocks[static_cast<size_t>(b)]->forward(x)), options_.dropout, is_training());
  return x;
}

torch::Tensor BlockMlp::forward(torch::Tensor images) {
  torch::Tensor x = images.flatten(1).to(input->weight.scalar_type());
  x = torch::relu(input->forward(x));
  if (blocks_per_segment_ == 0) {
    x = run_blocks(x, 0, options_.blocks);
  } else {
    for (int64_t first = 0; first < options_.blocks; first += blocks_per_segment_) {
      const int64_t last = std::min(options_.blocks, first + blocks_per_segment_);
      x = checkpoint([this, first, last](const torch::Tensor& in) { return run_blocks(in, first, last); }, x);
    }
  }
  return output->forward(x).to(torch::kFloat32);
}

}  // namespace ch09
