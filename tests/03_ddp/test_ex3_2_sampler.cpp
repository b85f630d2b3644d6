// Tests for ex3.2: the DistributedSampler against PyTorch's definition,
// written here independently: permutation, padding or dropping, striding.
#include "catch2_compat.hpp"

#include <set>

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

// PyTorch's DistributedSampler.__iter__, step by step, as a plain list.
std::vector<int64_t> pytorch_indices(int64_t n, int replicas, int rank, bool shuffle, uint64_t seed, int64_t epoch,
                                     bool drop_last) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (shuffle) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<uint64_t>(epoch));
    torch::Tensor perm = torch::randperm(n, generator, torch::kInt64);
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = perm[i].item<int64_t>();
  } else {
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  }
  int64_t num_samples = 0;
  if (drop_last && n % replicas != 0) num_samples = (n - replicas + replicas - 1) / replicas;  // ceil((n-R)/R)
  else num_samples = (n + replicas - 1) / replicas;
  const int64_t total = num_samples * replicas;
  std::vector<int64_t> padded = order;
  if (!drop_last) {
    while (static_cast<int64_t>(padded.size()) < total) {
      const int64_t missing = total - static_cast<int64_t>(padded.size());
      for (int64_t i = 0; i < std::min<int64_t>(missing, n); ++i) padded.push_back(order[static_cast<size_t>(i)]);
    }
  }
  padded.resize(static_cast<size_t>(total));
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < total; i += replicas) mine.push_back(padded[static_cast<size_t>(i)]);
  return mine;
}

std::vector<int64_t> as_vector(const torch::Tensor& t) {
  REQUIRE(t.dim() == 1);
  REQUIRE(t.scalar_type() == torch::kInt64);
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.size(0); ++i) v.push_back(t[i].item<int64_t>());
  return v;
}

}  // namespace

TEST_CASE("ex3.2 the sampler matches PyTorch's definition", "[ex3.2]") {
  for (int64_t n : {0, 1, 5, 10, 11, 100, 101})
    for (int replicas : {1, 2, 3, 4, 7})
      for (bool drop_last : {false, true})
        for (bool shuffle : {true, false}) {
          for (int rank = 0; rank < replicas; ++rank) {
            CAPTURE(n, replicas, rank, drop_last, shuffle);
            ch03::DistributedSampler sampler(n, replicas, rank, shuffle, /*seed=*/42, drop_last);
            sampler.set_epoch(3);
            const std::vector<int64_t> expected = pytorch_indices(n, replicas, rank, shuffle, 42, 3, drop_last);
            REQUIRE(sampler.num_samples() == static_cast<int64_t>(expected.size()));
            REQUIRE(sampler.total_size() == sampler.num_samples() * replicas);
            REQUIRE(as_vector(sampler.indices()) == expected);
          }
        }
}

TEST_CASE("ex3.2 shards are disjoint and cover the data; padding repeats from the start", "[ex3.2]") {
  SECTION("divisible: every sample exactly once") {
    std::multiset<int64_t> seen;
    for (int rank = 0; rank < 4; ++rank)
      for (int64_t i : as_vector(ch03::DistributedSampler(100, 4, rank, true, 7).indices())) seen.insert(i);
    REQUIRE(seen.size() == 100);
    for (int64_t i = 0; i < 100; ++i) REQUIRE(seen.count(i) == 1);
  }
  SECTION("not divisible, padded: 10 samples on 4 ranks, 12 slots, the first two of the order again") {
    std::vector<int64_t> slots(12);
    for (int rank = 0; rank < 4; ++rank) {
      const auto mine = as_vector(ch03::DistributedSampler(10, 4, rank, /*shuffle=*/false).indices());
      REQUIRE(mine.size() == 3);
      for (size_t k = 0; k < mine.size(); ++k) slots[static_cast<size_t>(rank) + 4 * k] = mine[k];
    }
    REQUIRE(slots == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1});
  }
  SECTION("not divisible, drop_last: the tail is dropped, nothing repeats") {
    std::set<int64_t> seen;
    for (int rank = 0; rank < 4; ++rank) {
      const auto mine = as_vector(ch03::DistributedSampler(10, 4, rank, true, 1, /*drop_last=*/true).indices());
      REQUIRE(mine.size() == 2);
      for (int64_t i : mine) REQUIRE(seen.insert(i).second);
    }
    REQUIRE(seen.size() == 8);
  }
}

TEST_CASE("ex3.2 set_epoch changes the order; the same epoch gives the same order", "[ex3.2]") {
  ch03::DistributedSampler a(1000, 2, 0, true, 5), b(1000, 2, 0, true, 5);
  a.set_epoch(1);
  b.set_epoch(1);
  REQUIRE(torch::equal(a.indices(), b.indices()));
  REQUIRE(torch::equal(a.indices(), a.indices()));
  b.set_epoch(2);
  REQUIRE_FALSE(torch::equal(a.indices(), b.indices()));
  ch03::DistributedSampler other_seed(1000, 2, 0, true, 6);
  other_seed.set_epoch(1);
  REQUIRE_FALSE(torch::equal(a.indices(), other_seed.indices()));
}

TEST_CASE("ex3.2 every rank draws the same permutation without communicating", "[ex3.2][np3]") {
  auto comm = mpi_test::communicator();
  const int64_t n = 1001;  // not divisible by 2 or 3
  ch03::DistributedSampler sampler(n, comm->size(), comm->rank(), true, 11);
  sampler.set_epoch(4);
  const torch::Tensor all = comm->all_gather(sampler.indices());  // [ranks, num_samples]
  // Interleave the shards back into the padded order: positions r, r + R, ...
  const torch::Tensor order = all.t().reshape({-1});
  auto generator = at::make_generator<at::CPUGeneratorImpl>(11 + 4);
  const torch::Tensor perm = torch::randperm(n, generator, torch::kInt64);
  REQUIRE(torch::equal(order.narrow(0, 0, n), perm));
  REQUIRE(torch::equal(order.narrow(0, n, order.size(0) - n), perm.narrow(0, 0, order.size(0) - n)));
}

TEST_CASE("ex3.2 the sampler gives what PyTorch's own DistributedSampler gives", "[ex3.2]") {
  // Printed by PyTorch 1.13 (python3-torch): list(DistributedSampler(range(11), num_replicas=4, rank=...,
  // shuffle=True, seed=42[, drop_last=True])) after set_epoch(3). Its permutation is
  // torch.randperm(11, generator=torch.Generator().manual_seed(45)) = [7, 0, 9, 1, 6, 4, 8, 5, 10, 2, 3].
  ch03::DistributedSampler padded(11, 4, 2, /*shuffle=*/true, /*seed=*/42);
  padded.set_epoch(3);
  REQUIRE(as_vector(padded.indices()) == std::vector<int64_t>{9, 8, 3});
  ch03::DistributedSampler dropped(11, 4, 1, true, 42, /*drop_last=*/true);
  dropped.set_epoch(3);
  REQUIRE(as_vector(dropped.indices()) == std::vector<int64_t>{0, 4});
}
