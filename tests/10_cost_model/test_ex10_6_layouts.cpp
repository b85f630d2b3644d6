// Tests for ex10.6: ZeRO's stages, a pipeline of equal stages and tensor
// parallel, predicted on step_profiles::uneven(). The recorded numbers come
// from the reference solution; any correct implementation gives them to
// within 1e-9 (relative). The rest are properties every correct prediction has.
#include "catch2_compat.hpp"

#include <cmath>

#include "simulator.hpp"
#include "step_model.hpp"
#include "step_profiles.hpp"

using step_profiles::kLink;

namespace {

const ch10::Link kUnitAlpha{1.0, 0.0};  // a step's communication_s counts its α's
const ch10::Link kUnitBeta{0.0, 1.0};   // ... and here the bytes on its path

// A different method than a closed form: GPipe's step run on the simulator
// (every forward, then every backward; each stage sends without waiting),
// each stage computing its 1/p of a micro-batch's 1/m of the profile, and
// its 1/p of the optimizer at the end. Returns the slowest stage's clock.
double simulated_gpipe(const ch10::Profile& profile, const ch10::Link& link, int stages, int m, int64_t bytes) {
  const double forward_s = profile.forward_s() / (stages * m), backward_s = profile.backward_s() / (stages * m);
  const ch10::SimulatedRun run = ch10::simulate(stages, link, [&](workbook::Communicator& comm) {
    const int stage = comm.rank(), last = stages - 1;
    torch::Tensor message = torch::zeros({bytes}, torch::kUInt8);
    for (int i = 0; i < m; ++i) {
      if (stage > 0) comm.recv(message, stage - 1);
      ch10::compute_for(comm, forward_s);
      if (stage < last) ch10::send_without_waiting(comm, message, stage + 1);
    }
    for (int i = 0; i < m; ++i) {
      if (stage < last) comm.recv(message, stage + 1);
      ch10::compute_for(comm, backward_s);
      if (stage > 0) ch10::send_without_waiting(comm, message, stage - 1);
    }
    ch10::compute_for(comm, profile.optimizer_s / stages);
  });
  return run.seconds();
}

}  // namespace

TEST_CASE("ex10.6 ZeRO 1, 2 and 3: each rank's compute, communication and its α's and bytes, at p = 2, 3, 4, 6",
          "[ex10.6]") {
  struct Recorded {
    int stage, p;
    double compute_s, communication_s, alphas, bytes;
  };
  const Recorded recorded[] = {
      {1, 2, 0.0085, 0.0072, 2, 7000000.0},
      {3, 2, 0.0085, 0.0114, 9, 10500000.0},
      {1, 3, 0.008166666666666668, 0.009733333333333332, 4, 9333333.333333332},
      {3, 3, 0.008166666666666668, 0.0158, 18, 14000000.0},
      {1, 4, 0.008, 0.0111, 6, 10500000.0},
      {3, 4, 0.008, 0.01845, 27, 15750000.0},
      {1, 6, 0.007833333333333335, 0.01266666666666667, 10, 11666666.666666668},
      {3, 6, 0.007833333333333335, 0.022, 45, 17500000.0},
  };
  for (const Recorded& e : recorded) {
    const ch10::StepPrediction p = ch10::predict_zero(e.stage, step_profiles::uneven(), kLink, e.p);
    const ch10::StepPrediction alphas = ch10::predict_zero(e.stage, step_profiles::uneven(), kUnitAlpha, e.p);
    const ch10::StepPrediction bytes = ch10::predict_zero(e.stage, step_profiles::uneven(), kUnitBeta, e.p);
    CAPTURE(e.stage, e.p, p.compute_s, p.communication_s, p.exposed_s, alphas.communication_s, bytes.communication_s);
    REQUIRE(p.compute_s == Approx(e.compute_s).epsilon(1e-9));
    REQUIRE(p.communication_s == Approx(e.communication_s).epsilon(1e-9));
    REQUIRE(alphas.communication_s == Approx(e.alphas).epsilon(1e-9));
    REQUIRE(bytes.communication_s == Approx(e.bytes).epsilon(1e-9));
    INFO("nothing overlaps ZeRO's collectives here: the step waits for all of them");
    REQUIRE(p.exposed_s == Approx(p.communication_s).epsilon(1e-12));
    if (e.stage == 1) {
      const ch10::StepPrediction two = ch10::predict_zero(2, step_profiles::uneven(), kLink, e.p);
      INFO("stages 1 and 2 move the same bytes in the same collectives");
      REQUIRE(two.total_s() == Approx(p.total_s()).epsilon(1e-12));
      REQUIRE(two.communication_s == Approx(p.communication_s).epsilon(1e-12));
    }
  }
}

TEST_CASE("ex10.6 a pipeline: recorded steps on fast and slow links, at 2, 3 and 4 stages", "[ex10.6]") {
  struct Recorded {
    int stages, m;
    int64_t boundary_bytes;
    double compute_s, communication_s, total_s;
  };
  const Recorded recorded[] = {
      {2, 4, 100000, 0.004750000000000001, 0.0016, 0.0060875},
      {2, 4, 1000000, 0.004750000000000001, 0.0088, 0.011675000000000001},
      {2, 1, 100000, 0.004750000000000001, 0.0004, 0.008900000000000002},
      {3, 3, 50000, 0.003166666666666666, 0.0009000000000000001, 0.005433333333333333},
      {3, 3, 300000, 0.003166666666666666, 0.0024000000000000002, 0.006566666666666667},
      {4, 5, 200000, 0.002375, 0.003, 0.006200000000000001},
      {4, 2, 3000000, 0.0023750000000000004, 0.0124, 0.02905},
  };
  for (const Recorded& e : recorded) {
    const ch10::StepPrediction p = ch10::predict_pipeline(step_profiles::uneven(), kLink, e.stages, e.m, e.boundary_bytes);
    CAPTURE(e.stages, e.m, e.boundary_bytes, p.compute_s, p.communication_s, p.exposed_s, p.total_s());
    REQUIRE(p.compute_s == Approx(e.compute_s).epsilon(1e-9));
    REQUIRE(p.communication_s == Approx(e.communication_s).epsilon(1e-9));
    REQUIRE(p.total_s() == Approx(e.total_s).epsilon(1e-9));
  }
}

TEST_CASE("ex10.6 a pipeline's step is the timeline the simulator runs: 1 to 4 stages, free, fast and slow links",
          "[ex10.6]") {
  // 1 ns per byte and 0.1 ms per message: 100 kB cost less than a stage's
  // forward, 3 MB more than its backward.
  for (const ch10::Link& link : {ch10::Link{}, kLink}) {
    for (int stages = 1; stages <= 4; ++stages) {
      for (int m : {1, 2, 4, 8}) {
        for (int64_t bytes : {int64_t{100000}, int64_t{3000000}}) {
          const ch10::StepPrediction p = ch10::predict_pipeline(step_profiles::uneven(), link, stages, m, bytes);
          const double simulated = simulated_gpipe(step_profiles::uneven(), link, stages, m, bytes);
          CAPTURE(link.alpha_s, link.beta_s_per_byte, stages, m, bytes, p.compute_s, p.exposed_s, p.total_s(),
                  simulated);
          INFO("the predicted step (compute_s + exposed_s) is not the step GPipe takes on the simulator");
          REQUIRE(p.total_s() == Approx(simulated).epsilon(1e-9));
        }
      }
    }
  }
}

TEST_CASE("ex10.6 a pipeline: one stage sends nothing; on a free link the idle share is the bubble; a slower link "
          "never makes a faster step",
          "[ex10.6]") {
  const ch10::StepPrediction one = ch10::predict_pipeline(step_profiles::uneven(), kLink, 1, 4, 1000000);
  CAPTURE(one.compute_s, one.communication_s, one.exposed_s);
  REQUIRE(one.communication_s == 0.0);
  REQUIRE(one.total_s() == Approx(7.5e-3 + 2e-3).epsilon(1e-9));  // the whole model and its optimizer
  for (int stages : {2, 3, 4}) {
    for (int m : {1, 3, 4, 8}) {
      const ch10::StepPrediction free =
          ch10::predict_pipeline(step_profiles::uneven(), ch10::Link{}, stages, m, 1000000);
      const double adam = 2e-3 / stages;
      const double idle = (free.total_s() - free.compute_s) / (free.total_s() - adam);
      CAPTURE(stages, m, idle, free.compute_s, free.total_s());
      REQUIRE(idle == Approx(ch10::bubble_fraction(stages, m)).epsilon(1e-9));
      double previous_s = free.total_s();
      for (int64_t bytes : {1000, 100000, 300000, 1000000, 3000000}) {
        const ch10::StepPrediction p = ch10::predict_pipeline(step_profiles::uneven(), kLink, stages, m, bytes);
        CAPTURE(bytes, p.compute_s, p.total_s(), previous_s);
        REQUIRE(p.compute_s == Approx(free.compute_s).epsilon(1e-12));  // the link does not change the compute
        REQUIRE(p.total_s() >= previous_s);
        previous_s = p.total_s();
      }
    }
  }
}

TEST_CASE("ex10.6 tensor parallel: each rank's compute and its all-reduces' time, α's and bytes, at T = 2, 3, 4, 6",
          "[ex10.6]") {
  struct Recorded {
    int ranks, pairs;
    int64_t activation_bytes;
    double compute_s, communication_s, alphas, bytes;
  };
  const Recorded recorded[] = {
      {4, 2, 400000, 0.0023750000000000004, 0.0048000000000000004, 24, 2400000.0},
      {3, 2, 300000, 0.003166666666666667, 0.0032, 16, 1600000.0},
      {2, 5, 1000000, 0.004750000000000001, 0.012, 20, 10000000.0},
      {6, 1, 600000, 0.0015833333333333335, 0.004, 20, 2000000.0},
  };
  for (const Recorded& e : recorded) {
    const auto predict = [&](const ch10::Link& link) {
      return ch10::predict_tensor_parallel(step_profiles::uneven(), link, e.ranks, e.pairs, e.activation_bytes);
    };
    const ch10::StepPrediction p = predict(kLink);
    CAPTURE(e.ranks, e.pairs, e.activation_bytes, p.compute_s, p.communication_s, p.exposed_s);
    REQUIRE(p.compute_s == Approx(e.compute_s).epsilon(1e-9));
    REQUIRE(p.communication_s == Approx(e.communication_s).epsilon(1e-9));
    REQUIRE(predict(kUnitAlpha).communication_s == Approx(e.alphas).epsilon(1e-9));
    REQUIRE(predict(kUnitBeta).communication_s == Approx(e.bytes).epsilon(1e-9));
    INFO("the next layer needs the all-reduces' sums: nothing overlaps them");
    REQUIRE(p.exposed_s == Approx(p.communication_s).epsilon(1e-12));
  }
  // The activations do not grow with the model's parameters, nor shrink with
  // the ranks: twice the pairs, twice the messages; one rank, no messages.
  const ch10::StepPrediction p = ch10::predict_tensor_parallel(step_profiles::uneven(), kLink, 4, 2, 400000);
  const ch10::StepPrediction twice = ch10::predict_tensor_parallel(step_profiles::uneven(), kLink, 4, 4, 400000);
  REQUIRE(twice.communication_s == Approx(2 * p.communication_s).epsilon(1e-9));
  const ch10::StepPrediction alone = ch10::predict_tensor_parallel(step_profiles::uneven(), kLink, 1, 2, 400000);
  REQUIRE(alone.communication_s == 0.0);
  REQUIRE(alone.total_s() == Approx(9.5e-3).epsilon(1e-9));
}
