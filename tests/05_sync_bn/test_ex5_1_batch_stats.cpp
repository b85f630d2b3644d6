// Tests for ex5.1: the global batch's per-channel mean and variance, from
// every rank's part of it, in one collective.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "sync_bn.hpp"
#include "sync_bn_data.hpp"
#include "workbook/errors.hpp"

using sync_bn_data::relative_error;

TEST_CASE("ex5.1 global_batch_stats equals the statistics of the concatenated batch", "[ex5.1][np3]") {
  auto comm = mpi_test::communicator();
  const int rank = comm->rank();
  for (const auto& split : sync_bn_data::splits(comm->size())) {
    CAPTURE(split.name);
    const torch::Tensor global = sync_bn_data::global_batch(split.total(), 4, 51);
    const torch::Tensor mine = global.narrow(0, split.offset(rank), split.counts[rank]);
    const int64_t calls_before = comm->stats().collectives();
    const ch05::BatchStats stats = ch05::global_batch_stats(mine, *comm);
    INFO("exactly one collective: all the sums (or all the per-rank statistics) travel together");
    REQUIRE(mpi_test::all_ranks(comm->stats().collectives() - calls_before == 1));
    INFO("count: values per channel over every rank, " << split.total() * 6);
    REQUIRE(mpi_test::all_ranks(stats.count == split.total() * 6));
    const torch::Tensor x = global.to(torch::kFloat64);
    INFO("mean and biased variance per channel of the whole batch (relative error <= 1e-6)");
    REQUIRE(mpi_test::all_ranks(stats.mean.sizes() == torch::IntArrayRef{4} &&
                                relative_error(stats.mean, x.mean({0, 2, 3})) <= 1e-6));
    REQUIRE(mpi_test::all_ranks(stats.var.sizes() == torch::IntArrayRef{4} &&
                                relative_error(stats.var, x.var({0, 2, 3}, /*unbiased=*/false)) <= 1e-6));
  }
}

TEST_CASE("ex5.1 the variance stays accurate when the mean is large against the spread", "[ex5.1]") {
  auto comm = mpi_test::communicator();
  // Values near 1000 with a spread of 1: Σx²/n − mean² in float32 is off by
  // several percent here (float32 keeps 7 digits of a 10⁶); a centered
  // computation in float32, or sums in float64, stay within 1e-4.
  const int64_t per_rank = 40, total = per_rank * comm->size();
  torch::manual_seed(52);
  const torch::Tensor global = torch::randn({total, 2, 3, 2}) + 1000.0;
  const ch05::BatchStats stats = ch05::global_batch_stats(global.narrow(0, per_rank * comm->rank(), per_rank), *comm);
  const torch::Tensor expected = global.to(torch::kFloat64).var({0, 2, 3}, /*unbiased=*/false);
  INFO("variance " << stats.var << " expected " << expected);
  REQUIRE(mpi_test::all_ranks(relative_error(stats.var, expected) <= 1e-4));
}

TEST_CASE("ex5.1 a global batch of one value per channel is a clear error on every rank", "[ex5.1]") {
  auto comm = mpi_test::communicator();
  // Rank 0 holds one 1x1 image, the others none: one value per channel, no variance.
  const torch::Tensor mine = torch::ones({comm->rank() == 0 ? 1 : 0, 3, 1, 1});
  bool threw = false;
  try {
    ch05::global_batch_stats(mine, *comm);
  } catch (const workbook::UserError&) {
    threw = true;
  }
  INFO("every rank must throw workbook::UserError (WB_CHECK): BatchNorm needs more than one value per channel");
  REQUIRE(mpi_test::all_ranks(threw));
}
