// steps_to_target.hpp — `ch06_train --sweep`: how many optimizer steps each
// global batch needs to reach a target test accuracy, with its rate tuned,
// and where doubling the batch stops halving them.
//
//   steps to target (log)
//     │ ●                         perfect scaling: S ∝ 1/B (doubling the batch halves the steps)
//     │   ●                       the model: S = S_min · (1 + B_crit / B)
//     │     ●  ·                  (McCandlish et al. 2018, their Eq. 2.11)
//     │       ●    ·  ·
//     │          ●  ●  ●  ●  ← S_min: more batch buys no fewer steps
//     └──────────┼──────────── global batch B (log)
//              B_crit
//
// Note: [steps to target] Following Shallue et al. (2018, "Measuring the
// Effects of Data Parallelism on Neural Network Training"): for every batch
// and method, a run per rate of a small search, each from the same weights
// and sample order, at a constant rate: no decay, which would tie the
// result to a step budget, and no warm-up, whose length in steps would put a
// floor under every batch's count (a 20-step warm-up was half of a large
// batch's steps to 0.80). Evaluated at steps that grow ×1.1 (steps 1, 2, …,
// 10, 11, 13, 15, …) on the first --test-samples test samples, until two
// evaluations in a row reach the target (Note [twice at the target]). The
// batch's result is its best rate's step count.
//
// Note: [the rate search] Doubling and halving from a starting rate: the
// previous (smaller) batch's best rate scaled by the method's rule
// (×2 for the linear rule, ×√2 for the square-root rule), or for the first
// batch the method's own (base rate × (B / 256)^power, methods.hpp). Try it,
// then twice it
// (unless it diverged or collapsed); keep doubling while the steps fall, else halve while
// they fall; at most
// `max_trials` rates per batch. A run stops as soon as it has taken more
// steps than the best rate so far (it cannot win) or twice the previous
// batch's best ("slower"), diverges, or has seen `max_epochs` epochs
// ("budget"); one that ends at chance accuracy has "collapsed". A start that
// diverged or collapsed is not doubled.
//
// Note: [the noise scale's prediction] Every run on 2 or more ranks also
// measures B_simple = tr Σ / |G|² (noise_scale.hpp) over its steps:
// McCandlish et al.'s estimate of B_crit, the batch where the steps stop
// halving. The sweep prints both: B_crit fitted to the measured steps and
// B_simple measured from the gradients.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "accumulation.hpp"
#include "ddp.hpp"  // Chapter 3's reference: broadcast_model, DistributedSampler, gather_batch, evaluate_distributed
#include "methods.hpp"
#include "optimizers.hpp"
#include "schedule.hpp"
#include "workbook/communicator.hpp"
#include "workbook/fashion_mnist.hpp"
#include "noise_scale.hpp"
#include "workbook/seeds.hpp"
#include "workbook/timing.hpp"

namespace ch06 {

struct SweepSetup {
  std::vector<int64_t> batches;
  std::vector<Method> methods;
  double target = 0.85;          // test accuracy on the first --test-samples test samples
  double max_epochs = 20;        // a run's budget, in epochs of the training data
  int64_t micro_batch = 256;     // per rank and forward pass
  int max_trials = 4;            // rates per batch and method
  uint64_t seed = 0;
};

// One run: a batch, a method, a rate.
struct RateTrial {
  int64_t global_batch = 0;
  std::string method;
  double lr = 0.0;
  std::optional<int64_t> steps_to_target;
  std::string stopped;            // "target", "slower" (than a better rate), "budget", "diverged", "collapsed"
  int64_t steps = 0;              // taken
  double train_seconds = 0.0;     // training steps only (evaluations not counted), to the stop
  double accuracy = 0.0;          // at the last evaluation
  std::optional<double> b_simple; // over the run's steps; none on 1 rank or when not resolved
};

// The fit of S = S_min · (1 + B_crit / B) to the reached points: a straight
// line in 1/B, S = S_min + (S_min · B_crit) · (1/B), least squares in steps
// (not in log steps, whose fit weighs the few-step points as much as the rest).
struct StepsModel {
  double s_min = 0.0, b_crit = 0.0;
  int points = 0;
};

inline std::optional<StepsModel> fit_steps_model(const std::vector<std::pair<int64_t, int64_t>>& batch_steps) {
  if (batch_steps.size() < 2) return std::nullopt;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [batch, steps] : batch_steps) {
    const double x = 1.0 / static_cast<double>(batch), y = static_cast<double>(steps);
    n += 1; sx += x; sy += y; sxx += x * x; sxy += x * y;
  }
  const double denominator = n * sxx - sx * sx;
  if (denominator <= 0) return std::nullopt;
  const double slope = (n * sxy - sx * sy) / denominator, intercept = (sy - slope * sx) / n;
  if (intercept <= 0 || slope < 0) return std::nullopt;  // no plateau in the data: nothing to fit
  return StepsModel{intercept, slope / intercept, static_cast<int>(n)};
}

// Trains one (batch, method, rate) until the target, the budget, divergence,
// or `give_up_after` steps.
inline RateTrial run_trial(int64_t global_batch, const Method& method, double lr, const SweepSetup& setup,
                           std::optional<int64_t> give_up_after, const workbook::FashionMnist& data,
                           workbook::Communicator& comm) {
  const int ranks = comm.size();
  const int64_t local_batch = global_batch / ranks;
  const int64_t micro_batch = std::min(setup.micro_batch, local_batch);
  torch::manual_seed(workbook::initial_weights_seed(setup.seed, comm.rank()));
  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(comm.device());
  ch03::broadcast_model(*model, comm, 0);
  Method at_rate = method;
  at_rate.base_lr = lr;
  std::unique_ptr<torch::optim::Optimizer> optimizer = make_optimizer(at_rate, *model, /*momentum_correction=*/false);

  // Through the aggregator: its observer sees each rank's own gradient, for the noise scale.
  GradientAggregator aggregator(*model, *optimizer, comm, local_batch / micro_batch);
  std::optional<ch06::NoiseScale> noise;
  torch::Tensor local_squared;
  if (ranks >= 2) {
    noise.emplace(local_batch, global_batch);
    aggregator.observe_local_gradients([&](workbook::Classifier& m) { local_squared = ch06::squared_gradient_norm(m); });
  }

  ch03::DistributedSampler sampler(data.train.size(), ranks, comm.rank(), /*shuffle=*/true, setup.seed);
  const int64_t steps_per_epoch = sampler.num_samples() / local_batch;
  const auto budget = static_cast<int64_t>(std::ceil(setup.max_epochs * static_cast<double>(steps_per_epoch)));
  RateTrial trial;
  trial.global_batch = global_batch;
  trial.method = method.name;
  trial.lr = lr;
  int64_t next_evaluation = 1;
  std::optional<int64_t> reached_at;  // the step of an evaluation at the target not yet confirmed
  torch::Tensor indices;
  workbook::Stopwatch clock(comm.device());
  while (trial.stopped.empty()) {
    const int64_t step = trial.steps;  // 0-based: the step about to be taken
    if (step % steps_per_epoch == 0) {
      sampler.set_epoch(step / steps_per_epoch + 1);
      indices = sampler.indices();
    }
    set_learning_rate(*optimizer, lr);
    const ch03::Batch batch = ch03::gather_batch(data.train.images, data.train.labels, indices,
                                                 (step % steps_per_epoch) * local_batch, local_batch);
    clock.start();
    for (const ch03::Batch& micro : split_batch(batch, micro_batch)) aggregator.add(micro);
    trial.train_seconds += clock.stop();
    if (noise) noise->add(local_squared, ch06::squared_gradient_norm(*model));
    ++trial.steps;
    if (trial.steps < next_evaluation && trial.steps < budget) continue;
    next_evaluation = std::max(next_evaluation + 1, static_cast<int64_t>(std::ceil(static_cast<double>(next_evaluation) * 1.1)));
    // Every rank's loss: the same verdict on every rank.
    torch::Tensor loss = aggregator.last_loss().detach().to(torch::kFloat64).reshape({1});
    comm.all_reduce(loss, workbook::ReduceOp::Sum);
    if (!std::isfinite(loss.item<double>())) {
      trial.stopped = "diverged";
      break;
    }
    trial.accuracy = ch03::evaluate_distributed(*model, data.test.images, data.test.labels, 1000, comm).accuracy();
    // Note: [twice at the target] One evaluation on 2,000 samples has a
    // standard error of 0.8 points near 0.85: a run that crosses the
    // target once by luck would count as there early. The target counts as
    // reached at the first of two evaluations in a row at or above it.
    if (trial.accuracy < setup.target) {
      reached_at.reset();
    } else if (!reached_at) {
      reached_at = trial.steps;
      if (trial.steps < budget) continue;  // the next evaluation confirms it
    }
    if (reached_at && trial.accuracy >= setup.target) {
      trial.stopped = "target";
      trial.steps_to_target = *reached_at;
    } else if (give_up_after && trial.steps >= *give_up_after) {
      trial.stopped = "slower";
    } else if (trial.steps >= budget) {
      trial.stopped = "budget";
    }
  }
  // A model at chance (10 classes) has collapsed, even if its loss stayed
  // finite: a rate too high, as much as one that diverged.
  if (trial.stopped != "target" && trial.stopped != "diverged" && trial.accuracy < 0.15) trial.stopped = "collapsed";
  if (noise) {
    const ch06::NoiseScaleEstimate e = noise->estimate(comm);
    if (e.resolved()) trial.b_simple = e.b_simple;
  }
  return trial;
}

// Fewer steps to the target is better; a run that never reached it is worse
// than any that did, and of two that did not, the one that ended at the
// higher accuracy is nearer (a rate so high that the model collapsed to
// chance is the worst of all, though its loss stayed finite).
inline bool better(const RateTrial& a, const RateTrial& b) {
  if (a.steps_to_target && b.steps_to_target) return *a.steps_to_target < *b.steps_to_target;
  if (a.steps_to_target || b.steps_to_target) return a.steps_to_target.has_value();
  return a.accuracy > b.accuracy && a.stopped != "diverged" && a.stopped != "collapsed";
}

// The rate search of one batch and method (Note [the rate search]); `report`
// is called after every run. Returns every run, the best first.
template <typename Report>
std::vector<RateTrial> tune_rate(int64_t global_batch, const Method& method, std::optional<RateTrial> previous_best,
                                 const SweepSetup& setup, const workbook::FashionMnist& data,
                                 workbook::Communicator& comm, Report&& report) {
  std::vector<RateTrial> trials;
  std::optional<int64_t> best_steps;
  // A larger batch needs no more steps than a smaller one, each with
  // its rate tuned: a run past twice the previous batch's count is not
  // going to be this batch's best (the factor 2 leaves room for the noise).
  const std::optional<int64_t> ceiling =
      previous_best && previous_best->steps_to_target ? std::optional<int64_t>(2 * *previous_best->steps_to_target)
                                                      : std::nullopt;
  auto run = [&](double lr) -> const RateTrial& {
    std::optional<int64_t> give_up_after = best_steps;
    if (ceiling && (!give_up_after || *ceiling < *give_up_after)) give_up_after = ceiling;
    trials.push_back(run_trial(global_batch, method, lr, setup, give_up_after, data, comm));
    report(trials.back());
    if (trials.back().steps_to_target && (!best_steps || *trials.back().steps_to_target < *best_steps))
      best_steps = trials.back().steps_to_target;
    return trials.back();
  };
  const bool from_previous = previous_best && previous_best->steps_to_target;
  const double scaled =
      from_previous
          ? previous_best->lr * std::pow(static_cast<double>(global_batch) / static_cast<double>(previous_best->global_batch),
                                         method.scaling_power)
          : method.base_lr * std::pow(static_cast<double>(global_batch) / kBaseBatch, method.scaling_power);
  RateTrial best = run(scaled);
  // Up while doubling helps, else down from the start. A start that
  // diverged or collapsed goes down at once.
  bool up = false;
  if (best.stopped != "diverged" && best.stopped != "collapsed") {
    const RateTrial doubled = run(2 * scaled);
    up = better(doubled, best);
    if (up) best = doubled;
  }
  const double factor = up ? 2.0 : 0.5;
  double lr = up ? 2 * scaled : scaled;
  while (static_cast<int>(trials.size()) < setup.max_trials) {
    lr *= factor;
    const RateTrial next = run(lr);
    if (!better(next, best)) break;  // past the best rate
    best = next;
  }
  std::stable_sort(trials.begin(), trials.end(), [](const RateTrial& a, const RateTrial& b) { return better(a, b); });
  return trials;
}

}  // namespace ch06
