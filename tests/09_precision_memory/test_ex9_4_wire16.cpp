// Tests for ex9.4: the average with 16 bits on the wire. Exact data (small
// integers, multiples of the world size, exact in 16 bits at every partial
// sum) make the mean exact; the bytes are counted by the Communicator and
// compared with Chapter 4's float32 ring on the same buffer.
#include "catch2_compat.hpp"

#include <limits>

#include "mpi_test.hpp"
#include "ring.hpp"
#include "wire16.hpp"

namespace {

// Rank r's values: (r + 1) · n · k for k = -20..20 repeating: divided by n,
// integers of at most 60 in magnitude, whose sums over 3 ranks stay within
// 120: exact in bfloat16 (8 bits) and float16 (11 bits).
torch::Tensor exact_gradient(int rank, int ranks, int64_t count) {
  return ((torch::arange(count, torch::kFloat32).remainder(41) - 20) * static_cast<float>((rank + 1) * ranks));
}

torch::Tensor exact_mean(int ranks, int64_t count) {
  torch::Tensor sum = torch::zeros({count});
  for (int r = 0; r < ranks; ++r) sum += exact_gradient(r, ranks, count);
  return sum / ranks;
}

}  // namespace

TEST_CASE("ex9.4 the average with 16 bits on the wire: exact on exact data, half the float32 ring's bytes",
          "[ex9.4][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  for (torch::ScalarType wire : {torch::kBFloat16, torch::kFloat16}) {
    for (int64_t count : {int64_t{1001}, int64_t{2}, int64_t{40000}}) {
      CAPTURE(c10::toString(wire), count);
      // What Chapter 4's float32 ring sends for the same buffer.
      torch::Tensor wide = exact_gradient(comm->rank(), n, count);
      const int64_t float32_before = comm->stats().bytes_sent();
      ch04::ring_all_reduce(wide, workbook::ReduceOp::Average, *comm);
      const int64_t float32_bytes = comm->stats().bytes_sent() - float32_before;

      torch::Tensor flat = exact_gradient(comm->rank(), n, count);
      const int64_t before = comm->stats().bytes_sent();
      ch09::average_in_16_bits(flat, wire, *comm);
      const int64_t sent = comm->stats().bytes_sent() - before;
      INFO("flat becomes the mean over the ranks, float32, exactly (the data are exact in 16 bits)");
      REQUIRE(mpi_test::all_ranks(flat.scalar_type() == torch::kFloat32 && torch::equal(flat, exact_mean(n, count))));
      INFO("bytes sent by this rank: " << sent << ", by the float32 ring on the same buffer: " << float32_bytes
                                       << ": the ring must carry the 16-bit copy, half of it");
      REQUIRE(mpi_test::all_ranks(2 * sent == float32_bytes));
      REQUIRE(mpi_test::all_ranks(sent > 0));
    }
  }
}

TEST_CASE("ex9.4 float16: a mean in range does not overflow, whatever the ranks' values",
          "[ex9.4][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  // Every rank's first four elements are 40000, -40000, 60000 and 1
  // (float16's largest is 65504): the mean is the same, in range; the sum of
  // two is not. The last is 100000 on rank 0 and 0 elsewhere: its mean is in
  // range, but rounded to float16 before it is divided it is inf already.
  torch::Tensor flat = torch::tensor({40000.0f, -40000.0f, 60000.0f, 1.0f, comm->rank() == 0 ? 100000.0f : 0.0f});
  const torch::Tensor mean = torch::tensor({40000.0f, -40000.0f, 60000.0f, 1.0f, 100000.0f / n});
  ch09::average_in_16_bits(flat, torch::kFloat16, *comm);
  INFO("result " << flat << ": finite and within 0.1% of the mean " << mean << ". Summing " << n
                 << " × 40000 in float16 before dividing overflows to inf, and so does rounding 100000 to float16 "
                 << "before dividing it");
  REQUIRE(mpi_test::all_ranks(torch::isfinite(flat).all().item<bool>()));
  REQUIRE(mpi_test::all_ranks(((flat - mean).abs() <= mean.abs() * 1e-3 + 1e-3).all().item<bool>()));
}

TEST_CASE("ex9.4 random gradients: the mean within 16-bit rounding of the float64 mean", "[ex9.4]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  auto gradient_of = [](int rank) {
    torch::manual_seed(100 + rank);
    return torch::randn({5000});
  };
  torch::Tensor mean = torch::zeros({5000}, torch::kFloat64);
  for (int r = 0; r < n; ++r) mean += gradient_of(r).to(torch::kFloat64) / n;
  for (torch::ScalarType wire : {torch::kBFloat16, torch::kFloat16}) {
    CAPTURE(c10::toString(wire));
    torch::Tensor flat = gradient_of(comm->rank());
    ch09::average_in_16_bits(flat, wire, *comm);
    // Each share rounded once, each of n-1 additions rounded once (a partial sum
    // is at most n shares): within (n + n·n) half-ulps of the largest share.
    const double half_ulp = wire == torch::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
    torch::Tensor bound = torch::zeros({5000}, torch::kFloat64);
    for (int r = 0; r < n; ++r) bound = torch::maximum(bound, gradient_of(r).to(torch::kFloat64).abs() / n);
    bound = bound * (n * n + n) * half_ulp + 1e-7;  // n roundings of shares, n-1 of partial sums up to n shares
    INFO("|result - mean| within " << n * n + n << " half-ulps of the largest share");
    REQUIRE(mpi_test::all_ranks(((flat.to(torch::kFloat64) - mean).abs() <= bound).all().item<bool>()));
  }
}

TEST_CASE("ex9.4 each wire format gives what it can hold: values only one of the two 16-bit formats holds",
          "[ex9.4][np3]") {
  auto comm = mpi_test::communicator();
  const int n = comm->size();
  // Rank 0 holds n × v, every other rank 0: the mean is v, and every
  // partial sum is v or 0, so the result is v as the wire format rounds it.
  struct Case {
    torch::ScalarType wire;
    std::vector<float> mean, expected;
    const char* why;
  };
  const float two_20 = 1048576.0f, two_m30 = 1.0f / 1073741824.0f, two_m9 = 1.0f / 512, two_m10 = 1.0f / 1024;
  const std::vector<Case> cases{
      {torch::kBFloat16, {two_20, two_m30, 1.0f + two_m10}, {two_20, two_m30, 1.0f},
       "bfloat16 holds 2^20 (float16's largest is 65504) and 2^-30 (under float16's smallest, 6e-8), and rounds "
       "1 + 2^-10 to 1 (8 significant bits)"},
      {torch::kFloat16, {1.0f + two_m10, 3.0f + two_m9, -(1.0f + two_m10)}, {1.0f + two_m10, 3.0f + two_m9, -(1.0f + two_m10)},
       "float16 holds 1 + 2^-10 and 3 + 2^-9 exactly (11 significant bits), which bfloat16 would round to 1 and 3"},
  };
  for (const Case& c : cases) {
    CAPTURE(c10::toString(c.wire));
    torch::Tensor flat = torch::tensor(c.mean) * static_cast<float>(comm->rank() == 0 ? n : 0);
    const torch::Tensor expected = torch::tensor(c.expected);
    ch09::average_in_16_bits(flat, c.wire, *comm);
    INFO("result " << flat << ", expected exactly " << expected << ", the mean as " << c10::toString(c.wire)
                   << " holds it: " << c.why << ". The ring must carry the format named by `wire`");
    REQUIRE(mpi_test::all_ranks(flat.scalar_type() == torch::kFloat32 && torch::equal(flat, expected)));
  }
}
