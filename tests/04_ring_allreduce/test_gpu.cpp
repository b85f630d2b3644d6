// The GPU path ([gpu]: run where CUDA is, skipped with a warning elsewhere):
// the reduction kernel, and the ring over NCCL at world size 1.
#include "catch2_compat.hpp"

#include "gpu_tests.hpp"
#include "mpi_test.hpp"
#include "ring.hpp"
#include "ring_data.hpp"
#include "workbook/add_into.hpp"

TEST_CASE("add_into on a GPU equals the CPU's sum, float32 and float64", "[gpu]") {
  if (!gpu_tests::have_gpu()) return;
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000003}, int64_t{5} << 20}) {
      const torch::Tensor a = ring_data::rank_values(count, 1, dtype), b = ring_data::rank_values(count, 2, dtype);
      torch::Tensor on_gpu = a.to(torch::kCUDA);
      workbook::add_into(on_gpu, b.to(torch::kCUDA));
      REQUIRE(torch::equal(on_gpu.cpu(), a + b));
    }
  }
}

TEST_CASE("ex4.3 ring_all_reduce over NCCL", "[ex4.3][gpu]") {
  if (!gpu_tests::have_gpu()) return;
  auto comm = workbook::make_communicator(workbook::Backend::Nccl, mpi_test::env(),
                                          workbook::CommunicatorOptions::from_environment());
  for (int64_t count : ring_data::hard_counts(comm->size())) {
    torch::Tensor buffer = ring_data::rank_values(count, comm->rank()).to(comm->device());
    ch04::ring_all_reduce(buffer, workbook::ReduceOp::Sum, *comm);
    REQUIRE(torch::equal(buffer.cpu(), ring_data::sum_over_ranks(count, comm->size())));
  }
}
