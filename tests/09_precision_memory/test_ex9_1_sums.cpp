// Tests for ex9.1: one sum, three accumulators. The oracles add one value at a
// time in the test's own loops, with c10::Half, c10::BFloat16 and float, whose
// additions round as the dtypes do.
#include "catch2_compat.hpp"

#include "precision.hpp"

namespace {

// The oracle: the values as stored in Low, added one at a time into a Low.
template <typename Low>
double low_accumulator_sum(const torch::Tensor& values) {
  Low sum(0.0f);
  for (int64_t i = 0; i < values.numel(); ++i) sum = Low(static_cast<float>(sum) + static_cast<float>(Low(values[i].item<float>())));
  return static_cast<float>(sum);
}

template <typename Low>
double float32_accumulator_sum(const torch::Tensor& values) {
  float sum = 0.0f;
  for (int64_t i = 0; i < values.numel(); ++i) sum += static_cast<float>(Low(values[i].item<float>()));
  return sum;
}

}  // namespace

TEST_CASE("ex9.1 ten thousand 0.01s: float16 stops at 32, bfloat16 at 4; float32 and float64 reach 100", "[ex9.1]") {
  const torch::Tensor values = torch::full({10000}, 0.01f);
  const double stored_half = static_cast<float>(c10::Half(0.01f));
  const double stored_bfloat16 = static_cast<float>(c10::BFloat16(0.01f));

  const ch09::Sums half = ch09::sum_in_order(values, torch::kFloat16);
  INFO("exact: the 10000 values AS STORED in float16 (" << stored_half << " each), summed in float64");
  REQUIRE(half.exact == 10000 * stored_half);
  INFO("low_sum: every partial sum rounded to float16: once the sum reaches 32 its ulp is 1/32, and 0.01 is "
       "less than half of that, so each addition rounds back to 32 (Note [where a sum stalls])");
  REQUIRE(half.low_sum == 32.0);
  INFO("float32_sum: the stored values added one at a time into a float (the test's own loop)");
  REQUIRE(half.float32_sum == float32_accumulator_sum<c10::Half>(values));
  REQUIRE(std::abs(half.float32_sum - half.exact) < 1e-3);

  const ch09::Sums bfloat16 = ch09::sum_in_order(values, torch::kBFloat16);
  INFO("bfloat16 keeps 8 bits: its sum stops at 4, where the ulp is 2^-5");
  REQUIRE(bfloat16.exact == 10000 * stored_bfloat16);
  REQUIRE(bfloat16.low_sum == 4.0);
  REQUIRE(bfloat16.float32_sum == float32_accumulator_sum<c10::BFloat16>(values));
}

TEST_CASE("ex9.1 random values: each sum equals the oracle's, added in the same order", "[ex9.1]") {
  torch::manual_seed(9);
  const torch::Tensor values = torch::rand({3000}) * 2 - 0.5;  // mostly positive, some negative
  for (torch::ScalarType storage : {torch::kFloat16, torch::kBFloat16}) {
    CAPTURE(c10::toString(storage));
    const ch09::Sums sums = ch09::sum_in_order(values, storage);
    const torch::Tensor stored = values.to(storage).to(torch::kFloat64);
    INFO("exact: float64 over the stored values");
    REQUIRE(sums.exact == Approx(stored.sum().item<double>()).epsilon(1e-12));
    const bool half = storage == torch::kFloat16;
    INFO("low_sum: one value at a time, every partial sum rounded to 16 bits, not a 16-bit tensor's sum "
         "(torch::sum adds 16-bit values in float32) nor a float64 sum rounded at the end");
    REQUIRE(sums.low_sum == (half ? low_accumulator_sum<c10::Half>(values) : low_accumulator_sum<c10::BFloat16>(values)));
    REQUIRE(sums.float32_sum ==
            (half ? float32_accumulator_sum<c10::Half>(values) : float32_accumulator_sum<c10::BFloat16>(values)));
    INFO("the 16-bit accumulator is the farthest from exact");
    REQUIRE(std::abs(sums.low_sum - sums.exact) > std::abs(sums.float32_sum - sums.exact));
  }
}
