// Tests for ex2.1: chunk_sizes against every split of small batches, and
// scatter, with exact data (each image's pixels hold its sample index, so a
// chunk says which samples it holds).
#include "catch2_compat.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "data_parallel.hpp"
#include "oracles.hpp"
#include "workbook/errors.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

// The shortest longest time any split of `samples` over devices of these
// speeds can have, each device at least one sample: every split tried.
double best_longest_time(int64_t samples, const std::vector<double>& speeds) {
  std::vector<int64_t> sizes(speeds.size(), 1);
  double best = INFINITY;
  // Every composition of `samples` into speeds.size() positive parts.
  std::function<void(size_t, int64_t)> place = [&](size_t device, int64_t left) {
    if (device + 1 == speeds.size()) {
      sizes[device] = left;
      double longest = 0.0;
      for (size_t i = 0; i < speeds.size(); ++i) longest = std::max(longest, sizes[i] / speeds[i]);
      best = std::min(best, longest);
      return;
    }
    for (int64_t n = 1; n <= left - static_cast<int64_t>(speeds.size() - device - 1); ++n) {
      sizes[device] = n;
      place(device + 1, left - n);
    }
  };
  place(0, samples);
  return best;
}

std::string joined(const std::vector<int64_t>& sizes) {
  std::string text;
  for (int64_t n : sizes) text += (text.empty() ? "" : " ") + std::to_string(n);
  return text;
}

void check_split(int64_t samples, const std::vector<double>& speeds) {
  const std::vector<int64_t> sizes = ch02::chunk_sizes(samples, speeds);
  std::string speeds_text;
  for (double v : speeds) speeds_text += (speeds_text.empty() ? "" : " ") + std::to_string(v).substr(0, 4);
  INFO("chunk_sizes(" << samples << ", speeds " << speeds_text << ") gave " << joined(sizes));
  REQUIRE(sizes.size() == speeds.size());
  int64_t sum = 0;
  double longest = 0.0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sum += sizes[i];
    longest = std::max(longest, sizes[i] / speeds[i]);
  }
  INFO("the sizes must sum to the samples, every device at least one");
  REQUIRE(sum == samples);
  REQUIRE(*std::min_element(sizes.begin(), sizes.end()) >= 1);
  const double best = best_longest_time(samples, speeds);
  INFO("its longest time, size / speed, is " << longest << "; a split exists whose longest is " << best);
  REQUIRE(longest <= best * (1 + 1e-12));
}

}  // namespace

TEST_CASE("ex2.1 chunk_sizes: identical devices, every split as fast as any", "[ex2.1]") {
  for (int64_t samples : {1, 4, 7, 8, 10, 11})
    for (int64_t parts = 1; parts <= std::min<int64_t>(samples, 6); ++parts)
      check_split(samples, std::vector<double>(static_cast<size_t>(parts), 1.0));
}

TEST_CASE("ex2.1 chunk_sizes: devices of different speeds, every split as fast as any", "[ex2.1]") {
  const std::vector<std::vector<double>> speed_sets = {
      {0.5, 1.0}, {1.0, 3.0}, {2.0, 1.0, 1.0}, {0.7, 1.0, 1.3}, {1.0, 1.0, 1.0, 0.25}, {3.0, 0.5, 2.0, 1.0}};
  for (const auto& speeds : speed_sets)
    for (int64_t samples = static_cast<int64_t>(speeds.size()); samples <= 13; ++samples) check_split(samples, speeds);
}

TEST_CASE("ex2.1 chunk_sizes refuses what cannot be split", "[ex2.1]") {
  INFO("every device needs a sample; zero devices cannot take any; a speed must be a positive number");
  REQUIRE_THROWS_AS(ch02::chunk_sizes(3, std::vector<double>(4, 1.0)), workbook::UserError);
  REQUIRE_THROWS_AS(ch02::chunk_sizes(5, std::vector<double>{}), workbook::UserError);
  REQUIRE_THROWS_AS(ch02::chunk_sizes(5, std::vector<double>{1.0, 0.0}), workbook::UserError);
  REQUIRE_THROWS_AS(ch02::chunk_sizes(5, std::vector<double>{1.0, -2.0}), workbook::UserError);
  REQUIRE_THROWS_AS(ch02::chunk_sizes(5, std::vector<double>{1.0, NAN}), workbook::UserError);
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
  const int64_t first = ch02::chunk_sizes(9, 2)[0];
  REQUIRE(torch::equal(chunks[0], torch::arange(0, first, torch::kInt64)));
  REQUIRE(torch::equal(chunks[1], torch::arange(first, 9, torch::kInt64)));
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
