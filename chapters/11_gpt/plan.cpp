// plan.cpp — ex11.6: what a rank of the GPT computes and what its groups
// move in one step, from the sizes alone.
#include "plan.hpp"

#include "gpt_stage.hpp"  // layers_of_stage
#include "workbook/errors.hpp"

namespace ch11 {

namespace {

// One block's parameters on one of t tensor ranks: the LayerNorms whole, a
// 1/t part of each Linear, the row-parallel layers' biases whole.
int64_t block_parameters(int64_t w, int64_t t) {
  const int64_t norms = 4 * w;
  const int64_t qkv = 3 * w / t * w + 3 * w / t, projection = w / t * w + w;
  const int64_t expand = 4 * w / t * w + 4 * w / t, contract = w * (4 * w / t) + w;
  return norms + qkv + projection + expand + contract;
}

}  // namespace

int64_t gpt_parameters(const workbook::GptOptions& model) {
  const int64_t w = model.width;
  return model.vocabulary * w + model.context * w + model.layers * block_parameters(w, 1) + 2 * w;
}

int64_t parameters_at(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here) {
  const int64_t w = model.width, t = shape.tensor;
  const auto [first, end] = layers_of_stage(model.layers, here.pipeline, shape.pipeline);
  int64_t count = (end - first) * block_parameters(w, t);
  const bool first_stage = here.pipeline == 0, last_stage = here.pipeline == shape.pipeline - 1;
  if (first_stage || last_stage) count += model.vocabulary / t * w;  // the tied rows: one tensor when both ends
  if (first_stage) count += model.context * w;
  if (last_stage) count += 2 * w;
  return count;
}

StepFlops step_flops(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                     const StepShape& step) {
  WB_CHECK(step.batch % shape.data == 0, "a batch of {} does not cut into {} data ranks", step.batch, shape.data);
  StepFlops flops;
  WB_NOT_IMPLEMENTED("ex11.6");  // TODO(ex11.6): your code here
  return flops;
}

StepElements step_elements(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                           const StepShape& step) {
  WB_CHECK(step.batch % (shape.data * step.micro_batches) == 0, "a batch of {} does not cut into {} × {}",
           step.batch, shape.data, step.micro_batches);
  StepElements e;
  WB_NOT_IMPLEMENTED("ex11.6");  // TODO(ex11.6): your code here
  return e;
}

}  // namespace ch11
