// Tests for ex10.5: ZeRO's collectives and a pipeline's slots, by hand.
#include "catch2_compat.hpp"

#include "step_model.hpp"
#include "step_profiles.hpp"

using step_profiles::kLink;

TEST_CASE("ex10.5 ZeRO 1 and 2: a reduce-scatter and an all-gather of every byte; 1/p of the optimizer", "[ex10.5]") {
  for (int stage : {1, 2}) {
    const ch10::StepPrediction p = ch10::predict_zero(stage, step_profiles::uneven(), kLink, 4);
    // Each collective: 3 steps (0.3 ms) and 3/4 of 7 MB (5.25 ms).
    CAPTURE(stage, p.compute_s, p.communication_s);
    REQUIRE(p.compute_s == Approx(3e-3 + 4.5e-3 + 2e-3 / 4).epsilon(1e-9));
    REQUIRE(p.communication_s == Approx(2 * (0.3e-3 + 5.25e-3)).epsilon(1e-9));
    REQUIRE(p.exposed_s == Approx(p.communication_s).epsilon(1e-12));
  }
}

TEST_CASE("ex10.5 ZeRO 3: per layer with parameters, two all-gathers and a reduce-scatter, each its own α's",
          "[ex10.5]") {
  const ch10::StepPrediction p = ch10::predict_zero(3, step_profiles::uneven(), kLink, 4);
  // Three layers with parameters, three collectives each, 3 steps of α
  // each: 27 α = 2.7 ms; bytes: 3 × 3/4 × 7 MB = 15.75 ms.
  CAPTURE(p.communication_s);
  REQUIRE(p.communication_s == Approx(2.7e-3 + 15.75e-3).epsilon(1e-9));
  REQUIRE(p.compute_s == Approx(3e-3 + 4.5e-3 + 0.5e-3).epsilon(1e-9));
}

TEST_CASE("ex10.5 a pipeline: each link one more stage; on a free link the idle share is the bubble", "[ex10.5]") {
  // 2 stages, 4 micro-batches: a micro-batch's forward on one stage is
  // 3 ms / 8 = 0.375 ms, its backward 4.5 ms / 8 = 0.5625 ms; Adam: half of 2 ms.
  // A link faster than a stage (100 kB: 0.2 ms) costs only the first
  // micro-batch's hop forward and the last's back: 5 slots of 0.9375 ms + 2 × 0.2 ms.
  const ch10::StepPrediction fast = ch10::predict_pipeline(step_profiles::uneven(), kLink, 2, 4, 100000);
  CAPTURE(fast.compute_s, fast.communication_s, fast.exposed_s);
  REQUIRE(fast.total_s() == Approx(5 * 0.9375e-3 + 2 * 0.2e-3 + 1e-3).epsilon(1e-9));
  REQUIRE(fast.compute_s == Approx(4 * 0.9375e-3 + 1e-3).epsilon(1e-9));
  REQUIRE(fast.communication_s == Approx(8 * 0.2e-3).epsilon(1e-9));  // 4 activations out, 4 gradients in
  // A link slower than a stage (1 MB: 1.1 ms) is the pipeline's slowest
  // stage: forwards 2 × 0.375 + 1.1 + 3 × 1.1 ms, backwards 2 × 0.5625 + 1.1 + 3 × 1.1 ms.
  const ch10::StepPrediction slow = ch10::predict_pipeline(step_profiles::uneven(), kLink, 2, 4, 1000000);
  CAPTURE(slow.compute_s, slow.communication_s, slow.exposed_s);
  REQUIRE(slow.total_s() == Approx(0.75e-3 + 4.4e-3 + 1.125e-3 + 4.4e-3 + 1e-3).epsilon(1e-9));
  REQUIRE(slow.compute_s == Approx(4 * 0.9375e-3 + 1e-3).epsilon(1e-9));
  for (int stages : {2, 4}) {
    for (int m : {1, 4, 8}) {
      const ch10::StepPrediction free = ch10::predict_pipeline(step_profiles::uneven(), ch10::Link{}, stages, m, 1000000);
      const double adam = 2e-3 / stages;
      const double idle = (free.total_s() - free.compute_s) / (free.total_s() - adam);
      CAPTURE(stages, m, idle);
      REQUIRE(idle == Approx(ch10::bubble_fraction(stages, m)).epsilon(1e-9));
    }
  }
  const ch10::StepPrediction one = ch10::predict_pipeline(step_profiles::uneven(), kLink, 1, 4, 1000000);
  REQUIRE(one.total_s() == Approx(7.5e-3 + 2e-3).epsilon(1e-9));  // one stage: the whole model, no messages
}

TEST_CASE("ex10.5 tensor parallel: 1/T of the compute; per pair, an all-reduce forward and one backward",
          "[ex10.5]") {
  // 4 ranks, 2 pairs, 400,000 bytes of activation: each ring all-reduce is
  // 6 steps (0.6 ms) and 2 × 3/4 of 400 kB (0.6 ms); four of them.
  const ch10::StepPrediction p = ch10::predict_tensor_parallel(step_profiles::uneven(), kLink, 4, 2, 400000);
  CAPTURE(p.compute_s, p.communication_s, p.exposed_s);
  REQUIRE(p.compute_s == Approx((3e-3 + 4.5e-3 + 2e-3) / 4).epsilon(1e-9));
  REQUIRE(p.communication_s == Approx(4 * (0.6e-3 + 0.6e-3)).epsilon(1e-9));
  REQUIRE(p.exposed_s == Approx(p.communication_s).epsilon(1e-12));
  // The activations do not grow with the model's parameters, nor shrink with
  // the ranks: twice the pairs, twice the messages; one rank, no messages.
  const ch10::StepPrediction twice = ch10::predict_tensor_parallel(step_profiles::uneven(), kLink, 4, 4, 400000);
  REQUIRE(twice.communication_s == Approx(2 * p.communication_s).epsilon(1e-9));
  const ch10::StepPrediction alone = ch10::predict_tensor_parallel(step_profiles::uneven(), kLink, 1, 2, 400000);
  REQUIRE(alone.total_s() == Approx(9.5e-3).epsilon(1e-9));
}
