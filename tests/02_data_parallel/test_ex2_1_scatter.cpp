// Tests for ex2.1: chunk_sizes and scatter, with exact data (each image's
// pixels hold its sample index, so a chunk says which samples it holds).
#include "catch2_compat.hpp"

#include "data_parallel.hpp"
#include "oracles.hpp"
#include "workbook/errors.hpp"

using Catch::Matchers::ContainsSubstring;

TEST_CASE("ex2.1 chunk_sizes splits as evenly as possible, larger chunks first", "[ex2.1]") {
  REQUIRE(ch02::chunk_sizes(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  REQUIRE(ch02::chunk_sizes(8, 4) == std::vector<int64_t>{2, 2, 2, 2});
  REQUIRE(ch02::chunk_sizes(10, 6) == std::vector<int64_t>{2, 2, 2, 2, 1, 1});
  REQUIRE(ch02::chunk_sizes(5, 5) == std::vector<int64_t>{1, 1, 1, 1, 1});
  REQUIRE(ch02::chunk_sizes(7, 1) == std::vector<int64_t>{7});
  INFO("every device needs a sample; zero devices cannot take any");
  REQUIRE_THROWS_AS(ch02::chunk_sizes(3, 4), workbook::UserError);
  REQUIRE_THROWS_AS(ch02::chunk_sizes(5, 0), workbook::UserError);
}

TEST_CASE("ex2.1 scatter gives device i the i-th run of samples, uneven sizes included", "[ex2.1]") {
  for (int64_t samples : {4, 10, 11, 37}) {
    for (size_t devices_count : {1, 2, 3, 4}) {
      CAPTURE(samples, devices_count);
      auto [images, labels] = oracle::indexed_samples(samples);
      const std::vector<torch::Device> devices(devices_count, torch::kCPU);
      std::vector<torch::Tensor> chunks = ch02::scatter(images, devices);
      REQUIRE(chunks.size() == devices_count);
      const std::vector<int64_t> sizes = ch02::chunk_sizes(samples, static_cast<int64_t>(devices_count));
      int64_t start = 0;
      for (size_t i = 0; i < chunks.size(); ++i) {
        CAPTURE(i);
        REQUIRE(chunks[i].sizes() == torch::IntArrayRef({sizes[i], 1, 28, 28}));
        REQUIRE(chunks[i].device() == devices[i]);
        INFO("chunk i must hold samples start..start+size-1, in order");
        REQUIRE(torch::equal(chunks[i], images.narrow(0, start, sizes[i])));
        const char* rows = static_cast<const char*>(images.data_ptr()) + start * images.stride(0) * images.element_size();
        INFO("chunk " << i << " is on the batch's own device, yet it does not lie in the batch's memory: it took "
             "memory of its own");
        REQUIRE(chunks[i].data_ptr() == rows);
        start += sizes[i];
      }
      REQUIRE(start == samples);
    }
  }
}

TEST_CASE("ex2.1 scatter works on any tensor with a batch dimension (labels too)", "[ex2.1]") {
  torch::Tensor labels = torch::arange(9, torch::kInt64);
  std::vector<torch::Tensor> chunks = ch02::scatter(labels, {torch::kCPU, torch::kCPU});
  REQUIRE(chunks.size() == 2);
  REQUIRE(torch::equal(chunks[0], torch::arange(0, 5, torch::kInt64)));
  REQUIRE(torch::equal(chunks[1], torch::arange(5, 9, torch::kInt64)));
}

TEST_CASE("ex2.1 scatter rejects an empty batch, no devices, and more devices than samples", "[ex2.1]") {
  const std::vector<torch::Device> four(4, torch::kCPU);
  REQUIRE_THROWS_WITH(ch02::scatter(torch::empty({0, 1, 28, 28}), four), ContainsSubstring("empty"));
  REQUIRE_THROWS_AS(ch02::scatter(torch::empty({0, 1, 28, 28}), four), workbook::UserError);
  REQUIRE_THROWS_AS(ch02::scatter(torch::rand({3, 1, 28, 28}), {}), workbook::UserError);
  INFO("the message must give both numbers: 3 samples, 4 devices");
  REQUIRE_THROWS_WITH(ch02::scatter(torch::rand({3, 1, 28, 28}), four), ContainsSubstring("3") && ContainsSubstring("4"));
  REQUIRE_THROWS_AS(ch02::scatter(torch::rand({3, 1, 28, 28}), four), workbook::UserError);
}
