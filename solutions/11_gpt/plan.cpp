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
  // BEGIN SOLUTION ex11.6
  const double w = model.width, t = shape.tensor, T = step.context;
  const double tokens = static_cast<double>(step.batch / shape.data) * step.context;
  const auto [first, end] = layers_of_stage(model.layers, here.pipeline, shape.pipeline);
  // A block, per token, on one of t ranks: qkv (3w²), projection (w²), expand
  // and contract (4w² each) are 12w²/t multiply-adds; the scores q·kᵀ and the
  // weighted sum are T·w/t each (every key of the T, the rank's heads' width).
  const double block = 2 * (12 * w * w / t) + 2 * (2 * T * w / t);
  const double logits = here.pipeline == shape.pipeline - 1 ? 2 * (model.vocabulary / t) * w : 0.0;
  const double blocks = (end - first) * block;
  flops.forward = tokens * (blocks + logits);
  // Backward: each product's two gradients (its input's and its weight's, or
  // both operands'), twice the forward; a recomputed block runs its forward again.
  flops.backward = 2 * flops.forward + (step.recompute ? tokens * blocks : 0.0);
  // END SOLUTION
  return flops;
}

StepElements step_elements(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                           const StepShape& step) {
  WB_CHECK(step.batch % (shape.data * step.micro_batches) == 0, "a batch of {} does not cut into {} × {}",
           step.batch, shape.data, step.micro_batches);
  StepElements e;
  // BEGIN SOLUTION ex11.6
  const int64_t w = model.width, t = shape.tensor, m = step.micro_batches;
  const int64_t positions = step.batch / shape.data / m * step.context;  // a micro-batch's rows
  const int64_t activation = positions * w;
  const auto [first, end] = layers_of_stage(model.layers, here.pipeline, shape.pipeline);
  const bool first_stage = here.pipeline == 0, last_stage = here.pipeline == shape.pipeline - 1;
  // Each split block: g after the projection and after the MLP going forward,
  // f before qkv and before expand going back; a recomputed block goes forward twice.
  // (A block on one tensor rank is the whole model's block: no f, no g.)
  const int64_t block_calls = t > 1 ? (step.recompute ? 6 : 4) : 0;
  int64_t per_micro = (end - first) * block_calls * activation, calls = (end - first) * block_calls;
  if (first_stage) per_micro += activation, calls += 1;                 // the lookup's sum (g)
  if (last_stage) per_micro += activation + 3 * positions, calls += 4;  // f before the logits; the loss's three
  e.tensor_all_reduce = m * per_micro;
  e.tensor_all_reduce_calls = m * calls;
  // Activations forward, their gradients back, one micro-batch at a time.
  e.pipeline_sent = m * activation * ((first_stage ? 0 : 1) + (last_stage ? 0 : 1));
  if (shape.pipeline > 1 && (first_stage || last_stage)) e.pipeline_sent += model.vocabulary / t * w;
  // Chapter 7's stage 1: the flat gradient reduce-scattered, the parameters
  // gathered back; each rank's shard of the padded buffer.
  const int64_t shard = (parameters_at(model, shape, here) + shape.data - 1) / shape.data;
  e.data_reduce_scatter = shard;
  e.data_all_gather = shard;
  // END SOLUTION
  return e;
}

}  // namespace ch11
