// layouts.cpp — ex10.6: ZeRO's stages, a pipeline of equal stages, tensor parallel.
#include <algorithm>

#include "step_model.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

StepPrediction predict_zero(int stage, const Profile& profile, const Link& link, int ranks) {
  WB_CHECK(stage >= 1 && stage <= 3, "predict_zero: stage {} (1, 2 or 3)", stage);
  StepPrediction prediction;
  WB_NOT_IMPLEMENTED("ex10.6");  // TODO(ex10.6): your code here
  return prediction;
}

StepPrediction predict_pipeline(const Profile& profile, const Link& link, int stages, int micro_batches,
                                int64_t boundary_bytes) {
  WB_CHECK(stages >= 1 && micro_batches >= 1, "predict_pipeline: {} stage(s), {} micro-batch(es)", stages,
           micro_batches);
  StepPrediction prediction;
  WB_NOT_IMPLEMENTED("ex10.6");  // TODO(ex10.6): your code here
  return prediction;
}

StepPrediction predict_tensor_parallel(const Profile& profile, const Link& link, int ranks, int pairs,
                                       int64_t activation_bytes) {
  WB_CHECK(ranks >= 1 && pairs >= 0, "predict_tensor_parallel: {} rank(s), {} pair(s)", ranks, pairs);
  StepPrediction prediction;
  WB_NOT_IMPLEMENTED("ex10.6");  // TODO(ex10.6): your code here
  return prediction;
}

}  // namespace ch10
