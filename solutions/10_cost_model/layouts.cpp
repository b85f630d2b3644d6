// layouts.cpp — ex10.6: ZeRO's stages, a pipeline of equal stages, tensor parallel.
#include <algorithm>

#include "step_model.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

StepPrediction predict_zero(int stage, const Profile& profile, const Link& link, int ranks) {
  WB_CHECK(stage >= 1 && stage <= 3, "predict_zero: stage {} (1, 2 or 3)", stage);
  StepPrediction prediction;
  // BEGIN SOLUTION ex10.6
  prediction.compute_s = profile.forward_s() + profile.backward_s() + profile.optimizer_s / ranks;
  auto ring = [&](Collective collective, int64_t parameters) {
    return collective_cost(collective, Algorithm::Ring, parameters * profile.bytes_per_parameter, ranks)
        .seconds(link);
  };
  if (stage < 3) {
    prediction.communication_s = ring(Collective::ReduceScatter, profile.parameters()) +
                                 ring(Collective::AllGather, profile.parameters());
  } else {
    for (const LayerProfile& layer : profile.layers)
      if (layer.parameters > 0)  // a layer without parameters gathers nothing
        prediction.communication_s += 2 * ring(Collective::AllGather, layer.parameters) +
                                      ring(Collective::ReduceScatter, layer.parameters);
  }
  prediction.exposed_s = prediction.communication_s;
  // END SOLUTION
  return prediction;
}

StepPrediction predict_pipeline(const Profile& profile, const Link& link, int stages, int micro_batches,
                                int64_t boundary_bytes) {
  WB_CHECK(stages >= 1 && micro_batches >= 1, "predict_pipeline: {} stage(s), {} micro-batch(es)", stages,
           micro_batches);
  StepPrediction prediction;
  // BEGIN SOLUTION ex10.6
  const double p = stages, m = micro_batches;
  // One micro-batch's forward, and its backward, on one stage: 1/(p·m) of the model's.
  const double forward_s = profile.forward_s() / (p * m), backward_s = profile.backward_s() / (p * m);
  const double message_s = stages > 1 ? link.seconds(static_cast<double>(boundary_bytes)) : 0.0;
  // Each link is one more stage: a micro-batch passes p stages and p − 1
  // links, and the next follows one slowest stage behind it.
  const double forwards = p * forward_s + (p - 1) * message_s + (m - 1) * std::max(forward_s, message_s);
  const double backwards = p * backward_s + (p - 1) * message_s + (m - 1) * std::max(backward_s, message_s);
  prediction.compute_s = m * (forward_s + backward_s) + profile.optimizer_s / p;  // what one stage computes
  prediction.communication_s = 2 * m * message_s;  // a middle stage's: an activation and a gradient per micro-batch
  prediction.exposed_s = forwards + backwards + profile.optimizer_s / p - prediction.compute_s;
  // END SOLUTION
  return prediction;
}

StepPrediction predict_tensor_parallel(const Profile& profile, const Link& link, int ranks, int pairs,
                                       int64_t activation_bytes) {
  WB_CHECK(ranks >= 1 && pairs >= 0, "predict_tensor_parallel: {} rank(s), {} pair(s)", ranks, pairs);
  StepPrediction prediction;
  // BEGIN SOLUTION ex10.6
  prediction.compute_s = (profile.forward_s() + profile.backward_s() + profile.optimizer_s) / ranks;
  // Two all-reduces per pair, one in each direction, each its own α's.
  const double all_reduce_s =
      collective_cost(Collective::AllReduce, Algorithm::Ring, activation_bytes, ranks).seconds(link);
  prediction.communication_s = 2 * pairs * all_reduce_s;
  prediction.exposed_s = prediction.communication_s;
  // END SOLUTION
  return prediction;
}

}  // namespace ch10
