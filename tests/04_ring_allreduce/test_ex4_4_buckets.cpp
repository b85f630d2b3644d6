// Tests for ex4.4: the bucket assignment PyTorch's DDP makes: reverse order,
// a small first bucket, then a cap.
#include "catch2_compat.hpp"

#include "reducer.hpp"
#include "workbook/models.hpp"

namespace {

std::vector<torch::Tensor> float_parameters(const std::vector<int64_t>& sizes) {
  std::vector<torch::Tensor> parameters;
  for (int64_t size : sizes) parameters.push_back(torch::zeros({size}));
  return parameters;
}

}  // namespace

TEST_CASE("ex4.4 assign_buckets gives the header's first example (limits 400 B, then 1000 B)", "[ex4.4]") {
  // float32: 4 bytes per element. First bucket: 400 bytes (100 elements),
  // then 1000 bytes (250 elements).
  const auto parameters = float_parameters({30, 40, 200, 10, 100, 60, 300});
  const std::vector<ch04::Bucket> buckets = ch04::assign_buckets(parameters, 400, 1000);
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].parameters == std::vector<size_t>{6});
  CHECK(buckets[0].elements == 300);
  CHECK(buckets[1].parameters == std::vector<size_t>{5, 4, 3, 2});
  CHECK(buckets[1].offsets == std::vector<int64_t>{0, 60, 160, 170});
  CHECK(buckets[1].elements == 370);
  CHECK(buckets[2].parameters == std::vector<size_t>{1, 0});
  CHECK(buckets[2].offsets == std::vector<int64_t>{0, 40});
  CHECK(buckets[2].elements == 70);
}

TEST_CASE("ex4.4 ten equal parameters: one in the small first bucket, five in the next (2000 B, the cap), then four", "[ex4.4]") {
  // Ten parameters of 100 elements (400 B each); first bucket 400 B, cap 2000 B.
  const auto parameters = float_parameters(std::vector<int64_t>(10, 100));
  const std::vector<ch04::Bucket> buckets = ch04::assign_buckets(parameters, 400, 2000);
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].parameters == std::vector<size_t>{9});
  CHECK(buckets[1].parameters == std::vector<size_t>{8, 7, 6, 5, 4});
  CHECK(buckets[2].parameters == std::vector<size_t>{3, 2, 1, 0});
}

TEST_CASE("ex4.4 FashionCNN with DDP's limits: every parameter once, the last layers first", "[ex4.4]") {
  workbook::FashionCNN model;
  const std::vector<torch::Tensor> parameters = model.parameters();
  const std::vector<ch04::Bucket> buckets = ch04::assign_buckets(parameters, int64_t{1} << 20, int64_t{25} << 20);
  std::vector<int> seen(parameters.size(), 0);
  for (const ch04::Bucket& bucket : buckets) {
    REQUIRE_FALSE(bucket.parameters.empty());
    int64_t offset = 0;
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      REQUIRE(bucket.offsets[k] == offset);
      offset += parameters[bucket.parameters[k]].numel();
      ++seen[bucket.parameters[k]];
    }
    REQUIRE(bucket.elements == offset);
  }
  for (int s : seen) REQUIRE(s == 1);
  INFO("fc3, fc2 (last registered) come first; fc1's 1.38M-element weight fills the first bucket past 1 MiB");
  REQUIRE(buckets.front().parameters.front() == parameters.size() - 1);
  REQUIRE(buckets.size() == 2);
  REQUIRE(buckets.back().parameters.back() == 0);
}

TEST_CASE("ex4.4 at the edges: no parameters, no buckets; a bucket filled by the last parameter is the last bucket",
          "[ex4.4]") {
  INFO("no parameters: no buckets (an empty bucket would be all-reduced for nothing)");
  REQUIRE(ch04::assign_buckets({}, 400, 1000).empty());
  // The header's second example.
  const auto parameters = float_parameters({100, 100});
  const std::vector<ch04::Bucket> buckets = ch04::assign_buckets(parameters, 400, 400);
  INFO("the header's second example: two buckets of one parameter each, and nothing after them; got "
       << buckets.size() << " bucket(s)");
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].parameters == std::vector<size_t>{1});
  CHECK(buckets[1].parameters == std::vector<size_t>{0});
  for (const ch04::Bucket& bucket : buckets) {
    REQUIRE_FALSE(bucket.parameters.empty());
    CHECK(bucket.elements == 100);
    CHECK(bucket.offsets == std::vector<int64_t>{0});
  }
}
