// step.cpp — ex11.5: one training step of the GPT over the mesh.
#include "step.hpp"

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
  sharding_ = std::make_unique<ch07::OptimizerStateSharding>(stage_, *mesh.data,
                                                             make_optimizer ? make_optimizer : fused_adam);
}

double GptTrainer::step(const torch::Tensor& bytes, const torch::Tensor& targets) {
  WB_NOT_IMPLEMENTED("ex11.5");  // TODO(ex11.5): your code here
}

}  // namespace ch11
