// block_mlp.hpp — Chapter 9's model (given): a stack of equal residual
// blocks, so that checkpointing every k blocks saves the same at every k,
// and its dtype can be float32, bfloat16 or float16.
//
//   images [N, 1, 28, 28] → flatten [N, 784] → Linear(784, W) → ReLU
//   → blocks × L:  x + Dropout(ReLU(Linear(W, W)(x)))
//   → Linear(W, 10) → logits, in float32 whatever the model's dtype
//
// The loss is computed from float32 logits: a softmax over 16-bit logits
// loses what a float32 one keeps (the same reason autocast runs it in float32).
#pragma once
#include <cstdint>

#include <torch/torch.h>

#include "workbook/models.hpp"

namespace ch09 {

struct BlockMlpOptions {
  int64_t blocks = 8;
  int64_t width = 512;
  double dropout = 0.1;
};

class BlockMlp : public workbook::Classifier {
 public:
  explicit BlockMlp(BlockMlpOptions options = {});
  torch::Tensor forward(torch::Tensor images) override;
  std::shared_ptr<workbook::Classifier> fresh() const override { return std::make_shared<BlockMlp>(options_); }

  // Blocks run in consecutive segments of `blocks_per_segment`, each through
  // ch09::checkpoint (ex9.5); 0: no checkpoint. More blocks per segment than
  // the model has is a UserError.
  void checkpoint_every(int64_t blocks_per_segment);
  int64_t blocks_per_checkpoint() const { return blocks_per_segment_; }
  const BlockMlpOptions& options() const { return options_; }

  // Blocks [first, last), without a checkpoint: what a segment runs.
  torch::Tensor run_blocks(torch::Tensor x, int64_t first, int64_t last);

  torch::nn::Linear input{nullptr}, output{nullptr};
  std::vector<torch::nn::Linear> blocks;

 private:
  BlockMlpOptions options_;
  int64_t blocks_per_segment_ = 0;
};

}  // namespace ch09
