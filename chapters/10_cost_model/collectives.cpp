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
  WB_NOT_IMPLEMENTED("ex10.4");  // TODO(ex10.4): your code here
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
