// Tests for ex10.2: the closed forms, term by term (α's and bytes), and the
// crossovers that follow from them by algebra.
#include "catch2_compat.hpp"

#include <cmath>

#include "cost_model.hpp"
#include "workbook/errors.hpp"

using ch10::Algorithm;
using ch10::Collective;

namespace {

void require_cost(Collective c, Algorithm a, int64_t n, int p, double messages, double bytes) {
  const ch10::Cost cost = ch10::collective_cost(c, a, n, p);
  CAPTURE(ch10::collective_name(c), ch10::algorithm_name(a), n, p, cost.messages, cost.bytes, messages, bytes);
  REQUIRE(cost.messages == Approx(messages).epsilon(1e-12));
  REQUIRE(cost.bytes == Approx(bytes).epsilon(1e-12));
}

}  // namespace

TEST_CASE("ex10.2 the ring's reduce-scatter, all-gather and all-reduce at p = 2, 3, 4 and 8", "[ex10.2]") {
  // 3 MiB per rank. What the simulator counts for Chapter 4's ring (whole
  // segments, one message per step): {p, α's and bytes of a reduce-scatter
  // or an all-gather, α's and bytes of an all-reduce}.
  const int64_t n = 3 << 20;
  struct Expected {
    int p;
    double phase_messages, phase_bytes, all_reduce_messages, all_reduce_bytes;
  };
  for (const Expected e : {Expected{2, 1, 1572864, 2, 3145728}, Expected{3, 2, 2097152, 4, 4194304},
                           Expected{4, 3, 2359296, 6, 4718592}, Expected{8, 7, 2752512, 14, 5505024}}) {
    require_cost(Collective::ReduceScatter, Algorithm::Ring, n, e.p, e.phase_messages, e.phase_bytes);
    require_cost(Collective::AllGather, Algorithm::Ring, n, e.p, e.phase_messages, e.phase_bytes);
    require_cost(Collective::AllReduce, Algorithm::Ring, n, e.p, e.all_reduce_messages, e.all_reduce_bytes);
  }
}

TEST_CASE("ex10.2 recursive doubling, Rabenseifner and the binomial tree at p = 2, 4, 5 and 8", "[ex10.2]") {
  const int64_t n = 1 << 20;
  require_cost(Collective::AllReduce, Algorithm::RecursiveDoubling, n, 8, 3, 3.0 * n);
  require_cost(Collective::AllReduce, Algorithm::RecursiveDoubling, n, 2, 1, 1.0 * n);
  require_cost(Collective::AllReduce, Algorithm::Rabenseifner, n, 8, 6, 2.0 * 7 / 8 * n);
  require_cost(Collective::AllReduce, Algorithm::Rabenseifner, n, 4, 4, 2.0 * 3 / 4 * n);
  require_cost(Collective::Broadcast, Algorithm::BinomialTree, n, 8, 3, 3.0 * n);
  require_cost(Collective::Broadcast, Algorithm::BinomialTree, n, 5, 3, 3.0 * n);  // p not a power of two
  require_cost(Collective::AllReduce, Algorithm::Ring, n, 1, 0, 0);
}

TEST_CASE("ex10.2 seconds: α per step, β per byte", "[ex10.2]") {
  const ch10::Link link{10e-6, 1e-9};
  const ch10::Cost ring = ch10::collective_cost(Collective::AllReduce, Algorithm::Ring, 8 << 20, 4);
  REQUIRE(ring.seconds(link) == Approx(6 * 10e-6 + 1.5 * (8 << 20) * 1e-9).epsilon(1e-12));
}

TEST_CASE("ex10.2 the crossovers at p = 8 are the algebra's", "[ex10.2]") {
  // Each cost is a + b·n: the crossover is where two of them meet.
  const ch10::Link link{10e-6, 1e-9};
  const double ratio = link.alpha_s / link.beta_s_per_byte;
  const auto doubling_ring =
      ch10::crossover_bytes(Collective::AllReduce, Algorithm::RecursiveDoubling, Algorithm::Ring, 8, link);
  REQUIRE(doubling_ring.has_value());
  REQUIRE(*doubling_ring == Approx(11.0 / 1.25 * ratio).epsilon(1e-9));
  const auto doubling_rabenseifner =
      ch10::crossover_bytes(Collective::AllReduce, Algorithm::RecursiveDoubling, Algorithm::Rabenseifner, 8, link);
  REQUIRE(doubling_rabenseifner.has_value());
  REQUIRE(*doubling_rabenseifner == Approx(3.0 / 1.25 * ratio).epsilon(1e-9));
  INFO("Rabenseifner moves the ring's bytes in fewer steps: it never loses to the ring in this model");
  REQUIRE_FALSE(ch10::crossover_bytes(Collective::AllReduce, Algorithm::Ring, Algorithm::Rabenseifner, 8, link));
  // Below the crossover recursive doubling wins, above it the ring.
  const auto cost = [&](Algorithm a, double n) {
    return ch10::collective_cost(Collective::AllReduce, a, static_cast<int64_t>(n), 8).seconds(link);
  };
  REQUIRE(cost(Algorithm::RecursiveDoubling, *doubling_ring / 2) < cost(Algorithm::Ring, *doubling_ring / 2));
  REQUIRE(cost(Algorithm::RecursiveDoubling, *doubling_ring * 2) > cost(Algorithm::Ring, *doubling_ring * 2));
}

TEST_CASE("ex10.2 what has no closed form here is refused by name", "[ex10.2]") {
  require_cost(Collective::AllReduce, Algorithm::Ring, 600, 6, 10, 1000);
  REQUIRE_THROWS_AS(ch10::collective_cost(Collective::AllReduce, Algorithm::RecursiveDoubling, 1024, 6),
                    workbook::UserError);
  REQUIRE_THROWS_AS(ch10::collective_cost(Collective::Broadcast, Algorithm::Ring, 1024, 4), workbook::UserError);
  REQUIRE_THROWS_AS(ch10::collective_cost(Collective::AllReduce, Algorithm::BinomialTree, 1024, 4),
                    workbook::UserError);
}
