// Tests for ex2.4: gather, on chunks cut by hand (not by scatter), so that
// these tests exercise gather alone.
#include "catch2_compat.hpp"

#include "data_parallel.hpp"
#include "oracles.hpp"
#include "workbook/errors.hpp"

namespace {
std::vector<torch::Tensor> cut(const torch::Tensor& batch, const std::vector<int64_t>& sizes) {
  std::vector<torch::Tensor> chunks;
  int64_t start = 0;
  for (int64_t size : sizes) {
    chunks.push_back(batch.narrow(0, start, size).clone());
    start += size;
  }
  return chunks;
}
}  // namespace

TEST_CASE("ex2.4 gather puts uneven chunks back together, in order (scatter/gather round trip)", "[ex2.4]") {
  auto [images, labels] = oracle::indexed_samples(11);
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{11}, {6, 5}, {3, 3, 3, 2}, {1, 1, 9}}) {
    CAPTURE(sizes);
    torch::Tensor whole = ch02::gather(cut(images, sizes), torch::kCPU);
    REQUIRE(whole.device() == torch::Device(torch::kCPU));
    REQUIRE(torch::equal(whole, images));
    REQUIRE(torch::equal(ch02::gather(cut(labels, sizes), torch::kCPU), labels));
  }
}

TEST_CASE("ex2.4 gather is recorded by autograd: each chunk gets its own slice of the gradient", "[ex2.4]") {
  torch::manual_seed(4);
  std::vector<torch::Tensor> chunks = {torch::rand({3, 10}).requires_grad_(), torch::rand({2, 10}).requires_grad_(),
                                       torch::rand({2, 10}).requires_grad_()};
  torch::Tensor weights = torch::rand({7, 10});
  torch::Tensor gathered = ch02::gather(chunks, torch::kCPU);
  INFO("the gathered logits must carry a grad_fn, or backward cannot reach the replicas");
  REQUIRE(gathered.requires_grad());
  (gathered * weights).sum().backward();
  int64_t start = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    CAPTURE(i);
    REQUIRE(chunks[i].grad().defined());
    REQUIRE(torch::equal(chunks[i].grad(), weights.narrow(0, start, chunks[i].size(0))));
    start += chunks[i].size(0);
  }
}

TEST_CASE("ex2.4 gather of no outputs is an error", "[ex2.4]") {
  REQUIRE_THROWS_AS(ch02::gather({}, torch::kCPU), workbook::UserError);
}
