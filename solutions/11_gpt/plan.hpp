// plan.hpp — Chapter 11: what a layout of the GPT costs, from the sizes alone,
// before it runs: the parameters each rank holds and the elements each of its
// groups moves in a step. (Branch work: the plan's times, from Chapter 10's
// link model, come next.)
#pragma once
#include <cstdint>

#include "mesh.hpp"
#include "workbook/gpt.hpp"

namespace ch11 {

struct StepShape {
  int64_t batch = 16;          // global batch, in sequences
  int64_t context = 128;       // bytes a sequence
  int64_t micro_batches = 4;
  bool recompute = false;
};

// The whole model's parameters.
int64_t gpt_parameters(const workbook::GptOptions& model);

// The parameters the rank at `here` holds (its stage's blocks, its tensor
// part of each, the ends its stage has).
int64_t parameters_at(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here);

// The elements the rank at `here` hands to each group's calls in one step of
// GptTrainer (what CommStats counts: an all-reduce its tensor, a
// reduce-scatter its output, an all-gather its input, a send or an exchange
// what it sends).
struct StepElements {
  int64_t tensor_all_reduce = 0;
  int64_t pipeline_sent = 0;  // activations and their gradients, and the tied rows' exchange
  int64_t data_reduce_scatter = 0, data_all_gather = 0;
};
StepElements step_elements(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                           const StepShape& step);

}  // namespace ch11
