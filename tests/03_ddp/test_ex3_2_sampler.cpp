// Tests for ex3.2: the DistributedSampler. Properties every correct sampler
// has (equal counts, coverage, the same split on every rank, shuffling as a
// relabelling of the unshuffled split), for many sizes, plus the exact answers
// for a few small cases: recorded from the reference solution, or printed by
// PyTorch's own DistributedSampler.
#include "catch2_compat.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "ddp.hpp"
#include "mpi_test.hpp"

namespace {

std::vector<int64_t> as_vector(const torch::Tensor& t) {
  REQUIRE(t.dim() == 1);
  REQUIRE(t.scalar_type() == torch::kInt64);
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.size(0); ++i) v.push_back(t[i].item<int64_t>());
  return v;
}

// Every rank's indices for one configuration, rank 0 first.
std::vector<std::vector<int64_t>> every_rank(int64_t n, int replicas, bool shuffle, uint64_t seed, int64_t epoch,
                                             bool drop_last) {
  std::vector<std::vector<int64_t>> shards;
  for (int rank = 0; rank < replicas; ++rank) {
    ch03::DistributedSampler sampler(n, replicas, rank, shuffle, seed, drop_last);
    sampler.set_epoch(epoch);
    shards.push_back(as_vector(sampler.indices()));
  }
  return shards;
}

std::string shown(const std::vector<std::vector<int64_t>>& shards) {
  std::string s;
  for (size_t rank = 0; rank < shards.size(); ++rank) {
    s += rank == 0 ? "" : " | ";
    for (size_t k = 0; k < shards[rank].size(); ++k) s += (k == 0 ? "" : " ") + std::to_string(shards[rank][k]);
  }
  return s;
}

}  // namespace

TEST_CASE("ex3.2 equal counts; together the ranks cover the data, each sample once or evenly repeated", "[ex3.2]") {
  for (int64_t n : {0, 1, 2, 5, 10, 11, 100, 101})
    for (int replicas : {1, 2, 3, 4, 7})
      for (bool drop_last : {false, true})
        for (bool shuffle : {true, false}) {
          CAPTURE(n, replicas, drop_last, shuffle);
          const auto shards = every_rank(n, replicas, shuffle, /*seed=*/42, /*epoch=*/3, drop_last);
          INFO("the ranks' indices: " << shown(shards));
          const int64_t count = static_cast<int64_t>(shards[0].size());
          for (int rank = 0; rank < replicas; ++rank) {
            ch03::DistributedSampler sampler(n, replicas, rank, shuffle, 42, drop_last);
            INFO("rank " << rank << ": num_samples() " << sampler.num_samples() << ", total_size() "
                         << sampler.total_size() << ", rank 0's indices " << count);
            REQUIRE(static_cast<int64_t>(shards[static_cast<size_t>(rank)].size()) == count);
            REQUIRE(sampler.num_samples() == count);
            REQUIRE(sampler.total_size() == count * replicas);
          }
          if (drop_last) {
            INFO("with drop_last fewer than " << replicas << " samples may be left out; " << n - count * replicas
                                              << " were");
            REQUIRE(n - count * replicas < replicas);
          } else {
            INFO("without drop_last fewer than " << replicas << " samples may be repeated; " << count * replicas - n
                                                 << " were");
            REQUIRE(count * replicas - n < replicas);
          }
          std::map<int64_t, int64_t> times;
          for (const auto& shard : shards)
            for (int64_t i : shard) {
              REQUIRE(i >= 0);
              REQUIRE(i < n);
              ++times[i];
            }
          if (drop_last) {
            INFO("with drop_last no sample may appear twice in an epoch");
            for (const auto& [i, k] : times) REQUIRE(k == 1);
          } else {
            INFO("without drop_last every sample appears, and none more than once more often than another");
            REQUIRE(static_cast<int64_t>(times.size()) == n);
            int64_t least = count * replicas, most = 0;
            for (const auto& [i, k] : times) {
              least = std::min(least, k);
              most = std::max(most, k);
            }
            if (n > 0) REQUIRE(most - least <= 1);
          }
        }
}

TEST_CASE("ex3.2 shuffling relabels the unshuffled split: one permutation for every rank's every slot", "[ex3.2]") {
  for (int64_t n : {1, 5, 10, 11, 100, 101})
    for (int replicas : {1, 2, 3, 4, 7})
      for (bool drop_last : {false, true}) {
        CAPTURE(n, replicas, drop_last);
        const auto plain = every_rank(n, replicas, /*shuffle=*/false, 42, 3, drop_last);
        const auto shuffled = every_rank(n, replicas, /*shuffle=*/true, 42, 3, drop_last);
        INFO("unshuffled: " << shown(plain) << "\nshuffled:   " << shown(shuffled)
             << "\n(in every slot of every rank, the shuffled index must be the image of the unshuffled one under one "
                "permutation of the samples, the same for all ranks)");
        std::map<int64_t, int64_t> image;
        std::set<int64_t> used;
        for (size_t rank = 0; rank < plain.size(); ++rank) {
          REQUIRE(plain[rank].size() == shuffled[rank].size());
          for (size_t k = 0; k < plain[rank].size(); ++k) {
            const auto [it, fresh] = image.emplace(plain[rank][k], shuffled[rank][k]);
            REQUIRE(it->second == shuffled[rank][k]);
            if (fresh) REQUIRE(used.insert(shuffled[rank][k]).second);
          }
        }
      }
}

TEST_CASE("ex3.2 the exact split for small cases", "[ex3.2]") {
  // Recorded from the reference solution (shuffle off, so any seed and
  // epoch): rank 0's indices first, ranks apart by " | ". The first case is
  // the header's example with its order 0 1 ... 9.
  SECTION("10 samples, 4 ranks") {
    REQUIRE(shown(every_rank(10, 4, false, 0, 0, false)) == "0 4 8 | 1 5 9 | 2 6 0 | 3 7 1");
    REQUIRE(shown(every_rank(10, 4, false, 0, 0, true)) == "0 4 | 1 5 | 2 6 | 3 7");
  }
  SECTION("7 samples, 3 ranks") {
    REQUIRE(shown(every_rank(7, 3, false, 0, 0, false)) == "0 3 6 | 1 4 0 | 2 5 1");
    REQUIRE(shown(every_rank(7, 3, false, 0, 0, true)) == "0 3 | 1 4 | 2 5");
  }
  SECTION("2 samples, 5 ranks: more ranks than samples") {
    REQUIRE(shown(every_rank(2, 5, false, 0, 0, false)) == "0 | 1 | 0 | 1 | 0");
    REQUIRE(shown(every_rank(2, 5, false, 0, 0, true)) == " |  |  |  | ");
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
  // What each process computed alone must be what this process computes
  // for that rank, and together the processes must cover every sample.
  const auto here = every_rank(n, comm->size(), true, 11, 4, false);
  std::set<int64_t> seen;
  for (int rank = 0; rank < comm->size(); ++rank) {
    CAPTURE(rank);
    INFO("the indices rank " << rank << " computed in its own process differ from the ones this process computes "
         "for rank " << rank << " with the same seed and epoch");
    REQUIRE(as_vector(all[rank].contiguous()) == here[static_cast<size_t>(rank)]);
    for (int64_t i : here[static_cast<size_t>(rank)]) seen.insert(i);
  }
  REQUIRE(static_cast<int64_t>(seen.size()) == n);
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
