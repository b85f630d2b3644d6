// A timing comparison measured in one run (tag [timing]: not in the default
// suite): the reference ring is within 2x of the MPI library's all-reduce at
// 4 MiB. The bandwidth targets are the bench's (workbook bench ch04).
#include "catch2_compat.hpp"

#include "mpi_test.hpp"
#include "ring.hpp"
#include "timing_compare.hpp"

TEST_CASE("ex4.3 the ring all-reduce is within 2x of MPI_Allreduce at 4 MiB", "[ex4.3][timing]") {
  workbook::CommunicatorOptions options = workbook::CommunicatorOptions::from_environment();
  options.check_collectives = false;  // time the collectives alone
  auto comm = workbook::make_communicator(workbook::Backend::Mpi, mpi_test::env(), options);
  if (comm->size() == 1) return;
  torch::Tensor buffer = torch::zeros({int64_t{1} << 20});  // 4 MiB of float32
  const double ratio = timing_compare::median_ratio(
      *comm, 7,
      [&] {
        for (int i = 0; i < 10; ++i) ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, *comm);
      },
      [&] {
        for (int i = 0; i < 10; ++i) comm->all_reduce(buffer, workbook::ReduceOp::Sum);
      });
  INFO("ring / MPI_Allreduce time at 4 MiB: " << ratio);
  REQUIRE(ratio < 2.0);
}
