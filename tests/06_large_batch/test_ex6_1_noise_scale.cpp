// Tests for ex6.1: the gradient noise scale, from squared norms whose
// expectations are known, and from gradients whose noise is known.
#include "catch2_compat.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <cmath>
#include <utility>

#include "host_reads.hpp"
#include "mpi_test.hpp"
#include "noise_scale.hpp"
#include "workbook/errors.hpp"

namespace {

struct Case {
  double small_squared, big_squared;
  int64_t small_batch, big_batch;
  double gradient_squared, trace_sigma;  // the truth the two expected squared norms come from
};

double relative_error(double value, double truth) { return std::abs(value - truth) / std::abs(truth); }

}  // namespace

TEST_CASE("ex6.1 noise_scale_estimate is exact when its inputs are the expected squared norms", "[ex6.1]") {
  for (const Case& c : {Case{11.0, 3.5, 10, 40, 1.0, 100.0}, Case{5.0, 3.0, 16, 48, 2.0, 48.0},
                        Case{3.5, 2.0, 1, 2, 0.5, 3.0}, Case{0.75, 0.3125, 32, 256, 0.25, 16.0}}) {
    CAPTURE(c.small_squared, c.big_squared, c.small_batch, c.big_batch);
    const ch06::NoiseScaleEstimate e =
        ch06::noise_scale_estimate(c.small_squared, c.big_squared, c.small_batch, c.big_batch);
    INFO("got |G|² " << e.gradient_squared << ", tr Σ " << e.trace_sigma << ", B_simple " << e.b_simple
                     << "; these expected squared norms come from |G|² " << c.gradient_squared << " and tr Σ "
                     << c.trace_sigma);
    CHECK(e.gradient_squared == Approx(c.gradient_squared).epsilon(1e-12));
    CHECK(e.trace_sigma == Approx(c.trace_sigma).epsilon(1e-12));
    CHECK(e.b_simple == Approx(c.trace_sigma / c.gradient_squared).epsilon(1e-12));
    CHECK(e.resolved());
  }
  INFO("norms that no |G|² > 0 explains (the big batch's too small for the small one's): not resolved");
  CHECK_FALSE(ch06::noise_scale_estimate(11.0, 2.7, 10, 40).resolved());
}

TEST_CASE("ex6.1 noise_scale_estimate refuses batch sizes it cannot tell apart", "[ex6.1]") {
  for (const auto& [small, big] : {std::pair<int64_t, int64_t>{64, 64}, {0, 64}, {64, 32}}) {
    CAPTURE(small, big);
    INFO("the estimate needs 0 < small_batch < big_batch");
    CHECK_THROWS_AS(ch06::noise_scale_estimate(2.0, 1.0, small, big), workbook::UserError);
  }
}

TEST_CASE("ex6.1 NoiseScale recovers |G|², tr Σ and B_simple from gradients with known noise", "[ex6.1][np3]") {
  // Per-sample gradients: G plus Gaussian noise in 50 dimensions, |G|² = 0.5
  // and tr Σ = 64, so B_simple = 128, far above the global batch. Every rank
  // draws every rank's samples from the same seed and keeps its own 8: its
  // mean is its gradient before the all-reduce, the mean of all ranks' the
  // gradient after. One step's squared norms are too noisy to say much; 3,000
  // steps pin the estimates to a few percent.
  auto comm = mpi_test::communicator();
  const int64_t ranks = comm->size(), rank = comm->rank(), per_rank = 8, dims = 50;
  const double gradient_squared = 0.5, trace_sigma = 64.0;
  const torch::Tensor truth = torch::full({dims}, std::sqrt(gradient_squared / dims), torch::kFloat64);
  const double deviation = std::sqrt(trace_sigma / dims);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(2018);
  ch06::NoiseScale noise(per_rank, ranks * per_rank);
  auto run = [&](int64_t steps) {
    for (int64_t step = 0; step < steps; ++step) {
      const torch::Tensor samples =
          truth + deviation * at::normal(0.0, 1.0, {ranks, per_rank, dims}, generator, torch::kFloat64);
      const torch::Tensor rank_means = samples.mean(1);
      noise.add(rank_means[rank].square().sum(), rank_means.mean(0).square().sum());
    }
    return noise.estimate(*comm);
  };
  const ch06::NoiseScaleEstimate e = run(3000);
  INFO("over 3000 steps at " << ranks << " ranks of " << per_rank << " samples: |G|² " << e.gradient_squared
                             << " (truth 0.5), tr Σ " << e.trace_sigma << " (64), B_simple " << e.b_simple
                             << " (128), steps " << e.steps);
  REQUIRE(mpi_test::all_ranks(e.steps == 3000));
  REQUIRE(mpi_test::all_ranks(relative_error(e.trace_sigma, trace_sigma) < 0.03));
  REQUIRE(mpi_test::all_ranks(relative_error(e.gradient_squared, gradient_squared) < 0.2 &&
                              relative_error(e.b_simple, trace_sigma / gradient_squared) < 0.2));
  const torch::Tensor mine = torch::tensor({e.gradient_squared, e.trace_sigma}, torch::kFloat64);
  torch::Tensor root_s = mine.clone();
  comm->broadcast(root_s, 0);
  INFO("the estimate differs between ranks: every rank must get the same");
  REQUIRE(mpi_test::all_ranks(torch::equal(mine, root_s)));

  const ch06::NoiseScaleEstimate again = run(2000);
  INFO("a second estimate, after 2000 more steps: steps " << again.steps << ", tr Σ " << again.trace_sigma);
  REQUIRE(mpi_test::all_ranks(again.steps == 2000 && relative_error(again.trace_sigma, trace_sigma) < 0.03));
  INFO("estimate() with no step added since the last must refuse");
  bool refused = false;
  try {
    noise.estimate(*comm);
  } catch (const workbook::UserError&) {
    refused = true;
  }
  REQUIRE(mpi_test::all_ranks(refused));
}

TEST_CASE("ex6.1 NoiseScale::add reads nothing back to the host", "[ex6.1]") {
  auto comm = mpi_test::communicator();
  ch06::NoiseScale noise(4, 4 * comm->size());
  auto reads_of = [&](int64_t steps) {
    host_reads::Counter counter;
    for (int64_t step = 0; step < steps; ++step)
      noise.add(torch::tensor(3.0 + step, torch::kFloat64), torch::tensor(2.0, torch::kFloat64));
    return counter.reads();
  };
  const int64_t reads_5 = reads_of(5), reads_50 = reads_of(50);
  INFO("5 steps read a value on the host " << reads_5 << " times, 50 steps " << reads_50 << " times");
  REQUIRE(mpi_test::all_ranks(reads_50 == reads_5));
  noise.estimate(*comm);
}
