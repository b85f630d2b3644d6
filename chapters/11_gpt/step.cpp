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
  WB_NOT_IMPLEMENTED("ex11.5");  // TODO(ex11.5): your code here
}

}  // namespace ch11
