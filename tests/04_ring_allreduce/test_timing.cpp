// A timing comparison measured in one run (tag [timing]: not in the default
// suite): the reference ring is within 2x of the MPI library's all-reduce at
// 4 MiB. The bandwidth targets are the bench's (workbook bench ch04).
#include <catch2/catch.hpp>

#include "mpi_test.hpp"
#include "ring.hpp"
#include "workbook/statistics.hpp"
#include "workbook/timing.hpp"

TEST_CASE("ex4.3 the ring all-reduce is within 2x of MPI_Allreduce at 4 MiB", "[ex4.3][timing]") {
  workbook::CommunicatorOptions options = workbook::CommunicatorOptions::from_environment();
  options.check_collectives = false;  // time the collectives alone
  auto comm = workbook::make_communicator(workbook::Backend::Mpi, mpi_test::env(), options);
  if (comm->size() == 1) return;
  torch::Tensor buffer = torch::zeros({int64_t{1} << 20});  // 4 MiB of float32
  auto time_it = [&](bool ring) {
    comm->barrier();
    const double start = workbook::now_seconds();
    for (int i = 0; i < 10; ++i) {
      if (ring) ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, *comm);
      else comm->all_reduce(buffer, workbook::ReduceOp::Sum);
    }
    comm->barrier();
    return workbook::now_seconds() - start;
  };
  time_it(true);
  time_it(false);
  std::vector<double> ring, library;
  for (int round = 0; round < 7; ++round) {  // interleaved, medians
    ring.push_back(time_it(true));
    library.push_back(time_it(false));
  }
  // Decide on rank 0's clock, the same verdict everywhere.
  torch::Tensor ratio = torch::full({1}, workbook::median(ring) / workbook::median(library), torch::kFloat64);
  comm->broadcast(ratio, 0);
  INFO("ring / MPI_Allreduce time at 4 MiB: " << ratio.item<double>());
  REQUIRE(ratio.item<double>() < 2.0);
}
