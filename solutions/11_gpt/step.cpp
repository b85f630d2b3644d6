// step.cpp — ex11.5: one training step of the GPT over the mesh.
#include "step.hpp"

#include "overlap.hpp"
#include "workbook/autocast.hpp"
#include "workbook/errors.hpp"
#include "workbook/fused_adam.hpp"

namespace ch11 {

GptTrainer::GptTrainer(GptStageImpl& stage, const Mesh& mesh, const StepOptions& options,
                       const ch07::MakeOptimizer& make_optimizer)
    : stage_(stage), mesh_(mesh), options_(options) {
  stage_.recompute = options.recompute;
  // Adam over the flat shard in one pass (Note [one pass, not eight] in fused_adam.hpp).
  const double lr = options.learning_rate;
  auto fused_adam = [lr](const std::vector<ch07::FlatGroup*>&, std::vector<torch::Tensor> tensors) {
    return std::make_unique<workbook::FusedAdam>(std::move(tensors), torch::optim::AdamOptions(lr));
  };
  const ch07::MakeOptimizer& optimizer = make_optimizer ? make_optimizer : ch07::MakeOptimizer(fused_adam);
  if (!options.overlap) {
    sharding_ = std::make_unique<ch07::OptimizerStateSharding>(stage_, *mesh.data, optimizer);
    return;
  }
  WB_CHECK(mesh.shape.tensor == 1 && mesh.shape.pipeline == 1,
           "overlap needs a layout of data ranks only (tensor 1, pipeline 1), not tensor {} × pipeline {}: a call "
           "of the backward's own would wait behind a bucket in flight (Note [overlap at data-only layouts])",
           mesh.shape.tensor, mesh.shape.pipeline);
  ch07::ShardingOptions buckets;
  buckets.bucket_cap_bytes = options.bucket_cap_bytes;
  buckets.first_bucket_bytes = std::min(buckets.first_bucket_bytes, options.bucket_cap_bytes);
  // The tied token rows are held back (Note [final gradients] in overlap.hpp).
  sharding_ = std::make_unique<OverlappedSharding>(stage_, *mesh.data, optimizer, std::vector<torch::Tensor>{stage_.tokens},
                                                   /*overlap=*/true, buckets);
}

double GptTrainer::step(const torch::Tensor& bytes, const torch::Tensor& targets) {
  // BEGIN SOLUTION ex11.5
  sharding_->zero_grad();
  stage_.begin_step(bytes, targets, options_.micro_batches);
  {
    // 1F1B interleaves forwards and backwards: the whole schedule runs in
    // the scope, and a recomputed block (Chapter 9) casts as its forward did.
    std::unique_ptr<workbook::AutocastGuard> autocast;
    if (options_.bfloat16)
      autocast = std::make_unique<workbook::AutocastGuard>(bytes.device().type(), torch::kBFloat16);
    ch08::one_f_one_b(stage_);
  }
  torch::Tensor loss = torch::full({1}, stage_.end_step(), bytes.options().dtype(torch::kFloat64));
  add_tied_embedding_gradients(stage_, mesh_);
  // Adam steps with the gradient averaged over the data group: stage 1
  // reduce-scatters it, steps this rank's shard, all-gathers the parameters.
  sharding_->step();
  // The loss is the last stage's: every rank of the pipeline group learns it
  // from there, then the data group averages.
  mesh_.pipeline->broadcast(loss, stage_.stages() - 1);
  mesh_.data->all_reduce(loss, workbook::ReduceOp::Average);
  return loss.item<double>();
  // END SOLUTION
}

}  // namespace ch11
