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
  WB_NOT_IMPLEMENTED("ex10.5");  // TODO(ex10.5): your code here
  return prediction;
}

}  // namespace ch10
