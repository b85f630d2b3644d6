// Tests for ex1.1: epoch_order and make_batch.
#include "catch2_compat.hpp"

#include "oracles.hpp"
#include "single_device.hpp"
#include "workbook/errors.hpp"

TEST_CASE("ex1.1 epoch_order is a permutation, reproducible from seed and epoch", "[ex1.1]") {
  const int64_t n = 1000;
  torch::Tensor order = ch01::epoch_order(n, /*seed=*/7, /*epoch=*/1, /*shuffle=*/true);
  REQUIRE(order.dtype() == torch::kInt64);
  REQUIRE(order.sizes() == torch::IntArrayRef{n});
  INFO("sorted, the order must be 0..n-1: every sample exactly once");
  REQUIRE(torch::equal(std::get<0>(order.sort()), torch::arange(n, torch::kInt64)));
  INFO("the order must be shuffled, not 0, 1, 2, ...");
  REQUIRE_FALSE(torch::equal(order, torch::arange(n, torch::kInt64)));
  INFO("the same seed and epoch must give the same order (seed a generator of your own)");
  REQUIRE(torch::equal(order, ch01::epoch_order(n, 7, 1, true)));
  INFO("another epoch must give another order");
  REQUIRE_FALSE(torch::equal(order, ch01::epoch_order(n, 7, 2, true)));
  INFO("another seed must give another order");
  REQUIRE_FALSE(torch::equal(order, ch01::epoch_order(n, 8, 1, true)));
  INFO("the global RNG must not decide the order");
  torch::manual_seed(123);
  torch::Tensor first = ch01::epoch_order(n, 7, 1, true);
  torch::manual_seed(456);
  REQUIRE(torch::equal(first, ch01::epoch_order(n, 7, 1, true)));
  INFO("epoch_order must not reseed or draw from the global RNG");
  torch::manual_seed(99);
  torch::Tensor undisturbed = torch::rand({4});
  torch::manual_seed(99);
  ch01::epoch_order(n, 7, 1, true);
  REQUIRE(torch::equal(undisturbed, torch::rand({4})));
}

TEST_CASE("ex1.1 epoch_order without shuffling is 0, 1, 2, ...", "[ex1.1]") {
  REQUIRE(torch::equal(ch01::epoch_order(17, 3, 5, /*shuffle=*/false), torch::arange(17, torch::kInt64)));
}

TEST_CASE("ex1.1 make_batch covers every sample once and keeps images with their labels", "[ex1.1]") {
  const int64_t n = 23, batch_size = 5;
  auto [images, labels] = oracle::indexed_samples(n);  // pixel value = sample index
  torch::Tensor order = torch::randperm(n, torch::kInt64);
  REQUIRE(ch01::batches_per_epoch(n, batch_size) == 5);

  std::vector<int64_t> expected_sizes = {5, 5, 5, 5, 3};
  std::vector<torch::Tensor> seen;
  for (int64_t index = 0; index < 5; ++index) {
    ch01::Batch batch = ch01::make_batch(images, labels, order, index, batch_size, torch::kCPU);
    CAPTURE(index);
    REQUIRE(batch.images.sizes() == torch::IntArrayRef{expected_sizes[index], 1, 28, 28});
    REQUIRE(batch.labels.sizes() == torch::IntArrayRef{expected_sizes[index]});
    REQUIRE(batch.images.device() == torch::Device(torch::kCPU));
    torch::Tensor sample_ids = batch.images.select(1, 0).select(1, 0).select(1, 0).to(torch::kInt64);
    INFO("batch `index` must hold the samples order[index*batch_size ...]");
    REQUIRE(torch::equal(sample_ids, order.slice(0, index * batch_size, index * batch_size + expected_sizes[index])));
    INFO("each label must stay with its image");
    REQUIRE(torch::equal(batch.labels, sample_ids.remainder(10)));
    seen.push_back(sample_ids);
  }
  REQUIRE(torch::equal(torch::cat(seen), order));
}

TEST_CASE("ex1.1 make_batch rejects a batch past the end of the epoch", "[ex1.1]") {
  auto [images, labels] = oracle::indexed_samples(10);
  torch::Tensor order = torch::arange(10, torch::kInt64);
  REQUIRE_THROWS_AS(ch01::make_batch(images, labels, order, 3, 4, torch::kCPU), workbook::UserError);
  REQUIRE_THROWS_AS(ch01::make_batch(images, labels, order, -1, 4, torch::kCPU), workbook::UserError);
  REQUIRE(ch01::make_batch(images, labels, order, 2, 4, torch::kCPU).labels.size(0) == 2);
}
