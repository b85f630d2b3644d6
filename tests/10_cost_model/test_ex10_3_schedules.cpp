// Tests for ex10.3: four collectives as programs of messages. Each must
// leave the right values on every rank for any count, rank count and root,
// and take, on the simulator, the time its algorithm takes (recorded from
// the reference at a unit α with no β, and a unit β with no α).
#include "catch2_compat.hpp"

#include <functional>

#include "schedules.hpp"
#include "simulator.hpp"
#include "workbook/errors.hpp"

namespace {

const ch10::Link kSteps{1.0, 0.0};  // the simulated time counts messages one after another
const ch10::Link kBytes{0.0, 1.0};  // ... counts bytes one after another

// Rank r's input: small integers, so every order of summation gives the same bits.
torch::Tensor rank_values(int rank, int64_t count, torch::ScalarType dtype) {
  return (torch::arange(count, dtype).remainder(13) + 1) * static_cast<double>(rank + 1);
}

using AllReduce = std::function<void(torch::Tensor&, workbook::Communicator&)>;
using Broadcast = std::function<void(torch::Tensor&, int, workbook::Communicator&)>;

// Runs an all-reduce on p simulated ranks and checks every rank's sums.
ch10::SimulatedRun run_all_reduce(const AllReduce& all_reduce, int p, int64_t count, const ch10::Link& link,
                                  torch::ScalarType dtype = torch::kFloat32) {
  std::vector<torch::Tensor> results(p);
  const ch10::SimulatedRun run = ch10::simulate(p, link, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = rank_values(comm.rank(), count, dtype);
    all_reduce(buffer, comm);
    results[comm.rank()] = buffer;
  });
  const torch::Tensor expected = rank_values(0, count, dtype) * static_cast<double>(p * (p + 1) / 2);
  for (int r = 0; r < p; ++r) {
    INFO("all-reduce on " << p << " ranks, " << count << " elements: rank " << r
                          << " does not hold the sum over the ranks");
    REQUIRE(results[r].numel() == count);
    REQUIRE(torch::equal(results[r], expected));
  }
  return run;
}

// Runs a broadcast from `root` on p simulated ranks (every other rank starts
// with a buffer of -1's) and checks that every rank holds the root's values.
ch10::SimulatedRun run_broadcast(const Broadcast& broadcast, int p, int root, int64_t count, const ch10::Link& link,
                                 torch::ScalarType dtype = torch::kFloat32) {
  std::vector<torch::Tensor> results(p);
  const ch10::SimulatedRun run = ch10::simulate(p, link, [&](workbook::Communicator& comm) {
    torch::Tensor buffer = comm.rank() == root ? rank_values(root, count, dtype) : torch::full({count}, -1.0, dtype);
    broadcast(buffer, root, comm);
    results[comm.rank()] = buffer;
  });
  for (int r = 0; r < p; ++r) {
    INFO("broadcast from root " << root << " on " << p << " ranks, " << count << " elements: rank " << r
                                << " does not hold the root's values");
    REQUIRE(torch::equal(results[r], rank_values(root, count, dtype)));
  }
  return run;
}

const AllReduce kDoubling = ch10::recursive_doubling_all_reduce;
const AllReduce kRabenseifner = ch10::rabenseifner_all_reduce;
const Broadcast kTree = ch10::binomial_tree_broadcast;
const Broadcast kScatterAllGather = ch10::scatter_all_gather_broadcast;

}  // namespace

TEST_CASE("ex10.3 the all-reduces leave the sum on every rank, for any count", "[ex10.3]") {
  for (const auto& [name, all_reduce] : {std::pair{"recursive doubling", kDoubling},
                                         std::pair{"Rabenseifner", kRabenseifner}}) {
    for (int p : {1, 2, 4, 8, 16})
      for (int64_t count : {int64_t{0}, int64_t{3}, int64_t{37}, int64_t{1000}}) {
        CAPTURE(name, p, count);
        run_all_reduce(all_reduce, p, count, kSteps);
      }
    CAPTURE(name);
    run_all_reduce(all_reduce, 4, 101, kSteps, torch::kFloat64);
  }
}

TEST_CASE("ex10.3 the broadcasts leave the root's buffer on every rank, for any count, rank count and root", "[ex10.3]") {
  for (const auto& [name, broadcast] : {std::pair{"binomial tree", kTree},
                                        std::pair{"scatter + all-gather", kScatterAllGather}}) {
    for (int p = 1; p <= 9; ++p)
      for (int root : {0, p / 2, p - 1})
        for (int64_t count : {int64_t{0}, int64_t{3}, int64_t{37}, int64_t{1000}}) {
          CAPTURE(name, p, root, count);
          run_broadcast(broadcast, p, root, count, kSteps);
        }
    CAPTURE(name);
    run_broadcast(broadcast, 6, 4, 101, kSteps, torch::kFloat64);
  }
}

TEST_CASE("ex10.3 recursive doubling and Rabenseifner take their algorithms' time", "[ex10.3]") {
  // 4,096 floats (16,384 bytes). Recorded from the reference solution: {p,
  // steps, bytes} on the critical path. Another schedule that sums correctly
  // (a ring, or a reduce to one rank and a broadcast) takes other times.
  struct Recorded {
    int p;
    double steps, bytes;
  };
  const int64_t count = 4096;
  for (const Recorded e : {Recorded{2, 1, 16384}, Recorded{4, 2, 32768}, Recorded{8, 3, 49152},
                           Recorded{16, 4, 65536}}) {
    CAPTURE(e.p);
    REQUIRE(run_all_reduce(kDoubling, e.p, count, kSteps).seconds() == Approx(e.steps).epsilon(1e-12));
    REQUIRE(run_all_reduce(kDoubling, e.p, count, kBytes).seconds() == Approx(e.bytes).epsilon(1e-12));
  }
  for (const Recorded e : {Recorded{2, 2, 16384}, Recorded{4, 4, 24576}, Recorded{8, 6, 28672},
                           Recorded{16, 8, 30720}}) {
    CAPTURE(e.p);
    REQUIRE(run_all_reduce(kRabenseifner, e.p, count, kSteps).seconds() == Approx(e.steps).epsilon(1e-12));
    REQUIRE(run_all_reduce(kRabenseifner, e.p, count, kBytes).seconds() == Approx(e.bytes).epsilon(1e-12));
  }
}

TEST_CASE("ex10.3 the binomial tree takes its rounds, at any p", "[ex10.3]") {
  // 4,096 floats. Recorded from the reference solution: {p, steps, bytes}.
  struct Recorded {
    int p;
    double steps, bytes;
  };
  for (const Recorded e : {Recorded{2, 1, 16384}, Recorded{3, 2, 32768}, Recorded{5, 3, 49152},
                           Recorded{7, 3, 49152}, Recorded{8, 3, 49152}, Recorded{9, 4, 65536},
                           Recorded{12, 4, 65536}}) {
    for (int root : {0, e.p - 1}) {
      CAPTURE(e.p, root);
      REQUIRE(run_broadcast(kTree, e.p, root, 4096, kSteps).seconds() == Approx(e.steps).epsilon(1e-12));
      REQUIRE(run_broadcast(kTree, e.p, root, 4096, kBytes).seconds() == Approx(e.bytes).epsilon(1e-12));
    }
  }
}

TEST_CASE("ex10.3 scatter + all-gather: within 2n of bytes and 2(p - 1) steps, at any p", "[ex10.3]") {
  const int64_t count = 6720;  // divisible by every p here
  const double n = count * 4.0;
  for (int p = 2; p <= 12; ++p) {
    for (int root : {0, p - 1}) {
      const double steps = run_broadcast(kScatterAllGather, p, root, count, kSteps).seconds();
      const double bytes = run_broadcast(kScatterAllGather, p, root, count, kBytes).seconds();
      CAPTURE(p, root, steps, bytes, n);
      INFO("the contract: no more than 2n bytes and 2(p - 1) messages one after another");
      REQUIRE(bytes <= 2 * n * (1 + 1e-12));
      REQUIRE(steps <= 2 * (p - 1));
    }
  }
}
