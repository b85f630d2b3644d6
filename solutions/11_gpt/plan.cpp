// plan.cpp — what a layout of the GPT costs, from the sizes alone.
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

StepElements step_elements(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                           const StepShape& step) {
  WB_CHECK(step.batch % (shape.data * step.micro_batches) == 0, "a batch of {} does not cut into {} × {}",
           step.batch, shape.data, step.micro_batches);
  const int64_t w = model.width, t = shape.tensor, m = step.micro_batches;
  const int64_t positions = step.batch / shape.data / m * step.context;  // a micro-batch's rows
  const int64_t activation = positions * w;
  const auto [first, end] = layers_of_stage(model.layers, here.pipeline, shape.pipeline);
  const bool first_stage = here.pipeline == 0, last_stage = here.pipeline == shape.pipeline - 1;
  StepElements e;
  // Each split block: g after the projection and after the MLP going forward,
  // f before qkv and before expand going back; a recomputed block goes forward twice.
  const int64_t per_block = t > 1 ? (step.recompute ? 6 : 4) * activation : 0;
  int64_t per_micro = (end - first) * per_block;
  if (first_stage) per_micro += activation;                      // the lookup's sum (g)
  if (last_stage) per_micro += activation + 3 * positions;       // f before the logits; the loss's three
  e.tensor_all_reduce = m * per_micro;
  // Activations forward, their gradients back, one micro-batch at a time.
  e.pipeline_sent = m * activation * ((first_stage ? 0 : 1) + (last_stage ? 0 : 1));
  if (shape.pipeline > 1 && (first_stage || last_stage)) e.pipeline_sent += model.vocabulary / t * w;
  // Chapter 7's stage 1: the flat gradient reduce-scattered, the parameters
  // gathered back; each rank's shard of the padded buffer.
  const int64_t held = parameters_at(model, shape, here);
  const int64_t shard = (held + shape.data - 1) / shape.data;
  e.data_reduce_scatter = shard;
  e.data_all_gather = shard;
  return e;
}

}  // namespace ch11
