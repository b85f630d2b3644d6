// precision.hpp — Chapter 9's first half: computing in 16 bits without
// losing what 32 bits keep.
//
//   float32  1 sign  8 exponent  23 mantissa   range 1e±38, 7 digits
//   bfloat16 1 sign  8 exponent   7 mantissa   range 1e±38, 2-3 digits
//   float16  1 sign  5 exponent  10 mantissa   range 6e-8 .. 65504, 3 digits
//
//   ex9.1  sums: one value at a time into a 16-bit accumulator stalls once
//          the next value is under half a unit of the sum's last place
//   ex9.2  the loss scaler: float16's range is too short for small gradients,
//          so the loss is multiplied before backward and the gradients divided
//          after; an overflow skips the step, on every rank alike
//   ex9.3  master weights: the model computes in 16 bits, the optimizer
//          updates float32 copies, which keep the updates 16 bits would round away
//
//        fp32 masters ──round──> 16-bit model ──forward, backward (loss × S)──┐
//             ^                                                               │
//        optimizer.step()  <──  unscale (÷ S), any inf? skip  <──  grads in fp32
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace ch09 {

// `value` rounded to `dtype` (float16, bfloat16, float32 or float64), as a
// double. Given: c10::Half and c10::BFloat16 round to nearest even, as the
// hardware does, from a float: a double goes to float32 first, so a 16-bit
// result can be one ulp from the nearest (a double just past a tie that
// float32 rounds onto it). Exact for values a float32 holds.
double round_to(double value, torch::ScalarType dtype);

// ---- ex9.1: summing in 16 bits ------------------------------------------------

struct Sums {
  double exact = 0.0;        // the stored values summed in float64 (exact for the tests' data)
  double float32_sum = 0.0;  // one at a time into a float32 accumulator
  double low_sum = 0.0;      // one at a time into a `storage` accumulator: each partial sum rounded
};

// The values (float32, 1-D) as they would be stored in `storage` (each
// rounded to it first), summed in order three ways. Note: [where a sum
// stalls] Adding v to a sum s changes s only if v is more than half a unit
// of s's last place (ulp; exactly half rounds to the even neighbour): in bfloat16 the ulp of 4 is 2^-5, so 0.01s stop
// counting at 4; in float16 at 32. A GPU's 16-bit matrix units read 16-bit
// inputs but accumulate in float32 for that reason, and so do LibTorch's
// reductions (torch::sum of a bfloat16 tensor adds in float32).
Sums sum_in_order(const torch::Tensor& values, torch::ScalarType storage);

// ---- ex9.2: the dynamic loss scaler -----------------------------------------

// PyTorch's GradScaler's defaults.
struct ScalerOptions {
  double init_scale = 65536.0;    // 2^16: the scale of the first step
  double growth_factor = 2.0;     // the scale's factor when it grows (> 1)
  double backoff_factor = 0.5;    // the scale's factor when it shrinks (between 0 and 1)
  int64_t growth_interval = 2000; // the clean steps in a row that let it grow
};

// Note: [why a loss scale] float16's smallest normal number is 6e-5 and its
// smallest at all 6e-8: gradients under half of that become 0. Scaling
// the loss by S scales every gradient by S (backward is linear), which moves
// them into range; dividing by S in float32 afterwards (unscale) gives the
// true gradients. Too large an S overflows to inf, and that step's gradients
// are useless. The best S is the largest that does not overflow, and it
// changes as training goes; the dynamic scaler searches for it, with the
// steps themselves as its probes. bfloat16 has float32's range and needs none.
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(ScalerOptions options = {});

  torch::Tensor scale(const torch::Tensor& loss) const { return loss * scale_; }  // given
  double scale_value() const { return scale_; }
  int64_t clean_steps() const { return clean_steps_; }  // since the last change of scale
  int64_t skipped_steps() const { return skipped_steps_; }

  // ex9.2: divides every defined .grad of `parameters` by the scale, in
  // place, and returns whether any of them, on ANY rank of `comm`, holds an
  // inf or a NaN. Every rank gets the same answer (with Chapter 7's shards
  // each rank sees only its own gradients, and one rank alone skipping would
  // leave the others ahead), for at most one collective call per call,
  // however many tensors (the tests count them).
  bool unscale(const std::vector<torch::Tensor>& parameters, workbook::Communicator& comm);

  // ex9.2: called once after every step tried, with whether it overflowed
  // on any rank: one probe of the search the lesson describes (an overflow
  // says the scale is too large now; clean steps, growth_interval of them,
  // say a larger one is worth a try), with the options' factors and
  // interval, whatever they are. What it has found is what the accessors
  // report: scale_value() for the next step, skipped_steps() the overflows
  // so far, clean_steps() the clean steps since the scale last changed.
  void update(bool found_inf);

 private:
  ScalerOptions options_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

// ex9.2: the step under the scaler, with `parameters`' gradients still
// scaled on entry. Returns whether the step was taken: it is taken on every
// rank or on none, and exactly when no rank found an inf or a NaN. A taken
// step moves the optimizer with the true (unscaled) gradients and calls
// advance_schedule() once (it may be empty); a skipped step changes neither
// the parameters, nor the optimizer's state (Adam's moments and step count),
// nor the schedule (it counts the steps taken, not the steps tried). Either
// way the scaler learns the step's outcome.
bool scaled_step(DynamicLossScaler& scaler, torch::optim::Optimizer& optimizer,
                 const std::vector<torch::Tensor>& parameters, const std::function<void()>& advance_schedule,
                 workbook::Communicator& comm);

// ---- ex9.3: master weights ----------------------------------------------------

// Note: [master weights] An update of 1e-4 to a weight of 1 is lost in
// bfloat16, whose ulp at 1 is 2^-7 ≈ 0.008: a model whose weights are
// 16-bit stops learning once its updates are small. So the optimizer
// updates float32 copies (the masters, which also hold its state in float32),
// and the model's 16-bit weights are the masters rounded, after every step.
// The memory per parameter: 2 bytes for the model and 2 for its gradient,
// 4 for the master and 4 for its gradient, 8 for Adam's moments (Chapter 7
// shards the last three).
class MasterWeights {
 public:
  // ex9.3: `model`'s parameters are float32 on entry. Afterwards the
  // masters are float32 leaf tensors that require grad, one per parameter,
  // equal bit for bit to the parameters as they were on entry, and sharing
  // no storage with them; the model computes in `compute`: its parameters
  // and buffers are of that dtype.
  MasterWeights(torch::nn::Module& model, torch::ScalarType compute);

  // What the optimizer is given.
  const std::vector<torch::Tensor>& masters() const { return masters_; }
  torch::ScalarType compute_dtype() const { return compute_; }

  // ex9.3: each master's .grad becomes its model parameter's .grad in
  // float32; where the parameter has none (undefined), the master has none
  // either, whatever it had before.
  void gradients_to_masters();
  // ex9.3: each model parameter becomes its master rounded to the compute
  // dtype, in place (the model's tensors stay the same objects).
  void masters_to_model();

 private:
  std::vector<torch::Tensor> parameters_;  // the model's, in `compute`
  std::vector<torch::Tensor> masters_;     // float32
  torch::ScalarType compute_;
};

// The dtype named by "fp32", "bf16" or "fp16". Any other name: a UserError.
torch::ScalarType dtype_named(const std::string& name);

// Whether `device` computes a matrix product and a convolution in `dtype`
// (tried on a small one): a UserError naming the device and the dtype if not.
void check_device_computes(const torch::Device& device, torch::ScalarType dtype);

}  // namespace ch09
