// layouts.cpp — ex10.5: ZeRO's stages and a pipeline of equal stages.
#include "step_model.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

StepPrediction predict_zero(int stage, const Profile& profile, const Link& link, int ranks) {
  WB_CHECK(stage >= 1 && stage <= 3, "predict_zero: stage {} (1, 2 or 3)", stage);
  StepPrediction prediction;
  // BEGIN SOLUTION ex10.5
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
  // BEGIN SOLUTION ex10.5
  const double p = stages, m = micro_batches;
  // One micro-batch's forward and backward on one stage: 1/(p·m) of the model's.
  const double slot_compute_s = (profile.forward_s() + profile.backward_s()) / (p * m);
  const double message_s = stages > 1 ? 2 * link.seconds(static_cast<double>(boundary_bytes)) : 0.0;
  const double slots = m + p - 1;
  prediction.compute_s = m * slot_compute_s + profile.optimizer_s / p;  // what one stage computes
  prediction.communication_s = slots * message_s;
  // The step: every slot, computing or waiting in the bubble, and the optimizer on this stage's layers.
  prediction.exposed_s = slots * (slot_compute_s + message_s) + profile.optimizer_s / p - prediction.compute_s;
  // END SOLUTION
  return prediction;
}

}  // namespace ch10
