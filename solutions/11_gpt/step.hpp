// step.hpp — Chapter 11: one training step of the GPT over the mesh, every
// earlier chapter's piece in its place.
//
//   before: every rank holds its part of the model (as the whole model's)
//           and its data rank's rows of the global batch
//   after:  every rank holds its part one optimizer step later, as one
//           process stepping the whole model on the global batch would, and
//           knows the global batch's mean loss
//   the pieces, each already written: Chapter 8's 1F1B over the pipeline
//   group (ex11.1's blocks over the tensor group; bfloat16 autocast and
//   recomputed blocks when asked); ex11.4's stage, its two ends and their
//   tied rows; Chapter 7's sharded optimizer over the data group
#pragma once
#include <memory>

#include "gpt_stage.hpp"
#include "sharding.hpp"  // Chapter 7: OptimizerStateSharding

namespace ch11 {

struct StepOptions {
  int64_t micro_batches = 4;
  bool bfloat16 = false;  // matrix products in bfloat16 under autocast; parameters and LayerNorms in float32
  bool recompute = false; // each block's activations recomputed in backward (Chapter 9's checkpoint)
  double learning_rate = 3e-3;
  // The sharding's collectives overlapped with backward: overlap.hpp's
  // (given; read it after ex11.5 passes) in place of Chapter 7's stage 1,
  // the same update, sooner. Data-only layouts (tensor 1, pipeline 1):
  // Note [overlap at data-only layouts].
  bool overlap = false;
  int64_t bucket_cap_bytes = int64_t{1} << 20;  // with overlap: a bucket's most (DDP's first bucket's)
};

// The optimizer of one stage, its state sharded over the data group
// (Chapter 7's stage 1, or with options.overlap its buckets: overlap.hpp):
// Adam at options.learning_rate (workbook::FusedAdam) unless another is
// given. A UserError for overlap at tensor or pipeline above 1.
class GptTrainer {
 public:
  GptTrainer(GptStageImpl& stage, const Mesh& mesh, const StepOptions& options,
             const ch07::MakeOptimizer& make_optimizer = {});
  // ex11.5. One step on this data rank's sequences `bytes` and `targets`
  // [rows, T] (the same on every rank of its tensor and pipeline groups).
  // Returns the mean loss over the global batch, on every rank. After it,
  // every rank's parameters are those one process would have after one step
  // of the same optimizer (Adam unless the constructor was given another) on
  // the whole model and the global batch (its rows in data-rank order).
  // `bytes` and `targets` are on the stage's device (a GPU under NCCL), and
  // so is every tensor the step hands a communicator.
  double step(const torch::Tensor& bytes, const torch::Tensor& targets);

  ch07::Sharding& sharding() { return *sharding_; }

 private:
  GptStageImpl& stage_;
  const Mesh& mesh_;
  StepOptions options_;
  std::unique_ptr<ch07::Sharding> sharding_;
};

}  // namespace ch11
