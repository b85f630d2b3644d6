// plan_layouts.cpp — given: ex11.6's counts turned into seconds with
// Chapter 10's link model, and every layout of N ranks ranked by them.
#include <algorithm>
#include <cstdlib>

#include "gpt_stage.hpp"  // layers_of_stage
#include "plan.hpp"
#include "step_model.hpp"  // Chapter 10: predict_pipeline
#include "workbook/errors.hpp"

namespace ch11 {

namespace {

constexpr int64_t kBytesPerElement = 4;  // float32: activations, gradients, parameters

// Note: [which link a group uses] Ranks are placed on nodes in order. A
// group's neighbours are `stride` ranks apart, as rank_of (ex11.3) places
// them, so a group spans stride × size consecutive ranks: inside one node
// when that fits in a node, across nodes otherwise.
const ch10::Link& link_of(const Machine& machine, int stride, int size) {
  return stride * size <= machine.ranks_per_node ? machine.within_node : machine.between_nodes;
}

// How far apart rank_of puts the origin and its neighbour at `next`, along a
// group of `size` (1 for a group of one rank, which moves nothing).
int stride_to(const MeshShape& shape, const MeshCoordinates& next, int size) {
  return size == 1 ? 1 : std::abs(rank_of(shape, next) - rank_of(shape, MeshCoordinates{}));
}

// `calls` ring all-reduces of `elements` in all on `ranks` ranks: each call
// pays its own α's, the bytes their share of the whole.
double all_reduces_s(const ch10::Link& link, int64_t calls, int64_t elements, int ranks) {
  if (ranks == 1) return 0.0;
  const ch10::Cost one = ch10::collective_cost(ch10::Collective::AllReduce, ch10::Algorithm::Ring,
                                               elements * kBytesPerElement, ranks);
  return calls * one.messages * link.alpha_s + one.bytes * link.beta_s_per_byte;
}

// Activations a block keeps for backward, per position, in elements: the
// stream and the LayerNorms' inputs and outputs whole (about 5w), the split
// products (qkv 3w/t, the heads' output w/t, the MLP's 4w/t twice, about
// 9w/t), and the attention's probabilities and scores (2·(heads/t)·T). A
// recomputed block keeps its input only (w). An estimate, not a count: the
// plan ranks by it, the tests do not check it.
double block_activation_elements(const workbook::GptOptions& model, int t, int64_t context, bool recompute) {
  const double w = model.width;
  if (recompute) return w;
  return 5 * w + 9 * w / t + 2.0 * (model.heads / t) * context;
}

}  // namespace

int64_t state_bytes_at(const workbook::GptOptions& model, const MeshShape& shape, const MeshCoordinates& here) {
  const int64_t parameters = parameters_at(model, shape, here), d = shape.data;
  const int64_t shard = (parameters + d - 1) / d;
  // Adam steps the rank's own parameters only: the last shard's padding has no moments.
  const int64_t owned = std::clamp<int64_t>(parameters - here.data * shard, 0, shard);
  return kBytesPerElement * (shard * d + parameters + shard + 2 * owned);
}

double model_flops(const workbook::GptOptions& model, const StepShape& step) {
  StepShape whole = step;
  whole.recompute = false;
  return step_flops(model, MeshShape{}, MeshCoordinates{}, whole).total();
}

LayoutPlan predict_layout(const workbook::GptOptions& model, const MeshShape& shape, const StepShape& step,
                          const Machine& machine) {
  LayoutPlan plan;
  plan.shape = shape;
  plan.micro_batches = step.micro_batches;
  const int d = shape.data, p = shape.pipeline, t = shape.tensor;
  const int64_t m = step.micro_batches;
  // ex11.6's FLOPs before ex11.3's placement: on the skeletons, the plan's
  // tests then fail naming ex11.6, the exercise they test.
  (void)step_flops(model, shape, MeshCoordinates{}, step);
  const ch10::Link& tensor_link = link_of(machine, stride_to(shape, {0, 0, 1}, t), t);
  const ch10::Link& data_link = link_of(machine, stride_to(shape, {1, 0, 0}, d), d);
  const ch10::Link& pipeline_link = link_of(machine, stride_to(shape, {0, 1, 0}, p), p);
  const int64_t rows = step.batch / d / m, positions = rows * step.context;  // a micro-batch's
  const double rate = machine.rate(rows);

  // Note: [the cores' share] Ranks that share cores (ranks_per_core > 1)
  // run at 1/ranks_per_core of a core's rate while all compute; a rank that
  // waits (in a pipeline's bubble, for a message) gives its core to the
  // others, who then run faster. So the step is the longer of two bounds: the
  // schedule, each rank at a whole core's rate; and the cores kept busy, all
  // the ranks' work divided among them. On a GPU cluster (one rank a device,
  // ranks_per_core = 1) the second is never the longer, and the plan is
  // Chapter 10's.
  const double c = std::max(1.0, machine.ranks_per_core);
  double forward_s = 0.0, backward_s = 0.0, mean_compute_s = 0.0, mean_tensor_s = 0.0;
  int64_t most_parameters = 0, most_state = 0, most_activations = 0;
  for (int stage = 0; stage < p; ++stage) {
    const MeshCoordinates here{0, stage, 0};
    const StepFlops flops = step_flops(model, shape, here, step);
    const auto [first, end] = layers_of_stage(model.layers, stage, p);
    const StepElements moved = step_elements(model, shape, here, step);
    const double reduces_s =
        all_reduces_s(tensor_link, moved.tensor_all_reduce_calls / m, moved.tensor_all_reduce / m, t);
    // A micro-batch's forward and backward on this stage, each with the
    // all-reduces it waits for (shared between them as their FLOPs are).
    const double share_forward = flops.forward / flops.total();
    forward_s = std::max(forward_s, flops.forward / rate / m + reduces_s * share_forward);
    backward_s = std::max(backward_s, flops.backward / rate / m + reduces_s * (1 - share_forward));
    mean_compute_s += flops.total() / rate / p;
    mean_tensor_s += m * reduces_s / p;
    // 1F1B: stage s holds at most p − s micro-batches' activations at once.
    const int64_t held = std::min<int64_t>(m, p - stage);
    most_activations = std::max<int64_t>(
        most_activations,
        static_cast<int64_t>(held * positions * (end - first) *
                             block_activation_elements(model, t, step.context, step.recompute)) *
            kBytesPerElement);
    most_parameters = std::max(most_parameters, parameters_at(model, shape, here));
    most_state = std::max(most_state, state_bytes_at(model, shape, here));
  }

  // Chapter 10's pipeline (ex10.6): p equal stages of the slowest one's time,
  // each boundary an activation forward and its gradient back.
  ch10::Profile profile;
  profile.layers = {{"slowest stage", forward_s * p * m, backward_s * p * m, 0}};
  const ch10::StepPrediction schedule =
      ch10::predict_pipeline(profile, pipeline_link, p, static_cast<int>(m), positions * model.width * kBytesPerElement);
  plan.compute_s = c * mean_compute_s;
  plan.tensor_s = c * mean_tensor_s;
  const double waited_s = schedule.total_s() - plan.compute_s - plan.tensor_s;
  plan.pipeline_s = waited_s > 1e-9 * schedule.total_s() ? waited_s : 0.0;  // not a rounding's remainder

  // After the last backward: the tied rows' exchange between the two ends,
  // then Chapter 7's reduce-scatter and all-gather over the data group.
  const int64_t tied = p > 1 ? model.vocabulary / t * model.width * kBytesPerElement : 0;
  const int64_t flat = most_parameters * kBytesPerElement;
  using ch10::Algorithm, ch10::Collective;
  plan.data_s = (p > 1 ? pipeline_link.seconds(static_cast<double>(tied)) : 0.0) +
                ch10::collective_cost(Collective::ReduceScatter, Algorithm::Ring, flat, d).seconds(data_link) +
                ch10::collective_cost(Collective::AllGather, Algorithm::Ring, flat, d).seconds(data_link);
  plan.optimizer_s = machine.optimizer_s_per_parameter * static_cast<double>((most_parameters + d - 1) / d);
  plan.bytes_held = most_state + most_activations;
  return plan;
}

std::vector<LayoutPlan> rank_layouts(const workbook::GptOptions& model, int ranks, StepShape step,
                                     const Machine& machine, const std::vector<int64_t>& micro_batch_counts) {
  std::vector<LayoutPlan> plans;
  for (int t = 1; t <= ranks; ++t)
    for (int p = 1; p * t <= ranks; ++p) {
      if (ranks % (t * p) != 0 || model.heads % t != 0 || model.vocabulary % t != 0 || p > model.layers) continue;
      const MeshShape shape{ranks / (t * p), p, t};
      for (const int64_t m : micro_batch_counts) {
        if (step.batch % (shape.data * m) != 0) continue;
        step.micro_batches = m;
        plans.push_back(predict_layout(model, shape, step, machine));
      }
    }
  std::stable_sort(plans.begin(), plans.end(),
                   [](const LayoutPlan& a, const LayoutPlan& b) { return a.total_s() < b.total_s(); });
  return plans;
}

}  // namespace ch11
