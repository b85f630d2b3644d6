// Tests for ex4.3: the ring all-reduce on exact data, for the counts and
// world sizes that break rings written for the easy case, and its traffic.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "ring.hpp"
#include "ring_data.hpp"

TEST_CASE("ex4.3 ring_all_reduce sums exactly for any count and world size", "[ex4.3][np1][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64}) {
    for (int64_t count : ring_data::hard_counts(n)) {
      CAPTURE(n, count, c10::toString(dtype));
      torch::Tensor buffer = ring_data::rank_values(count, comm->rank(), dtype);
      const int64_t sent_before = comm->stats().elements_sent();
      ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, *comm);
      INFO("every element on every rank must be the sum over ranks");
      REQUIRE(mpi_test::all_ranks(torch::equal(buffer, ring_data::sum_over_ranks(count, n, dtype))));
      // 2 (n-1)/n of the buffer, within the rounding of two segments.
      const int64_t sent = comm->stats().elements_sent() - sent_before;
      const double ideal = 2.0 * (n - 1) / n * static_cast<double>(count);
      INFO("elements sent: " << sent << ", a ring sends 2(n-1)/n x count = " << ideal);
      REQUIRE(mpi_test::all_ranks(std::abs(static_cast<double>(sent) - ideal) < 2.0));
    }
  }
  REQUIRE(comm->stats().collectives() == 0);
}

TEST_CASE("ex4.3 ring_all_reduce averages, and agrees with the library's all-reduce", "[ex4.3][np3]") {
  auto comm = mpi_test::communicator();
  for (int64_t count : {int64_t{7}, int64_t{100003}}) {
    CAPTURE(count);
    torch::Tensor ring = ring_data::rank_values(count, comm->rank());
    torch::Tensor library = ring.clone();
    const int64_t collectives_before = comm->stats().collectives();
    ch04::ring_all_reduce(ring, workbook::ReduceOp::Average, *comm);
    INFO("the average must go round the ring too: ring_all_reduce called the library's collectives "
         << comm->stats().collectives() - collectives_before << " times");
    REQUIRE(comm->stats().collectives() == collectives_before);
    comm->all_reduce(library, workbook::ReduceOp::Average);
    INFO("average: the exact sum divided by the number of ranks (to 1e-6)");
    REQUIRE(mpi_test::all_ranks(torch::allclose(ring, ring_data::sum_over_ranks(count, comm->size()) / comm->size(),
                                                1e-6, 0.0)));
    REQUIRE(mpi_test::all_ranks(torch::allclose(ring, library, 1e-6, 0.0)));
  }
}

TEST_CASE("ex4.3 ring_all_reduce works on a 2-D gradient viewed flat, and twice in a row", "[ex4.3]") {
  auto comm = mpi_test::communicator();
  torch::Tensor weight = ring_data::rank_values(600 * 120, comm->rank()).view({600, 120});
  torch::Tensor flat = weight.view(-1);
  ch04::ring_all_reduce(flat, workbook::ReduceOp::Sum, *comm);
  ch04::ring_all_reduce(flat, workbook::ReduceOp::Sum, *comm);
  const int n = comm->size();
  REQUIRE(mpi_test::all_ranks(torch::equal(weight.view(-1), ring_data::sum_over_ranks(600 * 120, n) * n)));
}
