// Tests for ex13.2: routing and capacity against a router written from its
// definition (moe_cases.hpp), and the balancing loss against the same loss
// over every rank's tokens in one process.
#include "catch2_compat.hpp"

#include "moe_cases.hpp"
#include "mpi_test.hpp"
#include "router.hpp"

namespace {

// Rank r's tokens, of every rank's drawn alike everywhere: rank 1 has none,
// the others 4 + 3r each, and each rank leans towards experts of its own.
std::vector<torch::Tensor> every_ranks_logits(int ranks, int64_t experts, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> all;
  for (int r = 0; r < ranks; ++r) {
    const int64_t tokens = r == 1 ? 0 : 4 + 3 * r;
    torch::Tensor lean = torch::zeros({experts}, torch::kFloat64);
    lean[r % experts] = 1.5;
    all.push_back(torch::randn({tokens, experts}, torch::kFloat64) + lean);
  }
  return all;
}

}  // namespace

TEST_CASE("ex13.2 each token's k most probable experts, first to last, and their weights adding up to 1", "[ex13.2]") {
  for (const int64_t k : {1, 2, 3}) {
    torch::manual_seed(40 + k);
    const torch::Tensor logits = torch::randn({9, 5}, torch::kFloat64).requires_grad_();
    const ch13::Routing got = ch13::route(logits, k, 100);
    const moe_cases::Routed want = moe_cases::route(logits, k, 100);
    CAPTURE(k);
    INFO("experts chosen " << got.experts << ", expected " << want.experts);
    REQUIRE(got.experts.sizes() == want.experts.sizes());
    REQUIRE(torch::equal(got.experts.to(torch::kInt64), want.experts));
    INFO("probabilities differ by up to " << moe_cases::max_difference(got.probabilities, want.probabilities));
    REQUIRE(torch::allclose(got.probabilities, want.probabilities, 1e-12, 1e-14));
    INFO("weights " << got.weights << ", expected " << want.weights);
    REQUIRE(torch::allclose(got.weights, want.weights, 1e-12, 1e-14));
    // The weights' gradient in the logits (a token's weights share one denominator).
    const torch::Tensor pull = torch::randn({9, k}, torch::kFloat64);
    const torch::Tensor g = torch::autograd::grad({(got.weights * pull).sum()}, {logits})[0];
    const torch::Tensor w = torch::autograd::grad({(want.weights * pull).sum()}, {logits})[0];
    INFO("the weights' gradient in the logits differs by up to " << moe_cases::max_difference(g, w));
    REQUIRE(torch::allclose(g, w, 1e-10, 1e-12));
  }
  const ch13::Routing f32 = ch13::route(torch::randn({4, 6}), 2, 10);
  INFO("float32 logits gave " << f32.weights.scalar_type() << " weights");
  REQUIRE(f32.weights.scalar_type() == torch::kFloat32);
}

TEST_CASE("ex13.2 an expert keeps a rank's assignments in token order, as many as its capacity", "[ex13.2]") {
  torch::manual_seed(7);
  // Leaning towards expert 0, so that it fills first.
  const torch::Tensor logits = torch::randn({13, 4}, torch::kFloat64) + torch::tensor({1.0, 0.0, 0.0, 0.0}, torch::kFloat64);
  for (const int64_t k : {1, 2, 3}) {
    for (const int64_t capacity : {0, 1, 2, 3, 5, 40}) {
      const ch13::Routing got = ch13::route(logits, k, capacity);
      const moe_cases::Routed want = moe_cases::route(logits, k, capacity);
      CAPTURE(k, capacity);
      INFO("experts " << want.experts << "\nkept " << got.kept.to(torch::kInt64) << "\nexpected "
                      << want.kept.to(torch::kInt64));
      REQUIRE(got.kept.sizes() == want.kept.sizes());
      REQUIRE(torch::equal(got.kept.to(torch::kBool), want.kept));
    }
  }
}

TEST_CASE("ex13.2 the balancing loss is the group's: every rank's tokens as one", "[ex13.2][np3][np4]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  for (const int64_t k : {1, 2}) {
    for (const int64_t capacity : {100, 1}) {  // 1: most assignments dropped, and counted all the same
      const std::vector<torch::Tensor> all = every_ranks_logits(ranks, 6, 90 + k);
      const ch13::Routing mine = ch13::route(all[comm->rank()], k, capacity);
      const double got = ch13::load_balancing_loss(mine, *comm).item<double>();
      const double want = moe_cases::balancing_loss(moe_cases::route(torch::cat(all), k, capacity)).item<double>();
      INFO("rank " << comm->rank() << " of " << ranks << " (rank 1 has no tokens, the others 4 + 3r), k = " << k
                   << ", capacity " << capacity << ": the loss is " << got
                   << ", over every rank's tokens together it is " << want);
      REQUIRE(mpi_test::all_ranks(std::abs(got - want) < 1e-12));
    }
  }
}

TEST_CASE("ex13.2 the balancing loss's gradient, averaged over the group, is the group's loss's", "[ex13.2][np3]") {
  auto comm = mpi_test::communicator();
  const int ranks = comm->size();
  const std::vector<torch::Tensor> inputs = every_ranks_logits(ranks, 4, 17);  // [tokens, 4]: inputs, not logits
  torch::manual_seed(5);
  const torch::Tensor weight = torch::randn({4, 5}, torch::kFloat64);
  // Each rank: its own inputs through the router weight (the same on every rank).
  const torch::Tensor mine = weight.clone().requires_grad_();
  ch13::load_balancing_loss(ch13::route(torch::matmul(inputs[comm->rank()], mine), 2, 100), *comm).backward();
  torch::Tensor averaged = mine.grad().defined() ? mine.grad().clone() : torch::zeros_like(mine);
  comm->all_reduce(averaged, workbook::ReduceOp::Average);
  const torch::Tensor whole = weight.clone().requires_grad_();
  moe_cases::balancing_loss(moe_cases::route(torch::matmul(torch::cat(inputs), whole), 2, 100)).backward();
  INFO("rank " << comm->rank() << ": the router's gradient, averaged over the ranks, differs from the one-process "
               "loss's by up to " << moe_cases::max_difference(averaged, whole.grad()) << " (its largest entry "
               << whole.grad().abs().max().item<double>() << ")");
  REQUIRE(mpi_test::all_ranks(torch::allclose(averaged, whole.grad(), 1e-10, 1e-12)));
}
