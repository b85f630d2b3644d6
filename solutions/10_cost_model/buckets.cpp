// buckets.cpp — ex10.5: DDP's buckets on a timeline: when each is ready,
// when the link has it done, and what of it the step waits for.
#include <algorithm>

#include "step_model.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

StepPrediction predict_ddp_buckets(const Profile& profile, const Link& link, int ranks, int64_t bucket_cap_bytes) {
  WB_CHECK(bucket_cap_bytes > 0, "predict_ddp_buckets: a cap of {} bytes", bucket_cap_bytes);
  StepPrediction prediction;
  prediction.compute_s = profile.forward_s() + profile.backward_s() + profile.optimizer_s;
  // BEGIN SOLUTION ex10.5
  const double backward_ends_s = profile.forward_s() + profile.backward_s();
  double now_s = profile.forward_s();  // backward's clock: it starts at the last layer
  double link_free_s = 0.0;            // when the previous bucket's all-reduce ends
  int64_t bucket_bytes = 0;
  double last_gradient_s = now_s;      // when the open bucket got its latest gradient
  auto all_reduce = [&](double ready_s) {
    const double seconds =
        collective_cost(Collective::AllReduce, Algorithm::Ring, bucket_bytes, ranks).seconds(link);
    link_free_s = std::max(ready_s, link_free_s) + seconds;
    prediction.communication_s += seconds;
    bucket_bytes = 0;
  };
  for (auto layer = profile.layers.rbegin(); layer != profile.layers.rend(); ++layer) {
    now_s += layer->backward_s;
    bucket_bytes += layer->parameters * profile.bytes_per_parameter;
    if (layer->parameters > 0) last_gradient_s = now_s;
    if (bucket_bytes >= bucket_cap_bytes) all_reduce(now_s);
  }
  // A layer without parameters adds no gradient: the last bucket is ready at
  // its latest gradient, before the end of backward if such layers come first.
  if (bucket_bytes > 0) all_reduce(last_gradient_s);
  prediction.exposed_s = std::max(0.0, link_free_s - backward_ends_s);
  // END SOLUTION
  return prediction;
}

}  // namespace ch10
