// Tests for ex8.6: the split of blocks into stages, against every split there
// is (a handful of blocks has few), and the inputs it must refuse.
#include "catch2_compat.hpp"

#include <functional>
#include <random>
#include <sstream>
#include <tuple>

#include "stage_split.hpp"
#include "workbook/errors.hpp"

namespace {

std::string shown(const std::vector<double>& values) {
  std::ostringstream out;
  for (double v : values) out << v << " ";
  return out.str();
}
std::string shown(const std::vector<int>& values) {
  std::ostringstream out;
  for (int v : values) out << v << " ";
  return out.str();
}

// The least costliest-stage cost over every split, tried one by one.
double best_by_trying_all(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> firsts = {0};
  std::function<void(int)> extend = [&](int next) {
    if (static_cast<int>(firsts.size()) == stages) {
      best = std::min(best, ch08::costliest_stage(costs, firsts));
      return;
    }
    for (int first = next; first < n; ++first) {
      firsts.push_back(first);
      extend(first + 1);
      firsts.pop_back();
    }
  };
  extend(1);
  return best;
}

// What is wrong with `firsts` as a split of n blocks into `stages`, or "".
std::string split_problem(const std::vector<int>& firsts, int n, int stages) {
  if (static_cast<int>(firsts.size()) != stages) return "it has " + std::to_string(firsts.size()) + " stages";
  if (firsts.empty() || firsts[0] != 0) return "the first stage does not start at block 0";
  for (size_t s = 1; s < firsts.size(); ++s)
    if (firsts[s] <= firsts[s - 1]) return "a stage has no block, or the stages are out of order";
  if (firsts.back() >= n) return "the last stage starts past the last block";
  return "";
}

}  // namespace

TEST_CASE("ex8.6 balanced_split is as good as the best of every split", "[ex8.6]") {
  std::mt19937 random(8);
  std::uniform_int_distribution<int> small(0, 9);
  std::uniform_real_distribution<double> real(0.0, 5.0);
  std::vector<std::vector<double>> cases = {
      {3, 1, 4, 1, 5, 9, 2, 6}, {1, 1, 1, 1, 1, 1}, {10, 1, 1, 1, 1}, {1, 1, 1, 1, 10}, {1, 2, 3, 4, 5, 6, 7, 8, 9},
      {0, 0, 0, 5}, {7}, {2, 2}, {5, 1, 1, 1, 1, 1, 1, 5}, {1, 8, 1, 1, 1, 1, 1, 1, 8, 1}};
  for (int i = 0; i < 40; ++i) {
    std::vector<double> costs(static_cast<size_t>(2 + i % 9));
    for (double& c : costs) c = i % 2 ? small(random) : real(random);
    cases.push_back(costs);
  }
  for (const std::vector<double>& costs : cases) {
    const int n = static_cast<int>(costs.size());
    for (int stages = 1; stages <= n; ++stages) {
      const std::vector<int> firsts = ch08::balanced_split(costs, stages);
      INFO("block costs " << shown(costs) << "in " << stages << " stages: the stages start at blocks "
                          << shown(firsts));
      const std::string problem = split_problem(firsts, n, stages);
      INFO("not a split into " << stages << " stages of consecutive blocks: " << problem);
      REQUIRE(problem.empty());
      const double got = ch08::costliest_stage(costs, firsts), best = best_by_trying_all(costs, stages);
      INFO("its costliest stage costs " << got << "; the best split's costs " << best);
      REQUIRE(got <= best + 1e-9);
    }
  }
}

TEST_CASE("ex8.6 balanced_split cuts hundreds of blocks, too many to try every split", "[ex8.6]") {
  // Splits whose best is known without trying them all: 200 equal blocks in
  // 10 stages (20 blocks each at best), and a costly block in the middle that
  // the others must make room for (the best bottleneck is that block's 70).
  std::vector<double> ones(200, 1.0), costly(120, 1.0);
  costly.push_back(70.0);
  costly.insert(costly.end(), 79, 1.0);
  for (const auto& [costs, stages, best] :
       {std::tuple{ones, 10, 20.0}, std::tuple{ones, 7, 29.0}, std::tuple{costly, 5, 70.0}}) {
    const std::vector<int> firsts = ch08::balanced_split(costs, stages);
    const std::string problem = split_problem(firsts, static_cast<int>(costs.size()), stages);
    INFO(costs.size() << " blocks in " << stages << " stages: " << (problem.empty() ? "" : "not a split: " + problem));
    REQUIRE(problem.empty());
    INFO("the costliest stage costs " << ch08::costliest_stage(costs, firsts) << "; the best split's " << best);
    REQUIRE(ch08::costliest_stage(costs, firsts) <= best + 1e-9);
  }
}

TEST_CASE("ex8.6 balanced_split refuses what it cannot split", "[ex8.6]") {
  const std::vector<double> costs = {1, 2, 3};
  INFO("more stages than blocks, no stage, a negative, infinite or not-a-number cost, or no block at all");
  CHECK_THROWS_AS(ch08::balanced_split(costs, 4), workbook::UserError);
  CHECK_THROWS_AS(ch08::balanced_split(costs, 0), workbook::UserError);
  CHECK_THROWS_AS(ch08::balanced_split({1, -2, 3}, 2), workbook::UserError);
  CHECK_THROWS_AS(ch08::balanced_split({1, std::nan(""), 3}, 2), workbook::UserError);
  CHECK_THROWS_AS(ch08::balanced_split({1, std::numeric_limits<double>::infinity(), 3}, 2), workbook::UserError);
  CHECK_THROWS_AS(ch08::balanced_split({}, 1), workbook::UserError);
}
