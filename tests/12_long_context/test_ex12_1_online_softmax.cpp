// Tests for ex12.1: attention over pieces of the keys, merged, against the
// attention over all of them at once (float64, computed directly here).
#include <limits>

#include "catch2_compat.hpp"

#include "online_softmax.hpp"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The oracle, straight from the definition: every row's scores over its
// visible keys, their maximum, the sum of exp(s − max) and the softmax's
// weighted values; a row with no visible key is set to the empty Partial.
ch12::Partial direct(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& visible) {
  const torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor masked = scores.masked_fill(visible.logical_not(), -kInf);
  const torch::Tensor max = std::get<0>(masked.max(-1));
  const torch::Tensor empty = visible.logical_not().all(-1);  // [rows]
  const torch::Tensor sum = (masked - max.unsqueeze(-1)).exp().sum(-1).masked_fill(empty, 0.0);
  const torch::Tensor out = torch::matmul(torch::softmax(masked, -1), v).masked_fill(empty.unsqueeze(-1), 0.0);
  return {out, max, sum};
}

// Two Partials agree: the same max (−inf alike), outputs, and sums.
void require_same(const ch12::Partial& got, const ch12::Partial& want, double tolerance, const std::string& what) {
  INFO(what << ": max differs by up to "
            << (got.max - want.max).nan_to_num(0.0, 0.0, 0.0).abs().max().item<double>() << " (where both finite)");
  REQUIRE(got.max.sizes() == want.max.sizes());
  REQUIRE(torch::equal(got.max.isinf(), want.max.isinf()));
  const torch::Tensor finite = want.max.isfinite();
  REQUIRE(torch::allclose(got.max.masked_select(finite), want.max.masked_select(finite), tolerance, tolerance));
  INFO(what << ": sum differs by up to " << (got.sum - want.sum).abs().max().item<double>());
  REQUIRE(torch::allclose(got.sum.to(torch::kFloat64), want.sum, tolerance, tolerance));
  INFO(what << ": out differs by up to " << (got.out.to(torch::kFloat64) - want.out).abs().max().item<double>()
            << "; NaN in out: " << got.out.isnan().any().item<bool>());
  REQUIRE(torch::allclose(got.out.to(torch::kFloat64), want.out, tolerance, tolerance));
}

struct Case {
  torch::Tensor q, k, v, visible;
};

// 2 × 3 heads of 7 rows over 13 keys, head size 8; a random mask with some
// rows that see no key at all (rows 0 and 4).
Case random_case(uint64_t seed, double scale = 1.0) {
  torch::manual_seed(seed);
  Case c{torch::randn({2, 3, 7, 8}, torch::kFloat64) * scale, torch::randn({2, 3, 13, 8}, torch::kFloat64),
         torch::randn({2, 3, 13, 8}, torch::kFloat64), torch::rand({7, 13}) < 0.6};
  c.visible[0].fill_(false);
  c.visible[4].fill_(false);
  return c;
}

}  // namespace

TEST_CASE("ex12.1 attend gives each row's maximum, sum and normalised output over its visible keys", "[ex12.1]") {
  const Case c = random_case(1);
  require_same(ch12::attend(c.q, c.k, c.v, c.visible), direct(c.q, c.k, c.v, c.visible), 1e-10,
               "attend over a random mask (rows 0 and 4 see nothing)");
  const torch::Tensor causal = torch::ones({7, 13}, torch::kBool).tril(6);
  require_same(ch12::attend(c.q, c.k, c.v, causal), direct(c.q, c.k, c.v, causal), 1e-10, "attend, causal");
}

TEST_CASE("ex12.1 merging the pieces' Partials gives the Partial over all their keys, in any order", "[ex12.1]") {
  const Case c = random_case(2);
  const ch12::Partial whole = direct(c.q, c.k, c.v, c.visible);
  // Keys 0-3, 4-10 and 11-12: three pieces, each with rows that see nothing of it.
  const std::vector<std::pair<int64_t, int64_t>> cuts{{0, 4}, {4, 7}, {11, 2}};
  std::vector<ch12::Partial> pieces;
  for (const auto& [first, count] : cuts)
    pieces.push_back(ch12::attend(c.q, c.k.narrow(2, first, count), c.v.narrow(2, first, count),
                                  c.visible.narrow(1, first, count)));
  require_same(ch12::merge(ch12::merge(pieces[0], pieces[1]), pieces[2]), whole, 1e-10, "(a + b) + c");
  require_same(ch12::merge(pieces[2], ch12::merge(pieces[1], pieces[0])), whole, 1e-10, "c + (b + a)");
  require_same(ch12::merge(ch12::merge(pieces[1], pieces[2]), pieces[0]), whole, 1e-10, "(b + c) + a");
  // Pieces whose scores lie far apart: the second piece's keys scaled so that
  // its maximum is well above the first's, then well below.
  for (const double factor : {8.0, 0.125}) {
    CAPTURE(factor);
    const torch::Tensor k = torch::cat({c.k.narrow(2, 0, 6), c.k.narrow(2, 6, 7) * factor}, 2);
    const ch12::Partial a = ch12::attend(c.q, k.narrow(2, 0, 6), c.v.narrow(2, 0, 6), c.visible.narrow(1, 0, 6));
    const ch12::Partial b = ch12::attend(c.q, k.narrow(2, 6, 7), c.v.narrow(2, 6, 7), c.visible.narrow(1, 6, 7));
    require_same(ch12::merge(a, b), direct(c.q, k, c.v, c.visible), 1e-10, "two pieces of different scale");
  }
}

TEST_CASE("ex12.1 a row that sees nothing stays empty and never turns into NaN", "[ex12.1]") {
  const Case c = random_case(3);
  const torch::Tensor none = torch::zeros({7, 13}, torch::kBool);
  const ch12::Partial empty = ch12::attend(c.q, c.k, c.v, none);
  require_same(empty, direct(c.q, c.k, c.v, none), 0.0, "attend with nothing visible");
  require_same(ch12::merge(empty, empty), direct(c.q, c.k, c.v, none), 0.0, "empty + empty");
  const ch12::Partial some = ch12::attend(c.q, c.k, c.v, c.visible);
  require_same(ch12::merge(empty, some), direct(c.q, c.k, c.v, c.visible), 1e-12, "empty + a piece");
  require_same(ch12::merge(some, empty), direct(c.q, c.k, c.v, c.visible), 1e-12, "a piece + empty");
  INFO("log_sum_exp of an empty row is −inf");
  REQUIRE(ch12::log_sum_exp(empty).isneginf().all().item<bool>());
}

TEST_CASE("ex12.1 float32 scores in the thousands: finite, and the float64 answer", "[ex12.1]") {
  const Case c = random_case(4, 300.0);  // scores of order 1e3: exp would overflow unshifted
  const torch::Tensor q = c.q.to(torch::kFloat32), k = c.k.to(torch::kFloat32), v = c.v.to(torch::kFloat32);
  const ch12::Partial a = ch12::attend(q, k.narrow(2, 0, 5), v.narrow(2, 0, 5), c.visible.narrow(1, 0, 5));
  const ch12::Partial b = ch12::attend(q, k.narrow(2, 5, 8), v.narrow(2, 5, 8), c.visible.narrow(1, 5, 8));
  const ch12::Partial merged = ch12::merge(a, b);
  INFO("out is in q's dtype, float32");
  REQUIRE(merged.out.scalar_type() == torch::kFloat32);
  const ch12::Partial want = direct(q.to(torch::kFloat64), k.to(torch::kFloat64), v.to(torch::kFloat64), c.visible);
  INFO("out differs from float64's by up to " << (merged.out.to(torch::kFloat64) - want.out).abs().max().item<double>());
  REQUIRE(torch::allclose(merged.out.to(torch::kFloat64), want.out, 1e-4, 1e-4));
  REQUIRE(torch::isfinite(merged.out).all().item<bool>());
}
