// gpt_stage.hpp — Chapter 11: one rank's part of the GPT, at its place in the
// mesh: a run of blocks split over its tensor group, the embedding on the
// first pipeline stage, the final LayerNorm and the loss on the last.
//
//   pipeline stage 0                stage s                 stage p−1
//   bytes ─ tokens (this rank's     blocks of s, each       final LN ─ logits of this
//   vocabulary rows) + positions ─  split over the tensor ─ rank's vocabulary rows
//   blocks of stage 0 ─►            group ─►                (the same token rows: tied)
//                                                           ─ vocab_parallel_cross_entropy
//
// Chapter 8's schedules run it (it is a ch08::Stage); the micro-batch's
// activations [rows, T, w] cross each stage boundary, the same on every rank
// of a tensor group.
#pragma once
#include <map>

#include <torch/torch.h>

#include "mesh.hpp"
#include "pipeline.hpp"  // Chapter 8: Stage
#include "tp_block.hpp"
#include "workbook/gpt.hpp"

namespace ch11 {

// The layers [first, end) of `stage` of `stages`: as even as whole layers
// allow, the earlier stages taking one more where they do not divide. A
// UserError when there are more stages than layers.
std::pair<int64_t, int64_t> layers_of_stage(int64_t layers, int stage, int stages);

class GptStageImpl : public torch::nn::Module, public ch08::Stage {
 public:
  // This rank's part of `whole` (copied) at `mesh.here`. Every rank builds
  // the same `whole` (one seed).
  GptStageImpl(const workbook::GptImpl& whole, const Mesh& mesh);

  int stage() const override { return mesh_->here.pipeline; }
  int stages() const override { return mesh_->shape.pipeline; }
  int64_t micro_batches() const override { return micro_batches_; }
  bool first_stage() const { return stage() == 0; }
  bool last_stage() const { return stage() == stages() - 1; }

  // A step's batch: this data rank's [rows, T] bytes and their targets (the
  // same on every rank of a tensor group and of a pipeline group), cut into
  // `micro_batches` equal parts.
  void begin_step(const torch::Tensor& bytes, const torch::Tensor& targets, int64_t micro_batches);
  // The last stage: the mean loss over this data rank's rows; others 0.
  double end_step();

  // Given: one micro-batch through this stage (as Chapter 8's ex8.5): the
  // first stage embeds its bytes, every stage runs its blocks, the last
  // returns the micro-batch's loss / m.
  torch::Tensor forward(int64_t micro, const torch::Tensor& input) override;
  torch::Tensor backward(int64_t micro, const torch::Tensor& output_grad) override;

  // ex11.4. The first stage's input: `bytes` [rows, T] → [rows, T, w], the
  // whole model's token embedding plus positions, the same on every rank of
  // the tensor group, though this rank holds only its rows of the tokens.
  // After backward, `tokens`' gradient is this rank's rows of the whole
  // model's gradient from this use, and `positions`' the whole model's, on
  // every rank of the tensor group.
  torch::Tensor embed(const torch::Tensor& bytes);
  // ex11.4. The last stage's loss: `x` [rows, T, w] (the last block's output,
  // the same on every rank of the tensor group) through the final LayerNorm
  // and the tied output layer to the mean cross-entropy of predicting
  // `targets` [rows, T], as the whole model's loss(); no rank ever holds the
  // whole vocabulary's logits. After backward, x's gradient is the whole
  // model's on every rank of the tensor group.
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& targets);

  torch::Tensor recv_forward(int64_t micro) override;
  void send_forward(const torch::Tensor& activation) override;
  torch::Tensor recv_backward() override;
  void send_backward(const torch::Tensor& input_grad) override;
  torch::Tensor send_forward_recv_backward(const torch::Tensor& activation) override;
  torch::Tensor send_backward_recv_forward(const torch::Tensor& input_grad, int64_t micro) override;

  // Given: forward only, for the programs. The mean loss of predicting
  // `targets` from `bytes` [rows, T] (the same on every rank of the tensor and
  // pipeline groups), micro-batch by micro-batch; every rank of the pipeline
  // group gets it.
  double evaluate(const torch::Tensor& bytes, const torch::Tensor& targets, int64_t micro_batches);
  // `prompt` and `count` bytes drawn one at a time from the model's softmax at
  // `temperature`, each from the last T bytes, as workbook::Gpt::generate
  // draws them: every rank passes the same generator state and gets the text.
  std::string generate(const std::string& prompt, int64_t count, double temperature, torch::Generator& generator);

  int64_t first_layer = 0, end_layer = 0;  // this stage's blocks: [first_layer, end_layer)
  // This tensor rank's rows of the token embedding, [V/t, w]: on the first
  // stage (the input's lookup) and on the last (the logits); one tensor when
  // they are the same stage.
  torch::Tensor tokens;
  torch::nn::Embedding positions{nullptr};  // the first stage only
  // Its blocks: TensorParallelBlocks (ex11.1) over two or more tensor
  // ranks, copies of the whole model's GptBlocks over one.
  torch::nn::Sequential blocks{nullptr};
  torch::nn::LayerNorm final_norm{nullptr}; // the last stage only
  bool recompute = false;  // each block checkpointed (Chapter 9): its activations recomputed in backward

 private:
  struct Held {
    torch::Tensor input, output;
  };
  torch::Tensor activation_buffer() const;
  torch::Tensor run_blocks(torch::Tensor h);

  const Mesh* mesh_;
  int64_t width_ = 0, vocabulary_ = 0;
  torch::TensorOptions activation_options_;  // the model's dtype (the device: the batch's)
  torch::Tensor bytes_, targets_, loss_sum_;
  int64_t micro_batches_ = 0, micro_rows_ = 0;
  std::map<int64_t, Held> held_;
};
TORCH_MODULE(GptStage);

// ex11.4. After the schedule's backwards: the first and the last stage of a
// pipeline group hold the same token rows (tied), each with the gradient of
// its own use; after this call both hold the whole model's gradient of those
// rows, and both step with it. Every stage calls it (a stage that is neither
// end, or a pipeline of one stage, has nothing to add).
void add_tied_embedding_gradients(GptStageImpl& stage, const Mesh& mesh);

}  // namespace ch11
