// collectives.cpp — ex10.4: the closed forms of the collectives' costs.
#include <cmath>

#include "cost_model.hpp"
#include "workbook/errors.hpp"

namespace ch10 {

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "all_gather";
    case Collective::Broadcast: return "broadcast";
  }
  return "?";
}

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Ring: return "ring";
    case Algorithm::RecursiveDoubling: return "recursive_doubling";
    case Algorithm::Rabenseifner: return "rabenseifner";
    case Algorithm::BinomialTree: return "binomial_tree";
    case Algorithm::ScatterAllGather: return "scatter_all_gather";
  }
  return "?";
}

std::optional<Algorithm> algorithm_named(const std::string& name) {
  for (Algorithm a : {Algorithm::Ring, Algorithm::RecursiveDoubling, Algorithm::Rabenseifner, Algorithm::BinomialTree,
                      Algorithm::ScatterAllGather})
    if (name == algorithm_name(a)) return a;
  return std::nullopt;
}

Cost collective_cost(Collective collective, Algorithm algorithm, int64_t bytes, int ranks) {
  WB_CHECK(ranks >= 1, "collective_cost: {} rank(s)", ranks);
  WB_CHECK(bytes >= 0, "collective_cost: {} bytes", bytes);
  const bool power_of_two = (ranks & (ranks - 1)) == 0;
  WB_CHECK(power_of_two || (algorithm != Algorithm::RecursiveDoubling && algorithm != Algorithm::Rabenseifner),
           "{} by {} needs a power of two ranks, not {}", collective_name(collective), algorithm_name(algorithm), ranks);
  if (ranks == 1) return {};
  Cost cost;
  // BEGIN SOLUTION ex10.4
  const double p = ranks, n = static_cast<double>(bytes);
  const double log2p = std::ceil(std::log2(p));
  const bool ring = algorithm == Algorithm::Ring;
  if (ring && (collective == Collective::ReduceScatter || collective == Collective::AllGather)) {
    // p − 1 steps, each sending one segment of n/p bytes to the right.
    cost = {p - 1, (p - 1) / p * n};
  } else if (ring && collective == Collective::AllReduce) {
    // Reduce-scatter, then all-gather: twice the steps, twice the segments.
    cost = {2 * (p - 1), 2 * (p - 1) / p * n};
  } else if (algorithm == Algorithm::RecursiveDoubling && collective == Collective::AllReduce) {
    // log₂p rounds, each exchanging the whole buffer with the partner 2^k away.
    cost = {log2p, log2p * n};
  } else if (algorithm == Algorithm::Rabenseifner && collective == Collective::AllReduce) {
    // Recursive halving (n/2 + n/4 + ... = (p−1)/p·n in log₂p rounds), then
    // recursive doubling of the results (the same again).
    cost = {2 * log2p, 2 * (p - 1) / p * n};
  } else if (algorithm == Algorithm::BinomialTree && collective == Collective::Broadcast) {
    // ⌈log₂p⌉ rounds; in each, every rank that has the buffer sends all of it.
    cost = {log2p, log2p * n};
  } else if (algorithm == Algorithm::ScatterAllGather && collective == Collective::Broadcast) {
    // The scatter down the tree: ⌈log₂p⌉ messages deep, (p−1)/p·n through
    // the root's link; then the ring's all-gather: p − 1 steps of n/p. The
    // ring cannot finish before the last piece has gone round it.
    cost = {log2p + p - 1, 2 * (p - 1) / p * n};
  } else {
    WB_CHECK(false, "no closed form for {} by {} here", collective_name(collective), algorithm_name(algorithm));
  }
  // END SOLUTION
  return cost;
}

std::optional<double> crossover_bytes(Collective collective, Algorithm first, Algorithm second, int ranks,
                                      const Link& link) {
  // Both costs are a + b·n: a from n = 0, b from any other n (here 1 MiB).
  const int64_t probe = int64_t{1} << 20;
  const double a1 = collective_cost(collective, first, 0, ranks).seconds(link);
  const double a2 = collective_cost(collective, second, 0, ranks).seconds(link);
  const double b1 = (collective_cost(collective, first, probe, ranks).seconds(link) - a1) / probe;
  const double b2 = (collective_cost(collective, second, probe, ranks).seconds(link) - a2) / probe;
  if (b1 == b2) return std::nullopt;
  const double n = (a2 - a1) / (b1 - b2);
  if (!(n > 0)) return std::nullopt;
  return n;
}

}  // namespace ch10
