// noise_scale.hpp — ex6.1: the gradient noise scale, from the two gradients
// that data-parallel training computes anyway (McCandlish, Kaplan, Amodei et
// al. 2018, "An Empirical Model of Large-Batch Training", §2.2).
//
// Each sample's gradient is the true gradient G plus noise: independent from
// sample to sample, of mean zero and covariance Σ. A step's gradient is the
// mean over its batch's samples, so the smaller the batch, the noisier the
// step. The noise scale
//
//     B_simple = tr(Σ) / |G|²       (in samples)
//
// is the batch at which a step's noise is as large as its signal: well below
// it, doubling the batch nearly halves the steps a result needs; well above
// it, a larger batch buys little but cost. Neither G nor Σ is known, and one
// step gives one noisy gradient. But a data-parallel step holds two gradients
// of the same weights, over different numbers of samples:
//
//   rank r, before the all-reduce    a mean over small_batch samples   |G_small,r|²
//   every rank, after the all-reduce a mean over big_batch samples     |G_big|²
//                                    (big_batch: the global batch)
//
// From those squared norms, summed over many steps and every rank, estimate
// |G|² and tr(Σ). ch06_train --noise-scale prints the result every epoch, and
// the sweep compares it with the batch where the steps stop halving.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "workbook/communicator.hpp"
#include "workbook/models.hpp"

namespace ch06 {

struct NoiseScaleEstimate {
  double gradient_squared = 0.0;  // |G|²
  double trace_sigma = 0.0;       // tr Σ
  double b_simple = 0.0;          // tr Σ / |G|², in samples
  int64_t steps = 0;              // how many steps the estimate covers (add()'s calls on each rank)
  // Late in training |G|² is small against the noise, and its estimate can
  // come out at or below zero: then the steps could not resolve the signal,
  // and b_simple (the ratio, whatever the signs) means nothing.
  bool resolved() const { return gradient_squared > 0 && trace_sigma > 0; }
};

// ---- ex6.1 ----------------------------------------------------------------------

// |G|², tr Σ and their ratio, from the mean squared norm of gradients that
// are each a mean over small_batch samples (small_squared), and of gradients
// over big_batch samples (big_squared). Exact when the two are the exact
// expected squared norms; an unbiased estimate of each when they are unbiased
// estimates of those. Refuses (UserError, saying why) unless
// 0 < small_batch < big_batch. `steps` is left 0.
NoiseScaleEstimate noise_scale_estimate(double small_squared, double big_squared, int64_t small_batch,
                                        int64_t big_batch);

// Collects a run's steps and estimates B_simple from them.
class NoiseScale {
 public:
  // Given: checks the sizes now (noise_scale_estimate's rule, the .cpp's
  // check_batch_sizes), not an epoch later.
  NoiseScale(int64_t small_batch, int64_t big_batch);

  // One step: this rank's squared norms before and after the all-reduce, as
  // 0-dim tensors on the model's device. It reads nothing back to the host
  // (Chapter 1's rule: the step must not wait for the device).
  void add(const torch::Tensor& small_squared, const torch::Tensor& big_squared);

  // The estimate over every step added since the last estimate (or since
  // construction), on every rank: each step of each rank counts alike, and the
  // estimate of each quantity converges to the truth as the steps grow. Every
  // rank calls it together, after as many add()s as every other, and gets
  // the same result; it then starts again from no steps. Refuses (UserError)
  // when no step was added.
  NoiseScaleEstimate estimate(workbook::Communicator& comm);

 private:
  int64_t small_batch_, big_batch_;
  int64_t steps_ = 0;                // add()'s calls since the last estimate
  std::vector<torch::Tensor> kept_;  // what add() keeps for estimate(): yours to choose
};

// Given: Σ over parameters of |grad|², as a 0-dim float64 tensor on the
// model's device (no host read).
torch::Tensor squared_gradient_norm(workbook::Classifier& model);

}  // namespace ch06
