// Tests for ex12.2: the balanced causal split (every position held once,
// every rank the same causal work) and the map back to sequence order.
#include "catch2_compat.hpp"

#include "causal_split.hpp"
#include "workbook/errors.hpp"

namespace {

const std::vector<std::pair<int64_t, int>> kShapes{{4, 2}, {8, 2}, {12, 3}, {16, 4}, {48, 4}, {64, 8}};

std::string listed(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.view({-1}).to(torch::kInt64);
  return out.str();
}

// Every rank's block of `whole` along `dim`, concatenated in rank order: what
// an all-gather of the blocks gives.
torch::Tensor gathered_blocks(const torch::Tensor& whole, int64_t dim, int ranks, ch12::Split split) {
  std::vector<torch::Tensor> blocks;
  for (int r = 0; r < ranks; ++r)
    blocks.push_back(whole.index_select(dim, ch12::held_positions(whole.size(dim), r, ranks, split)));
  return torch::cat(blocks, dim);
}

}  // namespace

TEST_CASE("ex12.2 the balanced split holds every position once, T/cp on each rank, ascending", "[ex12.2]") {
  for (const auto& [T, ranks] : kShapes) {
    CAPTURE(T, ranks);
    torch::Tensor seen = torch::zeros({T}, torch::kInt64);
    for (int r = 0; r < ranks; ++r) {
      const torch::Tensor held = ch12::held_positions(T, r, ranks, ch12::Split::Balanced);
      INFO("rank " << r << " holds " << listed(held));
      REQUIRE(held.scalar_type() == torch::kInt64);
      REQUIRE(held.dim() == 1);
      REQUIRE(held.size(0) == T / ranks);
      REQUIRE(held.min().item<int64_t>() >= 0);
      REQUIRE(held.max().item<int64_t>() < T);
      REQUIRE(torch::equal(std::get<0>(held.sort()), held));
      seen.index_add_(0, held, torch::ones_like(held));
    }
    INFO("how often each position is held: " << listed(seen));
    REQUIRE(torch::equal(seen, torch::ones_like(seen)));
  }
}

TEST_CASE("ex12.2 under the causal mask every rank of the balanced split has the same work", "[ex12.2]") {
  for (const auto& [T, ranks] : kShapes) {
    CAPTURE(T, ranks);
    std::vector<int64_t> pairs;
    for (int r = 0; r < ranks; ++r) pairs.push_back(ch12::causal_pairs(T, r, ranks, ch12::Split::Balanced));
    std::ostringstream shown;
    for (const int64_t p : pairs) shown << p << " ";
    INFO("(query, key) pairs per rank: " << shown.str() << "(the whole sequence has " << T * (T + 1) / 2 << ")");
    REQUIRE(std::all_of(pairs.begin(), pairs.end(), [&](int64_t p) { return p == pairs[0]; }));
  }
}

TEST_CASE("ex12.2 a context that 2·cp does not divide is refused, naming both", "[ex12.2][given]") {
  for (const auto& [T, ranks] : std::vector<std::pair<int64_t, int>>{{6, 2}, {18, 4}, {9, 3}}) {
    CAPTURE(T, ranks);
    try {
      ch12::held_positions(T, 0, ranks, ch12::Split::Balanced);
      FAIL("held_positions(" << T << ", 0, " << ranks << ", Balanced) returned");
    } catch (const workbook::UserError& e) {
      const std::string message = e.what();
      INFO(message);
      REQUIRE((message.find(std::to_string(T)) != std::string::npos &&
               message.find(std::to_string(ranks)) != std::string::npos));
    }
  }
}

TEST_CASE("ex12.2 to_sequence_order puts every rank's block back where its positions are", "[ex12.2]") {
  torch::manual_seed(7);
  for (const auto split : {ch12::Split::Balanced, ch12::Split::Contiguous}) {
    for (const auto& [T, ranks] : kShapes) {
      CAPTURE(ch12::split_name(split), T, ranks);
      const torch::Tensor whole = torch::randn({2, T, 3}, torch::kFloat64);
      const torch::Tensor gathered = gathered_blocks(whole, 1, ranks, split).requires_grad_(true);
      const torch::Tensor ordered = ch12::to_sequence_order(gathered, 1, ranks, split);
      INFO("along dimension 1 of [2, T, 3]");
      REQUIRE(torch::equal(ordered, whole));
      // The gradient of position p's entry lands on the entry that held p.
      const torch::Tensor upstream = torch::randn_like(whole);
      ordered.backward(upstream);
      INFO("the gradient reaching the gathered blocks is not the upstream gradient, block by block");
      REQUIRE(torch::equal(gathered.grad(), gathered_blocks(upstream, 1, ranks, split)));
    }
  }
  INFO("along dimension 0 of [T]");
  const torch::Tensor whole = torch::arange(16, torch::kFloat64) * 10;
  REQUIRE(torch::equal(ch12::to_sequence_order(gathered_blocks(whole, 0, 4, ch12::Split::Balanced), 0, 4,
                                               ch12::Split::Balanced),
                       whole));
}
