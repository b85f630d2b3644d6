// The Communicator with float16 and bfloat16 tensors (Chapter 9 sends
// gradients in 16 bits): moved unchanged, summed with every addition rounded
// to 16 bits (Note [16-bit sums over MPI]), and counted in bytes.
#include "catch2_compat.hpp"

#include "mpi_test.hpp"

TEST_CASE("16-bit tensors: broadcast, all-gather and exchange move them; all-reduce sums in 16 bits",
          "[communicator][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size(), rank = comm->rank();
  for (torch::ScalarType dtype : {torch::kFloat16, torch::kBFloat16}) {
    CAPTURE(c10::toString(dtype));
    // Small integers: exact in both 16-bit types, and so are their sums here.
    const torch::Tensor mine = (torch::arange(9, torch::kFloat32) + 10 * rank).to(dtype);
    torch::Tensor root_copy = mine.clone();
    comm->broadcast(root_copy, 0);
    REQUIRE(mpi_test::all_ranks(root_copy.scalar_type() == dtype &&
                                torch::equal(root_copy, torch::arange(9, torch::kFloat32).to(dtype))));
    const torch::Tensor gathered = comm->all_gather(mine);
    bool every_row = true;
    for (int r = 0; r < n; ++r) every_row = every_row && torch::equal(gathered[r], (torch::arange(9, torch::kFloat32) + 10 * r).to(dtype));
    REQUIRE(mpi_test::all_ranks(every_row));
    torch::Tensor received = torch::empty_like(mine);
    const int64_t bytes_before = comm->stats().bytes_sent();
    comm->exchange(mine, (rank + 1) % n, received, (rank + n - 1) % n);
    INFO("an exchange of 9 two-byte elements is counted as 18 bytes");
    REQUIRE(mpi_test::all_ranks(comm->stats().bytes_sent() - bytes_before == 18));
    REQUIRE(mpi_test::all_ranks(torch::equal(received, (torch::arange(9, torch::kFloat32) + 10 * ((rank + n - 1) % n)).to(dtype))));
    torch::Tensor summed = mine.clone();
    comm->all_reduce(summed, workbook::ReduceOp::Sum);
    torch::Tensor expected = torch::zeros({9});
    for (int r = 0; r < n; ++r) expected += torch::arange(9, torch::kFloat32) + 10 * r;
    REQUIRE(mpi_test::all_ranks(summed.scalar_type() == dtype && torch::equal(summed, expected.to(dtype))));
  }
}

TEST_CASE("a 16-bit all-reduce rounds every addition: bfloat16 1 + 2^-9 + 2^-9 stays 1", "[communicator]") {
  auto comm = mpi_test::communicator();
  // Rank 0 holds 1, the others 2^-9 each: each addition is under half of
  // bfloat16's ulp at 1 (2^-7), so a sum rounded at every step stays 1
  // (one rounded at the end would give 1 + (n-1)·2^-9, 1.0039 at 3 ranks).
  torch::Tensor value = torch::full({1}, comm->rank() == 0 ? 1.0f : 1.0f / 512, torch::kBFloat16);
  comm->all_reduce(value, workbook::ReduceOp::Sum);
  REQUIRE(mpi_test::all_ranks(value.item<float>() == 1.0f));
}
