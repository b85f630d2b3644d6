// step_model.cpp — the profile's sums, DDP after backward and the best
// bucket (given); ex10.5's buckets and ex10.6's ZeRO and pipeline are in
// buckets.cpp and layouts.cpp.
#include "step_model.hpp"

#include <algorithm>

#include "workbook/errors.hpp"

namespace ch10 {

int64_t Profile::parameters() const {
  int64_t total = 0;
  for (const LayerProfile& layer : layers) total += layer.parameters;
  return total;
}

double Profile::forward_s() const {
  double total = 0.0;
  for (const LayerProfile& layer : layers) total += layer.forward_s;
  return total;
}

double Profile::backward_s() const {
  double total = 0.0;
  for (const LayerProfile& layer : layers) total += layer.backward_s;
  return total;
}

StepPrediction predict_ddp_after_backward(const Profile& profile, const Link& link, int ranks) {
  StepPrediction prediction;
  prediction.compute_s = profile.forward_s() + profile.backward_s() + profile.optimizer_s;
  prediction.communication_s =
      collective_cost(Collective::AllReduce, Algorithm::Ring, profile.parameter_bytes(), ranks).seconds(link);
  prediction.exposed_s = prediction.communication_s;
  return prediction;
}

int64_t best_bucket_bytes(const Profile& profile, const Link& link, int ranks) {
  WB_CHECK(!profile.layers.empty(), "best_bucket_bytes: a profile without layers");
  // Every cap that can close a bucket right after some layer: the bytes of
  // every run of consecutive layers (a cap between two of them behaves as
  // the next one up).
  std::vector<int64_t> caps;
  for (size_t first = 0; first < profile.layers.size(); ++first) {
    int64_t run = 0;
    for (size_t last = first; last < profile.layers.size(); ++last) {
      run += profile.layers[last].parameters * profile.bytes_per_parameter;
      if (run > 0) caps.push_back(run);
    }
  }
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  WB_CHECK(!caps.empty(), "best_bucket_bytes: the profile has no parameters");
  int64_t best = caps.front();
  double best_s = predict_ddp_buckets(profile, link, ranks, best).total_s();
  for (int64_t cap : caps) {
    const double s = predict_ddp_buckets(profile, link, ranks, cap).total_s();
    if (s < best_s) best = cap, best_s = s;
  }
  return best;
}

double bubble_fraction(int stages, int micro_batches) {
  WB_CHECK(stages >= 1 && micro_batches >= 1, "bubble_fraction: {} stage(s), {} micro-batch(es)", stages,
           micro_batches);
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

}  // namespace ch10
