// plan.hpp — Chapter 11: what a layout of the GPT costs, from the sizes
// alone, before it runs; then every layout of N ranks ranked by it.
//
//   sizes (L, w, heads, T, V)  ─┐                 ┌─ compute: FLOPs ÷ rate
//   mesh (data, pipeline,       ├─ per rank: ──────┼─ tensor: all-reduces on its group's link
//        tensor), micro-batches │  FLOPs, elements ├─ pipeline: bubble + messages (Chapter 10)
//   machine (rate, links)      ─┘  each group moves└─ data: reduce-scatter + all-gather
//
// ex11.6 is the two counts on the left: what a rank computes and what each of
// its groups moves in one step of GptTrainer. The rest is given: it turns the
// counts into seconds with Chapter 10's link model and ranks the layouts.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "cost_model.hpp"  // Chapter 10: Link, collective_cost
#include "mesh.hpp"
#include "workbook/gpt.hpp"

namespace ch11 {

struct StepShape {
  int64_t batch = 16;    // global batch, in sequences
  int64_t context = 128; // bytes a sequence
  int64_t micro_batches = 4;
  bool recompute = false;
};

// Given: the whole model's parameters.
int64_t gpt_parameters(const workbook::GptOptions& model);

// Given: the parameters the rank at `here` holds (its stage's blocks, its
// tensor part of each, the ends its stage has).
int64_t parameters_at(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here);

// ---- ex11.6 -------------------------------------------------------------------
// The floating-point operations the rank at `here` computes in one step of
// GptTrainer (a multiply-add counts 2), in the matrix products only: every
// Linear, the attention's two products (the scores and the weighted sum,
// over all T × T pairs, T being step.context: the causal mask is applied
// after they are computed), and the logits. `backward` holds what runs during backward,
// recomputed forwards included. LayerNorms, softmax, GELU, the lookup and
// the optimizer are left out (each is a few operations per element, not per
// weight).
struct StepFlops {
  double forward = 0.0, backward = 0.0;
  double total() const { return forward + backward; }
};
StepFlops step_flops(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                     const StepShape& step);

// The elements the rank at `here` hands to each group's calls in one step of
// GptTrainer, as its CommStats counts them (the calls of your own ex11.1,
// ex11.2 and ex11.4 among them: count what yours make): an all-reduce its tensor, a
// reduce-scatter its input's share (what it gets back), an all-gather its
// own part, a send or an exchange what it sends; and the tensor group's
// all-reduce calls (each pays its own α's). A group of one rank is counted
// as any other: every call made to it, even where nothing travels (which
// calls a stage makes follows from what it holds: gpt_stage.hpp). The
// step's loss, a single number however it travels, is left out. A
// UserError when the batch
// does not cut into data ranks × micro-batches.
struct StepElements {
  int64_t tensor_all_reduce = 0, tensor_all_reduce_calls = 0;
  int64_t pipeline_sent = 0;  // activations and their gradients, and the tied rows' exchange
  int64_t data_reduce_scatter = 0, data_all_gather = 0;
};
StepElements step_elements(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here,
                           const StepShape& step);

// ---- given (plan_layouts.cpp) ---------------------------------------------------
// What the plan needs of the machine, measured once (ch11_plan does).
struct Machine {
  double flops_per_s = 1e9;               // one rank's rate on the model's work, a core (or a GPU) to itself
  // The rate at a micro-batch of so many sequences, where measured (small
  // products run slower); flops_per_s at any other size.
  std::map<int64_t, double> flops_per_s_at_rows;
  double rate(int64_t rows) const {
    const auto it = flops_per_s_at_rows.find(rows);
    return it != flops_per_s_at_rows.end() ? it->second : flops_per_s;
  }
  double ranks_per_core = 1.0;            // ranks that take turns on one core when all compute (≥ 1)
  double optimizer_s_per_parameter = 0.0; // Adam's step per parameter a rank steps, every rank stepping
  ch10::Link within_node, between_nodes;  // ranks of one node; ranks of two
  int ranks_per_node = 1;                 // ranks placed in order, as make_mesh assumes
};

// One layout's predicted step (the slowest rank's), its terms kept apart.
struct LayoutPlan {
  MeshShape shape;
  int64_t micro_batches = 1;
  double compute_s = 0.0;   // forwards and backwards, the cores shared, if no rank ever waited
  double tensor_s = 0.0;    // the tensor groups' all-reduces (none overlapped), likewise
  double pipeline_s = 0.0;  // what the pipeline's schedule adds: the bubble, the messages, unequal stages
  double data_s = 0.0;      // the data group's reduce-scatter and all-gather, and the tied exchange
  double optimizer_s = 0.0;
  int64_t bytes_held = 0;   // the most a rank holds: state_bytes_at (counted) and activations (estimated)
  double total_s() const { return compute_s + tensor_s + pipeline_s + data_s + optimizer_s; }
};

LayoutPlan predict_layout(const workbook::GptOptions& model, const MeshShape& shape, const StepShape& step,
                          const Machine& machine);

// Every layout of `ranks` ranks the model allows (data × pipeline × tensor,
// tensor dividing the heads, at most one stage a layer) at each micro-batch
// count of `micro_batch_counts` that cuts the batch, fastest first.
std::vector<LayoutPlan> rank_layouts(const workbook::GptOptions& model, int ranks, StepShape step,
                                     const Machine& machine, const std::vector<int64_t>& micro_batch_counts);

// What the rank at `here` keeps besides activations, in bytes, as Chapter 7's
// OptimizerStateSharding holds it after a step (its held()): the parameters
// in one float32 buffer padded to d equal shards, every parameter's
// gradient, the averaged shard of the gradient, and Adam's two moments for
// the parameters of that shard (the last shard's padding has none).
int64_t state_bytes_at(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here);

// The training FLOPs of the whole model on one step's global batch, without
// recomputation (model-FLOPs utilization's numerator, over the step's time).
double model_flops(const workbook::GptOptions& model, const StepShape& step);

}  // namespace ch11
